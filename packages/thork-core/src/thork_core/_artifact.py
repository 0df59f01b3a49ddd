"""Compiled output of a compiler plugin."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Artifact", "ARTIFACT_KINDS"]

#: ``cubin``/``ptx``: device code for the CUDA driver; ``hostlib``: a host shared library
#: with a C-ABI launch entry (the CPU target's kind, and the nvcc host-launch path).
ARTIFACT_KINDS = ("cubin", "ptx", "hostlib")


@dataclass(frozen=True)
class Artifact:
    """Bytes a target can load, plus where they came from.

    ``entry`` is the kernel's symbol; ``compiler`` the identity of the compiler that made
    it (name and version); ``arch`` the architecture (``sm_90``, ``x86_64``...).
    """

    kind: str
    data: bytes
    entry: str
    compiler: str
    arch: str
    log: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    #: A ``hostlib`` read from the disk cache: the library file whose content the cache
    #: compared with its entry (loaders use it through
    #: :func:`~thork_core._cache.library_file` instead of comparing the bytes again).
    path: str = field(default="", compare=False, repr=False)
