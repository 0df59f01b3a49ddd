"""Small aggregates of traced scalars: vector types (``tk.float4``...) and ``@tk.struct``.

Both exist only at trace time: a :class:`Vec` or a struct instance is a Python object
holding one traced value per lane or field, so arithmetic on it is arithmetic on those
values (the generated code is scalar code, which is what CUDA compiles ``float4``
arithmetic to as well). What makes them types:

* vector loads and stores: ``tk.float4.load(a, i)`` reads ``a[4i .. 4i+3]`` in one aligned
  16-byte access (``reinterpret_cast<float4*>(a)[i]`` in CUDA); ``float3`` is three loads;
* ``@tk.func`` helpers take and return them (passed lane by lane; several results come
  back as one C++ struct);
* a ``@tk.struct`` class annotates a kernel parameter passed by value: each field is a
  scalar kernel argument, filled from the instance (or a tuple) given at launch;
* ``tk.float3.var(0.0)`` / ``Particle.var(...)`` make mutable locals (each lane a
  :func:`tk.var <thork.var>`), updated with ``+=`` or ``.set()``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from thork_core import DType, TraceError, dt, dtype_of

from ._local import Local, var
from ._trace import Memory, Value, _bin, as_value, cast

__all__ = [
    "Vec", "VecType", "float2", "float3", "float4", "int2", "int4", "half2", "double2",
    "dot", "struct", "is_struct", "flatten", "struct_fields",
]


class Vec:
    """A vector value: ``n`` traced lanes of one dtype, elementwise arithmetic with vectors
    of the same length and with scalars (broadcast), ``.x .y .z .w`` and ``v[k]``."""

    __slots__ = ("lanes",)

    def __init__(self, lanes: Sequence[Value]) -> None:
        self.lanes = tuple(lanes)

    # -- lanes --------------------------------------------------------------------------
    @property
    def dtype(self) -> DType:
        return self.lanes[0].dtype

    def __len__(self) -> int:
        return len(self.lanes)

    def __iter__(self) -> Any:
        return iter(self.lanes)

    def __getitem__(self, k: int) -> Value:
        if not isinstance(k, int):
            raise TraceError("a vector's lane index must be a Python int (lanes are "
                             "registers, not memory)")
        return self.lanes[k]

    def _lane(self, k: int, name: str) -> Value:
        if k >= len(self.lanes):
            raise TraceError(f"a {len(self.lanes)}-lane vector has no .{name}")
        return self.lanes[k]

    x = property(lambda self: self._lane(0, "x"))
    y = property(lambda self: self._lane(1, "y"))
    z = property(lambda self: self._lane(2, "z"))
    w = property(lambda self: self._lane(3, "w"))

    def __repr__(self) -> str:
        return f"<traced {self.dtype.name}x{len(self.lanes)}>"

    def to(self, dtype: Any) -> Vec:
        """Every lane converted to ``dtype``."""
        return Vec([cast(v, dtype) for v in self.lanes])

    def store(self, array: Any, i: Any) -> None:
        """Store to ``array`` as vector element ``i`` (elements ``n*i .. n*i+n-1``)."""
        _vec_store(array, i, self.lanes)

    def set(self, value: Any) -> None:
        """Assign every lane (the lanes must be mutable: made by ``T.var(...)``)."""
        other = self._other(value)
        for mine, theirs in zip(self.lanes, other):
            if not isinstance(mine, Local):
                raise TraceError("Vec.set(): this vector is a value, not a variable; make "
                                 "a mutable one with tk.float4.var(init) (for example)")
            mine.set(theirs)

    # -- arithmetic ---------------------------------------------------------------------
    def _other(self, o: Any) -> tuple[Any, ...]:
        if isinstance(o, Vec):
            if len(o.lanes) != len(self.lanes):
                raise TraceError(f"vector lengths differ: {len(self.lanes)} and "
                                 f"{len(o.lanes)}")
            return o.lanes
        if isinstance(o, (tuple, list, Memory)):
            raise TraceError(f"cannot combine a vector with a {type(o).__name__}; build a "
                             "vector (tk.float4(...)) or use a scalar")
        return (o,) * len(self.lanes)

    def _map(self, op: str, o: Any, reverse: bool = False) -> Vec:
        return Vec([_bin(op, a, b, reverse=reverse) for a, b in zip(self.lanes, self._other(o))])

    def __add__(self, o: Any) -> Vec: return self._map("add", o)
    def __radd__(self, o: Any) -> Vec: return self._map("add", o, True)
    def __sub__(self, o: Any) -> Vec: return self._map("sub", o)
    def __rsub__(self, o: Any) -> Vec: return self._map("sub", o, True)
    def __mul__(self, o: Any) -> Vec: return self._map("mul", o)
    def __rmul__(self, o: Any) -> Vec: return self._map("mul", o, True)
    def __truediv__(self, o: Any) -> Vec: return self._map("div", o)
    def __rtruediv__(self, o: Any) -> Vec: return self._map("div", o, True)

    def __neg__(self) -> Vec:
        return Vec([-v for v in self.lanes])

    def _update(self, op: str, o: Any) -> Vec:
        result = self._map(op, o)
        if all(isinstance(v, Local) for v in self.lanes):
            self.set(result)  # a mutable vector: assign in place (C++ v += w)
            return self
        return result

    def __iadd__(self, o: Any) -> Vec: return self._update("add", o)
    def __isub__(self, o: Any) -> Vec: return self._update("sub", o)
    def __imul__(self, o: Any) -> Vec: return self._update("mul", o)
    def __itruediv__(self, o: Any) -> Vec: return self._update("div", o)

    def __bool__(self) -> bool:
        raise TraceError("a vector has no truth value in a kernel")

    def _thork_flatten(self) -> tuple[list[Value], Callable[[list[Value]], Any]]:
        return list(self.lanes), Vec


class VecType:
    """A vector type such as ``tk.float4``: call it to build a vector, ``.load``/``.store``
    to move one, ``.var`` for a mutable one."""

    def __init__(self, name: str, dtype: DType, n: int) -> None:
        self.name = name
        self.dtype = dtype
        self.n = n

    def __repr__(self) -> str:
        return f"tk.{self.name}"

    def __call__(self, *lanes: Any) -> Vec:
        """``tk.float4(x, y, z, w)``, or one value for every lane: ``tk.float4(0.0)``."""
        if len(lanes) == 1:
            lanes = lanes * self.n
        if len(lanes) != self.n:
            raise TraceError(f"tk.{self.name}() takes {self.n} values (or one for every "
                             f"lane), got {len(lanes)}")
        return Vec([cast(as_value(v, self.dtype), self.dtype) for v in lanes])

    def var(self, *init: Any) -> Vec:
        """A mutable vector initialised like ``tk.{name}(...)``."""
        return Vec([var(v, self.dtype) for v in self(*init).lanes])

    def load(self, array: Any, i: Any) -> Vec:
        """Vector element ``i`` of ``array`` (elements ``n*i .. n*i+n-1``); one aligned
        access for 2 and 4 lanes (the array must hold this type's element dtype)."""
        self._check(array, "load")
        base = as_value(i) * self.n
        if self.n == 3:
            return Vec([array[base + k] for k in range(3)])
        return Vec(list(array.vload(base, self.n)))

    def store(self, array: Any, i: Any, value: Any) -> None:
        """Store ``value`` (a vector of this length) as vector element ``i`` of ``array``."""
        self._check(array, "store")
        lanes = value.lanes if isinstance(value, Vec) else tuple(value)
        if len(lanes) != self.n:
            raise TraceError(f"tk.{self.name}.store(): {self.n} lanes expected, got "
                             f"{len(lanes)}")
        _vec_store(array, i, lanes)

    def _check(self, array: Any, what: str) -> None:
        if not isinstance(array, Memory):
            raise TraceError(f"tk.{self.name}.{what}(): the array must be a DevicePointer "
                             f"or a shared array, got {type(array).__name__}")
        if array.dtype != self.dtype:
            raise TraceError(f"tk.{self.name}.{what}() on '{array.label}' of "
                             f"{array.dtype.name}: the array must hold {self.dtype.name}")


def _vec_store(array: Any, i: Any, lanes: Sequence[Any]) -> None:
    n = len(lanes)
    base = as_value(i) * n
    if n == 3:
        for k in range(3):
            array[base + k] = lanes[k]
    else:
        array.vstore(base, lanes)


float2 = VecType("float2", dt.float32, 2)
float3 = VecType("float3", dt.float32, 3)
float4 = VecType("float4", dt.float32, 4)
double2 = VecType("double2", dt.float64, 2)
int2 = VecType("int2", dt.int32, 2)
int4 = VecType("int4", dt.int32, 4)
half2 = VecType("half2", dt.float16, 2)


def dot(a: Vec, b: Vec) -> Value:
    """The sum of the lanes' products."""
    if not (isinstance(a, Vec) and isinstance(b, Vec)):
        raise TraceError("tk.dot() takes two vectors")
    lanes = a._map("mul", b).lanes
    acc = lanes[0]
    for v in lanes[1:]:
        acc = acc + v
    return acc


# -- structs ------------------------------------------------------------------------------
_STRUCT_FIELDS = "__thork_struct_fields__"


def struct(cls: type) -> type:
    """Make ``cls`` (fields annotated with dtypes) a struct: a dataclass whose instances
    hold traced values in kernels (each field converted to its dtype), pass through
    ``@tk.func`` helpers, annotate by-value kernel parameters, and whose ``var(...)``
    classmethod makes a mutable one."""
    import sys

    # String annotations (PEP 563) are evaluated where the class was decorated: its
    # module's globals and the decorating frame's names (a class made in a function, or
    # code run by exec with its own namespace).
    frame = sys._getframe(1)
    module = vars(sys.modules[cls.__module__]) if cls.__module__ in sys.modules else {}
    scope = {**module, **frame.f_globals}
    hints: dict[str, Any] = {}
    for name, ann in cls.__dict__.get("__annotations__", {}).items():
        if isinstance(ann, str):
            try:
                ann = eval(ann, scope, dict(frame.f_locals))  # noqa: S307 - the user's code
            except Exception as exc:
                raise TraceError(f"@tk.struct {cls.__name__}: cannot evaluate the annotation "
                                 f"of '{name}' ({ann!r}): {type(exc).__name__}: {exc}"
                                 ) from None
        hints[name] = ann
    fields = []
    for name, ann in hints.items():
        try:
            fields.append((name, dtype_of(ann)))
        except Exception:
            raise TraceError(f"@tk.struct {cls.__name__}: field '{name}' must be annotated "
                             f"with a dtype (tk.dt.float32, int, float...), got {ann!r}"
                             ) from None
    if not fields:
        raise TraceError(f"@tk.struct {cls.__name__}: no annotated fields")
    import dataclasses  # on first use: import thork stays light

    dc: Any = dataclasses.dataclass(cls)
    setattr(dc, _STRUCT_FIELDS, tuple(fields))
    original_init = dc.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        from ._trace import current_or_none

        if current_or_none() is not None:  # traced: each field in its declared type
            for fname, t in fields:
                v = getattr(self, fname)
                if not isinstance(v, Local):
                    object.__setattr__(self, fname, cast(as_value(v, t), t))

    def _thork_flatten(self: Any) -> tuple[list[Value], Callable[[list[Value]], Any]]:
        return [as_value(getattr(self, f)) for f, _ in fields], lambda vs: dc(*vs)

    def var_(klass: Any, *args: Any, **kwargs: Any) -> Any:
        init = dc(*args, **kwargs)
        return dc(*[var(getattr(init, f), t) for f, t in fields])

    dc.__init__ = __init__  # type: ignore[misc]
    dc._thork_flatten = _thork_flatten  # type: ignore[attr-defined]
    dc.var = classmethod(var_)  # type: ignore[attr-defined]
    return dc


def is_struct(obj: Any) -> bool:
    """Whether ``obj`` is a ``@tk.struct`` class."""
    return isinstance(obj, type) and hasattr(obj, _STRUCT_FIELDS)


def struct_fields(cls: type) -> tuple[tuple[str, DType], ...]:
    return getattr(cls, _STRUCT_FIELDS)  # type: ignore[no-any-return]


def flatten(obj: Any) -> tuple[list[Value], Callable[[list[Value]], Any]]:
    """The traced scalars of ``obj`` (a value, a vector, a struct, or a tuple of those)
    and the function that rebuilds such an object from scalars of the same types."""
    if isinstance(obj, Value):
        return [obj], lambda vs: vs[0]
    flat = getattr(obj, "_thork_flatten", None)
    if flat is not None and not isinstance(obj, type):
        return flat()  # type: ignore[no-any-return]
    if isinstance(obj, (tuple, list)):
        parts = [flatten(o) for o in obj]
        sizes = [len(p[0]) for p in parts]

        def rebuild(vs: list[Value]) -> tuple[Any, ...]:
            out, k = [], 0
            for (_, rb), n in zip(parts, sizes):
                out.append(rb(vs[k:k + n]))
                k += n
            return tuple(out)

        return [v for p in parts for v in p[0]], rebuild
    if isinstance(obj, (bool, int, float)):
        return [as_value(obj)], lambda vs: vs[0]
    raise TraceError(f"cannot pass or return a {type(obj).__name__} between device "
                     "functions: use traced values, vectors, @tk.struct instances or tuples")
