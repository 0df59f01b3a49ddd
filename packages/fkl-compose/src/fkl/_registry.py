"""Op plugins: fkl operations shipped by other packages through the ``fkl.ops``
entry-point group.

An entry point's value names an :class:`~fkl.Op` subclass, or a sequence of them
(``ops = "fkl_ops_extra:OPS"``). The classes are found by their class name as
``fkl.ops.<Name>`` and, where no built-in op has that name, as ``fkl.<Name>``. Discovery
runs once, the first time a name is looked up that ``fkl`` itself does not define, so
``import fkl`` stays cheap. An entry point that fails to load, or names something that
is not an op, is skipped with one warning naming it; a name two sources define is reported
with a warning naming both (the built-in, then the first plugin in distribution order,
keeps it; the other stays importable from its own package).
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass
from typing import Any

__all__ = ["ENTRY_POINT_GROUP", "OpPlugin", "OpPluginWarning", "op_plugins", "plugin_ops",
           "reset_plugin_ops"]

ENTRY_POINT_GROUP = "fkl.ops"

_lock = threading.Lock()
_found: dict[str, type] | None = None
_plugins: list[OpPlugin] = []


@dataclass(frozen=True)
class OpPlugin:
    """One ``fkl.ops`` entry point as ``thork plugins`` would list it: its name and value,
    the distribution and version that ship it, the ops it provides (``module.QualName``,
    those reachable by name and those shadowed by a clash alike) and why it was skipped
    (empty when it loaded)."""

    name: str
    value: str
    distribution: str
    version: str
    ops: tuple[str, ...]
    error: str = ""


class OpPluginWarning(UserWarning):
    """An fkl op plugin could not be loaded, or one of its names clashes."""


def plugin_ops(builtin: set[str]) -> dict[str, type]:
    """Op classes from installed plugins by class name (loaded once per process).
    ``builtin`` are the names ``fkl`` defines itself: plugins never take them."""
    global _found
    with _lock:
        if _found is None:
            _found = _discover(builtin)
        return _found


def op_plugins(builtin: set[str]) -> list[OpPlugin]:
    """The installed ``fkl.ops`` entry points (discovered once per process, as above)."""
    plugin_ops(builtin)
    with _lock:
        return list(_plugins)


def reset_plugin_ops() -> None:
    """Forget what was discovered (tests that install plugins at run time use this)."""
    global _found
    with _lock:
        _found = None
        _plugins.clear()


def _discover(builtin: set[str]) -> dict[str, type]:
    from importlib import metadata

    from ._ops import Op

    eps = sorted(metadata.entry_points(group=ENTRY_POINT_GROUP),
                 key=lambda ep: (_dist(ep), ep.name))
    found: dict[str, type] = {}
    for ep in eps:
        where = f"{ep.name} = {ep.value} (from {_dist(ep)})"

        def record(ops: tuple[str, ...], error: str = "", ep: Any = ep) -> None:
            dist = getattr(ep, "dist", None)
            _plugins.append(OpPlugin(ep.name, ep.value, _dist(ep),
                                     str(dist.version) if dist is not None else "?", ops,
                                     error))

        try:
            obj = ep.load()
        except Exception as exc:
            _warn(f"fkl op plugin {where} failed to load and was skipped: "
                  f"{type(exc).__name__}: {exc}")
            record((), f"{type(exc).__name__}: {exc}")
            continue
        classes = [obj] if isinstance(obj, type) else _sequence(obj)
        bad = [c for c in classes or [obj] if not (isinstance(c, type) and issubclass(c, Op))]
        if bad or not classes:
            _warn(f"fkl op plugin {where} was skipped: expected an fkl.Op subclass or a "
                  f"sequence of them, got {bad[0] if bad else obj!r}")
            record((), "not an fkl.Op subclass or a sequence of them")
            continue
        record(tuple(f"{c.__module__}.{c.__qualname__}" for c in classes))
        for cls in classes:
            name = cls.__name__
            mine = f"{cls.__module__}.{cls.__qualname__}"
            if name in builtin:
                _warn(f"fkl op plugin {where}: its op {mine} has the name of the built-in "
                      f"fkl.{name}; fkl.{name} and fkl.ops.{name} stay the built-in one, "
                      f"use {mine} by importing it from its module")
            elif name in found and found[name] is not cls:
                other = found[name]
                _warn(f"fkl op plugin {where}: its op {mine} has the same name as "
                      f"{other.__module__}.{other.__qualname__}; fkl.ops.{name} stays the "
                      f"latter, use {mine} by importing it from its module")
            else:
                found[name] = cls
    return found


def _sequence(obj: Any) -> list[Any]:
    if isinstance(obj, (list, tuple)):
        return list(obj)
    return []


def _dist(ep: Any) -> str:
    dist = getattr(ep, "dist", None)
    return str(dist.metadata["Name"]) if dist is not None else "?"


def _warn(message: str) -> None:
    warnings.warn(message, OpPluginWarning, stacklevel=4)
