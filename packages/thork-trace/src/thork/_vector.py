"""Vector loads and stores: ``x, y, z, w = a.vload(4 * i, 4)``, ``out.vstore(4 * i, (..))``.

``n`` elements (2, 4 or 8; at most 16 bytes together: float2, float4, int4, half8...)
move in one aligned memory transaction. The index counts scalar elements and must be a
multiple of ``n``; the array's base must be aligned to the vector size (NumPy and device
allocations are). ``cache=`` names a PTX cache operator for a global array and
``evict=`` an L2 eviction priority (see :func:`cache_op`).
"""

from __future__ import annotations

from typing import Any

from thork_core import TraceError
from thork_core.ir import (
    EVICT_PRIORITIES,
    LOAD_CACHE_OPS,
    STORE_CACHE_OPS,
    Const,
    Field,
    VecLoad,
    VecStore,
    VectorType,
    join_hint,
)

from ._trace import Memory, Value, _to, as_value, current

__all__ = ["load_vec", "store_vec", "cache_op"]


def cache_op(array: Any, cache: str | None, store: bool, what: str,
             evict: str | None = None) -> str:
    """Check the ``cache=`` and ``evict=`` hints of an access and return them as the IR
    writes them (:func:`thork_core.ir.join_hint`; ``""`` for neither).

    ``cache``: loads take ``"ca"`` (cache at all levels: the default), ``"cg"`` (L2 only),
    ``"cs"`` (streaming: evict first, for data read once), ``"lu"`` (last use) or ``"cv"``
    (fetch again, cache nothing); stores ``"wb"`` (write back: the default), ``"cg"``,
    ``"cs"`` (streaming) or ``"wt"`` (write through): PTX's ``ld.global.<op>`` /
    ``st.global.<op>``.

    ``evict``: the L2 eviction priority of the lines the access allocates, ``"first"``
    (evicted before any other line: data used once that should not push out other lines),
    ``"last"`` (kept longest), ``"normal"`` or ``"unchanged"``: an L2 cache policy
    (``createpolicy.fractional.L2::evict_<p>.b64``, computed once per kernel) named by the
    access's ``.L2::cache_hint`` qualifier. Needs sm_80 or newer; combines with ``cache``.

    A hint changes where data is cached, never a value: the CPU target ignores it. Only
    global arrays (kernel parameters and views of them) take one."""
    if cache is None and evict is None:
        return ""
    ops = STORE_CACHE_OPS if store else LOAD_CACHE_OPS
    if cache is not None and (not isinstance(cache, str) or cache not in ops):
        raise TraceError(f"{what}: cache must be None or one of {', '.join(map(repr, ops))} "
                         f"(PTX {'store' if store else 'load'} cache operators), got {cache!r}")
    if evict is not None and (not isinstance(evict, str) or evict not in EVICT_PRIORITIES):
        raise TraceError(f"{what}: evict must be None or one of "
                         f"{', '.join(map(repr, EVICT_PRIORITIES))} (L2 eviction "
                         f"priorities), got {evict!r}")
    if array.space != "global":
        hint = f"cache={cache!r}" if cache is not None else f"evict={evict!r}"
        raise TraceError(f"{what}: {hint} applies to global memory; "
                         f"'{array.label}' is a {array.space} array")
    return join_hint(cache or "", evict or "")


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


def load_vec(array: Memory, index: Any, n: int, *, cache: str | None = None,
             evict: str | None = None) -> tuple[Value, ...]:
    """Load ``array[index .. index+n-1]`` in one access; returns ``n`` values. ``cache``:
    a PTX load cache operator (:func:`cache_op`), e.g. ``"cs"`` for data read once;
    ``evict``: the L2 eviction priority of the lines it allocates (``"first"``...)."""
    _check(array, index, n, "load_vec")
    op = cache_op(array, cache, False, "tk.load_vec()", evict)
    idx = array.index_expr(index)
    if isinstance(idx, Const) and int(idx.value) % n:
        raise TraceError(f"tk.load_vec(): index {idx.value} is not a multiple of {n}")
    array.mark_read()
    trace = current()
    vec = trace.temp(VecLoad(VectorType(array.dtype, n), array.expr, idx, op), "vec")
    return tuple(Value(trace.temp(Field(array.dtype, vec, k))) for k in range(n))


def store_vec(array: Memory, index: Any, values: Any, *, cache: str | None = None,
              evict: str | None = None) -> None:
    """Store the ``n`` values to ``array[index ..]`` in one access. ``cache``: a PTX store
    cache operator (:func:`cache_op`), e.g. ``"cs"`` for data written once; ``evict``: the
    L2 eviction priority of the lines it allocates (``"last"``...)."""
    vals = tuple(values)
    _check(array, index, len(vals), "store_vec")
    op = cache_op(array, cache, True, "tk.store_vec()", evict)
    idx = array.index_expr(index)
    if isinstance(idx, Const) and int(idx.value) % len(vals):
        raise TraceError(f"tk.store_vec(): index {idx.value} is not a multiple of {len(vals)}")
    t = array.dtype
    exprs = tuple(_to(as_value(v, t), t) for v in vals)
    array.mark_written()
    current().emit(VecStore(array.expr, idx, exprs, op))
