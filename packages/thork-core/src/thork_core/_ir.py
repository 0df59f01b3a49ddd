"""The kernel IR that every front-end produces and every renderer consumes.

A kernel is a signature (:class:`Param` list) and a body: a list of statements. Values are
expression trees whose leaves are constants, parameters, named temporaries and the CUDA
special registers. Front-ends build flat IR (each operation bound to a temporary by a
:class:`Let`), which keeps the generated source readable and maps every line to the
Python line that produced it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import cached_property
from typing import Any, ClassVar, Union

from ._dtype import DType

__all__ = [
    "Loc", "PointerType", "Type", "Expr", "Const", "Var", "Special", "Unary", "Binary",
    "Cast", "Load", "Select", "Call", "Stmt", "Let", "Assign", "Store", "If", "Return",
    "Param", "KernelIR", "SPECIALS", "VectorType", "Field", "VecLoad", "Atomic", "Warp",
    "BlockReduce", "CallFunc", "For", "While", "Break", "Continue", "SharedDecl", "Sync",
    "VecStore", "Eval", "Function", "walk_stmts", "walk_exprs", "ATOMIC_OPS", "WARP_OPS",
    "SYNC_KINDS", "stmt_exprs", "Print", "Offset", "LocalDecl", "StructType", "Pack",
    "GlobalDecl", "AsyncCopy", "AsyncGroup", "MMA_OPS", "LDMATRIX_OPS", "Hopper",
    "HOPPER_OPS", "WGMMA_N", "SETMAXNREG_COUNTS", "uses_hopper", "hopper_ops", "node_fields",
    "replace", "LOAD_CACHE_OPS", "STORE_CACHE_OPS", "EVICT_PRIORITIES", "join_hint",
    "split_hint",
]

# The node classes are plain classes with their methods written out, not dataclasses:
# ``dataclasses.dataclass`` compiles each class's methods when the module loads (45 classes:
# ~8 ms of ``import thork`` on the H200's host, session 8). Their fields are the annotated
# names of the class and its bases in order (:func:`node_fields`); :func:`replace` makes a
# changed copy; equality, hashing and immutability are as the dataclasses had them
# (tests/core/test_ir_nodes.py holds the equivalence).

_set = object.__setattr__
#: Completes partial kernels (:meth:`KernelIR.partial`), one at a time.
_PARTIAL_LOCK = threading.Lock()
#: The default of a field whose default is a new empty container (``set()``, ``list()``).
_FACTORY: Any = object()


class _Node:
    """A record of the IR: ``_fields`` (the annotated names of the class and its bases, in
    order), a ``__repr__`` naming them; equality and hash by identity."""

    _fields: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = tuple(n for n in cls.__dict__.get("__annotations__", {}) if n not in cls._fields)
        cls._fields = cls._fields + own

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._fields)
        return f"{type(self).__qualname__}({inner})"


class _Frozen(_Node):
    """An immutable node (expressions): assigning or deleting a field raises
    :class:`dataclasses.FrozenInstanceError`."""

    def __setattr__(self, name: str, value: Any) -> None:
        from dataclasses import FrozenInstanceError  # only where raised (~1 ms to import)

        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        from dataclasses import FrozenInstanceError

        raise FrozenInstanceError(f"cannot delete field {name!r}")


class _FrozenValue(_Frozen):
    """An immutable node compared and hashed by value (types, locations)."""


class _Record(_Node):
    """A mutable node compared by value (same class, equal fields) and not hashable."""

    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        names = self._fields
        return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)


def node_fields(node: Any) -> tuple[str, ...]:
    """The field names of an IR node (or node class), in order."""
    return node._fields  # type: ignore[no-any-return]


def replace(node: Any, /, **changes: Any) -> Any:
    """A new node of ``node``'s class with ``changes`` and its other fields
    (``dataclasses.replace`` for IR nodes)."""
    for n in node._fields:
        if n not in changes:
            changes[n] = getattr(node, n)
    return type(node)(**changes)


class Loc(_FrozenValue):
    """A Python source location: absolute file name and 1-based line."""

    file: str
    line: int

    def __init__(self, file: str, line: int) -> None:
        _set(self, "file", file)
        _set(self, "line", line)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return (self.file, self.line) == (other.file, other.line)  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((self.file, self.line))

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


class PointerType(_FrozenValue):
    """A pointer to ``elem`` in an address space (``"global"`` for kernel arguments)."""

    elem: DType
    space: str = "global"

    def __init__(self, elem: DType, space: str = "global") -> None:
        _set(self, "elem", elem)
        _set(self, "space", space)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return (self.elem, self.space) == (other.elem, other.space)  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((self.elem, self.space))

    def __str__(self) -> str:
        return f"{self.elem.name}*"


class VectorType(_FrozenValue):
    """``n`` elements of ``elem`` moved as one aligned unit (``float4``, ``int2``...).

    Only loads and stores produce and consume vectors; arithmetic happens on the
    scalar elements (:class:`Field`).
    """

    elem: DType
    n: int

    def __init__(self, elem: DType, n: int) -> None:
        _set(self, "elem", elem)
        _set(self, "n", n)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return (self.elem, self.n) == (other.elem, other.n)  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((self.elem, self.n))

    @property
    def nbytes(self) -> int:
        return self.elem.itemsize * self.n

    def __str__(self) -> str:
        return f"{self.elem.name}x{self.n}"


class StructType(_FrozenValue):
    """A plain aggregate of scalar ``fields`` named ``r0, r1, ...`` in C++ (``name``): the
    result of a device function that returns several values."""

    name: str
    fields: tuple[DType, ...]

    def __init__(self, name: str, fields: tuple[DType, ...]) -> None:
        _set(self, "name", name)
        _set(self, "fields", fields)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return (self.name, self.fields) == (other.name, other.fields)  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((self.name, self.fields))

    def __str__(self) -> str:
        return f"{self.name}({', '.join(f.name for f in self.fields)})"


Type = Union[DType, PointerType, VectorType, StructType]  # noqa: UP007 - runtime alias

# The CUDA special registers a kernel can read, each an unsigned 32-bit value.
SPECIALS: tuple[str, ...] = tuple(
    f"{reg}.{axis}"
    for reg in ("blockIdx", "threadIdx", "blockDim", "gridDim")
    for axis in "xyz"
)


class Expr(_Frozen):
    """Base of all expressions; ``type`` is the value's type."""

    type: Type

    def __init__(self, type: Type) -> None:
        _set(self, "type", type)


