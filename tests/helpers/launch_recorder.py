"""Stand-ins for core's native launch tests (no GPU): a ctypes ``cuLaunchKernel`` that
records what each launch passed (``Recorder``, for a kernel of parameters ptr, float, ptr,
int), what the Python guard needs of a prepared launch (``PyLaunch``), CuPy-like streams
and ``__cuda_array_interface__`` producers, DeviceArrays at made-up addresses, and the
binder's decision cases (``BIND_CASES``) that the native Binder and ``LaunchCall`` tests
share."""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np
from thork_core import DeviceArray, dt
from thork_core._launch import CONV_CU, PyLauncher

__all__ = ["BIND_CASES", "F32", "LAUNCH", "SHAPE_IN", "SHAPE_OUT", "U8", "Cai", "CaiArray",
           "PyLaunch", "Recorder", "Stream", "assert_thread_launches", "device_array",
           "guard_array", "make_binder", "run_binder", "to_handle"]

#: cuLaunchKernel's C signature.
LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *([ctypes.c_uint] * 7),
                          ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)

SHAPE_IN, SHAPE_OUT = (7, 33, 3), (3, 7, 33)
F32, U8 = dt.float32, dt.uint8  # DeviceArray.dtype holds core's interned DType


class PyLaunch:
    """What ArrayGuard needs of a PreparedLaunch: ``call(pointers, stream)``."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple[int, ...], int]] = []

    def call(self, pointers: Any, stream: int) -> None:
        self.calls.append((tuple(pointers), stream))


class Stream:
    """A stream object of the kind CuPy has (``.ptr``)."""

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


def to_handle(stream: Any) -> int:
    """The driver handle of ``stream`` (an int, an object with ``.ptr``, None)."""
    from thork_core._cuda import stream_handle

    return stream_handle(stream)


class Recorder:
    """A fake cuLaunchKernel for a kernel of 2 pointers, a float and an int (parameter
    order: ptr, float, ptr, int): records what each launch passed."""

    def __init__(self, result: int = 0) -> None:
        self.calls: list[dict[str, Any]] = []
        self.result = result
        self.fn = LAUNCH(self._launch)

    def _launch(self, function: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int,
                shared: int, stream: Any, params: Any, extra: Any) -> int:
        def read(i: int, ctype: Any) -> Any:
            return ctypes.cast(params[i], ctypes.POINTER(ctype))[0]

        self.calls.append({
            "function": function, "grid": (gx, gy, gz), "block": (bx, by, bz),
            "shared": shared, "stream": stream or 0, "extra": extra,
            "pointers": (read(0, ctypes.c_uint64), read(2, ctypes.c_uint64)),
            "scalars": (read(1, ctypes.c_float), read(3, ctypes.c_int32)),
            "thread": threading.get_ident(),
        })
        return self.result

    def launcher(self, which: Any, on_error: Any = None) -> Any:
        """A Launcher (the native module's, or PyLauncher when ``which`` is "python")."""
        errors: list[Any] = []
        cls = PyLauncher if which == "python" else which.Launcher
        return cls(CONV_CU, ctypes.cast(self.fn, ctypes.c_void_p).value, 0xF00D, "PfPi",
                   on_error or (lambda *a: errors.append(a)))

    def launch(self, which: Any, on_error: Any = None) -> Any:
        """A prepared launch: grid (5, 3, 1), block (128, 2, 1), 96 bytes, scalars 2.5, -7."""
        return self.launcher(which, on_error).prepare((5, 3, 1), (128, 2, 1), 96,
                                                      [0, 2.5, 0, -7])


def guard_array(ptr: int, shape: Any = SHAPE_IN, dtype: Any = U8, device: int = 0,
                stream: int = 0) -> DeviceArray:
    """A DeviceArray at the made-up address ``ptr``: by default the guard's uint8 input."""
    return DeviceArray.wrap(ptr, shape, dtype, device=device, stream=stream)


class Cai:
    """A device array as CuPy or torch presents it: only ``__cuda_array_interface__``."""

    def __init__(self, ptr: int, typestr: str = "<f4", shape: Any = (8,), **extra: Any) -> None:
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                         "data": (ptr, extra.pop("readonly", False)),
                                         "version": 3, **extra}


def make_binder(native: Any, cai: Any = True) -> tuple[Recorder, Any]:
    """A Binder for the Recorder's kernel: out (float32, 1-D, written), a float scale, x
    (float32, any ndim, read) and an int. ``cai``: a bool, or core's kinds table
    (``thork_core._probe.KINDS``: then the registered foreign readers apply)."""
    rec = Recorder()
    specs = [(F32, "<f4", 1, True), (True,), (F32, "<f4", -1, False), (False,)]
    return rec, native.Binder(rec.launcher(native), DeviceArray, 0, specs, cai)


