"""Colour depth: pixel values on an n-bit scale (FKL's ColorDepth: 8, 10, 12, 16 bits).

A depth of n bits means samples 0..M with M = 2**n - 1 (a 10-bit sample in a uint16 is
0..1023). The ops, as FKL's NormalizePixel, DenormalizePixel, SaturateDepth and
AddOpaqueAlpha: normalize divides every channel (alpha included) by M in float32,
denormalize multiplies by M, saturate clamps to [0, M] keeping the dtype, and an opaque
alpha is M (1.0 for a normalized pixel). M is a runtime value: one kernel serves every
depth.
"""

from __future__ import annotations

from typing import Any

from thork.tracing import Value, cast
from thork.tracing import math as tkm
from thork_core import ArgumentError, DType, dt

from ._ops import Op
from ._pixel import Geom, Pixel, PixType
from ._yuvcolor import check_depth

__all__ = ["ColorDepth", "NormalizePixel", "DenormalizePixel", "SaturateDepth",
           "AddOpaqueAlpha", "max_value"]


class ColorDepth:
    """The depths by name, as FKL spells them: ``fkl.ColorDepth.p10bit`` is 10."""

    p8bit = 8
    p10bit = 10
    p12bit = 12
    p16bit = 16


def max_value(depth: int) -> int:
    """The largest sample of ``depth`` bits: 2**depth - 1."""
    return int(2 ** check_depth(depth, "fkl colour depth") - 1)


class _DepthOp(Op):
    elementwise = True

    def __init__(self, depth: int = 8) -> None:
        self.depth = check_depth(depth, f"{self.name} depth")

    def __repr__(self) -> str:
        return f"{self.name}({self.depth})"

    def out_type(self, t: PixType) -> PixType:
        self._no_pair(t)
        if t.dtype == dt.bool:
            raise ArgumentError(f"{self.name}: unsupported dtype bool")
        return self._out(t)

    def _out(self, t: PixType) -> PixType:
        return t.with_(dtype=dt.float64 if t.dtype == dt.float64 else dt.float32)

    def scalar_types(self, t: PixType) -> list[DType]:
        return [self._out(t).dtype if self._out(t).dtype.is_float else dt.float32]

    def values(self, t: PixType, g: Geom) -> list[Any]:
        return [float(max_value(self.depth))]


class NormalizePixel(_DepthOp):
    """``x / M`` per channel in float32 (float64 stays): samples of ``depth`` bits to
    [0, 1]."""

    def apply(self, px: Pixel, p: list[Value], t: PixType) -> Pixel:
        rt = self._out(t).dtype
        return [cast(v, rt) / p[0] for v in px]


class DenormalizePixel(_DepthOp):
    """``x * M`` per channel in float32 (float64 stays): [0, 1] to the ``depth``-bit
    scale (not rounded: add fkl.SaturateCast for integers)."""

    def apply(self, px: Pixel, p: list[Value], t: PixType) -> Pixel:
        rt = self._out(t).dtype
        return [cast(v, rt) * p[0] for v in px]


class SaturateDepth(_DepthOp):
    """Clamp every channel to [0, M], keeping the dtype (a uint16 holding a 10-bit
    sample stays uint16, at most 1023; NaN stays NaN)."""

    def _out(self, t: PixType) -> PixType:
        return t

    def scalar_types(self, t: PixType) -> list[DType]:
        return [t.dtype if t.dtype.is_float else dt.int64]

    def values(self, t: PixType, g: Geom) -> list[Any]:
        m = max_value(self.depth)
        return [float(m) if t.dtype.is_float else m]

    def apply(self, px: Pixel, p: list[Value], t: PixType) -> Pixel:
        if t.dtype.is_float:
            zero = cast(0, t.dtype)
            return [tkm.min(tkm.max(v, zero), p[0]) for v in px]
        out = []
        for v in px:
            w = cast(v, dt.int64)
            out.append(cast(tkm.min(tkm.max(w, cast(0, dt.int64)), p[0]), t.dtype))
        return out


class AddOpaqueAlpha(Op):
    """Append an opaque alpha channel: M = 2**depth - 1 on the ``depth``-bit scale, or
    1.0 with ``normalized=True`` (float pixels)."""

    def __init__(self, depth: int = 8, normalized: bool = False) -> None:
        self.depth = check_depth(depth, "fkl.AddOpaqueAlpha depth")
        self.normalized = bool(normalized)

    def key(self) -> tuple[Any, ...]:
        return ("AddOpaqueAlpha",)

    def out_type(self, t: PixType) -> PixType:
        self._no_pair(t)
        self._need_channels(t, (1, 2, 3))
        if t.dtype == dt.bool:
            raise ArgumentError(f"{self.name}: unsupported dtype bool")
        if self.normalized and not t.dtype.is_float:
            raise ArgumentError(f"{self.name}: normalized=True needs a float pixel, got "
                                f"{t.dtype.name}")
        if not t.dtype.is_float and max_value(self.depth) > _int_max(t.dtype):
            raise ArgumentError(f"{self.name}: an alpha of {max_value(self.depth)} "
                                f"({self.depth} bits) does not fit {t.dtype.name}")
        return t.with_(channels=t.channels + 1)

    def scalar_types(self, t: PixType) -> list[DType]:
        return [t.dtype if t.dtype.is_float else dt.int64]

    def values(self, t: PixType, g: Geom) -> list[Any]:
        if self.normalized:
            return [1.0]
        m = max_value(self.depth)
        return [float(m) if t.dtype.is_float else m]

    def apply(self, px: Pixel, p: list[Value], t: PixType) -> Pixel:
        return [*px, cast(p[0], t.dtype)]


def _int_max(d: DType) -> int:
    from thork_core.ir import int_range

    return int(int_range(d)[1])
