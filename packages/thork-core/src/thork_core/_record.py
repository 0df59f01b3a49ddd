"""Plain-class records: what ``@dataclass`` gave core's small records (equality, hash,
repr, immutability), without creating them when a module loads.

``dataclasses.dataclass`` compiles each class's ``__init__``, ``__repr__``, ``__eq__``...
from generated source when its module is imported: ~0.2–0.5 ms a class, and importing
``dataclasses`` itself ~1 ms, on the path of a fresh process's first kernel (session 12).
A record class writes its ``__init__`` out and names its fields in ``_fields`` (those
compared and hashed in ``_compare``, default: all; ``__match_args__`` is made from them);
these bases give the rest, as the dataclass it replaces had it
(tests/core/test_records.py compares them).
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = ["FrozenRecord", "Record"]


class Record:
    """A mutable record: ``==`` compares the ``_compare`` fields of two records of the same
    class (``NotImplemented`` otherwise), unhashable, ``repr`` lists the ``_repr`` fields
    (default: all) as ``Name(field=value, ...)``."""

    _fields: ClassVar[tuple[str, ...]] = ()
    _compare: ClassVar[tuple[str, ...] | None] = None  # None: _fields
    _repr: ClassVar[tuple[str, ...] | None] = None  # None: _fields
    __match_args__: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # positional patterns, as the dataclass had them (mypy refuses a plain assignment)
        setattr(cls, "__match_args__", cls._fields)  # noqa: B010

    def _key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, n) for n in (self._compare or self._fields))

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._key() == other._key()  # type: ignore[attr-defined]

    __hash__: ClassVar[Any] = None  # mutable and compared by value: unhashable

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in (self._repr or self._fields))
        return f"{type(self).__qualname__}({inner})"


class FrozenRecord(Record):
    """An immutable record: hashed by its ``_compare`` fields; assigning or deleting an
    attribute raises :class:`dataclasses.FrozenInstanceError` (``__init__`` sets fields
    with ``object.__setattr__``)."""

    def __hash__(self) -> int:
        return hash(self._key())

    def __setattr__(self, name: str, value: Any) -> None:
        from dataclasses import FrozenInstanceError  # only where raised

        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        from dataclasses import FrozenInstanceError

        raise FrozenInstanceError(f"cannot delete field {name!r}")
