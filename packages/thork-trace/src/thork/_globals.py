"""Module-level arrays: ``__constant__`` data from NumPy and ``__device__`` variables.

``FILTER = tk.const_array(np_taps)`` made at module level (or anywhere in Python) is a
read-only array every kernel that indexes it can use: CUDA constant memory, broadcast to
all threads of a warp reading one address. Its values are part of the generated source
(and so of the cache key): the data is fixed per compiled module, as ``__constant__``
arrays initialised in a ``.cu`` file are.

``TICKETS = tk.device_array(tk.dt.uint32, 1)`` is a ``__device__`` variable: zero (or
``init``) when the kernel's module is loaded, then it keeps its contents across launches
of that kernel — the block-ticket counter of a last-block reduction, reset by the kernel
itself. Each kernel (each specialization) that uses it has its own copy in its own
module; on the CPU target, a static of the loaded library.
"""

from __future__ import annotations

import itertools
import math
import threading
from typing import Any

from thork_core import TraceError, dtype_of
from thork_core.ir import Expr, GlobalDecl, PointerType, Var

from ._shared import SharedArray
from ._trace import current

__all__ = ["GlobalArray", "const_array", "device_array", "MAX_CONSTANT_BYTES"]

#: CUDA's constant memory per module.
MAX_CONSTANT_BYTES = 64 * 1024

_names = itertools.count()
_names_lock = threading.Lock()


class GlobalArray(SharedArray):
    """A module-level array (see the module docstring); indexes like a shared array."""

    __slots__ = ("decl",)

    def __init__(self, decl: GlobalDecl, shape: tuple[int, ...], name: str) -> None:
        super().__init__(decl.var, shape, name)
        self.decl = decl

    @property
    def kind(self) -> str:  # type: ignore[override]
        return "constant array" if self.space == "constant" else "device array"

    def _declare(self) -> None:
        root = current().root
        if all(g is not self.decl for g in root.globals):
            root.globals.append(self.decl)

    def index_expr(self, i: Any) -> Expr:
        self._declare()
        return super().index_expr(i)

    def mark_written(self) -> None:
        if self.space == "constant":
            raise TraceError(f"constant array '{self.name}' is read-only in kernels")

    def __repr__(self) -> str:
        return f"<{self.kind} {self.dtype.name}{list(self.shape or ())} {self.name}>"


def _new_name(prefix: str) -> str:
    with _names_lock:
        return f"thork_{prefix}{next(_names)}"


def const_array(values: Any, dtype: Any = None) -> GlobalArray:
    """Constant memory holding ``values`` (a NumPy array or nested lists; ``dtype``
    defaults to the array's), at most 64 KiB; indexed ``c[i]`` (``c[y, x]`` for 2-D)."""
    import numpy as np

    arr = np.asarray(values)
    t = dtype_of(dtype if dtype is not None else arr.dtype)
    if arr.size == 0:
        raise TraceError("tk.const_array(): no values")
    if arr.size * t.itemsize > MAX_CONSTANT_BYTES:
        raise TraceError(f"tk.const_array(): {arr.size * t.itemsize} bytes is over CUDA's "
                         f"{MAX_CONSTANT_BYTES}-byte constant memory")
    np_t = np.dtype(t.name) if t.name != "bfloat16" else None
    if t.is_float and not np.all(np.isfinite(arr.astype(np.float64))):
        raise TraceError("tk.const_array(): values must be finite (NaN/inf cannot be "
                         "written as constant initializers)")
    if t.is_half:
        if np_t is None:  # bfloat16: round to nearest even from float32 bits
            u = arr.astype(np.float32).reshape(-1).view(np.uint32).astype(np.uint64)
            init = tuple(int(b) for b in ((u + 0x7FFF + ((u >> 16) & 1)) >> 16))
        else:
            init = tuple(int(b) for b in arr.astype(np_t).reshape(-1).view(np.uint16))
    else:
        init = tuple(arr.astype(np_t).reshape(-1).tolist())
    name = _new_name("c")
    decl = GlobalDecl(Var(PointerType(t, "constant"), name), int(arr.size), init)
    return GlobalArray(decl, tuple(int(n) for n in arr.shape) or (1,), name)


def device_array(dtype: Any, shape: int | tuple[int, ...], init: Any = None) -> GlobalArray:
    """A ``__device__`` array of ``shape``: ``init`` (or zeros) when the kernel's module
    loads, then persistent across its launches; read, written and used with atomics."""
    import numpy as np

    t = dtype_of(dtype)
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    if not dims or not all(isinstance(d, int) and d > 0 for d in dims):
        raise TraceError(f"tk.device_array(): shape must be positive ints, got {shape!r}")
    count = math.prod(dims)
    values = None
    if init is not None:
        arr = np.broadcast_to(np.asarray(init), dims)
        if t.is_half:
            raise TraceError("tk.device_array(): float16/bfloat16 arrays start as zeros")
        values = tuple(arr.astype(np.dtype(t.name)).reshape(-1).tolist())
    name = _new_name("g")
    decl = GlobalDecl(Var(PointerType(t, "global"), name), count, values)
    return GlobalArray(decl, dims, name)
