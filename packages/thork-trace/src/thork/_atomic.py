"""Atomic read-modify-write on global or shared memory: ``old = tk.atomic_add(m, i, v)``.

Every function takes an array (a kernel's ``DevicePointer`` parameter or a shared array),
an element index and the operand(s), converts the operands to the element type, and
returns the value the element held before. Supported element types: int32, uint32,
int64, uint64, float32, float64 (bitwise ops: integers only). float min/max, float64
exchange and float CAS are compare-and-swap loops on the GPU; the rest are instructions.
"""

from __future__ import annotations

from typing import Any

from thork_core import TraceError, dt
from thork_core.ir import Atomic

from ._trace import Memory, Value, _to, as_value, current

__all__ = [
    "atomic_add", "atomic_sub", "atomic_min", "atomic_max", "atomic_exch", "atomic_cas",
    "atomic_and", "atomic_or", "atomic_xor", "atomic_inc", "atomic_dec",
]

_TYPES = (dt.int32, dt.uint32, dt.int64, dt.uint64, dt.float32, dt.float64)


def _atomic(op: str, array: Any, index: Any, *operands: Any) -> Value:
    if not isinstance(array, Memory):
        raise TraceError(f"tk.atomic_{op}(): the first argument must be a DevicePointer "
                         f"parameter or a shared array, got {type(array).__name__}")
    t = array.dtype
    if array.space == "local":
        raise TraceError(f"tk.atomic_{op}() on local array '{array.label}': each thread has "
                         "its own, so use plain loads and stores")
    if t not in _TYPES:
        raise TraceError(
            f"tk.atomic_{op}() on '{array.label}' of {t.name}: atomics need int32, uint32, "
            "int64, uint64, float32 or float64 elements (accumulate float16/bfloat16 in "
            "float32)")
    if op in ("inc", "dec") and t != dt.uint32:
        raise TraceError(f"tk.atomic_{op}() needs uint32 elements (CUDA's atomic{op.title()} "
                         f"is defined for unsigned int only), '{array.label}' has {t.name}")
    if op in ("and", "or", "xor") and t.is_float:
        raise TraceError(f"tk.atomic_{op}() needs integer elements, '{array.label}' has "
                         f"{t.name}")
    idx = array.index_expr(index)
    args = tuple(_to(as_value(v, t), t) for v in operands)
    array.mark_read()
    array.mark_written()
    return Value(current().temp(Atomic(t, op, array.expr, idx, args)))


def atomic_add(array: Any, index: Any, value: Any) -> Value:
    """``array[index] += value`` atomically; returns the old value."""
    return _atomic("add", array, index, value)


def atomic_sub(array: Any, index: Any, value: Any) -> Value:
    """``array[index] -= value`` atomically; returns the old value."""
    return _atomic("sub", array, index, value)


def atomic_min(array: Any, index: Any, value: Any) -> Value:
    """``array[index] = min(array[index], value)`` atomically; returns the old value."""
    return _atomic("min", array, index, value)


def atomic_max(array: Any, index: Any, value: Any) -> Value:
    """``array[index] = max(array[index], value)`` atomically; returns the old value."""
    return _atomic("max", array, index, value)


def atomic_exch(array: Any, index: Any, value: Any) -> Value:
    """Store ``value`` atomically; returns the old value."""
    return _atomic("exch", array, index, value)


def atomic_cas(array: Any, index: Any, compare: Any, value: Any) -> Value:
    """If ``array[index] == compare`` (bitwise), store ``value``; returns the old value."""
    return _atomic("cas", array, index, compare, value)


def atomic_and(array: Any, index: Any, value: Any) -> Value:
    """``array[index] &= value`` atomically (integers); returns the old value."""
    return _atomic("and", array, index, value)


def atomic_or(array: Any, index: Any, value: Any) -> Value:
    """``array[index] |= value`` atomically (integers); returns the old value."""
    return _atomic("or", array, index, value)


def atomic_xor(array: Any, index: Any, value: Any) -> Value:
    """``array[index] ^= value`` atomically (integers); returns the old value."""
    return _atomic("xor", array, index, value)


def atomic_inc(array: Any, index: Any, limit: Any) -> Value:
    """CUDA's ``atomicInc`` (uint32): ``array[index] = old >= limit ? 0 : old + 1``
    atomically — a counter that wraps to 0 after ``limit``; returns the old value."""
    return _atomic("inc", array, index, limit)


def atomic_dec(array: Any, index: Any, limit: Any) -> Value:
    """CUDA's ``atomicDec`` (uint32): ``array[index] = (old == 0 or old > limit) ? limit :
    old - 1`` atomically; returns the old value."""
    return _atomic("dec", array, index, limit)
