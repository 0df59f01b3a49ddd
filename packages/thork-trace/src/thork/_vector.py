"""Vector loads and stores: ``x, y, z, w = a.vload(4 * i, 4)``, ``out.vstore(4 * i, (..))``.

``n`` elements (2, 4 or 8; at most 16 bytes together: float2, float4, int4, half8...)
move in one aligned memory transaction. The index counts scalar elements and must be a
multiple of ``n``; the array's base must be aligned to the vector size (NumPy and device
allocations are). ``cache=`` names a PTX cache operator for a global array and
``evict=`` an L2 eviction priority (see :func:`thork._hints.cache_op`).
"""

from __future__ import annotations

from typing import Any

from thork_core import TraceError

from ._hints import cache_op
from ._trace import Memory, Value

__all__ = ["load_vec", "store_vec", "cache_op"]


def _array(array: Any, what: str) -> Memory:
    if not isinstance(array, Memory):
        raise TraceError(f"tk.{what}(): the array must be a DevicePointer parameter or a "
                         f"shared array, got {type(array).__name__}")
    return array


def load_vec(array: Memory, index: Any, n: int, *, cache: str | None = None,
             evict: str | None = None) -> tuple[Value, ...]:
    """Load ``array[index .. index+n-1]`` in one access; returns ``n`` values. ``cache``:
    a PTX load cache operator (:func:`cache_op`), e.g. ``"cs"`` for data read once;
    ``evict``: the L2 eviction priority of the lines it allocates (``"first"``...).
    The same as ``array.vload(index, n, ...)``."""
    return _array(array, "load_vec").vload(index, n, cache=cache, evict=evict)


def store_vec(array: Memory, index: Any, values: Any, *, cache: str | None = None,
              evict: str | None = None) -> None:
    """Store the ``n`` values to ``array[index ..]`` in one access. ``cache``: a PTX store
    cache operator (:func:`cache_op`), e.g. ``"cs"`` for data written once; ``evict``: the
    L2 eviction priority of the lines it allocates (``"last"``...). The same as
    ``array.vstore(index, values, ...)``."""
    _array(array, "store_vec").vstore(index, values, cache=cache, evict=evict)
