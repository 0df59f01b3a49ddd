"""The plugin registry: one typed facade over pluggy's plugin manager.

Plugins are found in the ``thork`` entry-point group. ``THORK_DISABLE_PLUGINS`` (comma
separated entry-point names) blocks plugins; ``THORK_PLUGINS_AUTOLOAD=0`` loads none
from entry points (core's own built-ins stay). A plugin that fails to import, or whose
hook raises, is reported with a :class:`PluginWarning` and skipped; so is one whose
declared plugin API range (``THORK_PLUGIN_API``, see ``_plugin_api``) excludes this core.
Each such warning is one line naming the plugin, and points at the plugin's file (the
failing line when there is one), not at Thork's; it shows once per process.

Plugins load lazily. What each plugin registers — the names, priorities, languages and
artifact kinds of its compilers, targets, front-ends and array adapters — is memoized on
disk (``memo.json``, see ``_memo``) per entry point (name, value, distribution and
version) together with the modification times of the files that define it (the plugin
module and the modules of the registered classes). A registry built from that index
imports a plugin only when a query needs one of its objects: a disk-cache hit on the CPU
target imports the CPU plugin alone; ``compilers()``, ``targets()`` and ``thork info``
import everything. A plugin the index does not know (new, upgraded, edited, blocked
before, or failing) is imported when the registry is built, as before, and indexed if
it loads cleanly. When a lazily imported plugin turns out to differ from its index entry
(or fails to import), its real registrations replace the indexed ones (or it is
skipped with a warning) and the query is answered again.

pluggy's plugin manager registers (and so validates) every plugin the registry indexes.
A plugin imported lazily from a valid index entry whose hooks are plain module functions
named after their hooks (recorded when it was indexed: ``direct``) has those functions
called directly: its files are the ones pluggy validated, and a fresh process's first
kernel call imports neither pluggy nor its plugin manager.
"""

from __future__ import annotations

import _thread
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from . import _hookspecs, _plugin_api
from ._env import env_flag
from ._record import Record
from ._selection import pick_compiler, pick_target

# The registry handles plugin objects without needing their classes at run time: the
# launch path (argument binding asks for array adapters) imports this module, and it must
# not import the target and compiler interfaces back (no import cycle).
if TYPE_CHECKING:
    import pluggy

    from ._adapter import ArrayAdapter
    from ._compiler import Compiler
    from ._frontend import Frontend
    from ._target import Target

__all__ = ["Plugins", "PluginInfo", "PluginWarning", "plugins", "ENTRY_POINT_GROUP"]

ENTRY_POINT_GROUP = "thork"
_HOOKS = ("compilers", "targets", "frontends", "array_adapters")
#: The attribute holding an item's artifact kinds, per hook.
_KINDS = {"compilers": "produces", "targets": "consumes"}
#: The attribute an item's third fact comes from, per hook: a compiler's or target's
#: language; an array adapter's ``follows`` (the module whose current stream it follows:
#: the launch path asks such adapters only while that module is imported, and the index
#: says which they are without importing the other plugins).
_THIRD = {"compilers": "language", "targets": "language", "array_adapters": "follows"}
#: Bump when the layout of the plugin index (or what it records) changes.
_INDEX_FORMAT = 3
_INDEX = "plugin_index"

T = TypeVar("T")


class PluginWarning(UserWarning):
    """A plugin could not be loaded or its hook failed; it was skipped."""


class PluginInfo(Record):
    """One plugin as ``thork info`` lists it (a dataclass written out:
    :mod:`thork_core._record`)."""

    _fields = ("name", "distribution", "version", "registered")
    name: str
    distribution: str
    version: str
    registered: dict[str, list[str]]

    def __init__(self, name: str, distribution: str, version: str,
                 registered: dict[str, list[str]] | None = None) -> None:
        self.name = name
        self.distribution = distribution
        self.version = version
        self.registered = {} if registered is None else registered


class _Item:
    """One registered compiler, target, front-end or adapter: its facts (from the index or
    from the object) and the object once its plugin is imported."""

    __slots__ = ("plugin", "name", "priority", "language", "kinds", "obj")

    def __init__(self, plugin: _Plugin, fact: list[Any], obj: Any = None) -> None:
        self.plugin = plugin
        self.name, self.priority, self.language, kinds = fact
        self.kinds = tuple(kinds)
        self.obj = obj

    def fact(self) -> list[Any]:
        return [self.name, self.priority, self.language, list(self.kinds)]


