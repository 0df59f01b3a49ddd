"""Annotations that declare a kernel's parameters.

``tk.DevicePointer[tk.dt.float32]`` is an array argument; ``tk.Uint[tk.BlockIdx]`` and
``tk.Uint3[tk.ThreadIdx]`` are the CUDA built-ins (not passed at launch; ``tk.Int[...]``
and ``tk.Int3[...]`` are their signed int32 views); a dtype such as
``tk.dt.int32`` (or Python ``int``/``float``/``bool``) is a scalar argument.
"""

from __future__ import annotations

from typing import Any, ClassVar

from thork_core import DType, TraceError, dt, dtype_of

__all__ = [
    "DevicePointer", "Uint", "Uint3", "Int", "Int3", "BlockIdx", "ThreadIdx", "BlockDim",
    "GridDim", "PointerSpec", "BuiltinSpec", "ScalarSpec", "StructSpec", "ConstexprSpec",
    "Constexpr", "spec_of",
]


_set = object.__setattr__


class _Value:
    """An immutable value compared and hashed by its fields (the annotated names of the
    class, bases first): what these specs were as frozen dataclasses, written out
    (creating the dataclasses cost ``import thork`` ~2 ms)."""

    _fields: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = tuple(n for n in cls.__dict__.get("__annotations__", {}) if n not in cls._fields)
        cls._fields = cls._fields + own

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, n) for n in self._fields)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._fields)
        return f"{type(self).__qualname__}({inner})"

    def __setattr__(self, name: str, value: Any) -> None:
        from dataclasses import FrozenInstanceError  # ~1 ms to import: only where raised

        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        from dataclasses import FrozenInstanceError

        raise FrozenInstanceError(f"cannot delete field {name!r}")


class Builtin(_Value):
    """One of the four CUDA built-in index/dimension registers."""

    cuda_name: str

    def __init__(self, cuda_name: str) -> None:
        _set(self, "cuda_name", cuda_name)

    def __repr__(self) -> str:
        return f"tk.{self.cuda_name[0].upper()}{self.cuda_name[1:]}"


BlockIdx = Builtin("blockIdx")
ThreadIdx = Builtin("threadIdx")
BlockDim = Builtin("blockDim")
GridDim = Builtin("gridDim")


class PointerSpec(_Value):
    """An array parameter of element type ``dtype``; ``ndim`` None accepts any rank.
    ``optional`` (``tk.DevicePointer[...] | None``) also accepts ``None`` at launch."""

    dtype: DType
    ndim: int | None = None
    optional: bool = False

    def __init__(self, dtype: DType, ndim: int | None = None, optional: bool = False) -> None:
        _set(self, "dtype", dtype)
        _set(self, "ndim", ndim)
        _set(self, "optional", optional)

    def __or__(self, other: Any) -> PointerSpec:
        if other is not None:
            raise TraceError(f"tk.DevicePointer[...] | {other!r}: only '| None' (an optional "
                             "array) is supported")
        return PointerSpec(self.dtype, self.ndim, True)

    __ror__ = __or__


class BuiltinSpec(_Value):
    """A built-in register: ``vector`` gives .x/.y/.z, else the .x component; ``signed``
    gives int32 values (``tk.Int``/``tk.Int3``) instead of CUDA's uint32."""

    builtin: Builtin
    vector: bool
    signed: bool = False

    def __init__(self, builtin: Builtin, vector: bool, signed: bool = False) -> None:
        _set(self, "builtin", builtin)
        _set(self, "vector", vector)
        _set(self, "signed", signed)


class ScalarSpec(_Value):
    dtype: DType

    def __init__(self, dtype: DType) -> None:
        _set(self, "dtype", dtype)


class StructSpec(_Value):
    """A ``@tk.struct`` passed by value: one scalar kernel argument per field."""

    cls: Any

    def __init__(self, cls: Any) -> None:
        _set(self, "cls", cls)


class ConstexprSpec(_Value):
    """A compile-time constant parameter: its Python value is given at launch, used as a
    plain Python value while tracing (so it folds, sizes shared arrays, unrolls loops)
    and is part of the kernel's specialization key. ``kind`` is the accepted Python type
    (None for any hashable value)."""

    kind: Any = None

    def __init__(self, kind: Any = None) -> None:
        _set(self, "kind", kind)

    def check(self, value: Any, param: str, func: str) -> Any:
        k = self.kind
        ok = k is None or isinstance(value, k)
        if k is int and isinstance(value, bool):
            ok = False
        if k is float and isinstance(value, int) and not isinstance(value, bool):
            value, ok = float(value), True
        if not ok:
            raise TraceError(f"{func}(): compile-time constant '{param}' expects "
                             f"{k.__name__}, got {type(value).__name__} {value!r}")
        try:
            hash(value)
        except TypeError:
            raise TraceError(f"{func}(): compile-time constant '{param}' must be hashable, "
                             f"got {type(value).__name__}") from None
        return value


