"""The array probe: what a hot call reads from an array without building an ArrayView.

Core's adapters (:mod:`thork_core._adapter`) give the full :class:`ArrayView` of any array
kind; that costs a dataclass and several lookups per argument. A hot call needs less: the
address, and whether the array is exactly the kind it checked before. This module is that
reading, for the kinds that can skip the adapters: Thork's own :class:`DeviceArray`,
NumPy arrays, and unmasked ``__cuda_array_interface__`` producers (CuPy, torch, Numba) on
the one visible GPU, or on any of several when they also say their device through
``__dlpack_device__``. Everything else returns None: the caller takes the adapters. Kernel launches
(``CudaExecutable.launch``'s Python path) and fkl pipes read arrays through it; the
native module's ``Binder`` makes the same decisions in C.

Arrays of a library with a *current stream* (torch) are read by their adapter's
:meth:`~thork_core.ArrayAdapter.fast` and carry that adapter (the *follower*): a launch
given no ``stream=`` runs on the follower's current stream, and a launch on another
stream waits for it and tells the library (:meth:`~thork_core.ArrayAdapter.used_on`).
Which kind an argument is gets decided once per exact type (:func:`kind_of`, a dict
lookup afterwards): arrays of other kinds pay nothing for the followers, and the native
module's binder reads the same table (it takes ``__cuda_array_interface__`` only from
types listed there as plain producers).
"""

from __future__ import annotations

import operator
import sys
import threading
from typing import Any

from ._device import _DL_CUDA, _DL_CUDA_MANAGED

__all__ = ["ARRAY_READER_CAPSULE", "CAI", "DEFAULT_STREAMS", "DLPACK", "KINDS",
           "array_reader_include", "cai_pointer", "dlpack_cuda_device",
           "dlpack_probe", "follow", "followers", "forget_kinds", "foreign_reader",
           "implied_stream", "kind_of", "no_max_version", "one_gpu", "probe",
           "refresh_readers", "sync_native"]

#: ``__cuda_array_interface__`` ``stream`` values that ask no wait of a consumer: absent,
#: 0 (not valid in CAI v3; read as the legacy stream, as the native module does), the
#: legacy (1) and per-thread (2) default streams.
DEFAULT_STREAMS = (None, 0, 1, 2)

_TYPES: list[Any] = []
_TYPES_LOCK = threading.Lock()
_ONE_GPU: list[bool] = []

#: The kind of a plain ``__cuda_array_interface__`` producer (CuPy, Numba, anything not
#: claimed by a follower): read through its interface dict. ``PLAIN``: a type that is no
#: array at all on the hot paths (Python scalars).
CAI = "cai"
PLAIN = "plain"
#: The kind of a producer that offers only DLPack (``__dlpack__`` and
#: ``__dlpack_device__``, no ``__cuda_array_interface__``): read by :func:`dlpack_probe`,
#: which needs the launch stream (the protocol's handshake).
DLPACK = "dlpack"
#: Exact type -> ``"device"`` (DeviceArray), ``"host"`` (numpy.ndarray), :data:`CAI`,
#: :data:`PLAIN`, or the follower adapter that claimed the type. Filled on first sight of
#: each type (:func:`kind_of`); the native binder looks types up here too. Bounded: types
#: made at run time beyond the bound are decided per call.
KINDS: dict[type, Any] = {int: PLAIN, float: PLAIN, bool: PLAIN, complex: PLAIN}
_MAX_KINDS = 512


def _types() -> list[Any]:
    """``[numpy.ndarray, DeviceArray, PitchedArray]``, imported on first use (once: threads
    calling first wait for one another, never extend the list twice)."""
    if not _TYPES:
        import numpy as np

        from ._device_array import DeviceArray
        from ._pitched_array import PitchedArray

        with _TYPES_LOCK:
            if not _TYPES:
                _TYPES.extend((np.ndarray, DeviceArray, PitchedArray))
    return _TYPES


def one_gpu() -> bool:
    """Whether exactly one GPU is visible (asked once): only then does a CAI pointer need
    no query of the device that owns it."""
    if not _ONE_GPU:
        from ._cuda import device_count

        try:
            _ONE_GPU.append(device_count() == 1)
        except Exception:  # noqa: BLE001 - no driver: no device arrays either
            _ONE_GPU.append(False)
    return _ONE_GPU[0]


