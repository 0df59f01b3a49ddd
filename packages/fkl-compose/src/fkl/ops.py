"""Every fkl operation by name: the built-in ones and those that installed op plugins ship
through the ``fkl.ops`` entry-point group (see ``docs/plugins.md``).

``fkl.ops.Gamma`` finds a plugin's ``Gamma``; ``fkl.ops.Sqr`` is the built-in one (a
plugin's op never displaces a built-in name: the clash is reported with a warning).
:func:`available` lists every name.
"""

from __future__ import annotations

from typing import Any

from . import _EXPORTS
from ._registry import OpPlugin, OpPluginWarning, op_plugins, plugin_ops

__all__ = ["OpPlugin", "OpPluginWarning", "available", "installed"]


def installed() -> list[OpPlugin]:
    """The installed op plugins (``fkl.ops`` entry points): distribution, version, the ops
    each provides, and why one was skipped."""
    return op_plugins(set(_EXPORTS))


def available() -> list[str]:
    """Names of every op class reachable here: built-in and from plugins."""
    import fkl

    from ._ops import Op

    names = [n for n in _EXPORTS
             if isinstance(v := getattr(fkl, n), type) and issubclass(v, Op)]
    return sorted(set(names) | set(plugin_ops(set(_EXPORTS))))


def __getattr__(name: str) -> Any:
    import fkl

    from ._ops import Op

    if name in _EXPORTS:
        value = getattr(fkl, name)
        if isinstance(value, type) and issubclass(value, Op):
            return value
        raise AttributeError(f"module 'fkl.ops' has no attribute {name!r} "
                             f"(fkl.{name} is not an op)")
    found = plugin_ops(set(_EXPORTS)).get(name)
    if found is None:
        raise AttributeError(f"module 'fkl.ops' has no attribute {name!r}: no built-in op "
                             "and no installed fkl op plugin defines it")
    return found


def __dir__() -> list[str]:
    return sorted(set(__all__) | set(available()))
