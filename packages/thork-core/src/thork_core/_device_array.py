"""``DeviceArray``: dependency-free device memory that speaks both array protocols.

Memory comes from the device's stream-ordered pool (``_memory.device_pool``) and goes back
to it, on the stream it was allocated on, when the array is garbage collected. The array
exposes ``__cuda_array_interface__`` v3 and DLPack (``__dlpack__`` with legacy and
versioned capsules, ``__dlpack_device__``), so CuPy, PyTorch, JAX and Thork's own kernels
use it without copies. cuda-python is imported only when device memory is touched.

``DeviceArray(shape, dtype, pitch=...)`` allocates a *pitched* array instead (rows padded
to ``pitch`` bytes, as ``cudaMallocPitch`` does): a :class:`~thork_core._pitched_array.
PitchedArray`, the same class with strides.
"""

from __future__ import annotations

import ctypes
import math
import threading
from typing import Any

from . import _cuda
from ._adapter import _DLDataType, _DLDevice, _DLManagedTensor, _DLManagedTensorVersioned
from ._cuda import stream_wait
from ._dtype import _DL_CODES, array_dtype, array_shape, dlpack_code, typestr
from ._errors import ArgumentError
from ._memory import device_pool

__all__ = ["DeviceArray"]

_DL_CUDA = 2


#: The capsule maker: the native module's ``dlpack_export`` where it loads, else
#: :func:`_export_ctypes` (decided on the first export).
_EXPORT: list[Any] = []

#: Tensors exported through ctypes and still owned by a capsule or a consumer: address →
#: what keeps them valid (the native exporter counts its own: ``dlpack_exports()``).
_EXPORTS: dict[int, Any] = {}
_EXPORTS_LOCK = threading.Lock()


def _exporter() -> Any:
    from ._native import native_module

    mod = native_module()
    fn = getattr(mod, "dlpack_export", None) if mod is not None else None
    with _EXPORTS_LOCK:
        if not _EXPORT:
            _EXPORT.append(fn or _export_ctypes)
    return _EXPORT[0]


def live_exports() -> int:
    """DLPack exports of DeviceArrays whose deleter has not run yet (capsules alive or
    consumers holding the memory), both exporters together."""
    from ._native import native_module

    mod = native_module()
    count = getattr(mod, "dlpack_exports", None) if mod is not None else None
    return len(_EXPORTS) + (count() if count is not None else 0)


# Private prototypes: never change argtypes on the shared ctypes.pythonapi functions.
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p,
                                 ctypes.c_void_p)(("PyCapsule_New", ctypes.pythonapi))
_capsule_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _dl_deleter(managed: int) -> None:
    """DLPack deleter (both struct versions): drop the export and its owner reference."""
    with _EXPORTS_LOCK:
        _EXPORTS.pop(managed, None)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule: int) -> None:
    """A capsule nobody consumed still owns its tensor: call the deleter."""
    for name in (b"dltensor", b"dltensor_versioned"):
        if _capsule_valid(capsule, name):
            ptr = _capsule_pointer(capsule, name)
            if ptr:
                _dl_deleter(ptr)
            return


def _export_ctypes(owner: Any, ptr: int, shape: tuple[int, ...],
                   strides: tuple[int, ...] | None, code: int, bits: int, device: int,
                   versioned: bool) -> Any:
    """The native ``dlpack_export`` through ctypes (no native module: ``THORK_NATIVE=0``
    or no C compiler): the same capsule, its parts kept in :data:`_EXPORTS`."""
    ndim = len(shape)
    dims = (ctypes.c_int64 * max(ndim, 1))(*shape)
    managed: Any = _DLManagedTensorVersioned() if versioned else _DLManagedTensor()
    if versioned:
        managed.major, managed.minor, managed.flags = 1, 0, 0
    t = managed.dl_tensor
    t.data = ptr
    t.device = _DLDevice(_DL_CUDA, device)
    t.ndim = ndim
    t.dtype = _DLDataType(code, bits, 1)
    t.shape = ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64))
    steps = None if strides is None else (ctypes.c_int64 * max(ndim, 1))(*strides)
    t.strides = None if steps is None else ctypes.cast(steps, ctypes.POINTER(ctypes.c_int64))
    t.byte_offset = 0
    managed.manager_ctx = None
    managed.deleter = ctypes.cast(_dl_deleter, ctypes.c_void_p)
    addr = ctypes.addressof(managed)
    with _EXPORTS_LOCK:
        _EXPORTS[addr] = (managed, dims, steps, owner)
    name = b"dltensor_versioned" if versioned else b"dltensor"
    return _capsule_new(addr, name, ctypes.cast(_capsule_destructor, ctypes.c_void_p))


