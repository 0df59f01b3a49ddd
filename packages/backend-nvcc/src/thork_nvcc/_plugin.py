"""Entry point of the ``nvcc`` plugin: the nvcc compiler and the ``gpu-hostlib`` target."""

from __future__ import annotations

from thork_core import Compiler, Target, hookimpl


@hookimpl
def thork_register_compilers() -> list[Compiler]:
    from ._compiler import NvccCompiler

    return [NvccCompiler()]


@hookimpl
def thork_register_targets() -> list[Target]:
    from ._hostlib import HostlibTarget

    return [HostlibTarget()]
