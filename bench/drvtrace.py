"""Record every driver call of Thork's launch path, with host timestamps (issue 11's pinned
round trip, session 13).

``drvtrace.c`` stands in for the driver entry points Thork reaches through ctypes and its
native launcher (``thork_core._cuda.function_address``): memory pool, copies, launch,
events, synchronizations. Each call is recorded with its arguments and the
``CLOCK_MONOTONIC`` nanoseconds at entry and return. Two modes:

- ``fake`` (no GPU): cuda-bindings' driver module is replaced by :class:`FakeDriverModule`
  and the entry points do the work on the host (device memory is ``malloc``, copies are
  ``memmove`` at once, a launch calls a Python hook, synchronizations return at once), so
  the trace shows the order of the calls and the host time between them.
- ``forward`` (a GPU): every entry point calls the real ``libcuda.so.1``'s, so the trace is
  the host side of a real run: when each copy was queued and how long the sync blocked.

Used by ``bench/diag_pinned.py --trace`` and by ``tests/core/test_pinned_trace.py``.
:func:`install` must run in a process before Thork touches the driver.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
import tempfile
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

#: Record ids of drvtrace.c (its ``T_*``), by name.
NAMES = {1: "ctx_get", 2: "ctx_set", 3: "launch", 4: "alloc", 5: "free", 6: "htod",
         7: "dtoh", 8: "event_record", 9: "event_sync", 10: "stream_sync",
         11: "event_create", 12: "event_destroy", 13: "stream_wait", 14: "mark"}


class _Record(ctypes.Structure):
    _fields_ = [("id", ctypes.c_int64), ("enter", ctypes.c_int64), ("leave", ctypes.c_int64),
                ("a", ctypes.c_uint64), ("b", ctypes.c_uint64), ("c", ctypes.c_uint64)]


@dataclass(frozen=True)
class Call:
    """One recorded call: ``name`` (see :data:`NAMES`), ``enter``/``leave`` (ns,
    ``CLOCK_MONOTONIC``) and its arguments: alloc (address, bytes, stream), free (address,
    -, stream), htod/dtoh (device address, bytes, stream), launch (blocks, threads per
    block, stream), mark (the mark's number)."""

    name: str
    enter: int
    leave: int
    a: int
    b: int
    c: int


def build(folder: Path | None = None) -> Path:
    """Compile drvtrace.c into ``folder`` (a temporary folder by default); the .so path."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise RuntimeError("drvtrace needs a C compiler (cc, gcc or clang)")
    folder = Path(tempfile.mkdtemp(prefix="drvtrace-")) if folder is None else folder
    so = folder / "drvtrace.so"
    subprocess.run([cc, "-O2", "-Wall", "-Werror", "-shared", "-fPIC", "-o", str(so),
                    str(HERE / "drvtrace.c"), "-ldl", "-lpthread"],
                   check=True, capture_output=True)
    return so


class Tracer:
    """The loaded shim: start/stop recording, marks, the recorded calls."""

    def __init__(self, so: Path, forward: bool) -> None:
        self.lib = ctypes.CDLL(str(so))
        self.forward = forward
        if self.lib.drvtrace_init(b"libcuda.so.1" if forward else None):
            raise RuntimeError("drvtrace: cannot open libcuda.so.1 to forward to")
        self.lib.drvtrace_records.restype = ctypes.POINTER(_Record)
        self.lib.drvtrace_count.restype = ctypes.c_long
        self.lib.drvtrace_mark.argtypes = [ctypes.c_uint64]
        self.lib.drvtrace_now.restype = ctypes.c_int64
        self.mark = self.lib.drvtrace_mark
        self._hook: Any = None

    def start(self) -> None:
        self.lib.drvtrace_start()

    def stop(self) -> list[Call]:
        """Stop recording; the calls recorded since :meth:`start`, in order of entry."""
        self.lib.drvtrace_stop()
        n = self.lib.drvtrace_count()
        recs = self.lib.drvtrace_records()
        out = [Call(NAMES.get(r.id, str(r.id)), r.enter, r.leave, r.a, r.b, r.c)
               for r in (recs[i] for i in range(n))]
        out.sort(key=lambda c: c.enter)
        return out

    def fake_work(self, on: bool) -> None:
        """Fake mode: copy bytes and run the launch hook (True, the default) or only record
        the calls (False: the host time of Thork's own path, no 4 MiB memmoves in it)."""
        self.lib.drvtrace_fake_work(int(on))

    def live_blocks(self) -> int:
        """Fake mode: device allocations not freed yet."""
        return int(self.lib.drvtrace_live())

    def on_launch(self, fn: Any) -> None:
        """Fake mode: call ``fn(params, grid_x, block_x)`` for each launch (``params``:
        the ``void**`` argument array as a ctypes pointer)."""
        proto = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint,
                                 ctypes.c_uint)
        self._hook = proto(fn)
        self.lib.drvtrace_on_launch(self._hook)


class _Lib:
    """What ``thork_core._cuda.libcuda()`` returns under the tracer: the shim's entry
    points, and the real library's (forward mode) for every other name."""

    def __init__(self, shim: ctypes.CDLL, real: ctypes.CDLL | None) -> None:
        self._shim, self._real = shim, real

    def __getattr__(self, name: str) -> Any:
        try:
            return getattr(self._shim, name)
        except AttributeError:
            if self._real is None:
                raise
            return getattr(self._real, name)


class _Names:
    def __getattr__(self, name: str) -> str:
        return name


class FakeDriverModule(types.ModuleType):
    """What Thork asks of ``cuda.bindings.driver`` on the pinned path, answered on the host
    as an H200 would (one device, compute capability 9.0)."""

    CUfunction_attribute = CUdevice_attribute = CUpointer_attribute = _Names()
    CUmemPool_attribute = CUevent_flags = _Names()
    CUresult = CUmodule = CUfunction = CUcontext = CUdevice = int

    def __init__(self, shim: ctypes.CDLL) -> None:
        super().__init__("cuda.bindings.driver")
        self._shim = shim
        self._libc = ctypes.CDLL(None)
        self._libc.malloc.restype = ctypes.c_void_p
        self._libc.malloc.argtypes = [ctypes.c_size_t]
        self._libc.free.argtypes = [ctypes.c_void_p]

    @staticmethod
    def cuuint64_t(v: int) -> int:
        return v

    def cuInit(self, flags: int) -> tuple[int]:
        return (0,)

    def cuDeviceGetCount(self) -> tuple[int, int]:
        return (0, 1)

    def cuDeviceGet(self, i: int) -> tuple[int, int]:
        return (0, i)

    def cuDeviceGetAttribute(self, attr: str, dev: int) -> tuple[int, int]:
        return (0, 9 if attr.endswith("MAJOR") else 0)

    def cuDeviceGetName(self, n: int, dev: int) -> tuple[int, bytes]:
        return (0, b"drvtrace fake H200\0")

    def cuDevicePrimaryCtxRetain(self, dev: int) -> tuple[int, int]:
        return (0, 0x4000)

    def cuCtxSetCurrent(self, ctx: int) -> tuple[int]:
        return (self._shim.cuCtxSetCurrent(ctypes.c_void_p(int(ctx))),)

    def cuModuleLoadData(self, data: bytes) -> tuple[int, int]:
        return (0, 0x8000)

    def cuModuleGetFunction(self, mod: int, name: bytes) -> tuple[int, int]:
        return (0, 0xC000)

    def cuFuncGetAttribute(self, attr: str, fn: int) -> tuple[int, int]:
        return (0, 1024 if "THREADS" in attr else 0)

    def cuDeviceGetDefaultMemPool(self, dev: int) -> tuple[int, int]:
        return (0, 0xA000)

    def cuMemPoolSetAttribute(self, pool: int, attr: str, value: int) -> tuple[int]:
        return (0,)

    def cuMemHostAlloc(self, nbytes: int, flags: int) -> tuple[int, int]:
        return (0, int(self._libc.malloc(nbytes)))

    def cuMemFreeHost(self, ptr: int) -> tuple[int]:
        self._libc.free(ptr)
        return (0,)

    def cuGetErrorName(self, err: int) -> tuple[int, bytes]:
        return (0, f"CUDA_ERROR_{int(err)}".encode())

    def cuGetErrorString(self, err: int) -> tuple[int, bytes]:
        return (0, b"fake driver error")

    def cuStreamGetCaptureInfo(self, stream: int) -> tuple[int, int, int]:
        return (0, 0, 0)

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"drvtrace's fake driver has no {name} (the traced path asked "
                             "for it: add it to FakeDriverModule)")


