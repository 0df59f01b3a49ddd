"""Diagnosis sweep for bench_lang's unmet rows (issue 16): the grid-sync Jacobi solver and
the fp16 softmax / layer-norm row kernels. One process, anchors beside every variant.

* Jacobi 4096² × 20: Thork's kernel (``bench_lang.jacobi``, and with ``unroll=4`` on its
  grid-stride loop) vs cooperative groups, and the
  cooperative-groups solver with Thork's session-4 barrier (``__threadfence`` around a
  relaxed ``atomicAdd``, a volatile spin) to price the barrier alone; then barriers only
  (``iters`` grid syncs, no work) for Thork and cooperative groups.
* Row kernels, M = 4096: for each dtype, op and N, Thork in several layouts
  (:func:`candidates`: bench_lang's pick and variants: weight and bias loaded first,
  persistent grids prefetching the next rows, batches and groups of rows) against
  Triton's tutorial-style kernel and a same-bytes device copy,
  ``triton.testing.do_bench(warmup=rep/4, rep)`` medians (``--rep``, default 40 ms), the
  median of 3 interleaved rounds, every side writing one shared output (bench_lang's
  method; bench_lang: the default warm-up and repetitions). ``--only`` times some cases.

    python bench/diag_lang.py --out DIR [--no-rows] [--no-jacobi] [--fp16-only] [--jobs 16]
        [--only softmax/float16/4096,layer_norm/float32/1024] [--rep 40] [--pure]
        [--precompile-bench]

* ``--pure`` (h-soft): where a gap of a softmax pick to Triton comes from (:func:`pure_rows`).
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
    """The layouts timed for one op and size (session 10, h-lang2): h-lang's session-10
    pick (:data:`bench_lang.SWEEP_BASES`, else :data:`bench_lang.LAYOUTS`), the current
    pick (:data:`bench_lang.LAYOUTS`), and variants of the first: a persistent grid of
    ``1024 // block`` blocks an SM (half the threads an SM holds: each holds two rows, the
    current and the prefetched next), for softmax with both reduction forms; for layer
    norm its weight and bias loaded before the reductions (``early``), and persistent with
    them hoisted out of the loop at half the blocks (not where a thread holds >= 64 bytes
    of a row: its registers would spill); for N <= 2048 two rows a group held at once
    (``batch=2``) and, at 1024, row groups of half the threads (two a block); for fp16 at
    N <= 4096 half the threads a row (a warp at 1024), both reduction forms."""
    key = (op, dtype.name, n)
    base = bl.SWEEP_BASES.get(key) or bl.LAYOUTS[key]
    early = op == "layer_norm"
    cands = [base, bl.LAYOUTS[key]]
    p = max(1, 1024 // base.block)
    pers = base._replace(persist=p, min_blocks=0)
    if early:
        heavy = n * dtype.itemsize // base.threads >= 64
        if heavy:  # two rows of >= 64 bytes a thread: registers for half the blocks
            pers = pers._replace(persist=max(1, p // 2))
        cands += [base._replace(early=True), pers]
        if not heavy:  # the hoisted weight and bias: registers for half the blocks
            cands.append(pers._replace(persist=max(1, p // 2), early=True))
    else:
        cands += [pers, pers._replace(onepass=not pers.onepass)]
    if n <= 2048:
        cands.append(base._replace(batch=2, early=early))
    if n == 1024 and base.threads >= 64:
        cands.append(base._replace(threads=base.threads // 2, rows=2, early=early))
    if dtype.itemsize == 2 and n <= 4096 and base.threads >= 64:
        # fp16, the two cases below 1.0x in h-lang2's bench (layer norm 1024, softmax
        # 4096): more of the row a thread (a warp per row at 1024, as softmax's pick)
        t = 32 if n == 1024 else base.threads // 2
        cands += [base._replace(threads=t, rows=max(1, base.threads // t), early=early),
                  base._replace(threads=t, rows=max(1, base.threads // t), early=early,
                                onepass=not base.onepass, cache="cs")]
    if op == "softmax":
        cands += softmax_variants(dtype, n)
    return list(dict.fromkeys(cands))


def softmax_variants(dtype: Any, n: int) -> list[Any]:
    """Softmax layouts added by h-soft (session 10) for the cases still at or below 1.0x
    (fp16 2048 / 4096 / 8192, fp32 2048 / 8192): the generated code matches Triton's
    instruction for instruction (docs/benchmarks.md), so the layouts that change the work
    a thread does around its two reductions: twice the row a thread (half the threads:
    the per-thread reduction cost amortized over twice the elements), two such rows a
    block (the same block size), one reduction or two, plain and streaming."""
    if (dtype.name, n) not in {("float16", 2048), ("float16", 4096), ("float16", 8192),
                               ("float32", 2048), ("float32", 8192)}:
        return []
    rc = bl.RowConfig
    t = bl.softmax_threads(n)  # 16 elements a thread
    out = [rc(t, onepass=False, cache=None), rc(t, cache=None),
           rc(t // 2, onepass=False, cache=None), rc(t // 2, cache=None),
           rc(t // 2, rows=2, onepass=False, cache=None)]
    if n <= 2048:
        out += [rc(t, onepass=False, cache="cs"), rc(t // 2, rows=2, onepass=False, cache="cs")]
    else:
        out.append(rc(min(1024, 2 * t), onepass=False, cache=None))
    return out


def _row_case(op: str, dtype: Any, x: Any, w: Any, b: Any, eps: float, tri: Any,
              do_bench: Any, sms: int, rep: int) -> dict[str, Any]:
    """One op at one size: Thork in each layout, Triton, a copy; 3 interleaved rounds
    (order rotating), every side writing one shared output (bench_lang's method), after a
    check of each into its own poisoned output."""
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
    y = torch.empty_like(x)
    ys: dict[str, Any] = {k: torch.full_like(x, float("nan")) for k in [*cfgs, "triton"]}
    fns: dict[str, Any] = {}
    for tag, c in cfgs.items():
        if op == "softmax":
            k = bl.make_softmax(dtype, n, c)[c.grid(m_rows, sms), c.block]
            k(ys[tag], x, m_rows, target="gpu")
            fns[tag] = (lambda k=k: k(y, x, m_rows, target="gpu"))
        else:
            k = bl.make_layer_norm(dtype, n, c)[c.grid(m_rows, sms), c.block]
            k(ys[tag], x, w, b, eps, m_rows, target="gpu")
            fns[tag] = (lambda k=k: k(y, x, w, b, eps, m_rows, target="gpu"))
    if op == "softmax":
        tri[0](ys["triton"], x)
        fns["triton"] = lambda: tri[0](y, x)
    else:
        tri[1](ys["triton"], x, w, b, eps)
        fns["triton"] = lambda: tri[1](y, x, w, b, eps)
    fns["copy"] = lambda: y.copy_(x)
    torch.cuda.synchronize()
    tol = 2e-2 if tdt == torch.float16 else 1e-4
    ok = {k: bool(torch.allclose(v.float(), ref.float(), atol=tol, rtol=tol))
          for k, v in ys.items()}
    rounds: dict[str, list[float]] = {k: [] for k in fns}
    keys = list(fns)
    for i in range(3):
        for k in keys[i % len(keys):] + keys[:i % len(keys)]:
            rounds[k].append(do_bench(fns[k], warmup=max(1, rep // 4), rep=rep,
                                      return_mode="median"))
    ms = {k: statistics.median(v) for k, v in rounds.items()}
    best = min(cfgs, key=lambda k: ms[k])
    per_round = " ".join(f"{rounds['triton'][i] / rounds[best][i]:.3f}" for i in range(3))
    print(f"{op:<10} {dtype.name:<7} N={n:<6} "
          + " ".join(f"{k}={ms['triton'] / ms[k]:.3f}" for k in cfgs)
          + f"  (x Triton)  triton={nbytes / ms['triton'] / 1e9:.3f} "
          f"copy={nbytes / ms['copy'] / 1e9:.3f} TB/s  best {best} "
          f"{nbytes / ms[best] / 1e9:.3f} TB/s = {ms['copy'] / ms[best]:.3f} of copy, "
          f"rounds {per_round}  ok={all(ok.values())}", flush=True)
    return {"op": op, "dtype": dtype.name, "N": n, "ok": ok, "rounds_ms": rounds,
            "best": cfgs[best]._asdict(), "best_tag": best,
            **{f"{k}_ms": v for k, v in ms.items()},
            **{f"{k}_TBps": nbytes / v / 1e9 for k, v in ms.items()}}


def build_job(job: tuple[Any, ...]) -> str:
    """Precompile one row kernel: ``(op, dtype name, n, config[, twin])``; config None is
    Triton's kernel (compiled by a launch on 4 rows). An error message, or ""."""
    op, dtname, n, cfg = job[:4]
    twin = len(job) > 4 and bool(job[4])
    if cfg is None:  # Triton's kernel: compiled by a first launch on a few rows
        try:
            import torch

            tri = bl._triton_kernels()
            tdt = getattr(torch, dtname)
            x = torch.randn(4, n, device="cuda", dtype=tdt)
            if op == "softmax":
                tri[0](torch.empty_like(x), x)
            else:
                tri[1](torch.empty_like(x), x, x[0], x[0], 1e-5)
            torch.cuda.synchronize()
        except Exception as exc:  # the timed process compiles it then
            return f"triton {op} {n}: {exc}"
        return ""
    dtype = getattr(tk.dt, dtname)
    make = bl.make_softmax if op == "softmax" else bl.make_layer_norm
    return make(dtype, n, cfg, twin=twin).precompile("gpu")  # type: ignore[no-any-return]


def _wanted(only: set[str] | None, op: str, dtype: Any, n: int) -> bool:
    return not only or f"{op}/{dtype.name}/{n}" in only


def precompile_rows(fp16_only: bool, jobs: int, only: set[str] | None = None) -> None:
    """Build every candidate, and Triton's kernels, in ``jobs`` processes (forked before
    CUDA starts here): the timed processes then find them in the disk caches."""
    import concurrent.futures as cf
    import multiprocessing as mp
    import time

    work = [(op, dtype.name, n, c)
            for dtype in ((tk.dt.float16,) if fp16_only else (tk.dt.float16, tk.dt.float32))
            for n in bl.NORM_SIZES for op in ("softmax", "layer_norm")
            if _wanted(only, op, dtype, n)
            for c in [None, *candidates(op, dtype, n)]]
    t0 = time.perf_counter()
    with cf.ProcessPoolExecutor(jobs, mp_context=mp.get_context("fork")) as ex:
        for msg in ex.map(build_job, work, chunksize=1):
            if msg.startswith("triton"):
                print(f"precompile: {msg}", flush=True)
    print(f"precompiled {len(work)} row kernels in {time.perf_counter() - t0:.1f} s "
          f"({jobs} processes)", flush=True)


def row_rows(fp16_only: bool, only: set[str] | None = None, rep: int = 40
             ) -> list[dict[str, Any]]:
    import torch
    from triton.testing import do_bench

    tri = bl._triton_kernels()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
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
                if _wanted(only, op, dtype, n):
                    out.append(_row_case(op, dtype, x, w, b, eps, tri, do_bench, sms, rep))
    return out


def pure_rows(only: set[str] | None) -> list[dict[str, Any]]:
    """Where a gap between Thork's pick (:data:`bench_lang.LAYOUTS`) and Triton comes from
    (h-soft, session 10), for each ``--only`` softmax case: (1) ``do_bench`` as bench_lang
    times it (L2 flushed before each call); (2) the same with each side's launch captured
    once in a CUDA graph and replayed (no host launch path in the timed region for either
    side); (3) 200 calls back to back between two events, no flush (GPU throughput alone);
    (4) the host's enqueue time a call (perf_counter over 200 calls). The median of 3
    interleaved rounds each."""
    import time

    import torch
    from triton.testing import do_bench

    tri = bl._triton_kernels()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    m_rows = 4096
    out: list[dict[str, Any]] = []
    for key in sorted(only or ()):
        op, dtname, n_s = key.split("/")
        if op != "softmax":
            continue
        n = int(n_s)
        dtype = getattr(tk.dt, dtname)
        tdt = getattr(torch, dtname)
        torch.manual_seed(1)
        x = torch.randn(m_rows, n, device="cuda", dtype=tdt)
        y = torch.empty_like(x)
        cfg = bl.softmax_config(dtype, n)
        k = bl.make_softmax(dtype, n, cfg)[cfg.grid(m_rows, sms), cfg.block]
        fns: dict[str, Any] = {
            "thork": lambda k=k, x=x, y=y: k(y, x, m_rows, target="gpu"),
            "triton": lambda x=x, y=y: tri[0](y, x),
            "copy": lambda x=x, y=y: y.copy_(x)}
        for fn in fns.values():
            fn()
        torch.cuda.synchronize()
        graphs: dict[str, Any] = {}
        for name, fn in fns.items():
            try:
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    fn()
                graphs[name] = g
            except Exception as exc:  # noqa: BLE001 - reported, the rest still runs
                print(f"  graph capture of {name} failed: {exc}", flush=True)
        torch.cuda.synchronize()
        res: dict[str, dict[str, list[float]]] = {
            name: {"flushed": [], "graph": [], "b2b": [], "enqueue": []} for name in fns}
        names = list(fns)
        for i in range(3):
            for name in names[i % 3:] + names[:i % 3]:
                fn, r = fns[name], res[name]
                r["flushed"].append(do_bench(fn, warmup=5, rep=20, return_mode="median") * 1e3)
                if name in graphs:
                    r["graph"].append(do_bench(graphs[name].replay, warmup=5, rep=20,
                                               return_mode="median") * 1e3)
                torch.cuda.synchronize()
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
                    enable_timing=True)
                e0.record()
                t0 = time.perf_counter()
                for _ in range(200):
                    fn()
                t1 = time.perf_counter()
                e1.record()
                torch.cuda.synchronize()
                r["b2b"].append(e0.elapsed_time(e1) * 1e3 / 200)
                r["enqueue"].append((t1 - t0) * 1e6 / 200)
        med = {name: {m: statistics.median(v) for m, v in r.items() if v}
               for name, r in res.items()}
        print(f"pure {key} {cfg.tag()}: " + "; ".join(
            f"{name} " + " ".join(f"{m} {v:.2f}" for m, v in d.items())
            for name, d in med.items()) + " (us)", flush=True)
        out.append({"case": key, "layout": cfg.tag(), "rounds_us": res, "median_us": med})
    return out