class DeviceArray:
    """A C-contiguous array in device memory: ``DeviceArray(shape, dtype, device=0)``.

    ``ptr`` is the device address, ``device`` the CUDA ordinal, ``stream`` the raw handle
    of the stream that last wrote it (0: legacy default). ``to_host()`` copies it back;
    ``DeviceArray.from_host(a)`` uploads a NumPy array.

    ``pitch`` (bytes, or True for the row's bytes rounded up to 512, as
    ``cudaMallocPitch`` picks) makes a pitched array instead: the index along
    ``pitch_axis`` (default 0: the rows of an (H, W) or (H, W, C) image; 1 for a batch
    (B, H, W[, C])) steps ``pitch`` bytes, the axes after it are packed, the axes before
    it step whole padded planes. It is a :class:`~thork_core._pitched_array.PitchedArray`
    (a DeviceArray subclass) whose ``strides``, ``__cuda_array_interface__`` and DLPack
    export carry the pitch; fkl reads and writes it in place, Thork kernels (which need
    C-contiguous arrays) reject it.
    """

    __slots__ = ("ptr", "shape", "dtype", "device", "stream", "_owner", "_owns", "__weakref__")

    def __new__(cls, *args: Any, pitch: Any = None, **kwargs: Any) -> DeviceArray:
        if pitch is not None and cls is DeviceArray:  # a pitched allocation
            from ._pitched_array import PitchedArray

            return object.__new__(PitchedArray)
        return object.__new__(cls)

    def __init__(self, shape: Any, dtype: Any = "float32", *, device: int = 0,
                 stream: Any = None, pitch: Any = None, pitch_axis: int | None = None) -> None:
        self._owns = False
        self.shape = array_shape(shape, "DeviceArray")
        self.dtype = array_dtype(dtype, "DeviceArray")
        if pitch is not None or pitch_axis is not None:
            nbytes = self._set_pitch(pitch, pitch_axis)
        else:
            nbytes = self.nbytes
        if not isinstance(device, int) or device < 0:
            raise ArgumentError(f"DeviceArray device: expected a CUDA ordinal >= 0, got "
                                f"{device!r}")
        self.device = device
        _cuda.make_current(device)
        self.stream = _cuda.stream_handle(stream)
        self.ptr = device_pool(device).alloc(nbytes, self.stream)
        self._owner = None
        self._owns = True

    def _set_pitch(self, pitch: Any, pitch_axis: int | None) -> int:
        """Only a pitched array (:class:`PitchedArray`) takes a pitch: here, ``pitch_axis``
        came without one."""
        raise ArgumentError(f"DeviceArray pitch_axis: applies to a pitched array; give "
                            f"pitch= (bytes, or True) with it, got pitch_axis={pitch_axis!r}")

    @classmethod
    def wrap(cls, ptr: int, shape: Any, dtype: Any, *, device: int = 0, stream: int = 0,
             owner: Any = None, pitch: int | None = None,
             pitch_axis: int | None = None) -> DeviceArray:
        """A view of existing device memory at ``ptr`` (kept alive through ``owner``;
        never freed by this object). ``pitch``/``pitch_axis`` as in the constructor: a
        pitched view, e.g. of a decoder's frame (``pitch`` must then be given in bytes)."""
        self = cls.__new__(cls, pitch=pitch)
        self._owns = False
        self.ptr = int(ptr)
        self.shape = array_shape(shape, "DeviceArray")
        self.dtype = array_dtype(dtype, "DeviceArray")
        if pitch is not None or pitch_axis is not None:
            if pitch is True:
                raise ArgumentError("DeviceArray.wrap pitch: the memory exists; give its "
                                    "pitch in bytes, got True")
            self._set_pitch(pitch, pitch_axis)
        self.device, self.stream, self._owner = device, int(stream), owner
        return self

    @classmethod
    def from_host(cls, array: Any, *, device: int = 0, stream: Any = None,
                  pitch: Any = None, pitch_axis: int | None = None) -> DeviceArray:
        """Upload ``array`` (anything NumPy can read; made C-contiguous). Synchronous.
        ``pitch``/``pitch_axis`` as in the constructor: upload into a pitched array."""
        import numpy as np

        host = np.ascontiguousarray(array)
        out = cls(host.shape, host.dtype, device=device, stream=stream, pitch=pitch,
                  pitch_axis=pitch_axis)
        out.copy_from_host(host)
        return out

    @classmethod
    def from_dlpack(cls, obj: Any, *, stream: Any = None) -> DeviceArray:
        """A zero-copy view of a CUDA array that exports DLPack (torch, CuPy, JAX...).

        ``stream`` (a stream object or raw handle; None: the legacy default stream) is the
        stream the array will be used on: the producer orders it after its own work (the
        protocol's handshake), and it becomes the view's ``stream``. The producer's array
        is kept alive by the view. Raises ArgumentError for host or strided arrays."""
        from ._adapter import DLPackAdapter
        from ._cuda import stream_handle

        handle = stream_handle(stream) if stream is not None else 0
        if not hasattr(obj, "__dlpack__"):
            raise ArgumentError(f"DeviceArray.from_dlpack: {type(obj).__name__} has no "
                                "__dlpack__")
        v = DLPackAdapter().view(obj, handle)
        assert v is not None
        if v.device != "cuda":
            raise ArgumentError(f"DeviceArray.from_dlpack: the array is in host memory; "
                                f"use DeviceArray.from_host (got a {type(obj).__name__})")
        if not v.contiguous:
            raise ArgumentError(f"DeviceArray.from_dlpack: needs a C-contiguous array, got "
                                f"shape {v.shape} with strides {v.strides}")
        return cls.wrap(v.ptr, v.shape, v.dtype, device=v.device_id, stream=handle,
                        owner=v.keepalive)

    @classmethod
    def empty(cls, shape: Any, dtype: Any = "float32", *, device: int = 0,
              stream: Any = None, pitch: Any = None,
              pitch_axis: int | None = None) -> DeviceArray:
        """Uninitialized device memory (same as the constructor)."""
        return cls(shape, dtype, device=device, stream=stream, pitch=pitch,
                   pitch_axis=pitch_axis)

    # -- properties ----------------------------------------------------------------------
    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def strides(self) -> tuple[int, ...]:
        """Byte strides of the C-contiguous layout."""
        out, step = [], self.itemsize
        for s in reversed(self.shape):
            out.append(step)
            step *= s
        return tuple(reversed(out))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d DeviceArray")
        return self.shape[0]

    def __repr__(self) -> str:
        return (f"DeviceArray(shape={self.shape}, dtype={self.dtype.name}, "
                f"device=cuda:{self.device})")

    def reshape(self, *shape: Any) -> DeviceArray:
        """A view with a new shape (same number of elements)."""
        new = array_shape(shape[0] if len(shape) == 1 else shape, "DeviceArray.reshape")
        n = 1
        for s in new:
            n *= s
        if n != self.size:
            raise ArgumentError(f"DeviceArray.reshape: cannot reshape {self.shape} "
                                f"({self.size} elements) to {new}")
        return DeviceArray.wrap(self.ptr, new, self.dtype, device=self.device,
                                stream=self.stream, owner=self)

    # -- copies --------------------------------------------------------------------------
    def copy_from_host(self, array: Any) -> None:
        """Copy NumPy ``array`` (same number of bytes) into this array; synchronous."""
        import numpy as np

        host = np.ascontiguousarray(array)
        if host.nbytes != self.nbytes:
            raise ArgumentError(f"DeviceArray.copy_from_host: expected {self.nbytes} bytes "
                                f"(shape {self.shape}), got {host.nbytes} (shape {host.shape})")
        self._copy_bytes(host, self.nbytes, upload=True)

    def _copy_bytes(self, host: Any, nbytes: int, upload: bool) -> None:
        """Copy the first ``nbytes`` of this allocation from (``upload``) or to the
        C-contiguous NumPy ``host``, after the work queued on its stream; synchronous."""
        drv = _cuda.driver()
        _cuda.make_current(self.device)
        _cuda.check(drv.cuStreamSynchronize(self.stream), "cuStreamSynchronize")
        if not nbytes:
            return
        if upload:
            _cuda.check(drv.cuMemcpyHtoD(self.ptr, host.ctypes.data, nbytes), "cuMemcpyHtoD")
        else:
            _cuda.check(drv.cuMemcpyDtoH(host.ctypes.data, self.ptr, nbytes), "cuMemcpyDtoH")

    def to_host(self, out: Any = None) -> Any:
        """A NumPy copy of the array, after the work queued on its stream; synchronous."""
        import numpy as np

        host = np.empty(self.shape, dtype=self.dtype.numpy) if out is None else out
        if host.nbytes != self.nbytes or not host.flags.c_contiguous:
            raise ArgumentError(f"DeviceArray.to_host out: expected a C-contiguous array of "
                                f"{self.nbytes} bytes, got {host.nbytes}")
        self._copy_bytes(host, self.nbytes, upload=False)
        return host

    def copy_to_host(self) -> Any:
        """Alias of :meth:`to_host` (CuPy/Numba spelling)."""
        return self.to_host()

    # -- protocols -----------------------------------------------------------------------
    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {
            "shape": self.shape,
            "typestr": typestr(self.dtype),
            "data": (self.ptr, False),
            "version": 3,
            "strides": None,
            # CAI v3: consumers order their work after this stream (1 = legacy default).
            "stream": self.stream or 1,
        }

    def __dlpack_device__(self) -> tuple[int, int]:
        return (_DL_CUDA, self.device)

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None,
                   dl_device: Any = None, copy: Any = None) -> Any:
        """Export as a DLPack capsule (versioned when the consumer allows 1.x). When the
        consumer names its ``stream``, that stream is made to wait for this array's.

        The capsule is built in C by the native module where it is loaded (~1 us), else
        through ctypes; either way it keeps this array alive until its deleter runs."""
        if copy:
            raise BufferError("DeviceArray.__dlpack__: copy=True is not supported")
        if dl_device is not None and tuple(dl_device) != (_DL_CUDA, self.device):
            raise BufferError(f"DeviceArray.__dlpack__: cannot export to device {dl_device}")
        # DLPack's handshake: the consumer names the stream it will use (None or 1: the
        # legacy default stream, 2: per-thread default, -1: no synchronization wanted);
        # work queued on this array's stream must be done before that stream reads it.
        if stream is not None and stream != 1 and stream != 0:
            consumer = int(stream)
            if consumer != -1 and consumer != self.stream:
                stream_wait(self.device, producer=self.stream, consumer=consumer)
        elif self.stream:
            stream_wait(self.device, producer=self.stream, consumer=0)
        code = _DL_CODES.get(self.dtype) or dlpack_code(self.dtype)
        return (_EXPORT[0] if _EXPORT else _exporter())(
            self, self.ptr, self.shape, self._dl_strides(), code[0], code[1], self.device,
            max_version is not None and max_version[0] >= 1)

    def _dl_strides(self) -> tuple[int, ...] | None:
        """The DLPack strides (elements), or None for the compact layout."""
        return None

    # -- lifetime ------------------------------------------------------------------------
    def __del__(self) -> None:
        # (Where core's native module serves launches, device 0's arrays take the same
        # steps in C: use_native_finalizer below replaces this method.)
        if not getattr(self, "_owns", False):
            return
        self._owns = False
        try:
            if self.device:  # the free is ordered on a stream of the owning device's context
                _cuda.make_current(self.device)
            device_pool(self.device).free(self.ptr, self.stream)
        except Exception:  # interpreter shutdown or a destroyed stream: nothing to do
            pass


