"""Shaped arrays: ``tk.DevicePointer[dtype, ndim]`` indexed ``a[y, x]`` with ``a.shape``.

An n-d pointer parameter reads its extents and element strides from the argument at
launch, as run-time kernel arguments: one compiled kernel serves every size. They are
hidden parameters (:attr:`thork_core.Param.derived`) that the caller never passes; they
are created when the trace first asks for them, so a kernel that only indexes flat pays
nothing. Extents and strides are int32 (the index arithmetic of CUDA's ``int``); an
argument with 2³¹ elements or more is refused at launch.

A single index keeps the flat meaning (``a[i]`` is element ``i`` of the row-major
buffer), so flat loops over an n-d array stay as they were.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from thork_core import ArgumentError, KernelIR, Param, TraceError, dt
from thork_core.ir import Const, Expr, Var

from ._trace import Pointer, Value, _bin, _index_value

__all__ = ["ShapedPointer", "with_derived", "length"]

#: Largest element count a shaped argument may have: offsets are 32-bit.
MAX_ELEMENTS = 2**31 - 1


class ShapedPointer(Pointer):
    """A traced n-d array parameter. ``params`` is the parameter list of the kernel or
    device function that owns it (hidden extents/strides are appended there)."""

    __slots__ = ("ndim", "_params", "_derived")

    def __init__(self, param: Param, ndim: int, params: list[Param]) -> None:
        super().__init__(param)
        self.ndim = ndim
        self._params = params
        self._derived: dict[tuple[str, int], Value] = {}

    def derived(self, kind: str, axis: int) -> Value:
        """The run-time extent (``"shape"``) or element stride (``"stride"``) of ``axis``."""
        if kind == "stride" and axis == self.ndim - 1:
            return Value(Const(dt.int32, 1))  # C-contiguous: checked at launch
        key = (kind, axis)
        v = self._derived.get(key)
        if v is None:
            # 'thork_' names cannot clash with the user's: theirs are renamed 'p_thork_...'.
            name = f"thork_{kind}{axis}_{self.param.name}"
            self._params.append(Param(name, dt.int32, derived=(self.param.name, kind, axis)))
            v = self._derived[key] = Value(Var(dt.int32, name))
        return v

    @property
    def shape(self) -> tuple[Value, ...]:
        """The argument's extents (int32 run-time values), outermost first."""
        return tuple(self.derived("shape", k) for k in range(self.ndim))

    @property
    def strides(self) -> tuple[Value, ...]:
        """Element (not byte) strides per axis; the last is the constant 1."""
        return tuple(self.derived("stride", k) for k in range(self.ndim))

    @property
    def size(self) -> Value:
        """Number of elements (int32)."""
        if self.ndim == 0:
            return Value(Const(dt.int32, 1))
        return _bin("mul", self.derived("shape", 0), self.derived("stride", 0)) \
            if self.ndim > 1 else self.derived("shape", 0)

    def __len__(self) -> int:
        raise TraceError(
            f"len({self.label}): Python's len() must return a Python int, but the extent of "
            f"'{self.label}' is only known at launch; use tk.len({self.label}) or "
            f"{self.label}.shape[0]")

    def index_expr(self, i: Any) -> Expr:
        if not isinstance(i, tuple):
            return _index_value(i, self.label).expr  # one index: flat, as for any pointer
        if len(i) != self.ndim:
            raise TraceError(
                f"'{self.label}' is a {self.ndim}-D array: index it with {self.ndim} "
                f"integers (or one flat index), got {len(i)}")
        flat: Value | None = None
        for axis, x in enumerate(i):
            if isinstance(x, slice):
                raise TraceError(f"'{self.label}[...]': slices are not supported in a kernel; "
                                 "index one element (or use a + offset for a view)")
            v = _index_value(x, self.label)
            if isinstance(v.expr, Const) and int(v.expr.value) < 0:
                raise TraceError(
                    f"index {v.expr.value} on axis {axis} of '{self.label}': negative indices "
                    "do not wrap around in a kernel")
            if isinstance(v.expr, Const) and int(v.expr.value) == 0:
                continue
            term = v if axis == self.ndim - 1 else _bin("mul", v, self.derived("stride", axis))
            flat = term if flat is None else _bin("add", flat, term)
        return flat.expr if flat is not None else Const(dt.int32, 0)

    def __repr__(self) -> str:
        return f"<traced {self.dtype.name}[{self.ndim}-D] {self.param.name}>"


