"""Description of a front-end, as listed by ``thork info``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._record import FrozenRecord

__all__ = ["Frontend"]


class Frontend(FrozenRecord):
    """``name`` (``trace``, ``compose``), the module users import, and one line about it.

    ``extensions``, where a front-end has plugins of its own (fkl's op plugins, an entry
    point group of their own), returns one dict per such plugin for ``thork plugins``:
    ``name``, ``distribution``, ``version``, ``registered`` (what it provides, by kind)
    and ``error`` (empty when it loaded). Called only when plugins are listed.
    Immutable, compared and hashed by its fields (a frozen dataclass written out:
    :mod:`thork_core._record`)."""

    _fields = ("name", "module", "description", "extensions")
    name: str
    module: str
    description: str
    extensions: Callable[[], list[dict[str, Any]]] | None

    def __init__(self, name: str, module: str, description: str,
                 extensions: Callable[[], list[dict[str, Any]]] | None = None) -> None:
        d = self.__dict__
        d["name"], d["module"], d["description"], d["extensions"] = \
            name, module, description, extensions