class Const(Expr):
    value: Any

    def __init__(self, type: Type, value: Any) -> None:
        _set(self, "type", type)
        _set(self, "value", value)


class Var(Expr):
    """A named value: a kernel parameter or a temporary."""

    name: str

    def __init__(self, type: Type, name: str) -> None:
        _set(self, "type", type)
        _set(self, "name", name)


class Special(Expr):
    """A CUDA special register, one of :data:`SPECIALS`."""

    name: str

    def __init__(self, type: Type, name: str) -> None:
        _set(self, "type", type)
        _set(self, "name", name)


class Unary(Expr):
    """``op`` is one of ``neg``, ``invert`` (bitwise), ``not`` (logical)."""

    op: str
    operand: Expr

    def __init__(self, type: Type, op: str, operand: Expr) -> None:
        _set(self, "type", type)
        _set(self, "op", op)
        _set(self, "operand", operand)


class Binary(Expr):
    """Operands already have the operation's common type (front-ends insert casts).

    ``op`` is an arithmetic (``add sub mul div floordiv mod``), bitwise
    (``and or xor shl shr``), logical (``land lor``) or comparison
    (``lt le gt ge eq ne``) operation. Comparisons have type bool.
    """

    op: str
    lhs: Expr
    rhs: Expr

    def __init__(self, type: Type, op: str, lhs: Expr, rhs: Expr) -> None:
        _set(self, "type", type)
        _set(self, "op", op)
        _set(self, "lhs", lhs)
        _set(self, "rhs", rhs)


class Cast(Expr):
    """C++ ``static_cast`` of ``operand`` to ``type``."""

    operand: Expr

    def __init__(self, type: Type, operand: Expr) -> None:
        _set(self, "type", type)
        _set(self, "operand", operand)


class Load(Expr):
    """``pointer[index]``; ``cache`` a PTX load cache operator (:data:`LOAD_CACHE_OPS`) and
    an L2 eviction priority (:data:`EVICT_PRIORITIES`) as :func:`join_hint` writes them, or
    ``""`` for a plain load."""

    pointer: Expr
    index: Expr
    cache: str = ""

    def __init__(self, type: Type, pointer: Expr, index: Expr, cache: str = "") -> None:
        _set(self, "type", type)
        _set(self, "pointer", pointer)
        _set(self, "index", index)
        _set(self, "cache", cache)


class Select(Expr):
    """``cond ? if_true : if_false``."""

    cond: Expr
    if_true: Expr
    if_false: Expr

    def __init__(self, type: Type, cond: Expr, if_true: Expr, if_false: Expr) -> None:
        _set(self, "type", type)
        _set(self, "cond", cond)
        _set(self, "if_true", if_true)
        _set(self, "if_false", if_false)


class Call(Expr):
    """A call of a named intrinsic (``sqrt``, ``min``...) that the renderer spells."""

    func: str
    args: tuple[Expr, ...]

    def __init__(self, type: Type, func: str, args: tuple[Expr, ...]) -> None:
        _set(self, "type", type)
        _set(self, "func", func)
        _set(self, "args", args)


class Field(Expr):
    """Element ``lane`` of a vector-typed expression, or field ``lane`` of a
    :class:`StructType` one."""

    vector: Expr
    lane: int

    def __init__(self, type: Type, vector: Expr, lane: int) -> None:
        _set(self, "type", type)
        _set(self, "vector", vector)
        _set(self, "lane", lane)


class Pack(Expr):
    """A :class:`StructType` value made of ``items`` (one per field, of its type)."""

    items: tuple[Expr, ...]

    def __init__(self, type: Type, items: tuple[Expr, ...]) -> None:
        _set(self, "type", type)
        _set(self, "items", items)


class VecLoad(Expr):
    """``type.n`` consecutive elements ``pointer[index .. index + n - 1]`` in one access.

    ``index`` counts scalar elements and must be a multiple of ``n`` (alignment);
    ``cache`` as :class:`Load`'s.
    """

    pointer: Expr
    index: Expr
    cache: str = ""

    def __init__(self, type: Type, pointer: Expr, index: Expr, cache: str = "") -> None:
        _set(self, "type", type)
        _set(self, "pointer", pointer)
        _set(self, "index", index)
        _set(self, "cache", cache)