class _Plugin:
    """One entry point (or core's built-ins) in registration order."""

    __slots__ = ("name", "value", "dist", "version", "loaded", "items", "direct")

    def __init__(self, name: str, value: str, dist: str, version: str) -> None:
        self.name, self.value, self.dist, self.version = name, value, dist, version
        self.loaded = False
        #: Its index entry says its hooks can be called without pluggy (see the module
        #: docstring); set from a valid entry only.
        self.direct = False
        #: hook -> items, for the hooks the plugin implements (indexed or real).
        self.items: dict[str, list[_Item]] = {}

    @property
    def key(self) -> str:
        return f"{self.name}={self.value} {self.dist}=={self.version}"


class _Changed(Exception):
    """A lazily imported plugin failed or differed from its index entry: ask again."""


class Plugins:
    """Loads plugins (lazily, see the module docstring) and answers what they registered."""

    def __init__(self, *, autoload: bool | None = None, blocked: set[str] | None = None) -> None:
        self._manager: pluggy.PluginManager | None = None  # made when a plugin is imported
        if autoload is None:
            autoload = env_flag("THORK_PLUGINS_AUTOLOAD", True)
        if blocked is None:
            blocked = {
                b.strip() for b in os.environ.get("THORK_DISABLE_PLUGINS", "").split(",")
                if b.strip()
            }
        self.blocked = blocked
        self.info: dict[str, PluginInfo] = {}
        self._lock = _thread.RLock()
        self._adapters: list[ArrayAdapter] | None = None
        #: Exact argument types the highest-priority adapter took (its answer for them
        #: skips no other adapter; see :func:`thork_core._binding.find_view`).
        self.lead_adapter: dict[type, ArrayAdapter] = {}
        candidates = [_Plugin("core", "thork_core._builtin", "thork-core", _core_version())]
        eps = _entry_points() if autoload else []
        seen = {"core"}
        for name, value, dist, version in eps:
            if name in blocked or name in seen:
                continue
            seen.add(name)
            candidates.append(_Plugin(name, value, dist, version))
        from . import _memo

        index = _memo.recall(_INDEX, [_INDEX_FORMAT])
        self._index: dict[str, Any] = dict(index) if isinstance(index, dict) else {}
        self._index_dirty = False
        # Entries kept when the index is saved: those of installed entry points (blocked
        # ones included); all of them when this registry did not look (autoload off).
        self._keep = ({f"{n}={v} {d}=={ver}" for n, v, d, ver in eps} | {candidates[0].key}
                      if autoload else None)
        if self._keep is not None and not self._keep.issuperset(self._index):
            self._index_dirty = True  # uninstalled or upgraded: drop their entries
        self._plugins: list[_Plugin] = []
        stamps: dict[str, Any] = {}  # path -> [path, mtime, size] (None: missing), shared
        for p in candidates:
            if not self._from_index(p, stamps):
                items = self._load(p)
                if items is None:
                    continue
                p.items = items
            self._plugins.append(p)
            self.info[p.name] = PluginInfo(p.name, p.dist, p.version, _names(p.items))
        self._save_index()

    # -- loading --------------------------------------------------------------------------
    @property
    def _pm(self) -> pluggy.PluginManager:
        if self._manager is None:
            import pluggy

            self._manager = pluggy.PluginManager(_hookspecs.PROJECT)
            self._manager.add_hookspecs(_hookspecs)
        return self._manager

    def _from_index(self, p: _Plugin, stamps: dict[str, Any] | None = None) -> bool:
        """Take ``p``'s registrations from the index if its entry is still valid
        (``stamps``: files already looked at while building this registry)."""
        entry = self._index.get(p.key)
        if entry is None:
            return False
        try:
            files = entry["files"]
            if _stamps((f[0] for f in files), {} if stamps is None else stamps) != files:
                return False
            if _plugin_api.incompatibility(entry.get("api")) is not None:
                return False  # core changed under it: import it to say why it is skipped
            p.items = {hook: [_Item(p, fact) for fact in facts]
                       for hook, facts in entry["registered"].items()}
            p.direct = entry.get("direct") is True
        except (TypeError, KeyError, ValueError):
            return False
        return True

    def _load(self, p: _Plugin, indexed: bool = False) -> dict[str, list[_Item]] | None:
        """Import ``p`` and call its hooks: the registered objects per hook, or None (with
        a warning) when it cannot be imported. Indexes it when every hook succeeded
        (``indexed``: its index entry was found valid when the registry was built, and is
        rewritten only when it registered something else)."""
        direct: dict[str, Callable[[], Any]] | None = None
        try:
            plugin = _load_object(p.value)
            why = _plugin_api.incompatibility(getattr(plugin, _plugin_api.ATTRIBUTE, None))
            if why is None:
                if indexed and p.direct:
                    direct = _direct_hooks(plugin)
                if direct is None:
                    self._pm.register(plugin, name=p.name)
        except Exception as exc:
            _warn(f"thork plugin {p.name!r} ({p.value}) failed to load and was skipped: "
                  f"{type(exc).__name__}: {exc}", p.value, exc)
            self._forget(p)
            return None
        if why is not None:
            _warn(f"thork plugin {p.name!r} ({p.dist} {p.version}) was skipped: {why}",
                  p.value, None)
            self._forget(p)
            return None
        p.loaded = True
        clean = True
        items: dict[str, list[_Item]] = {}
        if direct is None:  # as pluggy registered them
            functions = []
            for hook in _HOOKS:
                caller = getattr(self._pm.hook, f"thork_register_{hook}")
                functions += [(hook, impl.function) for impl in caller.get_hookimpls()
                              if impl.plugin_name == p.name]
        else:
            functions = list(direct.items())
        for hook, function in functions:
            try:
                got = list(function() or ())
            except Exception as exc:
                _warn(f"thork plugin {p.name!r} failed in thork_register_{hook} and was "
                      f"skipped: {type(exc).__name__}: {exc}", p.value, exc)
                clean = False
                continue
            items[hook] = [_Item(p, _fact(hook, x), x) for x in got]
        if clean:
            if not (indexed and _facts(items) == _facts(p.items)):
                self._remember(p, plugin, items,
                               direct is not None or _direct_hooks(plugin) == dict(functions))
        else:
            self._forget(p)
        return items

    def _remember(self, p: _Plugin, plugin: Any, items: dict[str, list[_Item]],
                  direct: bool) -> None:
        """Index what ``p`` registered, with the files that define it (``direct``: its
        hooks are the module functions :func:`_direct_hooks` finds, exactly)."""
        from ._memo import path_fingerprint

        facts = _facts(items)
        if not _json_safe(facts):
            self._forget(p)
            return
        files = {_file_of(plugin)}
        for its in items.values():
            for i in its:
                files.update(_file_of(c) for c in type(i.obj).__mro__
                             if c.__module__ not in ("builtins", "abc"))
        entry = {"files": path_fingerprint(sorted(f for f in files if f is not None)),
                 "registered": facts, "direct": direct}
        declared = getattr(plugin, _plugin_api.ATTRIBUTE, None)
        if isinstance(declared, str):
            entry["api"] = declared
        p.direct = direct
        if self._index.get(p.key) != entry:
            self._index[p.key] = entry
            self._index_dirty = True

    def _forget(self, p: _Plugin) -> None:
        if self._index.pop(p.key, None) is not None:
            self._index_dirty = True

    def _save_index(self) -> None:
        if not self._index_dirty:
            return
        from . import _memo

        keep = self._keep
        index = {k: v for k, v in self._index.items() if keep is None or k in keep}
        _memo.remember(_INDEX, [_INDEX_FORMAT], index)
        self._index_dirty = False

    def _obj(self, item: _Item) -> Any:
        """The object of ``item``, importing its plugin on first use. Raises _Changed when
        the plugin failed or registered something else than its index entry said."""
        if item.obj is not None:
            return item.obj
        p = item.plugin
        assert not p.loaded, "items of an imported plugin carry their objects"
        items = self._load(p, indexed=True)
        if items is not None and _facts(items) == _facts(p.items):
            for hook, its in items.items():  # as indexed: the facts get their objects
                for old, new in zip(p.items[hook], its):
                    old.obj = new.obj
            self._save_index()
            return item.obj
        if items is None:
            self._plugins.remove(p)
            self.info.pop(p.name, None)
        else:
            p.items = items
            self.info[p.name].registered = _names(items)
        self._adapters = None
        self.lead_adapter = {}
        self._save_index()
        raise _Changed

    def _answer(self, question: Callable[[], T]) -> T:
        with self._lock:
            while True:
                try:
                    return question()
                except _Changed:  # each round imports one more plugin: this ends
                    continue

    def _items(self, hook: str) -> list[_Item]:
        """Registered items of ``hook``, highest priority first, as facts (their objects
        load through :meth:`_obj`). Among equal priorities, pluggy's call order: the last
        registered plugin first, core last (what the registry has always done)."""
        return sorted(self._unsorted(hook), key=lambda i: -i.priority)

    def _unsorted(self, hook: str) -> list[_Item]:
        return [i for p in reversed(self._plugins) for i in p.items.get(hook, ())]

    def _all(self, hook: str) -> list[Any]:
        return self._answer(lambda: [self._obj(i) for i in self._items(hook)])

    # -- queries --------------------------------------------------------------------------
    def compilers(self) -> list[Compiler]:
        """All registered compilers, highest priority first (imports every compiler plugin)."""
        return self._all("compilers")

    def targets(self) -> list[Target]:
        """All registered targets, highest priority first (imports every target plugin)."""
        return self._all("targets")

    def frontends(self) -> list[Frontend]:
        return self._answer(lambda: [self._obj(i) for i in self._unsorted("frontends")])

    def array_adapters(self) -> list[ArrayAdapter]:
        """Array adapters, highest priority first (cached: this is on the launch path)."""
        cached = self._adapters
        if cached is None:
            cached = self._all("array_adapters")
            self._adapters = cached
        return cached

    def follower_adapters(self) -> list[ArrayAdapter]:
        """The array adapters that follow a module now imported (``follows``), highest
        priority first: imports those adapters' plugins only (the index names them)."""
        modules = sys.modules
        return self._answer(lambda: [
            self._obj(i) for i in self._items("array_adapters")
            if i.language and i.language in modules])

    def each_adapter(self) -> Iterator[ArrayAdapter]:
        """The array adapters, highest priority first, each plugin imported only when the
        iteration reaches it: a lookup that the first adapter answers (NumPy arrays)
        imports no other plugin."""
        cached = self._adapters
        if cached is not None:
            yield from cached
            return
        with self._lock:
            items = self._items("array_adapters")
        done: list[Any] = []
        for item in items:
            obj = item.obj
            if obj is None:
                try:
                    with self._lock:
                        obj = self._obj(item)
                except _Changed:  # the plugins changed under the index: the full list
                    yield from (a for a in self.array_adapters()
                                if not any(a is d for d in done))
                    return
            done.append(obj)
            yield obj
        if self._adapters is None:
            self._adapters = done

    def target(self, name: str | None = None) -> Target:
        """The target called ``name``; with None, ``THORK_TARGET`` or the default (the
        rules are in :mod:`thork_core._selection`)."""
        return self._answer(lambda: pick_target(self._items("targets"), name, self._obj))

    def compiler(self, name: str | None, target: Target) -> Compiler:
        """The compiler called ``name`` for ``target``; with None, ``THORK_COMPILER``, the
        target's preferred compiler or the default (see :mod:`thork_core._selection`)."""
        return self._answer(
            lambda: pick_compiler(self._items("compilers"), name, target, self._obj))

    def loaded(self) -> list[str]:
        """Names of the plugins imported so far (the others are known from the index)."""
        return [p.name for p in self._plugins if p.loaded]


