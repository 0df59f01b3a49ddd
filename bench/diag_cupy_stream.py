"""What does reading CuPy's current stream cost, and does its C API agree? (issue 11, session 16)

The hot ``kernel[...]`` row with CuPy arrays reads CuPy's current stream once per call
(``cupy.cuda.get_current_stream().ptr``, made from C). CuPy also exports the C function
``get_current_stream_ptr`` (``intptr_t (void)``) through Cython's ``__pyx_capi__`` of
``cupy.cuda.stream`` and ``cupy_backends.cuda.stream``. This prints the capsules' names
(their C signatures), whether the function answers what ``get_current_stream().ptr``
answers (default stream, ``with Stream()``, nested, ``.use()``, an ``ExternalStream``, a
second thread), and per-call host times of each read (Python-level; the ctypes crossing
measured on a C function of the same signature and subtracted).

Usage: python bench/diag_cupy_stream.py   (needs a GPU and CuPy)
"""

from __future__ import annotations

import ctypes
import sys
import threading
import time
from collections.abc import Callable
from typing import Any


def per_call(fn: Callable[[], Any], n: int = 200000) -> float:
    """Host nanoseconds per call of ``fn``: median of 5 rounds."""
    for _ in range(1000):
        fn()
    rounds = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n // 5):
            fn()
        rounds.append((time.perf_counter() - t0) / (n // 5) * 1e9)
    return sorted(rounds)[2]


def capsule_fn(mod: Any, name: str) -> tuple[str, Any] | None:
    """(signature, ctypes function) of ``mod.__pyx_capi__[name]``, or None."""
    capi = getattr(mod, "__pyx_capi__", None)
    if not capi or name not in capi:
        return None
    cap = capi[name]
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_ptr = ctypes.pythonapi.PyCapsule_GetPointer
    get_ptr.restype, get_ptr.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    sig = get_name(cap)
    addr = get_ptr(cap, sig)
    # PyDLL: the call keeps the GIL (the function touches Python's thread-local state)
    proto = ctypes.PYFUNCTYPE(ctypes.c_ssize_t)
    return sig.decode(), proto(addr)


def main() -> None:
    import cupy as cp
    import cupy.cuda.stream as front

    print(f"python {sys.version.split()[0]}, cupy {cp.__version__}")
    back = sys.modules.get("cupy_backends.cuda.stream")
    fns: dict[str, Any] = {}
    for label, mod in (("cupy.cuda.stream", front), ("cupy_backends.cuda.stream", back)):
        capi = getattr(mod, "__pyx_capi__", None) or {}
        print(f"{label}.__pyx_capi__: {sorted(capi)}")
        got = capsule_fn(mod, "get_current_stream_ptr")
        if got is not None:
            print(f"  get_current_stream_ptr: {got[0]!r}")
            fns[label] = got[1]
    gcs = cp.cuda.get_current_stream

    def agree(where: str) -> None:
        want = gcs().ptr
        got = {k: f() for k, f in fns.items()}
        ok = all(v == want for v in got.values())
        print(f"  {where:<34} get_current_stream().ptr={want:#x} capi={got} "
              f"{'agree' if ok else 'DISAGREE'}")

    print("agreement")
    agree("default")
    s1, s2 = cp.cuda.Stream(), cp.cuda.Stream(non_blocking=True)
    with s1:
        agree("with s1")
        with s2:
            agree("with s1: with s2")
        agree("back in s1")
    agree("after with")
    s2.use()
    agree("s2.use()")
    cp.cuda.Stream.null.use()
    agree("Stream.null.use()")
    ext = cp.cuda.ExternalStream(s1.ptr)
    with ext:
        agree("with ExternalStream(s1.ptr)")
    with cp.cuda.Stream.ptds:
        agree("with Stream.ptds")
    out: list[str] = []

    def other() -> None:
        with s2:
            want = gcs().ptr
            got = {k: f() for k, f in fns.items()}
            out.append(f"thread with s2: {want:#x} {got}")

    with s1:
        t = threading.Thread(target=other)
        t.start()
        t.join()
        agree("main thread still in s1")
    print("  " + out[0])

    x = cp.arange(1 << 16, dtype=cp.float32)
    # Thork keeps a CuPy array's pointer while the array holds the same data object
    # (session 16): can an array's data object change at all? __init__ run again:
    y, z = cp.zeros(5, cp.float32), cp.ones(7, cp.float64)
    before = (y.data, y.data.ptr, y.shape, y.dtype)
    try:
        y.__init__((7,), cp.float64, z.data)
        raised = ""
    except Exception as exc:  # noqa: BLE001 - a diagnostic: say what happened
        raised = f" (raised {type(exc).__name__}: {exc})"
    print(f"y.__init__ run again{raised}: data object same: {y.data is before[0]}, "
          f"ptr {before[1]:#x} -> {y.data.ptr:#x} (z's {z.data.ptr:#x}), "
          f"shape {before[2]} -> {y.shape}, dtype {before[3]} -> {y.dtype}")
    for attr in ("data", "dtype", "_c_contiguous"):
        try:
            setattr(y, attr, getattr(z, attr))
            print(f"  y.{attr} = ...: allowed")
        except (AttributeError, TypeError) as exc:
            print(f"  y.{attr} = ...: {type(exc).__name__}: {exc}")
    try:
        y.data.ptr = 0
        print("  y.data.ptr = 0: allowed")
    except (AttributeError, TypeError) as exc:
        print(f"  y.data.ptr = 0: {type(exc).__name__}: {exc}")
    libc = ctypes.CDLL(None)
    rand = ctypes.PYFUNCTYPE(ctypes.c_ssize_t)(ctypes.cast(libc.rand, ctypes.c_void_p).value)
    from thork_core._native import native_module

    mod = native_module()
    noop = mod.noop if mod is not None else (lambda: None)
    rows: dict[str, Callable[[], Any]] = {
        "empty lambda": lambda: None,
        "native noop()": lambda: noop(),
        "get_current_stream()": lambda: gcs(),
        "get_current_stream().ptr": lambda: gcs().ptr,
        "runtime.getDevice()": lambda: cp.cuda.runtime.getDevice(),
        "ctypes crossing (libc rand)": lambda: rand(),
        "x.data.ptr": lambda: x.data.ptr,
        "x._c_contiguous": lambda: x._c_contiguous,
        "x.dtype": lambda: x.dtype,
        "x.ndim": lambda: x.ndim,
        "x.shape": lambda: x.shape,
        "x.__cuda_array_interface__": lambda: x.__cuda_array_interface__,
    }
    for k, f in fns.items():
        rows[f"ctypes {k}.get_current_stream_ptr"] = f
    print("host ns per call")
    times = {k: per_call(f) for k, f in rows.items()}
    for k, v in times.items():
        print(f"  {k:<48} {v:8.1f}")
    for k in fns:
        c = times[f"ctypes {k}.get_current_stream_ptr"] - times["ctypes crossing (libc rand)"]
        print(f"  => {k}.get_current_stream_ptr itself ~{c:.1f} ns "
              f"(get_current_stream().ptr through Python: "
              f"{times['get_current_stream().ptr'] - times['empty lambda']:.1f} ns)")


if __name__ == "__main__":
    main()
