"""The on-disk artifact cache (level two of SPEC §3.6; level one lives on each kernel).

Key: SHA-256 of the generated source, the compiler's identity and version, its flags, the
artifact kind and the arch. The renderers write their codegen version into the source's
prelude, so the source covers it: the cache knows nothing of renderers. Each entry is one
file written to a temporary name and renamed into place, so readers never see half an
entry and concurrent writers of the same key do not corrupt each other. Every entry carries its
own length and checksum; an entry that fails the check is deleted and rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._artifact import Artifact

if TYPE_CHECKING:
    from pathlib import Path

# pathlib and tempfile are imported where needed: a disk-cache hit in a fresh process
# uses neither (string paths; temporary files only when writing).

__all__ = ["DiskCache", "cache_dir", "cache_root", "cache_key", "disk_cache", "CacheEntry",
           "library_path"]

_MAGIC = b"THORKC1\n"
_HEADER = struct.Struct("<8sIQ32s")  # magic, meta length, payload length, sha256


def cache_root() -> str:
    """``THORK_CACHE_DIR``, else ``$XDG_CACHE_HOME/thork``, else ``~/.cache/thork``."""
    env = os.environ.get("THORK_CACHE_DIR")
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "thork")


def cache_dir() -> Path:
    """:func:`cache_root` as a :class:`~pathlib.Path`."""
    from pathlib import Path

    return Path(cache_root())


def cache_key(source: str, compiler: str, flags: Iterable[str], kind: str, arch: str) -> str:
    """The hex key of an artifact (see the module docstring for what it covers)."""
    h = hashlib.sha256()
    for part in (compiler, kind, arch, "\x1f".join(flags), source):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


@dataclass(frozen=True)
class CacheEntry:
    """One file of the cache as ``thork cache list`` shows it."""

    key: str
    path: Path
    size: int
    entry: str
    compiler: str
    kind: str
    arch: str


class DiskCache:
    """Artifacts by key under ``root``. ``stats`` counts hits, misses and rebuilt entries."""

    def __init__(self, root: Path | None = None) -> None:
        self._root = root
        self.stats = {"hits": 0, "misses": 0, "corrupt": 0, "writes": 0}

    @property
    def root(self) -> Path:
        return self._root if self._root is not None else cache_dir()

    def _path(self, key: str) -> str:
        root = os.fspath(self._root) if self._root is not None else cache_root()
        return os.path.join(root, key[:2], f"{key}.art")

    def get(self, key: str) -> Artifact | None:
        """The artifact stored under ``key``, or None (a damaged entry is removed)."""
        path = self._path(key)
        try:
            with open(path, "rb") as f:
                blob = f.read()
        except OSError:
            self.stats["misses"] += 1
            return None
        art = _decode(blob)
        if art is None:
            self.stats["corrupt"] += 1
            self.stats["misses"] += 1
            try:
                os.unlink(path)
            except OSError:
                pass
            return None
        self.stats["hits"] += 1
        return art

    def put(self, key: str, artifact: Artifact) -> None:
        """Store atomically; failures to write (read-only disk...) are not fatal."""
        import tempfile

        path = self._path(key)
        folder = os.path.dirname(path)
        try:
            os.makedirs(folder, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".art")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(_encode(artifact))
                os.replace(tmp, path)
            except BaseException:
                os.unlink(tmp)
                raise
            self.stats["writes"] += 1
        except OSError:
            pass

    def entries(self) -> list[CacheEntry]:
        out = []
        if not self.root.is_dir():
            return out
        for path in sorted(self.root.glob("*/*.art")):
            try:
                art = _decode(path.read_bytes())
            except OSError:
                continue
            if art is None:
                continue
            out.append(CacheEntry(path.stem, path, path.stat().st_size, art.entry,
                                  art.compiler, art.kind, art.arch))
        return out

    def size(self) -> int:
        """Total bytes of all entry files."""
        if not self.root.is_dir():
            return 0
        return sum(p.stat().st_size for p in self.root.glob("*/*.art"))

    def clear(self) -> int:
        """Delete every entry and the memo of slow facts (``memo.json``: plugin index,
        compiler versions; relearned on next use); return how many entries were removed."""
        n = 0
        if not self.root.is_dir():
            return 0
        for p in self.root.glob("*/*.art"):
            try:
                p.unlink()
                n += 1
            except OSError:
                pass
        from . import _memo

        try:
            (self.root / _memo.FILE).unlink()
        except OSError:
            pass
        _memo.reset()
        return n


def _encode(a: Artifact) -> bytes:
    meta = json.dumps({
        "kind": a.kind, "entry": a.entry, "compiler": a.compiler, "arch": a.arch,
        "log": a.log, "info": a.info,
    }).encode()
    digest = hashlib.sha256(meta + a.data).digest()
    return _HEADER.pack(_MAGIC, len(meta), len(a.data), digest) + meta + a.data


def _decode(blob: bytes) -> Artifact | None:
    if len(blob) < _HEADER.size:
        return None
    magic, mlen, plen, digest = _HEADER.unpack_from(blob)
    body = blob[_HEADER.size:]
    if magic != _MAGIC or len(body) != mlen + plen:
        return None
    if hashlib.sha256(body).digest() != digest:
        return None
    try:
        meta = json.loads(body[:mlen])
    except ValueError:
        return None
    return Artifact(
        kind=meta["kind"], data=bytes(body[mlen:]), entry=meta["entry"],
        compiler=meta["compiler"], arch=meta["arch"], log=meta.get("log", ""),
        info=meta.get("info", {}),
    )


def library_path(data: bytes, folder: str) -> str:
    """A content-addressed file under the cache folder holding ``data`` (a shared library:
    ``dlopen`` needs a path). Written once, atomically, so concurrent loaders never see
    half a library."""
    digest = hashlib.sha256(data).hexdigest()
    where = os.path.join(cache_root(), folder)
    path = os.path.join(where, f"{digest}.so")
    if not os.path.exists(path):
        os.makedirs(where, exist_ok=True)
        tmp = os.path.join(where, f".tmp-{os.getpid()}-{digest}.so")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    return path


_DEFAULT = DiskCache()


def disk_cache() -> DiskCache:
    """The process-wide cache (its root follows ``THORK_CACHE_DIR`` at each access)."""
    return _DEFAULT
