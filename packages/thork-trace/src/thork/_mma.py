"""Tensor cores: warp-level ``tk.mma``, ``tk.ldmatrix`` and ``tk.cp_async``.

A *fragment* is the part of a small matrix one lane holds in registers, as a tuple of
traced values: the A fragment of ``mma.m16n8k16`` is 4 uint32 registers (each two 16-bit
elements, the lower-numbered one in the low half), B is 2 uint32, the accumulator C/D 4
float32. Which rows and columns a lane holds is PTX's layout (docs/language-mma.md draws
it). Every lane of the warp executes each ``mma``/``ldmatrix`` (PTX ``.sync.aligned``).

``tk.cp_async`` starts a global → shared copy that completes at a later
``tk.cp_async_wait``; copies are grouped by ``tk.cp_async_commit`` so that a kernel loads
the next tile while it computes on the current one (software pipelining).
GPU: sm_80 or newer (``ldmatrix`` alone: sm_75).
"""

from __future__ import annotations

from typing import Any

from thork_core import TraceError, dt, dtype_of
from thork_core.ir import AsyncCopy, AsyncGroup, Field, Offset, PointerType, VectorType, Warp

from ._trace import Memory, Value, _to, as_value, current

__all__ = ["mma", "ldmatrix", "cp_async", "cp_async_commit", "cp_async_wait"]

_MMA_INPUTS = {"float16": "f16", "bfloat16": "bf16"}


def _regs(values: Any, n: int, t: Any, what: str) -> tuple[Any, ...]:
    try:
        vals = tuple(values)
    except TypeError:
        vals = None
    if vals is None or len(vals) != n:
        raise TraceError(f"tk.mma(): {what} must be a tuple of {n} values (its fragment), "
                         f"got {values!r}")
    out = []
    for v in vals:
        x = as_value(v)
        if t == dt.uint32 and not (x.dtype.is_int and x.dtype.bits == 32):
            raise TraceError(f"tk.mma(): {what} registers are 32-bit integers (two packed "
                             f"16-bit elements each, as tk.ldmatrix gives), got {x.dtype.name}")
        out.append(_to(x, t))
    return tuple(out)


def mma(a: Any, b: Any, c: Any, dtype: Any = "float16") -> tuple[Value, Value, Value, Value]:
    """``D = A @ B + C`` for one 16x8x16 tile on the tensor cores (PTX
    ``mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}``).

    ``a``: the lane's 4 uint32 registers of the 16x16 A (row-major) fragment; ``b``: 2 uint32
    of the 16x8 B (column-major) fragment; ``c``: 4 float32 accumulators; ``dtype``:
    float16 or bfloat16, the element type packed in ``a`` and ``b``. Returns D's 4 float32.
    """
    try:
        name = _MMA_INPUTS[dtype_of(dtype).name]
    except (KeyError, TypeError, ValueError):
        raise TraceError(f"tk.mma(): dtype must be float16 or bfloat16 (the inputs' element "
                         f"type), got {dtype!r}") from None
    args = (_regs(a, 4, dt.uint32, "a") + _regs(b, 2, dt.uint32, "b")
            + _regs(c, 4, dt.float32, "c"))
    trace = current()
    d = trace.temp(Warp(VectorType(dt.float32, 4), f"mma.m16n8k16.{name}", args), "mma")
    return tuple(Value(trace.temp(Field(dt.float32, d, k))) for k in range(4))  # type: ignore[return-value]


