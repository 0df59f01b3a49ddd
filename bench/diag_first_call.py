"""The fresh-process first ``kernel[grid, block](DeviceArrays)`` call without a GPU: the
CUDA driver is replaced by a stand-in (module load, function look-up and attributes
answer at once, or after ``--load-ms`` of a GIL-free sleep standing for the driver's
``cuModuleLoadData``; ``cuLaunchKernel`` and the context calls are a C no-op), so the host
work of issue 11's cache-hit row is measured where there is no device. The first child
fills the cache (NVRTC compiles once) and is dropped.

    python bench/diag_first_call.py [--runs 20] [--load-ms 0] [--phases] [--profile]
                                    [--compare /path/to/other/checkout]

``--phases`` times the call's parts in each child (``time.thread_time_ns`` around a few
functions: trace, the selection record's look-up, the native module, the module load,
the binder); ``--profile`` prints one child's cProfile of the call. ``--compare``
alternates this checkout's processes with another's (its ``packages/*/src``).
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
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _floor import KERNEL_SOURCE  # noqa: E402

CHILD = textwrap.dedent('''
    import ctypes, json, os, sys, time
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    load_ms, mode = float(sys.argv[2]), sys.argv[3]
    import thork
    from thork_core import _cuda, DeviceArray
    from seedkernel import matrix_add

    NOOP = ctypes.cast(ctypes.CDLL(None).sched_yield, ctypes.c_void_p).value

    class _Attr:
        def __getattr__(self, name):
            return name

    class FakeDriver:
        """What a first call asks of cuda.bindings' driver, answered without a GPU."""
        CUfunction_attribute = CUdevice_attribute = CUpointer_attribute = _Attr()
        CUresult = CUmodule = CUfunction = int
        def cuInit(self, flags): return (0,)
        def cuDeviceGetCount(self): return (0, 1)
        def cuDeviceGet(self, i): return (0, i)
        def cuDeviceGetAttribute(self, attr, dev):  # an H200: compute capability 9.0
            return (0, 9 if attr.endswith("MAJOR") else 0)
        def cuDevicePrimaryCtxRetain(self, dev): return (0, 4096)
        def cuCtxSetCurrent(self, ctx): return (0,)
        def cuModuleLoadData(self, data):
            if load_ms:
                time.sleep(load_ms / 1e3)  # the driver's load, GIL released
            return (0, 8192)
        def cuModuleGetFunction(self, mod, name): return (0, 12288)
        def cuFuncGetAttribute(self, attr, fn): return (0, 0)

    fake = FakeDriver()
    _cuda.driver = lambda: fake
    _cuda.gpu_status = lambda: (True, "stubbed")
    _cuda.device_count = lambda: 1
    _cuda.function_address = lambda name: NOOP
    _cuda.context(0)  # the user's arrays would have made it
    n = 1024
    buf = np.zeros(3 * n, np.float32)  # never dereferenced: the launch is a no-op
    ptr = buf.ctypes.data
    args = [DeviceArray.wrap(ptr + 4 * n * i, (n,), "float32") for i in range(3)]

    W = time.perf_counter_ns
    P = time.thread_time_ns  # phases: this thread's CPU time (robust to a busy host)
    phases = {}
    if mode == "phases":
        import functools
        def timed(owner, attr, label, prop=False):
            fn = getattr(owner, attr) if not prop else owner.__dict__[attr].fget
            @functools.wraps(fn)
            def wrapper(*a, **k):
                t0 = P()
                try:
                    return fn(*a, **k)
                finally:
                    phases[label] = phases.get(label, 0) + (P() - t0) / 1e6
            setattr(owner, attr, wrapper if not prop else property(wrapper))
        from thork import _kernel
        from thork_core import _build, _native, _gpu, _cache
        timed(_kernel.Kernel, "_trace", "trace")
        timed(_kernel, "_launch_type", "launch_type (native module)")
        timed(_build, "_recorded", "record look-up + load")
        timed(_build, "traced_build", "traced record + load")
        timed(_build, "_record_choice", "  selection record check")
        from thork import _fingerprint
        timed(_kernel, "fingerprint", "fingerprint")
        timed(_cache.DiskCache, "get", "  disk cache get (each)")
        timed(_build, "_record_base", "  record base")
        timed(_build, "_record_target", "  record target")
        timed(_build, "_cached", "  disk read")
        timed(_build, "_load", "  load")
        timed(_gpu, "_binder", "    binder")
        timed(_native, "native_module", "native_module (all calls)")
        timed(_native, "_source_key", "  native source key")
        timed(_native, "_checked_before", "  native checked before")
        timed(_native, "_load", "  native dlopen")
        from thork_core import _memo, _renderer, _launch
        timed(_memo, "_load", "memo.json read")
        timed(_memo, "installed_fingerprint", "  installed fingerprint")
        timed(_build, "resolve_arch", "resolve_arch")
        timed(_renderer.CudaRenderer, "render", "render")
        timed(_build, "cache_key", "cache key")
        timed(_gpu, "make_launcher", "    make_launcher")
        timed(_gpu.GpuExecutable, "_read_attributes", "    attributes")
    if mode == "profile":
        import cProfile, pstats
        pr = cProfile.Profile()
        pr.enable()
    mods0 = set(sys.modules)
    c0 = time.thread_time_ns()
    t0 = W()
    matrix_add[n // 128, 128](*args)
    t1 = W()
    c1 = time.thread_time_ns()
    if mode == "profile":
        pr.disable()
        st = pstats.Stats(pr).stats
        rows = sorted(st.items(), key=lambda kv: -kv[1][3])[:60]
        for (f, line, name), (cc, nc, tt, ct, _) in rows:
            print(f"{ct * 1e3:8.3f} {tt * 1e3:8.3f} {nc:5d}  {os.path.basename(f)}:{line}"
                  f"({name})", file=sys.stderr)
    new = sorted(set(sys.modules) - mods0)
    print(json.dumps({"ms": (t1 - t0) / 1e6, "cpu_ms": (c1 - c0) / 1e6,
                      "cache": matrix_add.compile_info.cache,
                      "phases": phases, "imported": new}))
''')


def tree_env(tree: Path | None, cache: str) -> dict[str, str]:
    env = dict(os.environ, THORK_CACHE_DIR=cache,
               OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # users' processes import from .pyc files
    env.pop("THORK_ARCH", None)  # the device's answer, as on the GPU (the stub: sm_90)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            str(p) for p in sorted((tree / "packages").glob("*/src")))
    return env


def run_child(work: Path, env: dict[str, str], load_ms: float, mode: str) -> dict[str, Any]:
    r = subprocess.run([sys.executable, str(work / "child.py"), str(work), str(load_ms), mode],
                       env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(r.stderr)
    if mode == "profile":
        print(r.stderr)
    out: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--load-ms", type=float, default=0.0,
                    help="time the stand-in's module load takes (GIL released)")
    ap.add_argument("--phases", action="store_true")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--compare", type=Path, default=None)
    ap.add_argument("--ab", default=None, metavar="VAR=VALUE",
                    help="alternate with this checkout run with VAR=VALUE set")
    opt = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="thork-first-diag-"))
    (work / "seedkernel.py").write_text(KERNEL_SOURCE)
    (work / "child.py").write_text(CHILD)
    trees: dict[str, Path | None] = {"this": HERE.parent if opt.compare else None}
    if opt.compare:
        trees["compare"] = opt.compare.resolve()
    envs = {k: tree_env(t, str(work / f"cache-{k}")) for k, t in trees.items()}
    if opt.ab:
        var, _, value = opt.ab.partition("=")
        trees[opt.ab] = None
        envs[opt.ab] = dict(tree_env(None, str(work / "cache-ab")), **{var: value})
    mode = "phases" if opt.phases else "plain"
    for env in envs.values():  # (made first: a folder made later in the script's folder
        os.makedirs(env["THORK_CACHE_DIR"], exist_ok=True)  # changes its stamp, and
    for env in envs.values():  # the first variant's record would miss on that)
        for _ in range(2):  # fill the cache, then settle the memo
            run_child(work, env, opt.load_ms, "plain")
    for env in envs.values():
        run_child(work, env, opt.load_ms, "plain")  # after every variant's __pycache__
    results: dict[str, list[dict[str, Any]]] = {k: [] for k in envs}
    for _ in range(opt.runs):  # alternating: a shared machine's drifts hit all alike
        for k, env in envs.items():
            got = run_child(work, env, opt.load_ms, mode)
            assert got["cache"] == "disk", got
            results[k].append(got)
    print(f"first kernel[...](DeviceArrays), fresh process, driver stubbed (load "
          f"{opt.load_ms} ms): medians of {opt.runs} (ms)")
    for k, rs in results.items():
        ms = [r["ms"] for r in rs]
        label = str(trees[k]) if trees[k] else k if k == opt.ab else "this environment"
        cpu = [r["cpu_ms"] for r in rs]
        print(f"  {label}: {statistics.median(ms):.3f} (min {min(ms):.3f}, "
              f"max {max(ms):.3f}); the call's own CPU time (this thread; robust to a "
              f"busy host) {statistics.median(cpu):.3f} (min {min(cpu):.3f})")
        print(f"    modules imported by the call: {', '.join(rs[-1].get('imported', []))}")
        names = sorted({n for r in rs for n in r["phases"]})
        for n in names:
            print(f"    {n:32s} {statistics.median(r['phases'].get(n, 0) for r in rs):.3f}")
    if opt.profile:
        run_child(work, next(iter(envs.values())), opt.load_ms, "profile")


if __name__ == "__main__":
    main()
