"""Diagnosis sweep for bench_lang's unmet rows (issue 16): the grid-sync Jacobi solver and
the fp16 softmax / layer-norm row kernels. One process, anchors beside every variant.

* Jacobi 4096² × 20: Thork's kernel (``bench_lang.jacobi``, and with ``unroll=4`` on its
  grid-stride loop) vs cooperative groups, and the
  cooperative-groups solver with Thork's session-4 barrier (``__threadfence`` around a
  relaxed ``atomicAdd``, a volatile spin) to price the barrier alone; then barriers only
  (``iters`` grid syncs, no work) for Thork and cooperative groups.
* Row kernels, M = 4096: for each dtype, op and N, Thork in several layouts
  (:func:`candidates`: threads per row, rows per block, one or two block reductions,
  streaming or plain accesses) against Triton's tutorial-style kernel and a same-bytes
  device copy, ``triton.testing.do_bench(warmup=10, rep=40)`` medians, the median of 3
  interleaved rounds (bench_lang: the default warm-up and repetitions).

    python bench/diag_lang.py --out DIR [--no-rows] [--no-jacobi] [--fp16-only] [--jobs 16]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_lang as bl  # noqa: E402
import numpy as np  # noqa: E402
import thork as tk  # noqa: E402

# The cooperative-groups solver with the grid barrier Thork generated until session 9.
CUDA_OLD_BARRIER = r"""
__device__ unsigned int arrived;
__device__ __forceinline__ void old_grid_sync() {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned int nblocks = gridDim.x;
    const unsigned int add = blockIdx.x == 0 ? 0x80000000u - (nblocks - 1u) : 1u;
    __threadfence();
    const unsigned int old = atomicAdd(&arrived, add);
    while (((old ^ *(volatile unsigned int*)&arrived) & 0x80000000u) == 0u) { }
    __threadfence();
  }
  __syncthreads();
}
""" + bl.JACOBI_CUDA % {"name": "jacobi_oldbar", "setup": "", "sync": "old_grid_sync()"} + r"""
extern "C" __global__ void barriers_oldbar(int iters) {
  for (int it = 0; it < iters; ++it) old_grid_sync();
}
"""

CUDA_CG_BARRIERS = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void barriers(int iters) {
  cg::grid_group grid = cg::this_grid();
  for (int it = 0; it < iters; ++it) grid.sync();
}
"""


@tk.jit
def barriers(iters: tk.dt.int32):
    for _ in tk.range(iters):
        tk.this_grid().sync()


def jacobi_rows(cp: Any, arch: str, sms: int, work: Path) -> list[dict[str, Any]]:
    coop = bl.compile_coop(arch, work)
    old = bl.compile_coop(arch, work, CUDA_OLD_BARRIER, "oldbar")
    cgb = bl.compile_coop(arch, work, CUDA_CG_BARRIERS, "cgbar")
    if coop is None or old is None or cgb is None:
        print("Jacobi rows skipped: nvcc missing or failed")
        return []
    h_cg, h_old, h_bar = bl.Handwritten(coop), bl.Handwritten(old), bl.Handwritten(cgb)
    rng = np.random.default_rng(0)
    jh, jw, iters = 4096, 4096, 20
    grid = (sms * 2, 1, 1)
    u0 = cp.asarray(rng.standard_normal((jh, jw), dtype=np.float32))
    bufs = {k: (u0.copy(), cp.zeros_like(u0)) for k in ("thork", "thork_u4", "cg", "old")}
    tk_j, tk_j4 = bl.jacobi[grid, 256], bl.make_jacobi(4)[grid, 256]
    fns = {
        "thork": lambda: tk_j(*bufs["thork"], iters, target="gpu"),
        "thork_u4": lambda: tk_j4(*bufs["thork_u4"], iters, target="gpu"),
        "cg": h_cg.launcher("jacobi", grid, (256, 1, 1), [*bufs["cg"], jh, jw, iters],
                            cooperative=True),
        "old": h_old.launcher("jacobi_oldbar", grid, (256, 1, 1),
                              [*bufs["old"], jh, jw, iters], cooperative=True),
    }
    for fn in fns.values():
        fn()
    cp.cuda.Device().synchronize()
    ok = all(bool(cp.allclose(bufs[k][0], bufs["cg"][0], rtol=1e-6, atol=1e-6)
                  and cp.allclose(bufs[k][1], bufs["cg"][1], rtol=1e-6, atol=1e-6))
             for k in ("thork", "thork_u4", "old"))
    rounds: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(3):
        for k, fn in fns.items():
            rounds[k].append(bl.time_ms(fn, cp, 3, 9))
    ms = {k: statistics.median(v) for k, v in rounds.items()}
    out = [{"what": f"jacobi {jh}x{jw} x{iters}", "correct": ok,
            **{f"{k}_ms": v for k, v in ms.items()}, "thork/cg": ms["thork"] / ms["cg"],
            "thork_u4/cg": ms["thork_u4"] / ms["cg"],
            "oldbarrier/cg": ms["old"] / ms["cg"]}]
    nb = 1000
    tk_b = barriers[grid, 256]
    bfns = {"thork": lambda: tk_b(nb, target="gpu"),
            "cg": h_bar.launcher("barriers", grid, (256, 1, 1), [nb], cooperative=True),
            "old": h_old.launcher("barriers_oldbar", grid, (256, 1, 1), [nb],
                                  cooperative=True)}
    rounds = {k: [] for k in bfns}
    for _ in range(3):
        for k, fn in bfns.items():
            rounds[k].append(bl.time_ms(fn, cp, 2, 7))
    ms = {k: statistics.median(v) * 1000.0 / nb for k, v in rounds.items()}
    out.append({"what": f"grid barrier alone, {grid[0]} blocks x 256 (us per sync)",
                **{f"{k}_us": v for k, v in ms.items()}, "correct": True})
    return out


