"""The plugin registry: one typed facade over pluggy's plugin manager.

Plugins are found in the ``thork`` entry-point group. ``THORK_DISABLE_PLUGINS`` (comma
separated entry-point names) blocks plugins; ``THORK_PLUGINS_AUTOLOAD=0`` loads none
from entry points (core's own built-ins stay). A plugin that fails to import, or whose
hook raises, is reported with a :class:`PluginWarning` and skipped.
"""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import pluggy

from . import _hookspecs
from ._adapter import ArrayAdapter
from ._compiler import Compiler
from ._errors import NoTargetError, PluginError
from ._frontend import Frontend
from ._target import Target

__all__ = ["Plugins", "PluginInfo", "PluginWarning", "plugins", "ENTRY_POINT_GROUP"]

ENTRY_POINT_GROUP = "thork"
_HOOKS = ("compilers", "targets", "frontends", "array_adapters")


class PluginWarning(UserWarning):
    """A plugin could not be loaded or its hook failed; it was skipped."""


@dataclass
class PluginInfo:
    """One plugin as ``thork info`` lists it."""

    name: str
    distribution: str
    version: str
    registered: dict[str, list[str]] = field(default_factory=dict)


class Plugins:
    """Loads plugins once and answers what they registered."""

    def __init__(self, *, autoload: bool | None = None, blocked: set[str] | None = None) -> None:
        self._pm = pluggy.PluginManager(_hookspecs.PROJECT)
        self._pm.add_hookspecs(_hookspecs)
        if autoload is None:
            autoload = os.environ.get("THORK_PLUGINS_AUTOLOAD", "1").lower() not in (
                "0", "false", "no", "off")
        if blocked is None:
            blocked = {
                b.strip() for b in os.environ.get("THORK_DISABLE_PLUGINS", "").split(",")
                if b.strip()
            }
        self.blocked = blocked
        self.info: dict[str, PluginInfo] = {}
        from . import _builtin

        self._register(_builtin, "core", "thork-core", _core_version())
        if autoload:
            self._load_entry_points()
        self._items: dict[str, list[Any]] = {}
        self._collect()

    # -- loading --------------------------------------------------------------------------
    def _register(self, plugin: Any, name: str, dist: str, version: str) -> None:
        self._pm.register(plugin, name=name)
        self.info[name] = PluginInfo(name, dist, version)

    def _load_entry_points(self) -> None:
        for name, value, dist, version in _entry_points():
            if name in self.blocked or name in self.info:
                continue
            try:
                plugin = metadata.EntryPoint(name, value, ENTRY_POINT_GROUP).load()
            except Exception as exc:
                warnings.warn(
                    f"thork plugin {name!r} ({value}) failed to load and was skipped: "
                    f"{type(exc).__name__}: {exc}", PluginWarning, stacklevel=3)
                continue
            self._register(plugin, name, dist, version)

    def _collect(self) -> None:
        for hook_name in _HOOKS:
            caller = getattr(self._pm.hook, f"thork_register_{hook_name}")
            items: list[Any] = []
            # pluggy calls the last-registered first; keep registration order instead.
            for impl in reversed(caller.get_hookimpls()):
                try:
                    got = list(impl.function() or ())
                except Exception as exc:
                    warnings.warn(
                        f"thork plugin {impl.plugin_name!r} failed in "
                        f"thork_register_{hook_name} and was skipped: "
                        f"{type(exc).__name__}: {exc}", PluginWarning, stacklevel=3)
                    continue
                items.extend(got)
                self.info[impl.plugin_name].registered[hook_name] = [
                    getattr(x, "name", type(x).__name__) for x in got]
            self._items[hook_name] = items

    # -- queries --------------------------------------------------------------------------
    def compilers(self) -> list[Compiler]:
        """All registered compilers, highest priority first."""
        return sorted(self._items["compilers"], key=lambda c: -c.priority)

    def targets(self) -> list[Target]:
        """All registered targets, highest priority first."""
        return sorted(self._items["targets"], key=lambda t: -t.priority)

    def frontends(self) -> list[Frontend]:
        return list(self._items["frontends"])

    def array_adapters(self) -> list[ArrayAdapter]:
        """Array adapters, highest priority first (cached: this is on the launch path)."""
        cached = self._items.get("_adapters_sorted")
        if cached is None:
            cached = sorted(self._items["array_adapters"], key=lambda a: -a.priority)
            self._items["_adapters_sorted"] = cached
        return cached

    def target(self, name: str | None = None) -> Target:
        """The target called ``name``; with None, ``THORK_TARGET`` or the best available."""
        name = name or os.environ.get("THORK_TARGET") or None
        targets = self.targets()
        if name is not None:
            for t in targets:
                if t.name == name:
                    ok, why = t.available()
                    if not ok:
                        raise NoTargetError(f"target {name!r} is not available here: {why}")
                    return t
            known = ", ".join(t.name for t in targets) or "none"
            hint = " (install thork-target-cpu)" if name == "cpu" else ""
            raise NoTargetError(f"no target named {name!r} is installed{hint}; installed: {known}")
        reasons = []
        for t in targets:
            ok, why = t.available()
            if ok:
                if reasons:
                    _notice_fallback(t, reasons)
                return t
            reasons.append(f"{t.name}: {why}")
        raise NoTargetError(
            "no target can run kernels here ("
            + ("; ".join(reasons) or "no target plugin installed")
            + "); install thork-target-cpu to run on the CPU"
        )

    def compiler(self, name: str | None, target: Target) -> Compiler:
        """The compiler called ``name`` (or ``THORK_COMPILER``, or the best) for ``target``."""
        fitting = [
            c for c in self.compilers()
            if c.language == target.language and set(c.produces) & set(target.consumes)
        ]
        if name is None:
            # The process-wide choice applies where it fits (THORK_COMPILER=nvcc must not
            # break CPU-target kernels); an explicit per-kernel choice stays strict.
            env = os.environ.get("THORK_COMPILER") or None
            if env is not None and (any(c.name == env for c in fitting)
                                    or not any(c.name == env for c in self.compilers())):
                name = env
        if name is not None:
            for c in self.compilers():
                if c.name == name:
                    if c not in fitting:
                        raise PluginError(
                            f"compiler {name!r} cannot produce code for the {target.name} "
                            f"target (it makes {', '.join(c.produces)} from {c.language})")
                    ok, why = c.available()
                    if not ok:
                        raise PluginError(f"compiler {name!r} is installed but not usable: {why}")
                    return c
            pkg = _COMPILER_PACKAGES.get(name, f"a plugin providing compiler {name!r}")
            raise PluginError(f"compiler {name!r} is not installed; install {pkg}")
        reasons = []
        for c in fitting:
            ok, why = c.available()
            if ok:
                return c
            reasons.append(f"{c.name}: {why}")
        want = "thork-backend-nvrtc" if target.language == "cuda" else "thork-target-cpu"
        raise PluginError(
            f"no compiler for the {target.name} target is usable ("
            + ("; ".join(reasons) or "none installed") + f"); install {want}")