def forget_kinds() -> None:
    """Forget every type's kind (the plugin registry was reset: the followers may differ),
    and the native module's readers of foreign types with them."""
    for tx in [t for t, k in KINDS.items() if k not in (PLAIN,)]:
        KINDS.pop(tx, None)
    mod = _loaded_native()
    if mod is not None and hasattr(mod, "foreign"):
        mod.foreign()


def _loaded_native() -> Any:
    """The native module when it is loaded already (never builds it), else None."""
    native = sys.modules.get(__package__ + "._native")
    return None if native is None else native._STATE.get("module")


def foreign_reader(tx: type, kind: Any, c_api: bool = True) -> tuple[int, Any, Any] | None:
    """How the native module's Binder and Guard read arrays of exactly ``tx`` (of kind
    ``kind``) through the producer's own attributes (``_native_launch.c``, "Foreign
    readers"): ``(style, current, dtypes)``, else None (they read its interface dict,
    or leave it to Python). CuPy's ``ndarray`` while it is a plain producer here (style
    1; ``current``: the capsule of CuPy's C function ``get_current_stream_ptr`` where
    ``cupy_backends.cuda.stream`` exports it and ``c_api`` is true, else
    ``cupy.cuda.get_current_stream``), and a follower adapter's type where the adapter
    offers ``native_reader(tx)`` (torch: style 2). A CuPy without the ``_c_contiguous``
    flag its own ``__cuda_array_interface__`` reads, or without
    ``cupy.cuda.get_current_stream``, keeps the interface path."""
    if kind is CAI:
        cupy = sys.modules.get("cupy")
        if cupy is None or tx is not getattr(cupy, "ndarray", None) or \
                not hasattr(tx, "_c_contiguous"):
            return None
        current = getattr(getattr(cupy, "cuda", None), "get_current_stream", None)
        if not callable(current):
            return None
        if c_api:
            # Cython's export table: {name: capsule named with the C signature}. The
            # backend's function is what cupy.cuda.stream's (and get_current_stream)
            # answer from, without their second thread-local lookup (session 16: 62 ns
            # a call against 155 on the H200, CuPy 14.2; bench/diag_cupy_stream.py).
            capi = getattr(sys.modules.get("cupy_backends.cuda.stream"), "__pyx_capi__",
                           None)
            fn = capi.get("get_current_stream_ptr") if isinstance(capi, dict) else None
            if fn is not None:
                return (1, fn, None)
        return (1, current, None)
    if kind.__class__ is str:
        return None
    reader = getattr(kind, "native_reader", None)
    return reader(tx) if reader is not None else None  # type: ignore[no-any-return]


#: (session 19) The name of a capsule holding a plugin's C array reader
#: (``thork_array_reader.h``), which ``native_reader(tx)`` may give as its ``current``.
ARRAY_READER_CAPSULE = "thork.array_reader"


def array_reader_include() -> str:
    """The folder of ``thork_array_reader.h`` (the C interface of a plugin's array
    reader): give it to the compiler as ``-I``."""
    import os

    return os.path.dirname(os.path.abspath(__file__))


def refresh_readers() -> None:
    """Ask every decided type's adapter again how the native module reads it, and
    register the answer (a plugin whose C reader became available, e.g. built in the
    background, calls this). Nothing happens where the native module is not loaded."""
    mod = _loaded_native()
    if mod is not None:
        sync_native(mod)


def sync_native(mod: Any) -> None:
    """Register with native module ``mod`` the reader of every type decided so far (its
    Binders and Guards are being made; later decisions register in :func:`kind_of`)."""
    for tx, kind in list(KINDS.items()):
        _register(mod, tx, kind)


def _register(mod: Any, tx: type, kind: Any) -> None:
    """Tell native module ``mod`` how to read ``tx`` (where it reads such arrays at all)."""
    got = foreign_reader(tx, kind) if hasattr(mod, "foreign") else None
    if got is None:
        return
    try:
        mod.foreign(tx, *got)
    except ValueError:
        # a C function whose signature the module does not take: the Python function
        got = foreign_reader(tx, kind, c_api=False)
        if got is not None:
            mod.foreign(tx, *got)