class Offset(Expr):
    """``pointer + offset``: a pointer ``offset`` elements further (a view of an array);
    ``type`` is the pointer's :class:`PointerType`."""

    pointer: Expr
    offset: Expr

    def __init__(self, type: Type, pointer: Expr, offset: Expr) -> None:
        _set(self, "type", type)
        _set(self, "pointer", pointer)
        _set(self, "offset", offset)


#: Atomic read-modify-write operations; every one returns the old value. ``inc``/``dec``
#: are CUDA's wrapping counters (uint32 only): ``old >= v ? 0 : old + 1`` and
#: ``(old == 0 || old > v) ? v : old - 1``.
#: PTX cache operators a global load may name (``ld.global.<op>``): ``ca`` cache at all
#: levels (the default), ``cg`` in L2 only, ``cs`` streaming (evict first: data read once),
#: ``lu`` last use, ``cv`` volatile (fetch again, cache nothing).
LOAD_CACHE_OPS = ("ca", "cg", "cs", "lu", "cv")
#: PTX cache operators a global store may name (``st.global.<op>``): ``wb`` write back (the
#: default), ``cg`` in L2 only, ``cs`` streaming (evict first: data written once), ``wt``
#: write through.
STORE_CACHE_OPS = ("wb", "cg", "cs", "wt")
#: L2 eviction priorities a global load or store may carry (``evict=``): the access names a
#: cache policy made by ``createpolicy.fractional.L2::evict_<p>.b64`` (sm_80, PTX 7.4) with
#: the ``.L2::cache_hint`` qualifier. ``first``: the lines it allocates are the first the L2
#: evicts; ``last``: the last; ``normal``: the default; ``unchanged``: keep a line's priority.
EVICT_PRIORITIES = ("first", "last", "normal", "unchanged")


def join_hint(cache: str, evict: str) -> str:
    """The ``cache`` field of a :class:`Load`, :class:`Store`, :class:`VecLoad` or
    :class:`VecStore`: the PTX cache operator (``""``: none), then ``|`` and the L2
    eviction priority where there is one (``"cs"``, ``"|first"``, ``"cs|last"``)."""
    return f"{cache}|{evict}" if evict else cache


def split_hint(hint: str) -> tuple[str, str]:
    """``(cache operator, L2 eviction priority)`` of a hint made by :func:`join_hint`."""
    cache, _, evict = hint.partition("|")
    return cache, evict

ATOMIC_OPS = frozenset({"add", "sub", "min", "max", "exch", "cas", "and", "or", "xor",
                        "inc", "dec"})


class Atomic(Expr):
    """Atomic ``op`` on ``pointer[index]`` (global or shared); the value is the old one.

    ``args`` is ``(value,)``, or ``(compare, value)`` for ``cas``.
    """

    op: str
    pointer: Expr
    index: Expr
    args: tuple[Expr, ...]

    def __init__(
        self, type: Type, op: str, pointer: Expr, index: Expr, args: tuple[Expr, ...],
    ) -> None:
        _set(self, "type", type)
        _set(self, "op", op)
        _set(self, "pointer", pointer)
        _set(self, "index", index)
        _set(self, "args", args)


#: Tensor-core matrix multiply-accumulate, PTX ``mma.sync.aligned.m16n8k16.row.col``
#: with float32 accumulators and float16 or bfloat16 inputs. Args: the A fragment (4 uint32
#: registers, two 16-bit elements each), B (2 uint32), C (4 float32); the value is D, a
#: ``VectorType(float32, 4)``. Fragment layouts: docs/language-mma.md.
MMA_OPS = frozenset({"mma.m16n8k16.f16", "mma.m16n8k16.bf16"})
#: PTX ``ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16``. Args: (address,), an
#: :class:`Offset` into shared memory: this lane's row of 8 16-bit elements; the value is a
#: ``VectorType(uint32, n)``, one register per 8x8 matrix.
LDMATRIX_OPS = frozenset(f"ldmatrix.x{n}{t}" for n in (1, 2, 4) for t in ("", ".trans"))
#: Warp-level operations. ``shfl_*`` args: (mask, value, lane/delta/lanemask, width);
#: ``ballot any all``: (mask, predicate); ``activemask``: (); :data:`MMA_OPS`,
#: :data:`LDMATRIX_OPS` as documented there (every lane of the warp takes part).
WARP_OPS = frozenset({
    "shfl_idx", "shfl_up", "shfl_down", "shfl_xor", "ballot", "any", "all", "activemask",
}) | MMA_OPS | LDMATRIX_OPS


class Warp(Expr):
    """A warp primitive (:data:`WARP_OPS`); ``ballot``/``activemask`` give uint32,
    ``any``/``all`` bool, shuffles the value's type."""

    op: str
    args: tuple[Expr, ...]

    def __init__(self, type: Type, op: str, args: tuple[Expr, ...]) -> None:
        _set(self, "type", type)
        _set(self, "op", op)
        _set(self, "args", args)


