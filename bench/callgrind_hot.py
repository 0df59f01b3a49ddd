"""The hot rows of issue 11 with a no-op launch, for counting instructions (session 12).

    bash bench/callgrind_hot.sh [VARIANT...]    instructions per call under callgrind
    python bench/callgrind_hot.py [VARIANT...]  nanoseconds per call (best of 5 loops)

Every variant is a loop of calls: a native launch or guard whose launch function is a C
no-op (``bench/callgrind_marks.c``), so what is counted is Thork's host path and the
producers' own calls. Variants: ``empty`` (the loop alone), ``sub`` (``kernel[2, 128]``),
``entry`` (an armed ``launch(y, x, n)`` with DeviceArrays), ``full`` (``kernel[2,
128](y, x, n)``), ``cupy`` (``launch`` with a CuPy-like type read through C attributes) and
``cupy_reads`` (the reads a correct launcher needs of it, made in Python), ``pipe`` (a
guarded ``pipe(x, out=y)`` with DeviceArrays), ``dlpipe`` (with DLPack-only wrappers of
DeviceArrays) and ``dl_own`` / ``dl_dev`` (the wrappers' two ``__dlpack__`` /
``__dlpack_device__`` calls made from Python), ``cpipe`` (with CuPy-like arrays whose
``shape`` is a property building a new tuple, as CuPy's) and ``cpipe_reads``; ``rcupy``
and ``rcupy_reads`` the same as ``cupy`` and ``cupy_reads`` with CuPy's own ndarrays where
CuPy is installed (session 16).
Thork's DLPack part = dlpipe - (dl_own - empty) - (dl_dev - empty) - (pipe - empty) - empty.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import thork as tk
from thork_core import DeviceArray, dt, guarded_call_base
from thork_core._launch import CONV_CU
from thork_core._native import native_module
from thork_core._probe import CAI, DLPACK, KINDS
from thork_core.runtime import stream_handle

N_CALLS = 20000  # per variant under callgrind (callgrind_hot.sh divides by it)


def _address(f: Any) -> int:
    return int(ctypes.cast(f, ctypes.c_void_p).value or 0)


@tk.jit(target="gpu")
def add3(out: tk.DevicePointer[tk.dt.float32], a: tk.DevicePointer[tk.dt.float32],
         b: tk.DevicePointer[tk.dt.float32], bid: tk.Uint[tk.BlockIdx],
         tid: tk.Uint[tk.ThreadIdx], bdm: tk.Uint[tk.BlockDim]) -> None:
    i = bid * bdm + tid
    out[i] = a[i] + b[i]


@tk.jit(target="gpu")
def scale_add(out: tk.DevicePointer[tk.dt.float32], x: tk.DevicePointer[tk.dt.float32],
              n: tk.dt.int32, bid: tk.Uint[tk.BlockIdx], tid: tk.Uint[tk.ThreadIdx],
              bdm: tk.Uint[tk.BlockDim]) -> None:
    i = bid * bdm + tid
    with tk.if_(i < n):
        out[i] = x[i] + 1.0


class Mem:
    __slots__ = ("ptr",)


class Stream:
    __slots__ = ("ptr",)


class FakeCupy:
    """CuPy's ndarray as the native readers see it: C-level (slot) attributes."""

    __slots__ = ("_c_contiguous", "dtype", "data", "ndim", "shape", "__weakref__")
    __cuda_array_interface__ = None


class FakeCupy3(FakeCupy):
    """The same with CuPy's ``shape``: a new tuple per read."""

    __slots__ = ("_s",)

    @property
    def shape(self) -> tuple[int, ...]:  # type: ignore[override]
        return tuple(self._s)


class DLPackOnly:
    """A producer with only DLPack (bench_fkl's row): a DeviceArray's, through Python."""

    def __init__(self, a: Any) -> None:
        self.a = a

    def __dlpack__(self, **kw: Any) -> Any:
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self) -> Any:
        return self.a.__dlpack_device__()


def _fake(cls: type, ptr: int, shape: Any) -> Any:
    a = cls()
    a._c_contiguous, a.dtype = True, np.dtype(np.float32)
    m = Mem()
    m.ptr = ptr
    a.data, a.ndim = m, len(shape)
    if cls is FakeCupy3:
        a._s = list(shape)
    else:
        a.shape = shape
    return a


