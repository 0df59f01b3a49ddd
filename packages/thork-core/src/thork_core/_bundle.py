"""Ahead-of-time bundles: compiled kernels shipped as a folder, used only when named.

``thork precompile`` writes a bundle::

    BUNDLE/manifest.json        {"format": "thork-bundle", "version": 1,
                                 "entries": {key: {"sha256": ..., "kind": ..., ...}}}
    BUNDLE/entries/<key>.art    magic, metadata (with the entry's own key), payload

A process uses a bundle only when ``THORK_CACHE_BUNDLE`` names its folder; then every
build looks the cache key up there first (before the disk cache and before compiling).
A key the bundle lacks builds as usual. An entry is used only when all of this holds,
and anything else raises :class:`~thork_core.BundleError` naming the bundle, the key and
the check that failed (a bundle the user named and that is damaged is a deployment error,
not something to paper over by compiling):

- the folder, its ``entries`` folder, the manifest and the entry are owned by this user
  and not writable by group or others (regular files, no symlinks): host libraries
  (``hostlib``: the CPU target's) are loaded from what the bundle holds, so nobody else
  may be able to change it;
- the manifest parses and is a Thork bundle manifest;
- the entry file's SHA-256 equals the manifest's for that key (a changed byte, or entries
  swapped on disk, fail here);
- the key written inside the entry equals the key asked for (entries and manifest lines
  swapped together fail here).

Bundles carry no secret (they travel between machines); the trust comes from the
manifest's hashes plus the ownership rule, and from the user naming the bundle.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
import threading
from collections.abc import Iterable
from typing import Any

from ._artifact import Artifact
from ._errors import BundleError

__all__ = ["bundle_get", "bundle_path", "make_bundle", "write_bundle"]

_MAGIC = b"THORKB1\n"
_META = struct.Struct("<I")
_FORMAT = "thork-bundle"
_VERSION = 1
_MANIFEST = "manifest.json"
_ENTRIES = "entries"
_LIMIT = 1 << 30  # one entry's size limit (bytes)
_UID: int | None = os.geteuid() if hasattr(os, "geteuid") else None


def bundle_path() -> str | None:
    """The bundle folder named by ``THORK_CACHE_BUNDLE``, or None."""
    return os.environ.get("THORK_CACHE_BUNDLE") or None


# -- writing ----------------------------------------------------------------------------------
def write_bundle(folder: str, items: Iterable[tuple[str, Artifact]]) -> dict[str, Any]:
    """Write ``items`` (cache key, artifact) as a bundle in ``folder`` (made if absent;
    entries already there are kept unless rewritten). Folders 0755, files 0644: readable
    by the machines' other users, writable by the owner only. Returns the manifest."""
    os.makedirs(os.path.join(folder, _ENTRIES), mode=0o755, exist_ok=True)
    for f in (folder, os.path.join(folder, _ENTRIES)):
        os.chmod(f, 0o755)
    manifest_file = os.path.join(folder, _MANIFEST)
    entries: dict[str, Any] = {}
    if os.path.exists(manifest_file):
        entries = dict(_parse_manifest(folder, _read_trusted(folder, manifest_file))["entries"])
    for key, art in items:
        blob = _encode(key, art)
        _write(os.path.join(folder, _ENTRIES, f"{key}.art"), blob)
        entries[key] = {"sha256": hashlib.sha256(blob).hexdigest(), "kind": art.kind,
                        "arch": art.arch, "entry": art.entry, "compiler": art.compiler,
                        "bytes": len(blob)}
    manifest = {"format": _FORMAT, "version": _VERSION, "entries": dict(sorted(entries.items()))}
    _write(manifest_file, json.dumps(manifest, indent=1).encode())
    return manifest


def _write(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0),
                 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def _encode(key: str, a: Artifact) -> bytes:
    meta = json.dumps({"key": key, "kind": a.kind, "entry": a.entry, "compiler": a.compiler,
                       "arch": a.arch, "log": a.log, "info": a.info}).encode()
    return _MAGIC + _META.pack(len(meta)) + meta + a.data


# -- reading ----------------------------------------------------------------------------------
_MANIFESTS: dict[str, tuple[tuple[int, ...], dict[str, Any]]] = {}
_LOCK = threading.Lock()


def bundle_get(key: str) -> Artifact | None:
    """The artifact for ``key`` from the bundle ``THORK_CACHE_BUNDLE`` names: None when no
    bundle is named or it has no such key; BundleError when a check fails (see the module
    docstring)."""
    folder = bundle_path()
    if folder is None:
        return None
    entries = _manifest(folder)["entries"]
    rec = entries.get(key)
    if rec is None:
        return None
    entries_dir = os.path.join(folder, _ENTRIES)
    _check_folder(folder, entries_dir)
    path = os.path.join(entries_dir, f"{key}.art")
    blob = _read_trusted(folder, path)
    if not isinstance(rec, dict) or hashlib.sha256(blob).hexdigest() != rec.get("sha256"):
        raise BundleError(f"bundle {folder}: entry {key[:16]}... does not match the "
                          "manifest's SHA-256 (changed or swapped); rebuild the bundle with "
                          "`thork precompile`")
    art, embedded = _decode(folder, key, blob)
    if embedded != key:
        raise BundleError(f"bundle {folder}: the file for key {key[:16]}... holds the entry "
                          f"of key {str(embedded)[:16]}... (entries swapped); rebuild the "
                          "bundle with `thork precompile`")
    return art


