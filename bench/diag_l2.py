"""Session 11 (issue 16): do L2 eviction priorities cut the DRAM traffic of the row kernels
inside ``triton.testing.do_bench``'s timed region?

``do_bench`` clears the L2 before every call by zeroing a 256 MB buffer, so a timed kernel
starts with the L2 (50 MB on the H200) full of *dirty* lines: every line the kernel
allocates evicts one, and each eviction of a dirty line is a DRAM write inside the timed
region. Loads that give their lines the L2 priority ``evict_first`` (``evict="first"``)
may be evicted (clean, no write-back) by the kernel's later allocations in place of the
flush buffer's dirty lines. This script measures that, one process, anchors beside every
variant, 3 interleaved rounds, the median of the rounds:

* **copy**: a Thork float4 copy (4 vectors a thread, 256 threads) with each combination of
  load / store hints (``cache=`` operator, ``evict=`` priority) and torch's ``copy_``, for
  16 to 128 MB each way, timed three ways: ``do_bench`` (its flush: the L2 left dirty),
  the same loop after a flush that leaves the L2 full of *clean* lines (a read of a 256 MB
  buffer), and with no flush (back to back, the kernel's own data in the L2).
* **rows**: softmax (fp16, fp32) and layer norm (fp16) at N = 2048 / 4096 / 8192 (M =
  4096): ``bench_lang``'s layout (:data:`bench_lang.LAYOUTS`) with hint variants against
  Triton's tutorial-style kernel and a same-bytes torch copy, ``do_bench(warmup=10,
  rep=40)`` medians, every side writing one shared output (bench_lang's method).

    python bench/diag_l2.py [--out DIR] [--jobs 16] [--rep 40] [--no-copy] [--no-rows]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_lang as bl  # noqa: E402
import thork as tk  # noqa: E402

f32, i32 = tk.dt.float32, tk.dt.int32
COPY_THREADS, COPY_UNROLL = 256, 4
COPY_MB = (16, 32, 64, 128)  # bytes each way


class Hints(NamedTuple):
    """Hints of a copy's loads and stores (None: none)."""

    load_cache: str | None = None
    load_evict: str | None = None
    store_cache: str | None = None
    store_evict: str | None = None

    def tag(self) -> str:
        parts = [f"ld.{self.load_cache}" if self.load_cache else "",
                 f"ld.ev_{self.load_evict}" if self.load_evict else "",
                 f"st.{self.store_cache}" if self.store_cache else "",
                 f"st.ev_{self.store_evict}" if self.store_evict else ""]
        return "+".join(p for p in parts if p) or "plain"


COPY_HINTS = [Hints(), Hints("cs"), Hints(store_cache="cs"), Hints("cs", None, "cs"),
              Hints(load_evict="first"), Hints(load_evict="first", store_evict="last"),
              Hints(store_evict="last"), Hints(load_evict="first", store_evict="first"),
              Hints("cs", "first"), Hints(load_evict="first", store_evict="normal"),
              Hints(load_evict="last")]


def make_copy(h: Hints) -> Any:
    """``out[:] = x`` for float32 arrays of a multiple of 4096 elements: each thread moves
    4 float4 vectors (all loads first); launch ``[n // 4096, 256](out, x)``."""
    name = "l2copy_" + h.tag().replace(".", "_").replace("+", "__")

    @tk.jit(name=name)
    def copy(out: tk.DevicePointer[f32], x: tk.DevicePointer[f32]):
        t = tk.cast(tk.thread_idx().x, i32)
        base = tk.cast(tk.block_idx().x, i32) * (COPY_THREADS * COPY_UNROLL * 4)
        offs = [base + (j * COPY_THREADS + t) * 4 for j in range(COPY_UNROLL)]
        vals = [x.vload(o, 4, cache=h.load_cache, evict=h.load_evict) for o in offs]
        for o, v in zip(offs, vals):
            out.vstore(o, v, cache=h.store_cache, evict=h.store_evict)
    return copy


def row_variants(op: str, dtype: Any, n: int) -> list[bl.RowConfig]:
    """bench_lang's layout and the same layout with hint variants."""
    base = bl.softmax_config(dtype, n) if op == "softmax" else bl.layer_norm_config(dtype, n)
    out = [base, base._replace(load_evict="first"),
           base._replace(load_evict="first", store_evict="last"),
           base._replace(store_evict="last"),
           base._replace(load_evict="first", store_evict="first")]
    if base.cache:
        out.append(base._replace(cache=None, load_evict="first"))
        out.append(base._replace(plain_stores=True))
    else:
        out.append(base._replace(cache="cs", plain_stores=True))
        out.append(base._replace(cache="cs", plain_stores=True, load_evict="first"))
    return out


