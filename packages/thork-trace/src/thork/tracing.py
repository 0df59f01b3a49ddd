"""The public tracing API: what a front-end needs to emit kernel IR from Python.

A front-end (fkl-compose is one) records a kernel the way ``@tk.jit`` does:

1. make a :class:`Trace` with the kernel's name and :class:`~thork_core.ir.Param` list
   and install it with :func:`set_current` (keep the previous one to restore it);
2. wrap each pointer parameter in a :class:`Pointer` and each scalar in a :class:`Value`
   over a :class:`~thork_core.ir.Var`;
3. run Python code on those values: arithmetic, comparisons, indexing, :func:`cast`,
   :func:`where`, :func:`cond`, the functions in :mod:`math` (``min``, ``max``,
   ``floor``...) and the control flow context managers :func:`if_`/:func:`elif_`/:func:`else_`,
   :func:`return_`, :func:`range`, :func:`while_` — every operation appends IR to the
   current trace;
4. build a :class:`~thork_core.ir.KernelIR` from ``trace.name``, ``trace.params`` and
   ``trace.body`` and hand it to :func:`thork_core.build.build_kernel`.

Traced errors raise :class:`~thork_core.TraceError` naming the Python line.
"""

from __future__ import annotations

from . import _math as math
from ._control import cond, elif_, else_, if_, return_
from ._grid import block_dim, block_idx, grid_dim, thread_idx
from ._local import Local, var
from ._loop import break_, continue_, range, while_
from ._trace import (
    Dim3,
    Memory,
    Pointer,
    Trace,
    TraceWarning,
    Value,
    View,
    as_value,
    cast,
    current,
    current_or_none,
    set_current,
    view,
    warn,
    where,
)

__all__ = [
    "Dim3", "Local", "Memory", "Pointer", "Trace", "TraceWarning", "Value", "View",
    "as_value",
    "block_dim", "block_idx", "break_", "cast", "cond", "continue_", "current",
    "current_or_none", "elif_", "else_", "grid_dim", "if_", "math", "range", "return_",
    "set_current", "thread_idx", "var", "view", "warn", "where", "while_",
]
