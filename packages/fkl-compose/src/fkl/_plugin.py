"""Entry point of the ``compose`` plugin: registers the FKL composition front-end."""

from __future__ import annotations

from thork_core import Frontend, hookimpl

#: The plugin API versions this plugin works with (see ``thork info``).
THORK_PLUGIN_API = ">=1.0,<2"


@hookimpl
def thork_register_frontends() -> list[Frontend]:
    return [Frontend("compose", "fkl",
                     "FKL operation set: chains of ops fused into one kernel (fkl.compose)")]
