"""The kernel IR that every front-end produces and every renderer consumes.

A kernel is a signature (:class:`Param` list) and a body: a list of statements. Values are
expression trees whose leaves are constants, parameters, named temporaries and the CUDA
special registers. Front-ends build flat IR (each operation bound to a temporary by a
:class:`Let`), which keeps the generated source readable and maps every line to the
Python line that produced it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from ._dtype import DType

__all__ = [
    "Loc", "PointerType", "Type", "Expr", "Const", "Var", "Special", "Unary", "Binary",
    "Cast", "Load", "Select", "Call", "Stmt", "Let", "Assign", "Store", "If", "Return",
    "Param", "KernelIR", "SPECIALS",
]


@dataclass(frozen=True)
class Loc:
    """A Python source location: absolute file name and 1-based line."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class PointerType:
    """A pointer to ``elem`` in an address space (``"global"`` for kernel arguments)."""

    elem: DType
    space: str = "global"

    def __str__(self) -> str:
        return f"{self.elem.name}*"


Type = Union[DType, PointerType]

# The CUDA special registers a kernel can read, each an unsigned 32-bit value.
SPECIALS: tuple[str, ...] = tuple(
    f"{reg}.{axis}"
    for reg in ("blockIdx", "threadIdx", "blockDim", "gridDim")
    for axis in "xyz"
)


@dataclass(frozen=True, eq=False)
class Expr:
    """Base of all expressions; ``type`` is the value's type."""

    type: Type


@dataclass(frozen=True, eq=False)
class Const(Expr):
    value: Any


@dataclass(frozen=True, eq=False)
class Var(Expr):
    """A named value: a kernel parameter or a temporary."""

    name: str


@dataclass(frozen=True, eq=False)
class Special(Expr):
    """A CUDA special register, one of :data:`SPECIALS`."""

    name: str


@dataclass(frozen=True, eq=False)
class Unary(Expr):
    """``op`` is one of ``neg``, ``invert`` (bitwise), ``not`` (logical)."""

    op: str
    operand: Expr


@dataclass(frozen=True, eq=False)
class Binary(Expr):
    """Operands already have the operation's common type (front-ends insert casts).

    ``op`` is an arithmetic (``add sub mul div floordiv mod``), bitwise
    (``and or xor shl shr``), logical (``land lor``) or comparison
    (``lt le gt ge eq ne``) operation. Comparisons have type bool.
    """

    op: str
    lhs: Expr
    rhs: Expr


@dataclass(frozen=True, eq=False)
class Cast(Expr):
    """C++ ``static_cast`` of ``operand`` to ``type``."""

    operand: Expr


@dataclass(frozen=True, eq=False)
class Load(Expr):
    """``pointer[index]``."""

    pointer: Expr
    index: Expr


@dataclass(frozen=True, eq=False)
class Select(Expr):
    """``cond ? if_true : if_false``."""

    cond: Expr
    if_true: Expr
    if_false: Expr


@dataclass(frozen=True, eq=False)
class Call(Expr):
    """A call of a named intrinsic (``sqrt``, ``min``...) that the renderer spells."""

    func: str
    args: tuple[Expr, ...]


@dataclass(eq=False)
class Stmt:
    """Base of all statements; ``loc`` is where the front-end created it."""

    loc: Loc | None = field(default=None, kw_only=True)


@dataclass(eq=False)
class Let(Stmt):
    """Declare the immutable temporary ``var`` with ``value``."""

    var: Var
    value: Expr


@dataclass(eq=False)
class Assign(Stmt):
    """Assign to a mutable local ``var`` (declared by a ``Let`` with ``mutable=True``)."""

    var: Var
    value: Expr


@dataclass(eq=False)
class Store(Stmt):
    """``pointer[index] = value``."""

    pointer: Expr
    index: Expr
    value: Expr


@dataclass(eq=False)
class If(Stmt):
    cond: Expr
    then: list[Stmt]
    orelse: list[Stmt]


@dataclass(eq=False)
class Return(Stmt):
    """Early exit of the current thread."""


@dataclass
class Param:
    """A kernel parameter. ``reads``/``writes`` record whether the body loads/stores it."""

    name: str
    type: Type
    reads: bool = False
    writes: bool = False
    #: Required number of array dimensions, or None for any (pointer parameters only).
    ndim: int | None = None

    @property
    def is_pointer(self) -> bool:
        return isinstance(self.type, PointerType)


@dataclass
class KernelIR:
    """A whole kernel: name, parameters in call order, body, and where it was defined."""

    name: str
    params: list[Param]
    body: list[Stmt]
    loc: Loc | None = None
    mutable: set[str] = field(default_factory=set)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)
