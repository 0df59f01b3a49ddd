"""Description of a front-end, as listed by ``thork info``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Frontend"]

_FIELDS = ("name", "module", "description", "extensions")


class Frontend:
    """``name`` (``trace``, ``compose``), the module users import, and one line about it.

    ``extensions``, where a front-end has plugins of its own (fkl's op plugins, an entry
    point group of their own), returns one dict per such plugin for ``thork plugins``:
    ``name``, ``distribution``, ``version``, ``registered`` (what it provides, by kind)
    and ``error`` (empty when it loaded). Called only when plugins are listed.

    Immutable, compared and hashed by its fields: the frozen dataclass it was, written
    out (the first call of a fresh process imports this module: creating the dataclass
    cost ~1 ms there)."""

    __slots__ = _FIELDS
    __match_args__ = ("name", "module", "description", "extensions")
    name: str
    module: str
    description: str
    extensions: Callable[[], list[dict[str, Any]]] | None

    def __init__(self, name: str, module: str, description: str,
                 extensions: Callable[[], list[dict[str, Any]]] | None = None) -> None:
        _set = object.__setattr__
        _set(self, "name", name)
        _set(self, "module", module)
        _set(self, "description", description)
        _set(self, "extensions", extensions)

    def _values(self) -> tuple[Any, ...]:
        return (self.name, self.module, self.description, self.extensions)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return (f"{type(self).__qualname__}(name={self.name!r}, module={self.module!r}, "
                f"description={self.description!r}, extensions={self.extensions!r})")

    def __setattr__(self, name: str, value: Any) -> None:
        from dataclasses import FrozenInstanceError  # only where raised

        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        from dataclasses import FrozenInstanceError

        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), self._values())