#: The N of ``wgmma.mma_async.m64nNk16`` with float16/bfloat16 inputs: every multiple of 8
#: from 8 to 256, as PTX allows (each one used is a separate inline-asm helper).
WGMMA_N = tuple(range(8, 257, 8))
#: The per-thread register counts ``setmaxnreg`` takes: multiples of 8 from 24 to 256.
SETMAXNREG_COUNTS = tuple(range(24, 257, 8))
#: Hopper (sm_90a) operations of the asynchronous proxy, as :class:`Hopper` expressions.
#: ``wgmma.m64n{N}k16.{f16,bf16}``: args (A descriptor uint64, B descriptor uint64,
#: scale_d int32 0/1, N/2 float32 accumulators) → ``VectorType(float32, N / 2)``;
#: ``wgmma.fence``, ``wgmma.commit``, ``wgmma.wait.{0..7}``, ``fence.proxy.async``: () →
#: void; ``smem_addr``: (Offset into shared,) → uint32, the shared-window address;
#: ``mbarrier.init``: (Offset to a uint64 barrier, count uint32); ``mbarrier.arrive``:
#: (barrier,); ``mbarrier.expect_tx``: (barrier, bytes uint32) — arrive and expect
#: ``bytes``; ``mbarrier.wait``: (barrier, parity uint32) — block until the phase of that
#: parity completed; ``mbarrier.try_wait``: the same args → bool, whether it completed;
#: ``tma.load.2d``: (destination Offset into shared, tensor map uint64 pointer, column
#: int32, row int32, barrier); ``setmaxnreg.{inc,dec}.{count}``: () → void, this
#: warpgroup's registers per thread become ``count``. Thread-block clusters (a kernel with
#: ``KernelIR.cluster_dims``): ``cluster.rank`` () → uint32, the block's rank in its
#: cluster; ``cluster.sync`` () → void, a barrier over every thread of the cluster;
#: ``fence.mbarrier_init`` () → void, makes mbarrier inits visible to the cluster;
#: ``mbarrier.arrive.cluster``: (barrier, rank uint32) — arrive on the barrier at the
#: same offset in block ``rank`` of the cluster; ``tma.load.2d.multicast``: tma.load.2d's
#: args + mask uint32 — the box lands at the same offset in every block whose rank bit
#: is set, counting its bytes on each one's barrier. TMA stores: ``tma.store.2d``: (source
#: Offset into shared, tensor map uint64 pointer, column int32, row int32) → void, a box
#: shared → global (elements outside the array are not written); ``tma.store.commit``
#: closes the issued stores into a bulk group; ``tma.store.wait.{0..7}`` waits until at
#: most n groups still read shared memory. Layouts: docs/language-wgmma.md.
HOPPER_OPS = frozenset(
    {f"wgmma.m64n{n}k16.{t}" for n in WGMMA_N for t in ("f16", "bf16")}
    | {f"wgmma.wait.{n}" for n in range(8)}
    | {f"setmaxnreg.{a}.{n}" for a in ("inc", "dec") for n in SETMAXNREG_COUNTS}
    | {"wgmma.fence", "wgmma.commit", "fence.proxy.async", "smem_addr", "mbarrier.init",
       "mbarrier.arrive", "mbarrier.expect_tx", "mbarrier.wait", "mbarrier.try_wait",
       "tma.load.2d", "cluster.rank", "cluster.sync", "fence.mbarrier_init",
       "mbarrier.arrive.cluster", "tma.load.2d.multicast", "tma.store.2d",
       "tma.store.commit"}
    | {f"tma.store.wait.{n}" for n in range(8)})


class Hopper(Expr):
    """A Hopper operation (:data:`HOPPER_OPS`); a void one has type None and stands in an
    :class:`Eval`. Kernels using any are compiled for ``sm_90a`` only."""

    op: str
    args: tuple[Expr, ...]

    def __init__(self, type: Type, op: str, args: tuple[Expr, ...]) -> None:
        _set(self, "type", type)
        _set(self, "op", op)
        _set(self, "args", args)


class BlockReduce(Expr):
    """``__syncthreads_count/and/or(pred)``: a barrier that also combines a predicate
    over the block (``op`` is ``count`` → int32, ``and``/``or`` → bool)."""

    op: str
    pred: Expr

    def __init__(self, type: Type, op: str, pred: Expr) -> None:
        _set(self, "type", type)
        _set(self, "op", op)
        _set(self, "pred", pred)


class CallFunc(Expr):
    """A call of the device function ``name`` of the same :class:`KernelIR`.

    A void function has type None and is called through :class:`Eval`.
    """

    name: str
    args: tuple[Expr, ...]

    def __init__(self, type: Type | None, name: str, args: tuple[Expr, ...]) -> None:
        _set(self, "type", type)
        _set(self, "name", name)
        _set(self, "args", args)


class Stmt(_Node):
    """Base of all statements; ``loc`` is where the front-end created it."""

    loc: Loc | None = None  # keyword-only

    def __init__(self, *, loc: Loc | None = None) -> None:
        self.loc = loc


class Let(Stmt):
    """Declare the immutable temporary ``var`` with ``value``."""

    var: Var
    value: Expr

    def __init__(self, var: Var, value: Expr, *, loc: Loc | None = None) -> None:
        self.loc = loc
        self.var = var
        self.value = value


class Assign(Stmt):
    """Assign to a mutable local ``var`` (declared by a ``Let`` with ``mutable=True``)."""

    var: Var
    value: Expr

    def __init__(self, var: Var, value: Expr, *, loc: Loc | None = None) -> None:
        self.loc = loc
        self.var = var
        self.value = value


