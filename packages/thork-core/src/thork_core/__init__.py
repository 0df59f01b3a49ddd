"""Thork core: the IR, the CUDA C++ renderer, the plugin registry, the artifact cache and
the GPU target. Front-ends (``thork``, ``fkl``) build on it; compilers and targets plug in.

Public surfaces, each documented in ``docs/plugins.md``: this package's top level (the
names below), :mod:`thork_core.plugin` (what plugins implement and reuse),
:mod:`thork_core.ir` (kernel IR and renderers), :mod:`thork_core.runtime` (device arrays,
streams, memory), :mod:`thork_core.build` (the one build path) and
:mod:`thork_core.launch` (launching loaded kernels). Modules whose names start with ``_``
are private: other packages never import them (a test enforces it).

Importing this package is cheap: cuda-python, compilers and NumPy-heavy work load lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._arch import DEFAULT_ARCH, gpu_arch, parse_arch  # tiny; a first launch needs it
from ._dtype import ALL_DTYPES, DType, dt, dtype_of, literal_dtype, promote
from ._errors import (
    ArchError,
    ArgumentError,
    BoundsError,
    BundleError,
    CompileError,
    DeviceError,
    LaunchError,
    NoTargetError,
    PluginError,
    ThorkError,
    TraceError,
)

if TYPE_CHECKING:  # the real imports, for type checkers and IDEs
    from ._adapter import ArrayAdapter, ArrayView
    from ._artifact import ARTIFACT_KINDS, Artifact
    from ._build import CompileInfo, build_kernel, choose, compile_artifact
    from ._cache import DiskCache, cache_dir, cache_key, disk_cache
    from ._compiler import Compiler
    from ._debug import debug_default, instrument
    from ._device_array import DeviceArray
    from ._fpenv import FloatingPointModeWarning
    from ._frontend import Frontend
    from ._graph import Graph, GraphNode
    from ._hookspecs import hookimpl, hookspec
    from ._ir import KernelIR, Loc, Param, PointerType
    from ._launch import PreparedLaunch, guarded_call_base
    from ._memory import pinned_empty
    from ._plugin_api import PLUGIN_API_VERSION
    from ._plugins import PluginInfo, Plugins, PluginWarning, plugins, reset_plugins
    from ._renderer import CODEGEN_VERSION, CudaRenderer, Renderer
    from ._target import Dim3, Executable, Target, normalize_dims

# The other public names load their module on first use (PEP 562): ``import thork`` needs
# the IR and the dtypes, not the build path, the cache, the registry or the runtime
# (issue 11: ``import thork`` <= 30 ms); debug mode's module (~2 ms) loads where it is used.
_LAZY = {name: module for module, names in (
    ("._adapter", "ArrayAdapter ArrayView"),
    ("._artifact", "ARTIFACT_KINDS Artifact"),
    ("._build", "CompileInfo build_kernel choose compile_artifact"),
    ("._cache", "DiskCache cache_dir cache_key disk_cache"),
    ("._compiler", "Compiler"),
    ("._debug", "debug_default instrument"),
    ("._device_array", "DeviceArray"),
    ("._fpenv", "FloatingPointModeWarning"),
    ("._frontend", "Frontend"),
    ("._graph", "Graph GraphNode"),
    ("._hookspecs", "hookimpl hookspec"),
    ("._ir", "KernelIR Loc Param PointerType"),
    ("._launch", "PreparedLaunch guarded_call_base"),
    ("._memory", "pinned_empty"),
    ("._plugin_api", "PLUGIN_API_VERSION"),
    ("._plugins", "PluginInfo Plugins PluginWarning plugins reset_plugins"),
    ("._renderer", "CODEGEN_VERSION CudaRenderer Renderer"),
    ("._target", "Dim3 Executable Target normalize_dims"),
) for name in names.split()}


__all__ = [
    "ALL_DTYPES", "ARTIFACT_KINDS", "ArgumentError", "ArrayAdapter", "BoundsError",
    "ArchError", "ArrayView", "Artifact", "BundleError", "CODEGEN_VERSION", "CompileError",
    "CompileInfo",
    "Compiler",
    "CudaRenderer", "DEFAULT_ARCH", "DType", "DeviceArray", "DeviceError", "Dim3", "DiskCache",
    "Executable", "FloatingPointModeWarning", "Frontend", "Graph", "GraphNode", "KernelIR",
    "LaunchError", "Loc",
    "NoTargetError", "Param",
    "PLUGIN_API_VERSION", "PluginError", "PluginInfo", "PluginWarning", "Plugins", "PointerType",
    "PreparedLaunch", "Renderer", "Target", "ThorkError", "TraceError", "build_kernel",
    "cache_dir", "cache_key", "choose", "debug_default", "instrument",
    "compile_artifact", "disk_cache", "dt", "dtype_of",
    "gpu_arch", "guarded_call_base", "hookimpl", "hookspec", "literal_dtype",
    "normalize_dims", "parse_arch", "pinned_empty", "plugins", "promote", "reset_plugins",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'thork_core' has no attribute {name!r}")
    # __import__, not importlib.import_module: the same import, timed by -X importtime
    value = getattr(__import__(module[1:], globals(), None, (name,), 1), name)
    if module != "._debug":  # debug mode's names are looked up again each time
        globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
