"""The array probe: what a hot call reads from an array without building an ArrayView.

Core's adapters (:mod:`thork_core._adapter`) give the full :class:`ArrayView` of any array
kind; that costs a dataclass and several lookups per argument. A hot call needs less: the
address, and whether the array is exactly the kind it checked before. This module is that
reading, for the kinds that can skip the adapters: Thork's own :class:`DeviceArray`,
NumPy arrays, and unmasked ``__cuda_array_interface__`` producers (CuPy, torch, Numba) on
the one visible GPU. Everything else returns None: the caller takes the adapters. Kernel launches
(``CudaExecutable.launch``'s Python path) and fkl pipes read arrays through it; the
native module's ``Binder`` makes the same decisions in C.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULT_STREAMS", "cai_pointer", "probe"]

#: ``__cuda_array_interface__`` ``stream`` values that ask no wait of a consumer: absent,
#: 0 (not valid in CAI v3; read as the legacy stream, as the native module does), the
#: legacy (1) and per-thread (2) default streams.
DEFAULT_STREAMS = (None, 0, 1, 2)

_TYPES: list[Any] = []
_ONE_GPU: list[bool] = []


def _types() -> list[Any]:
    """``[numpy.ndarray, DeviceArray]``, imported on first use."""
    if not _TYPES:
        import numpy as np

        from ._device_array import DeviceArray

        _TYPES.extend((np.ndarray, DeviceArray))
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


def probe(x: Any) -> tuple[int, Any, int, int] | None:
    """``(address, key, producer stream, device)`` for an array that can skip the
    adapters, else None. ``key`` is what must match for the rest of a previous check of
    an array of this kind to hold: ``(shape, dtype, device)`` for a DeviceArray,
    ``(shape, numpy dtype, -1)`` for a C-contiguous NumPy array (``(shape, numpy dtype,
    strides)`` for a strided view), ``(type, shape, typestr)`` for a CAI producer (with
    its strides appended when it has some): a strided array keys by its strides, which a
    caller's plan for it holds. The producer stream is 0 when no wait can be needed (host
    arrays and the default streams); device is -1 for host arrays."""
    nd, da = _TYPES or _types()
    tx = type(x)
    if tx is da:
        return x.ptr, (x.shape, x.dtype, x.device), x.stream, x.device
    if tx is nd:
        return x.__array_interface__["data"][0], (
            x.shape, x.dtype, -1 if x.flags.c_contiguous else x.strides), 0, -1
    try:
        cai = x.__cuda_array_interface__
    except Exception:  # noqa: BLE001 - e.g. torch raises for a CPU tensor
        return None
    if cai.get("mask") is not None or not one_gpu():
        return None
    stream = cai.get("stream")
    strides = cai.get("strides")
    key = (tx, tuple(cai["shape"]), cai["typestr"])
    return (cai["data"][0], key if strides is None else (*key, tuple(strides)),
            0 if stream in DEFAULT_STREAMS else stream, 0)


def cai_pointer(x: Any, typestr: str | None, *, ndim: int = -1,
                shape: tuple[int, ...] | None = None, writable: bool = False) -> int | None:
    """The address of ``x`` when its ``__cuda_array_interface__`` names ``typestr``, no
    strides or mask, a default stream, ``ndim`` dimensions (-1: any) or exactly
    ``shape``, and (``writable``) a writable buffer, on the one visible GPU; else None
    (the caller's adapters decide, wait or raise)."""
    if typestr is None:
        return None
    try:
        cai = x.__cuda_array_interface__
    except Exception:  # noqa: BLE001
        return None
    if cai.get("typestr") != typestr or cai.get("strides") or cai.get("mask") is not None \
            or cai.get("stream") not in DEFAULT_STREAMS or not one_gpu():
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