def _manifest(folder: str) -> dict[str, Any]:
    """The parsed manifest of ``folder`` (re-read when the file changes)."""
    _check_folder(folder)
    path = os.path.join(folder, _MANIFEST)
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise BundleError(f"bundle {folder}: no readable {_MANIFEST} ({exc.strerror}); "
                          "THORK_CACHE_BUNDLE must name a folder `thork precompile` "
                          "wrote") from None
    stamp = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode, st.st_uid)
    with _LOCK:
        got = _MANIFESTS.get(folder)
    if got is not None and got[0] == stamp:
        return got[1]
    manifest = _parse_manifest(folder, _read_trusted(folder, path))
    with _LOCK:
        _MANIFESTS[folder] = (stamp, manifest)
    return manifest


def _parse_manifest(folder: str, raw: bytes) -> dict[str, Any]:
    try:
        manifest = json.loads(raw)
    except ValueError as exc:
        raise BundleError(f"bundle {folder}: {_MANIFEST} is not valid JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != _FORMAT \
            or not isinstance(manifest.get("entries"), dict):
        raise BundleError(f"bundle {folder}: {_MANIFEST} is not a Thork bundle manifest "
                          f"(expected format {_FORMAT!r} with an 'entries' table)")
    if manifest.get("version") != _VERSION:
        raise BundleError(f"bundle {folder}: manifest version {manifest.get('version')!r}; "
                          f"this Thork reads version {_VERSION}")
    return manifest


def _check_folder(folder: str, *more: str) -> None:
    """``folder`` (and ``more``) are real folders owned by this user, not writable by group
    or others; BundleError otherwise."""
    for f in (folder, *more):
        try:
            st = os.lstat(f)
        except OSError as exc:
            raise BundleError(f"bundle {folder}: {f} cannot be read ({exc.strerror})") \
                from None
        if not stat.S_ISDIR(st.st_mode):
            raise BundleError(f"bundle {folder}: {f} is not a folder (a symlink or a file)")
        _check_owner(folder, f, st)


def _check_owner(folder: str, path: str, st: os.stat_result) -> None:
    if _UID is not None and st.st_uid != _UID:
        raise BundleError(f"bundle {folder}: {path} is owned by another user (uid "
                          f"{st.st_uid}); Thork loads bundles only from this user's files")
    if st.st_mode & 0o022:
        raise BundleError(f"bundle {folder}: {path} is writable by group or others (mode "
                          f"{stat.S_IMODE(st.st_mode):o}); `chmod go-w` it to use the bundle")


def _read_trusted(folder: str, path: str) -> bytes:
    """``path``'s bytes if it is a regular file (not a symlink) passing the owner rule."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) \
        | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise BundleError(f"bundle {folder}: {path} cannot be read ({exc.strerror})") \
            from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BundleError(f"bundle {folder}: {path} is not a regular file")
        _check_owner(folder, path, st)
        if st.st_size > _LIMIT:
            raise BundleError(f"bundle {folder}: {path} is {st.st_size} bytes (limit "
                              f"{_LIMIT})")
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read(st.st_size + 1)
    finally:
        os.close(fd)


def _decode(folder: str, key: str, blob: bytes) -> tuple[Artifact, Any]:
    """The artifact in ``blob`` and the key written inside it."""
    head = len(_MAGIC) + _META.size
    if len(blob) < head or not blob.startswith(_MAGIC):
        raise BundleError(f"bundle {folder}: entry {key[:16]}... is not a bundle entry")
    (mlen,) = _META.unpack_from(blob, len(_MAGIC))
    try:
        meta = json.loads(blob[head:head + mlen])
        art = Artifact(kind=meta["kind"], data=bytes(blob[head + mlen:]), entry=meta["entry"],
                       compiler=meta["compiler"], arch=meta["arch"], log=meta.get("log", ""),
                       info=meta.get("info", {}))
    except (ValueError, KeyError, TypeError) as exc:
        raise BundleError(f"bundle {folder}: entry {key[:16]}... has damaged metadata "
                          f"({type(exc).__name__})") from None
    return art, meta.get("key")


# -- making -----------------------------------------------------------------------------------
def make_bundle(items: Iterable[tuple[Any, tuple[Any, ...]]], folder: str,
                targets: Iterable[tuple[str, str | None]], compiler: str | None = None
                ) -> dict[str, Any]:
    """Precompile every item for every ``(target, arch)`` and write the artifacts into the
    bundle ``folder``. An item is ``(obj, inputs)``: ``obj.precompile(*inputs, target=,
    arch=[, compiler=])`` is called (a thork kernel: no inputs; an fkl pipe: a sample
    input). Returns the manifest and, per item, the keys it produced."""
    from ._build import recording

    done: list[dict[str, Any]] = []
    targets = list(targets)
    with recording() as got:
        for obj, inputs in items:
            for target, arch in targets:
                extra = {"compiler": compiler} if compiler else {}
                keys = obj.precompile(*inputs, target=target, arch=arch, **extra)
                done.append({"item": repr(obj), "target": target, "arch": arch,
                             "keys": keys if isinstance(keys, list) else [keys]})
    unique = dict(got)  # one artifact per key
    manifest = write_bundle(folder, unique.items())
    return {"bundle": os.path.abspath(folder), "items": done,
            "entries": len(manifest["entries"]), "written": len(unique)}