def ldmatrix(array: Any, index: Any, num: int = 4, trans: bool = False) -> tuple[Value, ...]:
    """Load ``num`` (1, 2 or 4) 8x8 matrices of 16-bit elements from shared memory into
    fragments (PTX ``ldmatrix.sync.aligned.m8n8.x{num}[.trans].shared.b16``).

    Each lane passes the start ``array[index]`` of one 8-element row (16 bytes, 16-byte
    aligned): lanes 0-7 the rows of matrix 0, lanes 8-15 of matrix 1, and so on (lanes past
    ``8 * num`` pass any valid address). Returns ``num`` uint32 registers: register ``m`` of
    lane ``l`` holds elements ``(l // 4, 2 * (l % 4))`` and ``(l // 4, 2 * (l % 4) + 1)`` of
    matrix ``m`` — with ``trans``, of its transpose.
    """
    if not isinstance(array, Memory) or array.space != "shared":
        raise TraceError(f"tk.ldmatrix(): the array must be a shared array (tk.shared_array "
                         f"or tk.dynamic_shared), got {array!r}")
    if array.dtype.itemsize != 2:
        raise TraceError(f"tk.ldmatrix(): the shared array holds 16-bit elements (float16, "
                         f"bfloat16, int16, uint16), got {array.dtype.name}")
    if num not in (1, 2, 4) or isinstance(num, bool):
        raise TraceError(f"tk.ldmatrix(): num must be 1, 2 or 4, got {num!r}")
    if not isinstance(trans, bool):
        raise TraceError(f"tk.ldmatrix(): trans must be True or False, got {trans!r}")
    idx = array.index_expr(index)
    trace = current()
    t = array.expr.type
    assert isinstance(t, PointerType)
    addr = trace.temp(Offset(t, array.expr, idx), "row")
    op = f"ldmatrix.x{num}{'.trans' if trans else ''}"
    regs = trace.temp(Warp(VectorType(dt.uint32, num), op, (addr,)), "ldm")
    return tuple(Value(trace.temp(Field(dt.uint32, regs, k))) for k in range(num))


def cp_async(dst: Any, dst_index: Any, src: Any, src_index: Any, nbytes: int = 16,
             src_bytes: Any = None) -> None:
    """Start copying ``nbytes`` (4, 8 or 16) from global ``src[src_index]`` to shared
    ``dst[dst_index]`` (PTX ``cp.async``); both addresses must be ``nbytes``-aligned.

    ``src_bytes`` (default ``nbytes``; a traced value is allowed) reads only that many
    bytes and zero-fills the rest — ``0`` for a tile element past the matrix's edge.
    The copy is complete after a :func:`cp_async_wait` covering the group
    (:func:`cp_async_commit`) it belongs to; until then neither side may be touched.
    """
    if not isinstance(dst, Memory) or dst.space != "shared":
        raise TraceError(f"tk.cp_async(): the destination must be a shared array, got {dst!r}")
    if not isinstance(src, Memory) or src.space != "global":
        raise TraceError(f"tk.cp_async(): the source must be a global array (a kernel "
                         f"parameter), got {src!r}")
    if nbytes not in (4, 8, 16) or isinstance(nbytes, bool):
        raise TraceError(f"tk.cp_async(): nbytes must be 4, 8 or 16, got {nbytes!r}")
    for side, m in (("destination", dst), ("source", src)):
        if nbytes % m.dtype.itemsize:
            raise TraceError(f"tk.cp_async(): {nbytes} bytes is not a whole number of "
                             f"{m.dtype.name} elements of the {side}")
    if isinstance(src_bytes, int) and not isinstance(src_bytes, bool) \
            and not 0 <= src_bytes <= nbytes:
        raise TraceError(f"tk.cp_async(): src_bytes must be from 0 to {nbytes}, got "
                         f"{src_bytes!r}")
    sb = as_value(nbytes if src_bytes is None else src_bytes)
    if not sb.dtype.is_int:
        raise TraceError(f"tk.cp_async(): src_bytes must be an integer, got {sb.dtype.name}")
    di, si = dst.index_expr(dst_index), src.index_expr(src_index)
    src.mark_read()
    dst.mark_written()
    current().emit(AsyncCopy(dst.expr, di, src.expr, si, nbytes, _to(sb, dt.uint32)))


def cp_async_commit() -> None:
    """Close this thread's started :func:`cp_async` copies into a group
    (PTX ``cp.async.commit_group``)."""
    current().emit(AsyncGroup("commit"))


def cp_async_wait(n: int = 0) -> None:
    """Wait until at most ``n`` of this thread's most recent committed groups are still
    in flight (PTX ``cp.async.wait_group n``): ``0`` waits for all. Other threads' copies
    are visible after a following ``tk.syncthreads()``."""
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= 7:
        raise TraceError(f"tk.cp_async_wait(): n must be an int from 0 to 7 known at trace "
                         f"time, got {n!r}")
    current().emit(AsyncGroup("wait", n))