class _ConstexprFactory:
    """``tk.Constexpr[int]`` (also ``float``, ``bool``, ``str``, a dtype...)."""

    def __getitem__(self, kind: Any) -> ConstexprSpec:
        if kind is Any or kind is object:
            return ConstexprSpec(None)
        if not isinstance(kind, type):
            raise TraceError(f"tk.Constexpr[...] takes a Python type such as int, got {kind!r}")
        return ConstexprSpec(kind)

    def __repr__(self) -> str:
        return "tk.Constexpr"


Constexpr = _ConstexprFactory()


class _PointerFactory:
    """``DevicePointer[dtype]`` or ``DevicePointer[dtype, ndim]``."""

    def __getitem__(self, item: Any) -> PointerSpec:
        if isinstance(item, tuple):
            if len(item) != 2:
                raise TraceError(
                    f"DevicePointer takes [dtype] or [dtype, ndim], got {len(item)} items")
            dtype, ndim = item
            if not isinstance(ndim, int) or ndim < 0:
                raise TraceError(f"DevicePointer ndim must be a non-negative int, got {ndim!r}")
            return PointerSpec(dtype_of(dtype), ndim)
        return PointerSpec(dtype_of(item))

    def __repr__(self) -> str:
        return "tk.DevicePointer"


class _BuiltinFactory:
    def __init__(self, vector: bool, signed: bool = False) -> None:
        self.vector = vector
        self.signed = signed

    def __getitem__(self, item: Any) -> BuiltinSpec:
        if not isinstance(item, Builtin):
            raise TraceError(
                f"{self!r}[...] takes tk.BlockIdx, tk.ThreadIdx, tk.BlockDim or tk.GridDim, "
                f"got {item!r}")
        return BuiltinSpec(item, self.vector, self.signed)

    def __repr__(self) -> str:
        return f"tk.{'Int' if self.signed else 'Uint'}{'3' if self.vector else ''}"


DevicePointer = _PointerFactory()
Uint = _BuiltinFactory(vector=False)
Uint3 = _BuiltinFactory(vector=True)
#: Signed (int32) views of the built-ins: ``(bid * 8 - 1) * 16 + tid >= 0`` can be false.
Int = _BuiltinFactory(vector=False, signed=True)
Int3 = _BuiltinFactory(vector=True, signed=True)


#: What a parameter annotation means.
Spec = PointerSpec | BuiltinSpec | ScalarSpec | ConstexprSpec | StructSpec


def spec_of(annotation: Any, param: str, func: str) -> Spec:
    """Interpret one parameter annotation; errors name the function and parameter."""
    if annotation is Constexpr:
        return ConstexprSpec(None)
    if isinstance(annotation, (PointerSpec, BuiltinSpec, ScalarSpec, ConstexprSpec)):
        return annotation
    from ._aggregate import is_struct

    if is_struct(annotation):
        return StructSpec(annotation)
    if isinstance(annotation, DType):
        return ScalarSpec(annotation)
    if annotation is bool:
        return ScalarSpec(dt.bool)
    if annotation is int:
        return ScalarSpec(dt.int32)
    if annotation is float:
        return ScalarSpec(dt.float32)
    if annotation is _EMPTY:
        raise TraceError(
            f"{func}(): parameter '{param}' has no annotation; annotate it with "
            "tk.DevicePointer[dtype], tk.Uint[...]/tk.Uint3[...], tk.Constexpr[int] or a "
            "dtype such as tk.dt.int32")
    if isinstance(annotation, str):
        raise TraceError(
            f"{func}(): cannot evaluate the annotation {annotation!r} of parameter '{param}'; "
            "with 'from __future__ import annotations' annotations are strings evaluated in "
            "the module's globals, so names local to an enclosing function are not found")
    raise TraceError(f"{func}(): parameter '{param}' has an unsupported annotation {annotation!r}")


class _Empty:
    pass


_EMPTY: Any = _Empty