_NOTICED: set[str] = set()


def _notice_fallback(chosen: Target, reasons: list[str]) -> None:
    """Say once per process, in one line, that a lower-priority target was chosen."""
    if chosen.name in _NOTICED:
        return
    _NOTICED.add(chosen.name)
    print(f"thork: running on the {chosen.name} target ({'; '.join(reasons)})",
          file=sys.stderr)


_COMPILER_PACKAGES = {
    "nvrtc": "thork-backend-nvrtc (pip install 'thork[nvrtc]')",
    "nvcc": "thork-backend-nvcc (pip install 'thork[nvcc]')",
    "clang": "thork-backend-clang (pip install 'thork[clang]')",
    "host-cxx": "thork-target-cpu (pip install 'thork[cpu]')",
}


def _scan_entry_points() -> list[list[str]]:
    out = []
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        out.append([ep.name, ep.value, dist.metadata["Name"] if dist else "?",
                    dist.version if dist else "?"])
    return out


def _entry_points() -> list[list[str]]:
    """The ``thork`` entry points, memoized on disk against the mtimes of ``sys.path``
    folders (installing or removing a distribution changes its folder's mtime)."""
    from ._memo import memo, path_fingerprint

    return memo("entry_points", path_fingerprint(sys.path), _scan_entry_points)


def _core_version() -> str:
    from . import __version__

    return __version__


_INSTANCE: Plugins | None = None


def plugins() -> Plugins:
    """The process-wide registry, loaded on first use."""
    global _INSTANCE
    if _INSTANCE is None:
        _INSTANCE = Plugins()
    return _INSTANCE


def reset_plugins() -> None:
    """Forget the registry so the next :func:`plugins` call reloads (tests use this)."""
    global _INSTANCE
    _INSTANCE = None
