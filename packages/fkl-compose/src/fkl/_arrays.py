"""Array probing for pipes: core's adapters on the general path, core's probe on the hot one.

The general path adapts every array with core's adapters (``find_view``,
the same ones a Thork kernel launch uses) and checks what every fkl kernel needs. The hot
path must not build an :class:`~thork_core.ArrayView` per call, so it reads a *key* from the
array with core's probe (:func:`thork_core.launch.probe`, here ``fast_info``) —
``(shape, dtype, device)`` for core's own arrays, ``(type, shape, typestr)`` for a
``__cuda_array_interface__`` producer — and a pipe keys its prepared launches by it: the key
was checked by the general path once, only the address and the producer stream are
re-read per call.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from thork_core import ArgumentError, ArrayView, DType
from thork_core.launch import cai_pointer, follow, followers, implied_stream
from thork_core.launch import probe as fast_info
from thork_core.plugin import find_view

__all__ = ["INT32_LIMIT", "array_types", "check_size", "fast_info", "fast_out", "follow",
           "followers", "implied_stream", "out_info", "out_pointers", "pointer", "row_span",
           "stack", "stream_handle", "view", "wait"]

#: fkl kernels index with int32: arrays have fewer elements than this.
INT32_LIMIT = 2**31

_TYPES: list[Any] = []


def array_types() -> list[Any]:
    """``[numpy.ndarray, DeviceArray]``, imported on first use (keeps ``import fkl`` fast)."""
    if not _TYPES:
        import numpy as np
        from thork_core.runtime import DeviceArray

        _TYPES.extend((np.ndarray, DeviceArray))
    return _TYPES


def view(x: Any, what: str, stream: int | None = None, pitched: bool = False) -> ArrayView:
    """Adapt an input/output array with core's adapters and check what every fkl kernel
    needs (C-contiguous, int32-indexable); ``what`` names it in errors. ``stream``: the
    launch stream, which DLPack producers are asked to order after their work.
    ``pitched`` (h-video, issue 18): the reader takes a row stride, so any strides pass
    here and the read checks them."""
    try:
        v = find_view(x, stream)
    except TypeError as exc:  # an array no kernel can read (dtype, byte order...)
        raise ArgumentError(f"fkl pipe {what}: {exc}") from None
    if v is None:
        raise ArgumentError(
            f"fkl pipe {what}: expected an array (NumPy, __cuda_array_interface__ or DLPack), "
            f"got {type(x).__name__}")
    if not v.contiguous and not pitched:
        raise ArgumentError(
            f"fkl pipe {what}: needs a C-contiguous array, got shape {v.shape} with strides "
            f"{v.strides} (use numpy.ascontiguousarray / .contiguous())")
    check_size(v.shape, what)
    return v


def stack(items: Any, what: str, handle: int, copy_pipe: Callable[[], Any]) -> Any:
    """A list of same-size images as one ``(N, ...)`` batch: ``numpy.stack`` for host
    arrays; for device arrays a new DeviceArray on their device, filled by one copy
    kernel per image queued on stream ``handle`` (a batched array avoids that copy).
    ``copy_pipe()`` makes the pipe that copies one image (:func:`fkl._pipe.copy_pipe`:
    the caller passes it, this module sits below the pipes)."""
    items = list(items)
    if not items:
        raise ArgumentError(f"fkl pipe {what}: an empty list of images")
    views = [view(a, f"{what}[{i}]") for i, a in enumerate(items)]
    first = views[0]
    for i, v in enumerate(views[1:], start=1):
        if v.shape != first.shape or v.dtype != first.dtype:
            raise ArgumentError(
                f"fkl pipe {what}: a batch needs same-size images of one dtype; image 0 is "
                f"{first.shape} {first.dtype.name}, image {i} is {v.shape} {v.dtype.name} "
                "(resize them first, or run them as separate calls)")
        if (v.device, v.device_id) != (first.device, first.device_id):
            raise ArgumentError(f"fkl pipe {what}: images 0 and {i} are on different devices")
    if first.device != "cuda":
        import numpy as np

        return np.stack([v.host if v.host is not None else a for v, a in zip(views, items)])
    from thork_core.runtime import DeviceArray

    batch = DeviceArray((len(items), *first.shape), first.dtype, device=first.device_id,
                        stream=handle)
    copy = copy_pipe()
    for k, a in enumerate(items):
        dst = DeviceArray.wrap(batch.ptr + k * first.nbytes, first.shape, first.dtype,
                               device=first.device_id, stream=handle, owner=batch)
        copy(a, out=dst, stream=handle)
    return batch


def row_span(x: Any, v: ArrayView, writeable: bool = False) -> Any:
    """A host array with a row stride (``v`` its view) as the contiguous 1-D run of its
    dtype from its first to its last element, the padding between rows included (memory
    of the same allocation), for launches that copy host arrays whole: the kernel then
    indexes it with the pitch (h-video, issue 18). Contiguous arrays come back as they are.
    ``writeable``: for an output (the launch copies the whole span back: the padding
    between rows is written with what it held)."""
    if v.contiguous or v.device == "cuda":
        return x
    import numpy as np

    arr = np.asarray(x)
    isz = arr.itemsize
    last = sum((n - 1) * s for n, s in zip(arr.shape, arr.strides, strict=True))
    if min(arr.strides) < 0:
        raise ArgumentError("fkl pipe input: negative strides are not supported")
    return np.lib.stride_tricks.as_strided(arr, shape=(last // isz + 1,), strides=(isz,),
                                          writeable=writeable)


def check_size(shape: tuple[int, ...], what: str) -> None:
    """Raise when an array of ``shape`` is too large for int32 indexing."""
    n = math.prod(shape)
    if n >= INT32_LIMIT:
        raise ArgumentError(f"fkl pipe {what}: {n} elements; fkl kernels index with int32, "
                            f"so arrays must have fewer than 2**31 elements")


def fast_out(out: Any, shape: tuple[int, ...], d: DType, code: str | None,
             device: int = 0) -> int | None:
    """The address of ``out`` when it is a device array on CUDA device ``device`` of
    exactly ``shape`` and dtype ``d`` (typestr ``code``), writable, C-contiguous and ready
    on any stream, else None (the full check runs). The CAI reading is core's
    (:func:`thork_core.launch.cai_pointer`)."""
    if type(out) is (_TYPES or array_types())[1]:
        return out.ptr if out.shape == shape and out.dtype is d and out.device == device \
            else None
    return cai_pointer(out, code, shape=shape, writable=True, device=device)


def out_info(out: Any) -> tuple[int, Any, int, int, Any] | None:
    """The probe's reading of an ``out=`` for the strided-output hot table (h-pitch7):
    ``(address, key, producer stream, device, follower)`` of one writable array the
    probe keys (its strides are in the key), else None — a list of outputs, a read-only
    NumPy or ``__cuda_array_interface__`` array, an array without a fast path — and the
    call takes the general path, which checks and reports it."""
    tx = type(out)
    if tx is list or tx is tuple:
        return None
    got = fast_info(out)
    if got is None:
        return None
    nd, da = _TYPES or array_types()
    if tx is nd:
        return got if out.flags.writeable else None
    if got[4] is None and tx is not da and tx is not _pitched_type():
        if out.__cuda_array_interface__["data"][1]:  # a read-only CAI producer
            return None
    return got


_PITCHED: list[type] = []


def _pitched_type() -> type:
    """Core's PitchedArray (a pitched DeviceArray), imported on first use."""
    if not _PITCHED:
        from thork_core.runtime import PitchedArray

        _PITCHED.append(PitchedArray)
    return _PITCHED[0]


