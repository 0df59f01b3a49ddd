"""Description of a front-end, as listed by ``thork info``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Frontend"]


@dataclass(frozen=True)
class Frontend:
    """``name`` (``trace``, ``compose``), the module users import, and one line about it.

    ``extensions``, where a front-end has plugins of its own (fkl's op plugins, an entry
    point group of their own), returns one dict per such plugin for ``thork plugins``:
    ``name``, ``distribution``, ``version``, ``registered`` (what it provides, by kind)
    and ``error`` (empty when it loaded). Called only when plugins are listed."""

    name: str
    module: str
    description: str
    extensions: Callable[[], list[dict[str, Any]]] | None = None
