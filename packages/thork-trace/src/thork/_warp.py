"""Warp primitives: shuffles, votes and warp-wide reductions.

A warp is 32 consecutive threads of a block (by :func:`tk.linear_thread_idx
<thork.linear_thread_idx>`). Every primitive takes a ``mask`` of the lanes taking part
(default: all 32) — as in CUDA's ``*_sync`` functions, every lane named in ``mask``
must execute the same call. Shuffles move any scalar dtype.
"""

from __future__ import annotations

from typing import Any

from thork_core import TraceError, dt
from thork_core.ir import Warp

from ._trace import Value, _to, as_value, current

__all__ = [
    "shfl_idx", "shfl_up", "shfl_down", "shfl_xor", "ballot", "warp_any", "warp_all",
    "activemask", "warp_sum", "warp_max", "warp_min", "warp_reduce",
]

_FULL = 0xFFFFFFFF


def _width(width: Any) -> int:
    if not isinstance(width, int) or width not in (1, 2, 4, 8, 16, 32):
        raise TraceError(f"warp reduction width must be a power of two from 1 to 32 known "
                         f"at trace time, got {width!r}")
    return width


def _shfl_width(width: Any) -> Value:
    """A shuffle's width: a Python int (checked now) or a traced integer (a run-time
    value, which like CUDA's must be a power of two from 1 to 32)."""
    if isinstance(width, Value):
        if not width.dtype.is_int:
            raise TraceError(f"warp shuffle width must be an integer, got {width.dtype.name}")
        return width
    if not isinstance(width, int) or isinstance(width, bool) \
            or width not in (1, 2, 4, 8, 16, 32):
        raise TraceError(f"warp shuffle width must be a power of two from 1 to 32 (or a "
                         f"traced integer), got {width!r}")
    return as_value(width)


def _shfl(op: str, value: Any, lane: Any, width: Any, mask: Any) -> Value:
    v = as_value(value)
    w = _shfl_width(width)
    args = (_to(as_value(mask), dt.uint32), v.expr, _to(as_value(lane), dt.int32),
            _to(w, dt.int32))
    return Value(current().temp(Warp(v.dtype, op, args)))


def shfl_idx(value: Any, src_lane: Any, width: Any = 32, mask: Any = _FULL) -> Value:
    """``value`` of lane ``src_lane`` (within each group of ``width`` lanes)."""
    return _shfl("shfl_idx", value, src_lane, width, mask)


def shfl_up(value: Any, delta: Any, width: Any = 32, mask: Any = _FULL) -> Value:
    """``value`` of lane ``lane - delta``; lanes below ``delta`` keep their own."""
    return _shfl("shfl_up", value, delta, width, mask)


def shfl_down(value: Any, delta: Any, width: Any = 32, mask: Any = _FULL) -> Value:
    """``value`` of lane ``lane + delta``; lanes past the group's end keep their own."""
    return _shfl("shfl_down", value, delta, width, mask)


def shfl_xor(value: Any, lane_mask: Any, width: Any = 32, mask: Any = _FULL) -> Value:
    """``value`` of lane ``lane ^ lane_mask`` (butterfly exchange)."""
    return _shfl("shfl_xor", value, lane_mask, width, mask)


def _vote(op: str, pred: Any, mask: Any) -> Value:
    args = (_to(as_value(mask), dt.uint32), _to(as_value(pred), dt.bool))
    t = dt.uint32 if op == "ballot" else dt.bool
    return Value(current().temp(Warp(t, op, args)))


def ballot(pred: Any, mask: Any = _FULL) -> Value:
    """uint32 with bit ``k`` set when lane ``k`` (in ``mask``) has ``pred`` true."""
    return _vote("ballot", pred, mask)


def warp_any(pred: Any, mask: Any = _FULL) -> Value:
    """Whether ``pred`` is true in any lane of ``mask``."""
    return _vote("any", pred, mask)


def warp_all(pred: Any, mask: Any = _FULL) -> Value:
    """Whether ``pred`` is true in every lane of ``mask``."""
    return _vote("all", pred, mask)


def activemask() -> Value:
    """The lanes of this warp executing this instruction now (uint32)."""
    return Value(current().temp(Warp(dt.uint32, "activemask", ())))


def warp_reduce(value: Any, combine: Any, width: Any = 32, mask: Any = _FULL) -> Value:
    """Combine ``value`` over each group of ``width`` lanes with ``combine(a, b)``; every
    lane gets the result. A butterfly of ``log2(width)`` :func:`shfl_xor` steps, unrolled
    at trace time."""
    v = as_value(value)
    step = _width(width) // 2
    while step >= 1:
        v = as_value(combine(v, shfl_xor(v, step, width, mask)))
        step //= 2
    return v


def warp_sum(value: Any, width: Any = 32, mask: Any = _FULL) -> Value:
    """Sum of ``value`` over the warp (or each group of ``width`` lanes), in every lane."""
    return warp_reduce(value, lambda a, b: a + b, width, mask)


def warp_max(value: Any, width: Any = 32, mask: Any = _FULL) -> Value:
    """Maximum of ``value`` over the warp, in every lane."""
    from ._math import max as max_

    return warp_reduce(value, max_, width, mask)


def warp_min(value: Any, width: Any = 32, mask: Any = _FULL) -> Value:
    """Minimum of ``value`` over the warp, in every lane."""
    from ._math import min as min_

    return warp_reduce(value, min_, width, mask)