ROW_CASES = [("softmax", "float16", n) for n in (2048, 4096, 8192)] \
    + [("softmax", "float32", n) for n in (2048, 4096, 8192)] \
    + [("layer_norm", "float16", n) for n in (2048, 4096, 8192)]


def _build(job: tuple[str, Any]) -> str:
    what, arg = job
    try:
        if what == "copy":
            return make_copy(arg).precompile("gpu")  # type: ignore[no-any-return]
        op, dtname, n, cfg = arg
        if cfg is None:  # Triton's kernel: compiled by a first launch on a few rows
            import torch

            tri = bl._triton_kernels()
            x = torch.randn(4, n, device="cuda", dtype=getattr(torch, dtname))
            if op == "softmax":
                tri[0](torch.empty_like(x), x)
            else:
                tri[1](torch.empty_like(x), x, x[0], x[0], 1e-5)
            torch.cuda.synchronize()
            return ""
        make = bl.make_softmax if op == "softmax" else bl.make_layer_norm
        return make(getattr(tk.dt, dtname), n, cfg).precompile(  # type: ignore[no-any-return]
            "gpu")
    except Exception as exc:  # the timed process compiles it (or reports it) then
        return f"precompile {what} {arg}: {exc}"


def precompile(jobs: int, copy: bool, rows: bool) -> None:
    """Build every kernel in ``jobs`` processes (forked before CUDA starts here)."""
    import concurrent.futures as cf
    import multiprocessing as mp
    import time

    work: list[tuple[str, Any]] = [("copy", h) for h in COPY_HINTS] if copy else []
    if rows:
        for op, dtname, n in ROW_CASES:
            dtype = getattr(tk.dt, dtname)
            work += [("row", (op, dtname, n, c)) for c in [None, *row_variants(op, dtype, n)]]
    t0 = time.perf_counter()
    with cf.ProcessPoolExecutor(jobs, mp_context=mp.get_context("fork")) as ex:
        for msg in ex.map(_build, work, chunksize=1):
            if msg.startswith("precompile"):
                print(msg, flush=True)
    print(f"precompiled {len(work)} kernels in {time.perf_counter() - t0:.1f} s", flush=True)


