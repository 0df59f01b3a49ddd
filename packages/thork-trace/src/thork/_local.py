"""Mutable local variables: ``x = tk.var(0.0)``, ``x.set(v)``, ``x += v``.

Why a tracing DSL needs them: tracing runs the Python function once, so a Python
variable rebound inside a device loop (``acc = acc + a[k]`` in ``tk.range``) names a new
*trace-time* value, not a run-time storage location that changes every iteration. A
:class:`Local` is that storage location: each read records the variable's value at that
point of the program, each ``set`` (or augmented assignment) records an assignment.
"""

from __future__ import annotations

from typing import Any

from thork_core import TraceError, dtype_of
from thork_core.ir import Assign, Let, Var

from ._trace import Value, _bin, _to, as_value, current

__all__ = ["Local", "var"]


class Local(Value):
    """A mutable local of one dtype. Use it like any traced value; ``set`` assigns."""

    __slots__ = ()

    def set(self, value: Any) -> None:
        """Assign ``value`` converted to this variable's dtype (C++ assignment)."""
        v = as_value(value, self.dtype)
        current().emit(Assign(self.expr, _to(v, self.dtype)))  # type: ignore[arg-type]

    def get(self) -> Value:
        """The current value as an immutable snapshot (does not follow later ``set``)."""
        return Value(current().temp(self.expr))

    def _update(self, op: str, other: Any) -> Local:
        # C++ compound assignment: compute in the promoted type, convert back on assign.
        self.set(_bin(op, self, other))
        return self

    def __iadd__(self, o: Any) -> Local: return self._update("add", o)
    def __isub__(self, o: Any) -> Local: return self._update("sub", o)
    def __imul__(self, o: Any) -> Local: return self._update("mul", o)
    def __itruediv__(self, o: Any) -> Local: return self._update("div", o)
    def __ifloordiv__(self, o: Any) -> Local: return self._update("floordiv", o)
    def __imod__(self, o: Any) -> Local: return self._update("mod", o)
    def __iand__(self, o: Any) -> Local: return self._update("and", o)
    def __ior__(self, o: Any) -> Local: return self._update("or", o)
    def __ixor__(self, o: Any) -> Local: return self._update("xor", o)
    def __ilshift__(self, o: Any) -> Local: return self._update("shl", o)
    def __irshift__(self, o: Any) -> Local: return self._update("shr", o)

    def __repr__(self) -> str:
        return f"<tk.var {self.dtype.name} {self.expr.name}>"  # type: ignore[attr-defined]


def var(init: Any, dtype: Any = None) -> Local:
    """Declare a mutable local initialised to ``init``.

    ``dtype`` defaults to ``init``'s type (a Python ``float`` gives float32, an ``int``
    int32). Declare it *before* the loop or branch that updates it.
    """
    trace = current()
    if dtype is not None:
        t = dtype_of(dtype)
        v = as_value(init, t)
    else:
        v = as_value(init)
        t = v.dtype
    if isinstance(init, (list, tuple)):
        raise TraceError("tk.var(init) takes one scalar; use tk.shared_array for arrays")
    name = trace.fresh("v")
    var_ = Var(t, name)
    trace.mutable.add(name)
    trace.emit(Let(var_, _to(v, t)))
    return Local(var_)
