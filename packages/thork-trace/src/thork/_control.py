"""Device control flow on traced values.

A traced condition's value is only known when the kernel runs, so a Python ``if`` cannot
branch on it; these constructs record the branch instead::

    with tk.if_(i < n):
        out[i] = a[i]
    with tk.else_():
        tk.return_()
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from thork_core import TraceError, dt
from thork_core._ir import If, Return

from ._trace import _to, as_value, current

__all__ = ["if_", "else_", "return_"]


@contextmanager
def if_(cond: Any) -> Iterator[None]:
    """Statements in the ``with`` body run only in threads where ``cond`` is true."""
    trace = current()
    stmt = If(_to(as_value(cond), dt.bool), [], [])
    trace.emit(stmt)
    outer = trace._block
    trace._block = stmt.then
    try:
        yield
    finally:
        trace._block = outer


@contextmanager
def else_() -> Iterator[None]:
    """The other branch of the ``tk.if_`` block that immediately precedes it."""
    trace = current()
    last = trace._block[-1] if trace._block else None
    if not isinstance(last, If) or last.orelse:
        raise TraceError("tk.else_() must directly follow a tk.if_() block")
    outer = trace._block
    trace._block = last.orelse
    try:
        yield
    finally:
        trace._block = outer


def return_() -> None:
    """End the current thread (CUDA ``return``); later statements do not run for it."""
    current().emit(Return())
