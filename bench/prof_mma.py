"""Kernels of the mma.sync GEMM to profile under Nsight Compute (session 12, issue 19):
each launched once, in this order — the register-only ceiling (fp16, operands near 1),
the same on random operands, the TMA-fed example at 4096^3 fp16, its ``no_tma`` probe
(bench/diag_mma.py: no copies), the example with clusters of two (b multicast) at 4096^3,
then the example and the cluster variant at 8192^3 fp16.

    ncu --clock-control none --kernel-name regex:'gemm_mma_tma|mma_peak' \\
        --launch-count 7 --section ... -o prof python3 bench/prof_mma.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))


def main() -> None:
    import sweep_mma as sw
    import thork as tk
    import torch

    bench = sw._load("bench_mma_prof", ROOT / "bench" / "bench_mma.py")
    bench.CHAINS = sw.CEILING[0]
    chains, warps, per_sm = sw.CEILING
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    blocks, threads = sms * per_sm, 32 * warps
    res = torch.empty(blocks * threads, device="cuda", dtype=torch.float32)
    runs = []
    for random in (False, True):
        kern = bench.ceiling_kernel(tk.dt.float16, random)[blocks, threads]
        runs.append((f"ceiling random={random}",
                     lambda k=kern: k(res, 2048 // chains, target="gpu")))
    with tempfile.TemporaryDirectory() as tmp:
        sw.write_sources(Path(tmp))
        example, no_tma = sw._module("example", Path(tmp)), sw._module("no_tma", Path(tmp))
        base = sw.VARIANTS["base 128x256/4"]
        cl2 = sw.VARIANTS["cluster2 128x256/4"]
        for n, cases in ((4096, (("example", example, base), ("no_tma", no_tma, base),
                                 ("cluster2", example, cl2))),
                         (8192, (("example", example, base), ("cluster2", example, cl2)))):
            a = torch.randn(n, n, device="cuda", dtype=torch.float16)
            b = torch.randn(n, n, device="cuda", dtype=torch.float16)
            c = torch.empty(n, n, device="cuda", dtype=torch.float32)
            for label, mod, kw in cases:
                fn = mod.prepare_tma(c, a, b, n, n, n, "float16", target="gpu", **kw)
                runs.append((f"{label} {n}^3 fp16", fn))
            for label, fn in runs:
                print(f"launch: {label}", flush=True)
                fn()
            torch.cuda.synchronize()
            runs = []
    print("profiled: ceiling near-1, ceiling random, example / no_tma / cluster2 4096^3, "
          "example / cluster2 8192^3 (fp16, one launch each)")


if __name__ == "__main__":
    main()
