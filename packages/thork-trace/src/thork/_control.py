"""Device branches on traced values: ``tk.if_``, ``tk.elif_``, ``tk.else_``, ``tk.return_``.

A traced condition's value is only known when the kernel runs, so a Python ``if`` cannot
branch on it (``bool(value)`` raises); these constructs record the branch instead::

    with tk.if_(i < n):
        out[i] = a[i]
    with tk.elif_(i < 2 * n):
        out[i - n] = 0.0
    with tk.else_():
        tk.return_()

A Python ``if`` on a Python value still runs at trace time: only the taken branch is
recorded (that is how kernels are specialized).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from thork_core import TraceError, dt, promote
from thork_core.ir import (
    Assign,
    Atomic,
    BlockReduce,
    CallFunc,
    Const,
    Hopper,
    If,
    Let,
    Return,
    Var,
    Warp,
    walk_exprs,
)

from ._trace import Value, _to, as_value, current, where

__all__ = ["if_", "elif_", "else_", "return_", "cond"]

_EFFECTS = (Atomic, Warp, BlockReduce, CallFunc, Hopper)


@contextmanager
def if_(cond: Any) -> Iterator[None]:
    """Statements in the ``with`` body run only in threads where ``cond`` is true."""
    trace = current()
    stmt = If(_to(as_value(cond), dt.bool), [], [])
    trace.emit(stmt)
    trace.push(stmt.then)
    try:
        yield
    finally:
        trace.pop()


def _open_chain_end(construct: str, skip: int = 0) -> If:
    """The innermost ``If`` of the if/elif chain that directly precedes (ignoring the last
    ``skip`` statements), whose ``else`` is still free."""
    trace = current()
    block = trace._block
    last = block[-1 - skip] if len(block) > skip else None
    if not isinstance(last, If):
        raise TraceError(f"tk.{construct}() must directly follow a tk.if_() or tk.elif_() block")
    while last.orelse:
        nested = last.orelse[-1]
        if isinstance(nested, If) and getattr(nested, "_elif", False):
            last = nested
            continue
        raise TraceError(f"tk.{construct}() follows an if_ chain that already has an else_")
    return last


@contextmanager
def elif_(cond: Any) -> Iterator[None]:
    """``else if``: runs where every earlier condition of the chain was false and
    ``cond`` is true."""
    trace = current()
    # Python evaluated ``cond`` before calling us: its temporaries follow the chain's
    # ``If``. They move into the else branch (computed only where earlier tests failed).
    block = trace._block
    n = 0
    while n < len(block) and isinstance(block[-1 - n], Let):
        n += 1
    head = _open_chain_end("elif_", n)
    moved = block[len(block) - n:] if n else []
    for s in moved:
        if any(isinstance(e, _EFFECTS) for e in walk_exprs(s.value)):  # type: ignore[attr-defined]
            raise TraceError(
                "the condition of tk.elif_() has a side effect (atomic, warp or barrier "
                "operation, or a device-function call); compute it before the tk.if_ chain")
    del block[len(block) - n:]
    head.orelse.extend(moved)
    for s in moved:
        trace.define(s.var.name, head.orelse)  # type: ignore[attr-defined]
    trace.push(head.orelse)
    try:
        stmt = If(_to(as_value(cond), dt.bool), [], [])
        stmt._elif = True  # type: ignore[attr-defined]
        trace.emit(stmt)
        trace.push(stmt.then)
        try:
            yield
        finally:
            trace.pop()
    finally:
        # Later elif_/else_ nest inside ``stmt.orelse``; this else block is done.
        trace._closed.add(id(head.orelse))
        trace._block = trace._stack.pop()


@contextmanager
def else_() -> Iterator[None]:
    """The other branch of the ``tk.if_``/``tk.elif_`` chain that immediately precedes it."""
    trace = current()
    head = _open_chain_end("else_")
    trace.push(head.orelse)
    try:
        yield
    finally:
        trace.pop()


def return_() -> None:
    """End the current thread (CUDA ``return``); later statements do not run for it.

    Threads that returned no longer take part in ``tk.syncthreads()`` (as on sm_70+).
    """
    trace = current()
    if trace.is_function:
        raise TraceError(
            "tk.return_() ends the thread and is only allowed in the kernel body, not in "
            "a tk.func helper; compute the helper's result with tk.where or a tk.var and "
            "return it with Python's return at the end")
    trace.emit(Return())


def cond(c: Any, if_true: Any, if_false: Any) -> Value:
    """C's ``c ? if_true : if_false``, evaluating only the chosen side.

    Each side is a value or a function of no arguments (``lambda: a[k]``); a function is
    traced into a branch that runs only where it is chosen, so
    ``tk.cond(k < n, lambda: a[k], 0.0)`` never loads ``a[k]`` out of bounds.
    ``tk.where`` computes both sides (fine for values already at hand). The result has
    the common type of the two sides, as with ``tk.where``.
    """
    if not callable(if_true) and not callable(if_false):
        return where(c, if_true, if_false)
    cv = as_value(c)
    if isinstance(cv.expr, Const):  # known at trace time: only that side exists
        chosen = if_true if cv.expr.value else if_false
        return as_value(chosen() if callable(chosen) else chosen)
    trace = current()
    stmt = If(_to(cv, dt.bool), [], [])
    trace.emit(stmt)
    raw = []
    for block, side in ((stmt.then, if_true), (stmt.orelse, if_false)):
        trace.push(block)
        try:
            raw.append(side() if callable(side) else side)
        finally:
            trace.pop()
    ra, rb = raw
    if isinstance(ra, Value) or not isinstance(rb, Value):
        a = as_value(ra)
        b = as_value(rb, a.dtype)
    else:
        b = rb
        a = as_value(ra, b.dtype)
    t = promote(a.dtype, b.dtype) if a.dtype != b.dtype else a.dtype
    # The result is a mutable local declared before the branch and set in both sides.
    result = Var(t, trace.fresh("c"))
    trace.mutable.add(result.name)
    block = trace._block
    block.insert(block.index(stmt), Let(result, Const(t, False if t == dt.bool else 0),
                                        loc=stmt.loc))
    trace.define(result.name)
    for branch, v in ((stmt.then, a), (stmt.orelse, b)):
        branch.append(Assign(result, _to(v, t), loc=stmt.loc))
    return Value(trace.temp(result))
