"""Thork core: the IR, the CUDA C++ renderer, the plugin registry, the artifact cache and
the GPU target. Front-ends (``thork``, ``fkl``) build on it; compilers and targets plug in.

Importing this package is cheap: cuda-python, compilers and NumPy-heavy work load lazily.
"""

from __future__ import annotations

from ._adapter import ArrayAdapter, ArrayView
from ._arch import DEFAULT_ARCH, gpu_arch, parse_arch
from ._artifact import ARTIFACT_KINDS, Artifact
from ._build import CompileInfo, build, choose, compile_artifact
from ._cache import DiskCache, cache_dir, cache_key, disk_cache
from ._compiler import Compiler
from ._device_array import DeviceArray
from ._dtype import ALL_DTYPES, DType, dt, dtype_of, literal_dtype, promote
from ._errors import (
    ArgumentError,
    CompileError,
    LaunchError,
    NoTargetError,
    PluginError,
    ThorkError,
    TraceError,
)
from ._frontend import Frontend
from ._graph import Graph, GraphNode
from ._hookspecs import hookimpl, hookspec
from ._ir import KernelIR, Loc, Param, PointerType
from ._launch import PreparedLaunch, guarded_call_base
from ._plugins import PluginInfo, Plugins, PluginWarning, plugins, reset_plugins
from ._renderer import CODEGEN_VERSION, CudaRenderer, Renderer
from ._target import ArgumentPack, Dim3, Executable, Target, normalize_dims

__all__ = [
    "ALL_DTYPES", "ARTIFACT_KINDS", "ArgumentError", "ArgumentPack", "ArrayAdapter",
    "ArrayView", "Artifact", "CODEGEN_VERSION", "CompileError", "CompileInfo", "Compiler",
    "CudaRenderer", "DEFAULT_ARCH", "DType", "DeviceArray", "Dim3", "DiskCache",
    "Executable", "Frontend", "Graph", "GraphNode", "KernelIR", "LaunchError", "Loc", "NoTargetError", "Param",
    "PluginError", "PluginInfo", "PluginWarning", "Plugins", "PointerType",
    "PreparedLaunch", "Renderer", "Target", "ThorkError", "TraceError", "build",
    "cache_dir", "cache_key", "choose", "compile_artifact", "disk_cache", "dt", "dtype_of",
    "gpu_arch", "guarded_call_base", "hookimpl", "hookspec", "literal_dtype",
    "normalize_dims", "parse_arch", "plugins", "promote", "reset_plugins",
]
__version__ = "0.1.0"
