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

from thork_core import TraceError, dt
from thork_core._ir import If, Return

from ._trace import _to, as_value, current

__all__ = ["if_", "elif_", "else_", "return_"]


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


def _open_chain_end(construct: str) -> If:
    """The innermost ``If`` of the if/elif chain that directly precedes, whose ``else``
    is still free."""
    trace = current()
    last = trace._block[-1] if trace._block else None
    if not isinstance(last, If):
        raise TraceError(f"tk.{construct}() must directly follow a tk.if_() or tk.elif_() block")
    while last.orelse:
        nested = last.orelse[0]
        if len(last.orelse) == 1 and isinstance(nested, If) and getattr(nested, "_elif", False):
            last = nested
            continue
        raise TraceError(f"tk.{construct}() follows an if_ chain that already has an else_")
    return last


@contextmanager
def elif_(cond: Any) -> Iterator[None]:
    """``else if``: runs where every earlier condition of the chain was false and
    ``cond`` is true."""
    trace = current()
    head = _open_chain_end("elif_")
    # The condition is evaluated in the else branch (only where the earlier ones failed).
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
        trace._block = trace._stack.pop()  # the else block stays open for a later elif_


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
