"""Cold compile time per compiler for the compiler test-kernel suite (no GPU needed).

For each compiler (NVRTC, nvcc to cubin and to a host library, each clang-N found, to PTX
and to cubin) every suite kernel is compiled once into an empty cache directory, so every
number is a cold compile; the table shows the median per kernel, with min and max. CuPy's
NVRTC path runs on the same sources when CuPy is importable. Usage::

    python bench/bench_compilers.py [--out DIR] [--arch sm_90]

Writes ``DIR/bench_compilers.json`` and prints the table last.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the suite lives in the tests' helpers


def _suite() -> dict[str, Any]:
    from helpers.compiler_suite import SUITE

    return SUITE


def _time_cold(fn: Callable[[], Any]) -> float:
    """Milliseconds of one call made against a brand-new cache directory."""
    with tempfile.TemporaryDirectory(prefix="thork-bench-cache-") as d:
        os.environ["THORK_CACHE_DIR"] = d
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3


def _row(label: str, times: list[float], note: str = "") -> dict[str, Any]:
    return {"compiler": label, "kernels": len(times), "median_ms": statistics.median(times),
            "min_ms": min(times), "max_ms": max(times), "note": note}


def _thork_rows(arch: str, sources: dict[str, tuple[Any, str]]) -> list[dict[str, Any]]:
    from thork_core import compile_artifact, plugins

    comps = {c.name: c for c in plugins().compilers()}
    plan: list[tuple[str, str, str, dict[str, str]]] = [
        ("nvrtc", "cubin", "NVRTC → cubin", {}),
        ("nvcc", "cubin", "nvcc → cubin", {}),
        ("nvcc", "ptx", "nvcc → PTX", {}),
        ("nvcc", "hostlib", "nvcc → host .so", {}),
    ]
    for n in range(40, 9, -1):
        clang = shutil.which(f"clang++-{n}")
        if clang:
            plan.append(("clang", "ptx", f"clang-{n} → PTX", {"THORK_CLANG": clang}))
            plan.append(("clang", "cubin", f"clang-{n} → cubin (+ptxas)", {"THORK_CLANG": clang}))
    rows = []
    for name, kind, label, env in plan:
        comp = comps.get(name)
        if comp is None:
            rows.append({"compiler": label, "note": f"{name} plugin not installed"})
            continue
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            ok, why = comp.available()
            if not ok:
                rows.append({"compiler": label, "note": f"unavailable: {why}"})
                continue
            times, fallbacks = [], 0
            for ir, src in sources.values():
                got: dict[str, Any] = {}

                def run(ir: Any = ir, src: str = src, got: dict[str, Any] = got,
                        comp: Any = comp, kind: str = kind) -> None:
                    got["art"] = compile_artifact(ir, src, comp, kind, arch)[0]

                times.append(_time_cold(run))
                fallbacks += bool(got["art"].info.get("fallback"))
            note = f"{fallbacks} fell back to nvcc" if fallbacks else ""
            rows.append(_row(label, times, note))
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return rows


def _cupy_row(arch: str, sources: dict[str, tuple[Any, str]]) -> dict[str, Any]:
    """CuPy's own NVRTC path on the same sources (its compiler, not its launch cache)."""
    try:
        import cupy
    except Exception as exc:  # ImportError, or a CuPy that cannot find CUDA
        return {"compiler": "CuPy NVRTC (anchor)",
                "note": f"skipped: CuPy not importable ({type(exc).__name__})"}
    times = []
    try:
        cupy.cuda.runtime.free(cupy.cuda.runtime.malloc(1))  # context outside the timing
        for i, (_, src) in enumerate(sources.values()):
            # A unique comment defeats CuPy's memory and disk caches: a cold compile.
            mod = cupy.RawModule(code=f"{src}\n// cold {time.time_ns()} {i}\n",
                                 options=("-std=c++17",), backend="nvrtc")
            t0 = time.perf_counter()
            mod.compile()
            times.append((time.perf_counter() - t0) * 1e3)
    except Exception as exc:
        return {"compiler": "CuPy NVRTC (anchor)",
                "note": f"skipped: {type(exc).__name__}: {str(exc)[:120]}"}
    return _row("CuPy NVRTC (anchor)", times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="folder for bench_compilers.json")
    ap.add_argument("--arch", default="sm_90")
    args = ap.parse_args()
    import thork as tk
    from thork_core import CudaRenderer

    sources = {}
    for name, case in _suite().items():
        k = tk.jit(case.fn)
        sources[name] = (k.ir, CudaRenderer().render(k.ir))
    rows = _thork_rows(args.arch, sources) + [_cupy_row(args.arch, sources)]
    result = {"arch": args.arch, "kernels": list(sources), "rows": rows}
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bench_compilers.json").write_text(json.dumps(result, indent=2))
    base = next((r["median_ms"] for r in rows if r["compiler"].startswith("NVRTC")
                 and "median_ms" in r), None)
    print(f"\nCold compile per kernel, {len(sources)} suite kernels, {args.arch} "
          "(fresh cache dir per compile)")
    print(f"{'compiler':<28}{'median ms':>10}{'min':>9}{'max':>9}{'× NVRTC':>9}  note")
    for r in rows:
        if "median_ms" not in r:
            print(f"{r['compiler']:<28}{'-':>10}{'-':>9}{'-':>9}{'-':>9}  {r['note']}")
            continue
        ratio = f"{r['median_ms'] / base:.1f}" if base else "-"
        print(f"{r['compiler']:<28}{r['median_ms']:>10.1f}{r['min_ms']:>9.1f}"
              f"{r['max_ms']:>9.1f}{ratio:>9}  {r['note']}")


if __name__ == "__main__":
    main()