def install(mode: str, folder: Path | None = None) -> Tracer:
    """Put the tracer under Thork in this process (before Thork touches the driver);
    ``mode``: ``"fake"`` or ``"forward"``."""
    if mode not in ("fake", "forward"):
        raise ValueError(f"drvtrace.install(): 'mode' expects 'fake' or 'forward', got {mode!r}")
    tracer = Tracer(build(folder), forward=mode == "forward")
    from thork_core import _cuda

    if mode == "fake":
        import cuda.bindings as bindings

        try:  # NVRTC's module reads the real driver module's internals when it loads
            import cuda.bindings.nvrtc  # noqa: F401
        except ImportError:
            pass
        fake = FakeDriverModule(tracer.lib)
        sys.modules["cuda.bindings.driver"] = fake
        bindings.driver = fake  # type: ignore[attr-defined]
        _cuda.driver.cache_clear()
        _cuda.gpu_status.cache_clear()
        _cuda.device_count.cache_clear()
        _cuda.compute_capability.cache_clear()
        real = None
    else:
        real = ctypes.CDLL("libcuda.so.1")
    _cuda._LIBCUDA[:] = [_Lib(tracer.lib, real)]
    _cuda._FAST[:] = []
    return tracer


def add_hook(tracer: Tracer, n_params: int = 3) -> None:
    """Fake mode: launches compute ``out = a + b`` (float32) on the "device" buffers, as
    ``matrix_add(out, a, b)`` would for ``grid_x * block_x`` elements."""
    import numpy as np

    def hook(params: Any, gx: int, bx: int) -> None:
        n = gx * bx
        ptrs = [ctypes.cast(params[i], ctypes.POINTER(ctypes.c_uint64))[0]
                for i in range(n_params)]
        out, a, b = (np.ctypeslib.as_array(ctypes.cast(p, ctypes.POINTER(ctypes.c_float)),
                                           (n,)) for p in ptrs)
        np.add(a, b, out=out)

    tracer.on_launch(hook)


