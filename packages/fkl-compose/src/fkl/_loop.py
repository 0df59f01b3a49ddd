"""StaticLoop: one op applied n times as a real loop, so long chains stay small.

Core's IR has no loop statement yet (the tracer is getting ``tk.range``), so this module
adds one for fkl only: :class:`For` is an IR statement that every renderer prints through
its ``stmt_extension`` hook, which :func:`render` installs. The loop-carried pixel lives
in mutable locals (``KernelIR.mutable``) updated with ``Assign``.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any

from thork._trace import Value, _to, current
from thork_core import ArgumentError, DType, KernelIR, Renderer, dt
from thork_core._ir import Assign, Const, Expr, Let, Stmt, Var

from ._ops import Op
from ._pixel import Geom, Pixel, PixType

__all__ = ["For", "StaticLoop", "render", "uses_loops"]


@dataclass(eq=False)
class For(Stmt):
    """``for (int var = 0; var < count; ++var) { body }``."""

    var: Var
    count: Expr
    body: list[Stmt] = field(default_factory=list)


def _render_for(self: Renderer, s: Stmt) -> None:
    if not isinstance(s, For):
        raise TypeError(f"{type(self).__name__} cannot render {type(s).__name__}")
    v = s.var.name
    self._emit(f"for (int {v} = 0; {v} < {self.expr(s.count)}; ++{v}) {{", s.loc)
    self._block(s.body)
    self._emit("}", None)


def uses_loops(body: list[Stmt]) -> bool:
    from thork_core._ir import If

    for s in body:
        if isinstance(s, For):
            return True
        if isinstance(s, If) and (uses_loops(s.then) or uses_loops(s.orelse)):
            return True
    return False


def render(renderer: Renderer, kernel: KernelIR) -> str:
    """Render ``kernel`` with ``renderer``, teaching it :class:`For` when needed."""
    if uses_loops(kernel.body):
        renderer.stmt_extension = types.MethodType(_render_for, renderer)  # type: ignore
    return renderer.render(kernel)


#: Names of mutable locals, collected while tracing (the lowering copies them into the IR).
MUTABLE_KEY = "_fkl_mutable"


class StaticLoop(Op):
    """Apply ``op`` ``n`` times (``n`` is part of the type) with one parameter slot: the
    generated code holds the op once, inside a loop, whatever ``n``."""

    def __init__(self, op: Op, n: int) -> None:
        if not isinstance(op, Op) or op.kind != "compute":
            raise ArgumentError(f"fkl.StaticLoop op: expected a compute op, got {op!r}")
        if not isinstance(n, int) or n < 0:
            raise ArgumentError(f"fkl.StaticLoop n: expected a non-negative int, got {n!r}")
        self.op, self.n = op, n

    def key(self) -> tuple[Any, ...]:
        return ("StaticLoop", self.op.key(), self.n)

    def out_type(self, t: PixType) -> PixType:
        out = self.op.out_type(t)
        if out != t:
            raise ArgumentError(
                f"fkl.StaticLoop: {self.op.name} turns a {t} pixel into {out}; a looped op "
                "must keep the pixel type (add a fkl.Cast before the loop)")
        return t

    def scalar_types(self, t: PixType) -> list[DType]:
        return self.op.scalar_types(t)

    def values(self, t: PixType, g: Geom) -> list[Any]:
        return self.op.values(t, g)

    def apply(self, px: Pixel, p: list[Value], t: PixType) -> Pixel:
        trace = current()
        mutable: set[str] = trace.__dict__.setdefault(MUTABLE_KEY, set())
        acc = []
        for v in px:
            var = Var(t.dtype, f"_acc{trace._counter}")
            trace._counter += 1
            trace.emit(Let(var, _to(v, t.dtype)))
            mutable.add(var.name)
            acc.append(var)
        idx = Var(dt.int32, f"_i{trace._counter}")
        trace._counter += 1
        loop = For(idx, Const(dt.int32, self.n))
        trace.emit(loop)
        outer = trace._block
        trace._block = loop.body
        try:
            out = self.op.apply([Value(a) for a in acc], p, t)
            for a, v in zip(acc, out):
                trace.emit(Assign(a, _to(v, t.dtype)))
        finally:
            trace._block = outer
        return [Value(a) for a in acc]