def _direct_hooks(plugin: Any) -> dict[str, Callable[[], Any]] | None:
    """``plugin``'s hook functions when it is a module whose hooks are plain functions
    named ``thork_register_<hook>`` (marked, no pluggy options that change how they are
    called or matched), by hook in :data:`_HOOKS` order; None otherwise."""
    if not isinstance(plugin, type(sys)):
        return None
    marker = _hookspecs.PROJECT + "_impl"
    out: dict[str, Callable[[], Any]] = {}
    for hook in _HOOKS:
        function = getattr(plugin, f"thork_register_{hook}", None)
        if function is None:
            continue
        opts = getattr(function, marker, None)
        if not isinstance(opts, dict) or any(opts.get(k) for k in (
                "specname", "wrapper", "hookwrapper", "tryfirst", "trylast")):
            return None
        out[hook] = function
    return out


def _stamps(paths: Iterator[str], seen: dict[str, Any]) -> list[Any]:
    """:func:`~thork_core._memo.path_fingerprint` of ``paths``, each path looked at once
    per ``seen`` (the registry build's shared record: plugins share core's files)."""
    out = []
    for p in paths:
        got = seen.get(p, False)
        if got is False:
            try:
                st = os.stat(p)
                got = [p, st.st_mtime_ns, st.st_size]
            except OSError:
                got = None
            seen[p] = got
        if got is not None:
            out.append(got)
    return out


