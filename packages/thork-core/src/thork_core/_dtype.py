"""Scalar data types shared by every front-end, renderer and target.

A :class:`DType` knows its C spelling, size in bytes, NumPy equivalent and its place in
the C++ usual arithmetic conversions. ``promote`` implements those conversions exactly;
the rules are documented in ``docs/dtypes.md``.
"""

from __future__ import annotations

from typing import Any

from ._errors import ArgumentError

__all__ = [
    "array_dtype", "array_shape",
    "DType", "dt", "promote", "ALL_DTYPES", "dtype_of", "from_numpy", "from_dlpack_code",
    "dlpack_code",
    "typestr", "input_typestr", "int_range",
]


class DType:
    """A scalar element type. Each dtype is a singleton, compared by identity (fast).

    ``kind`` is ``"b"`` (bool), ``"i"`` (signed), ``"u"`` (unsigned) or ``"f"`` (float);
    ``bits`` is the storage width; ``ctype`` is the name used in generated C++. Immutable
    (a plain class written as the frozen dataclass it was: creating that one imported
    ``dataclasses`` and compiled its methods in every ``import thork``, ~1.5 ms).
    """

    __match_args__ = ("name", "kind", "bits", "ctype")
    name: str
    kind: str
    bits: int
    ctype: str

    def __init__(self, name: str, kind: str, bits: int, ctype: str) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "bits", bits)
        object.__setattr__(self, "ctype", ctype)

    def __setattr__(self, name: str, value: Any) -> None:
        from dataclasses import FrozenInstanceError  # only where raised (~1 ms to import)

        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        from dataclasses import FrozenInstanceError

        raise FrozenInstanceError(f"cannot delete field {name!r}")

    @property
    def itemsize(self) -> int:
        """Size of one element in bytes."""
        return self.bits // 8 if self.bits >= 8 else 1

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        """True for signed and unsigned integers (not bool)."""
        return self.kind in "iu"

    @property
    def is_signed(self) -> bool:
        return self.kind in "if"

    @property
    def is_half(self) -> bool:
        """True for the 16-bit float storage types computed in float32."""
        return self.name in ("float16", "bfloat16")

    @property
    def numpy(self) -> Any:
        """The equivalent ``numpy.dtype`` (bfloat16 needs the ``ml_dtypes`` package)."""
        import numpy as np

        if self.name == "bfloat16":
            try:
                import ml_dtypes
            except ImportError as exc:  # pragma: no cover - depends on environment
                raise TypeError(
                    "bfloat16 host arrays need the 'ml_dtypes' package (pip install ml_dtypes)"
                ) from exc
            return np.dtype(ml_dtypes.bfloat16)
        return np.dtype(self.name)

    def __reduce__(self) -> str:
        return f"dt.{self.name}"  # unpickle to the singleton

    def __repr__(self) -> str:
        return f"tk.dt.{self.name}"

    def __str__(self) -> str:
        return self.name


class _DTypes:
    """The ``tk.dt`` namespace: one attribute per supported dtype."""

    bool = DType("bool", "b", 8, "bool")
    int8 = DType("int8", "i", 8, "signed char")
    int16 = DType("int16", "i", 16, "short")
    int32 = DType("int32", "i", 32, "int")
    int64 = DType("int64", "i", 64, "long long")
    uint8 = DType("uint8", "u", 8, "unsigned char")
    uint16 = DType("uint16", "u", 16, "unsigned short")
    uint32 = DType("uint32", "u", 32, "unsigned int")
    uint64 = DType("uint64", "u", 64, "unsigned long long")
    float16 = DType("float16", "f", 16, "thork_half")
    bfloat16 = DType("bfloat16", "f", 16, "thork_bfloat16")
    float32 = DType("float32", "f", 32, "float")
    float64 = DType("float64", "f", 64, "double")

    # Common aliases.
    half = float16
    float = float32
    double = float64

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(ALL_DTYPES)


