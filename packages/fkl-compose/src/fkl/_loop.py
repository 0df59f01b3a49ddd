"""StaticLoop: one op applied n times as a real device loop, so long chains stay small.

The loop is the tracer's ``tk.range`` and the loop-carried pixel lives in ``tk.var``
mutable locals, so the generated code holds the op once whatever ``n``.
"""

from __future__ import annotations

from typing import Any

from thork import range as tk_range
from thork import var as tk_var
from thork.tracing import Value
from thork_core import ArgumentError, DType

from ._ops import Op
from ._pixel import Geom, Pixel, PixType

__all__ = ["StaticLoop"]


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
        return ("StaticLoop", self.op.cache_key(), self.n)

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
        acc = [tk_var(v, t.dtype) for v in px]
        for _ in tk_range(self.n):
            out = self.op.apply([a.get() for a in acc], p, t)
            for a, v in zip(acc, out, strict=False):
                a.set(v)
        return [a.get() for a in acc]

    def apply_many(self, pixels: list[Pixel], p: list[Value], t: PixType) -> list[Pixel]:
        # One device loop whose body steps every pixel of the group: the loop overhead is
        # paid once, and the code still does not grow with n.
        accs = [[tk_var(v, t.dtype) for v in px] for px in pixels]
        for _ in tk_range(self.n):
            outs = [self.op.apply([a.get() for a in acc], p, t) for acc in accs]
            for acc, out in zip(accs, outs, strict=True):
                for a, v in zip(acc, out, strict=False):
                    a.set(v)
        return [[a.get() for a in acc] for acc in accs]