def variants(lib: Any) -> dict[str, Callable[[int], None]]:
    native = native_module()
    if native is None:
        raise SystemExit("the native module is not available here")
    launcher = native.Launcher(CONV_CU, _address(lib.noop), 1, "PPi", print, 0x5000,
                               _address(lib.get), _address(lib.set))
    binder = native.Binder(launcher, DeviceArray, 0, [(dt.float32, "<f4", -1, True),
                                                      (dt.float32, "<f4", -1, False),
                                                      (False,)], KINDS)
    launch = scale_add[2, 128]
    launch._arm(binder, (2, 1, 1), (128, 1, 1), 0, stream_handle)

    def _no(*a: Any, **k: Any) -> None:
        raise AssertionError("a miss: the variant left the native path")

    type(launch)._miss = _no
    x = DeviceArray.wrap(0x1000, (256,), dt.float32, device=0, stream=0)
    y = DeviceArray.wrap(0x2000, (256,), dt.float32, device=0, stream=0)
    k = scale_add
    k[2, 128](y, x, 256)

    st = Stream()
    st.ptr = 0
    current = itertools.repeat(st).__next__
    for cls in (FakeCupy, FakeCupy3):
        KINDS[cls] = CAI
        native.foreign(cls, 1, current, None)
    cx, cy = _fake(FakeCupy, 0x1000, (256,)), _fake(FakeCupy, 0x2000, (256,))
    launch(cy, cx, 256)

    prep = launcher.prepare((1, 1, 1), (1, 1, 1), 0, [0, 0, 0])
    shape = (7, 33, 3)
    nbytes = 7 * 33 * 3 * 4

    class Entry(guarded_call_base()):  # type: ignore[misc]
        def _miss(self, *a: Any, **k: Any) -> None:
            raise AssertionError("a miss: the variant left the native path")

    def entry(guard: Any) -> Any:
        e = Entry()
        e._hot_guard = guard
        return e

    gx = DeviceArray.wrap(0x1000, shape, dt.float32, device=0, stream=0)
    gy = DeviceArray.wrap(0x2000, shape, dt.float32, device=0, stream=0)
    pipe = entry(prep.guard(DeviceArray, [(shape, dt.float32, 0), (shape, dt.float32, 0)],
                            [0, 1], 15, int))
    code = (2 << 8) | 32
    gy2 = DeviceArray.wrap(0x1000 + 4 * nbytes, shape, dt.float32, device=0, stream=0)
    dpipe = entry(prep.guard(DeviceArray, [(shape, dt.float32, 0, "<f4", False, code),
                                           (shape, dt.float32, 0, "<f4", True, code)],
                             [0, 1], 15, int, KINDS, False))
    KINDS[DLPackOnly] = DLPACK
    dx, do = DLPackOnly(gx), DLPackOnly(gy2)
    cpipe = entry(prep.guard(DeviceArray, [(shape, dt.float32, 0, "<f4", False),
                                           (shape, dt.float32, 0, "<f4", True)],
                             [0, 1], 15, int, KINDS, False))
    cpx, cpy = _fake(FakeCupy3, 0x1000, shape), _fake(FakeCupy3, 0x1000 + 4 * nbytes, shape)
    for f, a, b in ((pipe, gx, gy), (dpipe, dx, do), (cpipe, cpx, cpy)):
        assert f(a, out=b) is b
    mv = (1, 0)

    # the reads as bare expressions (no tuple built): what each costs, nothing else
    def cupy_reads(n: int) -> None:
        for _ in range(n):
            current().ptr  # noqa: B018
            cy._c_contiguous  # noqa: B018
            cy.dtype  # noqa: B018
            cy.data.ptr  # noqa: B018
            cx._c_contiguous  # noqa: B018
            cx.dtype  # noqa: B018
            cx.data.ptr  # noqa: B018

    def cpipe_reads(n: int) -> None:
        for _ in range(n):
            current().ptr  # noqa: B018
            cpx._c_contiguous  # noqa: B018
            cpx.dtype  # noqa: B018
            cpx.data.ptr  # noqa: B018
            cpx.shape  # noqa: B018
            cpy._c_contiguous  # noqa: B018
            cpy.dtype  # noqa: B018
            cpy.data.ptr  # noqa: B018
            cpy.shape  # noqa: B018

    def dl_own(n: int) -> None:
        for _ in range(n):
            dx.__dlpack__(stream=1, max_version=mv)
            do.__dlpack__(stream=1, max_version=mv)

    def dl_dev(n: int) -> None:
        for _ in range(n):
            dx.__dlpack_device__()
            do.__dlpack_device__()

    # each variant its own loop (a call per iteration through a helper would add a frame)
    def empty(n: int) -> None:
        for _ in range(n):
            pass

    def sub(n: int) -> None:
        for _ in range(n):
            k[2, 128]  # noqa: B018

    def entry_(n: int) -> None:
        for _ in range(n):
            launch(y, x, 256)

    def full(n: int) -> None:
        for _ in range(n):
            k[2, 128](y, x, 256)

    def cupy(n: int) -> None:
        for _ in range(n):
            launch(cy, cx, 256)

    def pipe_(n: int) -> None:
        for _ in range(n):
            pipe(gx, out=gy)

    def dlpipe(n: int) -> None:
        for _ in range(n):
            dpipe(dx, out=do)

    def cpipe_(n: int) -> None:
        for _ in range(n):
            cpipe(cpx, out=cpy)

    table = {"empty": empty, "sub": sub, "entry": entry_, "full": full, "cupy": cupy,
             "cupy_reads": cupy_reads, "pipe": pipe_, "dlpipe": dlpipe, "dl_own": dl_own,
             "dl_dev": dl_dev, "cpipe": cpipe_, "cpipe_reads": cpipe_reads}
    table.update(_real_cupy(native, launch, current))
    return table