class Store(Stmt):
    """``pointer[index] = value``; ``cache`` a PTX store cache operator
    (:data:`STORE_CACHE_OPS`) and an L2 eviction priority as :func:`join_hint` writes them,
    or ``""`` for a plain store."""

    pointer: Expr
    index: Expr
    value: Expr
    cache: str = ""

    def __init__(
        self, pointer: Expr, index: Expr, value: Expr, cache: str = "", *,
        loc: Loc | None = None,
    ) -> None:
        self.loc = loc
        self.pointer = pointer
        self.index = index
        self.value = value
        self.cache = cache


class If(Stmt):
    cond: Expr
    then: list[Stmt]
    orelse: list[Stmt]

    def __init__(
        self, cond: Expr, then: list[Stmt], orelse: list[Stmt], *, loc: Loc | None = None,
    ) -> None:
        self.loc = loc
        self.cond = cond
        self.then = then
        self.orelse = orelse


class Return(Stmt):
    """Early exit of the current thread; in a device function, its return (with
    ``value`` when the function has a result)."""

    value: Expr | None = None

    def __init__(self, value: Expr | None = None, *, loc: Loc | None = None) -> None:
        self.loc = loc
        self.value = value


class For(Stmt):
    """``for (var = start; var < stop; var += step)`` (``>`` when ``step`` is negative,
    decided at run time when ``step`` is not a constant): Python ``range`` semantics.

    ``unroll`` is a hint (``#pragma unroll n``); 0 means none.
    """

    var: Var
    start: Expr
    stop: Expr
    step: Expr
    body: list[Stmt]
    unroll: int = 0

    def __init__(
        self, var: Var, start: Expr, stop: Expr, step: Expr, body: list[Stmt], unroll: int = 0, *,
        loc: Loc | None = None,
    ) -> None:
        self.loc = loc
        self.var = var
        self.start = start
        self.stop = stop
        self.step = step
        self.body = body
        self.unroll = unroll


class While(Stmt):
    """``while (true) { head...; if (!cond) break; body... }``.

    ``head`` computes the condition afresh every iteration (a traced condition is a
    chain of temporaries); with an empty head this is ``while (cond) { body }``.
    """

    head: list[Stmt]
    cond: Expr
    body: list[Stmt]

    def __init__(
        self, head: list[Stmt], cond: Expr, body: list[Stmt], *, loc: Loc | None = None,
    ) -> None:
        self.loc = loc
        self.head = head
        self.cond = cond
        self.body = body


class Break(Stmt):
    """Leave the innermost loop."""

    def __init__(self, *, loc: Loc | None = None) -> None:
        self.loc = loc


class Continue(Stmt):
    """Start the next iteration of the innermost loop."""

    def __init__(self, *, loc: Loc | None = None) -> None:
        self.loc = loc


class SharedDecl(Stmt):
    """Declare shared memory ``var`` (a shared :class:`PointerType`) of ``count``
    elements; ``dynamic`` arrays live in the launch's dynamic shared memory at
    ``offset`` bytes and have no static count (``count`` 0)."""

    var: Var
    count: int
    dynamic: bool = False
    offset: int = 0

    def __init__(
        self, var: Var, count: int, dynamic: bool = False, offset: int = 0, *,
        loc: Loc | None = None,
    ) -> None:
        self.loc = loc
        self.var = var
        self.count = count
        self.dynamic = dynamic
        self.offset = offset


class LocalDecl(Stmt):
    """Declare a per-thread array ``var`` (a ``"local"`` :class:`PointerType`) of
    ``count`` elements, uninitialized (C++ ``T var[count];`` in the thread's body)."""

    var: Var
    count: int

    def __init__(self, var: Var, count: int, *, loc: Loc | None = None) -> None:
        self.loc = loc
        self.var = var
        self.count = count


#: Barriers and fences: ``syncthreads`` (block barrier), ``syncwarp`` (mask in
#: :attr:`Sync.mask`), ``fence_block``, ``fence`` (device), ``fence_system``, ``grid``
#: (every thread of the launch; the kernel must be launched cooperatively).
SYNC_KINDS = frozenset({"syncthreads", "syncwarp", "fence_block", "fence", "fence_system",
                        "grid"})


class Sync(Stmt):
    kind: str
    mask: Expr | None = None

    def __init__(self, kind: str, mask: Expr | None = None, *, loc: Loc | None = None) -> None:
        self.loc = loc
        self.kind = kind
        self.mask = mask


class VecStore(Stmt):
    """Store ``values`` (one per lane) to ``pointer[index ..]`` in one access; ``cache`` as
    :class:`Store`'s."""

    pointer: Expr
    index: Expr
    values: tuple[Expr, ...]
    cache: str = ""

    def __init__(
        self, pointer: Expr, index: Expr, values: tuple[Expr, ...], cache: str = "", *,
        loc: Loc | None = None,
    ) -> None:
        self.loc = loc
        self.pointer = pointer
        self.index = index
        self.values = values
        self.cache = cache