class Params:
    """The arguments of one fake launch, read as the kernel would: ``params`` is the
    ``void**`` array handed to ``cuLaunchKernel`` (one pointer to each argument's value)."""

    def __init__(self, params: Any) -> None:
        self._params = params

    def address(self, k: int) -> int:
        """Argument ``k`` as a device pointer (its 8 bytes)."""
        return int(ctypes.cast(self._params[k], ctypes.POINTER(ctypes.c_uint64))[0])

    def scalar(self, k: int, ctype: Any = ctypes.c_uint32) -> Any:
        """Argument ``k`` as a scalar of ``ctype`` (uint32 by default)."""
        return ctypes.cast(self._params[k], ctypes.POINTER(ctype))[0]

    def array(self, k: int, n: int, dtype: Any = "float32", first: int = 0) -> Any:
        """Elements ``first .. first + n - 1`` of pointer argument ``k``, as a NumPy array
        over the fake device memory (writes go to it: what the kernel's stores would do)."""
        import numpy as np

        d = np.dtype(dtype)
        buf = (ctypes.c_char * (d.itemsize * n)).from_address(self.address(k)
                                                               + first * d.itemsize)
        return np.frombuffer(buf, dtype=d, count=n)


def add_kernel(tracer: Tracer, fn: Any) -> None:
    """Fake mode: each launch calls ``fn(args, threads)`` (``args``: :class:`Params`;
    ``threads``: ``grid_x * block_x``), which does the kernel's work on the device buffers
    with NumPy. Arguments that alias (one device buffer) alias there too, so a kernel whose
    every element is read and written by one thread only is emulated exactly."""

    def hook(params: Any, gx: int, bx: int) -> None:
        fn(Params(params), gx * bx)

    tracer.on_launch(hook)


def steps(calls: list[Call]) -> dict[str, float]:
    """The host-side steps of one traced pinned round trip, in microseconds: ``calls``
    between mark 1 (before the call) and mark 2 (after it). Keys: ``to first driver
    call``, ``to first htod`` (enqueued: the DMA can start), ``first to last htod
    enqueued``, ``last htod to launch``, ``launch to dtoh``, ``dtoh to sync``, ``sync
    (blocked)``, ``after sync``, ``total``."""
    t0 = next(c.enter for c in calls if c.name == "mark" and c.a == 1)
    t1 = next(c.enter for c in calls if c.name == "mark" and c.a == 2)
    inner = [c for c in calls if c.name != "mark" and t0 <= c.enter <= t1]
    htod = [c for c in inner if c.name == "htod"]
    launch = [c for c in inner if c.name == "launch"]
    dtoh = [c for c in inner if c.name == "dtoh"]
    sync = [c for c in inner if c.name == "stream_sync"]
    us = 1e-3
    out = {"total": (t1 - t0) * us}
    if inner:
        out["to first driver call"] = (inner[0].enter - t0) * us
    if htod:
        out["to first htod"] = (htod[0].enter - t0) * us
        out["first to last htod enqueued"] = (htod[-1].leave - htod[0].enter) * us
    if htod and launch:
        out["last htod to launch"] = (launch[0].enter - htod[-1].leave) * us
    if launch and dtoh:
        out["launch to dtoh"] = (dtoh[0].enter - launch[-1].leave) * us
    if dtoh and sync:
        out["dtoh to sync"] = (sync[-1].enter - dtoh[-1].leave) * us
    if sync:
        out["sync (blocked)"] = (sync[-1].leave - sync[-1].enter) * us
        out["after sync"] = (t1 - sync[-1].leave) * us
    return out
