"""The plugin API version, and the version ranges plugins declare against it.

Core's plugin API has a version of its own, ``MAJOR.MINOR``, separate from the
distribution versions: MINOR grows when something is added to what plugins may use
(hooks, public classes, attributes), MAJOR when something a plugin may rely on changes or
goes away. A plugin module (what its ``thork`` entry point names) declares the versions it
works with as ``THORK_PLUGIN_API = ">=1.0,<2"``: comma-separated clauses, each an operator
(``>=``, ``>``, ``<=``, ``<``, ``==``, ``!=``) and a dotted version. A plugin outside its
range is skipped with one warning naming the plugin, its range and core's version; a
plugin that declares nothing is taken as compatible.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable

__all__ = ["PLUGIN_API_VERSION", "ATTRIBUTE", "parse_range", "in_range", "incompatibility"]

#: The plugin API this core provides.
PLUGIN_API_VERSION = "1.0"
#: The module attribute in which a plugin declares the range it supports.
ATTRIBUTE = "THORK_PLUGIN_API"

_OPS: dict[str, Callable[[tuple[int, ...], tuple[int, ...]], bool]] = {
    ">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
    ">": operator.gt, "<": operator.lt,
}
_CLAUSE = re.compile(r"\s*(>=|<=|==|!=|>|<)\s*(\d+(?:\.\d+)*)\s*")


def _version(text: str) -> tuple[int, ...]:
    parts = tuple(int(p) for p in text.split("."))
    return parts + (0,) * (3 - len(parts)) if len(parts) < 3 else parts


def parse_range(spec: str) -> list[tuple[str, tuple[int, ...]]]:
    """``">=1.0,<2"`` as ``[(">=", (1, 0, 0)), ("<", (2, 0, 0))]``; ValueError (saying
    what is wrong) for anything else."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"expected a version range such as '>=1.0,<2', got {spec!r}")
    out = []
    for clause in spec.split(","):
        m = _CLAUSE.fullmatch(clause)
        if m is None:
            raise ValueError(f"cannot read {clause.strip()!r} in the version range {spec!r} "
                             "(expected an operator >=, >, <=, <, ==, != and a version)")
        out.append((m.group(1), _version(m.group(2))))
    return out


def in_range(version: str, spec: str) -> bool:
    """Whether ``version`` (``MAJOR.MINOR``) satisfies every clause of ``spec``."""
    v = _version(version)
    return all(_OPS[op](v, bound) for op, bound in parse_range(spec))


def incompatibility(declared: object) -> str | None:
    """Why a plugin declaring ``declared`` (its ``THORK_PLUGIN_API``, None if absent)
    cannot be loaded by this core, or None when it can."""
    if declared is None:
        return None
    if isinstance(declared, str):  # every plugin's index entry asks: parse each range once
        return _incompatibility(declared, PLUGIN_API_VERSION)
    return _incompatibility.__wrapped__(declared, PLUGIN_API_VERSION)  # type: ignore[arg-type]


@functools.lru_cache(maxsize=64)
def _incompatibility(declared: str, provided: str) -> str | None:
    try:
        ok = in_range(provided, declared)
    except ValueError as exc:
        return f"its {ATTRIBUTE} is invalid: {exc}"
    if ok:
        return None
    return f"it supports plugin API {declared} and thork-core provides {provided}"