class AsyncCopy(Stmt):
    """PTX ``cp.async``: start copying ``nbytes`` (4, 8 or 16) from global ``src[src_index]``
    to shared ``dst[dst_index]`` without waiting; only ``src_bytes`` (uint32, at most
    ``nbytes``) are read, the rest of the destination is zero-filled. Both addresses are
    aligned to ``nbytes``. The copy is complete after the :class:`AsyncGroup` ``wait``
    that covers the group it was committed in."""

    dst: Expr
    dst_index: Expr
    src: Expr
    src_index: Expr
    nbytes: int
    src_bytes: Expr

    def __init__(
        self, dst: Expr, dst_index: Expr, src: Expr, src_index: Expr, nbytes: int, src_bytes: Expr,
        *, loc: Loc | None = None,
    ) -> None:
        self.loc = loc
        self.dst = dst
        self.dst_index = dst_index
        self.src = src
        self.src_index = src_index
        self.nbytes = nbytes
        self.src_bytes = src_bytes


class AsyncGroup(Stmt):
    """``op`` ``"commit"``: close this thread's pending :class:`AsyncCopy` operations into
    a group (``cp.async.commit_group``); ``"wait"``: wait until at most ``n`` of the most
    recent committed groups are pending (``cp.async.wait_group n``)."""

    op: str
    n: int = 0

    def __init__(self, op: str, n: int = 0, *, loc: Loc | None = None) -> None:
        self.loc = loc
        self.op = op
        self.n = n


class Eval(Stmt):
    """Evaluate an expression for its side effect (a void device-function call)."""

    value: Expr

    def __init__(self, value: Expr, *, loc: Loc | None = None) -> None:
        self.loc = loc
        self.value = value


class Print(Stmt):
    """Device ``printf``: ``fmt`` is a C format string with one conversion per value of
    ``args``, chosen for the value's dtype by the front-end (``%d %u %lld %llu`` for
    integers, ``%g`` for floats, ``%s`` for bools, which print ``True``/``False``)."""

    fmt: str
    args: tuple[Expr, ...]

    def __init__(self, fmt: str, args: tuple[Expr, ...], *, loc: Loc | None = None) -> None:
        self.loc = loc
        self.fmt = fmt
        self.args = args


class Param(_Record):
    """A kernel parameter. ``reads``/``writes`` record whether the body loads/stores it."""

    name: str
    type: Type
    reads: bool = False
    writes: bool = False
    #: Required number of array dimensions, or None for any (pointer parameters only).
    ndim: int | None = None
    #: For a hidden scalar the caller does not pass: ``(pointer, kind, axis)`` — the
    #: extent (``kind`` ``"shape"``) or element stride (``"stride"``) along ``axis`` of the
    #: argument given for pointer parameter ``pointer``, filled in at launch. None for a
    #: parameter the caller passes.
    derived: tuple[str, str, int] | None = None

    def __init__(
        self, name: str, type: Type, reads: bool = False, writes: bool = False,
        ndim: int | None = None, derived: tuple[str, str, int] | None = None,
    ) -> None:
        self.name = name
        self.type = type
        self.reads = reads
        self.writes = writes
        self.ndim = ndim
        self.derived = derived

    @property
    def is_pointer(self) -> bool:
        return isinstance(self.type, PointerType)


class GlobalDecl(_Record):
    """A module-level array ``var`` of ``count`` elements: ``"constant"`` memory (read-only,
    ``init`` holds every value) or ``"global"`` device memory (a ``__device__`` variable:
    ``init`` or zeros at module load, then it keeps its contents across launches)."""

    var: Var
    count: int
    init: tuple[Any, ...] | None = None

    def __init__(self, var: Var, count: int, init: tuple[Any, ...] | None = None) -> None:
        self.var = var
        self.count = count
        self.init = init


class Function(_Record):
    """A device function (a traced helper), emitted once before the kernel.

    ``result`` is its return type (None for void); parameters are passed by value
    (pointers as pointers). ``mutable`` names its mutable locals.
    """

    name: str
    params: list[Param]
    result: DType | StructType | None
    body: list[Stmt]
    loc: Loc | None = None
    mutable: set[str]

    def __init__(
        self, name: str, params: list[Param], result: DType | StructType | None, body: list[Stmt],
        loc: Loc | None = None, mutable: set[str] = _FACTORY,
    ) -> None:
        self.name = name
        self.params = params
        self.result = result
        self.body = body
        self.loc = loc
        self.mutable = set() if mutable is _FACTORY else mutable


