"""Debug mode: bounds checks on every array access, reported after the launch.

:func:`instrument` rewrites a kernel's IR so that every load, store, vector access and
atomic on a global (parameter or module-level), shared (static or dynamic) or local array
goes through ``thork_at(pointer, index, lo, hi, site)``: the element address when
``lo <= index < hi``, else the address of a scratch cell, after the first violation of
the launch has been written into the module's error record ``thork_dbg_record`` (one
atomic flag, then the site id, the index, the bounds and the offending block and thread).
The kernel thus never touches memory outside its arrays, on the GPU or the CPU target;
loads that failed read garbage, stores that failed are dropped, and the launch then
raises :class:`~thork_core.BoundsError` (:class:`DebugExecutable` reads the record).

Bounds: a pointer parameter's bound is its argument's element count, a hidden ``int64``
parameter ``thork_span_<name>`` filled in at launch (derived kind ``"span"``); a static
shared, local or module-level array's is its declared count; dynamic shared memory's is
the launch's dynamic shared bytes (read on the GPU from ``%dynamic_smem_size``) less the
view's offset, in elements. Views (``a + k``) shift the range; a device function receives
the range of each pointer argument as two hidden parameters.

Code built without debug mode is unchanged: nothing here runs and the renderers add their
debug preludes only for instrumented kernels (``KernelIR.debug_sites`` not None).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from typing import Any

from ._dtype import dt
from ._errors import BoundsError
from ._ir import (
    LDMATRIX_OPS,
    Assign,
    AsyncCopy,
    Atomic,
    Binary,
    CallFunc,
    Cast,
    Const,
    Expr,
    For,
    Function,
    If,
    KernelIR,
    Let,
    Load,
    Loc,
    LocalDecl,
    Offset,
    Param,
    PointerType,
    Select,
    SharedDecl,
    Special,
    Stmt,
    Store,
    Var,
    VecLoad,
    VecStore,
    VectorType,
    Warp,
    While,
    node_fields,
    replace,
)
from ._record import FrozenRecord
from ._renderer import CUDA_DEBUG_PRELUDE, RECORD_STRUCT
from ._target import Executable

__all__ = ["Site", "instrument", "debug_default", "DebugExecutable", "DebugRecord",
           "CUDA_DEBUG_PRELUDE", "RECORD_STRUCT", "RECORD_SYMBOL"]

#: Name of the error record every debug build exports (a C symbol, unmangled).
RECORD_SYMBOL = "thork_dbg_record"

_I64 = dt.int64
_NO_LO = Const(_I64, -(2**63) + 1)  # an argument whose range is unknown: unchecked
_NO_HI = Const(_I64, 2**63 - 1)


def debug_default() -> bool:
    """Whether ``THORK_DEBUG`` asks for debug mode (``1``/``true``/``yes``/``on``)."""
    from ._env import env_flag

    return env_flag("THORK_DEBUG", False)


class Site(FrozenRecord):
    """One checked access: which array, how, and where in the Python source (immutable,
    compared by its fields: a frozen dataclass written out, :mod:`thork_core._record`)."""

    _fields = ("kernel", "array", "space", "param_index", "access", "loc", "width",
               "function")
    kernel: str
    array: str
    #: ``"parameter"``, ``"shared"``, ``"dynamic shared"``, ``"local"``, ``"module"``.
    space: str
    #: Position among the kernel's parameters (pointer parameters only).
    param_index: int | None
    #: ``"load"``, ``"store"``, ``"atomic"``.
    access: str
    loc: Loc | None
    #: Elements one access covers (vector loads and stores), for the message.
    width: int
    #: The device function whose parameter ``array`` is (None: the kernel's own).
    function: str | None

    def __init__(self, kernel: str, array: str, space: str, param_index: int | None,
                 access: str, loc: Loc | None, width: int = 1,
                 function: str | None = None) -> None:
        d = self.__dict__
        d["kernel"], d["array"], d["space"], d["param_index"] = kernel, array, space, \
            param_index
        d["access"], d["loc"], d["width"], d["function"] = access, loc, width, function


class _Range:
    """Valid indices ``lo <= i < hi`` of a pointer expression, and what it points into."""

    __slots__ = ("lo", "hi", "array", "space", "param_index", "function")

    def __init__(self, lo: Expr, hi: Expr, array: str, space: str,
                 param_index: int | None, function: str | None = None) -> None:
        self.lo, self.hi = lo, hi
        self.array, self.space, self.param_index = array, space, param_index
        self.function = function

    def shifted(self, by: Expr) -> _Range:
        off = by if by.type == _I64 else Cast(_I64, by)
        return _Range(Binary(_I64, "sub", self.lo, off), Binary(_I64, "sub", self.hi, off),
                      self.array, self.space, self.param_index, self.function)


class _Instrumenter:
    def __init__(self, ir: KernelIR) -> None:
        self.ir = ir
        self.sites: list[Site] = []
        self.functions = {f.name: f for f in ir.functions}
        # Per device function: its pointer parameters' positions (hidden range params).
        self.fn_pointers = {f.name: [i for i, p in enumerate(f.params)
                                     if isinstance(p.type, PointerType)]
                            for f in ir.functions}
        self.module = {g.var.name: _Range(Const(_I64, 0), Const(_I64, g.count), g.var.name,
                                          "module", None) for g in ir.globals}

    # -- drivers --------------------------------------------------------------------------
    def kernel(self) -> KernelIR:
        ir = self.ir
        env = dict(self.module)
        spans = []
        for i, p in enumerate(ir.params):
            if isinstance(p.type, PointerType) and p.derived is None:
                name = f"thork_span_{p.name}"
                spans.append(Param(name, _I64, derived=(p.name, "span", 0)))
                env[p.name] = _Range(Const(_I64, 0), Var(_I64, name), p.name, "parameter", i)
        mutable = set(ir.mutable)
        functions = [self.function(f) for f in ir.functions]
        body = self.block(ir.body, env, mutable)
        return replace(ir, params=list(ir.params) + spans, body=body,
                       mutable=mutable, functions=functions,
                       debug_sites=self.sites)

    def function(self, f: Function) -> Function:
        env = dict(self.module)
        extra = []
        for i in self.fn_pointers[f.name]:
            p = f.params[i]
            lo, hi = f"thork_lo_{p.name}", f"thork_hi_{p.name}"
            extra += [Param(lo, _I64), Param(hi, _I64)]
            # The tracer names a device function's parameters 'p_<python name>'.
            label = p.name[2:] if p.name.startswith("p_") else p.name
            env[p.name] = _Range(Var(_I64, lo), Var(_I64, hi), label, "parameter", None,
                                 f.name)
        mutable = set(f.mutable)
        body = self.block(f.body, env, mutable)
        return replace(f, params=list(f.params) + extra, body=body,
                       mutable=mutable)

    # -- statements -----------------------------------------------------------------------
    def block(self, stmts: list[Stmt], env: dict[str, _Range], mutable: set[str]
              ) -> list[Stmt]:
        env = dict(env)  # declarations are scoped to their block
        out: list[Stmt] = []
        for s in stmts:
            out.extend(self.stmt(s, env, mutable))
        return out

    def stmt(self, s: Stmt, env: dict[str, _Range], mutable: set[str]) -> list[Stmt]:
        loc = s.loc
        x = lambda e: self.expr(e, env, loc)  # noqa: E731 - local shorthand
        if isinstance(s, SharedDecl):
            t = s.var.type
            assert isinstance(t, PointerType)
            if s.dynamic:
                hi: Expr = Special(_I64, f"thork_dyn_count({s.offset}, {t.elem.itemsize})")
                env[s.var.name] = _Range(Const(_I64, 0), hi, s.var.name, "dynamic shared", None)
            else:
                env[s.var.name] = _Range(Const(_I64, 0), Const(_I64, s.count), s.var.name,
                                         "shared", None)
            return [s]
        if isinstance(s, LocalDecl):
            env[s.var.name] = _Range(Const(_I64, 0), Const(_I64, s.count), s.var.name,
                                     "local", None)
            return [s]
        if isinstance(s, (Let, Assign)):
            new = replace(s, value=x(s.value))
            if not isinstance(s.var.type, PointerType):
                return [new]
            r = self.range_of(s.value, env)
            lo_v, hi_v = Var(_I64, f"thork_lo_{s.var.name}"), Var(_I64, f"thork_hi_{s.var.name}")
            if r is None:
                r = _Range(_NO_LO, _NO_HI, s.var.name, "pointer", None)
            if isinstance(s, Let):
                if s.var.name in mutable:
                    mutable.update((lo_v.name, hi_v.name))
                env[s.var.name] = _Range(lo_v, hi_v, r.array, r.space, r.param_index,
                                         r.function)
                return [new, Let(lo_v, r.lo, loc=loc), Let(hi_v, r.hi, loc=loc)]
            # A pointer re-assigned: its range follows (computed before the assignment).
            tmp_lo = Var(_I64, f"thork_nlo_{s.var.name}_{len(self.sites)}")
            tmp_hi = Var(_I64, f"thork_nhi_{s.var.name}_{len(self.sites)}")
            return [Let(tmp_lo, r.lo, loc=loc), Let(tmp_hi, r.hi, loc=loc), new,
                    Assign(lo_v, tmp_lo, loc=loc), Assign(hi_v, tmp_hi, loc=loc)]
        if isinstance(s, Store):
            ptr = self.checked(s.pointer, s.index, env, loc, "store", 1)
            if ptr is None:
                return [replace(s, pointer=x(s.pointer), index=x(s.index),
                                value=x(s.value))]
            return [Store(ptr, Const(dt.int32, 0), x(s.value), s.cache, loc=loc)]
        if isinstance(s, VecStore):
            ptr = self.checked(s.pointer, s.index, env, loc, "store", len(s.values))
            values = tuple(x(v) for v in s.values)
            if ptr is None:
                return [replace(s, pointer=x(s.pointer), index=x(s.index),
                                values=values)]
            return [VecStore(ptr, Const(dt.int32, 0), values, s.cache, loc=loc)]
        if isinstance(s, If):
            return [replace(s, cond=x(s.cond), then=self.block(s.then, env, mutable),
                            orelse=self.block(s.orelse, env, mutable))]
        if isinstance(s, For):
            return [replace(s, start=x(s.start), stop=x(s.stop), step=x(s.step),
                            body=self.block(s.body, env, mutable))]
        if isinstance(s, While):
            head = self.block(s.head, env, mutable)
            return [replace(s, head=head, cond=x(s.cond),
                            body=self.block(s.body, env, mutable))]
        if isinstance(s, AsyncCopy):
            return self.async_copy(s, env, loc)
        # Everything else: rewrite the expressions it holds.
        changes: dict[str, Any] = {}
        for name in node_fields(s):
            v = getattr(s, name)
            if isinstance(v, Expr):
                changes[name] = x(v)
            elif isinstance(v, tuple) and v and all(isinstance(a, Expr) for a in v):
                changes[name] = tuple(x(a) for a in v)
        return [replace(s, **changes) if changes else s]

    def ok(self, pointer: Expr, index: Expr, env: dict[str, _Range], loc: Loc | None,
           access: str, width: Expr | int) -> Expr | None:
        """``thork_ok(index, lo, hi, site)``: whether ``pointer[index]`` and the ``width``
        elements from there (an int, or an int64 expression of at least 1) are in range,
        recording the violation otherwise; None for a pointer of unknown range. For the
        accesses that cannot be redirected to the scratch cell (shared-memory-only PTX).
        A run-time width checks the first and the last element (the report names the
        element that is out)."""
        r = self.range_of(pointer, env)
        if r is None:
            return None
        idx = self.expr(index, env, loc)
        idx = idx if idx.type == _I64 else Cast(_I64, idx)

        def check(i: Expr, n: int) -> Expr:
            site = len(self.sites)
            self.sites.append(Site(self.ir.name, r.array, r.space, r.param_index, access,
                                   loc, n, r.function))
            hi = r.hi if n == 1 else Binary(_I64, "sub", r.hi, Const(_I64, n - 1))
            return CallFunc(dt.bool, "thork_ok", (i, r.lo, hi, Const(dt.int32, site)))

        if isinstance(width, int):
            return check(idx, width)
        last = Binary(_I64, "sub", Binary(_I64, "add", idx, width), Const(_I64, 1))
        return Binary(dt.bool, "land", check(idx, 1), check(last, 1))

    def async_copy(self, s: AsyncCopy, env: dict[str, _Range], loc: Loc | None
                   ) -> list[Stmt]:
        """``cp.async``: the copy runs only when its destination (``nbytes``, zero fill
        included) and the ``src_bytes`` it reads are inside their arrays (a shared address
        cannot be swapped for the global scratch cell). ``src_bytes == 0`` reads nothing,
        so its source is not checked (a tile's edge may pass any address there)."""
        new = replace(s, dst=self.expr(s.dst, env, loc),
                      dst_index=self.expr(s.dst_index, env, loc),
                      src=self.expr(s.src, env, loc),
                      src_index=self.expr(s.src_index, env, loc),
                      src_bytes=self.expr(s.src_bytes, env, loc))
        dt_, st = s.dst.type, s.src.type
        assert isinstance(dt_, PointerType) and isinstance(st, PointerType)
        out: list[Stmt] = [new]
        isz = st.elem.itemsize
        sb = s.src_bytes
        if isinstance(sb, Const):
            n = int(sb.value)
            ok_src = None if n == 0 else self.ok(s.src, s.src_index, env, loc,
                                                 "cp.async load", -(-n // isz))
        else:  # ceil(src_bytes / itemsize) elements, none for 0
            b = Cast(_I64, self.expr(sb, env, loc))
            width = Binary(_I64, "div", Binary(_I64, "add", b, Const(_I64, isz - 1)),
                           Const(_I64, isz))
            check = self.ok(s.src, s.src_index, env, loc, "cp.async load", width)
            ok_src = None if check is None else Binary(
                dt.bool, "lor", Binary(dt.bool, "eq", b, Const(_I64, 0)), check)
        ok_dst = self.ok(s.dst, s.dst_index, env, loc, "cp.async store",
                         s.nbytes // dt_.elem.itemsize)
        for cond in (ok_src, ok_dst):  # the destination is checked first, then the source
            if cond is not None:
                out = [If(cond, out, [], loc=loc)]
        return out

    def ldmatrix(self, e: Warp, env: dict[str, _Range], loc: Loc | None) -> Expr:
        """``ldmatrix``: each of lanes ``0 .. 8 * num - 1`` passes the start of one 16-byte
        row (the other lanes' addresses are not read). The instruction is warp-wide, so a
        row out of range is recorded and replaced by the array's start (a valid shared
        address) rather than skipped."""
        (addr,) = e.args
        r = self.range_of(addr, env)
        new = replace(e, args=(self.expr(addr, env, loc),))
        assert isinstance(addr.type, PointerType)
        width = 16 // addr.type.elem.itemsize
        ok = self.ok(addr, Const(_I64, 0), env, loc, "ldmatrix load", width)
        if ok is None or r is None:
            return new
        num = int(e.op.split(".")[1][1:])  # "ldmatrix.x{num}[.trans]"
        if num < 4:  # lanes past 8 * num pass any address: not checked
            u = dt.uint32
            t_, d_ = (lambda a: Special(u, f"threadIdx.{a}")), \
                (lambda a: Special(u, f"blockDim.{a}"))
            linear = Binary(u, "add", t_("x"), Binary(u, "mul", d_("x"), Binary(
                u, "add", t_("y"), Binary(u, "mul", d_("y"), t_("z")))))
            lane = Binary(u, "and", linear, Const(u, 31))
            ok = Binary(dt.bool, "lor", Binary(dt.bool, "ge", lane, Const(u, 8 * num)), ok)
        start = Offset(addr.type, new.args[0], r.lo)
        return replace(e, args=(Select(addr.type, ok, new.args[0], start),))

    # -- expressions ----------------------------------------------------------------------
    def range_of(self, p: Expr, env: dict[str, _Range]) -> _Range | None:
        """The valid index range of pointer expression ``p`` (None: not known)."""
        if isinstance(p, Var):
            return env.get(p.name)
        if isinstance(p, Offset):
            r = self.range_of(p.pointer, env)
            return None if r is None else r.shifted(p.offset)
        return None

    def checked(self, pointer: Expr, index: Expr, env: dict[str, _Range], loc: Loc | None,
                access: str, width: int) -> Expr | None:
        """``thork_at(pointer, index, lo, hi, site)`` (a pointer to the element, or to
        scratch after recording a violation), or None for a pointer of unknown range."""
        r = self.range_of(pointer, env)
        if r is None:
            return None
        site = len(self.sites)
        self.sites.append(Site(self.ir.name, r.array, r.space, r.param_index, access, loc,
                               width, r.function))
        hi = r.hi if width == 1 else Binary(_I64, "sub", r.hi, Const(_I64, width - 1))
        idx = self.expr(index, env, loc)
        args = (self.expr(pointer, env, loc), idx if idx.type == _I64 else Cast(_I64, idx),
                r.lo, hi, Const(dt.int32, site))
        return CallFunc(pointer.type, "thork_at", args)

    def expr(self, e: Expr, env: dict[str, _Range], loc: Loc | None) -> Expr:
        if isinstance(e, Load):
            ptr = self.checked(e.pointer, e.index, env, loc, "load", 1)
            if ptr is not None:
                return Load(e.type, ptr, Const(dt.int32, 0), e.cache)
        elif isinstance(e, VecLoad):
            assert isinstance(e.type, VectorType)
            ptr = self.checked(e.pointer, e.index, env, loc, "load", e.type.n)
            if ptr is not None:
                return VecLoad(e.type, ptr, Const(dt.int32, 0), e.cache)
        elif isinstance(e, Atomic):
            ptr = self.checked(e.pointer, e.index, env, loc, "atomic", 1)
            if ptr is not None:
                args = tuple(self.expr(a, env, loc) for a in e.args)
                return replace(e, pointer=ptr, index=Const(dt.int32, 0), args=args)
        elif isinstance(e, Warp) and e.op in LDMATRIX_OPS:
            return self.ldmatrix(e, env, loc)
        elif isinstance(e, CallFunc) and e.name in self.fn_pointers:
            call_args: list[Expr] = [self.expr(a, env, loc) for a in e.args]
            for i in self.fn_pointers[e.name]:
                r = self.range_of(e.args[i], env)
                call_args += [_NO_LO, _NO_HI] if r is None else [r.lo, r.hi]
            return replace(e, args=tuple(call_args))
        changes: dict[str, Any] = {}
        for name in node_fields(e):
            v = getattr(e, name)
            if isinstance(v, Expr):
                changes[name] = self.expr(v, env, loc)
            elif isinstance(v, tuple) and v and all(isinstance(a, Expr) for a in v):
                changes[name] = tuple(self.expr(a, env, loc) for a in v)
        return replace(e, **changes) if changes else e


def instrument(ir: KernelIR) -> KernelIR:
    """``ir`` with a bounds check on every array access (a new IR; ``ir`` is unchanged).

    Adds one hidden ``int64`` parameter ``thork_span_<name>`` per pointer parameter (its
    argument's element count, filled in at launch) and sets ``debug_sites``."""
    if ir.debug_sites is not None:
        return ir
    return _Instrumenter(ir).kernel()


# -- the device side: RECORD_STRUCT and CUDA_DEBUG_PRELUDE (in _renderer, which prints them)


class DebugRecord(ctypes.Structure):
    """Host mirror of ``thork_dbg_rec`` (56 bytes, the same on every target)."""

    _fields_ = [("flag", ctypes.c_uint32), ("site", ctypes.c_int32),
                ("index", ctypes.c_int64), ("lo", ctypes.c_int64), ("hi", ctypes.c_int64),
                ("block", ctypes.c_uint32 * 3), ("thread", ctypes.c_uint32 * 3)]


def bounds_error(record: DebugRecord, sites: Sequence[Site]) -> BoundsError:
    """The :class:`BoundsError` for a record whose flag is set."""
    site = sites[record.site] if 0 <= record.site < len(sites) else None
    if site is None:
        return BoundsError(f"debug mode: out-of-bounds access (unknown site {record.site})")
    where = f"{site.loc.file}:{site.loc.line}" if site.loc is not None else "<unknown>"
    what = {"parameter": f"parameter '{site.array}'" + (
        f" (#{site.param_index})" if site.param_index is not None else "") + (
        f" of device function '{site.function}'" if site.function else ""),
        "module": f"module-level array '{site.array}'"}.get(
        site.space, f"{site.space} array '{site.array}'")
    lo, hi, index = record.lo, record.hi + site.width - 1, record.index
    width = f" ({site.width} elements from there)" if site.width > 1 else ""
    size = f"the array has {hi} element(s)" if lo == 0 else \
        f"the pointer is a view {-lo} element(s) into an array of {hi - lo}"
    block, thread = tuple(record.block), tuple(record.thread)
    msg = (f"{site.kernel}: out-of-bounds {site.access} of {what} at {where}: index "
           f"{index}{width} is outside {lo}..{hi - 1} ({size}); "
           f"block {block}, thread {thread}")
    return BoundsError(msg, kernel=site.kernel, array=site.array,
                       param_index=site.param_index, index=index, lo=lo, hi=hi,
                       file=site.loc.file if site.loc else None,
                       line=site.loc.line if site.loc else None, block=block, thread=thread)


class DebugExecutable(Executable):
    """Wraps a debug build's executable: each launch clears the record, runs, waits for
    the kernel (GPU: synchronizes the launch's stream) and raises :class:`BoundsError`
    when a check failed. Launches of one debug kernel are serialized (the record is one
    per loaded module). The wrapped executable supplies ``debug_read()`` (the record) and
    ``debug_clear()``."""

    def __init__(self, inner: Any, sites: Sequence[Site]) -> None:
        self._inner = inner
        self._sites = list(sites)
        self._lock = threading.Lock()
        self.kernel = inner.kernel
        # No launcher of its own: a front-end's fast path that would call the launcher
        # directly (skipping the record) finds none and takes launch()/prepare() instead.
        self.launcher = None
        self._binder = None

    def __getattr__(self, name: str) -> Any:
        if name == "_inner":  # not yet set (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self._inner, name)

    def launch(self, grid: Any, block: Any, args: Sequence[Any], *, stream: Any = None,
               shared_mem: int = 0) -> None:
        with self._lock:
            self._inner.debug_clear()
            self._inner.launch(grid, block, args, stream=stream, shared_mem=shared_mem)
            self.check(stream)

    def check(self, stream: Any = None) -> None:
        """Wait for the launch, then raise :class:`BoundsError` for a recorded violation."""
        record = self._inner.debug_read(stream)
        if record.flag:
            self._inner.debug_clear()
            raise bounds_error(record, self._sites)

    def prepare(self, grid: Any, block: Any, values: Sequence[Any], *,
                shared_mem: int = 0) -> Any:
        return _DebugPrepared(self, self._inner.prepare(grid, block, values,
                                                        shared_mem=shared_mem))


class _DebugPrepared:
    """A prepared launch of a debug build: checked after every call."""

    def __init__(self, exe: DebugExecutable, inner: Any) -> None:
        self._exe, self._inner = exe, inner
        self.call = self.__call__  # the hot entry front-ends take: checked too

    def __getattr__(self, name: str) -> Any:
        if name == "_inner":
            raise AttributeError(name)
        return getattr(self._inner, name)

    def guard(self, *args: Any, **kwargs: Any) -> None:
        """No guarded native call in debug mode: every launch takes the checked path."""
        return None

    def __call__(self, pointers: Sequence[int], stream: int = 0) -> None:
        with self._exe._lock:
            self._exe._inner.debug_clear()
            self._inner(pointers, stream)
            self._exe.check(stream)
