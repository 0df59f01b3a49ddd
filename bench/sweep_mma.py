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
    # session 12: the default on all-zero inputs (the data's share of the power: the
    # tensor cores switch no operand bits), other tile orders and grids, and clusters of
    # two blocks that share each b tile by TMA multicast.
    "base zeros": dict(BM=128, BN=256, WM=64, WN=64, STAGES=4, data="zeros"),
    "base 128 blocks": dict(BM=128, BN=256, WM=64, WN=64, STAGES=4, blocks=128),
    "base g16": dict(BM=128, BN=256, WM=64, WN=64, STAGES=4, GROUP_M=16),
    "cluster2 128x256/4": dict(BM=128, BN=256, WM=64, WN=64, STAGES=4, cluster=2),
    "cluster2 128 blocks": dict(BM=128, BN=256, WM=64, WN=64, STAGES=4, cluster=2,
                                blocks=128),
}
#: (probe, variant) pairs measured beside the variants (bench/diag_mma.TMA_PROBES).
PROBED = (("no_tma", "base 128x256/4"), ("no_tma", "96x64 192x256/4"),
          ("no_tma", "cluster2 128x256/4"))
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
        ROWS=kw.get("rows", False), CLUSTER=kw.get("cluster", 1))


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
            for random in (False, True):
                bench.ceiling_kernel(getattr(tk.dt, dtype), random).precompile("gpu", arch)
        else:
            mod = _module(probe, Path(folder))
            specialization(mod, dtype, VARIANTS[variant]).precompile("gpu", arch)
    except Exception as exc:  # noqa: BLE001 (reported; the variant then fails alone)
        return f"compile {probe} {variant} {dtype}: FAILED {type(exc).__name__}: {exc}"
    return f"compile {probe} {variant} {dtype}: {time.perf_counter() - t0:.1f} s"