dt = _DTypes()

ALL_DTYPES: tuple[DType, ...] = (
    dt.bool, dt.int8, dt.int16, dt.int32, dt.int64,
    dt.uint8, dt.uint16, dt.uint32, dt.uint64,
    dt.float16, dt.bfloat16, dt.float32, dt.float64,
)
_BY_NAME = {d.name: d for d in ALL_DTYPES}

#: The array-interface typestr of each dtype (``__cuda_array_interface__``,
#: ``__array_interface__``). bfloat16 has none of its own: it is exported as raw 2-byte
#: elements (``<V2``, as ml_dtypes does), which cannot be told from other 2-byte records.
_TYPESTR = {
    "bool": "|b1", "int8": "|i1", "int16": "<i2", "int32": "<i4", "int64": "<i8",
    "uint8": "|u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8", "float16": "<f2",
    "bfloat16": "<V2", "float32": "<f4", "float64": "<f8",
}


def typestr(d: DType) -> str:
    """The typestr Thork exports for ``d`` (``DeviceArray.__cuda_array_interface__``)."""
    return _TYPESTR[d.name]


def input_typestr(d: DType) -> str | None:
    """The typestr that identifies an incoming array as ``d`` without asking NumPy; None
    for bfloat16 (its ``<V2`` says nothing about the element type: the adapters decide)."""
    return None if d.name == "bfloat16" else _TYPESTR[d.name]


def int_range(d: DType) -> tuple[int, int]:
    """The values an integer (or bool) dtype holds, inclusive."""
    if d.kind == "b":
        return 0, 1
    if d.kind == "i":
        return -(2 ** (d.bits - 1)), 2 ** (d.bits - 1) - 1
    if d.kind == "u":
        return 0, 2**d.bits - 1
    raise TypeError(f"{d.name} is not an integer dtype")


def dtype_of(name_or_dtype: Any) -> DType:
    """Return the :class:`DType` for a DType, its name, or anything NumPy calls a dtype."""
    if isinstance(name_or_dtype, DType):
        return name_or_dtype
    if isinstance(name_or_dtype, str) and name_or_dtype in _BY_NAME:
        return _BY_NAME[name_or_dtype]
    return from_numpy(name_or_dtype)


_FROM_NUMPY: dict[Any, DType] = {}


def array_shape(shape: Any, who: str) -> tuple[int, ...]:
    """``shape`` (an int or a sequence of ints, each >= 0) as a tuple of ints: the shape
    argument of an allocation; ArgumentError naming ``who`` (``"DeviceArray"``) otherwise."""
    if isinstance(shape, int):
        shape = (shape,)
    try:
        out = tuple(int(s) for s in shape)
    except (TypeError, ValueError):
        raise ArgumentError(f"{who} shape: expected a tuple of ints, got {shape!r}") from None
    if any(s < 0 for s in out):
        raise ArgumentError(f"{who} shape: sizes must be >= 0, got {out}")
    return out


def array_dtype(d: Any, who: str) -> DType:
    """:func:`dtype_of` for the dtype argument of an allocation; ArgumentError naming
    ``who`` for a dtype Thork does not have."""
    try:
        return dtype_of(d)
    except (TypeError, KeyError, ValueError):
        raise ArgumentError(f"{who} dtype: unsupported dtype {d!r}") from None


def from_numpy(np_dtype: Any) -> DType:
    """Map a NumPy dtype (or dtype-like, e.g. a typestr) to a :class:`DType`.

    Memoized: this runs for every array argument of every launch. TypeError if unsupported.
    """
    try:
        return _FROM_NUMPY[np_dtype]
    except (KeyError, TypeError):
        pass
    import numpy as np

    d = np.dtype(np_dtype)
    if not d.isnative and d.byteorder != "|":
        # Kernels read memory in the machine's order: a '>f4' array would be read as
        # garbage floats. Rejected, not swapped: a copy would hide a cost and break out=.
        raise TypeError(
            f"array of dtype {d.str!r} has non-native byte order; kernels read native "
            f"{d.newbyteorder('=').name} (convert with a.astype(a.dtype.newbyteorder('='))")
    if d.name in _BY_NAME:
        result = _BY_NAME[d.name]
    elif d.name == "bfloat16":
        result = dt.bfloat16
    else:
        raise TypeError(f"unsupported dtype {d!r}; Thork supports {', '.join(_BY_NAME)}")
    try:
        _FROM_NUMPY[np_dtype] = result
    except TypeError:  # unhashable dtype-like
        pass
    return result