def candidates(op: str, dtype: Any, n: int) -> list[Any]:
    """The layouts timed for one op and size: session 9's (``threads`` as then, two
    reductions, plain accesses), then one reduction, streaming (``"cs"``) accesses, both,
    both at half and twice the threads, and a warp per row (4 rows a block) for N <= 1024."""
    t0 = (bl.softmax_threads(n) if op == "softmax"
          else bl.layer_norm_threads(n, dtype.itemsize))
    cands = [bl.RowConfig(t0, onepass=False, cache=None), bl.RowConfig(t0, cache=None),
             bl.RowConfig(t0, onepass=False), bl.RowConfig(t0)]
    vec = 16 // dtype.itemsize
    if t0 >= 64:
        cands.append(bl.RowConfig(t0 // 2))
    if t0 <= 512 and n % (2 * t0 * vec) == 0:
        cands.append(bl.RowConfig(t0 * 2))
    if n <= 1024:
        cands.append(bl.RowConfig(32, rows=4))
    if op == "layer_norm" and n * dtype.itemsize >= 65536 and t0 == 512:
        cands.append(bl.RowConfig(t0, min_blocks=2))
    return cands


def _row_case(op: str, dtype: Any, x: Any, w: Any, b: Any, eps: float, tri: Any,
              do_bench: Any) -> dict[str, Any]:
    """One op at one size: Thork in each layout, Triton, a copy; 3 interleaved rounds."""
    import torch

    m_rows, n = x.shape
    tdt = x.dtype
    nbytes = 2.0 * m_rows * n * x.element_size()
    cfgs = {c.tag(): c for c in candidates(op, dtype, n)}
    if op == "softmax":
        ref = torch.softmax(x.float(), dim=-1).to(tdt)
    else:
        ref = torch.nn.functional.layer_norm(x.float(), (n,), w.float(), b.float(),
                                             eps).to(tdt)
    fns: dict[str, Any] = {}
    ys: dict[str, Any] = {k: torch.empty_like(x) for k in [*cfgs, "triton", "copy"]}
    for tag, c in cfgs.items():
        y = ys[tag]
        if op == "softmax":
            k = bl.make_softmax(dtype, n, c)[m_rows // c.rows, c.block]
            fns[tag] = (lambda k=k, y=y: k(y, x, target="gpu"))
        else:
            k = bl.make_layer_norm(dtype, n, c)[m_rows // c.rows, c.block]
            fns[tag] = (lambda k=k, y=y: k(y, x, w, b, eps, target="gpu"))
    fns["triton"] = ((lambda: tri[0](ys["triton"], x)) if op == "softmax"
                     else (lambda: tri[1](ys["triton"], x, w, b, eps)))
    fns["copy"] = lambda: ys["copy"].copy_(x)
    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    tol = 2e-2 if tdt == torch.float16 else 1e-4
    ok = {k: bool(torch.allclose(y.float(), ref.float(), atol=tol, rtol=tol))
          for k, y in ys.items() if k != "copy"}
    rounds: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(3):
        for k, fn in fns.items():
            rounds[k].append(do_bench(fn, warmup=10, rep=40, return_mode="median"))
    ms = {k: statistics.median(v) for k, v in rounds.items()}
    best = min(cfgs, key=lambda k: ms[k])
    print(f"{op:<10} {dtype.name:<7} N={n:<6} "
          + " ".join(f"{k}={ms['triton'] / ms[k]:.3f}" for k in cfgs)
          + f"  (x Triton)  triton={nbytes / ms['triton'] / 1e9:.3f} "
          f"copy={nbytes / ms['copy'] / 1e9:.3f} TB/s  best {best} "
          f"{nbytes / ms[best] / 1e9:.3f} TB/s = {ms['copy'] / ms[best]:.3f} of copy  "
          f"ok={all(ok.values())}", flush=True)
    return {"op": op, "dtype": dtype.name, "N": n, "ok": ok, "rounds_ms": rounds,
            "best": cfgs[best]._asdict(), "best_tag": best,
            **{f"{k}_ms": v for k, v in ms.items()},
            **{f"{k}_TBps": nbytes / v / 1e9 for k, v in ms.items()}}


def _build(job: tuple[str, str, int, Any]) -> str:
    op, dtname, n, cfg = job
    dtype = getattr(tk.dt, dtname)
    make = bl.make_softmax if op == "softmax" else bl.make_layer_norm
    return make(dtype, n, cfg).precompile("gpu")  # type: ignore[no-any-return]


def precompile_rows(fp16_only: bool, jobs: int) -> None:
    """Build every candidate in ``jobs`` processes (forked before CUDA starts here): the
    timed process then finds them in the disk cache."""
    import concurrent.futures as cf
    import multiprocessing as mp
    import time

    work = [(op, dtype.name, n, c)
            for dtype in ((tk.dt.float16,) if fp16_only else (tk.dt.float16, tk.dt.float32))
            for n in bl.NORM_SIZES for op in ("softmax", "layer_norm")
            for c in candidates(op, dtype, n)]
    t0 = time.perf_counter()
    with cf.ProcessPoolExecutor(jobs, mp_context=mp.get_context("fork")) as ex:
        list(ex.map(_build, work, chunksize=2))
    print(f"precompiled {len(work)} row kernels in {time.perf_counter() - t0:.1f} s "
          f"({jobs} processes)", flush=True)


def row_rows(fp16_only: bool) -> list[dict[str, Any]]:
    import torch
    from triton.testing import do_bench

    tri = bl._triton_kernels()
    m_rows, eps = 4096, 1e-5
    torch.manual_seed(0)
    out: list[dict[str, Any]] = []
    dtypes = [(tk.dt.float16, torch.float16)]
    if not fp16_only:
        dtypes.append((tk.dt.float32, torch.float32))
    for dtype, tdt in dtypes:
        for n in bl.NORM_SIZES:
            x = torch.randn(m_rows, n, device="cuda", dtype=tdt)
            w = torch.rand(n, device="cuda", dtype=tdt) + 0.5
            b = torch.randn(n, device="cuda", dtype=tdt)
            for op in ("softmax", "layer_norm"):
                out.append(_row_case(op, dtype, x, w, b, eps, tri, do_bench))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--no-rows", action="store_true")
    ap.add_argument("--no-jacobi", action="store_true")
    ap.add_argument("--fp16-only", action="store_true")
    ap.add_argument("--jobs", type=int, default=0,
                    help="build the row kernels first in this many processes")
    opts = ap.parse_args()
    if opts.jobs and not opts.no_rows:
        precompile_rows(opts.fp16_only, opts.jobs)
    import cupy as cp

    dev = cp.cuda.Device()
    arch = f"sm_{dev.compute_capability}"
    sms = dev.attributes["MultiProcessorCount"]
    info: dict[str, Any] = {"arch": arch}
    if not opts.no_jacobi:
        with tempfile.TemporaryDirectory() as d:
            info["jacobi"] = jacobi_rows(cp, arch, sms, Path(d))
        for r in info["jacobi"]:
            print(json.dumps(r), flush=True)
    if not opts.no_rows:
        info["rows"] = row_rows(opts.fp16_only)
    if opts.out:
        opts.out.mkdir(parents=True, exist_ok=True)
        (opts.out / "diag_lang.json").write_text(json.dumps(info, indent=2))
        if info.get("rows"):  # the fastest layout of each case, for BENCH_LANG_LAYOUTS
            picks = {f"{r['op']}/{r['dtype']}/{r['N']}": r["best"] for r in info["rows"]}
            (opts.out / "layouts.json").write_text(json.dumps(picks, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