#: The Python finalizer, which the native one falls back to (other devices, odd slots).
_PY_DEL = DeviceArray.__del__
_FINALIZER_LOCK = threading.Lock()


def use_native_finalizer(mod: Any) -> bool:
    """Make ``DeviceArray.__del__`` the native module's ``Finalizer`` (``_native_launch.c``)
    for device 0: the same steps as the Python method (the memory back to the pool on the
    array's stream), taken in C with no Python frame, with device 0's context current for
    the free and the thread's own restored after (the Python method frees in whatever
    context is current); arrays of other devices take the Python method. Installed once per process,
    by the paths that use the native module on the GPU (an fkl output maker, a kernel's
    binder): an allocating ``pipe(x)`` in a loop frees one output per call. Returns whether
    it is installed (False: no driver entry points, a module without it, or device 0's
    context not yet retained by this process: a later call installs it)."""
    current = DeviceArray.__dict__.get("__del__")
    finalizer = getattr(mod, "Finalizer", None)
    if finalizer is None:
        return False
    if isinstance(current, finalizer):
        return True
    with _FINALIZER_LOCK:
        current = DeviceArray.__dict__.get("__del__")
        if isinstance(current, finalizer):
            return True
        ctx = _cuda.retained_context(0)
        if ctx is None:  # device 0 unused so far: retaining it here would make it current
            return False
        try:
            fin = finalizer(DeviceArray, 0, _cuda.function_address("cuMemFreeAsync"), int(ctx),
                            _cuda.function_address("cuCtxGetCurrent"),
                            _cuda.function_address("cuCtxSetCurrent"), _PY_DEL)
        except Exception:  # no driver, or no such entry point: the Python method stays
            return False
        DeviceArray.__del__ = fin  # type: ignore[method-assign]
        return True
