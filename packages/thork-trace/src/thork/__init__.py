"""Thork: write NVIDIA GPU kernels in Python (``import thork as tk``).

A ``@tk.jit`` function is traced once with symbolic values; what it does becomes CUDA C++,
compiled (NVRTC by default), cached and launched with ``kernel[grid, block](arrays...)``.
Without a GPU the same kernel runs on the CPU target. The language is documented in
``docs/language.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from thork_core import (
    ArchError,
    ArgumentError,
    CompileError,
    DType,
    LaunchError,
    PluginError,
    ThorkError,
    TraceError,
    dt,
)

from . import fast
from ._aggregate import (
    Vec,
    VecType,
    dot,
    double2,
    float2,
    float3,
    float4,
    half2,
    int2,
    int4,
    struct,
)
from ._atomic import (
    atomic_add,
    atomic_and,
    atomic_cas,
    atomic_dec,
    atomic_exch,
    atomic_inc,
    atomic_max,
    atomic_min,
    atomic_or,
    atomic_sub,
    atomic_xor,
)
from ._cluster import cluster_ctarank, cluster_dims, cluster_sync, fence_mbarrier_init
from ._control import cond, elif_, else_, if_, return_
from ._func import DeviceFunction, func
from ._globals import GlobalArray, const_array, device_array
from ._grid import (
    WARP_SIZE,
    block_dim,
    block_idx,
    grid_dim,
    lane_id,
    launch_bounds,
    linear_thread_idx,
    thread_idx,
    warp_id,
)
from ._local import Local, var
from ._loop import break_, continue_, range, while_
from ._math import (
    abs,
    acos,
    acosh,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    cbrt,
    ceil,
    copysign,
    cos,
    cosh,
    erf,
    erfc,
    exp,
    exp2,
    exp10,
    expm1,
    floor,
    fma,
    fmax,
    fmin,
    fmod,
    hypot,
    isfinite,
    isinf,
    isnan,
    log,
    log1p,
    log2,
    log10,
    max,
    min,
    pow,
    rint,
    round,
    rsqrt,
    signbit,
    sin,
    sinh,
    sqrt,
    tan,
    tanh,
    trunc,
)
from ._mbarrier import (
    mbarrier_arrive,
    mbarrier_expect_tx,
    mbarrier_init,
    mbarrier_try_wait,
    mbarrier_wait,
)
from ._mma import cp_async, cp_async_commit, cp_async_wait, ldmatrix, mma
from ._print import print_ as print
from ._random import (
    box_muller,
    counter_add,
    mulhi,
    philox4x32,
    philox4x64,
    uniform_double,
    uniform_float,
)
from ._shaped import ShapedPointer
from ._shaped import length as len
from ._shared import LocalArray, SharedArray, dynamic_shared, local_array, shared_array
from ._sync import (
    FULL_MASK,
    Grid,
    grid_sync,
    syncthreads,
    syncthreads_and,
    syncthreads_count,
    syncthreads_or,
    syncwarp,
    this_grid,
    threadfence,
    threadfence_block,
    threadfence_system,
)
from ._tma import tensor_map, tma_load, tma_store, tma_store_commit, tma_store_wait
from ._trace import TraceWarning, cast, where
from ._types import (
    BlockDim,
    BlockIdx,
    Constexpr,
    DevicePointer,
    GridDim,
    Int,
    Int3,
    ThreadIdx,
    Uint,
    Uint3,
)
from ._vector import load_vec, store_vec
from ._warp import (
    activemask,
    ballot,
    shfl_down,
    shfl_idx,
    shfl_up,
    shfl_xor,
    warp_all,
    warp_any,
    warp_max,
    warp_min,
    warp_reduce,
    warp_sum,
)
from ._wgmma import (
    fence_proxy_async,
    setmaxnreg_dec,
    setmaxnreg_inc,
    smem_address,
    swizzle,
    wgmma,
    wgmma_commit,
    wgmma_descriptor,
    wgmma_fence,
    wgmma_wait,
)

#: ``tk.select(c, a, b)`` is ``tk.cond``: C's ``c ? a : b``; a side given as a function
#: (``lambda: a[k]``) is evaluated only where it is chosen, plain values as ``tk.where``.
select = cond

__all__ = [
    "ArchError", "ArgumentError", "BlockDim", "BlockIdx", "CompileError", "Constexpr", "DType",
    "DeviceFunction", "DevicePointer", "FULL_MASK", "Graph", "GridDim", "Kernel", "Launch",
    "LaunchError", "Local", "PluginError", "SharedArray", "ThreadIdx", "ThorkError",
    "TraceError", "Uint", "Uint3", "WARP_SIZE", "ShapedPointer", "len",
    "Int", "Int3", "TraceWarning", "print",
    # vector types and structs
    "Vec", "VecType", "float2", "float3", "float4", "double2", "int2", "int4", "half2", "dot",
    "struct",
    # random numbers
    "philox4x32", "philox4x64", "mulhi", "counter_add", "uniform_float", "uniform_double",
    "box_muller",
    # control flow and locals
    "if_", "elif_", "else_", "return_", "range", "while_", "break_", "continue_", "var",
    "where", "select", "cond", "cast", "jit", "func", "dt", "pinned_empty", "graph",
    # memory and synchronization
    "shared_array", "dynamic_shared", "local_array", "LocalArray", "const_array",
    "device_array", "GlobalArray", "syncthreads",
    "syncthreads_count", "syncthreads_and", "grid_sync", "this_grid", "Grid",
    "syncthreads_or", "syncwarp", "threadfence", "threadfence_block", "threadfence_system",
    "atomic_add", "atomic_sub", "atomic_min", "atomic_max", "atomic_exch", "atomic_cas",
    "atomic_and", "atomic_or", "atomic_xor", "atomic_inc", "atomic_dec", "load_vec",
    "store_vec",
    # grid and warps
    "thread_idx", "block_idx", "block_dim", "grid_dim", "linear_thread_idx", "lane_id",
    "warp_id", "shfl_idx", "shfl_up", "shfl_down", "shfl_xor", "ballot", "warp_any",
    "warp_all", "activemask", "warp_reduce", "warp_sum", "warp_max", "warp_min",
    # tensor cores and asynchronous copies
    "mma", "ldmatrix", "cp_async", "cp_async_commit", "cp_async_wait",
    # Hopper (sm_90a): warpgroup MMA, TMA, mbarriers
    "wgmma", "wgmma_descriptor", "wgmma_fence", "wgmma_commit", "wgmma_wait",
    "setmaxnreg_inc", "setmaxnreg_dec", "launch_bounds", "cluster_dims", "cluster_ctarank",
    "cluster_sync", "fence_mbarrier_init", "tma_store", "tma_store_commit", "tma_store_wait",
    "fence_proxy_async", "smem_address", "swizzle", "tma_load", "tensor_map",
    "mbarrier_init", "mbarrier_arrive", "mbarrier_expect_tx", "mbarrier_wait",
    "mbarrier_try_wait",
    # math (tk.fast: the approximate float32 forms, thork/fast.py)
    "fast", "abs", "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "ceil",
    "copysign", "cos", "cosh", "erf", "erfc", "exp", "exp2", "exp10", "expm1", "floor", "fma",
    "fmax", "fmin", "fmod", "hypot", "isfinite", "isinf", "isnan", "log", "log1p", "log2",
    "log10", "max", "min", "pow", "rint", "round", "rsqrt", "signbit", "sin", "sinh", "sqrt",
    "tan", "tanh", "trunc",
]
__version__ = "0.1.0"

if TYPE_CHECKING:  # the real imports, for type checkers and IDEs
    from thork_core import Graph, pinned_empty

    from ._kernel import Kernel, Launch, jit

    #: ``with tk.graph() as g: ...`` records launches; ``g.replay()`` runs them as one
    #: (thork_core.Graph: CUDA graph capture on the GPU, record/replay on the CPU target).
    graph = Graph

# Names whose modules load on first use (PEP 562), so that ``import thork`` stays light
# (issue 11: <= 30 ms): ``tk.jit`` brings the build and launch path (the disk cache, the
# plugin registry, the renderer, the launchers: what a kernel's first call needs, loaded
# where the first kernel is defined), ``tk.graph``/``tk.pinned_empty`` the runtime's.
_LAZY = {"Kernel": "_kernel", "Launch": "_kernel", "jit": "_kernel", "Graph": "Graph",
         "graph": "Graph", "pinned_empty": "pinned_empty"}


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'thork' has no attribute {name!r}")
    if where == "_kernel":
        from . import _kernel

        value = getattr(_kernel, name)
    else:
        import thork_core

        value = getattr(thork_core, where)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
