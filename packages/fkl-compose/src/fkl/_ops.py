"""The operation base class and the compute (per-pixel) operations.

Every operation separates *types* from *values*. ``key()`` is the compose-time type
information that becomes part of the kernel's identity; ``scalar_types(t)`` lists the
runtime scalar parameters the op needs for a pixel of type ``t`` and ``values(t, g)`` the
numbers that fill them on each call, in the same order. ``apply`` records the op on traced
channels. Changing a value therefore never changes the generated code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from thork.tracing import Value, cast, where
from thork.tracing import math as tkm
from thork_core import ArgumentError, DType, dt, promote
from thork_core.ir import int_range

from ._pixel import Geom, Pixel, PixType, Stage, as_dtype, per_channel, value_dtype

__all__ = [
    "Op", "Add", "Sub", "Mul", "Div", "Max", "Min", "AbsDiff", "Equal", "And", "Or", "Xor",
    "ShiftLeft", "ShiftRight", "Not", "Abs", "Sqr", "Sqrt", "Ln", "Exp", "Cast",
    "SaturateCast", "Saturate", "SaturateFloat", "Discard", "AddLast", "VectorReorder",
    "VectorReorderRT", "VectorReduce", "VectorAnd", "VectorOr", "IsEven", "MxVFloat3",
    "Normalize",
]


class Op:
    """Base of every operation. ``kind`` is ``read``, ``readback``, ``compute``,
    ``write`` or ``midwrite`` (FKL's operation kinds).

    The contract an op class fulfils (``docs/plugins.md`` walks through one) — a compute
    op defines ``apply`` and, when it has runtime values, ``scalar_types``/``values``
    and a ``key`` that tells apart everything changing the generated code; ``out_type``
    when it changes the pixel type; ``version`` bumped whenever what ``apply`` records
    changes. Its identity in every kernel key is :meth:`identity` (module, qualified
    name, version) plus :meth:`key`, never the bare class name.
    """

    kind: ClassVar[str] = "compute"

    #: The op's declared version: part of its identity in every kernel key. Bump it when
    #: the code ``apply`` records changes, so kernels cached by an older release are not
    #: reused for the new one.
    version: ClassVar[int | str] = 1

    #: The class-level half of :meth:`channel_uniform`: the op applies one element-wise
    #: function to every channel alike (its values, if any, decide the rest).
    elementwise: ClassVar[bool] = False

    @property
    def name(self) -> str:
        return f"fkl.{type(self).__name__}"

    def key(self) -> tuple[Any, ...]:
        """Type-level identity (no runtime values)."""
        return (type(self).__name__,)

    @classmethod
    def identity(cls) -> str:
        """``module:QualifiedName@version``: which op this is, whoever shipped it. Two ops
        with the same class name from different modules never share a kernel."""
        return f"{cls.__module__}:{cls.__qualname__}@{cls.version}"

    def cache_key(self) -> tuple[Any, ...]:
        """What a kernel key holds for this op: :meth:`identity` and :meth:`key`."""
        return (self.identity(), self.key())

    def out_type(self, t: PixType) -> PixType:
        """The pixel type after this op; raises ArgumentError for unsupported input."""
        self._no_pair(t)
        return t

    def channel_uniform(self) -> bool:
        """Whether this op, on a pixel of C channels, is exactly C independent runs of the
        op on 1-channel pixels: one element-wise function for every channel, no
        per-channel value, the channel count kept. A chain of such ops between packed
        reads and writes may then run as a 1-channel chain over ``N * C`` elements
        (channel folding, :mod:`fkl._flat`).

        A type-level property: it may depend only on what :meth:`key` holds (the op's
        class and, for ops with values, whether there is one value or one per channel),
        never on the values themselves. Conservative by default: False unless the class
        is ``elementwise``; ops with values narrow it to a single value.

        A *wrapper* — an op that is not elementwise itself but holds another compute op
        in ``self.op`` and applies it to each pixel keeping the pixel type (StaticLoop,
        which also puts that op's key in its own) — answers for the op it wraps.
        """
        if self.elementwise:
            return True
        inner = getattr(self, "op", None)
        return isinstance(inner, Op) and inner.kind == "compute" and inner.channel_uniform()

    def table_types(self, t: PixType) -> list[DType]:
        """Dtypes of the op's value *tables*: arrays of runtime values the kernel indexes
        (per-plane values: a thread loads its plane's entries, where N scalar parameters
        would need a chain of N selects). The host fills them (:meth:`tables`) once per
        input shape; they reach the kernel as extra read-only input arrays."""
        return []

    def tables(self, t: PixType, g: Geom) -> list[tuple[DType, list[Any]]]:
        """The values of each table, ``(dtype, values)`` in :meth:`table_types` order."""
        return []

    def items(self) -> int:
        """How many per-item values (one per batch item, :class:`fkl.PerItem`) the op
        holds; 0: one value for every item. An op with per-item values picks them by
        the thread's plane, so its chain runs the 2-D kernel."""
        return 0

    def scalar_types(self, t: PixType) -> list[DType]:
        """Dtypes of the runtime scalar parameters for an input pixel of type ``t``."""
        return []

    def values(self, t: PixType, g: Geom) -> list[Any]:
        """The runtime values for those parameters (host side, per call)."""
        return []

    def apply(self, px: Any, p: list[Value], t: PixType) -> Any:  # pragma: no cover
        """Record the op on traced channels ``px`` with traced parameters ``p``."""
        raise NotImplementedError

    def apply_many(self, pixels: list[Any], p: list[Value], t: PixType) -> list[Any]:
        """``apply`` on each of several pixels (a thread of the flat kernel handles a
        group); ops with control flow override it to share one loop."""
        return [self.apply(px, p, t) for px in pixels]

    # -- readback ops override these -----------------------------------------------------
    def out_geom(self, g: Geom, t: PixType) -> Geom:
        return g

    def sample(self, src: Stage, p: list[Value]) -> Stage:  # pragma: no cover
        raise NotImplementedError

    # -- helpers -----------------------------------------------------------------------
    def _no_pair(self, t: PixType) -> None:
        if t.pair:
            raise ArgumentError(
                f"{self.name}: the chain carries a pair of pixels from a dual-source read; "
                "combine it first with a two-input op such as fkl.Add() (no argument)")

    def _need_int(self, t: PixType) -> None:
        if not t.dtype.is_int:
            raise ArgumentError(
                f"{self.name}: unsupported dtype {t.dtype.name}; this op needs an integer "
                "pixel (int8..int64, uint8..uint64)")

    def _need_channels(self, t: PixType, allowed: Sequence[int]) -> None:
        if t.channels not in allowed:
            want = " or ".join(str(c) for c in allowed)
            raise ArgumentError(
                f"{self.name}: needs a pixel with {want} channel(s), got {t.channels}")

    def __repr__(self) -> str:
        return f"{self.name}()"


def _float_math(t: DType) -> DType:
    """The dtype float math runs in: float64 stays, everything else is float32."""
    return dt.float64 if t == dt.float64 else dt.float32


def int_div(a: Value, b: Value) -> Value:
    """C++ truncating integer division; a zero divisor gives 0 instead of a trap."""
    zero = b == 0
    safe = where(zero, 1, b)
    return where(zero, 0, a // safe)


# -- binary ops: a runtime value (scalar or per channel), or the pair of a dual read -------
class _Binary(Op):
    """``x op value`` per channel; without a value, ``a op b`` on a dual-source pair."""

    _arith: ClassVar[bool] = True  # arithmetic follows C++ promotion; bitwise keeps the type
    elementwise = True

    def __init__(self, value: Any = None) -> None:
        from ._batch import PerItem

        self.value = value
        #: One value list per batch item (``PerItem``), else None.
        self._items: list[list[Any]] | None = None
        if isinstance(value, PerItem):
            self._items = [self._values(v) for v in value.items]
            if len({len(v) for v in self._items} - {1}) > 1:
                raise ArgumentError(f"{self.name} PerItem: every item needs as many values "
                                    f"(1 or one per channel), got {value!r}")
            self._flat = [v for item in self._items for v in item]
        elif value is not None:
            self._flat = self._values(value)
        else:
            self._flat = []

    def _values(self, value: Any) -> list[Any]:
        try:
            flat = per_channel(value, 1, self.name) if _is_scalar(value) else list(value)
        except TypeError:
            raise ArgumentError(
                f"{self.name}: expected a number or one number per channel, "
                f"got {value!r}") from None
        if not 1 <= len(flat) <= 4:
            raise ArgumentError(
                f"{self.name}: expected 1 to 4 values (one per channel), got {len(flat)}")
        bad = [v for v in flat if not _is_scalar(v)]
        if bad:  # a string or a bool is not silently read as a number
            raise ArgumentError(
                f"{self.name}: expected numbers (int or float), got {bad[0]!r} in {value!r}")
        return flat

    def _per_channel(self) -> bool:
        return any(len(v) > 1 for v in self._items or [self._flat])

    def key(self) -> tuple[Any, ...]:
        ints = all(isinstance(v, int) and not isinstance(v, bool) for v in self._flat)
        key = (type(self).__name__, self.value is None, ints, self._per_channel())
        return key if self._items is None else (*key, "items", len(self._items))

    def items(self) -> int:
        return 0 if self._items is None else len(self._items)

    def channel_uniform(self) -> bool:
        # One value for every channel, or none (``a op b`` channel by channel on a pair);
        # a per-channel sequence is not, even when its values happen to be equal.
        return self.elementwise and self._items is None and len(self._flat) <= 1

    def _ptype(self, t: PixType) -> DType:
        return value_dtype(t.dtype, self._flat)

    def _result(self, a: DType, b: DType) -> DType:
        return promote(a, b) if self._arith else a

    def _check(self, a: DType, b: DType) -> None:
        """Reject dtype combinations the op does not define."""

    #: The op folds over a tuple of more than two sources (Equal does not: a fold of
    #: ``==`` would compare a bool with a pixel).
    _folds: ClassVar[bool] = True

    def out_type(self, t: PixType) -> PixType:
        if self.value is None:
            if not t.pair:
                raise ArgumentError(
                    f"{self.name}() without a value combines the pixels of a multi-source "
                    "read (fkl.DualRead, fkl.TupleRead); give a value, e.g. "
                    f"{self.name}(2.0), for a single input")
            if t.sources > 2 and not self._folds:
                raise ArgumentError(
                    f"{self.name}() combines exactly two sources, got a tuple of "
                    f"{t.sources} (fkl.TupleRead({t.sources})); use fkl.DualRead()")
            return PixType(self._fold_types(t)[-1], t.channels)
        self._no_pair(t)
        for item in self._items or [self._flat]:
            if len(item) > 1:
                per_channel(item, t.channels, self.name)
        pt = self._ptype(t)
        self._check(t.dtype, pt)
        return PixType(self._result(t.dtype, pt), t.channels)

    def _fold_types(self, t: PixType) -> list[DType]:
        """The result dtype of each step of the left fold over a tuple of ``t.sources``
        pixels: step k combines the running result with source k + 1."""
        steps: list[DType] = []
        acc = t.dtype
        for _ in range(t.sources - 1):
            self._check(acc, t.dtype)
            acc = self._result(acc, t.dtype)
            steps.append(acc)
        return steps

    def scalar_types(self, t: PixType) -> list[DType]:
        if self.value is None or self._items is not None:
            return []
        return [self._ptype(t)] * t.channels

    def values(self, t: PixType, g: Geom) -> list[Any]:
        if self.value is None or self._items is not None:
            return []
        return per_channel(self._flat, t.channels, self.name)

    def table_types(self, t: PixType) -> list[DType]:
        return [] if self._items is None else [self._ptype(t)]

    def tables(self, t: PixType, g: Geom) -> list[tuple[DType, list[Any]]]:
        if self._items is None:
            return []
        return [(self._ptype(t), [v for item in self._items
                                  for v in per_channel(item, t.channels, self.name)])]

    def apply(self, px: Any, p: list[Value], t: PixType) -> Pixel:
        c_n = t.channels
        if self.value is None:  # left fold over the tuple's pixels, channel by channel
            acc = list(px[0])
            for src, rt in zip(px[1:], self._fold_types(t), strict=True):
                acc = [cast(self.fn(acc[c], src[c]), rt) for c in range(c_n)]
            return acc
        elif self._items is not None:  # this plane's values, from the table
            from ._batch import plane

            base = plane() * c_n
            table: Any = p[0]  # a pointer parameter (the op's value table)
            out = [self.fn(px[c], table[base + c]) for c in range(c_n)]
        else:
            out = [self.fn(px[c], p[c]) for c in range(c_n)]
        rt = self.out_type(t).dtype
        return [cast(v, rt) for v in out]

    def fn(self, a: Value, b: Value) -> Value:  # pragma: no cover
        raise NotImplementedError


def _is_scalar(v: Any) -> bool:
    import numpy as np

    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


class Add(_Binary):
    """``x + value`` (C++ promotion: uint8 + int → int32)."""

    def fn(self, a: Value, b: Value) -> Value:
        return a + b


class Sub(_Binary):
    """``x - value``."""

    def fn(self, a: Value, b: Value) -> Value:
        return a - b


class Mul(_Binary):
    """``x * value``."""

    def fn(self, a: Value, b: Value) -> Value:
        return a * b


class Div(_Binary):
    """``x / value``; integers divide as C++ (truncating), and a zero divisor gives 0."""

    def fn(self, a: Value, b: Value) -> Value:
        rt = promote(a.dtype, b.dtype)
        if rt.is_float:
            return cast(a, rt) / cast(b, rt)
        return int_div(cast(a, rt), cast(b, rt))


class Max(_Binary):
    """``maximum(x, value)``."""

    def fn(self, a: Value, b: Value) -> Value:
        return tkm.max(a, b)


class Min(_Binary):
    """``minimum(x, value)``."""

    def fn(self, a: Value, b: Value) -> Value:
        return tkm.min(a, b)


class AbsDiff(_Binary):
    """``|x - value|`` computed in the promoted type (uint8 → int32)."""

    def fn(self, a: Value, b: Value) -> Value:
        return tkm.abs(a - b)


class Equal(_Binary):
    """``x == value`` per channel; the result is bool."""

    _folds = False

    def _result(self, a: DType, b: DType) -> DType:
        return dt.bool

    def fn(self, a: Value, b: Value) -> Value:
        return a == b


class _Bitwise(_Binary):
    _arith = False

    def _check(self, a: DType, b: DType) -> None:
        if not a.is_int or not b.is_int:
            raise ArgumentError(
                f"{self.name}: unsupported dtype {a.name if not a.is_int else b.name}; "
                "bitwise ops need integer pixels and integer values")


class And(_Bitwise):
    """``x & value`` (result keeps the pixel's integer type)."""

    def fn(self, a: Value, b: Value) -> Value:
        return a & b


class Or(_Bitwise):
    """``x | value``."""

    def fn(self, a: Value, b: Value) -> Value:
        return a | b


class Xor(_Bitwise):
    """``x ^ value``."""

    def fn(self, a: Value, b: Value) -> Value:
        return a ^ b


class ShiftLeft(_Bitwise):
    """``x << n`` (result keeps the pixel's integer type)."""

    def fn(self, a: Value, b: Value) -> Value:
        return a << b


class ShiftRight(_Bitwise):
    """``x >> n`` (arithmetic shift for signed types, as C++)."""

    def fn(self, a: Value, b: Value) -> Value:
        return a >> b


# -- unary ops ----------------------------------------------------------------------------
class Not(Op):
    """Bitwise ``~x`` on integers (result keeps the pixel's type)."""

    elementwise = True

    def out_type(self, t: PixType) -> PixType:
        self._no_pair(t)
        self._need_int(t)
        return t

    def apply(self, px: Pixel, p: list[Value], t: PixType) -> Pixel:
        return [cast(~v, t.dtype) for v in px]


class Abs(Op):
    """``|x|``: floats keep their type, integers follow C++ promotion."""

    elementwise = True

    def out_type(self, t: PixType) -> PixType:
        self._no_pair(t)
        if t.dtype == dt.bool:
            raise ArgumentError(f"{self.name}: unsupported dtype bool")
        return t if t.dtype.is_float else t.with_(promote(t.dtype, t.dtype))

    def apply(self, px: Pixel, p: list[Value], t: PixType) -> Pixel:
        return [tkm.abs(v) for v in px]


class Sqr(Op):
    """``x * x`` (C++ promotion)."""

    elementwise = True

    def out_type(self, t: PixType) -> PixType:
        self._no_pair(t)
        return t.with_(promote(t.dtype, t.dtype))

    def apply(self, px: Pixel, p: list[Value], t: PixType) -> Pixel:
        return [v * v for v in px]


class _FloatUnary(Op):
    func: ClassVar[str] = ""
    elementwise = True

    def out_type(self, t: PixType) -> PixType:
        self._no_pair(t)
        return t.with_(t.dtype if t.dtype.is_half else _float_math(t.dtype))

    def apply(self, px: Pixel, p: list[Value], t: PixType) -> Pixel:
        f = getattr(tkm, self.func)
        return [f(v) for v in px]


class Sqrt(_FloatUnary):
    """``sqrt(x)`` in float32 (float64 stays float64)."""

    func = "sqrt"


class Ln(_FloatUnary):
    """Natural logarithm in float32 (float64 stays float64)."""

    func = "log"


class Exp(_FloatUnary):
    """``e**x`` in float32 (float64 stays float64)."""

    func = "exp"


# -- conversions --------------------------------------------------------------------------
class Cast(Op):
    """C++ ``static_cast`` to ``dtype`` (float → int truncates toward zero)."""

    elementwise = True

    def __init__(self, dtype: Any) -> None:
        self.dtype = as_dtype(dtype, "fkl.Cast dtype")

    def key(self) -> tuple[Any, ...]:
        return ("Cast", self.dtype.name)

    def out_type(self, t: PixType) -> PixType:
        self._no_pair(t)
        return t.with_(self.dtype)

    def apply(self, px: Pixel, p: list[Value], t: PixType) -> Pixel:
        return [cast(v, self.dtype) for v in px]



def saturate_value(v: Value, to: DType) -> Value:
    """``v`` converted to ``to`` with saturation (float → int rounds half to even, NaN → 0)."""
    src = v.dtype
    if to.is_float:
        return cast(v, to)
    lo, hi = int_range(to)
    if src.is_float:
        # Clamp in a float type that holds the bounds exactly enough: float32 for targets
        # up to 16 bits, float64 beyond (the largest double below 2**63 for 64-bit ints).
        ft = dt.float32 if to.bits <= 16 and src != dt.float64 else dt.float64
        f = cast(v, ft)
        r = tkm.rint(f)
        r = where(tkm.isnan(r), 0.0, r)
        if to.bits == 64:
            return _saturate_to_64(r, to, lo, hi)
        r = tkm.min(tkm.max(r, float(lo)), float(hi))
        return cast(r, to)
    slo, shi = int_range(src)
    if slo < lo:
        v = where(v < lo, lo, v)
    if shi > hi:
        v = where(v > hi, hi, v)
    return cast(v, to)


def _saturate_to_64(r: Value, to: DType, lo: int, hi: int) -> Value:
    """A float64 integer value ``r`` saturated to a 64-bit integer, exact at the bounds:
    the top (2**63, or 2**64 unsigned) is a power of two, so values at or above it become
    ``hi`` and those below convert exactly (the largest double below 2**63 is
    2**63 - 1024; below 2**64, 2**64 - 2048)."""
    top = float(hi + 1)
    below = top - (1024.0 if to.kind == "i" else 2048.0)
    r = tkm.max(r, float(lo))  # -2**63 and 0 are exact doubles
    return where(r >= top, cast(hi, to), cast(tkm.min(r, below), to))


class SaturateCast(Op):
    """Convert to ``dtype`` with saturation: float → int rounds half to even, NaN → 0, then
    clamps to the target range; int → int clamps."""

    elementwise = True

    def __init__(self, dtype: Any) -> None:
        self.dtype = as_dtype(dtype, "fkl.SaturateCast dtype")

    def key(self) -> tuple[Any, ...]:
        return ("SaturateCast", self.dtype.name)

    def out_type(self, t: PixType) -> PixType:
        self._no_pair(t)
        return t.with_(self.dtype)

    def apply(self, px: Pixel, p: list[Value], t: PixType) -> Pixel:
        return [saturate_value(v, self.dtype) for v in px]


class Saturate(Op):
    """``np.clip(x, lo, hi)`` with runtime bounds (scalar or per channel)."""

    elementwise = True

    def __init__(self, lo: Any, hi: Any) -> None:
        self.lo, self.hi = lo, hi
        self._flat = [*(_flatten(lo)), *(_flatten(hi))]

    def key(self) -> tuple[Any, ...]:
        ints = all(isinstance(v, int) for v in self._flat)
        return ("Saturate", ints, self.channel_uniform())

    def channel_uniform(self) -> bool:
        return _single(self.lo) and _single(self.hi)

    def _ptype(self, t: PixType) -> DType:
        return value_dtype(t.dtype, self._flat)

    def out_type(self, t: PixType) -> PixType:
        self._no_pair(t)
        return t.with_(promote(t.dtype, self._ptype(t)))

    def scalar_types(self, t: PixType) -> list[DType]:
        return [self._ptype(t)] * (2 * t.channels)

    def values(self, t: PixType, g: Geom) -> list[Any]:
        return per_channel(self.lo, t.channels, "fkl.Saturate lo") + per_channel(
            self.hi, t.channels, "fkl.Saturate hi")

    def apply(self, px: Pixel, p: list[Value], t: PixType) -> Pixel:
        c = t.channels
        return [tkm.min(tkm.max(px[i], p[i]), p[c + i]) for i in range(c)]


def _flatten(v: Any) -> list[Any]:
    return [v] if _is_scalar(v) else list(v)


def _single(v: Any) -> bool:
    """Whether ``v`` is one value for every channel (a number, or a sequence of one)."""
    try:
        return len(per_channel(v, 1, "")) == 1
    except ArgumentError:
        return False


class SaturateFloat(Op):
    """Clip a float pixel to [0, 1]; NaN becomes 0."""

    elementwise = True

    def out_type(self, t: PixType) -> PixType:
        self._no_pair(t)
        if not t.dtype.is_float:
            raise ArgumentError(
                f"{self.name}: unsupported dtype {t.dtype.name}; needs a float pixel")
        return t

    def apply(self, px: Pixel, p: list[Value], t: PixType) -> Pixel:
        out = []
        for v in px:
            c = tkm.min(tkm.max(v, 0.0), 1.0)
            out.append(where(tkm.isnan(v), 0.0, c))
        return [cast(v, t.dtype) for v in out]


# -- vector ops ---------------------------------------------------------------------------
class Discard(Op):
    """Keep the first ``n`` channels."""

    def __init__(self, n: int) -> None:
        if not isinstance(n, int) or not 1 <= n <= 4:
            raise ArgumentError(f"fkl.Discard n: expected an int in 1..4, got {n!r}")
        self.n = n

    def key(self) -> tuple[Any, ...]:
        return ("Discard", self.n)

    def out_type(self, t: PixType) -> PixType:
        self._no_pair(t)
        if self.n > t.channels:
            raise ArgumentError(
                f"fkl.Discard({self.n}): the pixel has only {t.channels} channel(s)")
        return t.with_(channels=self.n)

    def apply(self, px: Pixel, p: list[Value], t: PixType) -> Pixel:
        return px[: self.n]


class AddLast(Op):
    """Append one channel holding ``value`` (a runtime parameter)."""

    def __init__(self, value: Any) -> None:
        if not _is_scalar(value):
            raise ArgumentError(f"fkl.AddLast value: expected a number, got {value!r}")
        self.value = value

    def key(self) -> tuple[Any, ...]:
        return ("AddLast",)

    def out_type(self, t: PixType) -> PixType:
        self._no_pair(t)
        if t.channels >= 4:
            raise ArgumentError("fkl.AddLast: the pixel already has 4 channels (the maximum)")
        return t.with_(channels=t.channels + 1)

    def scalar_types(self, t: PixType) -> list[DType]:
        return [t.dtype]

    def values(self, t: PixType, g: Geom) -> list[Any]:
        return [self.value]

    def apply(self, px: Pixel, p: list[Value], t: PixType) -> Pixel:
        return [*px, p[0]]


def _check_perm(perm: Any, what: str) -> tuple[int, ...]:
    try:
        out = tuple(int(i) for i in perm)
    except (TypeError, ValueError):
        raise ArgumentError(f"{what}: expected a sequence of channel indices, got {perm!r}") \
            from None
    if not 1 <= len(out) <= 4:
        raise ArgumentError(f"{what}: expected 1 to 4 indices, got {len(out)}")
    return out


class VectorReorder(Op):
    """``out[c] = x[perm[c]]`` with ``perm`` fixed at compose time (part of the type)."""

    def __init__(self, perm: Sequence[int]) -> None:
        self.perm = _check_perm(perm, "fkl.VectorReorder perm")

    def key(self) -> tuple[Any, ...]:
        return ("VectorReorder", self.perm)

    def out_type(self, t: PixType) -> PixType:
        self._no_pair(t)
        bad = [i for i in self.perm if not 0 <= i < t.channels]
        if bad:
            raise ArgumentError(
                f"fkl.VectorReorder perm: index {bad[0]} is outside the pixel's "
                f"{t.channels} channel(s)")
        return t.with_(channels=len(self.perm))

    def apply(self, px: Pixel, p: list[Value], t: PixType) -> Pixel:
        return [px[i] for i in self.perm]


class VectorReorderRT(Op):
    """``out[c] = x[perm[c]]`` with ``perm`` a runtime parameter: changing it does not
    recompile. The output has as many channels as the input."""

    def __init__(self, perm: Sequence[int]) -> None:
        self.perm = _check_perm(perm, "fkl.VectorReorderRT perm")

    def key(self) -> tuple[Any, ...]:
        return ("VectorReorderRT",)

    def out_type(self, t: PixType) -> PixType:
        self._no_pair(t)
        if len(self.perm) != t.channels:
            raise ArgumentError(
                f"fkl.VectorReorderRT perm: got {len(self.perm)} indices for a pixel with "
                f"{t.channels} channel(s)")
        return t

    def scalar_types(self, t: PixType) -> list[DType]:
        return [dt.int32] * t.channels

    def values(self, t: PixType, g: Geom) -> list[Any]:
        bad = [i for i in self.perm if not 0 <= i < t.channels]
        if bad:
            raise ArgumentError(
                f"fkl.VectorReorderRT perm: index {bad[0]} is outside the pixel's "
                f"{t.channels} channel(s)")
        return list(self.perm)

    def apply(self, px: Pixel, p: list[Value], t: PixType) -> Pixel:
        out = []
        for c in range(t.channels):
            v = px[t.channels - 1]
            for i in range(t.channels - 2, -1, -1):
                v = where(p[c] == i, px[i], v)
            out.append(v)
        return out


class VectorReduce(Op):
    """Reduce the channels to one: ``op`` is ``sum``, ``prod``, ``min``, ``max`` (sum and
    prod follow C++ promotion), ``and`` or ``or`` (each channel true when non-zero; one
    bool channel out)."""

    _OPS = ("sum", "prod", "min", "max", "and", "or")

    def __init__(self, op: str = "sum") -> None:
        if op not in self._OPS:
            raise ArgumentError(f"fkl.VectorReduce op: expected one of {self._OPS}, got {op!r}")
        self.op = op

    def key(self) -> tuple[Any, ...]:
        return ("VectorReduce", self.op)

    def out_type(self, t: PixType) -> PixType:
        self._no_pair(t)
        d = t.dtype
        if self.op in ("and", "or"):
            return PixType(dt.bool, 1)
        if self.op in ("sum", "prod") and t.channels > 1:
            d = promote(d, d)
        return PixType(d, 1)

    def apply(self, px: Pixel, p: list[Value], t: PixType) -> Pixel:
        if self.op in ("and", "or"):
            # C++ bool(x): non-zero (and NaN) is true; a bool channel is itself.
            truth = [v if t.dtype == dt.bool else v != 0 for v in px]
            acc = truth[0]
            for v in truth[1:]:
                acc = (acc & v) if self.op == "and" else (acc | v)
            return [cast(acc, dt.bool)]
        acc = px[0]
        for v in px[1:]:
            if self.op == "sum":
                acc = acc + v
            elif self.op == "prod":
                acc = acc * v
            elif self.op == "min":
                acc = tkm.min(acc, v)
            else:
                acc = tkm.max(acc, v)
        return [acc]


class VectorAnd(VectorReduce):
    """FKL's ``VectorAnd``: true when every channel is non-zero; one bool channel."""

    def __init__(self) -> None:
        super().__init__("and")


class VectorOr(VectorReduce):
    """True when any channel is non-zero; one bool channel."""

    def __init__(self) -> None:
        super().__init__("or")


class IsEven(Op):
    """FKL's ``IsEven``: ``(x & 1) == 0`` per channel, bool out; integer pixels only."""

    elementwise = True

    def key(self) -> tuple[Any, ...]:
        return ("IsEven",)

    def out_type(self, t: PixType) -> PixType:
        self._no_pair(t)
        if t.dtype.is_float or t.dtype == dt.bool:
            raise ArgumentError(f"fkl.IsEven: expected an integer pixel, got {t}; "
                                "add a fkl.Cast to an integer dtype first")
        return t.with_(dt.bool)

    def apply(self, px: Pixel, p: list[Value], t: PixType) -> Pixel:
        return [cast((v & 1) == 0, dt.bool) for v in px]


class MxVFloat3(Op):
    """``M @ pixel`` for a 3x3 matrix ``M`` (runtime values); output float32 x 3."""

    def __init__(self, matrix: Any) -> None:
        import numpy as np

        m = np.asarray(matrix, dtype=np.float64)
        if m.shape != (3, 3):
            raise ArgumentError(f"fkl.MxVFloat3 matrix: expected shape (3, 3), got {m.shape}")
        self.matrix = m

    def out_type(self, t: PixType) -> PixType:
        self._no_pair(t)
        self._need_channels(t, (3,))
        return PixType(dt.float32, 3)

    def scalar_types(self, t: PixType) -> list[DType]:
        return [dt.float32] * 9

    def values(self, t: PixType, g: Geom) -> list[Any]:
        return [float(v) for v in self.matrix.reshape(-1)]

    def apply(self, px: Pixel, p: list[Value], t: PixType) -> Pixel:
        f = [cast(v, dt.float32) for v in px]
        return [f[0] * p[3 * r] + f[1] * p[3 * r + 1] + f[2] * p[3 * r + 2] for r in range(3)]


class Normalize(Op):
    """``(x - mean) / std`` per channel, in float32 (float64 stays): a convenience for
    ``Sub(mean), Div(std)`` with one parameter slot each."""

    elementwise = True

    def __init__(self, mean: Any, std: Any) -> None:
        self.mean, self.std = mean, std

    def key(self) -> tuple[Any, ...]:
        return ("Normalize", self.channel_uniform())

    def channel_uniform(self) -> bool:
        return _single(self.mean) and _single(self.std)

    def out_type(self, t: PixType) -> PixType:
        self._no_pair(t)
        per_channel(self.mean, t.channels, "fkl.Normalize mean")
        per_channel(self.std, t.channels, "fkl.Normalize std")
        return t.with_(_float_math(t.dtype))

    def scalar_types(self, t: PixType) -> list[DType]:
        return [_float_math(t.dtype)] * (2 * t.channels)

    def values(self, t: PixType, g: Geom) -> list[Any]:
        return [float(v) for v in per_channel(self.mean, t.channels, "fkl.Normalize mean")] + [
            float(v) for v in per_channel(self.std, t.channels, "fkl.Normalize std")]

    def apply(self, px: Pixel, p: list[Value], t: PixType) -> Pixel:
        ft = _float_math(t.dtype)
        c = t.channels
        return [(cast(px[i], ft) - p[i]) / p[c + i] for i in range(c)]
