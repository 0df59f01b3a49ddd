"""Energy and clock of the mma.sync GEMM against its ceiling (session 12, issue 19): each
kernel runs back to back for ``--seconds`` (after a warm-up of a third of that), while
NVML's energy counter (mJ), the SM clock and the clock event reasons are read; prints
TFLOP/s, mean power (W), pJ per flop, median SM MHz and the reasons (0x4: the software
power cap), and TFLOP/s per GHz (the work done per clock cycle).

Kernels: the register-only ceiling (bench_mma's operands near 1, and random operands),
the TMA-fed example (examples/gemm_mma.py, default tile) and its ``no_tma`` probe
(bench/diag_mma.py: no copies) at 4096^3 and 8192^3, the example on all-zero inputs,
and torch.matmul (cuBLAS).

    python bench/power_mma.py [--seconds 1.2] [--out DIR]
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))


def energy_mj(clocks: Any) -> int:
    """NVML's energy counter of GPU 0 (mJ since the driver loaded)."""
    e = ctypes.c_ulonglong()
    clocks.lib.nvmlDeviceGetTotalEnergyConsumption(clocks.handle, ctypes.byref(e))
    return e.value


def sustained(fn: Any, flops: float, seconds: float, clocks: Any) -> dict[str, Any]:
    """Run ``fn`` back to back: a warm-up of seconds / 3, then about ``seconds`` timed by
    CUDA events with the energy counter read around them and the clocks sampled."""
    import torch

    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    one = time.perf_counter() - t0
    while time.perf_counter() - t0 < seconds / 3:
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    reps = 0
    with clocks:
        e0 = energy_mj(clocks)
        start.record()
        t1 = time.perf_counter()
        marks: list[Any] = []
        while time.perf_counter() - t1 < seconds:   # at most two chunks of 8 queued
            for _ in range(8):
                fn()
            reps += 8
            marks.append(torch.cuda.Event())
            marks[-1].record()
            if len(marks) > 1:
                marks[-2].synchronize()
        end.record()
        end.synchronize()
        e1 = energy_mj(clocks)
    ms = start.elapsed_time(end)
    clk = clocks.summary()
    clk["nvml_watts"] = clk.pop("watts", None)   # NVML's 1 s average: kept apart
    tf = flops * reps / ms / 1e9
    watts = (e1 - e0) / ms                      # mJ / ms
    return dict(tflops=tf, watts=watts, pj_per_flop=watts / tf, reps=reps, ms=ms,
                first_s=one, tflops_per_ghz=tf / clk["mhz"] * 1000 if clk else None, **clk)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=1.2)
    ap.add_argument("--out", type=Path, default=None)
    opts = ap.parse_args()
    import sweep_mma as sw
    import thork as tk
    import torch

    clocks = sw.Clocks()
    if clocks.lib is None:
        raise SystemExit("NVML is not available")
    bench = sw._load("bench_mma_power", ROOT / "bench" / "bench_mma.py")
    chains, warps, per_sm = sw.CEILING
    bench.CHAINS = chains
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    blocks, threads, iters = sms * per_sm, 32 * warps, 4096 * 8 // chains
    res = torch.empty(blocks * threads, device="cuda", dtype=torch.float32)
    cases: list[tuple[str, Any, float]] = []
    ceil_flops = 2.0 * 16 * 8 * 16 * chains * iters * blocks * warps
    for random in (False, True):
        for name in ("float16", "bfloat16"):
            kern = bench.ceiling_kernel(getattr(tk.dt, name), random)[blocks, threads]
            cases.append((f"ceiling {'random' if random else 'near-1'} {name}",
                          lambda k=kern: k(res, iters, target="gpu"), ceil_flops))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        sw.write_sources(Path(tmp))
        example, no_tma = sw._module("example", Path(tmp)), sw._module("no_tma", Path(tmp))
        base = sw.VARIANTS["base 128x256/4"]
        for label, fn, flops in cases:
            rows.append(dict(label=label, **sustained(fn, flops, opts.seconds, clocks)))
            print(rows[-1], flush=True)
        for n, dtype, what in ((4096, "float16", ("example", "no_tma", "torch")),
                               (4096, "bfloat16", ("example",)),
                               (8192, "float16", ("example", "no_tma", "zeros", "g16",
                                                  "torch")),
                               (8192, "bfloat16", ("example", "torch"))):
            tdt = getattr(torch, dtype)
            a = torch.randn(n, n, device="cuda", dtype=tdt)
            b = torch.randn(n, n, device="cuda", dtype=tdt)
            z = torch.zeros(n, n, device="cuda", dtype=tdt)
            c = torch.empty(n, n, device="cuda", dtype=torch.float32)
            for w in what:
                if w == "torch":
                    fn = functools.partial(torch.matmul, a, b)
                else:
                    mod = no_tma if w == "no_tma" else example
                    x, y = (z, z) if w == "zeros" else (a, b)
                    kw = sw.VARIANTS["base g16"] if w == "g16" else base
                    fn = mod.prepare_tma(c, x, y, n, n, n, dtype, target="gpu", **kw)
                label = f"{w} {n}^3 {dtype}"
                rows.append(dict(label=label, **sustained(fn, 2.0 * n**3, opts.seconds,
                                                          clocks)))
                print(rows[-1], flush=True)
            del a, b, z, c
            torch.cuda.empty_cache()
    print("\nsustained (back to back, no L2 flush): TFLOP/s, W, pJ/flop, SM MHz (median, "
          "min), TFLOP/s per GHz, clock event reasons")
    for r in rows:
        print(f"{r['label']:<32} {r['tflops']:7.1f} {r['watts']:6.0f} W "
              f"{r['pj_per_flop']:5.3f} pJ {r.get('mhz', '-'):>5} {r.get('mhz_min', '-'):>5} "
              f"{r['tflops_per_ghz'] or 0:6.1f} {r.get('reasons', '')}")
    if opts.out:
        opts.out.mkdir(parents=True, exist_ok=True)
        (opts.out / "power_mma.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
