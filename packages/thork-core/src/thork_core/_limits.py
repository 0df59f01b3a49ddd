"""What a launch may ask for, checked before it runs (docs/guarantees.md, "Checked before
launch"): dynamic shared memory within what a block can have beside the kernel's static
use, scalars representable in their parameter's type, and output arrays that share no
memory with inputs. Each failure is a :class:`~thork_core.ArgumentError` naming the kernel,
the parameter, what was expected and what came.

Launch geometry (block and grid dimensions, threads per block) is checked by
:func:`thork_core._target.normalize_dims`; byte order by
:func:`thork_core._dtype.from_numpy`.
"""

from __future__ import annotations

import math
from typing import Any

from ._dtype import DType, dt
from ._errors import ArgumentError

__all__ = ["MAX_SHARED_PER_BLOCK", "shared_bytes", "static_shared_bytes", "float_scalar",
           "byte_range", "memory_range", "overlapping"]

#: Shared memory one block may use, in bytes, static and dynamic together: sm_90's opt-in
#: maximum (227 KiB), the most any arch Thork targets allows. The CPU target applies it
#: too, so a launch that runs there also fits a GPU; a GPU with less (sm_75: 64 KiB) is
#: checked against its own limit by the driver when the launch opts in.
MAX_SHARED_PER_BLOCK = 227 * 1024


def shared_bytes(kernel: str, value: Any, static: int = 0) -> int:
    """``value`` as a dynamic shared memory size in bytes, or a named error: it must be a
    non-negative int and, with the kernel's ``static`` bytes, fit one block."""
    import operator

    if isinstance(value, bool):
        raise ArgumentError(f"{kernel}[grid, block, shared_bytes]: shared_bytes must be a "
                            f"non-negative int, got {value!r}")
    try:
        n = operator.index(value)
    except TypeError:
        raise ArgumentError(f"{kernel}[grid, block, shared_bytes]: shared_bytes must be a "
                            f"non-negative int, got {type(value).__name__} {value!r}") from None
    if n < 0:
        raise ArgumentError(f"{kernel}[grid, block, shared_bytes]: shared_bytes must be a "
                            f"non-negative int, got {n}")
    if n + static > MAX_SHARED_PER_BLOCK:
        used = f" beside the kernel's {static} static bytes" if static else ""
        raise ArgumentError(
            f"{kernel}[grid, block, shared_bytes]: {n} bytes of dynamic shared memory"
            f"{used} exceed the {MAX_SHARED_PER_BLOCK} bytes a block can have "
            f"(expected at most {MAX_SHARED_PER_BLOCK - static})")
    return n


def static_shared_bytes(ir: Any) -> int:
    """Bytes of static shared memory ``ir`` (a KernelIR) declares, each array 16-byte
    aligned (the layout both targets use). Memoized on the IR object."""
    got = getattr(ir, "_thork_static_shared", None)
    if got is not None:
        return int(got)
    from ._ir import PointerType, SharedDecl, walk_stmts

    total = 0
    for body in [ir.body] + [f.body for f in ir.functions]:
        for s in walk_stmts(body):
            if isinstance(s, SharedDecl) and not s.dynamic:
                assert isinstance(s.var.type, PointerType)
                total += (s.count * s.var.type.elem.itemsize + 15) // 16 * 16
    try:
        ir._thork_static_shared = total
    except AttributeError:  # a slotted IR: recomputed each time
        pass
    return total


_FLOAT_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38,
              "float32": 3.4028234663852886e38}
# Half an ulp above the largest finite value: anything below rounds to it, not to inf.
_FLOAT_EDGE = {"float16": 65520.0, "bfloat16": 3.3961775292304795e38,
               "float32": 3.4028235677973366e38}


def float_scalar(value: float, t: DType, where: str) -> float:
    """``value`` for a ``t`` scalar parameter, or an error when a finite value would round
    to infinity in ``t`` (inf and nan given as such pass: they are what was asked for)."""
    edge = _FLOAT_EDGE.get(t.name)
    if edge is not None and math.isfinite(value) and abs(value) >= edge:
        raise ArgumentError(
            f"{where} is {t.name}: expected a value of magnitude at most "
            f"{_FLOAT_MAX[t.name]:g} (the largest finite {t.name}), got {value!r}, which "
            f"would become inf; pass float('inf') if that is meant, or use a "
            f"{'float64' if t != dt.float64 else 'wider'} parameter")
    return value


def memory_range(arr: Any) -> tuple[str, int, int] | None:
    """``(device, first byte, one past the last byte)`` an array's elements occupy, or None
    when it exposes no address (NumPy's ``__array_interface__`` or
    ``__cuda_array_interface__``; strides and negative strides included)."""
    for attr, device in (("__cuda_array_interface__", "cuda"), ("__array_interface__", "cpu")):
        iface = getattr(arr, attr, None)
        if iface is None:
            continue
        lo, hi = byte_range(iface["data"][0] or 0, tuple(iface["shape"]),
                            iface.get("strides"), _itemsize(iface["typestr"]))
        return device, lo, hi
    return None


def byte_range(ptr: int, shape: tuple[int, ...], strides: Any, itemsize: int
               ) -> tuple[int, int]:
    """``(first byte, one past the last)`` the elements of an array at ``ptr`` occupy:
    ``shape``, byte ``strides`` (None: compact row-major; negative ones included) and
    ``itemsize`` in bytes. An empty array occupies ``(ptr, ptr)``."""
    if any(s == 0 for s in shape):
        return ptr, ptr
    if strides is None:
        n = itemsize
        for s in shape:
            n *= s
        return ptr, ptr + n
    lo = hi = 0
    for extent, stride in zip(shape, strides):
        span = (extent - 1) * stride
        lo, hi = (lo + span, hi) if span < 0 else (lo, hi + span)
    return ptr + lo, ptr + hi + itemsize


_ITEMSIZE: dict[str, int] = {}


def _itemsize(typestr: str) -> int:
    got = _ITEMSIZE.get(typestr)
    if got is None:
        import numpy as np

        got = _ITEMSIZE[typestr] = np.dtype(typestr).itemsize
    return got


def overlapping(a: Any, b: Any) -> bool:
    """Whether arrays ``a`` and ``b`` share any byte of memory (by address ranges on the
    same device; arrays without an address are taken as separate)."""
    ra, rb = memory_range(a), memory_range(b)
    if ra is None or rb is None or ra[0] != rb[0]:
        return False
    return ra[1] < rb[2] and rb[1] < ra[2]
