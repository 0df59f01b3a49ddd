"""Every hook a Thork plugin can implement (the plugin API's contract; the objects the
hooks return are in :mod:`thork_core.plugin`).

A plugin is a module (or object) named by an entry point in the ``thork`` group and
implementing any of these hooks with :data:`hookimpl`. Anyone may implement any hook:
Thork's own packages are plugins written against the same public API.

Common to every hook: it takes no parameters; it is called at most once per process for
each plugin, when the registry imports that plugin (the first time a query needs one of
its objects, or when the registry is built and its plugin index has no valid entry for the
plugin: ``docs/plugins.md``, "Lazy loading"). What it returns must depend only on the
plugin's installed files, never on the machine or environment (whether something works
here belongs in ``available()``). A plugin module stays cheap to import: import compilers,
drivers and heavy libraries inside the hook. A hook that raises is reported with one
:class:`~thork_core.PluginWarning` naming the plugin; what the plugin registered through
its other hooks stays.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    from ._adapter import ArrayAdapter
    from ._compiler import Compiler
    from ._frontend import Frontend
    from ._target import Target

PROJECT = "thork"
_F = TypeVar("_F", bound=Callable[..., Any])


class HookimplMarker:
    """``@hookimpl`` (with pluggy's options): marks a hook implementation exactly as
    ``pluggy.HookimplMarker("thork")`` does (the ``thork_impl`` attribute and its options),
    without importing pluggy: ``import thork`` and a fresh process's lazily imported
    plugins do not need it (the registry imports pluggy only to index a plugin)."""

    def __init__(self, project_name: str) -> None:
        self.project_name = project_name

    @overload
    def __call__(self, function: _F) -> _F: ...

    @overload
    def __call__(self, function: None = None, hookwrapper: bool = False,
                 optionalhook: bool = False, tryfirst: bool = False, trylast: bool = False,
                 specname: str | None = None, wrapper: bool = False
                 ) -> Callable[[_F], _F]: ...

    def __call__(self, function: _F | None = None, hookwrapper: bool = False,
                 optionalhook: bool = False, tryfirst: bool = False, trylast: bool = False,
                 specname: str | None = None, wrapper: bool = False
                 ) -> _F | Callable[[_F], _F]:
        def mark(func: _F) -> _F:
            setattr(func, self.project_name + "_impl", {
                "wrapper": wrapper, "hookwrapper": hookwrapper,
                "optionalhook": optionalhook, "tryfirst": tryfirst, "trylast": trylast,
                "specname": specname})
            return func

        return mark if function is None else mark(function)


class HookspecMarker:
    """``@hookspec``: marks a hook specification as ``pluggy.HookspecMarker("thork")``
    does (the ``thork_spec`` attribute), without importing pluggy."""

    def __init__(self, project_name: str) -> None:
        self.project_name = project_name

    @overload
    def __call__(self, function: _F) -> _F: ...

    @overload
    def __call__(self, function: None = None, firstresult: bool = False,
                 historic: bool = False, warn_on_impl: Warning | None = None,
                 warn_on_impl_args: dict[str, Warning] | None = None
                 ) -> Callable[[_F], _F]: ...

    def __call__(self, function: _F | None = None, firstresult: bool = False,
                 historic: bool = False, warn_on_impl: Warning | None = None,
                 warn_on_impl_args: dict[str, Warning] | None = None
                 ) -> _F | Callable[[_F], _F]:
        if historic and firstresult:
            raise ValueError("cannot have a historic firstresult hook")

        def mark(func: _F) -> _F:
            setattr(func, self.project_name + "_spec", {
                "firstresult": firstresult, "historic": historic,
                "warn_on_impl": warn_on_impl, "warn_on_impl_args": warn_on_impl_args})
            return func

        return mark if function is None else mark(function)


# The plugin API's version (PLUGIN_API_VERSION) and plugins' declared ranges: _plugin_api.
hookspec = HookspecMarker(PROJECT)
hookimpl = HookimplMarker(PROJECT)


@hookspec
def thork_register_compilers() -> list[Compiler]:
    """Return the compilers this plugin provides (e.g. NVRTC, nvcc, a host C++ compiler):
    :class:`~thork_core.plugin.Compiler` instances.

    Called once per process, when the registry imports the plugin: the first time a
    build needs a compiler it may provide (a kernel's first compile or disk-cache hit),
    when every compiler is listed (``thork info``), or when the plugin is (re)indexed.
    Combining: the lists of all plugins are concatenated. A build's compiler is the one
    named by the caller, else ``THORK_COMPILER`` (where it fits), else the target's
    ``preferred_compiler``, else the available compiler fitting the target (its
    ``language`` and artifact kinds) ranked first: Thork's own and opted-in plugins'
    (``THORK_PLUGIN_DEFAULTS``) by descending ``priority``, then the others'.
    Who implements it: any plugin shipping a compiler (thork-backend-nvrtc, -nvcc, -clang,
    thork-target-cpu, third parties such as the thork-sanitize example).
    """
    raise NotImplementedError


@hookspec
def thork_register_targets() -> list[Target]:
    """Return the targets this plugin provides (e.g. the GPU, the CPU):
    :class:`~thork_core.plugin.Target` instances.

    Called once per process, when the registry imports the plugin: the first time a
    target it may provide is asked for by name, or when the default target is chosen and
    the targets ranked before it are unavailable, when every target is listed, or when
    the plugin is (re)indexed. Combining: the lists are concatenated. A kernel runs on
    the target named by the caller, else ``THORK_TARGET``, else the first available one
    in rank order: Thork's own and opted-in plugins' by descending ``priority`` (GPU 100,
    CPU 10), then the others' — a third-party target never becomes the default while a
    built-in one is available unless the user opts in.
    Who implements it: core (``gpu``), thork-target-cpu (``cpu``), thork-backend-nvcc
    (``gpu-hostlib``), third parties.
    """
    raise NotImplementedError


@hookspec
def thork_register_frontends() -> list[Frontend]:
    """Return descriptions of the front-ends this plugin provides (tracer, compose):
    :class:`~thork_core.plugin.Frontend` records.

    Called once per process, when front-ends are listed (``thork info``, ``thork
    plugins``) or the plugin is (re)indexed. Combining: the lists are concatenated in
    registration order; informational only, since users import front-ends directly.
    Who implements it: thork-trace, fkl-compose, any package that builds kernel IR and
    hands it to :func:`thork_core.build.build_kernel`.
    """
    raise NotImplementedError


@hookspec
def thork_register_array_adapters() -> list[ArrayAdapter]:
    """Return adapters that turn foreign array objects into launch arguments:
    :class:`~thork_core.plugin.ArrayAdapter` instances.

    Called once per process, the first time an argument needs an adapter (the first
    launch with an array) or adapters are listed. Combining: the lists are concatenated
    and sorted by descending ``priority``; for each argument the first adapter whose
    ``view`` accepts the object (returns an :class:`~thork_core.plugin.ArrayView`, not
    None) wins. Core provides NumPy, ``__cuda_array_interface__`` and DLPack adapters.
    Who implements it: core, interop packages (thork-interop-torch), third parties adding
    an array type the built-in protocols do not cover.
    """
    raise NotImplementedError
