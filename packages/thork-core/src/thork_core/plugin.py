"""The public plugin API: everything a compiler, target, array-adapter or front-end plugin
needs, and nothing it should not rely on.

A plugin is a module exposed through the ``thork`` entry-point group that implements some
of the hooks in :mod:`thork_core.plugin.hookspecs` (``thork_register_compilers``,
``thork_register_targets``, ``thork_register_frontends``,
``thork_register_array_adapters``), each marked with :data:`hookimpl`. The objects those
hooks return subclass the classes here:

* :class:`Compiler` turns source into an :class:`Artifact` (``cubin``/``ptx``/``hostlib``).
* :class:`Target` renders kernel IR (see :mod:`thork_core.ir`), loads artifacts into an
  :class:`Executable` and says which compiler it prefers.
* :class:`ArrayAdapter` turns a foreign array object into an :class:`ArrayView`.
* :class:`Frontend` describes a front-end for ``thork info``.

Reusable machinery for targets: :func:`array_view`/:func:`check_array`/:func:`scalar_value`
(argument checks with messages that name the kernel and parameter), :func:`library_path`
(where a host library for a cache key is kept), :class:`GpuTarget`/:class:`GpuExecutable`
(the CUDA driver target) and :class:`CudaExecutable` (argument binding, staging and stream
waits for any target that launches on a CUDA device), :func:`memo` (facts memoized on
disk, so a warm process does not ask a toolchain again); an executable launches through
:func:`thork_core.launch.make_launcher`; :func:`sha256_hex` digests without loading
OpenSSL (CPython's built-in SHA-256 below 1 MiB: a plugin's cache names stay off the
first call's import time). See ``docs/plugins.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _hookspecs as hookspecs
from ._adapter import ArrayAdapter, ArrayView
from ._arch import DEFAULT_ARCH, gpu_arch, parse_arch
from ._artifact import ARTIFACT_KINDS, Artifact
from ._binding import (
    array_view,
    check_arg_count,
    check_array,
    find_view,
    scalar_value,
)
from ._cache import library_file, library_path, load_library
from ._compiler import Compiler
from ._debug import DebugRecord
from ._digest import sha256_hex
from ._dtype import DType, dt
from ._env import EnvironmentWarning, env_flag
from ._errors import (
    ArgumentError,
    CompileError,
    LaunchError,
    NoTargetError,
    PluginError,
    ThorkError,
    TraceError,
)
from ._graph import RecordingLauncher
from ._graph import recorder as graph_recorder
from ._hookspecs import hookimpl, hookspec
from ._memo import installed_fingerprint, memo, path_fingerprint
from ._plugin_api import PLUGIN_API_VERSION
from ._plugins import ENTRY_POINT_GROUP, PluginInfo, Plugins, PluginWarning, plugins
from ._target import Dim3, Executable, Target, normalize_dims

if TYPE_CHECKING:
    from ._frontend import Frontend
    from ._gpu import CudaExecutable, GpuExecutable, GpuTarget, visible_device

__all__ = [
    "ARTIFACT_KINDS", "ArgumentError", "ArrayAdapter", "ArrayView",
    "Artifact", "CompileError", "Compiler", "CudaExecutable", "DEFAULT_ARCH",
    "DebugRecord", "DType", "Dim3",
    "ENTRY_POINT_GROUP", "EnvironmentWarning", "Executable", "Frontend", "GpuExecutable",
    "GpuTarget",
    "LaunchError", "NoTargetError", "PLUGIN_API_VERSION", "PluginError", "PluginInfo",
    "PluginWarning", "Plugins", "RecordingLauncher", "Target", "ThorkError", "TraceError",
    "array_view",
    "check_arg_count", "check_array", "dt", "env_flag", "find_view", "gpu_arch",
    "graph_recorder",
    "hookimpl", "hookspec", "hookspecs", "installed_fingerprint", "library_file",
    "library_path",
    "load_library", "memo", "normalize_dims", "parse_arch", "path_fingerprint", "plugins",
    "scalar_value", "sha256_hex", "visible_device",
]

# The CUDA target's classes load on first use: a plugin module importing this facade
# stays cheap (plugin modules are imported by every process that asks the registry);
# so does the front-end record, which a first launch's plugins (a target and a compiler)
# do not need (``import thork`` no longer loads it).
_LAZY = {"GpuTarget": "._gpu", "GpuExecutable": "._gpu", "CudaExecutable": "._gpu",
         "visible_device": "._gpu", "Frontend": "._frontend"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'thork_core.plugin' has no attribute {name!r}")
    # __import__, not importlib.import_module: the same import, timed by -X importtime
    value = getattr(__import__(module[1:], globals(), None, (name,), 1), name)
    globals()[name] = value
    return value
