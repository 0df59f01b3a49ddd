"""The first ``kernel[grid, block](arrays)`` call in a fresh process, after ``import thork``
and (GPU) context creation: the issue's cache-hit measure, median of N processes.

    python bench/first_call.py [--target cpu|gpu] [--runs 10] [--profile]
                               [--variant LABEL:VAR=VALUE[;VAR=VALUE...]]...

``--variant`` (repeatable) measures several environments in one run, their processes
alternating (a shared machine's drifts hit all alike), each with its own cache folder:
e.g. ``--variant off:THORK_SELECTION_RECORD=0 --variant on:THORK_SELECTION_RECORD=1`` or
a ``PYTHONPATH`` naming another checkout's sources.

Each child imports Thork and NumPy (GPU: makes the context and the device arrays), then
times the first call (registry, trace, disk-cache hit, load, native launch module,
binding, launch: on the CPU target with NumPy arrays, on the GPU with DeviceArrays). The
first child fills the cache and is dropped. ``--profile`` prints one child's cProfile of
the call (cumulative time, top 25).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FLOORS: list[dict[str, float]] = []  # the C floor's rounds (GPU only)
sys.path.insert(0, str(HERE))

from _floor import KERNEL_SOURCE  # noqa: E402

CHILD = textwrap.dedent('''
    import time
    t_start = time.perf_counter()
    import json, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import thork
    from seedkernel import matrix_add
    target, profile = sys.argv[2], sys.argv[3] == "1"
    n = 1024
    a = np.arange(n, dtype=np.float32)
    b = np.ones(n, dtype=np.float32)
    if target == "gpu":  # the user's arrays would already have created the context
        from thork_core import DeviceArray
        out, da, db = (DeviceArray.from_host(np.zeros(n, np.float32)),
                       DeviceArray.from_host(a), DeviceArray.from_host(b))
        args, kw = (out, da, db), {}
    else:
        out = np.zeros(n, np.float32)
        args, kw = (out, a, b), {"target": "cpu"}
    t_imp = time.perf_counter()
    if profile:
        import cProfile, pstats
        pr = cProfile.Profile()
        pr.enable()
    t0 = time.perf_counter()
    matrix_add[n // 128, 128](*args, **kw)
    t1 = time.perf_counter()
    if profile:
        pr.disable()
        pstats.Stats(pr, stream=sys.stderr).sort_stats("cumulative").print_stats(25)
    res = out.to_host() if target == "gpu" else out
    assert np.array_equal(res, a + b), "wrong result"
    if len(sys.argv) > 4:  # the cache-filling child hands its cubin to the C floor
        with open(sys.argv[4], "wb") as f:
            f.write(matrix_add.artifact(matrix_add.compile_info.arch).data)
    from thork_core import plugins
    print(json.dumps({"ms": (t1 - t0) * 1e3, "import_ms": (t_imp - t_start) * 1e3,
                      "cache": matrix_add.compile_info.cache,
                      "plugins": plugins().loaded(),
                      "modules": sorted(m for m in sys.modules
                                        if m.startswith(("thork", "fkl", "torch", "cupy")))}))
''')


def _c_floor(cubin: Path) -> dict[str, float]:
    """One fresh process of ``first_load_floor`` on ``cubin`` (microseconds per phase)."""
    from _floor import _build

    exe = _build(HERE / "first_load_floor.c")
    r = subprocess.run([str(exe), str(cubin), "matrix_add"], capture_output=True, text=True,
                       timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"first_load_floor failed ({r.returncode}): {r.stderr}")
    got = {k: float(v) for k, _, v in (ln.partition("=") for ln in r.stdout.split())}
    if got.get("ok") != 1.0:
        raise RuntimeError(f"first_load_floor wrote wrong values:\n{r.stdout}")
    return got


def _report_floor(floors: list[dict[str, float]]) -> None:
    if not floors:
        return
    med = {k: statistics.median(f[k] for f in floors) for k in floors[0]}
    print(f"C first-launch floor, fresh process (first_load_floor.c, same cubin): median "
          f"{med['first_total_us'] / 1e3:.2f} ms (read {med['read_us']:.0f} us, load "
          f"{med['load_us']:.0f}, function {med['function_us']:.0f}, launch "
          f"{med['launch_us']:.0f}); a second module in the same process "
          f"{med['second_total_us']:.0f} us; {len(floors)} processes")
    print("  all (ms): " + " ".join(f"{f['first_total_us'] / 1e3:.2f}" for f in floors))


def first_call_runs(target: str, runs: int, profile: bool = False) -> list[dict[str, Any]]:
    """One result per fresh process (``ms``: the first call; ``import_ms``; ``cache``;
    ``plugins``; ``modules``; ``process_ms``), the cache-filling first process dropped."""
    work = Path(tempfile.mkdtemp(prefix="thork-first-call-"))
    (work / "seedkernel.py").write_text(KERNEL_SOURCE)
    (work / "child.py").write_text(CHILD)
    env = dict(os.environ, THORK_CACHE_DIR=str(work / "cache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # users' processes import from .pyc files
    results = []
    for i in range(runs + 1):
        prof = "1" if profile and i == runs else "0"
        dump = [str(work / "floor.cubin")] if target == "gpu" and i == 0 else []
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, str(work / "child.py"), str(work), target,
                            prof, *dump], capture_output=True, text=True, env=env,
                           timeout=600)
        if r.returncode != 0:
            raise RuntimeError(r.stderr)
        if prof == "1":
            print(r.stderr)
        res = json.loads(r.stdout.strip().splitlines()[-1])
        res["process_ms"] = (time.perf_counter() - t0) * 1e3
        if i:
            results.append(res)
            if target == "gpu":
                FLOORS.append(_c_floor(work / "floor.cubin"))
    return results


def _report(label: str, target: str, results: list[dict[str, Any]]) -> None:
    ms = [r["ms"] for r in results]
    last = results[-1]
    print(f"first kernel[...] call, fresh process, {target}{label}: "
          f"median {statistics.median(ms):.2f} ms "
          f"(min {min(ms):.2f}, max {max(ms):.2f}, {len(ms)} processes; cache: {last['cache']}); "
          f"imports {statistics.median(r['import_ms'] for r in results):.1f} ms; "
          f"process {statistics.median(r['process_ms'] for r in results):.0f} ms")
    print(f"  plugins imported: {', '.join(last['plugins'])}")
    print(f"  modules: {', '.join(last['modules'])}")


def variant_runs(target: str, runs: int, variants: list[str]) -> None:
    """The variants' processes alternating, ``runs`` each (plus one cache fill each)."""
    work = Path(tempfile.mkdtemp(prefix="thork-first-call-"))
    (work / "seedkernel.py").write_text(KERNEL_SOURCE)
    (work / "child.py").write_text(CHILD)
    envs: dict[str, dict[str, str]] = {}
    for i, spec in enumerate(variants):
        label, _, assigns = spec.partition(":")
        env = dict(os.environ, THORK_CACHE_DIR=str(work / f"cache-{i}"))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        for a in filter(None, assigns.split(";")):
            var, _, value = a.partition("=")
            env[var] = value
        envs[label] = env
    results: dict[str, list[dict[str, Any]]] = {k: [] for k in envs}
    for i in range(runs + 1):
        for j, (label, env) in enumerate(envs.items()):
            dump = [str(work / "floor.cubin")] if target == "gpu" and i == j == 0 else []
            t0 = time.perf_counter()
            r = subprocess.run([sys.executable, str(work / "child.py"), str(work), target,
                                "0", *dump], capture_output=True, text=True, env=env,
                               timeout=600)
            if r.returncode != 0:
                raise RuntimeError(f"{label}: {r.stderr}")
            res = json.loads(r.stdout.strip().splitlines()[-1])
            res["process_ms"] = (time.perf_counter() - t0) * 1e3
            if i:
                results[label].append(res)
        if i and target == "gpu":
            FLOORS.append(_c_floor(work / "floor.cubin"))
        if i:  # each round as it ends: a run cut short still reports what it measured
            floor = f"  C floor {FLOORS[-1]['first_total_us'] / 1e3:.2f}" if FLOORS else ""
            print(f"round {i}: " + "  ".join(f"{k} {v[-1]['ms']:.2f}"
                                            for k, v in results.items()) + floor,
                  flush=True)
    for label, rs in results.items():
        _report(f" [{label}]", target, rs)
        print("  all (ms): " + " ".join(f"{r['ms']:.2f}" for r in rs))
    _report_floor(FLOORS)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="cpu")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--variant", action="append", default=[],
                    help="LABEL:VAR=VALUE[;VAR=VALUE...] (repeat: alternating processes)")
    opt = ap.parse_args()
    if opt.variant:
        variant_runs(opt.target, opt.runs, opt.variant)
        return
    _report("", opt.target, first_call_runs(opt.target, opt.runs, opt.profile))
    _report_floor(FLOORS)


if __name__ == "__main__":
    main()
