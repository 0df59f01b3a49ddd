"""The IR's node classes are plain classes with their methods written out (dataclasses cost
``import thork`` ~8 ms): each one's ``__init__`` must take exactly its fields, in order, and
the nodes must keep the dataclass behaviour front-ends and renderers rely on (immutable
expressions and types, value equality of types and records, identity of expressions and
statements, ``replace``)."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from thork_core import ir
from thork_core.ir import (
    Binary,
    Const,
    Expr,
    For,
    Function,
    KernelIR,
    Let,
    Loc,
    Param,
    PointerType,
    Stmt,
    StructType,
    Var,
    VectorType,
    dt,
    node_fields,
    replace,
)

NODES = [c for c in (getattr(ir, n) for n in ir.__all__)
         if isinstance(c, type) and hasattr(c, "_fields") and c.__module__ == "thork_core._ir"]
VALUES = (Loc, PointerType, VectorType, StructType)
RECORDS = (Param, Function, KernelIR, ir.GlobalDecl)


def annotated(cls: type) -> list[str]:
    """The annotated names of ``cls`` and its bases, bases first (dataclass field order)."""
    out: list[str] = []
    for c in reversed(cls.__mro__):
        for n in c.__dict__.get("__annotations__", {}):
            if not n.startswith("_") and n not in out:
                out.append(n)
    return out


def test_every_node_class_is_covered():
    assert len(NODES) >= 45
    names = {c.__name__ for c in NODES}
    assert {"Binary", "Let", "KernelIR", "Loc", "Hopper", "AsyncCopy", "Print"} <= names


@pytest.mark.parametrize("cls", NODES, ids=lambda c: c.__name__)
def test_init_takes_exactly_the_fields_in_order(cls):
    assert list(cls._fields) == annotated(cls)
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    assert [p.name for p in params if p.kind is p.KEYWORD_ONLY] == (
        ["loc"] if issubclass(cls, Stmt) else [])
    positional = [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert positional == [n for n in cls._fields if not (issubclass(cls, Stmt) and n == "loc")]
    # Every field is set from its own argument: distinct markers come back in place.
    marks = {n: object() for n in cls._fields}
    node = cls(**marks)
    assert [getattr(node, n) for n in cls._fields] == [marks[n] for n in cls._fields]
    assert node_fields(node) == cls._fields


@pytest.mark.parametrize("cls", NODES, ids=lambda c: c.__name__)
def test_replace_and_repr(cls):
    marks = {n: f"v{i}" for i, n in enumerate(cls._fields)}
    node = cls(**marks)
    if cls._fields:
        first = cls._fields[0]
        new = replace(node, **{first: "changed"})
        assert type(new) is cls and new is not node
        assert getattr(new, first) == "changed"
        assert all(getattr(new, n) == getattr(node, n) for n in cls._fields[1:])
    inner = ", ".join(f"{n}={v!r}" for n, v in marks.items())
    assert repr(node) == f"{cls.__qualname__}({inner})"
    with pytest.raises(TypeError):
        replace(node, no_such_field=1)


@pytest.mark.parametrize("cls", [c for c in NODES if issubclass(c, (Expr, *VALUES))],
                         ids=lambda c: c.__name__)
def test_expressions_and_types_are_immutable(cls):
    node = cls(**{n: 1 for n in cls._fields})
    for n in cls._fields:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(node, n, 2)
        with pytest.raises(dataclasses.FrozenInstanceError):
            delattr(node, n)
    with pytest.raises(dataclasses.FrozenInstanceError):
        node.anything_else = 3


def test_types_and_locations_compare_and_hash_by_value():
    assert PointerType(dt.float32) == PointerType(dt.float32, "global")
    assert PointerType(dt.float32) != PointerType(dt.float32, "shared")
    assert PointerType(dt.float32) != PointerType(dt.int32)
    assert len({PointerType(dt.float32), PointerType(dt.float32), VectorType(dt.float32, 4),
                VectorType(dt.float32, 4), Loc("a.py", 3), Loc("a.py", 3)}) == 3
    assert VectorType(dt.float32, 4) != VectorType(dt.float32, 2)
    assert StructType("s", (dt.int32,)) == StructType("s", (dt.int32,))
    assert Loc("a.py", 3) != ("a.py", 3)  # another class: not equal
    assert VectorType(dt.float16, 8).nbytes == 16 and str(PointerType(dt.int8)) == "int8*"


def test_expressions_and_statements_compare_by_identity():
    a, b = Const(dt.int32, 1), Const(dt.int32, 1)
    assert a != b and a == a and len({a, b}) == 2
    v = Var(dt.int32, "x")
    s1, s2 = Let(v, a), Let(v, a)
    assert s1 != s2 and len({s1, s2}) == 2
    s1.loc = Loc("f.py", 1)  # statements are mutable
    assert s1.loc == Loc("f.py", 1) and s2.loc is None
    assert Binary(dt.int32, "add", a, b).lhs is a


def test_records_compare_by_value_and_are_unhashable():
    p, q = Param("x", PointerType(dt.float32)), Param("x", PointerType(dt.float32))
    assert p == q and p != Param("x", PointerType(dt.float32), writes=True)
    with pytest.raises(TypeError):
        hash(p)
    k1 = KernelIR("k", [p], [])
    k2 = KernelIR("k", [q], [])
    assert k1 == k2 and k1.mutable == set() and k1.functions == [] and k1.globals == []
    # Each record gets its own empty containers.
    k1.mutable.add("m")
    k1.functions.append(Function("f", [], None, []))
    assert k2.mutable == set() and k2.functions == [] and k1 != k2
    assert Function("f", [], None, []).mutable == set()


def test_statement_location_is_keyword_only():
    v = Var(dt.int32, "i")
    c = Const(dt.int32, 0)
    f = For(v, c, c, c, [], loc=Loc("k.py", 9))
    assert f.unroll == 0 and f.loc == Loc("k.py", 9)
    with pytest.raises(TypeError):
        For(v, c, c, c, [], 0, Loc("k.py", 9))  # type: ignore[misc]
    assert replace(f, unroll=4).loc == Loc("k.py", 9)


def test_kernel_ir_properties_are_cached_per_object():
    k = KernelIR("k", [], [])
    assert k.cooperative is False and k.min_sm == 75 and k.hopper_feature is None
    assert "cooperative" in vars(k)  # cached_property stores on the instance