class Clocks:
    """The SM clock (MHz) and board power (W) sampled every ``every`` s by a thread
    through NVML (ctypes; absent: no readings) while a ``with`` block runs."""

    def __init__(self, every: float = 0.002) -> None:
        import ctypes
        import ctypes.util

        self.every, self.samples = every, []
        self.lib = None
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("nvidia-ml") or "libnvidia-ml.so.1")
            handle = ctypes.c_void_p()
            if lib.nvmlInit_v2() == 0 and \
                    lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle)) == 0:
                self.lib, self.handle = lib, handle
        except OSError:
            pass

    def read(self) -> tuple[int, int, int] | None:
        """(SM MHz, power mW, clock event reasons) now."""
        import ctypes

        if self.lib is None:
            return None
        mhz, mw, why = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_ulonglong()
        self.lib.nvmlDeviceGetClockInfo(self.handle, 1, ctypes.byref(mhz))  # NVML_CLOCK_SM
        self.lib.nvmlDeviceGetPowerUsage(self.handle, ctypes.byref(mw))
        reasons = getattr(self.lib, "nvmlDeviceGetCurrentClocksEventReasons", None) \
            or getattr(self.lib, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        if reasons is not None:
            reasons(self.handle, ctypes.byref(why))
        return mhz.value, mw.value, why.value

    def __enter__(self) -> Clocks:
        import threading

        self.samples, self.stop = [], threading.Event()

        def loop() -> None:
            while not self.stop.is_set():
                r = self.read()
                if r is None:
                    return
                self.samples.append(r)
                self.stop.wait(self.every)
        self.thread = threading.Thread(target=loop, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def summary(self) -> dict[str, Any]:
        """Median SM MHz and W over the block, and the OR of the clock event reasons."""
        if not self.samples:
            return {}
        mhz = sorted(x[0] for x in self.samples)
        w = sorted(x[1] for x in self.samples)
        why = 0
        for x in self.samples:
            why |= x[2]
        return dict(mhz=mhz[len(mhz) // 2], watts=w[len(w) // 2] / 1000.0,
                    mhz_min=mhz[0], reasons=hex(why), samples=len(mhz))


def timed(fn: Any, clocks: Clocks, rep: int = 200) -> tuple[float, dict[str, Any]]:
    """Median ms of ``fn`` (do_bench, ``rep`` ms) and the clocks over that time."""
    from triton.testing import do_bench

    with clocks:
        ms = do_bench(fn, warmup=50, rep=rep, return_mode="median")
    return ms, clocks.summary()


def _emit(kind: str, **data: Any) -> None:
    """A result line for the parent (and the log)."""
    print("RESULT " + json.dumps(dict(kind=kind, **data)), flush=True)


def child_anchors(sizes: list[int], dtypes: list[str]) -> None:
    """The ceiling (both dtypes; operands near 1 and random) and torch.matmul at each size
    and dtype, with the SM clock and power over each timing."""
    import thork as tk
    import torch

    bench = _load("bench_mma_sweep", ROOT / "bench" / "bench_mma.py")
    bench.CHAINS = CEILING[0]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    chains, warps, per_sm = CEILING
    clocks = Clocks()
    for random in (False, True):
        for name in dtypes:
            blocks, threads, iters = sms * per_sm, 32 * warps, 4096 * 8 // chains
            kern = bench.ceiling_kernel(getattr(tk.dt, name), random)[blocks, threads]
            res = torch.empty(blocks * threads, device="cuda", dtype=torch.float32)
            kern(res, 1, target="gpu")
            ms, clk = timed(lambda k=kern, r=res, i=iters: k(r, i, target="gpu"), clocks)
            tf = 2.0 * 16 * 8 * 16 * chains * iters * blocks * warps / ms / 1e9
            _emit("ceiling_random" if random else "ceiling", dtype=name, tflops=tf, **clk)
    for n in sizes:
        for name in dtypes:
            tdt = getattr(torch, name)
            a = torch.randn(n, n, device="cuda", dtype=tdt)
            b = torch.randn(n, n, device="cuda", dtype=tdt)
            ms, clk = timed(lambda a=a, b=b: torch.matmul(a, b), clocks)
            _emit("gemm", label="torch.matmul", n=n, dtype=name, tflops=2.0 * n**3 / ms / 1e9,
                  **clk)


def child_variant(folder: Path, probe: str, variant: str, sizes: list[int],
                  dtypes: list[str]) -> None:
    """Check, then time, one variant (or a probe of it: timed only) at each size and
    dtype."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    mod = _module(probe, folder)
    kw = dict(VARIANTS[variant])
    data = kw.pop("data", "randn")
    label = variant if probe == "example" else f"{variant} {probe}"
    clocks = Clocks()
    for n in sizes:
        for name in dtypes:
            tdt = getattr(torch, name)
            make = torch.zeros if data == "zeros" else torch.randn
            a = make(n, n, device="cuda", dtype=tdt)
            b = make(n, n, device="cuda", dtype=tdt)
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
                if data == "zeros":            # the bound is 0: the product must be too
                    worst = 0.0 if bool((c == 0).all()) else float("inf")
                else:
                    worst = float((err / bound).nan_to_num_(nan=float("inf")).max())
                del af, bf, bound, err
                ok = worst <= 1.0
                print(f"{n}^3 {name} {label}: error / bound {worst:.3g} "
                      f"{'ok' if ok else 'MISMATCH'} (first call {first:.2f} s)", flush=True)
                if not ok:
                    _emit("gemm", label=label, n=n, dtype=name, tflops=None, worst=worst)
                    continue
            ms, clk = timed(fn, clocks)
            _emit("gemm", label=label, n=n, dtype=name, tflops=2.0 * n**3 / ms / 1e9,
                  worst=worst, first_s=first, **clk)
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
    rnd = {r["dtype"]: r["tflops"] for r in results if r["kind"] == "ceiling_random"}
    print("\nsummary (TFLOP/s; fraction of the mma.sync ceiling of this run, operands near "
          "1 / random; median SM MHz, W, clock event reasons over the timing)", flush=True)
    for r in results:
        clk = f"{r.get('mhz', '-')} MHz {r.get('watts', '-')} W {r.get('reasons', '')}"
        if r["kind"].startswith("ceiling"):
            print(f"{r['kind']:<15} {r['dtype']:<9} {r['tflops']:7.1f}  {clk}", flush=True)
        if r["kind"] == "gemm":
            tf = r["tflops"]
            frac = f"{tf / ceil[r['dtype']]:.3f}" if tf and r["dtype"] in ceil else "-"
            frac_r = f"{tf / rnd[r['dtype']]:.3f}" if tf and r["dtype"] in rnd else "-"
            print(f"{r['n']}^3 {r['dtype']:<9} {r['label']:<28} "
                  f"{'MISMATCH' if tf is None else f'{tf:7.1f}'}  {frac} / {frac_r}  {clk}",
                  flush=True)
    if opts.out:
        opts.out.mkdir(parents=True, exist_ok=True)
        (opts.out / "sweep_mma.json").write_text(
            json.dumps(dict(ceiling=ceil, results=results, status=status), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
