"""Entry point of the ``nvrtc`` plugin."""

from __future__ import annotations

from thork_core import Compiler, hookimpl

#: The plugin API versions this plugin works with (see ``thork info``).
THORK_PLUGIN_API = ">=1.0,<2"


@hookimpl
def thork_register_compilers() -> list[Compiler]:
    from ._compiler import NvrtcCompiler

    return [NvrtcCompiler()]
