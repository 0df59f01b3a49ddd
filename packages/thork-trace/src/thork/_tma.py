"""Hopper's tensor memory accelerator: 2-D tile loads global → shared (``tk.tma_load``)
described by a *tensor map* built on the host (``tk.tensor_map``).

One thread issues a copy of a whole box (up to 256 x 256 elements) of a row-major 2-D
array into shared memory, optionally swizzled (the pattern ``tk.wgmma`` descriptors read,
:func:`thork.swizzle`), elements outside the array filled with zeros; the copy signals
completion by its byte count on an mbarrier (``tk.mbarrier_expect_tx`` /
``tk.mbarrier_wait``). GPU: sm_90a.

The tensor map is 128 bytes (16 uint64) passed to the kernel as an ordinary array
parameter (``tk.DevicePointer[tk.dt.uint64]``): for a GPU array it is the driver's
``CUtensorMap`` (``cuTensorMapEncodeTiled``), for a NumPy array the CPU model's own
description of the same copy (base address, extents, row stride, box, swizzle).
"""

from __future__ import annotations

import struct
from typing import Any, NoReturn

import numpy as np
from thork_core import ArgumentError, TraceError, dt
from thork_core.ir import Eval, Hopper

from ._mbarrier import barrier_operand
from ._trace import Memory, _to, as_value, current
from ._wgmma import SWIZZLE_MODES, _shared_offset

__all__ = ["tma_load", "tma_store", "tma_store_commit", "tma_store_wait", "tensor_map",
           "CPU_TENSOR_MAP_MAGIC"]

#: First word of a CPU-target tensor map ("THORKTMA"); the CPU model checks it.
CPU_TENSOR_MAP_MAGIC = int.from_bytes(b"THORKTMA", "little")
_TMA_DTYPES = {"float16": 6, "bfloat16": 9, "float32": 7, "int32": 3, "uint32": 2,
               "uint16": 1, "int16": 1, "uint8": 0, "int8": 0}  # CUtensorMapDataType


def tma_load(dst: Any, dst_index: Any, tmap: Any, col: Any, row: Any, bar: Any,
             bar_index: Any, multicast: Any = None) -> None:
    """Start copying the box of the tensor map ``tmap`` whose top-left element is
    (``row``, ``col``) of the global array into shared ``dst[dst_index]`` (128-byte
    aligned; 1024 for the 128-byte swizzle), PTX ``cp.async.bulk.tensor.2d`` with
    ``mbarrier::complete_tx::bytes``: on arrival it counts its bytes (box rows x box
    columns x element size, zero-filled ones included) on mbarrier ``bar[bar_index]``.
    ``row``/``col`` are element coordinates (int32, may be negative or past the end).
    One thread issues it. ``multicast``: a mask of cluster ranks (bit r: the block of rank
    r, this one included or not): the box lands at the same ``dst`` offset in each of
    them, counting its bytes on each one's ``bar[bar_index]`` (``.multicast::cluster``;
    needs ``tk.cluster_dims``)."""
    _check_map("tk.tma_load()", tmap)
    d = _shared_offset("tk.tma_load()", dst, dst_index)
    b = barrier_operand("tk.tma_load()", bar, bar_index)
    coords = _coords("tk.tma_load()", col, row)
    tmap.mark_read()
    dst.mark_written()
    args = (d, tmap.expr, coords[0], coords[1], b)
    if multicast is None:
        current().emit(Eval(Hopper(None, "tma.load.2d", args)))  # type: ignore[arg-type]
        return
    if isinstance(multicast, int) and not 1 <= multicast < 1 << 16:
        raise TraceError(f"tk.tma_load(): multicast must be a mask of cluster ranks from 1 "
                         f"to 0xffff, got {multicast!r}")
    m = as_value(multicast)
    if not m.dtype.is_int:
        raise TraceError(f"tk.tma_load(): multicast must be an integer mask, got "
                         f"{m.dtype.name}")
    current().emit(Eval(Hopper(None, "tma.load.2d.multicast",  # type: ignore[arg-type]
                               (*args, _to(m, dt.uint32)))))


