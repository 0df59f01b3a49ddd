"""A small on-disk memo for facts that are slow to learn but rarely change: a compiler's
version (loading NVRTC takes ~40 ms), the plugin entry points (scanning every installed
distribution takes ~10–20 ms), what each plugin registers (importing all of them takes
~10 ms; see ``_plugins``), a compiler's cache-key parts. Each fact is stored with a
fingerprint of what it depends on (paths and modification times); a changed fingerprint
recomputes it. This keeps a disk-cache hit in a fresh process in the low milliseconds.

Everything lives in one JSON file, ``memo.json`` in the cache folder, replaced atomically
on each change (concurrent writers lose at worst an update, never the file). Deleting it
is always safe; ``thork cache clear`` does. A fingerprint is stored as the SHA-256 of its
JSON text, not as the text itself: the file a fresh process reads and parses stays small
(the ``installed`` fact's fingerprints list every ``sys.path`` folder).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

from ._cache import cache_root, on_clear, read_private, writable_root
from ._digest import sha256_hex

__all__ = ["memo", "recall", "remember", "path_fingerprint", "installed_fingerprint", "reset",
           "sys_path_stamps", "FILE"]

#: The memo's file name inside the cache folder.
FILE = "memo.json"
_loaded: dict[str, Any] | None = None
_loaded_from: str | None = None  # the folder it was read from (THORK_CACHE_DIR may change)
_MISSING = object()
#: How many fingerprints (with their values) each fact keeps.
KEEP = 8


def path_fingerprint(paths: Iterable[str]) -> list[Any]:
    """``(path, mtime_ns, size)`` for each existing path: changes when files are replaced."""
    out: list[Any] = []
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            continue
        out.append([p, st.st_mtime_ns, st.st_size])
    return out


def _metadata_listing(paths: list[str]) -> list[Any]:
    """The distribution metadata folders on ``paths`` (``*.dist-info``, ``*.egg-info``)
    with their modification times and their ``entry_points.txt`` (which is all
    ``importlib.metadata`` reads to find entry points)."""
    out: list[Any] = []
    for p in paths:
        try:
            with os.scandir(p or ".") as it:
                names = sorted(e.name for e in it if e.name.endswith((".dist-info", ".egg-info")))
        except OSError:
            st = _stat(p)
            if st is not None:  # a zip file: its own stamp (a missing folder: none)
                out.append([p, st])
            continue
        if not names:
            # No distributions here (a script's own folder): nothing to fingerprint, so
            # scripts in different folders share the listing. Should one appear, this
            # folder's modification time changes and the listing is made again.
            continue
        found = []
        for n in names:
            d = os.path.join(p, n)
            found.append([n, _stat(d), _stat(os.path.join(d, "entry_points.txt"))])
        out.append([p, found])
    return out


def _stat(p: str) -> list[int] | None:
    try:
        st = os.stat(p)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


#: This process's answers of :func:`installed_fingerprint`, by the ``sys.path`` folders'
#: stamps they were computed from (the same stamps give the same answer, as in the memo).
_INSTALLED: dict[tuple[Any, ...], str] = {}
#: ``os.path.abspath`` of the absolute ``sys.path`` entries (they do not depend on the cwd).
_ABS: dict[str, str] = {}


def _abspath(p: str) -> str:
    got = _ABS.get(p)
    if got is None:
        if p[:1] == "/" and "//" not in p and "/." not in p and p[-1:] != "/":
            return p  # absolute and normal already (abspath would return it unchanged)
        got = os.path.abspath(p)
        if os.path.isabs(p):
            if len(_ABS) > 1024:
                _ABS.clear()
            _ABS[p] = got
    return got


def sys_path_stamps() -> list[Any]:
    """``path_fingerprint`` of the ``sys.path`` folders (absolute, each once): what
    :func:`installed_fingerprint` is memoized under (a folder gaining or losing a
    distribution's metadata folder has another stamp)."""
    return path_fingerprint(dict.fromkeys(_abspath(p) for p in sys.path))  # '' is the cwd


def installed_fingerprint() -> str:
    """What the installed distributions look like on ``sys.path``: every metadata folder
    with its modification time (installing, upgrading or removing a distribution creates
    or deletes one). Cheap when no ``sys.path`` folder changed (one ``stat`` each; a
    process asking again with the same stamps gets its earlier answer without reading the
    memo); otherwise the folders are listed, so a script folder that gains files (a program
    writing its outputs next to itself) does not invalidate what depends on this.
    Returns a digest of that listing."""
    paths = list(dict.fromkeys(_abspath(p) for p in sys.path))  # '' is the cwd
    stamps = path_fingerprint(paths)
    key = tuple(tuple(s) for s in stamps)
    got = _INSTALLED.get(key)
    if got is None:
        got = memo("installed", [sys.version, stamps],
                   lambda: _digest(_metadata_listing(paths)))
        if len(_INSTALLED) > 64:
            _INSTALLED.clear()
        _INSTALLED[key] = got
    return got


def _digest(value: Any) -> str:
    return sha256_hex(json.dumps(value).encode())


#: Counts reads of the memo file (and resets): what was learned from an earlier read may
#: be stale after one (:func:`generation`).
_GENERATION = 0


def generation() -> int:
    """A number that changes whenever the memo is read from its file again (a reset, a
    change of cache folder): facts a caller derived from the memo in this process are
    current while it is unchanged (short of this process's own :func:`remember`)."""
    _load()
    return _GENERATION


def _load() -> dict[str, Any]:
    global _loaded, _loaded_from, _GENERATION
    root = cache_root()
    if _loaded is None or _loaded_from != root:
        _GENERATION += 1
        _loaded_from = root
        try:
            # Only this user's regular file of a sane size (the memo feeds cache keys).
            _loaded = json.loads(read_private(os.path.join(root, FILE), 64 << 20))
            if not isinstance(_loaded, dict):
                _loaded = {}
        except Exception:  # absent, damaged or untrusted: relearn
            _loaded = {}
    return _loaded


def _canonical(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists...)."""
    return json.loads(json.dumps(value))


def _fp(fingerprint: Any) -> str:
    """How a fingerprint is stored: the SHA-256 of its JSON text (tuples and lists alike)."""
    return sha256_hex(json.dumps(fingerprint).encode())


def recall(name: str, fingerprint: Any, default: Any = None) -> Any:
    """What :func:`remember` stored under ``name`` with this ``fingerprint``, else ``default``."""
    entry = _load().get(name)
    if isinstance(entry, list):
        want = _fp(fingerprint)
        for item in entry:
            if isinstance(item, list) and len(item) == 2 and item[0] == want:
                return item[1]
    return default


def remember(name: str, fingerprint: Any, value: Any) -> None:
    """Store the JSON-able ``value`` under ``name`` for this ``fingerprint`` (failures to
    write are not fatal). The :data:`KEEP` most recent fingerprints of each name are kept:
    two scripts in two folders see two ``sys.path``s, and alternating between them must
    not relearn each fact every time."""
    data = _load()
    fp = _fp(fingerprint)
    old = data.get(name)
    # (fingerprints of the layout before digests, lists, are dropped)
    kept = [i for i in old if isinstance(i, list) and len(i) == 2
            and isinstance(i[0], str) and i[0] != fp] if isinstance(old, list) else []
    data[name] = [[fp, _canonical(value)], *kept[:KEEP - 1]]
    try:
        import tempfile

        root = writable_root(cache_root())
        fd, tmp = tempfile.mkstemp(dir=root, prefix=".tmp-memo-")  # 0600
        try:
            with os.fdopen(fd, "w") as f:
                f.write(json.dumps(data))  # the C encoder (json.dump streams in Python)
            os.replace(tmp, os.path.join(root, FILE))
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass


def memo(name: str, fingerprint: Any, compute: Callable[[], Any]) -> Any:
    """``compute()``'s JSON-able result, reused while ``fingerprint`` is unchanged."""
    value = recall(name, fingerprint, _MISSING)
    if value is not _MISSING:
        return value
    value = _canonical(compute())
    remember(name, fingerprint, value)
    return value


def reset() -> None:
    """Forget what was read (the next access reads the file again)."""
    global _loaded, _loaded_from
    _loaded = None
    _loaded_from = None
    _INSTALLED.clear()


# `thork cache clear` removes memo.json with everything else; the copy in memory goes too.
on_clear(reset)