def _facts(items: dict[str, list[_Item]]) -> dict[str, list[list[Any]]]:
    return {hook: [i.fact() for i in its] for hook, its in items.items()}


def _names(items: dict[str, list[_Item]]) -> dict[str, list[str]]:
    return {hook: [i.name for i in its] for hook, its in items.items()}


def _fact(hook: str, obj: Any) -> list[Any]:
    """What the index records of a registered object."""
    kinds = getattr(obj, _KINDS[hook], ()) if hook in _KINDS else ()
    third = getattr(obj, _THIRD[hook], "") if hook in _THIRD else ""
    return [getattr(obj, "name", type(obj).__name__), getattr(obj, "priority", 0),
            third if isinstance(third, str) else "", list(kinds)]


def _json_safe(value: Any) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_safe(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_json_safe(v) for v in value)
    return isinstance(value, (str, int, float, bool)) or value is None


def _file_of(obj: Any) -> str | None:
    """The source file defining a module, or a class's module."""
    module = obj if isinstance(obj, type(sys)) else sys.modules.get(
        getattr(obj, "__module__", "") or "")
    path = getattr(module, "__file__", None)
    return path if isinstance(path, str) else None


#: Warnings already shown (``warnings``' once-per-location registry, keyed by message).
_WARNED: dict[Any, Any] = {}