def _timer(flush: Any, fn: Any, reps: int = 60) -> float:
    """Median ms of ``fn`` over ``reps`` calls, each after ``flush()`` (None: back to back),
    CUDA events around each call (do_bench's loop)."""
    import torch

    for _ in range(5):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for s, e in zip(starts, ends):
        if flush is not None:
            flush()
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def copy_rows(do_bench: Any) -> list[dict[str, Any]]:
    import torch

    big = torch.empty(256 * 2**20 // 4, dtype=torch.float32, device="cuda")
    flushes = {"dirty": lambda: big.zero_(),  # do_bench's own clear
               "clean": lambda: big.sum(),  # reads: leaves clean lines
               "none": None}
    kerns = {h.tag(): make_copy(h) for h in COPY_HINTS}
    return [_copy_size(mb, kerns, flushes, do_bench) for mb in COPY_MB]


def _copy_size(mb: int, kerns: dict[str, Any], flushes: dict[str, Any], do_bench: Any
               ) -> dict[str, Any]:
    """Every copy variant at ``mb`` MB each way, checked, then timed (3 rounds)."""
    import torch

    n = mb * 2**20 // 4
    x = torch.randn(n, device="cuda")
    y = torch.full_like(x, float("nan"))
    grid = n // (COPY_THREADS * COPY_UNROLL * 4)

    def launcher(k: Any) -> Any:
        return lambda: k[grid, COPY_THREADS](y, x, target="gpu")

    fns = {"torch": lambda: y.copy_(x)}
    for tag, k in kerns.items():
        y.fill_(float("nan"))
        launcher(k)()
        torch.cuda.synchronize()
        if not torch.equal(y, x):
            raise RuntimeError(f"copy {tag} {mb} MB: wrong values")
        fns[tag] = launcher(k)
    keys = list(fns)
    res: dict[str, dict[str, list[float]]] = {f: {k: [] for k in keys}
                                              for f in ("bench", *flushes)}
    for i in range(3):
        for k in keys[i % len(keys):] + keys[:i % len(keys)]:
            res["bench"][k].append(do_bench(fns[k], warmup=10, rep=40, return_mode="median"))
            for f, fl in flushes.items():
                res[f][k].append(_timer(fl, fns[k]))
    med = {f: {k: statistics.median(v) for k, v in d.items()} for f, d in res.items()}
    print(f"\ncopy {mb} MB each way: us (median of 3 rounds; rounds of do_bench)", flush=True)
    print(f"  {'hints':<28} {'do_bench':>9} {'dirty':>8} {'clean':>8} {'none':>8} "
          f"{'TB/s':>6}  x plain (do_bench)  rounds")
    for k in keys:
        tbps = 2 * mb * 2**20 / med["bench"][k] / 1e9
        print(f"  {k:<28} {med['bench'][k] * 1e3:>9.2f} {med['dirty'][k] * 1e3:>8.2f} "
              f"{med['clean'][k] * 1e3:>8.2f} {med['none'][k] * 1e3:>8.2f} {tbps:>6.2f}"
              f"  {med['bench']['plain'] / med['bench'][k]:>6.3f}  "
              + " ".join(f"{v * 1e3:.2f}" for v in res["bench"][k]), flush=True)
    return {"MB": mb, "median_ms": med, "rounds_ms": res}


def case_rows(do_bench: Any, rep: int, sms: int) -> list[dict[str, Any]]:
    import torch

    tri = bl._triton_kernels()
    torch.manual_seed(0)
    return [_row_case(op, dtname, n, tri, do_bench, rep, sms) for op, dtname, n in ROW_CASES]


def _row_case(op: str, dtname: str, n: int, tri: Any, do_bench: Any, rep: int, sms: int
              ) -> dict[str, Any]:
    """Triton, every hint variant of bench_lang's layout and the copy for one case (M =
    4096), each checked against torch, then timed (3 rounds, one shared output)."""
    import torch

    m_rows, eps = 4096, 1e-5
    dtype, tdt = getattr(tk.dt, dtname), getattr(torch, dtname)
    x = torch.randn(m_rows, n, device="cuda", dtype=tdt)
    w = torch.rand(n, device="cuda", dtype=tdt) + 0.5
    b = torch.randn(n, device="cuda", dtype=tdt)
    y = torch.empty_like(x)
    tol = 2e-2 if tdt == torch.float16 else 1e-4

    def launcher(cfg: bl.RowConfig) -> Any:
        grid = cfg.grid(m_rows, sms)
        if op == "softmax":
            k = bl.make_softmax(dtype, n, cfg)[grid, cfg.block]
            return lambda: k(y, x, m_rows, target="gpu")
        k = bl.make_layer_norm(dtype, n, cfg)[grid, cfg.block]
        return lambda: k(y, x, w, b, eps, m_rows, target="gpu")

    if op == "softmax":
        ref = torch.softmax(x.float(), dim=-1)
        fns = {"triton": lambda: tri[0](y, x)}
    else:
        ref = torch.nn.functional.layer_norm(x.float(), (n,), w.float(), b.float(), eps)
        fns = {"triton": lambda: tri[1](y, x, w, b, eps)}
    for cfg in row_variants(op, dtype, n):
        fns[cfg.tag()] = launcher(cfg)
    ok = {}
    for k, fn in fns.items():
        y.fill_(float("nan"))
        fn()
        torch.cuda.synchronize()
        ok[k] = bool(torch.allclose(y.float(), ref, atol=tol, rtol=tol))
    fns["copy"] = lambda: y.copy_(x)
    keys = list(fns)
    rounds: dict[str, list[float]] = {k: [] for k in keys}
    for i in range(3):
        for k in keys[i % len(keys):] + keys[:i % len(keys)]:
            rounds[k].append(do_bench(fns[k], warmup=max(1, rep // 4), rep=rep,
                                      return_mode="median"))
    med = {k: statistics.median(v) for k, v in rounds.items()}
    print(f"\n{op} {dtname} N={n}: us (median of 3 rounds), x Triton (rounds)", flush=True)
    for k in keys:
        ratios = " ".join(f"{t / s:.3f}" for t, s in zip(rounds["triton"], rounds[k]))
        print(f"  {k:<24} {med[k] * 1e3:>8.2f}  {med['triton'] / med[k]:>6.3f}  "
              f"({ratios})  {'ok' if ok.get(k, True) else 'WRONG'}", flush=True)
    return {"op": op, "dtype": dtname, "N": n, "median_ms": med, "rounds_ms": rounds,
            "correct": ok}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--jobs", type=int, default=0, help="precompile in this many processes")
    ap.add_argument("--rep", type=int, default=40, help="do_bench rep (ms) for the rows")
    ap.add_argument("--no-copy", action="store_true")
    ap.add_argument("--no-rows", action="store_true")
    opts = ap.parse_args()
    if opts.jobs:
        precompile(opts.jobs, not opts.no_copy, not opts.no_rows)
    import torch
    from triton.testing import do_bench

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    info: dict[str, Any] = {"device": torch.cuda.get_device_name(0)}
    if not opts.no_copy:
        info["copy"] = copy_rows(do_bench)
    if not opts.no_rows:
        info["rows"] = case_rows(do_bench, opts.rep, sms)
    if opts.out:
        opts.out.mkdir(parents=True, exist_ok=True)
        (opts.out / "diag_l2.json").write_text(json.dumps(info, indent=1))
    bad = [r for r in info.get("rows", []) if not all(r["correct"].values())]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
