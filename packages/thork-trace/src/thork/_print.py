"""Device printing: ``tk.print("row", i, "sum", acc)``.

Python's ``print`` runs at trace time, so on a traced value it shows the symbol, not what
a thread computes (Thork warns). ``tk.print`` records a ``printf`` instead: arguments are
printed like Python's ``print`` (separated by ``sep``, ended by ``end``), traced values
with a conversion chosen by their dtype (``%d``/``%u``/``%lld``/``%llu`` for integers,
``%g`` for floats, ``True``/``False`` for bools), other Python values as ``str(value)``
at trace time.

On the GPU the text goes to CUDA's printf buffer (1 MiB by default; flushed to the
process's stdout at the next synchronization), in no particular order between threads.
On the CPU target each block's text is collected and written in block order after the
launch: threads of a block in the order they ran, blocks by linear index.
"""

from __future__ import annotations

from typing import Any

from thork_core import DType, TraceError, dt
from thork_core.ir import Print

from ._trace import Memory, Value, current

__all__ = ["print_"]


def _conversion(t: DType) -> str:
    if t == dt.bool:
        return "%s"
    if t.is_float:
        return "%g"
    if t.bits == 64:
        return "%llu" if t.kind == "u" else "%lld"
    return "%u" if t.kind == "u" else "%d"


def print_(*values: Any, sep: str = " ", end: str = "\n") -> None:
    """Print ``values`` from every thread that reaches this line (see the module doc)."""
    if not isinstance(sep, str) or not isinstance(end, str):
        raise TraceError("tk.print(): sep and end must be Python strings")
    parts: list[str] = []
    args = []
    for i, v in enumerate(values):
        if i:
            parts.append(sep.replace("%", "%%"))
        if isinstance(v, Value):
            parts.append(_conversion(v.dtype))
            args.append(v.expr)
        elif isinstance(v, Memory):
            raise TraceError(f"tk.print(): '{v.label}' is an array; print its elements "
                             f"({v.label}[i])")
        else:
            parts.append(str(v).replace("%", "%%"))
    parts.append(end.replace("%", "%%"))
    current().emit(Print("".join(parts), tuple(args)))
