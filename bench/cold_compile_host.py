"""Thork's cold compile against NVRTC alone, on the host: the part of issue 11's row "cold
compile, trace -> loaded (NVRTC) <= 1.0x CuPy" that needs no GPU (session 13).

In one process, interleaved (the order alternates each round), medians of ``--reps``:

* **Thork**: ``kernel.compile("gpu", "nvrtc")`` of a kernel never built before (a unique
  constant: the memory and disk caches miss): fingerprint, the traced record's look-up,
  trace, render, key, cache look-ups, NVRTC, the hand-off to the cache writer and the
  module load with the CUDA driver replaced by a stand-in that answers at once (so the
  load is Thork's glue only: launcher, binder, attributes). The background write is
  finished after each timed call, outside the time.
* **NVRTC alone**: create the program, compile, cubin size and cubin, destroy, through
  ``cuda.bindings.nvrtc`` on the same text (the translation unit Thork compiles, with
  another constant) and the same options (the plugin's flags).
* With NVRTC 12.8+ also (session 13, the precompiled prelude): **Thork without PCH**
  (``THORK_NVRTC_PCH=0``: the whole text, as before) and **NVRTC alone through the
  prelude header with -pch** (the plugin's split of the same text, its options): the
  order of the four rotates each round. Thork's default compile uses the PCH made by the
  warm-up's second compile, as every cold compile after a process's second does.

Both are timed as wall time (``perf_counter``) and as this thread's CPU time
(``thread_time``: steadier on a shared host; NVRTC runs on the calling thread). ``over``
is the median of each round's difference (Thork minus NVRTC). ``--phases`` adds a
second pass with timers around Thork's parts (their medians; the timers cost a little).

    python bench/cold_compile_host.py [--reps 21] [--phases] [--json]

Needs ``cuda-bindings`` with NVRTC and the ``thork-backend-nvrtc`` plugin; no GPU.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any


def _stub_driver() -> None:
    """Replace the CUDA driver with a stand-in that answers at once (an H200's compute
    capability 9.0), so a build loads without a GPU."""
    from thork_core import _cuda

    noop = ctypes.cast(ctypes.CDLL(None).getpid, ctypes.c_void_p).value

    class _Attr:
        def __getattr__(self, name: str) -> str:
            return name

    class FakeDriver:
        CUfunction_attribute = CUdevice_attribute = CUpointer_attribute = _Attr()
        CUresult = CUmodule = CUfunction = int

        def cuInit(self, flags: int) -> tuple[int]:
            return (0,)

        def cuDeviceGetCount(self) -> tuple[int, int]:
            return (0, 1)

        def cuDeviceGet(self, i: int) -> tuple[int, int]:
            return (0, i)

        def cuDeviceGetAttribute(self, attr: str, dev: int) -> tuple[int, int]:
            return (0, 9 if attr.endswith("MAJOR") else 0)

        def cuDevicePrimaryCtxRetain(self, dev: int) -> tuple[int, int]:
            return (0, 4096)

        def cuCtxSetCurrent(self, ctx: int) -> tuple[int]:
            return (0,)

        def cuModuleLoadData(self, data: bytes) -> tuple[int, int]:
            return (0, 8192)

        def cuModuleGetFunction(self, mod: int, name: bytes) -> tuple[int, int]:
            return (0, 12288)

        def cuFuncGetAttribute(self, attr: str, fn: int) -> tuple[int, int]:
            return (0, 0)

    fake = FakeDriver()
    _cuda.driver = lambda: fake
    _cuda.gpu_status = lambda: (True, "stubbed")
    _cuda.device_count = lambda: 1
    _cuda.function_address = lambda name: noop
    _cuda.context(0)  # the user's arrays would have made it
    _cuda._FAST[:] = [None, None]  # context calls through the stand-in, not libcuda


def cold_kernel(c: float) -> Any:
    """The cold-compile kernel of bench_core's GPU row and of this bench, with the
    constant ``c`` (a new kernel, never built before, for each new ``c``)."""
    import thork as tk

    @tk.jit(compiler="nvrtc")
    def cold_add(out: tk.DevicePointer[tk.dt.float32],
                 a: tk.DevicePointer[tk.dt.float32], b: tk.DevicePointer[tk.dt.float32],
                 bid: tk.Uint[tk.BlockIdx], tid: tk.Uint[tk.ThreadIdx],
                 bdm: tk.Uint[tk.BlockDim]):
        i = bid * bdm + tid
        out[i] = a[i] + b[i] * c

    return cold_add


_NVRTC = "  NVRTC through the plugin"
_PHASES = (  # (module, owner attribute or "", function, label)
    ("thork._kernel", "", "fingerprint", "fingerprint (trace inputs)"),
    ("thork._kernel", "", "traced_build", "traced record look-up (miss)"),
    ("thork._kernel", "Kernel", "_trace", "trace"),
    ("thork_core._build", "", "_recorded", "selection record + render + key + look-up"),
    ("thork_core._renderer", "CudaRenderer", "render", "render"),
    ("thork_core._build", "", "cache_key", "cache key (each)"),
    ("thork_core._build", "", "_cached", "disk look-up before the lock (each)"),
    ("thork_core._build", "", "_fetch", "fetch: lock, look-up, NVRTC, hand-off"),
    ("thork_nvrtc._compiler", "NvrtcCompiler", "compile", _NVRTC),
    ("thork_core._cache", "DiskCache", "put_later", "  hand-off to the cache writer"),
    ("thork_core._build", "", "_load", "load (driver stubbed: Thork's glue)"),
    ("thork_core._build", "", "_write_record", "selection record write check"),
)


def _instrument(phases: dict[str, list[float]], clock: Callable[[], int]) -> None:
    """Wrap each function of :data:`_PHASES` to add its time (ms) under its label."""
    import importlib

    for module, owner, name, label in _PHASES:
        mod = importlib.import_module(module)
        host = getattr(mod, owner) if owner else mod
        fn = getattr(host, name)

        def wrapper(*a: Any, __fn: Any = fn, __label: str = label, **k: Any) -> Any:
            t0 = clock()
            try:
                return __fn(*a, **k)
            finally:
                phases.setdefault(__label, []).append((clock() - t0) / 1e6)

        setattr(host, name, functools.wraps(fn)(wrapper))


def run(reps: int, phases: bool) -> dict[str, Any]:
    """Measure (see the module docstring); returns the medians and their inputs."""
    os.environ["THORK_CACHE_DIR"] = tempfile.mkdtemp(prefix="thork-cold-host-")
    from cuda.bindings import nvrtc as nv
    from thork_core import _cache, plugins
    from thork_core._gpu import GpuTarget

    _stub_driver()
    comp = plugins().compiler("nvrtc", GpuTarget())
    arch = GpuTarget().arch()
    opts = [o.encode() for o in comp.flags("cubin", arch)]

    def thork_once() -> tuple[float, float]:
        k = cold_kernel(random.random())
        w0, c0 = time.perf_counter(), time.thread_time()
        info = k.compile("gpu", "nvrtc")
        w1, c1 = time.perf_counter(), time.thread_time()
        if info.cache != "compiled":
            raise RuntimeError(f"expected a cold compile, got a {info.cache!r} build")
        _cache.flush_writes()  # the background write, outside the time
        return (w1 - w0) * 1e3, (c1 - c0) * 1e3

    def nvrtc_timed(main: bytes, options: list[bytes], headers: list[bytes],
                    names: list[bytes]) -> tuple[float, float]:
        """NVRTC alone on ``main`` (create, compile, cubin, destroy): (wall, CPU) ms."""
        w0, c0 = time.perf_counter(), time.thread_time()
        err, prog = nv.nvrtcCreateProgram(main, b"cold_add.cu", len(headers), headers, names)
        (err,) = nv.nvrtcCompileProgram(prog, len(options), options)
        if int(err) != 0:
            raise RuntimeError(f"NVRTC failed: {err}")
        _, n = nv.nvrtcGetCUBINSize(prog)
        data = b" " * n
        nv.nvrtcGetCUBIN(prog, data)
        nv.nvrtcDestroyProgram(prog)
        w1, c1 = time.perf_counter(), time.thread_time()
        return (w1 - w0) * 1e3, (c1 - c0) * 1e3

    def nvrtc_once() -> tuple[float, float]:
        return nvrtc_timed(cold_kernel(random.random()).cuda_source.encode(), opts, [], [])

    from thork_nvrtc import _compiler as nvrtc_plugin

    pch = isinstance(comp, nvrtc_plugin.NvrtcCompiler) and comp._pch_supported()

    def thork_nopch_once() -> tuple[float, float]:
        os.environ["THORK_NVRTC_PCH"] = "0"
        try:
            return thork_once()
        finally:
            del os.environ["THORK_NVRTC_PCH"]

    pch_opts = [*opts, *(o.encode() for o in nvrtc_plugin._PCH_FLAGS)]

    def nvrtc_pch_once() -> tuple[float, float]:
        split = nvrtc_plugin.prelude_header(cold_kernel(random.random()).cuda_source,
                                            [o.decode() for o in opts])
        if split is None:
            raise RuntimeError("the kernel's text does not start with the CUDA prelude")
        name, header, main = split
        return nvrtc_timed(main.encode(), pch_opts, [header.encode()], [name.encode()])

    thork_once()  # warm-up: imports, the registry, NVRTC loaded, the first records, PCH
    nvrtc_once()
    th: list[tuple[float, float]] = []
    nr: list[tuple[float, float]] = []
    tn: list[tuple[float, float]] = []
    npch: list[tuple[float, float]] = []
    runs: list[tuple[Callable[[], tuple[float, float]], list[tuple[float, float]]]] = [
        (thork_once, th), (nvrtc_once, nr)]
    if pch:  # the second compile of a process makes the PCH: before the timed rounds
        thork_once()
        nvrtc_pch_once()
        runs += [(thork_nopch_once, tn), (nvrtc_pch_once, npch)]
    for i in range(reps):
        for k in range(len(runs)):
            fn, into = runs[(i + k) % len(runs)]
            into.append(fn())
    med = statistics.median
    out: dict[str, Any] = {
        "reps": reps, "options": [o.decode() for o in opts],
        "nvrtc_version": comp.version(),
        "thork_ms": med(t[0] for t in th), "nvrtc_ms": med(n[0] for n in nr),
        "over_ms": med(t[0] - n[0] for t, n in zip(th, nr)),
        "thork_cpu_ms": med(t[1] for t in th), "nvrtc_cpu_ms": med(n[1] for n in nr),
        "over_cpu_ms": med(t[1] - n[1] for t, n in zip(th, nr)),
        "pch": pch, "pch_state": nvrtc_plugin.pch_state(),
    }
    if pch:
        out.update({
            "thork_nopch_ms": med(t[0] for t in tn),
            "thork_nopch_cpu_ms": med(t[1] for t in tn),
            "nvrtc_pch_ms": med(t[0] for t in npch),
            "nvrtc_pch_cpu_ms": med(t[1] for t in npch),
            # per round: Thork with PCH minus Thork without (negative: PCH saves)
            "pch_gain_ms": med(a[0] - b[0] for a, b in zip(th, tn)),
            "pch_gain_cpu_ms": med(a[1] - b[1] for a, b in zip(th, tn)),
        })
    if phases:
        got: dict[str, list[float]] = {}
        _instrument(got, time.thread_time_ns)
        own = []
        for _ in range(reps):
            nvrtc_in = len(got.get(_NVRTC, ()))
            total = thork_once()[1]
            own.append(total - sum(got[_NVRTC][nvrtc_in:]))
        out["phases_cpu_ms"] = {k: med(v) for k, v in got.items()}
        out["phase_calls"] = {k: len(v) / reps for k, v in got.items()}
        # Each call's own time less its own NVRTC call: no noise of another call's NVRTC
        out["own_cpu_ms"] = med(own)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=21, help="interleaved rounds (default 21)")
    ap.add_argument("--phases", action="store_true", help="time Thork's parts too")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    if args.reps < 1:
        ap.error(f"--reps: expected a positive number of rounds, got {args.reps}")
    try:
        import cuda.bindings.nvrtc  # noqa: F401
        import thork_nvrtc  # noqa: F401
    except ImportError as exc:
        print(json.dumps({"skipped": f"NVRTC or its plugin is not importable: {exc}"})
              if args.json else f"skipped: {exc}")
        return 0
    r = run(args.reps, args.phases)
    if args.json:
        print(json.dumps(r))
        return 0
    print(f"NVRTC {r['nvrtc_version']}, options {' '.join(r['options'])}, {r['reps']} rounds")
    print(f"{'':24} {'Thork':>9} {'NVRTC':>9} {'ratio':>6} {'Thork - NVRTC':>14}")
    for what, t, n, d in (("wall (ms)", r["thork_ms"], r["nvrtc_ms"], r["over_ms"]),
                          ("thread CPU (ms)", r["thork_cpu_ms"], r["nvrtc_cpu_ms"],
                           r["over_cpu_ms"])):
        print(f"{what:24} {t:9.2f} {n:9.2f} {t / n:6.3f} {d:+14.2f}")
    if r.get("pch"):
        print(f"precompiled prelude ({', '.join(r['pch_state']) or 'none made'}):")
        print(f"{'':24} {'Thork PCH':>9} {'no PCH':>9} {'NVRTC':>9} {'NVRTC PCH':>9} "
              f"{'PCH - no PCH':>13}")
        for what, a, b, c, d, g in (
                ("wall (ms)", r["thork_ms"], r["thork_nopch_ms"], r["nvrtc_ms"],
                 r["nvrtc_pch_ms"], r["pch_gain_ms"]),
                ("thread CPU (ms)", r["thork_cpu_ms"], r["thork_nopch_cpu_ms"],
                 r["nvrtc_cpu_ms"], r["nvrtc_pch_cpu_ms"], r["pch_gain_cpu_ms"])):
            print(f"{what:24} {a:9.2f} {b:9.2f} {c:9.2f} {d:9.2f} {g:+13.2f}")
    if "own_cpu_ms" in r:
        print(f"Thork's own work in a call (its thread CPU time less its NVRTC call's), "
              f"median: {r['own_cpu_ms']:.3f} ms; its parts (thread CPU, medians):")
    for k, v in r.get("phases_cpu_ms", {}).items():
        print(f"  {k:48} {v:7.3f} ms x{r['phase_calls'][k]:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
