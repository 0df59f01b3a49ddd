"""Thork: write NVIDIA GPU kernels in Python (``import thork as tk``).

A ``@tk.jit`` function is traced once with symbolic values; what it does becomes CUDA C++,
compiled (NVRTC by default), cached and launched with ``kernel[grid, block](arrays...)``.
Without a GPU the same kernel runs on the CPU target.
"""

from __future__ import annotations

from thork_core import (
    ArgumentError,
    CompileError,
    DType,
    LaunchError,
    PluginError,
    ThorkError,
    TraceError,
    dt,
)

from ._control import else_, if_, return_
from ._kernel import Kernel, Launch, jit
from ._math import (
    abs, acos, asin, atan, atan2, cbrt, ceil, copysign, cos, cosh, erf, exp, exp2, expm1,
    floor, fma, fmod, hypot, isinf, isnan, log, log1p, log2, log10, max, min, pow, rint, round,
    rsqrt, sin, sinh, sqrt, tan, tanh, trunc,
)
from ._trace import cast, where
from ._types import BlockDim, BlockIdx, DevicePointer, GridDim, ThreadIdx, Uint, Uint3

__all__ = [
    "ArgumentError", "BlockDim", "BlockIdx", "CompileError", "DType", "DevicePointer",
    "GridDim", "Kernel", "Launch", "LaunchError", "PluginError", "ThreadIdx", "ThorkError",
    "TraceError", "Uint", "Uint3", "cast", "dt", "else_", "if_", "jit", "return_", "where",
    "abs", "acos", "asin", "atan", "atan2", "cbrt", "ceil", "copysign", "cos", "cosh", "erf",
    "exp", "exp2", "expm1", "floor", "fma", "fmod", "hypot", "isinf", "isnan", "log", "log1p",
    "log2", "log10", "max", "min", "pow", "rint", "round", "rsqrt", "sin", "sinh", "sqrt",
    "tan", "tanh", "trunc",
]
__version__ = "0.1.0"
