"""Session 12 sweep of bench_lang's row kernels (issue 16): new structures for the cases
that land below 1.0x Triton in some runs, and the self-comparison anchor of every case.

For every op, dtype and N of bench_lang's table (M = 4096), one call of
``bench_lang._row_case``: Thork's pick (:data:`bench_lang.LAYOUTS`) and its twin (the same
kernel under another name), Triton's tutorial-style kernel and an identical second copy of
it (its own JIT function and module), a same-bytes copy, and for the cases of
:data:`VARIANTS` the layouts listed there; ``triton.testing.do_bench`` medians (``--rep``
ms, warm-up a quarter of it; 0: do_bench's defaults), 3 interleaved rounds, every side
writing one shared output, the median of the rounds (bench_lang's protocol).

The variants (``bench_lang.RowConfig``, ``stages`` new in session 12): a persistent grid
of exactly the blocks an SM holds (``persist=k`` with ``stages=1``: a grid-stride loop, no
block launched after the first wave); the same grid with the next rows' loads in flight
in a shared-memory ring filled by ``cp.async`` (``stages=2``: one unit ahead, ``3``: two)
so that prefetching costs no registers; a warp per row with several rows a block at small
N. ``k`` is each kernel's occupancy by its ``ptxas`` register count (sm_90, checked
offline: no spills). Session 13 adds every pick with ``fast=True`` (``tk.fast`` math).

    python bench/diag_rows.py --out DIR [--jobs 16] [--rep 50] [--only softmax/float16/2048]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_lang as bl  # noqa: E402
import thork as tk  # noqa: E402
from diag_lang import build_job  # noqa: E402

RC = bl.RowConfig
_CS = "cs"

#: The layouts timed beside each pick (bench_lang.LAYOUTS) where the pick fell below 1.0x
#: in some run (docs/benchmarks.md, session 11). Persist counts = blocks an SM holds at the
#: pick's registers (31-32 registers: 2048 threads an SM; 47-48: 5 blocks of 256), fewer
#: where the cap of ``launch_bounds(block, persist)`` would make ptxas spill.
VARIANTS: dict[tuple[str, str, int], list[Any]] = {
    ("softmax", "float16", 2048): [
        RC(128, onepass=False, cache=_CS, persist=16, stages=1),
        RC(128, onepass=False, cache=_CS, persist=12, stages=2),
        RC(128, onepass=False, cache=_CS, persist=16, stages=3),
        RC(128, onepass=False, cache=_CS, persist=8, stages=4),
        RC(64, rows=2, onepass=False, cache=_CS),
        RC(32, rows=4, onepass=False, cache=_CS)],
    ("softmax", "float16", 4096): [
        RC(128, rows=2, onepass=False, cache=None, persist=5, stages=1),
        RC(128, rows=2, onepass=False, cache=None, persist=5, stages=2),
        RC(256, onepass=False, cache=None, persist=6, stages=2),
        RC(256, onepass=False, cache=None, persist=8, stages=3),
        RC(256, onepass=False, cache=None),
        # session 14: Triton's shape (a row a 256-thread block, 8 blocks an SM, 4096
        # blocks: 3.9 waves of 1056) with a 32-register cap (ptxas: 32, no spills, 1832
        # warp instructions a row; Triton 2320); the pick runs 5 blocks an SM, 3.1 waves
        RC(256, onepass=False, cache=None, min_blocks=8)],
    ("softmax", "float16", 8192): [
        RC(256, onepass=False, cache=None, persist=5, stages=1),
        RC(256, onepass=False, cache=None, persist=5, stages=2),
        RC(512, onepass=False, cache=None, persist=3, stages=2),
        RC(512, onepass=False, cache=None)],
    ("softmax", "float32", 2048): [
        RC(128, onepass=False, cache=None, persist=16, stages=1),
        RC(128, onepass=False, cache=None, persist=12, stages=2),
        RC(128, onepass=False, cache=None, persist=8, stages=3)],
    ("softmax", "float32", 8192): [
        RC(512, onepass=False, cache=None, persist=4, stages=1),
        RC(256, onepass=False, cache=None, persist=4, stages=1),
        RC(256, onepass=False, cache=None)],
    ("layer_norm", "float32", 1024): [
        RC(128, cache=_CS, persist=16, stages=1),
        RC(128, cache=_CS, persist=10, stages=2),
        RC(128, cache=_CS, persist=8, stages=3),
        RC(32, rows=4, cache=_CS)],
    # session 13 (bench/sass_rows.py): the picks became two rows a group (batch=2), chosen
    # by counts; timed beside them: the session-12 picks, Triton's shape with a register
    # cap (t128_2p_lb12, one spilled word), and batch=2 at twice the threads
    ("layer_norm", "float32", 2048): [
        RC(256, cache=None, early=True),
        RC(128, onepass=False, cache=None, min_blocks=12),
        RC(256, onepass=False, cache=None, batch=2, min_blocks=8)],
    ("layer_norm", "float16", 1024): [
        RC(128, onepass=False, cache=None),
        RC(128, onepass=False, cache=_CS, batch=2)],
}


# session 13 (h13-fast): every pick beside itself with tk.fast math (RowConfig.fast: the
# exponentials as ex2.approx.ftz, softmax's 1 / sum as rcp.approx.ftz, layer norm's rsqrt
# as rsqrt.approx.ftz); bench/sass_rows.py --fast counts softmax fp32 8192 at 2528 warp
# instructions a row against 3488 (Triton 4656), layer norm within 2 %.
for _key, _pick in bl.LAYOUTS.items():
    VARIANTS.setdefault(_key, []).append(_pick._replace(fast=True))


def variants(op: str, dtype: Any, n: int) -> dict[str, Any]:
    """The extra layouts of one case, by tag (none for the cases not in VARIANTS)."""
    return {c.tag(): c for c in VARIANTS.get((op, dtype.name, n), [])}


def _cases(only: set[str]) -> list[tuple[str, Any, int]]:
    return [(op, dtype, n) for dtype in (tk.dt.float32, tk.dt.float16) for n in bl.NORM_SIZES
            for op in ("softmax", "layer_norm")
            if not only or f"{op}/{dtype.name}/{n}" in only]


def precompile(jobs: int, only: set[str]) -> None:
    """Every kernel the sweep launches, in ``jobs`` forked processes (before this process
    starts CUDA): the timed process finds them in the disk caches."""
    import concurrent.futures as cf
    import multiprocessing as mp
    import time

    work: list[tuple[str, str, int, Any, bool]] = []
    for op, dtype, n in _cases(only):
        pick = (bl.softmax_config if op == "softmax" else bl.layer_norm_config)(dtype, n)
        work += [(op, dtype.name, n, None, False), (op, dtype.name, n, pick, False),
                 (op, dtype.name, n, pick, True)]
        work += [(op, dtype.name, n, c, False) for c in variants(op, dtype, n).values()]
    t0 = time.perf_counter()
    with cf.ProcessPoolExecutor(jobs, mp_context=mp.get_context("fork")) as ex:
        for msg in ex.map(build_job, work, chunksize=1):
            if msg.startswith("triton"):
                print(f"precompile: {msg}", flush=True)
    print(f"precompiled {len(work)} kernels in {time.perf_counter() - t0:.1f} s", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--jobs", type=int, default=0, help="precompile in this many processes")
    ap.add_argument("--rep", type=int, default=50, help="do_bench rep (ms); 0: its default")
    ap.add_argument("--only", default="", help="op/dtype/N,... (default: all 20 cases)")
    opts = ap.parse_args()
    only = {s for s in opts.only.split(",") if s}
    if opts.jobs:
        precompile(opts.jobs, only)

    import torch
    from triton.testing import do_bench

    tri, twins = bl._triton_kernels(), bl._triton_kernels()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    m_rows, eps = 4096, 1e-5
    torch.manual_seed(0)
    rows: list[dict[str, Any]] = []
    data: dict[tuple[str, int], Any] = {}
    for op, dtype, n in _cases(only):
        tdt = getattr(torch, dtype.name)
        if (dtype.name, n) not in data:
            data = {(dtype.name, n): (torch.randn(m_rows, n, device="cuda", dtype=tdt),
                                      torch.rand(n, device="cuda", dtype=tdt) + 0.5,
                                      torch.randn(n, device="cuda", dtype=tdt))}
        x, w, b = data[(dtype.name, n)]
        r = bl._row_case(op, dtype, x, w, b, eps, tri, do_bench, sms, with_torch=False,
                         twins=twins, variants=variants(op, dtype, n), rep=opts.rep)
        rounds = r["rounds_ms"]
        extra = [k for k in rounds if k not in
                 ("thork", "thork_twin", "triton", "triton_twin", "copy")]
        for k in extra:
            per = " ".join(f"{t / v:.3f}" for t, v in zip(rounds["triton"], rounds[k]))
            print(f"    variant {k:<22} x Triton {r['triton_ms'] / r[k + '_ms']:.3f} "
                  f"(rounds {per})  {r[k + '_TBps']:.3f} TB/s ok={r['ok'][k]}", flush=True)
        rows.append(r)
        if opts.out:
            opts.out.mkdir(parents=True, exist_ok=True)
            (opts.out / "diag_rows.json").write_text(json.dumps(rows, indent=1))
    bl.print_row_table(rows)
    print("\nbest layout per case (x Triton, median of 3; pick first):")
    for r in rows:
        tags = ["thork", *[k for k in r["variants"] if k != "thork"]]
        best = min(tags, key=lambda k: r[k + "_ms"])
        tri_r = [r["rounds_ms"]["triton"][i] / r["rounds_ms"][best][i] for i in range(3)]
        print(f"  {r['op']} {r['dtype']} {r['N']}: pick {r['layout']} "
              f"{r['triton_ms'] / r['thork_ms']:.3f}; best "
              f"{best if best != 'thork' else r['layout']} {r['triton_ms'] / r[best + '_ms']:.3f} "
              f"(rounds {' '.join(f'{v:.3f}' for v in tri_r)}, min {min(tri_r):.3f}); "
              f"self triton {r['self_triton']:.3f} thork {r['self_thork']:.3f}")
    spread = [abs(r[k] - 1) for r in rows for k in ("self_triton", "self_thork")]
    if spread:
        print(f"self-comparison |x - 1|: median {statistics.median(spread):.4f}, "
              f"max {max(spread):.4f} over {len(spread)} pairs")
    return 0 if all(r["correct"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