def kind_of(tx: type) -> Any:
    """The kind of arguments of exact type ``tx`` (see :data:`KINDS`): decided once per
    type. A type is a follower's when an array adapter that follows an imported module
    (``ArrayAdapter.follows``) claims it (:meth:`~thork_core.ArrayAdapter.claims`); only
    those adapters are asked (the plugin index says which, without importing the others)."""
    kind = KINDS.get(tx)
    if kind is not None:
        return kind
    nd, da, _ = _TYPES or _types()
    if tx is da:
        kind = "device"
    elif tx is nd:
        kind = "host"
    else:
        kind = CAI
        from ._plugins import plugins

        for adapter in plugins().follower_adapters():
            if adapter.claims(tx):
                kind = adapter
                break
        if kind is CAI and not hasattr(tx, "__cuda_array_interface__") and \
                hasattr(tx, "__dlpack__") and hasattr(tx, "__dlpack_device__"):
            kind = DLPACK
    if len(KINDS) < _MAX_KINDS:
        KINDS[tx] = kind
        mod = _loaded_native()
        if mod is not None:
            _register(mod, tx, kind)
    return kind


def implied_stream(args: Any) -> int:
    """The raw stream handle a launch of ``args`` given no ``stream=`` runs on: the
    current stream of the first argument whose follower names one (torch's current stream
    on a CUDA tensor's device), else 0 (the legacy default stream). One dict lookup per
    argument when none is a follower's."""
    kinds = KINDS
    for arg in args:
        kind = kinds.get(type(arg)) or kind_of(type(arg))
        if kind.__class__ is str:
            continue
        handle = kind.launch_stream(arg)
        if handle is not None:
            return handle  # type: ignore[no-any-return]
    return 0


def followers(arrays: Any) -> list[tuple[Any, Any, int]] | None:
    """``(array, adapter, its current stream)`` for each of ``arrays`` whose library has
    a current stream (a CUDA tensor), else None: one dict lookup per array of any other
    kind."""
    found = None
    kinds = KINDS
    for x in arrays:
        kind = kinds.get(type(x)) or kind_of(type(x))
        if kind.__class__ is str:
            continue
        current = kind.launch_stream(x)
        if current is not None:
            if found is None:
                found = []
            found.append((x, kind, current))
    return found


def follow(followed: Any, handle: int, device: int) -> None:
    """Order a launch on stream ``handle`` (on ``device``) after the current streams of the
    ``followed`` arrays (``(array, adapter, current stream)``, from :func:`probe` or
    :func:`followers`) that are not ``handle``, and tell their libraries about the use
    (``used_on``: torch's ``record_stream``): what the adapters' path does for a tensor,
    without an ArrayView. One wait per distinct stream."""
    waited: list[int] = []
    for x, adapter, current in followed:
        if current == handle:
            continue
        if current not in waited:
            from ._cuda import stream_wait

            stream_wait(device, current, handle)
            waited.append(current)
        adapter.used_on(x, handle)


