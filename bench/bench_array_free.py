"""Host cost of dropping an owning DeviceArray, without a GPU: the Python ``__del__``
(``device_pool(0).free`` through ctypes) against core's native ``Finalizer`` (C), both
calling a no-op C stand-in for ``cuMemFreeAsync`` (compiled here with ``cc``), so only
the host side differs. An allocating ``pipe(x)`` in a loop pays one such drop per call.

    python bench/bench_array_free.py [--rounds 15]

Prints medians (µs per dropped array) for owning arrays, non-owning views and, as the
floor, a slotted object without ``__del__``.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

FAKE = r"""
#include <stddef.h>
#include <stdint.h>
int fake_free(uint64_t p, void *s) { (void)p; (void)s; return 0; }
int fake_get(void **c) { *c = (void *)0x5000; return 0; }
int fake_set(void *c) { (void)c; return 0; }
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    opt = ap.parse_args()
    import thork_core._device_array as da
    from thork_core import DeviceArray, dt
    from thork_core._memory import _FREE_ASYNC
    from thork_core._native import native_module, native_status

    mod = native_module()
    if mod is None or not hasattr(mod, "Finalizer"):
        sys.exit(f"no native module with a Finalizer: {native_status()}")
    work = tempfile.mkdtemp(prefix="thork-free-")
    src, lib_path = os.path.join(work, "fake.c"), os.path.join(work, "fake.so")
    with open(src, "w") as f:
        f.write(FAKE)
    subprocess.run([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", src, "-o",
                    lib_path], check=True)
    lib = ctypes.CDLL(lib_path)

    def addr(fn: Any) -> int:
        return int(ctypes.cast(fn, ctypes.c_void_p).value or 0)

    class FakePool:  # DevicePool.free's steps, with the stand-in
        def __init__(self) -> None:
            self._free = _FREE_ASYNC(addr(lib.fake_free))

        def free(self, ptr: int, stream: int) -> None:
            if self._free(ptr, stream or None):
                raise RuntimeError("free failed")

    pool = FakePool()
    da.device_pool = lambda ordinal=0: pool  # type: ignore[assignment]  # what __del__ calls

    def make(owns: bool) -> DeviceArray:
        a = object.__new__(DeviceArray)
        a.ptr, a.shape, a.dtype, a.device, a.stream = 0x1000, (4,), dt.float32, 0, 0
        a._owner, a._owns = None, owns
        return a

    def per_drop(owns: bool, n: int = 20000) -> float:
        objs = [make(owns) for _ in range(n)]
        t0 = time.perf_counter()
        objs.clear()  # each array's __del__ runs here
        return (time.perf_counter() - t0) / n * 1e6

    class Plain:
        __slots__ = ("ptr", "shape", "dtype", "device", "stream", "_owner", "_owns",
                     "__weakref__")

    def per_plain(n: int = 20000) -> float:
        objs = [Plain() for _ in range(n)]
        t0 = time.perf_counter()
        objs.clear()
        return (time.perf_counter() - t0) / n * 1e6

    r = opt.rounds
    med = statistics.median
    py_own = med([per_drop(True) for _ in range(r)])
    py_view = med([per_drop(False) for _ in range(r)])
    saved = DeviceArray.__dict__["__del__"]
    DeviceArray.__del__ = mod.Finalizer(  # type: ignore[method-assign]
        DeviceArray, 0, addr(lib.fake_free), 0x5000, addr(lib.fake_get), addr(lib.fake_set),
        da._PY_DEL)
    try:
        c_own = med([per_drop(True) for _ in range(r)])
        c_view = med([per_drop(False) for _ in range(r)])
    finally:
        DeviceArray.__del__ = saved  # type: ignore[method-assign]
    floor = med([per_plain() for _ in range(r)])
    print(f"drop an owning DeviceArray: Python __del__ {py_own:.3f} us, native Finalizer "
          f"{c_own:.3f} us; a non-owning view {py_view:.3f} / {c_view:.3f} us; a slotted "
          f"object without __del__ {floor:.3f} us (Python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
