"""The three ops. Each follows fkl's Op contract (``docs/plugins.md``, "fkl op plugins"):
``key`` holds what changes the generated code, ``scalar_types``/``values`` the runtime
parameters in one order, ``out_type`` the pixel type after the op, ``apply`` records the
op on traced channels; ``version`` is bumped whenever ``apply`` records other code.

Only public API: ``fkl.Op``, ``thork.tracing`` and ``thork_core``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import fkl
from thork.tracing import Value, cast, where
from thork.tracing import math as tkm
from thork_core import ArgumentError, DType, dt, dtype_of

__all__ = ["Clamp", "Gamma", "LUT"]


def _single(op: fkl.Op, t: Any) -> None:
    """Reject a dual-source pair: these ops take one pixel."""
    if t.pair:
        raise ArgumentError(f"{op.name}: takes one pixel, got the pair of a dual read; "
                            "combine the pair first (e.g. fkl.Add())")


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            import numpy as np

            if isinstance(value, np.generic) and not isinstance(value, np.bool_):
                return float(value)
        except ImportError:  # pragma: no cover
            pass
        raise ArgumentError(f"{what}: expected a number, got {value!r}")
    return float(value)


class Gamma(fkl.Op):
    """Gamma correction: ``max_value * (x / max_value) ** gamma`` per channel, in float32
    (float64 pixels stay float64). ``max_value`` is the value of full intensity (255 for
    8-bit images, 1.0 for normalized ones); both are runtime values."""

    elementwise = True
    version = 1

    def __init__(self, gamma: float, max_value: float = 1.0) -> None:
        self.gamma = _number(gamma, "fkl.Gamma gamma")
        self.max_value = _number(max_value, "fkl.Gamma max_value")
        if not self.max_value > 0:
            raise ArgumentError(f"fkl.Gamma max_value: expected a positive number, got "
                                f"{max_value!r}")

    @staticmethod
    def _math(t: Any) -> DType:
        return dt.float64 if t.dtype == dt.float64 else dt.float32

    def out_type(self, t: Any) -> Any:
        _single(self, t)
        return t.with_(self._math(t))

    def scalar_types(self, t: Any) -> list[DType]:
        return [self._math(t)] * 2

    def values(self, t: Any, g: Any) -> list[Any]:
        return [self.gamma, self.max_value]

    def apply(self, px: list[Value], p: list[Value], t: Any) -> list[Value]:
        gamma, top = p
        f = self._math(t)
        return [top * tkm.pow(cast(v, f) / top, gamma) for v in px]

    def __repr__(self) -> str:
        return f"fkl.Gamma({self.gamma}, max_value={self.max_value})"


class LUT(fkl.Op):
    """A lookup table, as OpenCV's ``cv2.LUT``: ``table[x]`` for integer pixels, with
    ``x`` clamped to ``[0, len(table) - 1]``. ``table`` has 2 to 256 entries (a runtime
    value: a new table of the same length and dtype does not recompile); the output dtype
    is ``dtype``, else the table's (a NumPy array's dtype; float32 for Python floats,
    int32 for Python ints).

    Kernels cannot index runtime scalars, so the lookup is a balanced tree of selects:
    ``len(table) - 1`` selects per channel, branch-free on the GPU. Compile time grows
    with the table's length: 64 entries compile in about a second, 256 take tens of
    seconds with g++ on the CPU target (once; the disk cache keeps the kernel).
    """

    elementwise = True
    version = 1

    def __init__(self, table: Sequence[Any], dtype: Any = None) -> None:
        try:
            values = list(table)
        except TypeError:
            raise ArgumentError(f"fkl.LUT table: expected a sequence of 2 to 256 numbers, "
                                f"got {table!r}") from None
        if not 2 <= len(values) <= 256:
            raise ArgumentError(f"fkl.LUT table: expected 2 to 256 entries, got "
                                f"{len(values)}")
        if dtype is None:
            dtype = getattr(table, "dtype", None)
        if dtype is None:
            ints = all(isinstance(v, int) and not isinstance(v, bool) for v in values)
            dtype = dt.int32 if ints else dt.float32
        try:
            self.dtype = dtype_of(dtype)
        except (TypeError, KeyError, ValueError):
            raise ArgumentError(f"fkl.LUT dtype: expected a dtype such as 'uint8', got "
                                f"{dtype!r}") from None
        self.table = [v.item() if hasattr(v, "item") else v for v in values]

    def key(self) -> tuple[Any, ...]:
        return ("LUT", len(self.table), self.dtype.name)

    def out_type(self, t: Any) -> Any:
        _single(self, t)
        if not t.dtype.is_int:
            raise ArgumentError(f"fkl.LUT: needs integer pixels (indices into the table), "
                                f"got {t.dtype.name}")
        return t.with_(self.dtype)

    def scalar_types(self, t: Any) -> list[DType]:
        return [self.dtype] * len(self.table)

    def values(self, t: Any, g: Any) -> list[Any]:
        return self.table

    def apply(self, px: list[Value], p: list[Value], t: Any) -> list[Value]:
        last = len(p) - 1
        return [_pick(tkm.min(tkm.max(v, 0), last), p, 0, len(p)) for v in px]

    def __repr__(self) -> str:
        return f"fkl.LUT(<{len(self.table)} x {self.dtype.name}>)"


def _pick(i: Value, table: list[Value], lo: int, n: int) -> Value:
    """``table[i]`` for ``lo <= i < lo + n``: halve the range per select."""
    if n == 1:
        return table[lo]
    half = n // 2
    return where(i < lo + half, _pick(i, table, lo, half), _pick(i, table, lo + half, n - half))


class Clamp(fkl.Op):
    """``min(max(x, lo), hi)`` keeping the pixel's dtype (``fkl.Saturate`` promotes to
    the bounds' type instead). Bounds are runtime values, one for every channel; integer
    pixels need integer bounds."""

    elementwise = True
    version = 1

    def __init__(self, lo: Any, hi: Any) -> None:
        self.lo, self.hi = _number(lo, "fkl.Clamp lo"), _number(hi, "fkl.Clamp hi")
        if self.lo > self.hi:
            raise ArgumentError(f"fkl.Clamp: lo ({lo!r}) is above hi ({hi!r})")
        self._ints = all(float(v).is_integer() for v in (self.lo, self.hi))

    def key(self) -> tuple[Any, ...]:
        return ("Clamp",)

    def out_type(self, t: Any) -> Any:
        _single(self, t)
        if t.dtype.is_int and not self._ints:
            raise ArgumentError(f"fkl.Clamp: integer pixels ({t.dtype.name}) need integer "
                                f"bounds, got {self.lo}, {self.hi}")
        return t

    def scalar_types(self, t: Any) -> list[DType]:
        return [t.dtype] * 2

    def values(self, t: Any, g: Any) -> list[Any]:
        if t.dtype.is_int:
            info = _int_range(t.dtype)
            lo, hi = (min(max(int(v), info[0]), info[1]) for v in (self.lo, self.hi))
            return [lo, hi]
        return [self.lo, self.hi]

    def apply(self, px: list[Value], p: list[Value], t: Any) -> list[Value]:
        lo, hi = p
        return [tkm.min(tkm.max(v, lo), hi) for v in px]

    def __repr__(self) -> str:
        return f"fkl.Clamp({self.lo}, {self.hi})"


def _int_range(d: DType) -> tuple[int, int]:
    bits = d.bits
    if d.kind == "u":
        return 0, 2**bits - 1
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