def probe(x: Any) -> tuple[int, Any, int, int, Any] | None:
    """``(address, key, producer stream, device, follower)`` for an array that can skip
    the adapters, else None. ``key`` is what must match for the rest of a previous check of
    an array of this kind to hold: ``(shape, dtype, device)`` for a DeviceArray,
    ``(shape, dtype, device, byte strides)`` for a pitched one (read from its slots like a
    DeviceArray's, so it needs no ``__cuda_array_interface__`` and no one-GPU machine),
    ``(shape, numpy dtype, -1)`` for a C-contiguous NumPy array (``(shape, numpy dtype,
    strides)`` for a strided view), ``(type, shape, typestr, device)`` for a CAI producer
    (with its strides appended when it has some): a strided array keys by its strides,
    which a caller's plan for it holds. With several GPUs a CAI producer is taken only
    when it names its device through ``__dlpack_device__`` (CuPy does; the interface
    itself names none). The producer stream is 0 when no wait can be needed (host
    arrays and the default streams); device is -1 for host arrays. ``follower``: None, or
    the adapter of a library with a current stream (the producer stream is that stream; a
    caller given no ``stream=`` launches there, else waits for it and calls the adapter's
    :meth:`~thork_core.ArrayAdapter.used_on`); such an array's key is its adapter's."""
    nd, da, pa = _TYPES or _types()
    tx = type(x)
    if tx is da:
        return x.ptr, (x.shape, x.dtype, x.device), x.stream, x.device, None
    if tx is nd:
        return x.__array_interface__["data"][0], (
            x.shape, x.dtype, -1 if x.flags.c_contiguous else x.strides), 0, -1, None
    if tx is pa:  # (h-pitch7) its device is known: no CAI read, any number of GPUs
        return x.ptr, (x.shape, x.dtype, x.device, x.strides), x.stream, x.device, None
    kind = KINDS.get(tx) or kind_of(tx)
    if kind.__class__ is not str:  # a follower's array: its adapter reads it
        got = kind.fast(x)
        return None if got is None else (*got, kind)
    if kind is PLAIN or kind is DLPACK:
        return None
    try:
        cai = x.__cuda_array_interface__
    except Exception:  # noqa: BLE001 - e.g. torch raises for a CPU tensor
        return None
    if cai.get("mask") is not None:
        return None
    device = 0
    if not one_gpu():
        # The interface names no device; a producer that also speaks DLPack (CuPy) says
        # which in one call, so a call on a several-GPU machine stays on the hot path.
        device = dlpack_cuda_device(x, tx)
        if device < 0:
            return None
    stream = cai.get("stream")
    strides = cai.get("strides")
    key = (tx, tuple(cai["shape"]), cai["typestr"], device)
    return (cai["data"][0], key if strides is None else (*key, tuple(strides)),
            0 if stream in DEFAULT_STREAMS else stream, device, None)


#: Types whose ``__dlpack__`` refused ``max_version`` (a DLPack 0.x producer).
_NO_MAX_VERSION: set[type] = set()
_CAPSULE: list[Any] = []
#: DLPack ``(code, bits)`` -> DType, filled on first sight of each.
_DL_DTYPES: dict[tuple[int, int], Any] = {}


def dlpack_probe(x: Any, handle: int,
                 device: int | None = None) -> tuple[int, Any, int, bool, Any] | None:
    """A DLPack-only producer's array on a CUDA device, read for a launch on stream
    ``handle`` (0: the legacy default stream): ``(address, key, device, read-only,
    capsule)``, else None (another device, a capsule this cannot read: the caller takes
    the adapters, which say why). One ``__dlpack__`` call: the producer orders ``handle``
    after its pending work, as the protocol asks. ``key``: ``(type, shape, DType, device,
    byte strides or None)``, None for the compact row-major layout whatever the producer
    wrote; keep ``capsule`` until the launch is queued (it holds the producer's
    reference to the memory). The capsule is read in C where the native module is loaded
    (``dlpack_read``), else through ctypes. ``device``: None when the array may be on any
    CUDA device, else the one it must be on (another: None before any handshake)."""
    read = _CAPSULE[0] if _CAPSULE else _capsule_reader()
    tx = type(x)
    try:
        on = dlpack_cuda_device(x, tx)
        if on < 0 or (device is not None and on != device):
            return None
        device = on
        consumer = handle or 1  # DLPack names CUDA's legacy default stream 1
        if tx in _NO_MAX_VERSION:
            capsule = x.__dlpack__(stream=consumer)
        else:
            try:
                capsule = x.__dlpack__(stream=consumer, max_version=(1, 0))
            except TypeError:
                _NO_MAX_VERSION.add(tx)
                capsule = x.__dlpack__(stream=consumer)
        got = read(capsule)
        if got is None:
            return None
        ptr, shape, code, bits, dev_type, dev_id, elems, readonly = got
        if dev_type not in (_DL_CUDA, _DL_CUDA_MANAGED) or dev_id != device:
            return None  # the capsule contradicts __dlpack_device__ (as the C guard refuses)
        dtype = _DL_DTYPES.get((code, bits)) or _dl_dtype((code, bits))
        strides = None
        if elems is not None:
            step = 1
            for e, n in zip(reversed(elems), reversed(shape)):
                if e != step and n > 1:
                    strides = tuple(e * dtype.itemsize for e in elems)
                    break
                step *= n
    except Exception:  # noqa: BLE001 - anything unusual: the adapters' path says why
        return None
    return ptr, (tx, shape, dtype, device, strides), device, readonly, capsule


