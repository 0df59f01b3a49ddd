"""Compiled output of a compiler plugin."""

from __future__ import annotations

from typing import Any

from ._record import FrozenRecord

__all__ = ["Artifact", "ARTIFACT_KINDS"]

#: ``cubin``/``ptx``: device code for the CUDA driver; ``hostlib``: a host shared library
#: with a C-ABI launch entry (the CPU target's kind, and the nvcc host-launch path).
ARTIFACT_KINDS = ("cubin", "ptx", "hostlib")


class Artifact(FrozenRecord):
    """Bytes a target can load, plus where they came from.

    ``entry`` is the kernel's symbol; ``compiler`` the identity of the compiler that made
    it (name and version); ``arch`` the architecture (``sm_90``, ``x86_64``...).
    Immutable; compared by all fields but ``path`` (a frozen dataclass written out:
    :mod:`thork_core._record`).
    """

    _fields = ("kind", "data", "entry", "compiler", "arch", "log", "info", "path")
    _compare = _repr = _fields[:-1]
    kind: str
    data: bytes
    entry: str
    compiler: str
    arch: str
    log: str
    info: dict[str, Any]
    #: A ``hostlib`` read from the disk cache: the library file whose content the cache
    #: compared with its entry (loaders use it through
    #: :func:`~thork_core._cache.library_file` instead of comparing the bytes again).
    path: str

    def __init__(self, kind: str, data: bytes, entry: str, compiler: str, arch: str,
                 log: str = "", info: dict[str, Any] | None = None, path: str = "") -> None:
        d = self.__dict__
        d["kind"], d["data"], d["entry"], d["compiler"], d["arch"] = \
            kind, data, entry, compiler, arch
        d["log"], d["info"], d["path"] = log, {} if info is None else info, path