class KernelIR(_Record):
    """A whole kernel: name, parameters in call order, body, and where it was defined.

    ``functions`` are the device functions it calls, callees before callers;
    ``mutable`` names the kernel body's mutable locals.
    """

    name: str
    params: list[Param]
    body: list[Stmt]
    loc: Loc | None = None
    mutable: set[str]
    functions: list[Function]
    #: Module-level arrays the kernel uses (constant memory, device globals).
    globals: list[GlobalDecl]
    #: Debug mode (:func:`thork_core.instrument`): the bounds-check sites, by site id;
    #: None for a kernel built without checks.
    debug_sites: list[Any] | None = None
    #: ``(max_threads, min_blocks)`` from ``tk.launch_bounds``: CUDA's
    #: ``__launch_bounds__``; launches of larger blocks are refused. None: no bounds.
    launch_bounds: tuple[int, int] | None = None
    #: ``(x, y, z)`` blocks per thread-block cluster from ``tk.cluster_dims`` (CUDA's
    #: ``__cluster_dims__``; sm_90); the grid must be a multiple. None: no clusters.
    cluster_dims: tuple[int, int, int] | None = None

    def __init__(
        self, name: str, params: list[Param], body: list[Stmt], loc: Loc | None = None,
        mutable: set[str] = _FACTORY, functions: list[Function] = _FACTORY,
        globals: list[GlobalDecl] = _FACTORY, debug_sites: list[Any] | None = None,
        launch_bounds: tuple[int, int] | None = None,
        cluster_dims: tuple[int, int, int] | None = None,
    ) -> None:
        self.name = name
        self.params = params
        self.body = body
        self.loc = loc
        self.mutable = set() if mutable is _FACTORY else mutable
        self.functions = [] if functions is _FACTORY else functions
        self.globals = [] if globals is _FACTORY else globals
        self.debug_sites = debug_sites
        self.launch_bounds = launch_bounds
        self.cluster_dims = cluster_dims

    @cached_property
    def cooperative(self) -> bool:
        """Whether the kernel has a grid-wide barrier: it must then be launched
        cooperatively (every block resident at once). Cached: every launch asks, and a
        walk of an unrolled kernel's statements costs tens of microseconds."""
        return self._scan[2]

    @cached_property
    def min_sm(self) -> int:
        """The oldest GPU architecture (``sm_XY`` as XY) whose instructions the kernel uses:
        90 (compiled as sm_90a) for Hopper operations, 80 for ``mma``, ``cp.async`` and
        L2 eviction priorities (``createpolicy``), 75 otherwise (Thork's floor;
        ``ldmatrix`` is 75). Cached, as :attr:`cooperative`."""
        if self.hopper_feature is not None:
            return 90
        return 80 if self.sm80_feature is not None else 75

    @cached_property
    def sm80_feature(self) -> str | None:
        """What makes the kernel need sm_80 (``"tensor-core mma"``, ``"cp.async"``, ``"an L2
        eviction priority (evict=)"``; the first in program order), or None. Cached, as
        :attr:`cooperative`."""
        return self._scan[1]

    @cached_property
    def hopper_feature(self) -> str | None:
        """The Hopper-only feature the kernel uses (``tk.wgmma``, ``tk.tma_load``,
        ``tk.mbarrier``...), or None: such a kernel compiles for ``sm_90a`` and nothing
        else. Cached, as :attr:`cooperative`."""
        return uses_hopper(self)

    @cached_property
    def _scan(self) -> tuple[frozenset[str], str | None, bool, bool]:
        """One walk of every statement and expression of the kernel and its device
        functions: the :class:`Hopper` operations used, the first feature needing sm_80
        (see :attr:`sm80_feature`), whether there is a grid barrier, whether ``mma``,
        ``ldmatrix`` or ``cp.async`` is used (the renderer's
        :func:`~thork_core._renderer.uses_mma`). The trace, the architecture check and
        the renderer all ask (a fresh process's first launch made three walks for the
        Hopper operations alone; a cold compile walked once more for ``uses_mma``)."""
        ops: set[str] = set()
        sm80: str | None = None
        grid = mma = False
        for body in [self.body] + [f.body for f in self.functions]:
            for s in walk_stmts(body):
                if isinstance(s, Sync):
                    grid = grid or s.kind == "grid"
                elif isinstance(s, (AsyncCopy, AsyncGroup)):
                    mma = True
                    sm80 = sm80 or "cp.async"
                elif sm80 is None and isinstance(s, (Store, VecStore)) \
                        and split_hint(s.cache)[1]:
                    sm80 = "an L2 eviction priority (evict=)"
                for top in stmt_exprs(s):
                    for e in walk_exprs(top):
                        if isinstance(e, Hopper):
                            ops.add(e.op)
                        elif isinstance(e, Warp):
                            if e.op in MMA_OPS:
                                mma = True
                                sm80 = sm80 or "tensor-core mma"
                            elif e.op in LDMATRIX_OPS:
                                mma = True
                        elif sm80 is None and isinstance(e, (Load, VecLoad)) \
                                and split_hint(e.cache)[1]:
                            sm80 = "an L2 eviction priority (evict=)"
        return frozenset(ops), sm80, grid, mma

    # -- a kernel loaded in two parts (the traced record: thork_core._build) -------------
    @classmethod
    def partial(cls, name: str, params: list[Param], launch_bounds: tuple[int, int] | None,
                cluster_dims: tuple[int, int, int] | None, cooperative: bool,
                rest: Callable[[], KernelIR]) -> KernelIR:
        """A kernel IR of which only what a launch reads is present: ``name``, ``params``,
        ``launch_bounds``, ``cluster_dims``, :attr:`cooperative` and ``debug_sites``
        (None). Every other attribute (the body, the device functions, the location...)
        is taken from ``rest()``, called once, at its first use (under a lock: threads
        agree); those given here stay as given. Pickling, copying and comparing see the
        whole kernel. A fresh process's first launch from the traced record thus does
        not unpickle a body it does not read (``kernel.source`` does)."""
        ir = cls.__new__(cls)
        ir.__dict__.update(name=name, params=params, launch_bounds=launch_bounds,
                           cluster_dims=cluster_dims, debug_sites=None,
                           cooperative=cooperative, _rest=rest)
        return ir

    def __getattr__(self, name: str) -> Any:
        # Reached only for what the instance and its class lack: the rest of a partial
        # kernel (:meth:`partial`), loaded now.
        d = self.__dict__
        if "_rest" not in d or name.startswith("__"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        self._complete()
        return object.__getattribute__(self, name)

    def _complete(self) -> None:
        """Load the rest of a partial kernel (see :meth:`partial`); a no-op otherwise."""
        d = self.__dict__
        if "_rest" not in d:
            return
        with _PARTIAL_LOCK:
            rest = d.get("_rest")
            if rest is None:
                return  # another thread completed it
            full = rest()
            if type(full) is not type(self):
                raise TypeError(f"the rest of kernel {d['name']!r} is a "
                                f"{type(full).__name__}, not a KernelIR")
            # (one C-level update: a reader never sees half of the fields)
            d.update({k: v for k, v in full.__dict__.items() if k not in d})
            del d["_rest"]

    def __getstate__(self) -> dict[str, Any]:
        self._complete()
        return dict(self.__dict__)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)