def tma_store(tmap: Any, col: Any, row: Any, src: Any, src_index: Any) -> None:
    """Start copying the box at shared ``src[src_index]`` (laid out as ``tk.tma_load`` of
    the same map would put it: rows of the box one after the other, in the map's
    swizzle; 128-byte aligned, 1024 for the 128-byte swizzle) to the box of the global
    array whose top-left element is (``row``, ``col``); elements outside the array are
    not written (PTX ``cp.async.bulk.tensor.2d.global.shared::cta.bulk_group``). Shared
    memory written by ordinary stores needs ``tk.fence_proxy_async()`` in each writing
    thread (and a barrier) first. One thread issues it; ``tk.tma_store_commit()`` closes
    the issued stores into a group, ``tk.tma_store_wait(n)`` waits until at most ``n``
    of that thread's groups still read shared memory (then ``src`` may be overwritten)."""
    _check_map("tk.tma_store()", tmap)
    s = _shared_offset("tk.tma_store()", src, src_index)
    coords = _coords("tk.tma_store()", col, row)
    tmap.mark_read()
    src.mark_read()
    current().emit(Eval(Hopper(None, "tma.store.2d",  # type: ignore[arg-type]
                               (s, tmap.expr, coords[0], coords[1]))))


def _check_map(fn: str, tmap: Any) -> None:
    """``tmap`` must be a global uint64 array parameter (a tensor map's 16 words)."""
    if not isinstance(tmap, Memory) or tmap.space != "global" or tmap.dtype != dt.uint64:
        raise TraceError(f"{fn}: the tensor map must be a uint64 array parameter "
                         f"(the 16 words tk.tensor_map gives), got {tmap!r}")


def _coords(fn: str, col: Any, row: Any) -> list[Any]:
    """The box's element coordinates (column, row) as int32 expressions."""
    coords = []
    for what, v in (("col", col), ("row", row)):
        x = as_value(v)
        if not x.dtype.is_int:
            raise TraceError(f"{fn}: {what} must be an integer, got {x.dtype.name}")
        coords.append(_to(x, dt.int32))
    return coords


def tma_store_commit() -> None:
    """Close this thread's issued ``tk.tma_store``s into a bulk async-group (PTX
    ``cp.async.bulk.commit_group``)."""
    current().emit(Eval(Hopper(None, "tma.store.commit", ())))  # type: ignore[arg-type]


def tma_store_wait(n: int = 0) -> None:
    """Wait until at most ``n`` (0-7) of this thread's newest ``tk.tma_store`` groups still
    read their shared memory (PTX ``cp.async.bulk.wait_group.read n``)."""
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= 7:
        raise TraceError(f"tk.tma_store_wait(): n must be an int from 0 to 7, got {n!r}")
    current().emit(Eval(Hopper(None, f"tma.store.wait.{n}", ())))  # type: ignore[arg-type]


def _fail(msg: str) -> NoReturn:
    raise ArgumentError(f"tk.tensor_map(): {msg}")


def tensor_map(array: Any, box: tuple[int, int], swizzle: int = 0) -> np.ndarray:
    """The tensor map (16 uint64) for TMA tile loads of ``box`` = (rows, cols) elements
    from the row-major 2-D ``array`` (``swizzle``: 0, 32, 64 or 128 bytes).

    Checked here, with an :class:`ArgumentError` naming the rule: the base address and the
    row stride multiples of 16 bytes, the stride below 2**40 bytes, each box extent from 1
    to 256, the box's row (cols x element size) a multiple of 16 bytes and, with a swizzle,
    exactly the swizzle width (the rows a swizzled wgmma descriptor reads). A NumPy array
    gives the CPU model's map; a GPU array (``DeviceArray``, a CUDA torch tensor: anything
    with ``__cuda_array_interface__``) the driver's ``CUtensorMap`` (needs the
    cuda-bindings package). The array must outlive the map's use.
    """
    if swizzle not in SWIZZLE_MODES or isinstance(swizzle, bool):
        _fail(f"swizzle must be 0, 32, 64 or 128 (bytes), got {swizzle!r}")
    try:
        rows, cols = (int(box[0]), int(box[1]))
    except (TypeError, ValueError, IndexError):
        _fail(f"box must be (rows, cols), got {box!r}")
    ptr, shape, strides, name, on_gpu = _describe(array)
    if name not in _TMA_DTYPES:
        _fail(f"element type must be one of {', '.join(_TMA_DTYPES)}, got {name}")
    esize = 2 if name == "bfloat16" else np.dtype(name).itemsize
    if len(shape) != 2:
        _fail(f"the array must be 2-D (rows, cols), got shape {tuple(shape)}")
    height, width = int(shape[0]), int(shape[1])
    row_stride = int(strides[0]) if strides is not None else width * esize
    if strides is not None and int(strides[1]) != esize:
        _fail(f"rows must be contiguous (column stride {esize} bytes), got {strides[1]}")
    if ptr % 16:
        _fail(f"the array's address must be a multiple of 16 bytes, got {ptr:#x}")
    if row_stride % 16 or not 0 < row_stride < 1 << 40:
        _fail(f"the row stride must be a positive multiple of 16 bytes below 2**40, got "
              f"{row_stride} bytes ({width} elements of {esize} bytes: pad rows to a "
              f"multiple of {16 // esize} elements)")
    for what, n in (("rows", rows), ("cols", cols)):
        if not 1 <= n <= 256:
            _fail(f"box {what} must be from 1 to 256, got {n}")
    if cols * esize % 16:
        _fail(f"a box row ({cols} x {esize} bytes) must be a multiple of 16 bytes")
    if swizzle and cols * esize != swizzle:
        # The driver allows shorter rows; their shared layout is not what wgmma's swizzled
        # descriptors read (rows of exactly the swizzle width), so Thork does not offer it.
        _fail(f"with the {swizzle}-byte swizzle a box row must be exactly {swizzle} bytes "
              f"({swizzle // esize} elements), got {cols * esize}")
    if not on_gpu:
        words = [CPU_TENSOR_MAP_MAGIC, ptr, width, height, row_stride, cols, rows, esize,
                 swizzle] + [0] * 7
        return np.array(words, dtype=np.uint64)
    return _encode_gpu(ptr, name, width, height, row_stride, cols, rows, swizzle)


