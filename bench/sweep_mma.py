"""Session 11's sweep of the TMA-fed ``mma.sync`` GEMM (issue 19), one GPU call, made safe
against a hang or a wrong product in any one variant.

1. Every kernel is compiled first, in ``--jobs`` processes (outside the timed part).
2. The ceiling of ``mma.sync`` m16n8k16 (bench_mma's register-only kernel, 8 chains x 32
   warps per multiprocessor) and ``torch.matmul`` (cuBLAS, fp16 / bf16 output) at each size.
3. Each variant of VARIANTS (examples/gemm_mma.prepare_tma keywords) and each probe of
   PROBED (bench/diag_mma.py's ``no_tma``: the producer copies nothing, so ldmatrix, mma
   and the barrier hand-over alone) runs in its own process under ``--timeout`` seconds:
   at each size and dtype its product is checked first against ``torch.matmul`` of the
   float32 inputs (TF32 off) within issue 19's bound K 2^-22 sum|a b| plus the float32
   reference's own K 2^-23 sum|a b| (NaN-poisoned output), and timed only when it
   agrees (median of ``triton.testing.do_bench``). A process that runs out of time is
   killed and reported, and the sweep goes on; lines print as they come.

    python bench/sweep_mma.py [--out DIR] [--quick] [--jobs 16] [--timeout 30]
        [--variants "base 128x256/4,96x64 192x256/4"] [--budget 140]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: name -> prepare_tma keywords. "base": session 10's default (warps of 64 x 64, fragments
#: a whole k-step ahead); "rows": fragments read ahead row by row (the stage released
#: after its last mma); "96x64": warps of 96 x 64 (192 accumulators a thread), 240
#: registers from setmaxnreg (the producer 24); "64x96": warps of 64 x 96.
VARIANTS: dict[str, dict[str, Any]] = {
    "base 128x256/4": dict(BM=128, BN=256, WM=64, WN=64, STAGES=4),
    "rows 128x256/4": dict(BM=128, BN=256, WM=64, WN=64, STAGES=4, rows=True),
    "96x64 192x256/4": dict(BM=192, BN=256, WM=96, WN=64, STAGES=4, rows=True, regs=240),
    "96x64 192x256/3": dict(BM=192, BN=256, WM=96, WN=64, STAGES=3, rows=True, regs=240),
    "64x96 256x192/4": dict(BM=256, BN=192, WM=64, WN=96, STAGES=4, rows=True, regs=240),
}
#: (probe, variant) pairs measured beside the variants (bench/diag_mma.TMA_PROBES).
PROBED = (("no_tma", "base 128x256/4"), ("no_tma", "96x64 192x256/4"))
#: The ceiling's configuration (bench_mma's): chains per warp, warps per block, blocks
#: per multiprocessor.
CEILING = (8, 4, 8)


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _module(probe: str, folder: Path) -> Any:
    """examples/gemm_mma.py (``probe`` = "example") or a probe of it, loaded from the
    source written to ``folder`` by :func:`write_sources`."""
    return _load(f"sweep_{probe}", folder / f"sweep_{probe}.py")


def write_sources(folder: Path) -> None:
    """The example's and the probes' sources, as files the child processes import."""
    sys.path.insert(0, str(ROOT / "bench"))
    diag = _load("diag_mma_sweep", ROOT / "bench" / "diag_mma.py")
    for probe, src in diag.sources(diag.TMA_PROBES).items():
        (folder / f"sweep_{probe}.py").write_text(src)


def specialization(mod: Any, dtype: str, kw: dict[str, Any]) -> Any:
    """The specialization prepare_tma(``kw``) launches (for precompiling)."""
    return mod.gemm_tma_kernel(dtype).specialize(
        BM=kw["BM"], BN=kw["BN"], WM=kw["WM"], WN=kw["WN"], STAGES=kw["STAGES"],
        GROUP_M=kw.get("GROUP_M", 8), PAIRS=True, CTAS=1, REGS=kw.get("regs", 0),
        ROWS=kw.get("rows", False))


def _precompile(job: tuple[str, str, str, str]) -> str:
    """One compile (a worker process): (folder, probe, variant, dtype); "" for the
    ceiling kernel of ``dtype``. Returns a line for the log."""
    folder, probe, variant, dtype = job
    arch = os.environ.get("SWEEP_ARCH")        # None: the GPU's (a check without one)
    t0 = time.perf_counter()
    try:
        if probe == "ceiling":
            import thork as tk

            bench = _load("bench_mma_sweep", ROOT / "bench" / "bench_mma.py")
            bench.CHAINS = CEILING[0]
            bench.ceiling_kernel(getattr(tk.dt, dtype)).precompile("gpu", arch)
        else:
            mod = _module(probe, Path(folder))
            specialization(mod, dtype, VARIANTS[variant]).precompile("gpu", arch)
    except Exception as exc:  # noqa: BLE001 (reported; the variant then fails alone)
        return f"compile {probe} {variant} {dtype}: FAILED {type(exc).__name__}: {exc}"
    return f"compile {probe} {variant} {dtype}: {time.perf_counter() - t0:.1f} s"


def _emit(kind: str, **data: Any) -> None:
    """A result line for the parent (and the log)."""
    print("RESULT " + json.dumps(dict(kind=kind, **data)), flush=True)


def child_anchors(sizes: list[int], dtypes: list[str]) -> None:
    """The ceiling (both dtypes) and torch.matmul at each size and dtype."""
    import thork as tk
    import torch
    from triton.testing import do_bench

    bench = _load("bench_mma_sweep", ROOT / "bench" / "bench_mma.py")
    bench.CHAINS = CEILING[0]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    chains, warps, per_sm = CEILING
    for name in dtypes:
        blocks, threads, iters = sms * per_sm, 32 * warps, 4096 * 8 // chains
        kern = bench.ceiling_kernel(getattr(tk.dt, name))[blocks, threads]
        res = torch.empty(blocks * threads, device="cuda", dtype=torch.float32)
        kern(res, 1, target="gpu")
        ms = do_bench(lambda k=kern, r=res, i=iters: k(r, i, target="gpu"),
                      return_mode="median")
        tf = 2.0 * 16 * 8 * 16 * chains * iters * blocks * warps / ms / 1e9
        _emit("ceiling", dtype=name, tflops=tf)
    for n in sizes:
        for name in dtypes:
            tdt = getattr(torch, name)
            a = torch.randn(n, n, device="cuda", dtype=tdt)
            b = torch.randn(n, n, device="cuda", dtype=tdt)
            ms = do_bench(lambda a=a, b=b: torch.matmul(a, b), return_mode="median")
            _emit("gemm", label="torch.matmul", n=n, dtype=name, tflops=2.0 * n**3 / ms / 1e9)


def child_variant(folder: Path, probe: str, variant: str, sizes: list[int],
                  dtypes: list[str]) -> None:
    """Check, then time, one variant (or a probe of it: timed only) at each size and
    dtype."""
    import torch
    from triton.testing import do_bench

    torch.backends.cuda.matmul.allow_tf32 = False
    mod = _module(probe, folder)
    kw = VARIANTS[variant]
    label = variant if probe == "example" else f"{variant} {probe}"
    for n in sizes:
        for name in dtypes:
            tdt = getattr(torch, name)
            a = torch.randn(n, n, device="cuda", dtype=tdt)
            b = torch.randn(n, n, device="cuda", dtype=tdt)
            c = torch.full((n, n), float("nan"), device="cuda", dtype=torch.float32)
            fn = mod.prepare_tma(c, a, b, n, n, n, name, target="gpu", **kw)
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            first = time.perf_counter() - t0
            worst = None
            if probe == "example":             # the probes compute no product
                af, bf = a.float(), b.float()
                bound = torch.matmul(af.abs(), bf.abs()).mul_(n * (2.0**-22 + 2.0**-23))
                err = (c - torch.matmul(af, bf)).abs_()
                worst = float((err / bound).nan_to_num_(nan=float("inf")).max())
                del af, bf, bound, err
                ok = worst <= 1.0
                print(f"{n}^3 {name} {label}: error / bound {worst:.3g} "
                      f"{'ok' if ok else 'MISMATCH'} (first call {first:.2f} s)", flush=True)
                if not ok:
                    _emit("gemm", label=label, n=n, dtype=name, tflops=None, worst=worst)
                    continue
            ms = do_bench(fn, return_mode="median")
            _emit("gemm", label=label, n=n, dtype=name, tflops=2.0 * n**3 / ms / 1e9,
                  worst=worst, first_s=first)
            del a, b, c
            torch.cuda.empty_cache()


def run_child(args: list[str], timeout: float, results: list[dict[str, Any]]) -> str:
    """Run this script with ``args`` in its own process group, echo its lines as they
    come, collect its RESULT lines; kill it after ``timeout`` s. Returns "ok", "exit N"
    or "TIMEOUT"."""
    proc = subprocess.Popen([sys.executable, "-u", __file__, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.monotonic() + timeout
    import selectors

    sel = selectors.DefaultSelector()
    assert proc.stdout is not None
    sel.register(proc.stdout, selectors.EVENT_READ)
    status = "ok"
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            os.killpg(proc.pid, signal.SIGKILL)
            status = "TIMEOUT"
            break
        if not sel.select(timeout=min(left, 1.0)):
            if proc.poll() is not None:
                break
            continue
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("RESULT "):
            results.append(json.loads(line[7:]))
        print(line.rstrip(), flush=True)
    proc.wait()
    if status == "ok" and proc.returncode:
        status = f"exit {proc.returncode}"
    return status


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="write sweep_mma.json here")
    ap.add_argument("--quick", action="store_true", help="4096^3 fp16 only")
    ap.add_argument("--jobs", type=int, default=16, help="compile processes")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per variant")
    ap.add_argument("--budget", type=float, default=1e9,
                    help="seconds for the whole sweep: variants that would start later "
                         "than --timeout before its end are skipped")
    ap.add_argument("--variants", default=None, help="comma-separated VARIANTS names")
    ap.add_argument("--no-probes", action="store_true")
    ap.add_argument("--child", nargs="*", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    sizes = [4096] if opts.quick else [4096, 8192]
    dtypes = ["float16"] if opts.quick else ["float16", "bfloat16"]
    if opts.child is not None:                 # a child: anchors | folder probe variant
        sizes = [int(x) for x in opts.child[-2].split(",")]
        dtypes = opts.child[-1].split(",")
        if opts.child[0] == "anchors":
            child_anchors(sizes, dtypes)
        else:
            child_variant(Path(opts.child[0]), opts.child[1], opts.child[2], sizes, dtypes)
        return 0
    start = time.monotonic()
    names = list(VARIANTS) if opts.variants is None else opts.variants.split(",")
    for name in names:
        if name not in VARIANTS:
            raise SystemExit(f"--variants: {name!r} is not one of {list(VARIANTS)}")
    probed = [] if opts.no_probes else [(p, v) for p, v in PROBED if v in names]
    results: list[dict[str, Any]] = []
    status: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_sources(folder)
        jobs = [(tmp, "ceiling", "", d) for d in dtypes]
        jobs += [(tmp, "example", v, d) for v in names for d in dtypes]
        jobs += [(tmp, p, v, d) for p, v in probed for d in dtypes]
        import multiprocessing

        with ProcessPoolExecutor(opts.jobs, mp_context=multiprocessing.get_context("spawn")
                                 ) as pool:
            for line in pool.map(_precompile, jobs):
                print(line, flush=True)
        print(f"compiled {len(jobs)} kernels in {time.monotonic() - start:.1f} s", flush=True)
        tail = [",".join(str(n) for n in sizes), ",".join(dtypes)]
        runs = [("anchors", ["anchors", *tail])]
        for v in names:                        # each variant, then its probes
            runs.append((v, [tmp, "example", v, *tail]))
            runs += [(f"{v} {p}", [tmp, p, v, *tail]) for p, w in probed if w == v]
        for label, args in runs:
            if time.monotonic() - start + opts.timeout > opts.budget:
                status[label] = "skipped (budget)"
                print(f"{label}: skipped (the budget's end is near)", flush=True)
                continue
            t0 = time.monotonic()
            status[label] = run_child(["--child", *args], opts.timeout, results)
            print(f"{label}: {status[label]} in {time.monotonic() - t0:.1f} s", flush=True)
    ceil = {r["dtype"]: r["tflops"] for r in results if r["kind"] == "ceiling"}
    print("\nsummary (TFLOP/s, fraction of the mma.sync ceiling of this run)", flush=True)
    for r in results:
        if r["kind"] == "gemm":
            tf = r["tflops"]
            frac = f"{tf / ceil[r['dtype']]:.3f}" if tf and r["dtype"] in ceil else "-"
            print(f"{r['n']}^3 {r['dtype']:<9} {r['label']:<28} "
                  f"{'MISMATCH' if tf is None else f'{tf:7.1f}'}  {frac}", flush=True)
    if opts.out:
        opts.out.mkdir(parents=True, exist_ok=True)
        (opts.out / "sweep_mma.json").write_text(
            json.dumps(dict(ceiling=ceil, results=results, status=status), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
