"""Device loops on traced bounds: ``tk.range``, ``tk.while_``, ``tk.break_``, ``tk.continue_``.

``for k in tk.range(start, stop, step):`` runs the body once at trace time and records a
C++ ``for`` loop; ``k`` is the traced loop index. Python's ``range`` (or any Python loop)
still unrolls at trace time, which is how compile-time loops are written.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from thork_core import TraceError, dt
from thork_core.ir import Break, Const, Continue, Expr, For, Var, While

from ._local import Local
from ._trace import Value, _to, as_value, current

__all__ = ["range", "while_", "break_", "continue_"]


class _Range:
    """The iterable returned by :func:`range`; iterating it records one device loop."""

    def __init__(self, start: Any, stop: Any, step: Any, unroll: int) -> None:
        vals = [as_value(x) for x in (start, stop, step)]
        for name, v in zip(("start", "stop", "step"), vals):
            if not (v.dtype.is_int or v.dtype == dt.bool):
                raise TraceError(f"tk.range(): {name} must be an integer, got {v.dtype.name}")
        if isinstance(vals[2].expr, Const) and vals[2].expr.value == 0:
            raise TraceError("tk.range(): step must not be zero")
        if not isinstance(unroll, int) or unroll < 0:
            raise TraceError(f"tk.range(): unroll must be a non-negative int, got {unroll!r}")
        # The index is int32 unless a bound is 64-bit (like Triton): signed, so that
        # ranges counting down to -1 work with unsigned bounds such as threadIdx.
        self.dtype = dt.int64 if builtins.any(v.dtype.bits == 64 for v in vals) else dt.int32
        self.vals = vals
        self.unroll = unroll

    def __iter__(self) -> Iterator[Value]:
        trace = current()
        t = self.dtype
        # Read once at loop entry, as Python's range: a tk.var bound or step set in the
        # body does not change the loop (the C++ loop counts its trips for a run-time step).
        start, stop, step = (_to(v.get() if isinstance(v, Local) else v, t)
                             for v in self.vals)
        index = Var(t, trace.fresh("i"))
        stmt = For(index, start, stop, step, [], self.unroll)
        trace.emit(stmt)
        trace.push(stmt.body)
        trace.define(index.name)
        trace.loops += 1
        finished = False
        try:
            yield Value(index)
            finished = True
        finally:
            trace.loops -= 1
            trace.pop()
            if not finished:
                # Python 'break' or 'return' left the traced body early (or it raised).
                trace.deferred.append(
                    f"a Python break/return left the body of the tk.range loop at "
                    f"{stmt.loc} while tracing; use tk.break_() / tk.return_() for device "
                    "control flow")


def range(start: Any, stop: Any = None, step: Any = 1, *, unroll: int = 0) -> _Range:  # noqa: A001
    """A device loop with Python ``range`` semantics over traced or Python bounds.

    ``tk.range(n)``, ``tk.range(start, stop)``, ``tk.range(start, stop, step)``; a
    negative step counts down. ``unroll=k`` asks the compiler to unroll by ``k``.
    """
    if stop is None:
        start, stop = 0, start
    return _Range(start, stop, step, unroll)


@contextmanager
def while_(cond: Callable[[], Any] | Local | bool | None = None) -> Iterator[None]:
    """``while`` loop: the body repeats while ``cond`` holds.

    ``cond`` is a callable traced afresh for every iteration (``lambda: i < n`` with
    ``i`` a :func:`tk.var <thork.var>`), a boolean ``tk.var``, or None/True for a loop left
    only through :func:`break_`/:func:`tk.return_ <thork.return_>`.
    """
    trace = current()
    stmt = While([], Const(dt.bool, True), [])
    trace.emit(stmt)
    trace.push(stmt.head)
    try:
        c: Expr
        if cond is None or cond is True:
            c = Const(dt.bool, True)
        elif callable(cond) and not isinstance(cond, Value):
            c = _to(as_value(cond()), dt.bool)
        elif isinstance(cond, Local):
            c = _to(cond, dt.bool) if cond.dtype != dt.bool else cond.expr
        else:
            raise TraceError(
                "tk.while_(cond): cond must be a callable such as lambda: i < n (traced for "
                "every iteration), a boolean tk.var, or None; got "
                f"{type(cond).__name__} — a plain traced value is computed once and would "
                "never change")
    except BaseException:
        trace.pop()
        raise
    stmt.cond = c
    # The body shares the head's C++ scope: switch blocks without closing the head.
    head_id = id(trace._block)
    trace._block = stmt.body
    trace.loops += 1
    try:
        yield
    finally:
        trace.loops -= 1
        trace._closed.add(head_id)
        trace.pop()


def break_() -> None:
    """Leave the innermost ``tk.range``/``tk.while_`` loop (C++ ``break``)."""
    trace = current()
    if trace.loops == 0:
        raise TraceError("tk.break_() must be inside a tk.range or tk.while_ loop")
    trace.emit(Break())


def continue_() -> None:
    """Skip to the next iteration of the innermost device loop (C++ ``continue``)."""
    trace = current()
    if trace.loops == 0:
        raise TraceError("tk.continue_() must be inside a tk.range or tk.while_ loop")
    trace.emit(Continue())