def _describe(array: Any) -> tuple[int, tuple[int, ...], tuple[int, ...] | None, str, bool]:
    """Address, shape, byte strides (None: contiguous), element type name and whether it is
    GPU memory, of a NumPy array, a CUDA torch tensor or a ``__cuda_array_interface__``
    array (a Thork DeviceArray...)."""
    if isinstance(array, np.ndarray):
        return array.ctypes.data, array.shape, array.strides, array.dtype.name, False
    if callable(getattr(array, "data_ptr", None)) and getattr(array, "is_cuda", False):
        es = int(array.element_size())  # torch: bfloat16 has no __cuda_array_interface__
        return (int(array.data_ptr()), tuple(array.shape),
                tuple(int(x) * es for x in array.stride()),
                str(array.dtype).replace("torch.", ""), True)
    iface = getattr(array, "__cuda_array_interface__", None)
    if iface is None:
        _fail(f"the array must be a NumPy array or a GPU array, got {type(array).__name__}")
    dtype = getattr(array, "dtype", None)
    name = getattr(dtype, "name", None)
    if name is None:
        name = np.dtype(iface["typestr"]).name
    strides = iface.get("strides")
    return (int(iface["data"][0]), tuple(iface["shape"]),
            tuple(strides) if strides is not None else None, str(name), True)


def _encode_gpu(ptr: int, name: str, width: int, height: int, row_stride: int, cols: int,
                rows: int, swizzle: int) -> np.ndarray:
    """``cuTensorMapEncodeTiled`` through cuda-python's driver bindings (lazy import)."""
    try:
        from cuda.bindings import driver as cu
    except ImportError:  # pragma: no cover - depends on the installation
        try:
            from cuda import cuda as cu  # type: ignore[no-redef]
        except ImportError:
            raise ArgumentError("tk.tensor_map(): a GPU array needs the CUDA driver bindings "
                                "(cuda-bindings, which thork-backend-nvrtc brings: pip "
                                "install --find-links wheelhouse 'thork[nvrtc]')") from None
    swz = {0: "CU_TENSOR_MAP_SWIZZLE_NONE", 32: "CU_TENSOR_MAP_SWIZZLE_32B",
           64: "CU_TENSOR_MAP_SWIZZLE_64B", 128: "CU_TENSOR_MAP_SWIZZLE_128B"}[swizzle]
    try:
        # The bindings take their own fixed-width integer types, not Python ints (seen on
        # the H200: "Cannot convert int to cuuint32_t").
        u64, u32 = cu.cuuint64_t, cu.cuuint32_t
        err, tmap = cu.cuTensorMapEncodeTiled(
            cu.CUtensorMapDataType(_TMA_DTYPES[name]), 2, ptr, [u64(width), u64(height)],
            [u64(row_stride)], [u32(cols), u32(rows)], [u32(1), u32(1)],
            cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            getattr(cu.CUtensorMapSwizzle, swz),
            cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    except Exception as exc:  # no driver library, an old binding...: say what failed
        raise ArgumentError(f"tk.tensor_map(): cuTensorMapEncodeTiled could not run "
                            f"({type(exc).__name__}: {exc})") from exc
    if int(err) != 0:
        raise ArgumentError(f"tk.tensor_map(): cuTensorMapEncodeTiled failed ({err!r}) for "
                            f"a {height}x{width} {name} array, box {rows}x{cols}, "
                            f"swizzle {swizzle}")
    raw = bytes(struct.pack("<16Q", *[int(w) for w in tmap.opaque]))
    return np.frombuffer(raw, dtype=np.uint64).copy()
