"""Vector loads and stores: ``x, y, z, w = a.vload(4 * i, 4)``, ``out.vstore(4 * i, (..))``.

``n`` elements (2, 4 or 8; at most 16 bytes together: float2, float4, int4, half8...)
move in one aligned memory transaction. The index counts scalar elements and must be a
multiple of ``n``; the array's base must be aligned to the vector size (NumPy and device
allocations are). ``cache=`` names a PTX cache operator for a global array (see
:func:`cache_op`).
"""

from __future__ import annotations

from typing import Any

from thork_core import TraceError
from thork_core.ir import (
    LOAD_CACHE_OPS,
    STORE_CACHE_OPS,
    Const,
    Field,
    VecLoad,
    VecStore,
    VectorType,
)

from ._trace import Memory, Value, _to, as_value, current

__all__ = ["load_vec", "store_vec", "cache_op"]


def cache_op(array: Any, cache: str | None, store: bool, what: str) -> str:
    """Check a ``cache=`` hint and return it (``""`` for None).

    Loads take ``"ca"`` (cache at all levels: the default), ``"cg"`` (L2 only), ``"cs"``
    (streaming: evict first, for data read once), ``"lu"`` (last use) or ``"cv"`` (fetch
    again, cache nothing); stores ``"wb"`` (write back: the default), ``"cg"``, ``"cs"``
    (streaming) or ``"wt"`` (write through): PTX's ``ld.global.<op>`` / ``st.global.<op>``.
    A hint changes where data is cached, never a value: the CPU target ignores it. Only
    global arrays (kernel parameters and views of them) take one."""
    if cache is None:
        return ""
    ops = STORE_CACHE_OPS if store else LOAD_CACHE_OPS
    if not isinstance(cache, str) or cache not in ops:
        raise TraceError(f"{what}: cache must be None or one of {', '.join(map(repr, ops))} "
                         f"(PTX {'store' if store else 'load'} cache operators), got {cache!r}")
    if array.space != "global":
        raise TraceError(f"{what}: cache={cache!r} applies to global memory; "
                         f"'{array.label}' is a {array.space} array")
    return cache


def _check(array: Any, index: Any, n: int, what: str) -> None:
    if not isinstance(array, Memory):
        raise TraceError(f"tk.{what}(): the array must be a DevicePointer parameter or a "
                         f"shared array, got {type(array).__name__}")
    if not isinstance(n, int) or n not in (2, 4, 8):
        raise TraceError(f"tk.{what}(): n must be 2, 4 or 8, got {n!r}")
    nbytes = n * array.dtype.itemsize
    if nbytes > 16:
        raise TraceError(f"tk.{what}(): {n} x {array.dtype.name} is {nbytes} bytes; a vector "
                         "access moves at most 16 bytes")


def load_vec(array: Memory, index: Any, n: int, *, cache: str | None = None
             ) -> tuple[Value, ...]:
    """Load ``array[index .. index+n-1]`` in one access; returns ``n`` values. ``cache``:
    a PTX load cache operator (:func:`cache_op`), e.g. ``"cs"`` for data read once."""
    _check(array, index, n, "load_vec")
    op = cache_op(array, cache, False, "tk.load_vec()")
    idx = array.index_expr(index)
    if isinstance(idx, Const) and int(idx.value) % n:
        raise TraceError(f"tk.load_vec(): index {idx.value} is not a multiple of {n}")
    array.mark_read()
    trace = current()
    vec = trace.temp(VecLoad(VectorType(array.dtype, n), array.expr, idx, op), "vec")
    return tuple(Value(trace.temp(Field(array.dtype, vec, k))) for k in range(n))


def store_vec(array: Memory, index: Any, values: Any, *, cache: str | None = None) -> None:
    """Store the ``n`` values to ``array[index ..]`` in one access. ``cache``: a PTX store
    cache operator (:func:`cache_op`), e.g. ``"cs"`` for data written once."""
    vals = tuple(values)
    _check(array, index, len(vals), "store_vec")
    op = cache_op(array, cache, True, "tk.store_vec()")
    idx = array.index_expr(index)
    if isinstance(idx, Const) and int(idx.value) % len(vals):
        raise TraceError(f"tk.store_vec(): index {idx.value} is not a multiple of {len(vals)}")
    t = array.dtype
    exprs = tuple(_to(as_value(v, t), t) for v in vals)
    array.mark_written()
    current().emit(VecStore(array.expr, idx, exprs, op))
