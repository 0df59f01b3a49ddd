"""The public kernel IR: what front-ends build and renderers read.

A kernel is a :class:`KernelIR` (name, :class:`Param` list, body of statements). Values
are expressions (:class:`Const`, :class:`Var`, :class:`Binary`, :class:`Load`...), each
with a scalar :class:`DType` (or a :class:`VectorType`); statements (:class:`Let`,
:class:`Store`, :class:`If`, :class:`For`...) carry the :class:`Loc` of the Python line
they came from. :func:`walk_stmts`/:func:`walk_exprs` visit a body. Nodes are plain
classes (not dataclasses, which cost ``import thork`` ~8 ms to create):
:func:`node_fields` lists a node's fields in order, :func:`replace` makes a changed copy;
expressions and types are immutable.

A target's renderer subclasses :class:`Renderer` (``render(kernel) -> str``);
:class:`CudaRenderer` is the CUDA C++ one, which host C++ renderers extend.
:data:`CODEGEN_VERSION` is part of every disk-cache key: renderers that change the code
they generate for the same IR bump their own version in their target's cache identity.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._dtype import (
    ALL_DTYPES,
    DType,
    dt,
    dtype_of,
    input_typestr,
    int_range,
    literal_dtype,
    promote,
    typestr,
)
from ._ir import (
    ATOMIC_OPS,
    EVICT_PRIORITIES,
    HOPPER_OPS,
    LDMATRIX_OPS,
    LOAD_CACHE_OPS,
    MMA_OPS,
    SETMAXNREG_COUNTS,
    SPECIALS,
    STORE_CACHE_OPS,
    SYNC_KINDS,
    WARP_OPS,
    WGMMA_N,
    Assign,
    AsyncCopy,
    AsyncGroup,
    Atomic,
    Binary,
    BlockReduce,
    Break,
    Call,
    CallFunc,
    Cast,
    Const,
    Continue,
    Eval,
    Expr,
    Field,
    For,
    Function,
    GlobalDecl,
    Hopper,
    If,
    KernelIR,
    Let,
    Load,
    Loc,
    LocalDecl,
    Offset,
    Pack,
    Param,
    PointerType,
    Print,
    Return,
    Select,
    SharedDecl,
    Special,
    Stmt,
    Store,
    StructType,
    Sync,
    Type,
    Unary,
    Var,
    VecLoad,
    VecStore,
    VectorType,
    Warp,
    While,
    hopper_ops,
    join_hint,
    node_fields,
    replace,
    split_hint,
    stmt_exprs,
    uses_hopper,
    walk_exprs,
    walk_stmts,
)

__all__ = [
    "AsyncCopy", "AsyncGroup", "LDMATRIX_OPS", "MMA_OPS", "HOPPER_OPS", "Hopper", "WGMMA_N",
    "SETMAXNREG_COUNTS",
    "uses_hopper", "hopper_ops",
    "ALL_DTYPES", "ATOMIC_OPS", "Assign", "Atomic", "Binary", "BlockReduce", "Break",
    "CODEGEN_VERSION", "Call", "CallFunc", "Cast", "Const", "Continue", "CudaRenderer",
    "DType", "Eval", "Expr", "Field", "For", "Function", "GlobalDecl", "HALF_CONVERSIONS",
    "INT_ARITHMETIC", "If",
    "KernelIR", "Let", "Load", "Loc", "LocalDecl", "Offset", "PRELUDE_MARK", "Pack", "Param",
    "PointerType", "Print", "RECORD_STRUCT", "Renderer", "Return", "c_string", "uses_mma",
    "SPECIALS", "SYNC_KINDS", "Select", "SharedDecl", "Special", "Stmt", "Store",
    "StructType", "Sync",
    "Type", "Unary", "Var", "VecLoad", "VecStore", "VectorType", "WARP_OPS", "Warp",
    "While", "dt", "dtype_of", "input_typestr", "int_range", "literal_dtype", "promote",
    "stmt_exprs", "typestr", "walk_exprs", "walk_stmts", "node_fields", "replace",
    "LOAD_CACHE_OPS", "STORE_CACHE_OPS", "EVICT_PRIORITIES", "join_hint", "split_hint",
    "fast_math_helpers",
]


if TYPE_CHECKING:
    from ._renderer import (
        CODEGEN_VERSION,
        HALF_CONVERSIONS,
        INT_ARITHMETIC,
        PRELUDE_MARK,
        RECORD_STRUCT,
        CudaRenderer,
        Renderer,
        c_string,
        fast_math_helpers,
        uses_mma,
    )

#: Names whose modules load on first use: ``import thork`` imports this module for the IR
#: nodes and never renders (the renderer loads with the build path), nor needs debug mode.
_LAZY = dict.fromkeys((
    "RECORD_STRUCT", "CODEGEN_VERSION", "HALF_CONVERSIONS", "INT_ARITHMETIC", "PRELUDE_MARK",
    "CudaRenderer", "Renderer", "c_string", "fast_math_helpers", "uses_mma"), "._renderer")


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'thork_core.ir' has no attribute {name!r}")
    # __import__, not importlib.import_module: the same import, timed by -X importtime
    value = getattr(__import__(module[1:], globals(), None, (name,), 1), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