def length(a: Any) -> Value:
    """``tk.len(a)``: the extent of axis 0 of a shaped array (a run-time int32), or the
    first dimension of a static shared array (a Python int)."""
    from ._shared import SharedArray

    if isinstance(a, ShapedPointer):
        if a.ndim == 0:
            raise TraceError(f"tk.len({a.label}): a 0-D array has no length")
        return a.derived("shape", 0)
    if isinstance(a, SharedArray) and a.shape is not None:
        return a.shape[0]  # type: ignore[return-value]
    label = getattr(a, "label", type(a).__name__)
    raise TraceError(
        f"tk.len({label}): only arrays with a known shape have a length: annotate the "
        "parameter tk.DevicePointer[dtype, ndim] (flat pointers carry no extent)")


def with_derived(ir: KernelIR, args: Sequence[Any]) -> list[Any]:
    """The caller's ``args`` followed by the values of ``ir``'s hidden (derived)
    parameters, read from the arguments' shapes; raises the argument-count error when
    ``args`` do not match the parameters the caller passes."""
    hidden = [p for p in ir.params if p.derived is not None]
    user = ir.params[:len(ir.params) - len(hidden)]
    if len(args) != len(user) or any(p.derived is not None for p in user):
        names = ", ".join(p.name for p in user)
        raise ArgumentError(
            f"{ir.name}() takes {len(user)} argument(s) ({names}), got {len(args)}")
    index = {p.name: i for i, p in enumerate(user)}
    shapes: dict[int, tuple[int, ...]] = {}
    out = list(args)
    for p in hidden:
        src, kind, axis = p.derived  # type: ignore[misc]
        i = index[src]
        if kind == "span":  # debug mode: the argument's element count (any size)
            out.append(_span_of(args[i], user[i], ir))
            continue
        shape = shapes.get(i)
        if shape is None:
            shape = shapes[i] = _shape_of(args[i], user[i], ir)
        out.append(shape[axis] if kind == "shape" else math.prod(shape[axis + 1:]))
    return out


def _span_of(arg: Any, param: Param, ir: KernelIR) -> int:
    """Elements of the argument for pointer parameter ``param`` (debug mode's bound)."""
    shape = getattr(arg, "shape", None)
    if shape is None:
        from thork_core.plugin import array_view

        shape = array_view(arg, param, ir, None).shape
    return math.prod(int(n) for n in shape)


def _shape_of(arg: Any, param: Param, ir: KernelIR) -> tuple[int, ...]:
    shape = getattr(arg, "shape", None)
    if shape is None:
        from thork_core.plugin import array_view

        shape = array_view(arg, param, ir, None).shape  # raises the 'expects an array' error
    shape = tuple(int(n) for n in shape)
    where = f"{ir.name}(): parameter '{param.name}'"
    if param.ndim is not None and len(shape) != param.ndim:
        raise ArgumentError(f"{where} expects a {param.ndim}-D array, got {len(shape)}-D "
                            f"with shape {shape}")
    if math.prod(shape) > MAX_ELEMENTS:
        raise ArgumentError(
            f"{where} has {math.prod(shape)} elements (shape {shape}); a shaped array indexes "
            f"with 32-bit offsets, so at most {MAX_ELEMENTS} elements: annotate it "
            "tk.DevicePointer[dtype] and compute 64-bit flat indices")
    return shape
