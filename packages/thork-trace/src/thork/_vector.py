"""Vector loads and stores: ``x, y, z, w = a.vload(4 * i, 4)``, ``out.vstore(4 * i, (..))``.

``n`` elements (2, 4 or 8; at most 16 bytes together: float2, float4, int4, half8...)
move in one aligned memory transaction. The index counts scalar elements and must be a
multiple of ``n``; the array's base must be aligned to the vector size (NumPy and device
allocations are).
"""

from __future__ import annotations

from typing import Any

from thork_core import TraceError
from thork_core.ir import Const, Field, VecLoad, VecStore, VectorType

from ._trace import Memory, Value, _to, as_value, current

__all__ = ["load_vec", "store_vec"]


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


def load_vec(array: Memory, index: Any, n: int) -> tuple[Value, ...]:
    """Load ``array[index .. index+n-1]`` in one access; returns ``n`` values."""
    _check(array, index, n, "load_vec")
    idx = array.index_expr(index)
    if isinstance(idx, Const) and int(idx.value) % n:
        raise TraceError(f"tk.load_vec(): index {idx.value} is not a multiple of {n}")
    array.mark_read()
    trace = current()
    vec = trace.temp(VecLoad(VectorType(array.dtype, n), array.expr, idx), "vec")
    return tuple(Value(trace.temp(Field(array.dtype, vec, k))) for k in range(n))


def store_vec(array: Memory, index: Any, values: Any) -> None:
    """Store the ``n`` values to ``array[index ..]`` in one access."""
    vals = tuple(values)
    _check(array, index, len(vals), "store_vec")
    idx = array.index_expr(index)
    if isinstance(idx, Const) and int(idx.value) % len(vals):
        raise TraceError(f"tk.store_vec(): index {idx.value} is not a multiple of {len(vals)}")
    t = array.dtype
    exprs = tuple(_to(as_value(v, t), t) for v in vals)
    array.mark_written()
    current().emit(VecStore(array.expr, idx, exprs))
