"""Entry point of the ``cpu`` plugin: the CPU target and the host C++ compiler."""

from __future__ import annotations

from thork_core import Compiler, Target, hookimpl

#: The plugin API versions this plugin works with (see ``thork info``).
THORK_PLUGIN_API = ">=1.0,<2"


@hookimpl
def thork_register_targets() -> list[Target]:
    from ._target import CpuTarget

    return [CpuTarget()]


@hookimpl
def thork_register_compilers() -> list[Compiler]:
    from ._compiler import HostCompiler

    return [HostCompiler()]
