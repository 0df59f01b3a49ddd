"""The thread's position in the launch, usable anywhere (kernels and device functions).

``tk.thread_idx().x`` is CUDA ``threadIdx.x``; the ``tk.Uint[tk.ThreadIdx]`` parameter
annotations give the same values to a kernel's signature.
"""

from __future__ import annotations

from thork_core import TraceError, dt
from thork_core.ir import Binary, Special

from ._trace import Dim3, Value, current

__all__ = ["thread_idx", "block_idx", "block_dim", "grid_dim", "linear_thread_idx",
           "lane_id", "warp_id", "WARP_SIZE", "launch_bounds"]

#: Threads per warp on every NVIDIA GPU (and in the CPU target's emulation).
WARP_SIZE = 32


def thread_idx(signed: bool = False) -> Dim3:
    """``threadIdx`` (uint32 ``.x .y .z``). ``signed=True``: int32 values."""
    return Dim3("threadIdx", signed=signed)


def block_idx(signed: bool = False) -> Dim3:
    """``blockIdx``. ``signed=True``: int32 values."""
    return Dim3("blockIdx", signed=signed)


def block_dim(signed: bool = False) -> Dim3:
    """``blockDim``: threads per block along each axis. ``signed=True``: int32 values."""
    return Dim3("blockDim", signed=signed)


def grid_dim(signed: bool = False) -> Dim3:
    """``gridDim``: blocks along each axis. ``signed=True``: int32 values."""
    return Dim3("gridDim", signed=signed)


def linear_thread_idx() -> Value:
    """The thread's rank in its block: ``x + blockDim.x * (y + blockDim.y * z)`` (uint32).

    Warps are consecutive runs of 32 ranks.
    """
    u = dt.uint32
    t, d = (lambda a: Special(u, f"threadIdx.{a}")), (lambda a: Special(u, f"blockDim.{a}"))
    trace = current()
    inner = trace.temp(Binary(u, "add", t("y"), Binary(u, "mul", d("y"), t("z"))))
    return Value(trace.temp(Binary(u, "add", t("x"), Binary(u, "mul", d("x"), inner))))


def lane_id() -> Value:
    """The thread's lane in its warp, 0..31 (uint32)."""
    return linear_thread_idx() & 31


def warp_id() -> Value:
    """The warp's index within the block (uint32)."""
    return linear_thread_idx() >> 5


def launch_bounds(max_threads: int, min_blocks: int = 1) -> None:
    """Declare that the kernel is launched with at most ``max_threads`` threads per block
    and that ``min_blocks`` blocks should fit on one multiprocessor (CUDA's
    ``__launch_bounds__``): the compiler then caps registers per thread at what that many
    threads can have (65536 / (max_threads x min_blocks) on current GPUs), which
    ``tk.setmaxnreg_inc``/``dec`` need. Called once, in the kernel body (not a device
    function), with Python ints (compile-time constants included). A launch with a larger
    block is refused with a :class:`~thork.LaunchError` on every target."""
    trace = current()
    who = "tk.launch_bounds()"
    if trace.is_function:
        raise TraceError(f"{who}: declare launch bounds in the kernel body, not in a device "
                         "function")
    for name, v, lo, hi in (("max_threads", max_threads, 1, 1024),
                            ("min_blocks", min_blocks, 1, 32)):
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            raise TraceError(f"{who}: {name} must be a Python int from {lo} to {hi}, "
                             f"got {v!r}")
    old = trace.root.launch_bounds
    if old is not None and old != (max_threads, min_blocks):
        raise TraceError(f"{who}: the kernel already declared launch bounds {old}, now "
                         f"{(max_threads, min_blocks)}")
    trace.root.launch_bounds = (max_threads, min_blocks)
