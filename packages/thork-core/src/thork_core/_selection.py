"""Selection rules: which target runs a kernel and which compiler builds it, in one place.

Targets, first match wins:

1. the target named by the caller (``target=`` on a launch, a kernel or a pipe);
2. ``THORK_TARGET``;
3. the available target ranked first by :func:`rank`.

Compilers, for the chosen target, first match wins:

1. the compiler named by the caller: per call (``kernel[g, b](..., compiler=)``), else per
   kernel or pipe (``@tk.jit(compiler=)``, ``fkl.compose(compiler=)``) — strict: an
   unknown, unusable or unfitting name is an error;
2. ``THORK_COMPILER``, where it fits the target (a process-wide choice of ``nvcc`` must not
   break CPU-target kernels);
3. the target's ``preferred_compiler``, when installed, fitting and available;
4. the available fitting compiler ranked first by :func:`rank`.

:func:`rank` orders candidates by ``priority`` (higher first), but only among the
*trusted* ones: those of Thork's own distributions, and of plugins the user opted in with
``THORK_PLUGIN_DEFAULTS=name,...`` (entry-point names). A third-party target or compiler
therefore never silently displaces the built-in default, whatever priority it declares: it
runs when named, when opted in, or when nothing trusted is available.

The order lives in :func:`target_candidates` and :func:`compiler_candidates` (which name
applies, else the entries in the order they are tried); :func:`pick_target` and
:func:`pick_compiler` walk it asking each entry's availability, and the build's selection
record (``_build``) reads it to see whether a choice was the first candidate.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._errors import NoTargetError, PluginError

if TYPE_CHECKING:
    from ._compiler import Compiler
    from ._target import Target

__all__ = ["FIRST_PARTY", "OPT_IN_VARIABLE", "compiler_candidates", "opted_in", "pick_compiler",
           "pick_target", "rank", "target_candidates"]

#: Distributions whose plugins rank by priority without an opt-in.
FIRST_PARTY = frozenset({
    "thork-core", "thork-trace", "thork-target-cpu", "thork-backend-nvrtc",
    "thork-backend-nvcc", "thork-backend-clang", "fkl-compose", "thork-interop-torch",
})
#: Plugins (entry-point names, comma-separated) allowed to become defaults by priority.
OPT_IN_VARIABLE = "THORK_PLUGIN_DEFAULTS"

_COMPILER_PACKAGES = {
    # The install commands of docs/getting-started.md (Thork installs from its wheelhouse).
    "nvrtc": "thork-backend-nvrtc (pip install --find-links wheelhouse 'thork[nvrtc]', "
             "after nox -s wheels in a Thork checkout)",
    "nvcc": "thork-backend-nvcc (pip install --find-links wheelhouse 'thork[nvcc]', "
            "after nox -s wheels in a Thork checkout)",
    "clang": "thork-backend-clang (pip install --find-links wheelhouse 'thork[clang]', "
             "after nox -s wheels in a Thork checkout)",
    "host-cxx": "thork-target-cpu (pip install --find-links wheelhouse 'thork[cpu]', "
                "after nox -s wheels in a Thork checkout)",
}


def opted_in() -> set[str]:
    """Plugin names in ``THORK_PLUGIN_DEFAULTS``."""
    return {n.strip() for n in os.environ.get(OPT_IN_VARIABLE, "").split(",") if n.strip()}


def rank(items: Sequence[Any]) -> list[Any]:
    """``items`` (registry entries with ``priority`` and ``plugin.dist``/``plugin.name``)
    in default order: trusted before untrusted, then by priority, highest first; ties keep
    their given order."""
    trusted = opted_in()

    def untrusted(item: Any) -> bool:
        return item.plugin.dist not in FIRST_PARTY and item.plugin.name not in trusted

    return sorted(items, key=lambda i: (untrusted(i), -i.priority))


def target_candidates(items: Sequence[Any], name: str | None
                      ) -> tuple[str | None, list[Any]]:
    """The target rules' candidates, availability aside: ``(name, [])`` where rule 1 or 2
    names one (the caller's ``name``, else ``THORK_TARGET``), else ``(None, entries)``:
    every entry in the order rule 3 tries them."""
    name = name or os.environ.get("THORK_TARGET") or None
    return (name, []) if name is not None else (None, rank(items))


def compiler_candidates(items: Sequence[Any], name: str | None, target: Target
                        ) -> tuple[str | None, list[Any], list[Any]]:
    """The compiler rules' candidates for ``target``, availability aside:
    ``(name, fitting, order)``. ``fitting``: the entries that make what ``target`` consumes
    from its language. ``name``: the compiler rule 1 or 2 names (the caller's ``name``;
    else ``THORK_COMPILER`` where it names a fitting compiler, or one not installed at all,
    which is an error to report), with ``order`` empty; else None, and ``order`` the
    fitting entries in the order rules 3 and 4 try them (the target's preferred compiler,
    then the rest by :func:`rank`)."""
    fitting = [c for c in items
               if c.language == target.language and set(c.kinds) & set(target.consumes)]
    if name is None:
        env = os.environ.get("THORK_COMPILER") or None
        if env is not None and (any(c.name == env for c in fitting)
                                or not any(c.name == env for c in items)):
            name = env
    if name is not None:
        return name, fitting, []
    preferred = getattr(target, "preferred_compiler", None)
    first = [c for c in fitting if preferred and c.name == preferred]
    rest = [c for c in rank(fitting) if all(c is not f for f in first)]
    return None, fitting, first + rest


def pick_target(items: Sequence[Any], name: str | None, obj: Callable[[Any], Any]) -> Target:
    """The target by the rules above; ``obj`` turns a registry entry into its object."""
    name, order = target_candidates(items, name)
    if name is not None:
        for item in items:
            if item.name == name:
                t: Target = obj(item)
                ok, why = t.available()
                if not ok:
                    raise NoTargetError(f"target {name!r} is not available here: {why}")
                return t
        known = ", ".join(t.name for t in items) or "none"
        hint = " (install thork-target-cpu)" if name == "cpu" else ""
        raise NoTargetError(f"no target named {name!r} is installed{hint}; installed: {known}")
    reasons: list[str] = []
    for item in order:
        t = obj(item)
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


def pick_compiler(items: Sequence[Any], name: str | None, target: Target,
                  obj: Callable[[Any], Any]) -> Compiler:
    """The compiler for ``target`` by the rules above (``items``: every compiler entry)."""
    name, fitting, order = compiler_candidates(items, name, target)
    if name is not None:
        return _named(items, fitting, name, target, obj)
    reasons: list[str] = []
    for c in order:
        comp: Compiler = obj(c)
        ok, why = comp.available()
        if ok:
            return comp
        reasons.append(f"{c.name}: {why}")
    want = "thork-backend-nvrtc" if target.language == "cuda" else "thork-target-cpu"
    raise PluginError(
        f"no compiler for the {target.name} target is usable ("
        + ("; ".join(reasons) or "none installed") + f"); install {want}")


def _named(items: Sequence[Any], fitting: list[Any], name: str, target: Target,
           obj: Callable[[Any], Any]) -> Compiler:
    for c in items:
        if c.name == name:
            if c not in fitting:
                raise PluginError(
                    f"compiler {name!r} cannot produce code for the {target.name} "
                    f"target (it makes {', '.join(c.kinds)} from {c.language})")
            comp: Compiler = obj(c)
            ok, why = comp.available()
            if not ok:
                raise PluginError(f"compiler {name!r} is installed but not usable: {why}")
            return comp
    pkg = _COMPILER_PACKAGES.get(name, f"a plugin providing compiler {name!r}")
    raise PluginError(f"compiler {name!r} is not installed; install {pkg}")


_NOTICED: set[str] = set()


def _notice_fallback(chosen: Target, reasons: list[str]) -> None:
    """Say once per process, in one line, that a lower-ranked target was chosen."""
    if chosen.name in _NOTICED:
        return
    _NOTICED.add(chosen.name)
    print(f"thork: running on the {chosen.name} target ({'; '.join(reasons)})",
          file=sys.stderr)
