"""Where the mma.sync GEMM's time goes: examples/gemm_mma.py beside probes of itself.

Each probe is the example's source with one part changed (a text substitution, so it
follows the example as it is): ``same_k`` copies the first k tile every time (the same
bytes move between the same memories, but every read hits L2), ``no_copies`` starts no
copy in the main loop (the prologue's tiles are multiplied again and again: ldmatrix, mma
and the barriers alone), ``no_epilogue`` stores nothing (a condition the compiler cannot
see through, so the multiplications stay). Only ``example`` computes the product (checked);
the probes' TFLOP/s count the same multiplications. One tiling (``--tile``, default the
example's), fp16 and bf16, 4096^3 and 8192^3, ``torch.matmul`` beside.

``--tma`` probes the TMA-fed kernel (``gemm_tma_kernel``, tiling ``--tma-tile``) instead:
``no_epilogue`` as above; ``no_tma``: the producer issues no copy, it only arrives on the
"full" barrier (the consumers multiply whatever the stages hold: ldmatrix, mma and the
mbarrier hand-over alone); ``same_k``: every copy is of the first k tile (L2-resident:
the copies' shared-memory side without DRAM).

    python bench/diag_mma.py [--tile 128,256,64,64,64,4,8,1]
    python bench/diag_mma.py --tma [--tma-tile 128,256,64,64,4,8]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: probe name -> (text in examples/gemm_mma.py, its replacement), applied in order.
PROBES: dict[str, list[tuple[str, str]]] = {
    "same_k": [("src_at = a_src + k0 + a_step * i", "src_at = a_src + a_step * i"),
               ("src_at = b_src + k0n + b_step * i", "src_at = b_src + b_step * i")],
    "no_copies": [("        stage = tk.var(0, u32)",
                   "        parts = [[] for _ in range(KS)]\n        stage = tk.var(0, u32)")],
    "no_epilogue": [("with tk.if_((r < M) & (col < N)):\n                            c.vstore",
                     "with tk.if_((r < M) & (col < N) & (K < 0)):\n"
                     "                            c.vstore")],
}


#: The same for the TMA-fed kernel.
TMA_PROBES: dict[str, list[tuple[str, str]]] = {
    "same_k": [("ta, kt * BK, m0, full, stage)", "ta, 0, m0, full, stage)"),
               ("kt * BK, full, stage)", "0, full, stage)")],
    "no_tma": [("tk.mbarrier_expect_tx(full, stage, (A_TILE + B_TILE) * 2)",
                "tk.mbarrier_arrive(full, stage)"),
               ("tk.tma_load(sa, stage * A_TILE, ta, kt * BK, m0, full, stage)", "pass"),
               ("for j in range(BOXES):", "for j in range(0):")],
    "no_epilogue": [("with tk.if_((r < M) & (col < N)):\n"
                     "                                    c.vstore",
                     "with tk.if_((r < M) & (col < N) & (K < 0)):\n"
                     "                                    c.vstore")],
}


def load(name: str, source: str, folder: Path) -> Any:
    path = folder / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tile", default="128,256,64,64,64,4,8,1",
                    help="BM,BN,BK,WM,WN,STAGES,GROUP_M,SWIZZLE")
    ap.add_argument("--tma", action="store_true", help="probe the TMA-fed kernel")
    ap.add_argument("--tma-tile", default="128,256,64,64,4,8",
                    help="BM,BN,WM,WN,STAGES,GROUP_M (with --tma)")
    opts = ap.parse_args()
    if opts.tma:
        return main_tma(opts)
    cfg = tuple(int(x) for x in opts.tile.split(","))
    bm, bn, bk, wm, wn, st, g, sw = cfg
    with tempfile.TemporaryDirectory() as tmp:
        mods = {name: load(f"diag_{name}", src, Path(tmp))
                for name, src in sources(PROBES).items()}
        kernels = [m.gemm_kernel(d).specialize(BM=bm, BN=bn, BK=bk, WM=wm, WN=wn, STAGES=st,
                                               ALIGNED=True, GROUP_M=g, SWIZZLE=bool(sw))
                   for m in mods.values() for d in ("float16", "bfloat16")]

        def launch(m: Any, name: str, a: Any, b: Any, c: Any, n: int) -> Any:
            k = m.gemm_kernel(name)[(n // bn, n // bm), (bm // wm) * (bn // wn) * 32,
                                    m.shared_bytes(bm, bn, bk, st, bool(sw))]
            return lambda: k(c, a, b, n, n, n, *cfg[:6], True, g, bool(sw), target="gpu")

        return measure(mods, kernels, launch, f"tile {opts.tile}")


def main_tma(opts: argparse.Namespace) -> int:
    """--tma: the TMA-fed kernel beside its probes."""
    bm, bn, wm, wn, st, g = (int(x) for x in opts.tma_tile.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        mods = {name: load(f"diag_tma_{name}", src, Path(tmp))
                for name, src in sources(TMA_PROBES).items()}
        kernels = [m.gemm_tma_kernel(d).specialize(BM=bm, BN=bn, WM=wm, WN=wn, STAGES=st,
                                                   GROUP_M=g, PAIRS=True, CTAS=1)
                   for m in mods.values() for d in ("float16", "bfloat16")]

        def launch(m: Any, name: str, a: Any, b: Any, c: Any, n: int) -> Any:
            return m.prepare_tma(c, a, b, n, n, n, name, BM=bm, BN=bn, WM=wm, WN=wn,
                                 STAGES=st, GROUP_M=g, target="gpu")

        return measure(mods, kernels, launch, f"TMA tile {opts.tma_tile}")


def sources(probes: dict[str, list[tuple[str, str]]]) -> dict[str, str]:
    """examples/gemm_mma.py's text (``example``) and each probe's, its substitutions
    applied (SystemExit when one no longer matches the example)."""
    text = (ROOT / "examples" / "gemm_mma.py").read_text()
    out = {"example": text}
    for probe, subs in probes.items():
        src = text
        for old, new in subs:
            if old not in src:
                raise SystemExit(f"probe {probe}: {old!r} is no longer in the example")
            src = src.replace(old, new)
        out[probe] = src
    return out


def measure(mods: dict[str, Any], kernels: list[Any],
            launch: Callable[[Any, str, Any, Any, Any, int], Callable[[], None]],
            title: str) -> int:
    """Build ``kernels`` (8 threads), then at 4096^3 and 8192^3, fp16 and bf16, time
    ``torch.matmul`` and each module's ``launch(module, dtype name, a, b, c, n)`` (a
    function that runs its GEMM into ``c``), checking the example's product; print
    TFLOP/s."""
    import torch
    from triton.testing import do_bench

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: k.precompile("gpu"), kernels))
    rows: dict[str, list[float]] = {name: [] for name in ["torch.matmul", *mods]}
    for n in (4096, 8192):
        for name, tdt in (("float16", torch.float16), ("bfloat16", torch.bfloat16)):
            a = torch.randn(n, n, device="cuda", dtype=tdt)
            b = torch.randn(n, n, device="cuda", dtype=tdt)
            c = torch.empty(n, n, device="cuda", dtype=torch.float32)
            ref = torch.matmul(a.float(), b.float())
            flops = 2.0 * n ** 3
            rows["torch.matmul"].append(
                flops / do_bench(lambda a=a, b=b: torch.matmul(a, b),
                                 return_mode="median") / 1e9)
            for probe, m in mods.items():
                fn = launch(m, name, a, b, c, n)
                c.fill_(float("nan"))
                fn()
                if probe == "example":
                    ok = bool(torch.allclose(c, ref, rtol=1e-2, atol=1e-2 * n ** 0.5))
                    print(f"{n}^3 {name}: example {'ok' if ok else 'MISMATCH'}")
                rows[probe].append(flops / do_bench(fn, return_mode="median") / 1e9)
            del a, b, c, ref
            torch.cuda.empty_cache()
    print(f"\nTFLOP/s, {title}: 4096^3 fp16, bf16, 8192^3 fp16, bf16")
    for name, vals in rows.items():
        print(f"{name:<14}" + "".join(f"{v:9.1f}" for v in vals))
    return 0


if __name__ == "__main__":
    sys.exit(main())