def run_binder(binder: Any, args: Any, stream: Any = None) -> bool:
    """One call of a :func:`make_binder` Binder (grid 2, block 32): whether it launched."""
    return binder((2, 1, 1), (32, 1, 1), 0, stream, args)  # type: ignore[no-any-return]


def assert_thread_launches(rec: Recorder, threads: int, per_thread: int) -> None:
    """Every launch of thread ``i`` (its int scalar) carried that thread's own arrays
    (0x10000 * (i + 1) and 0x80 past it) and stream (0x1000 + i), and each thread
    launched ``per_thread`` times."""
    assert len(rec.calls) == threads * per_thread
    for c in rec.calls:
        i = c["scalars"][1]
        assert c["pointers"] == (0x10000 * (i + 1), 0x10000 * (i + 1) + 0x80)
        assert c["stream"] == 0x1000 + i


def device_array(ptr: int, shape: Any = (8,), dtype: Any = F32, device: int = 0,
                 stream: int = 0) -> DeviceArray:
    """A DeviceArray at the made-up address ``ptr``: by default the binder's float32 x."""
    return DeviceArray.wrap(ptr, shape, dtype, device=device, stream=stream)


BIND_CASES = [  # (name, args, stream, launched: (pointers, scalars) or None)
    ("device arrays", (device_array(0x100), 2.5, device_array(0x200, (3, 4)), 7), 0,
     ((0x100, 0x200), (2.5, 7))),
    ("CAI arrays", (Cai(0x100), 2.5, Cai(0x200, shape=(2, 2)), -7), 0,
     ((0x100, 0x200), (2.5, -7))),
    ("an int for the float", (device_array(0x100), 3, device_array(0x200), 7), 0, ((0x100, 0x200), (3.0, 7))),
    ("produced on the launch stream", (device_array(0x100, stream=77), 1.0, device_array(0x200), 0), 77,
     ((0x100, 0x200), (1.0, 0))),
    ("CAI legacy stream", (Cai(0x100, stream=1), 1.0, Cai(0x200, stream=None), 0), 0,
     ((0x100, 0x200), (1.0, 0))),
    ("read-only input", (device_array(0x100), 1.0, Cai(0x200, readonly=True), 0), 0,
     ((0x100, 0x200), (1.0, 0))),
    ("produced on another stream", (device_array(0x100, stream=5), 1.0, device_array(0x200), 0), 77, None),
    ("another dtype", (device_array(0x100, dtype=dt.float64), 1.0, device_array(0x200), 0), 0, None),
    ("another device", (device_array(0x100, device=1), 1.0, device_array(0x200), 0), 0, None),
    ("another ndim", (device_array(0x100, (2, 4)), 1.0, device_array(0x200), 0), 0, None),
    ("CAI typestr", (Cai(0x100, "<f8"), 1.0, device_array(0x200), 0), 0, None),
    ("CAI strides", (Cai(0x100, strides=(4,)), 1.0, device_array(0x200), 0), 0, None),
    ("CAI mask", (Cai(0x100, mask=object()), 1.0, device_array(0x200), 0), 0, None),
    ("CAI producer stream", (Cai(0x100, stream=5), 1.0, device_array(0x200), 0), 0, None),
    ("CAI read-only output", (Cai(0x100, readonly=True), 1.0, device_array(0x200), 0), 0, None),
    ("CAI ndim", (Cai(0x100, shape=(2, 4)), 1.0, device_array(0x200), 0), 0, None),
    ("a NumPy array", (np.zeros(8, np.float32), 1.0, device_array(0x200), 0), 0, None),
    ("a NumPy scalar", (device_array(0x100), np.float32(1.0), device_array(0x200), 0), 0, None),
    ("a bool for the int", (device_array(0x100), 1.0, device_array(0x200), True), 0, None),
    ("an int out of range", (device_array(0x100), 1.0, device_array(0x200), 2**31), 0, None),
    ("a float for the int", (device_array(0x100), 1.0, device_array(0x200), 1.5), 0, None),
    ("a float beyond float32", (device_array(0x100), 1e39, device_array(0x200), 0), 0, None),
    ("an array for a scalar", (device_array(0x100), device_array(0x300), device_array(0x200), 0), 0, None),
    ("too few arguments", (device_array(0x100), 1.0, device_array(0x200)), 0, None),
]


class CaiArray:
    """A plain ``__cuda_array_interface__`` producer (CuPy's kind), its dict built per read
    as CuPy builds it."""

    def __init__(self, ptr: int, shape: Any, typestr: str = "|u1", stream: Any = 1,
                 strides: Any = None, readonly: bool = False, mask: Any = None) -> None:
        self.ptr, self.shape, self.typestr, self.stream = ptr, shape, typestr, stream
        self.strides, self.readonly, self.mask = strides, readonly, mask

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        d = {"shape": self.shape, "typestr": self.typestr, "data": (self.ptr, self.readonly),
             "version": 3, "strides": self.strides, "stream": self.stream}
        if self.mask is not None:
            d["mask"] = self.mask
        return d
