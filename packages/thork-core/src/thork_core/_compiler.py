"""The interface every compiler plugin implements."""

from __future__ import annotations

import abc
from collections.abc import Sequence

from ._artifact import Artifact

__all__ = ["Compiler"]


class Compiler(abc.ABC):
    """Turns generated source into an :class:`Artifact`.

    Subclasses set ``name`` (what users ask for, e.g. ``"nvrtc"``), ``priority`` (higher is
    preferred when nothing is asked for), ``produces`` (artifact kinds) and ``language``
    (``"cuda"`` for the CUDA renderer's output, ``"c++"`` for host C++).
    """

    name: str = ""
    priority: int = 0
    produces: tuple[str, ...] = ()
    language: str = "cuda"
    #: The distribution that provides this compiler (for error messages).
    package: str = ""

    @abc.abstractmethod
    def version(self) -> str:
        """The toolchain's version string (part of every cache key)."""

    @abc.abstractmethod
    def available(self) -> tuple[bool, str]:
        """Whether it works on this machine, and why not when it does not."""

    def identity(self) -> str:
        """Name and version: the compiler's part of a cache key."""
        return f"{self.name}-{self.version()}"

    def flags(self, kind: str, arch: str) -> list[str]:
        """The options a compile of ``kind`` for ``arch`` uses (part of the cache key)."""
        return []

    def key_inputs(self) -> tuple[list[str], list[str]] | None:
        """What, besides the installed distributions (their metadata on ``sys.path``), this
        compiler's availability, :meth:`identity` and :meth:`flags` depend on: the names
        of the environment variables it reads and the files it loads or runs (e.g. the
        toolchain library). None (the default): not declared.

        With a declaration, a fresh process whose build is a disk-cache hit takes the
        compiler's part of the key from the selection record (``_build``): recorded by
        Thork with those variables' values and the files' modification times and sizes,
        and used only while every one of them, the installed distributions and the
        plugins' files are unchanged; the compiler itself is then not even imported.
        Declare everything (a file left out could change the compiler unseen)."""
        return None

    @abc.abstractmethod
    def compile(
        self, source: str, *, entry: str, kind: str, arch: str, options: Sequence[str] = ()
    ) -> Artifact:
        """Compile ``source`` into an artifact of ``kind`` for ``arch``.

        Raises :class:`~thork_core.CompileError` with the compiler's log on failure.
        """

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
