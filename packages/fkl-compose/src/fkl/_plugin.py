"""Entry point of the ``compose`` plugin: registers the FKL composition front-end."""

from __future__ import annotations

from typing import Any

from thork_core import Frontend, hookimpl

#: The plugin API versions this plugin works with (see ``thork info``).
THORK_PLUGIN_API = ">=1.0,<2"


@hookimpl
def thork_register_frontends() -> list[Frontend]:
    return [Frontend("compose", "fkl",
                     "FKL operation set: chains of ops fused into one kernel (fkl.compose)",
                     extensions=_op_plugins)]


def _op_plugins() -> list[dict[str, Any]]:
    """fkl's op plugins (the ``fkl.ops`` entry-point group) as ``thork plugins`` lists
    them."""
    from .ops import installed

    return [{"name": p.name, "distribution": p.distribution, "version": p.version,
             "registered": {"fkl_ops": list(p.ops)}, "error": p.error}
            for p in installed()]
