"""Entry point of the ``trace`` plugin: registers the tracing front-end."""

from __future__ import annotations

from thork_core import Frontend, hookimpl

#: The plugin API versions this plugin works with (see ``thork info``).
THORK_PLUGIN_API = ">=1.0,<2"


@hookimpl
def thork_register_frontends() -> list[Frontend]:
    return [Frontend("trace", "thork", "tracing DSL: @tk.jit Python functions become CUDA kernels")]