def _warn(message: str, value: str, exc: BaseException | None) -> None:
    """Warn about a plugin, attributed to the plugin's own file: the deepest frame of
    ``exc``'s traceback outside Thork's core and importlib, else the plugin module."""
    core = os.path.dirname(os.path.abspath(__file__))
    filename, lineno = "", 1
    tb = exc.__traceback__ if exc is not None else None
    while tb is not None:
        f = tb.tb_frame.f_code.co_filename
        if not f.startswith(core) and "importlib" not in f:
            filename, lineno = f, tb.tb_lineno
        tb = tb.tb_next
    if isinstance(exc, SyntaxError) and exc.filename:
        filename, lineno = exc.filename, exc.lineno or 1
    if not filename:
        filename, lineno = _module_file(value), 1
    module = value.split(":", 1)[0].split("[", 1)[0].strip()
    warnings.warn_explicit(message, PluginWarning, filename or f"<plugin {module}>", lineno,
                           module=module, registry=_WARNED)


def _module_file(value: str) -> str:
    """The file of the module an entry point names, without importing it ("" if none)."""
    import importlib.util

    module = value.split(":", 1)[0].split("[", 1)[0].strip()
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return ""
    return spec.origin if spec is not None and spec.origin else ""


def _load_object(value: str) -> Any:
    """What an entry point's value names: ``module`` or ``module:attr.attr``."""
    import importlib

    value = value.split("[", 1)[0].strip()  # extras ([...]) do not change the object
    module, _, attr = value.partition(":")
    obj = importlib.import_module(module.strip())
    for part in attr.strip().split(".") if attr.strip() else ():
        obj = getattr(obj, part)
    return obj


def _scan_entry_points() -> list[list[str]]:
    from importlib import metadata  # ~5 ms to import: only when the memo is stale

    out = []
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        out.append([ep.name, ep.value, dist.metadata["Name"] if dist else "?",
                    dist.version if dist else "?"])
    return out


def _entry_points() -> list[list[str]]:
    """The ``thork`` entry points, memoized on disk against the distribution metadata
    found on ``sys.path`` (installing, upgrading or removing a distribution changes it)."""
    from ._memo import installed_fingerprint, memo

    return memo("entry_points", installed_fingerprint(), _scan_entry_points)


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
    """Forget the registry so the next :func:`plugins` call reloads (tests use this), and
    the array kinds decided with it (the followers may differ)."""
    global _INSTANCE
    _INSTANCE = None
    from ._probe import forget_kinds

    forget_kinds()
