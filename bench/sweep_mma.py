"""Session 11's sweep of the TMA-fed ``mma.sync`` GEMM (issue 19), one GPU call.

1. The ceiling of ``mma.sync`` m16n8k16 (bench_mma's register-only kernel) at several
   numbers of independent accumulator chains per warp and warps per multiprocessor, so
   that the ceiling the GEMM is read against is the instruction's own peak.
2. examples/gemm_mma.prepare_tma's tilings of VARIANTS at 4096^3 and 8192^3, fp16 and
   bf16, each checked against torch.matmul (float32 product) once, then timed in ROUNDS
   rounds of alternating order (medians of ``triton.testing.do_bench``); torch.matmul
   (fp16 / bf16 output, cuBLAS) in the same rounds.
3. bench/diag_mma.py's probes of the TMA kernel (``no_tma``, ``same_k``, ``no_epilogue``)
   at the tilings of PROBED: where the time goes.

    python bench/sweep_mma.py [--out DIR] [--quick]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: name -> prepare_tma keywords. "base": session 10's default (warps of 64 x 64, fragments
#: a whole k-step ahead); "rows": fragments read ahead row by row; "96x64": warps of
#: 96 x 64 (192 accumulators a thread) with 240 registers from setmaxnreg (producer 24).
VARIANTS: dict[str, dict[str, Any]] = {
    "base 128x256/4": dict(BM=128, BN=256, WM=64, WN=64, STAGES=4),
    "rows 128x256/4": dict(BM=128, BN=256, WM=64, WN=64, STAGES=4, rows=True),
    "96x64 192x256/4": dict(BM=192, BN=256, WM=96, WN=64, STAGES=4, rows=True, regs=240),
    "96x64 192x256/3": dict(BM=192, BN=256, WM=96, WN=64, STAGES=3, rows=True, regs=240),
    "96x64 192x256/4 g16": dict(BM=192, BN=256, WM=96, WN=64, STAGES=4, rows=True,
                                regs=240, GROUP_M=16),
    "64x96 256x192/4": dict(BM=256, BN=192, WM=64, WN=96, STAGES=4, rows=True, regs=240),
}
#: Variants whose probes (bench/diag_mma.TMA_PROBES) run too.
PROBED = ("base 128x256/4", "96x64 192x256/4")
#: (chains per warp, warps per block, blocks per multiprocessor) of the ceiling probes;
#: the first is bench_mma's.
CEILINGS = ((8, 4, 8), (16, 4, 8), (4, 4, 16), (8, 8, 4), (16, 4, 4), (8, 4, 4))
ROUNDS = 2


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def kernel_of(mod: Any, dtype: str, kw: dict[str, Any]) -> Any:
    """The specialization prepare_tma(``kw``) launches (for precompiling)."""
    return mod.gemm_tma_kernel(dtype).specialize(
        BM=kw["BM"], BN=kw["BN"], WM=kw["WM"], WN=kw["WN"], STAGES=kw["STAGES"],
        GROUP_M=kw.get("GROUP_M", 8), PAIRS=True, CTAS=1, REGS=kw.get("regs", 0),
        ROWS=kw.get("rows", False))


def ceilings(bench: Any, do_bench: Any, sms: int) -> dict[str, float]:
    """TFLOP/s of the register-only mma.sync kernel per (dtype, chains, warps, blocks)."""
    import thork as tk
    import torch

    out: dict[str, float] = {}
    for chains, warps, per_sm in CEILINGS:
        bench.CHAINS = chains                  # read when the kernel is traced (below)
        for name, dt in (("float16", tk.dt.float16), ("bfloat16", tk.dt.bfloat16)):
            blocks, threads, iters = sms * per_sm, 32 * warps, 4096 * 8 // chains
            kern = bench.ceiling_kernel(dt)[blocks, threads]
            res = torch.empty(blocks * threads, device="cuda", dtype=torch.float32)
            kern(res, 1, target="gpu")
            ms = do_bench(lambda k=kern, r=res, i=iters: k(r, i, target="gpu"),
                          return_mode="median")
            tf = 2.0 * 16 * 8 * 16 * chains * iters * blocks * warps / ms / 1e9
            label = f"{name} {chains} chains x {warps * per_sm} warps/SM"
            out[label] = tf
            print(f"ceiling {label}: {tf:8.1f} TFLOP/s", flush=True)
    bench.CHAINS = 8
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="write sweep_mma.json here")
    ap.add_argument("--quick", action="store_true", help="4096^3 fp16 only, one round")
    opts = ap.parse_args()
    import torch
    from triton.testing import do_bench

    sys.path.insert(0, str(ROOT / "bench"))
    bench = _load("bench_mma_sweep", ROOT / "bench" / "bench_mma.py")
    diag = _load("diag_mma_sweep", ROOT / "bench" / "diag_mma.py")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"{torch.cuda.get_device_name(0)}, {sms} SMs", flush=True)
    dtypes = ("float16",) if opts.quick else ("float16", "bfloat16")
    sizes = (4096,) if opts.quick else (4096, 8192)
    rounds = 1 if opts.quick else ROUNDS
    with tempfile.TemporaryDirectory() as tmp:
        mods = {name: diag.load(f"sweep_{name}", src, Path(tmp))
                for name, src in diag.sources(diag.TMA_PROBES).items()}
        example = mods["example"]
        kernels = [kernel_of(example, d, kw) for d in dtypes for kw in VARIANTS.values()]
        kernels += [kernel_of(m, d, VARIANTS[v]) for p, m in mods.items() if p != "example"
                    for d in dtypes for v in PROBED]
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda k: k.precompile("gpu"), kernels))
        print(f"built {len(kernels)} GEMM kernels", flush=True)
        info: dict[str, Any] = {"ceiling": ceilings(bench, do_bench, sms), "gemm": {}}
        for n in sizes:
            for name in dtypes:
                tdt = getattr(torch, name)
                a = torch.randn(n, n, device="cuda", dtype=tdt)
                b = torch.randn(n, n, device="cuda", dtype=tdt)
                c = torch.empty(n, n, device="cuda", dtype=torch.float32)
                ref = torch.matmul(a.float(), b.float())
                timed: dict[str, Any] = {"torch.matmul": lambda a=a, b=b: torch.matmul(a, b)}
                for label, kw in VARIANTS.items():
                    fn = example.prepare_tma(c, a, b, n, n, n, name, target="gpu", **kw)
                    c.fill_(float("nan"))
                    t0 = time.perf_counter()
                    fn()
                    torch.cuda.synchronize()
                    print(f"{n}^3 {name} {label}: first call {time.perf_counter() - t0:.2f} s",
                          flush=True)         # a compile here means precompile missed it
                    ok = bool(torch.allclose(c, ref, rtol=1e-2, atol=1e-2 * n ** 0.5))
                    if not ok:
                        print(f"{n}^3 {name} {label}: MISMATCH", flush=True)
                    timed[label] = fn
                    if label in PROBED:
                        for probe, m in mods.items():
                            if probe != "example":
                                timed[f"{label} {probe}"] = m.prepare_tma(
                                    c, a, b, n, n, n, name, target="gpu", **kw)
                samples: dict[str, list[float]] = {k: [] for k in timed}
                for r in range(rounds):
                    for label in list(timed) if r % 2 == 0 else list(timed)[::-1]:
                        ms = do_bench(timed[label], return_mode="median")
                        samples[label].append(2.0 * n ** 3 / ms / 1e9)
                ceil = info["ceiling"][f"{name} 8 chains x 32 warps/SM"]
                for label, tfs in samples.items():
                    tf = statistics.median(tfs)
                    info["gemm"][f"{n} {name} {label}"] = tf
                    print(f"{n}^3 {name} {label:<32} {tf:8.1f} TFLOP/s  {tf / ceil:5.3f} of "
                          f"the ceiling  (rounds {', '.join(f'{x:.1f}' for x in tfs)})",
                          flush=True)
                del a, b, c, ref
                torch.cuda.empty_cache()
    if opts.out:
        opts.out.mkdir(parents=True, exist_ok=True)
        (opts.out / "sweep_mma.json").write_text(json.dumps(info, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
