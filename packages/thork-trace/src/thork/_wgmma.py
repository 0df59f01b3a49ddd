"""Hopper's warpgroup MMA: ``tk.wgmma`` on shared-memory matrix descriptors.

A *warpgroup* is 4 consecutive warps (128 threads, the first warp's index a multiple of
4). ``tk.wgmma`` multiplies a 64xK16 tile of A by a 16xN tile of B, both read from shared
memory through 64-bit *matrix descriptors* (:func:`wgmma_descriptor`), and accumulates into
a 64xN float32 tile spread over the warpgroup's registers (N/2 per thread; the layout is
PTX's wgmma D fragment, docs/language-wgmma.md). It is asynchronous:
``tk.wgmma_fence()`` before the first one that touches the accumulators,
``tk.wgmma_commit()`` closes the issued ones into a group, ``tk.wgmma_wait(n)`` waits until
at most ``n`` groups are pending. Shared memory written by ordinary stores must be made
visible to it (the *async proxy*) by ``tk.fence_proxy_async()`` first.
GPU: sm_90a only (H100/H200); elsewhere :class:`thork.ArchError` at compile time.
"""

from __future__ import annotations

from typing import Any

from thork_core import TraceError, dt, dtype_of
from thork_core.ir import (
    SETMAXNREG_COUNTS,
    WGMMA_N,
    Const,
    Eval,
    Field,
    Hopper,
    Offset,
    PointerType,
    VectorType,
)

from ._trace import Memory, Value, _to, as_value, current

__all__ = ["wgmma", "wgmma_descriptor", "wgmma_fence", "wgmma_commit", "wgmma_wait",
           "fence_proxy_async", "smem_address", "swizzle", "SWIZZLE_MODES", "setmaxnreg_inc",
           "setmaxnreg_dec"]

#: Swizzle width in bytes → the descriptor's 2-bit mode (PTX ISA, "Matrix Descriptor
#: Format": 0 none, 1 128-byte, 2 64-byte, 3 32-byte).
SWIZZLE_MODES = {0: 0, 128: 1, 64: 2, 32: 3}


def swizzle(address: int, width: int) -> int:
    """The shared-memory byte address where the ``width``-byte swizzle mode (0, 32, 64 or
    128) puts the byte that the unswizzled layout puts at ``address``.

    The pattern repeats every 8 rows of ``width`` bytes: the 16-byte chunk index within a
    row (address bits 4 and up, log2(width / 16) bits) is XORed with the row index within
    the 8-row atom (address bits 7-9, as many bits) — PTX ISA "Shared Memory Matrix Layout"
    swizzling modes. Plain Python: the CPU model and the tests use the same function.
    """
    if width not in SWIZZLE_MODES:
        raise ValueError(f"swizzle width must be 0, 32, 64 or 128 bytes, got {width!r}")
    if width == 0:
        return address
    mask = width // 16 - 1  # 1, 3 or 7: the chunk bits
    return address ^ (((address >> 7) & mask) << 4)


