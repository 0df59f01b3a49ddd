"""Entry point of the ``nvcc`` plugin: the nvcc compiler and the ``gpu-hostlib`` target."""

from __future__ import annotations

from thork_core import Compiler, Target, hookimpl

#: The plugin API versions this plugin works with (see ``thork info``).
THORK_PLUGIN_API = ">=1.0,<2"


@hookimpl
def thork_register_compilers() -> list[Compiler]:
    from ._compiler import NvccCompiler

    return [NvccCompiler()]


@hookimpl
def thork_register_targets() -> list[Target]:
    from ._hostlib import HostlibTarget

    return [HostlibTarget()]
