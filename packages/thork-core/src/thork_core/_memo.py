"""A small on-disk memo for facts that are slow to learn but rarely change: a compiler's
version (loading NVRTC takes ~40 ms), the plugin entry points (scanning every installed
distribution takes ~20 ms). Each fact is stored with a fingerprint of what it depends
on (paths and modification times); a changed fingerprint recomputes it. This keeps a
disk-cache hit in a fresh process in the low milliseconds.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable
from typing import Any

from ._cache import cache_dir

__all__ = ["memo", "path_fingerprint"]

_FILE = "memo.json"
_loaded: dict[str, Any] | None = None


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


def _load() -> dict[str, Any]:
    global _loaded
    if _loaded is None:
        try:
            with open(cache_dir() / _FILE) as f:
                _loaded = json.load(f)
            if not isinstance(_loaded, dict):
                _loaded = {}
        except (OSError, ValueError):
            _loaded = {}
    return _loaded


def memo(name: str, fingerprint: Any, compute: Callable[[], Any]) -> Any:
    """``compute()``'s JSON-able result, reused while ``fingerprint`` is unchanged."""
    data = _load()
    entry = data.get(name)
    fp = json.loads(json.dumps(fingerprint))
    if isinstance(entry, dict) and entry.get("fingerprint") == fp:
        return entry["value"]
    value = compute()
    data[name] = {"fingerprint": fp, "value": value}
    try:
        root = cache_dir()
        root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=root, prefix=".tmp-memo-")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        os.replace(tmp, root / _FILE)
    except OSError:
        pass
    return value


def reset() -> None:
    """Forget what was read (tests that switch THORK_CACHE_DIR call this)."""
    global _loaded
    _loaded = None