def precompile_bench(jobs: int) -> None:
    """Build every kernel bench_lang's rows time (its :data:`bench_lang.LAYOUTS` picks and
    Triton's kernels) in ``jobs`` processes, so that a bench_lang run after this one finds
    them in the disk caches."""
    import concurrent.futures as cf
    import multiprocessing as mp
    import time

    work: list[tuple[str, str, int, Any]] = []
    for dtype in (tk.dt.float16, tk.dt.float32):
        for n in bl.NORM_SIZES:
            work += [("softmax", dtype.name, n, None), ("layer_norm", dtype.name, n, None),
                     ("softmax", dtype.name, n, bl.softmax_config(dtype, n)),
                     ("layer_norm", dtype.name, n, bl.layer_norm_config(dtype, n))]
    t0 = time.perf_counter()
    with cf.ProcessPoolExecutor(jobs, mp_context=mp.get_context("fork")) as ex:
        for msg in ex.map(build_job, work, chunksize=1):
            if msg.startswith("triton"):
                print(f"precompile: {msg}", flush=True)
    print(f"precompiled bench_lang's {len(work)} row kernels in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--no-rows", action="store_true")
    ap.add_argument("--no-jacobi", action="store_true")
    ap.add_argument("--fp16-only", action="store_true")
    ap.add_argument("--jobs", type=int, default=0,
                    help="build the row kernels first in this many processes")
    ap.add_argument("--only", default="",
                    help="row cases to time, comma-separated op/dtype/N "
                    "(e.g. softmax/float16/4096); default all")
    ap.add_argument("--rep", type=int, default=40,
                    help="do_bench's rep (ms) a side and round; warm-up rep/4")
    ap.add_argument("--pure", action="store_true",
                    help="after the sweep, time the --only softmax cases' picks against "
                    "Triton with the L2 flushed, as CUDA graphs, back to back, and the "
                    "host's enqueue time (pure_rows)")
    ap.add_argument("--precompile-bench", action="store_true",
                    help="also build bench_lang's row kernels (with --jobs)")
    ap.add_argument("--precompile-only", action="store_true",
                    help="build (with --jobs) and stop: a later call times from the caches")
    opts = ap.parse_args()
    only = {c.strip() for c in opts.only.split(",") if c.strip()} or None
    if opts.jobs and not opts.no_rows:
        precompile_rows(opts.fp16_only, opts.jobs, only)
    if opts.jobs and opts.precompile_bench:
        precompile_bench(opts.jobs)
    if opts.precompile_only:
        return 0
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
        info["rows"] = row_rows(opts.fp16_only, only, opts.rep)
    _write(opts.out, info)
    if opts.pure:  # after the picks are written: a failure here leaves them
        info["pure"] = pure_rows(only)
        _write(opts.out, info)
    return 0


def _write(out: Path | None, info: dict[str, Any]) -> None:
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "diag_lang.json").write_text(json.dumps(info, indent=2))
        if info.get("rows"):  # the fastest layout of each case, for BENCH_LANG_LAYOUTS
            picks = {f"{r['op']}/{r['dtype']}/{r['N']}": r["best"] for r in info["rows"]}
            (out / "layouts.json").write_text(json.dumps(picks, indent=1))


if __name__ == "__main__":
    sys.exit(main())
