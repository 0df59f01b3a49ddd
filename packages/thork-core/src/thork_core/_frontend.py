"""Description of a front-end, as listed by ``thork info``."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Frontend"]


@dataclass(frozen=True)
class Frontend:
    """``name`` (``trace``, ``compose``), the module users import, and one line about it."""

    name: str
    module: str
    description: str