def _real_cupy(native: Any, launch: Any, current: Any) -> dict[str, Callable[[int], None]]:
    """(session 16) ``rcupy``: ``launch`` with CuPy's own ndarrays (CuPy imports and makes
    arrays on memory it does not own without a GPU; its current stream does need one, so
    the stand-in stream reader serves), and ``rcupy_reads``: the reads of them a launcher
    that keeps nothing makes, in Python. Registered last: making Guards registers the
    decided kinds' readers again (CuPy's C stream function, which needs a GPU)."""
    try:
        import cupy
        from cupy.cuda import memory
    except ImportError:
        return {}
    KINDS[cupy.ndarray] = CAI
    native.foreign(cupy.ndarray, 1, current, None)

    def real(p: int) -> Any:
        mem = memory.MemoryPointer(memory.UnownedMemory(p, 1024, None, 0), 0)
        return cupy.ndarray((256,), cupy.float32, memptr=mem)

    rx, ry = real(0x1000), real(0x2000)
    launch(ry, rx, 256)

    def rcupy(n: int) -> None:
        for _ in range(n):
            launch(ry, rx, 256)

    def rcupy_reads(n: int) -> None:
        for _ in range(n):
            current().ptr  # noqa: B018
            ry._c_contiguous  # noqa: B018
            ry.dtype  # noqa: B018
            ry.data.ptr  # noqa: B018
            rx._c_contiguous  # noqa: B018
            rx.dtype  # noqa: B018
            rx.data.ptr  # noqa: B018

    table = {"rcupy": rcupy, "rcupy_reads": rcupy_reads}
    table.update(_ideal(launch, rx, ry))
    return table


def _ideal(launch: Any, rx: Any, ry: Any) -> dict[str, Callable[[int], None]]:
    """(session 18) ``ideal_fixed`` and ``ideal``: bench/ideal_launcher.c's ``fixed`` and
    ``arrays`` on CuPy's own ndarrays (three: matrix_add's out, A, B, where ``rcupy``
    passes two and an int), its launch and CuPy's stream both the marks' C no-op: the
    least any launcher does per call, counted as Thork's own path is."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _floor

    lib = ctypes.CDLL(os.environ.get("CG_MARKS") or _build_marks())
    noop = _address(lib.noop)
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    ideal = _floor.ideal_launcher(launch, (ry, rx, rx), (1, 2, 3),
                                  current=new(noop, b"intptr_t (void)", None), launch_fn=noop)
    fixed, arrays = ideal.fixed, ideal.arrays
    arrays(ry, rx, rx)
    # Thork's launch of the same three arrays, CuPy's stream read through the same C no-op
    import cupy
    from thork_core._native import native_module

    native = native_module()
    native.foreign(cupy.ndarray, 1, new(noop, b"intptr_t (void)", None), None)
    launcher = native.Launcher(CONV_CU, noop, 1, "PPP", print, 0x5000, _address(lib.get),
                               _address(lib.set))
    binder = native.Binder(launcher, DeviceArray, 0, [(dt.float32, "<f4", -1, True),
                                                      (dt.float32, "<f4", -1, False),
                                                      (dt.float32, "<f4", -1, False)], KINDS)
    launch3 = add3[2, 128]
    launch3._arm(binder, (2, 1, 1), (128, 1, 1), 0, stream_handle)
    launch3(ry, rx, rx)

    def thork3(n: int) -> None:
        for _ in range(n):
            launch3(ry, rx, rx)

    def ideal_fixed(n: int) -> None:
        for _ in range(n):
            fixed(ry, rx, rx)

    def ideal_(n: int) -> None:
        for _ in range(n):
            arrays(ry, rx, rx)

    return {"ideal_fixed": ideal_fixed, "ideal": ideal_, "thork3": thork3}


def main(argv: list[str]) -> None:
    if argv[:1] == ["--list"]:
        import importlib.util

        extra = ("rcupy", "rcupy_reads", "ideal_fixed", "ideal", "thork3") \
            if importlib.util.find_spec("cupy") else ()
        print(" ".join(_NAMES + extra))
        return
    lib = ctypes.CDLL(os.environ.get("CG_MARKS") or _build_marks())
    table = variants(lib)
    if argv[:1] == ["--callgrind"]:
        for name in argv[1:] or list(table):
            table[name](200)
            lib.mark_start()
            table[name](N_CALLS)
            lib.mark_end()
        return
    n = int(os.environ.get("N", "300000"))
    for name in argv or list(table):
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            table[name](n)
            best = min(best, time.perf_counter() - t0)
        print(f"{name:12} {best / n * 1e9:7.1f} ns")


_NAMES = ("empty", "sub", "entry", "full", "cupy", "cupy_reads", "pipe", "dlpipe", "dl_own",
          "dl_dev", "cpipe", "cpipe_reads")


def _build_marks() -> str:
    import subprocess
    import tempfile

    out = os.path.join(tempfile.mkdtemp(), "marks.so")
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "callgrind_marks.c")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", src, "-o", out], check=True)
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