def _children(s: Stmt) -> list[list[Stmt]]:
    if isinstance(s, If):
        return [s.then, s.orelse]
    if isinstance(s, For):
        return [s.body]
    if isinstance(s, While):
        return [s.head, s.body]
    return []


def walk_stmts(stmts: list[Stmt]):  # type: ignore[no-untyped-def]
    """Every statement in ``stmts``, nested blocks included, in program order."""
    for s in stmts:
        yield s
        for block in _children(s):
            yield from walk_stmts(block)


def stmt_exprs(s: Stmt) -> list[Expr]:
    """The expressions a statement evaluates directly (not those of nested blocks)."""
    if isinstance(s, (Let, Assign)):
        return [s.value]
    if isinstance(s, Store):
        return [s.pointer, s.index, s.value]
    if isinstance(s, VecStore):
        return [s.pointer, s.index, *s.values]
    if isinstance(s, If):
        return [s.cond]
    if isinstance(s, For):
        return [s.start, s.stop, s.step]
    if isinstance(s, While):
        return [s.cond]
    if isinstance(s, Return):
        return [s.value] if s.value is not None else []
    if isinstance(s, Sync):
        return [s.mask] if s.mask is not None else []
    if isinstance(s, Eval):
        return [s.value]
    if isinstance(s, Print):
        return list(s.args)
    if isinstance(s, AsyncCopy):
        return [s.dst, s.dst_index, s.src, s.src_index, s.src_bytes]
    return []


def walk_exprs(e: Expr):  # type: ignore[no-untyped-def]
    """``e`` and all its sub-expressions."""
    yield e
    if isinstance(e, (Unary, Cast)):
        yield from walk_exprs(e.operand)
    elif isinstance(e, Binary):
        yield from walk_exprs(e.lhs)
        yield from walk_exprs(e.rhs)
    elif isinstance(e, (Load, VecLoad)):
        yield from walk_exprs(e.pointer)
        yield from walk_exprs(e.index)
    elif isinstance(e, Select):
        yield from walk_exprs(e.cond)
        yield from walk_exprs(e.if_true)
        yield from walk_exprs(e.if_false)
    elif isinstance(e, Atomic):
        yield from walk_exprs(e.pointer)
        yield from walk_exprs(e.index)
        for a in e.args:
            yield from walk_exprs(a)
    elif isinstance(e, Pack):
        for a in e.items:
            yield from walk_exprs(a)
    elif isinstance(e, (Call, Warp, CallFunc, Hopper)):
        for a in e.args:
            yield from walk_exprs(a)
    elif isinstance(e, Field):
        yield from walk_exprs(e.vector)
    elif isinstance(e, Offset):
        yield from walk_exprs(e.pointer)
        yield from walk_exprs(e.offset)
    elif isinstance(e, BlockReduce):
        yield from walk_exprs(e.pred)


#: How errors name each family of Hopper operations, most significant first.
_HOPPER_FEATURES = (("wgmma.m64n", "tk.wgmma"), ("tma.", "tk.tma_load"),
                    ("mbarrier.", "tk.mbarrier"), ("wgmma.", "tk.wgmma_fence/commit/wait"),
                    ("setmaxnreg.", "tk.setmaxnreg_inc/dec"),
                    ("cluster.", "tk.cluster_ctarank/cluster_sync"),
                    ("fence.mbarrier_init", "tk.fence_mbarrier_init"),
                    ("fence.proxy.async", "tk.fence_proxy_async"),
                    ("smem_addr", "tk.smem_address"))


def hopper_ops(kernel: KernelIR) -> set[str]:
    """The :class:`Hopper` operations the kernel and its device functions use (a
    :class:`KernelIR`'s from its one cached walk)."""
    if isinstance(kernel, KernelIR):
        return set(kernel._scan[0])
    return {e.op for body in [kernel.body] + [f.body for f in kernel.functions]
            for s in walk_stmts(body) for top in stmt_exprs(s) for e in walk_exprs(top)
            if isinstance(e, Hopper)}


def uses_hopper(kernel: KernelIR) -> str | None:
    """The most significant Hopper feature the kernel (or a device function it calls) uses,
    as errors name it (``tk.wgmma``, ``tk.tma_load``, ``tk.mbarrier``...), or None."""
    ops = hopper_ops(kernel)
    return next((name for prefix, name in _HOPPER_FEATURES
                 if any(op.startswith(prefix) for op in ops)), None)
