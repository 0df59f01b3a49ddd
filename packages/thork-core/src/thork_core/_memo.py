"""A small on-disk memo for facts that are slow to learn but rarely change: a compiler's
version (loading NVRTC takes ~40 ms), the plugin entry points (scanning every installed
distribution takes ~10–20 ms), what each plugin registers (importing all of them takes
~10 ms; see ``_plugins``), a compiler's cache-key parts. Each fact is stored with a
fingerprint of what it depends on (paths and modification times); a changed fingerprint
recomputes it. This keeps a disk-cache hit in a fresh process in the low milliseconds.

Everything lives in one JSON file, ``memo.json`` in the cache folder, replaced atomically
on each change (concurrent writers lose at worst an update, never the file). Deleting it
is always safe; ``thork cache clear`` does.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

from ._cache import cache_root, on_clear, read_private

__all__ = ["memo", "recall", "remember", "path_fingerprint", "installed_fingerprint", "reset",
           "FILE"]

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


def installed_fingerprint() -> str:
    """What the installed distributions look like on ``sys.path``: every metadata folder
    with its modification time (installing, upgrading or removing a distribution creates
    or deletes one). Cheap when no ``sys.path`` folder changed (one ``stat`` each);
    otherwise the folders are listed, so a script folder that gains files (a program
    writing its outputs next to itself) does not invalidate what depends on this.
    Returns a digest of that listing."""
    paths = list(dict.fromkeys(os.path.abspath(p) for p in sys.path))  # '' is the cwd
    return memo("installed", [sys.version, path_fingerprint(paths)],
                lambda: _digest(_metadata_listing(paths)))


def _digest(value: Any) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(value).encode()).hexdigest()


def _load() -> dict[str, Any]:
    global _loaded, _loaded_from
    root = cache_root()
    if _loaded is None or _loaded_from != root:
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


def recall(name: str, fingerprint: Any, default: Any = None) -> Any:
    """What :func:`remember` stored under ``name`` with this ``fingerprint``, else ``default``."""
    entry = _load().get(name)
    if isinstance(entry, list):
        want = _canonical(fingerprint)
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
    fp = _canonical(fingerprint)
    old = data.get(name)
    kept = [i for i in old if isinstance(i, list) and len(i) == 2 and i[0] != fp] \
        if isinstance(old, list) else []
    data[name] = [[fp, _canonical(value)], *kept[:KEEP - 1]]
    try:
        import tempfile

        root = cache_root()
        os.makedirs(root, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=root, prefix=".tmp-memo-")  # 0600
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(data, f)
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


# `thork cache clear` removes memo.json with everything else; the copy in memory goes too.
on_clear(reset)
