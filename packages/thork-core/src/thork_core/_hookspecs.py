"""Every hook a Thork plugin can implement.

Plugins are modules (or objects) exposed through the ``thork`` entry-point group. Each
hook is called once per process, the first time the registry is asked for what it
registers; a plugin module must stay cheap to import (import compilers and drivers lazily).
Results of all plugins are concatenated in registration order; where several items share
a name, the one with the higher ``priority`` wins and the other is reported by
``thork info``. A hook that raises is reported as a warning and its plugin is skipped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from ._adapter import ArrayAdapter
    from ._compiler import Compiler
    from ._frontend import Frontend
    from ._target import Target

PROJECT = "thork"
# The plugin API's version (PLUGIN_API_VERSION) and plugins' declared ranges: _plugin_api.
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def thork_register_compilers() -> list[Compiler]:
    """Return the compilers this plugin provides (e.g. NVRTC, nvcc, a host C++ compiler).

    Called once when a kernel is first compiled or ``thork info`` runs. Lists from all
    plugins are concatenated; selection without an explicit choice takes the available
    compiler with the highest ``priority`` that a target can consume.
    """
    raise NotImplementedError


@hookspec
def thork_register_targets() -> list[Target]:
    """Return the targets this plugin provides (e.g. the GPU, the CPU).

    Called once, like the other hooks. With no target asked for, the available target
    with the highest ``priority`` runs the kernel.
    """
    raise NotImplementedError


@hookspec
def thork_register_frontends() -> list[Frontend]:
    """Return descriptions of the front-ends this plugin provides (tracer, compose).

    Called once, when ``thork info`` runs or the registry is first loaded. Lists are
    concatenated; informational only, since users import front-ends directly.
    """
    raise NotImplementedError


@hookspec
def thork_register_array_adapters() -> list[ArrayAdapter]:
    """Return adapters that turn foreign array objects into launch arguments.

    Called once. For each argument, adapters are tried in descending ``priority`` and
    the first that accepts the object wins; core provides NumPy,
    ``__cuda_array_interface__`` and DLPack adapters.
    """
    raise NotImplementedError