# DLPack type codes: kDLInt=0, kDLUInt=1, kDLFloat=2, kDLBfloat=4, kDLBool=6.
def from_dlpack_code(code: int, bits: int) -> DType:
    """Map a DLPack ``(code, bits)`` pair to a :class:`DType`."""
    table = {
        (0, 8): dt.int8, (0, 16): dt.int16, (0, 32): dt.int32, (0, 64): dt.int64,
        (1, 8): dt.uint8, (1, 16): dt.uint16, (1, 32): dt.uint32, (1, 64): dt.uint64,
        (2, 16): dt.float16, (2, 32): dt.float32, (2, 64): dt.float64,
        (4, 16): dt.bfloat16, (6, 8): dt.bool,
    }
    try:
        return table[(code, bits)]
    except KeyError:
        raise TypeError(f"unsupported DLPack dtype (code={code}, bits={bits})") from None


#: DType -> its DLPack ``(code, bits)``, filled on first use of each.
_DL_CODES: dict[DType, tuple[int, int]] = {}


def dlpack_code(d: DType) -> tuple[int, int]:
    """The DLPack ``(code, bits)`` of ``d`` (the inverse of :func:`from_dlpack_code`)."""
    got = _DL_CODES.get(d)
    if got is None:
        got = _DL_CODES[d] = (4 if d == dt.bfloat16 else {"i": 0, "u": 1, "f": 2, "b": 6}[
            d.kind], d.bits)
    return got


_INT_RANK = {8: 1, 16: 2, 32: 3, 64: 4}


def _integer_promote(a: DType) -> DType:
    # C++ integral promotion: bool, char and short become int.
    if a.kind == "b" or (a.is_int and a.bits < 32):
        return dt.int32
    return a


def promote(a: DType, b: DType) -> DType:
    """The result type of a binary arithmetic operator on ``a`` and ``b`` (C++ rules).

    float16/bfloat16 behave as CUDA's ``__half``/``__nv_bfloat16``: the wider float wins,
    float16 with bfloat16 gives float32, and any float beats any integer.
    """
    if a.is_float or b.is_float:
        if not b.is_float:
            return a
        if not a.is_float:
            return b
        if a.bits != b.bits:
            return a if a.bits > b.bits else b
        if a != b:  # float16 with bfloat16
            return dt.float32
        return a
    a, b = _integer_promote(a), _integer_promote(b)
    if a == b:
        return a
    if a.kind == b.kind:
        return a if a.bits > b.bits else b
    u, s = (a, b) if a.kind == "u" else (b, a)
    if _INT_RANK[u.bits] >= _INT_RANK[s.bits]:
        return u
    if s.bits > u.bits:
        return s
    return _BY_NAME["u" + s.name]  # pragma: no cover - unreachable with these widths


def literal_dtype(value: Any) -> DType:
    """The C++ type of a Python literal: ``int`` (or wider), ``float`` (f-suffixed), bool."""
    if isinstance(value, bool):
        return dt.bool
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return dt.int32
        if -(2**63) <= value < 2**63:
            return dt.int64
        if 0 <= value < 2**64:
            return dt.uint64
        raise OverflowError(f"integer literal {value} does not fit in 64 bits")
    if isinstance(value, float):
        return dt.float32
    raise TypeError(f"cannot use {type(value).__name__} value {value!r} in a kernel")
