"""Array adapters: turn NumPy arrays and foreign device arrays into :class:`ArrayView`.

Core ships three: NumPy (host), ``__cuda_array_interface__`` v3 and DLPack (versioned and
legacy capsules). Plugins add more through ``thork_register_array_adapters``.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any

from ._dtype import DType, from_dlpack_code, from_numpy
from ._record import Record

__all__ = [
    "ArrayView", "ArrayAdapter", "NumpyAdapter", "CudaArrayInterfaceAdapter", "DLPackAdapter",
    "c_contiguous",
]


class ArrayView(Record):
    """What a target needs to know about one array argument.

    ``ptr`` is the address of element 0 (host or device); ``strides`` are in bytes, or
    None for C-contiguous; ``device`` is ``"cpu"`` or ``"cuda"`` with ``device_id``;
    ``stream`` is the producer's CUDA stream handle when it asked consumers to wait on it.
    ``keepalive`` holds whatever must stay referenced while the array is in use.
    Compared by its fields (a dataclass written out: :mod:`thork_core._record`).
    """

    _fields = ("ptr", "shape", "strides", "dtype", "device", "device_id", "readonly", "host",
               "stream", "keepalive")
    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None
    dtype: DType
    device: str
    device_id: int
    readonly: bool
    host: Any
    stream: int | None
    keepalive: Any

    def __init__(self, ptr: int, shape: tuple[int, ...], strides: tuple[int, ...] | None,
                 dtype: DType, device: str, device_id: int = 0, readonly: bool = False,
                 host: Any = None, stream: int | None = None, keepalive: Any = None) -> None:
        self.ptr = ptr
        self.shape = shape
        self.strides = strides
        self.dtype = dtype
        self.device = device
        self.device_id = device_id
        self.readonly = readonly
        self.host = host
        self.stream = stream
        self.keepalive = keepalive

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def contiguous(self) -> bool:
        return self.strides is None or c_contiguous(self.shape, self.strides, self.dtype.itemsize)


def c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> bool:
    """True when byte ``strides`` describe a C-contiguous layout (size-1 axes ignored)."""
    expected = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


class ArrayAdapter:
    """Base of adapters. ``view`` returns an :class:`ArrayView` or None if not handled."""

    name = ""
    priority = 0
    #: The module (``sys.modules`` name) whose arrays have a current stream that launches
    #: given no ``stream=`` follow (``"torch"``); empty: none. A launch asks
    #: :meth:`launch_stream` only while that module is imported.
    follows = ""

    def view(self, obj: Any, stream: int | None) -> ArrayView | None:  # pragma: no cover
        raise NotImplementedError

    def launch_stream(self, obj: Any) -> int | None:
        """The raw stream a launch with ``obj`` among its arguments and no ``stream=``
        runs on (the library's current stream on the array's device), or None: not this
        adapter's array, or no such stream (h-interop: torch's current stream)."""
        return None

    # A following adapter (``follows`` set) also reads its arrays on the hot paths
    # (thork_core._probe): asked once per exact type whether it claims it, then per call.
    def claims(self, tx: type) -> bool:
        """Whether arguments of exact type ``tx`` are this adapter's (asked once per type,
        only of adapters whose ``follows`` module is imported)."""
        return False

    def fast(self, obj: Any) -> tuple[int, Any, int, int] | None:
        """``(address, key, producer stream, device)`` of a claimed array a hot path can
        use without an :class:`ArrayView` (a C-contiguous device array: the producer
        stream is the library's current stream there; the key is ``(type, shape, Thork
        DType, device)``, what a plan or a parameter check for it depends on), else None
        (the adapters' path)."""
        return None

    def used_on(self, obj: Any, stream: int) -> None:
        """Tell the library that a launch on ``stream`` (not its current stream) uses
        ``obj`` (torch: ``record_stream``, so the caching allocator keeps the memory until
        that work is done). Called by the hot paths after they waited for the producer."""

    def describe(self) -> str | None:
        """(session 20) One line for ``thork info`` on how this adapter reads its arrays
        on this machine (torch: which reader the hot paths use, and why), or None: nothing
        to add. Asked only by ``thork info``; it may import the adapter's library but
        must not build or start anything. An exception is printed in its place."""
        return None


class NumpyAdapter(ArrayAdapter):
    """Host arrays: ``numpy.ndarray`` (and subclasses)."""

    name = "numpy"
    priority = 100

    def view(self, obj: Any, stream: int | None) -> ArrayView | None:
        import numpy as np

        if not isinstance(obj, np.ndarray):
            return None
        return ArrayView(
            ptr=obj.ctypes.data,
            shape=obj.shape,
            strides=None if obj.flags.c_contiguous else obj.strides,
            dtype=from_numpy(obj.dtype),
            device="cpu",
            readonly=not obj.flags.writeable,
            host=obj,
        )


class CudaArrayInterfaceAdapter(ArrayAdapter):
    """Device arrays exposing ``__cuda_array_interface__`` (CuPy, Numba, PyTorch, fkl)."""

    name = "cuda_array_interface"
    priority = 90

    def view(self, obj: Any, stream: int | None) -> ArrayView | None:
        cai = getattr(obj, "__cuda_array_interface__", None)
        if cai is None:
            return None
        ptr, readonly = cai["data"]
        producer_stream = cai.get("stream")
        strides = cai.get("strides")
        return ArrayView(
            ptr=ptr or 0,
            shape=tuple(cai["shape"]),
            strides=tuple(strides) if strides else None,
            dtype=from_numpy(cai["typestr"]),
            device="cuda",
            device_id=_device_of(obj, ptr) if ptr else 0,
            readonly=bool(readonly),
            stream=producer_stream if producer_stream not in (None, 1, 2) else None,
            keepalive=obj,
        )


# -- DLPack -------------------------------------------------------------------------------
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13
_FLAG_READ_ONLY = 1

_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_get_name = ctypes.pythonapi.PyCapsule_GetName
_get_name.restype = ctypes.c_char_p
_get_name.argtypes = [ctypes.py_object]


def capsule_tensor(capsule: Any) -> tuple[_DLTensor, bool]:
    """The ``DLTensor`` inside a DLPack capsule (``dltensor`` or ``dltensor_versioned``,
    left unconsumed: its destructor still releases the producer's reference) and whether
    the producer marked it read-only. TypeError for another capsule, another DLPack ABI
    major, or vector lanes."""
    name = _get_name(capsule)
    readonly = False
    if name == b"dltensor_versioned":
        managed: Any = _DLManagedTensorVersioned.from_address(_get_pointer(capsule, name))
        if managed.major != 1:  # its layout may differ: not read (the protocol's rule)
            raise TypeError(f"__dlpack__ returned a DLPack {managed.major}.{managed.minor} "
                            "tensor; Thork reads DLPack 1.x (and legacy 0.x) tensors")
        readonly = bool(managed.flags & _FLAG_READ_ONLY)
    elif name == b"dltensor":
        managed = _DLManagedTensor.from_address(_get_pointer(capsule, name))
    else:
        raise TypeError(f"__dlpack__ returned a capsule named {name!r}; expected a DLTensor")
    t = managed.dl_tensor
    if t.dtype.lanes != 1:
        raise TypeError(f"DLPack tensors with {t.dtype.lanes} lanes are not supported")
    return t, readonly


class DLPackAdapter(ArrayAdapter):
    """Objects with ``__dlpack__``/``__dlpack_device__`` (PyTorch, JAX, CuPy, NumPy ≥ 1.22).

    The capsule is left unconsumed, so its destructor releases the producer's reference
    when the view is dropped; the producer object itself is kept alive by the view.
    """

    name = "dlpack"
    priority = 80

    def view(self, obj: Any, stream: int | None) -> ArrayView | None:
        if not hasattr(obj, "__dlpack__"):
            return None
        dev_type, dev_id = obj.__dlpack_device__()
        kwargs: dict[str, Any] = {}
        if dev_type == _DL_CUDA:
            # DLPack's stream handshake: the consumer names the stream it will read on
            # (the launch stream; 1 is CUDA's legacy default stream, which 0 means here)
            # and the producer orders that stream after its pending writes.
            kwargs["stream"] = stream if stream else 1
        try:
            capsule = obj.__dlpack__(max_version=(1, 0), **kwargs)
        except TypeError:
            capsule = obj.__dlpack__(**kwargs)
        t, readonly = capsule_tensor(capsule)
        shape = tuple(t.shape[i] for i in range(t.ndim))
        dtype = from_dlpack_code(t.dtype.code, t.dtype.bits)
        strides = (
            tuple(t.strides[i] * dtype.itemsize for i in range(t.ndim)) if t.strides else None
        )
        if t.device.device_type in (_DL_CUDA, _DL_CUDA_MANAGED):
            device = "cuda"
        elif t.device.device_type in (_DL_CPU, _DL_CUDA_HOST):
            device = "cpu"
        else:
            raise TypeError(f"DLPack device type {t.device.device_type} is not supported")
        host = None
        if device == "cpu":
            import numpy as np

            host = np.from_dlpack(obj) if hasattr(np, "from_dlpack") else None
        return ArrayView(
            ptr=(t.data or 0) + t.byte_offset,
            shape=shape,
            strides=strides,
            dtype=dtype,
            device=device,
            device_id=t.device.device_id,
            readonly=readonly,
            host=host,
            keepalive=(obj, capsule),
        )


def _device_of(obj: Any, ptr: int) -> int:
    """The CUDA device ordinal of array ``obj`` at ``ptr`` (0 when it cannot be asked):
    Thork's own arrays and DLPack producers say so themselves; the driver is asked for
    the rest (pool memory may not answer it).

    With one visible device there is nothing to ask, and this is on the launch path.
    """
    from . import _cuda

    if _cuda.device_count() <= 1:
        return 0
    from ._device import array_device

    d = array_device(obj)
    return d if d is not None else _cuda.pointer_device(ptr)