def pointer(o: Any, what: str = "out") -> int:
    """The address of an array (core's adapters for anything but NumPy and DeviceArray);
    its layout was checked before (a strided ``out=`` passes: h-video, issue 18)."""
    nd, da = _TYPES or array_types()
    if type(o) is da:
        return o.ptr  # type: ignore[no-any-return]
    if type(o) is nd:
        return o.__array_interface__["data"][0]  # type: ignore[no-any-return]
    return view(o, what, None, True).ptr


def out_pointers(outs: list[Any], handle: int, device: int) -> list[int]:
    """The addresses of checked outputs (:func:`pointer`), the launch stream ``handle``
    ordered after the stream each names that is not its library's current stream (a
    ``__cuda_array_interface__`` producer on a stream of its own: the kernel writes what
    work there may still read or write; a follower's stream is :func:`follow`'s)."""
    nd, da = _TYPES or array_types()
    ptrs = []
    for o in outs:
        tx = type(o)
        if tx is da or tx is nd:
            ptrs.append(pointer(o))
            continue
        v = view(o, "out", None, True)
        ptrs.append(v.ptr)
        if v.device == "cuda" and v.stream is not None and v.stream != handle and \
                followers([o]) is None:
            wait(v.stream, handle, device)
    return ptrs


def stream_handle(stream: Any) -> int:
    """A raw CUDA stream handle from what a user passes as ``stream=``."""
    from thork_core.runtime import stream_handle as handle

    return handle(stream)


def wait(producer: int, consumer: int, device: int) -> None:
    """Order ``consumer`` after the work queued so far on ``producer``."""
    from thork_core.runtime import stream_wait

    stream_wait(device, producer, consumer)
