"""Block-shared memory: ``tk.shared_array(dtype, shape)`` and ``tk.dynamic_shared(dtype)``.

A shared array is visible to every thread of a block and lives as long as the block.
Static arrays have a shape known at trace time (``s[ty, tx]`` indexes row-major, and an
index known at trace time is bounds-checked then); dynamic shared memory is sized at
launch (``kernel[grid, block, shared_bytes]``) and is a flat array of unknown length.
"""

from __future__ import annotations

import math
from typing import Any

from thork_core import DType, PointerType, TraceError, dtype_of
from thork_core.ir import Binary, Const, Expr, LocalDecl, SharedDecl, Var

from ._trace import Memory, _index_value, _to, current

__all__ = ["SharedArray", "LocalArray", "shared_array", "dynamic_shared", "local_array",
           "MAX_STATIC_SHARED", "MAX_LOCAL_BYTES"]

#: Static shared memory per block that every arch (sm_75+) accepts: 48 KiB.
MAX_STATIC_SHARED = 48 * 1024


class SharedArray(Memory):
    """A shared-memory array of ``shape`` (None for dynamic shared memory)."""

    __slots__ = ("expr", "shape", "name")
    #: What error messages call it.
    kind = "shared array"

    def __init__(self, expr: Expr, shape: tuple[int, ...] | None, name: str) -> None:
        self.expr = expr
        self.shape = shape
        self.name = name

    @property
    def label(self) -> str:
        return self.name

    @property
    def size(self) -> int | None:
        """Number of elements (None for dynamic shared memory)."""
        return None if self.shape is None else math.prod(self.shape)

    def index_expr(self, i: Any) -> Expr:
        idx = i if isinstance(i, tuple) else (i,)
        shape = self.shape
        if shape is None:
            if len(idx) != 1:
                raise TraceError(f"dynamic shared array '{self.name}' is flat: index it with "
                                 f"one integer, got {len(idx)} indices")
            return _index_value(idx[0], self.name).expr
        if len(idx) != len(shape):
            raise TraceError(f"{self.kind} '{self.name}' has shape {shape}: index it with "
                             f"{len(shape)} integer(s), got {len(idx)}")
        flat: Expr | None = None
        trace = current()
        for axis, (x, dim) in enumerate(zip(idx, shape)):
            v = _index_value(x, self.name)
            if isinstance(v.expr, Const) and not 0 <= int(v.expr.value) < dim:
                raise TraceError(
                    f"index {v.expr.value} is out of bounds for axis {axis} of {self.kind} "
                    f"'{self.name}' with shape {shape}")
            e = v.expr
            if flat is None:
                flat = e
                continue
            # Row-major: flat = flat * dim + e, in a common integer type.
            t = _index_type(flat.type, e.type)  # type: ignore[arg-type]
            fl, ee = _const_or_cast(flat, t), _const_or_cast(e, t)
            if isinstance(fl, Const) and isinstance(ee, Const):
                flat = Const(t, int(fl.value) * dim + int(ee.value))
                continue
            scaled = trace.temp(Binary(t, "mul", fl, Const(t, dim)))
            flat = trace.temp(Binary(t, "add", scaled, ee))
        assert flat is not None
        return flat

    def __repr__(self) -> str:
        shape = "dynamic" if self.shape is None else "x".join(map(str, self.shape))
        return f"<{self.kind.split()[0]} {self.dtype.name}[{shape}] {self.name}>"


class LocalArray(SharedArray):
    """A per-thread array of a static ``shape`` (``tk.local_array``)."""

    __slots__ = ()
    kind = "local array"


def _index_type(a: DType, b: DType) -> DType:
    from thork_core import promote

    return promote(a, b)


def _const_or_cast(e: Expr, t: DType) -> Expr:
    from ._trace import Value

    return _to(Value(e), t)


def _dims(shape: Any, what: str, hint: str) -> tuple[int, ...]:
    dims = (shape,) if isinstance(shape, int) else tuple(shape) if isinstance(
        shape, (tuple, list)) else None
    if not dims or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0
                           for d in dims):
        raise TraceError(
            f"tk.{what}(): shape must be a positive int or a tuple of positive ints "
            f"known at trace time, got {shape!r}{hint}")
    return dims


#: Bytes a per-thread array may take: the CPU target runs threads that synchronize on
#: 64 KiB fiber stacks (the GPU allows more, but kernels should agree on both targets).
MAX_LOCAL_BYTES = 16 * 1024


def local_array(dtype: Any, shape: int | tuple[int, ...]) -> LocalArray:
    """Declare a per-thread array (CUDA ``T a[n];`` in the kernel body): every thread has
    its own, uninitialized; indices may be run-time values (the compiler then keeps it in
    local memory; constant indices after unrolling let it live in registers). ``shape``
    is known at trace time; at most :data:`MAX_LOCAL_BYTES` per array."""
    t = dtype_of(dtype)
    dims = _dims(shape, "local_array", "")
    count = math.prod(dims)
    if count * t.itemsize > MAX_LOCAL_BYTES:
        raise TraceError(f"tk.local_array({t.name}, {shape}) is {count * t.itemsize} bytes per "
                         f"thread, over the {MAX_LOCAL_BYTES}-byte limit; use shared or "
                         "global memory")
    trace = current()
    name = trace.fresh("loc")
    var = Var(PointerType(t, "local"), name)
    trace.emit(LocalDecl(var, count))
    return LocalArray(var, dims, name)


def shared_array(dtype: Any, shape: int | tuple[int, ...]) -> SharedArray:
    """Declare a static shared-memory array (CUDA ``__shared__ T s[...]``).

    ``shape`` is an int or a tuple of ints known at trace time (use ``tk.Constexpr``
    parameters or Python values); the total must fit 48 KiB per block.
    """
    t = dtype_of(dtype)
    dims = _dims(shape, "shared_array", " (a traced size needs tk.dynamic_shared)")
    trace = current()
    count = math.prod(dims)
    root = trace.root
    root.static_shared += count * t.itemsize
    if root.static_shared > MAX_STATIC_SHARED:
        raise TraceError(
            f"tk.shared_array({t.name}, {shape}) brings the block's static shared memory to "
            f"{root.static_shared} bytes, over the {MAX_STATIC_SHARED}-byte limit; use "
            "tk.dynamic_shared for more")
    name = trace.fresh("sh")
    var = Var(PointerType(t, "shared"), name)
    trace.emit(SharedDecl(var, count))
    return SharedArray(var, dims, name)


def dynamic_shared(dtype: Any, offset: int = 0) -> SharedArray:
    """The launch's dynamic shared memory as a flat array of ``dtype``.

    Its size in bytes is the third launch parameter: ``kernel[grid, block, nbytes]``.
    ``offset`` (bytes, a multiple of 16 and of the element size) places several arrays in
    the one dynamic region.
    """
    t: DType = dtype_of(dtype)
    if not isinstance(offset, int) or offset < 0 or offset % 16:
        raise TraceError(f"tk.dynamic_shared(): offset must be a non-negative multiple of 16 "
                         f"bytes, got {offset!r}")
    trace = current()
    name = trace.fresh("dsh")
    var = Var(PointerType(t, "shared"), name)
    trace.emit(SharedDecl(var, 0, dynamic=True, offset=offset))
    return SharedArray(var, None, name)
