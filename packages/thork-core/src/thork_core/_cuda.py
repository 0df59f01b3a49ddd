"""Thin, lazy access to the CUDA driver through ``cuda.bindings``.

Nothing here imports cuda-python until a function is called, so ``import thork`` works
on machines without it and without a GPU.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Callable
from typing import Any

from ._errors import LaunchError

__all__ = [
    "driver", "check", "gpu_status", "device_count", "compute_capability", "device_name",
    "context", "pointer_device", "stream_handle", "stream_wait", "libcuda",
]


@functools.cache
def driver() -> Any:
    """The ``cuda.bindings.driver`` module, imported on first use."""
    from cuda.bindings import driver as drv

    return drv


def check(result: Any, what: str = "CUDA call") -> Any:
    """Unpack a cuda-bindings ``(error, *values)`` result; raise LaunchError on failure."""
    err = result[0]
    if int(err) != 0:
        drv = driver()
        _, name = drv.cuGetErrorName(err)
        _, text = drv.cuGetErrorString(err)
        name = name.decode() if isinstance(name, bytes) else str(name)
        text = text.decode() if isinstance(text, bytes) else str(text)
        raise LaunchError(f"{what} failed: {name}: {text}")
    if len(result) == 1:
        return None
    return result[1] if len(result) == 2 else result[1:]


@functools.cache
def gpu_status() -> tuple[bool, str]:
    """Whether a CUDA GPU is usable here, and why not when it is not. Cached."""
    try:
        drv = driver()
    except Exception as exc:  # ImportError, or cuda-python's own loader errors
        return False, f"cuda-python is not usable ({type(exc).__name__}: {exc})"
    try:
        err = drv.cuInit(0)[0]
    except Exception as exc:  # no libcuda.so: cuda.pathfinder raises its own error type
        return False, f"no NVIDIA driver ({type(exc).__name__})"
    if int(err) != 0:
        return False, f"cuInit failed ({err.name if hasattr(err, 'name') else err})"
    err, n = drv.cuDeviceGetCount()
    if int(err) != 0 or n == 0:
        return False, "no CUDA device visible"
    return True, f"{n} CUDA device(s)"


@functools.cache
def device_count() -> int:
    """Visible CUDA devices (0 without a usable driver). Cached for the process."""
    ok, _ = gpu_status()
    if not ok:
        return 0
    return int(check(driver().cuDeviceGetCount(), "cuDeviceGetCount"))


@functools.cache
def compute_capability(ordinal: int = 0) -> tuple[int, int]:
    """Device ``ordinal``'s compute capability ``(major, minor)``; cached for the process
    (a first launch asks for its architecture: three driver calls)."""
    drv = driver()
    dev = check(drv.cuDeviceGet(ordinal), "cuDeviceGet")
    attr = drv.CUdevice_attribute
    major = check(drv.cuDeviceGetAttribute(
        attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute")
    minor = check(drv.cuDeviceGetAttribute(
        attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cuDeviceGetAttribute")
    return int(major), int(minor)


@functools.cache
def device_name(ordinal: int = 0) -> str:
    drv = driver()
    dev = check(drv.cuDeviceGet(ordinal), "cuDeviceGet")
    raw = check(drv.cuDeviceGetName(256, dev), "cuDeviceGetName")
    return raw.split(b"\0", 1)[0].decode()


_CONTEXT_LOCK = threading.Lock()


def context(ordinal: int = 0) -> Any:
    """Device ``ordinal``'s primary context (shared with CuPy and PyTorch), retained once
    per process (threads racing here retain it once) and made current on the thread that
    retained it; other threads call :func:`make_current` (launchers do it themselves)."""
    ctx = _CONTEXTS.get(ordinal)
    if ctx is None:
        with _CONTEXT_LOCK:
            ctx = _CONTEXTS.get(ordinal)
            if ctx is None:
                ctx = _CONTEXTS[ordinal] = _retain(ordinal)
                if len(_CONTEXTS) == 1:
                    _ready_launches(ordinal)
    return ctx


#: What front-ends ready at the process's first context (:func:`at_first_context`).
_AT_FIRST_CONTEXT: list[Callable[[], Any]] = []


def at_first_context(fn: Callable[[], Any]) -> None:
    """Have ``fn()`` run at the process's first CUDA context (errors ignored): a front-end
    readies there what its first launch needs in any case (thork: its ``Launch`` class
    over the native module's). Not run when a context exists already: the first launch
    then does it."""
    _AT_FIRST_CONTEXT.append(fn)


def _ready_launches(ordinal: int = 0) -> None:
    """At the process's first context (the user's first device array, ~100 ms of driver
    work): import the GPU target, load the native launch module, learn the device's
    compute capability and run what front-ends registered (:func:`at_first_context`),
    which a first launch would otherwise do inside its own call (~0.5–1 ms: ``memo.json``,
    ``dlopen``, the imports, the launch class).
    Never raises: a launch finds and reports whatever went wrong here."""
    try:
        from . import _builtin, _gpu  # noqa: F401 - core's targets, GpuExecutable
        from ._native import native_module

        native_module()
        _fast_calls()  # the ctypes prototypes make_current uses
        compute_capability(ordinal)  # (the architecture a first launch looks up)
    except Exception:  # noqa: BLE001 - the launch path reports it
        pass
    for fn in list(_AT_FIRST_CONTEXT):
        try:
            fn()
        except Exception:  # noqa: BLE001 - the launch path reports it
            pass


_CONTEXTS: dict[int, Any] = {}


def retained_context(ordinal: int = 0) -> Any | None:
    """Device ``ordinal``'s primary context if this process has retained it, else None
    (never retains it: nothing is made current)."""
    return _CONTEXTS.get(ordinal)


def _retain(ordinal: int) -> Any:
    """Retain device ``ordinal``'s primary context (shared with CuPy and PyTorch)."""
    ok, why = gpu_status()
    if not ok:
        raise LaunchError(f"cannot use the GPU: {why}")
    drv = driver()
    dev = check(drv.cuDeviceGet(ordinal), "cuDeviceGet")
    ctx = check(drv.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(drv.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return ctx


def make_current(ordinal: int = 0) -> Any:
    """Make device ``ordinal``'s primary context current on this thread (a no-op when it
    is: one ``cuCtxGetCurrent`` through ctypes, ~0.2 us); return it."""
    ctx = context(ordinal)
    fast = _FAST
    if not fast:
        _fast_calls()
    if fast[0] is not None:
        cur = ctypes.c_void_p()
        handle = int(ctx)
        if fast[0](ctypes.byref(cur)) == 0 and cur.value == handle:
            return ctx
        err = fast[1](handle)
        if err:
            check((driver().CUresult(err),), "cuCtxSetCurrent")
        return ctx
    check(driver().cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return ctx


#: (cuCtxGetCurrent, cuCtxSetCurrent) as private ctypes prototypes, or (None, None) where
#: libcuda cannot be opened by name (cuda-bindings then serves).
_FAST: list[Any] = []


def _fast_calls() -> None:
    try:
        get = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))(
            function_address("cuCtxGetCurrent"))
        put = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(
            function_address("cuCtxSetCurrent"))
        _FAST[:] = [get, put]
    except LaunchError:
        _FAST[:] = [None, None]


def stream_wait(device: int, producer: int, consumer: int) -> None:
    """Order ``consumer`` after the work already queued on ``producer`` (both raw stream
    handles on ``device``, whose context is made current first): the one stream wait
    (CAI v3 producer streams, DLPack exports, fkl inputs)."""
    drv = driver()
    make_current(device)
    if consumer not in (0, 1, 2) and _outside_capture(producer, consumer):
        return
    ev = check(drv.cuEventCreate(drv.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
    try:
        check(drv.cuEventRecord(ev, producer), "cuEventRecord")
        check(drv.cuStreamWaitEvent(consumer, ev, 0), "cuStreamWaitEvent")
    finally:
        check(drv.cuEventDestroy(ev), "cuEventDestroy")


def _outside_capture(producer: int, consumer: int) -> bool:
    """True when ``consumer`` is being captured into a graph and ``producer`` is not part
    of the same capture. CUDA forbids waiting there on an event recorded outside the
    capture (it invalidates the capture), and nothing runs while capturing: the replay is
    ordered after such producers by its caller, as for any CUDA graph. A producer in the
    same capture (a fork inside it) is waited for as usual."""
    status, ident = capture_info(consumer)
    if status != 1:  # CU_STREAM_CAPTURE_STATUS_ACTIVE
        return False
    if producer in (0, 1, 2):  # the default streams cannot be captured
        return True
    other, other_ident = capture_info(producer)
    return other != 1 or other_ident != ident


def capture_info(stream: int) -> tuple[int, int]:
    """(capture status, capture id) of raw stream ``stream``: status 0 none, 1 active,
    2 invalidated (``cuStreamGetCaptureInfo``; legal while capturing)."""
    drv = driver()
    res = drv.cuStreamGetCaptureInfo(stream)
    check((res[0],), "cuStreamGetCaptureInfo")
    return int(res[1]), int(res[2]) if len(res) > 2 else 0


_LIBCUDA: list[Any] = []


def libcuda() -> Any:
    """The driver library (``libcuda.so.1``) through ctypes: the launcher takes the
    addresses of ``cuLaunchKernel`` and the context calls from it."""
    if not _LIBCUDA:
        try:
            _LIBCUDA.append(ctypes.CDLL("libcuda.so.1"))
        except OSError as exc:
            raise LaunchError(f"cannot open the CUDA driver library libcuda.so.1: {exc}") \
                from None
    return _LIBCUDA[0]


def function_address(name: str) -> int:
    """The address of driver function ``name`` (for the launcher)."""
    return int(ctypes.cast(getattr(libcuda(), name), ctypes.c_void_p).value or 0)


def pointer_device(ptr: int) -> int:
    """Device ordinal of a device pointer (0 if the driver cannot tell)."""
    drv = driver()
    err, ordinal = drv.cuPointerGetAttribute(
        drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr)
    return int(ordinal) if int(err) == 0 else 0


def stream_handle(stream: Any) -> int:
    """The raw ``CUstream`` handle of anything that names a stream (0: legacy default).

    Accepts None, an int handle, ``cuda.bindings`` ``CUstream``, objects with the
    ``__cuda_stream__`` protocol (cuda.core), ``.cuda_stream`` (PyTorch) or ``.ptr`` (CuPy).
    """
    if stream is None:
        return 0
    if isinstance(stream, int):
        return stream
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        return int(proto()[1])
    for attr in ("cuda_stream", "ptr", "handle"):
        h = getattr(stream, attr, None)
        if h is not None:
            return int(h)
    try:
        return int(stream)
    except (TypeError, ValueError):
        raise TypeError(
            f"stream must be None, an int handle or a CUDA stream object, got "
            f"{type(stream).__name__}"
        ) from None