def no_max_version(tx: type) -> bool:
    """Whether ``tx.__dlpack__`` refused ``max_version`` (a DLPack 0.x producer, read with
    legacy capsules: core's C guard, which asks for versioned ones, leaves it alone)."""
    return tx in _NO_MAX_VERSION


def _capsule_reader() -> Any:
    """The capsule reader: the native module's ``dlpack_read`` when that module is loaded
    or can be, else :func:`_read_capsule` (decided once)."""
    from ._native import native_module

    mod = native_module()
    fn = getattr(mod, "dlpack_read", None) if mod is not None else None
    _CAPSULE.append(fn or _read_capsule)
    return _CAPSULE[0]


def _read_capsule(capsule: Any) -> tuple[Any, ...] | None:
    """``dlpack_read`` in Python (ctypes): ``(address, shape, code, bits, device type,
    device id, strides in elements or None, read-only)``, None for an unreadable capsule."""
    from ._adapter import capsule_tensor

    try:
        t, readonly = capsule_tensor(capsule)
    except TypeError:
        return None
    n = t.ndim
    return ((t.data or 0) + t.byte_offset, tuple(t.shape[i] for i in range(n)),
            t.dtype.code, t.dtype.bits, t.device.device_type, t.device.device_id,
            tuple(t.strides[i] for i in range(n)) if t.strides else None, readonly)


def _dl_dtype(code: tuple[int, int]) -> Any:
    from ._dtype import from_dlpack_code

    d = _DL_DTYPES[code] = from_dlpack_code(*code)
    return d


def dlpack_cuda_device(x: Any, tx: type | None = None) -> int:
    """The CUDA ordinal ``x.__dlpack_device__()`` names, or -1: no such method, not CUDA
    memory, or a method that fails (the caller then asks the driver, through the
    adapters)."""
    if not hasattr(tx or type(x), "__dlpack_device__"):
        return -1
    try:
        kind, ordinal = x.__dlpack_device__()
        # integers only (as the C guard reads them): an int, an IntEnum, a NumPy int
        kind, ordinal = operator.index(kind), operator.index(ordinal)
    except Exception:  # noqa: BLE001 - a producer that cannot say
        return -1
    return ordinal if kind in (_DL_CUDA, _DL_CUDA_MANAGED) else -1


def cai_pointer(x: Any, typestr: str | None, *, ndim: int = -1,
                shape: tuple[int, ...] | None = None, writable: bool = False,
                device: int | None = None) -> int | None:
    """The address of ``x`` when its ``__cuda_array_interface__`` names ``typestr``, no
    strides or mask, a default stream, ``ndim`` dimensions (-1: any) or exactly
    ``shape``, and (``writable``) a writable buffer, on the one visible GPU, or, with
    several, on CUDA device ``device`` as its ``__dlpack_device__`` says; else None (the
    caller's adapters decide, wait or raise)."""
    if typestr is None:
        return None
    kind = KINDS.get(type(x)) or kind_of(type(x))
    if kind is PLAIN or kind is DLPACK or kind.__class__ is not str:
        return None  # not a CAI array, or a follower's (whose stream the caller handles)
    try:
        cai = x.__cuda_array_interface__
    except Exception:  # noqa: BLE001
        return None
    if cai.get("typestr") != typestr or cai.get("strides") or cai.get("mask") is not None \
            or cai.get("stream") not in DEFAULT_STREAMS:
        return None
    if not one_gpu() and (device is None or dlpack_cuda_device(x) != device):
        return None
    ptr, readonly = cai["data"]
    if readonly and writable:
        return None
    if shape is not None:
        if tuple(cai["shape"]) != shape:
            return None
    elif ndim >= 0 and len(cai["shape"]) != ndim:
        return None
    return ptr  # type: ignore[no-any-return]