def _field(name: str, value: Any, lo: int, bits: int) -> Any:
    """``value >> 4`` checked to fit ``bits`` bits, shifted to bit ``lo`` (an int stays an
    int; a traced value is encoded in uint64 arithmetic)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0 or value % 16 or value >> 4 >= 1 << bits:
            raise TraceError(f"tk.wgmma_descriptor(): {name} must be a multiple of 16 bytes "
                             f"below {16 << bits}, got {value!r}")
        return (value >> 4) << lo
    v = as_value(value)
    if not v.dtype.is_int:
        raise TraceError(f"tk.wgmma_descriptor(): {name} must be an integer (bytes), got "
                         f"{v.dtype.name}")
    return ((Value(_to(v, dt.uint64)) >> 4) & ((1 << bits) - 1)) << lo


def wgmma_descriptor(address: Any, leading_bytes: Any, stride_bytes: Any,
                     swizzle: int = 0) -> Any:
    """The 64-bit shared-memory matrix descriptor of ``wgmma`` (PTX ISA "Matrix Descriptor
    Format"): bits 0-13 the start ``address`` >> 4 (a shared-window byte address, as
    :func:`smem_address` gives, 16-byte aligned, below 256 KiB), bits 16-29 the *leading
    dimension byte offset* >> 4, bits 32-45 the *stride dimension byte offset* >> 4, bits
    49-51 the base offset (0: Thork aligns swizzled tiles), bits 62-63 the swizzle mode
    (``swizzle`` in bytes: 0 none, 128, 64, 32 → 0, 1, 2, 3).

    For a K-major operand (rows of K contiguous), *leading* is the distance in bytes
    between core matrices (8 rows x 16 bytes) adjacent in K — used without swizzle only —
    and *stride* between 8-row groups. Python ints give an int (host-side, for tests), any
    traced value a traced uint64.
    """
    if swizzle not in SWIZZLE_MODES or isinstance(swizzle, bool):
        raise TraceError(f"tk.wgmma_descriptor(): swizzle must be 0, 32, 64 or 128 (bytes), "
                         f"got {swizzle!r}")
    mode = SWIZZLE_MODES[swizzle] << 62
    if isinstance(address, int) and not isinstance(address, bool):
        if address >= 1 << 18:
            raise TraceError(f"tk.wgmma_descriptor(): address must be a shared-memory "
                             f"address below 256 KiB, got {address!r}")
    fields = (_field("address", address, 0, 14), _field("leading_bytes", leading_bytes, 16, 14),
              _field("stride_bytes", stride_bytes, 32, 14))
    if all(isinstance(f, int) for f in fields):
        return fields[0] | fields[1] | fields[2] | mode
    out = Value(_to(as_value(mode, dt.uint64), dt.uint64))
    for f in fields:
        out = out | f
    return out


def smem_address(array: Any, index: Any = 0) -> Value:
    """The shared-window byte address (uint32) of ``array[index]``, a shared array: what a
    descriptor or an ``mbarrier``/TMA operand holds (PTX ``cvta.to.shared``). Shared arrays
    of a kernel using Hopper operations are 1024-byte aligned, so equal offsets give equal
    addresses modulo 1024 on every target (the swizzle pattern depends on them)."""
    return Value(current().temp(Hopper(dt.uint32, "smem_addr", (_shared_offset(
        "tk.smem_address()", array, index),)), "saddr"))


def _shared_offset(who: str, array: Any, index: Any) -> Offset:
    if not isinstance(array, Memory) or array.space != "shared":
        raise TraceError(f"{who}: the array must be a shared array (tk.shared_array or "
                         f"tk.dynamic_shared), got {array!r}")
    t = array.expr.type
    assert isinstance(t, PointerType)
    return Offset(t, array.expr, array.index_expr(index))


def wgmma(desc_a: Any, desc_b: Any, acc: Any, n: int, dtype: Any = "float16",
          scale_d: Any = 1) -> tuple[Value, ...]:
    """``D = A @ B + D`` for a 64xNx16 tile on the warpgroup's tensor cores (PTX
    ``wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}.{f16,bf16}``, both operands
    K-major in shared memory, no transpose).

    ``desc_a``: descriptor (:func:`wgmma_descriptor`, uint64) of A, 64 rows (M) x 16
    elements (K); ``desc_b``: of B stored as N rows x 16 elements (Bᵀ row-major, "K-major");
    ``acc``: this thread's N/2 float32 accumulators (a tuple; ``None`` for zeros);
    ``n``: N, a multiple of 8 from 8 to 256; ``dtype``: float16 or bfloat16, the
    operands' element type; ``scale_d``: 1 adds ``acc``, 0 ignores it (may be traced).
    Returns the N/2 new accumulators. Every thread of the warpgroup executes it.
    """
    if n not in WGMMA_N or isinstance(n, bool):
        raise TraceError(f"tk.wgmma(): n must be a multiple of 8 from 8 to 256, got {n!r}")
    try:
        name = {"float16": "f16", "bfloat16": "bf16"}[dtype_of(dtype).name]
    except (KeyError, TypeError, ValueError):
        raise TraceError(f"tk.wgmma(): dtype must be float16 or bfloat16 (the operands' "
                         f"element type), got {dtype!r}") from None
    descs = []
    for what, d in (("desc_a", desc_a), ("desc_b", desc_b)):
        v = as_value(d)
        if not (v.dtype.is_int and v.dtype.bits == 64):
            raise TraceError(f"tk.wgmma(): {what} must be a 64-bit descriptor "
                             f"(tk.wgmma_descriptor), got {v.dtype.name}")
        descs.append(_to(v, dt.uint64))
    if acc is None:
        regs: tuple[Any, ...] = (0.0,) * (n // 2)
        scale_d = 0
    else:
        try:
            regs = tuple(acc)
        except TypeError:
            regs = ()
        if len(regs) != n // 2:
            raise TraceError(f"tk.wgmma(): acc must be a tuple of {n // 2} float32 values "
                             f"(n / 2 per thread) or None, got {acc!r}")
    sd = as_value(scale_d)
    if not (sd.dtype.is_int or sd.dtype == dt.bool):
        raise TraceError(f"tk.wgmma(): scale_d must be 0 or 1, got {sd.dtype.name}")
    if isinstance(sd.expr, Const) and sd.expr.value not in (0, 1):
        raise TraceError(f"tk.wgmma(): scale_d must be 0 or 1, got {sd.expr.value!r}")
    args = (*descs, _to(sd, dt.int32), *(_to(as_value(r), dt.float32) for r in regs))
    trace = current()
    d = trace.temp(Hopper(VectorType(dt.float32, n // 2), f"wgmma.m64n{n}k16.{name}", args),
                   "wg")
    return tuple(Value(trace.temp(Field(dt.float32, d, k))) for k in range(n // 2))


def _void(op: str, *args: Any) -> None:
    current().emit(Eval(Hopper(None, op, tuple(args))))  # type: ignore[arg-type]


def wgmma_fence() -> None:
    """Order this warpgroup's register and shared-memory accesses before the following
    ``tk.wgmma`` (PTX ``wgmma.fence.sync.aligned``): required before the first wgmma and
    whenever the accumulators were touched by other instructions."""
    _void("wgmma.fence")


def wgmma_commit() -> None:
    """Close the issued, uncommitted ``tk.wgmma`` operations into a group
    (PTX ``wgmma.commit_group.sync.aligned``)."""
    _void("wgmma.commit")


def wgmma_wait(n: int = 0) -> None:
    """Wait until at most ``n`` (0-7, known at trace time) of the newest wgmma groups are
    pending (PTX ``wgmma.wait_group.sync.aligned n``); their accumulators and shared-memory
    reads are then complete."""
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= 7:
        raise TraceError(f"tk.wgmma_wait(): n must be an int from 0 to 7, got {n!r}")
    _void(f"wgmma.wait.{n}")


def fence_proxy_async() -> None:
    """Make this thread's earlier shared-memory writes by ordinary stores visible to the
    async proxy (``tk.wgmma`` operand reads, TMA), PTX ``fence.proxy.async.shared::cta``."""
    _void("fence.proxy.async")


def _setmaxnreg(action: str, count: int) -> None:
    who = f"tk.setmaxnreg_{action}()"
    if not isinstance(count, int) or isinstance(count, bool) or count not in SETMAXNREG_COUNTS:
        raise TraceError(f"{who}: count must be a multiple of 8 from 24 to 256 (registers "
                         f"per thread), got {count!r}")
    _void(f"setmaxnreg.{action}.{count}")


def setmaxnreg_inc(count: int) -> None:
    """Raise this warpgroup's registers per thread to ``count`` (a multiple of 8 from 24 to
    256; PTX ``setmaxnreg.inc.sync.aligned.u32``), waiting until the multiprocessor's pool
    has them — registers other warpgroups gave back with :func:`setmaxnreg_dec`. Every
    thread of the warpgroup executes it. The compiler honours it only in a kernel with a
    register cap at entry (:func:`thork.launch_bounds`, required: a TraceError otherwise)
    and where each warpgroup role is one branch of a single ``tk.if_``/``tk.else_``.
    GPU: sm_90a; the CPU target has no register file and does nothing."""
    _setmaxnreg("inc", count)


def setmaxnreg_dec(count: int) -> None:
    """Lower this warpgroup's registers per thread to ``count`` (a multiple of 8 from 24 to
    256; PTX ``setmaxnreg.dec.sync.aligned.u32``), giving the rest back to the pool — a
    producer warpgroup that only issues TMA copies needs few. As :func:`setmaxnreg_inc`."""
    _setmaxnreg("dec", count)
