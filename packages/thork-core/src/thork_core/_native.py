"""The native launch module: ``_native_launch.c`` built for this Python on first use.

The module is Thork's launcher in C (:mod:`thork_core._launch` has the Python one): a
launch through ctypes spends about as long in Python (argument conversion, the foreign
call) as the driver spends enqueueing the kernel; the C module does the same work (and,
for device arrays, the hot-path checks) in one C call. It is compiled once per Python,
compiler and source with the host C compiler (``$CC``, else ``cc``) against this Python's
headers, and kept in the disk cache like a kernel's library (signed entry, content checked
before loading); the first build takes ~0.1–0.5 s. Where that cannot be done (no
compiler, no ``Python.h``, ``THORK_NATIVE=0``) :func:`native_module` returns None and the
Python launcher serves, with the same behaviour; :func:`native_status` says which and
why (``thork info``).
A process that finds the module built imports neither the compiler tools nor sysconfig
(nor pathlib), reads the source's digest from the memo (keyed by the source file's
modification time and size) and reads and hashes the library once: the disk cache's
content check (docs/guarantees.md) is the one check before it is loaded.
"""

from __future__ import annotations

import os
import sys
import threading
from types import ModuleType

from ._env import env_flag
from ._extension import SUFFIX as _SUFFIX
from ._extension import load_extension

__all__ = ["native_module", "native_status"]

_NAME = "_thork_native"
_LOCK = threading.Lock()
_STATE: dict[str, object] = {}
#: Modules loaded in this process, by key: one module (one set of C types) per key for
#: the process's life, whichever cache folder its file was found in (classes made from
#: its types, e.g. thork's Launch over LaunchCall, must stay instances of them).
_LOADED: dict[str, ModuleType] = {}


def _cc() -> str:
    return os.environ.get("CC") or "cc"


def _compiler() -> str | None:
    import shutil

    cc = _cc()
    return shutil.which(cc.split()[0]) and cc


def _source() -> str:
    return os.path.join(os.path.dirname(__file__), "_native_launch.c")


def _key(src: bytes, cc: str) -> str:
    """Source, Python (version and ABI suffix) and compiler command: what the built
    module depends on (headers come with the Python version; the flags are fixed here)."""
    from ._extension import extension_key

    return extension_key(src, cc)


def _source_key(src: str, cc: str) -> str:
    """:func:`_key` of the source file ``src`` and the header it includes
    (``thork_array_reader.h`` beside it), memoized on disk against the files'
    modification times and sizes (an edited or reinstalled source is read again)."""
    from ._memo import memo, path_fingerprint

    files = [src, os.path.join(os.path.dirname(src), "thork_array_reader.h")]

    def compute() -> str:
        data = b""
        for name in files:
            with open(name, "rb") as f:
                data += f.read() + b"\0"
        return _key(data, cc)

    return memo("native_source", [path_fingerprint(files), sys.version, _SUFFIX, cc],
                compute)


def native_module() -> ModuleType | None:
    """The compiled module (``Launch``, ``Guard``, ``GuardedCall``), built on first
    call; None where it cannot be built or loaded (the reason is in
    :func:`native_status`)."""
    if "module" in _STATE:
        return _STATE["module"]  # type: ignore[return-value]
    with _LOCK:
        if "module" not in _STATE:
            _STATE["module"], _STATE["status"] = _make()
    return _STATE["module"]  # type: ignore[return-value]


def native_status() -> str:
    """``ready <path>`` or ``unavailable: <reason>`` (builds if needed; the same text
    whether this process built it or found it cached)."""
    native_module()
    return str(_STATE["status"])


def _make() -> tuple[ModuleType | None, str]:
    if not env_flag("THORK_NATIVE", True):
        return None, "unavailable: THORK_NATIVE=0"
    src = _source()
    cc = _cc()
    try:
        key = _source_key(src, cc)
    except OSError as exc:
        return None, f"unavailable: {exc}"
    try:
        mod = _LOADED.get(key)
        path = _checked_before(key) if mod is None else None
        if path is None:
            path = _verified_library(src, cc, key)
            if mod is None:
                _remember_checked(key, path)
        if mod is None:
            mod = _LOADED[key] = load_extension(_NAME, path)
        return mod, f"ready {path}"
    except Exception as exc:  # any failure leaves the Python launcher in charge
        return None, f"unavailable: {exc}"


#: The memo's name for the library file last compared with its signed entry.
_CHECKED = "native_checked"
#: A file not used (touched) for this long takes the full check again, which marks it
#: used: the cache's eviction (least recently modified first) keeps a library in use.
_RECHECK_S = 86400


def _identity(path: str) -> list[int] | None:
    """What identifies the file at ``path``: device, inode, size, modification and change
    times (a replaced, rewritten or re-stamped file has another), or None unless it is a
    regular file of this user, not writable by others (what the cache reads at all)."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    import stat

    uid = os.geteuid() if hasattr(os, "geteuid") else None
    if not stat.S_ISREG(st.st_mode) or st.st_mode & 0o022 \
            or (uid is not None and st.st_uid != uid):
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _checked_before(key: str) -> str | None:
    """The module's file when an earlier process compared exactly this file (same
    :func:`_identity`) with its signed cache entry and it was used within a day: the
    content check then needs no second read and hash (~0.1 ms per process). The record
    is Thork's own (``memo.json`` in the private cache folder); any change to the file
    (rewritten, replaced, re-stamped: its change time moves) sends the process through
    the full check (:func:`_verified_library`)."""
    import time

    from ._cache import cache_root
    from ._memo import recall

    got = recall(_CHECKED, [cache_root(), key])
    if not (isinstance(got, list) and len(got) == 2 and isinstance(got[0], str)):
        return None
    path, ident = got
    now = _identity(path)
    if now is None or now != ident or time.time() - now[3] / 1e9 > _RECHECK_S:
        return None
    return path


def _remember_checked(key: str, path: str) -> None:
    """Record ``path`` (just compared with its entry) for :func:`_checked_before`."""
    from ._cache import cache_root
    from ._memo import recall, remember

    ident = _identity(path)
    if ident is None:
        return
    if recall(_CHECKED, [cache_root(), key]) != [path, ident]:
        remember(_CHECKED, [cache_root(), key], [path, ident])


def _verified_library(src: str, cc: str, key: str) -> str:
    """The module's file, through the disk cache's trust model (docs/guarantees.md): an
    entry signed by Thork's writer for this key, whose library's content is compared with
    the recorded hash before it is loaded; anything else is rebuilt
    (:func:`thork_core._extension.cached_library`, the build path plugins' extensions
    take too). Only a build looks for the compiler and the headers (a process that finds
    the module pays for neither)."""
    from ._extension import cached_library, python_flags

    def flags() -> list[str]:
        if _compiler() is None:
            raise RuntimeError("no C compiler (set CC)")
        return python_flags()

    path = cached_library(key, _NAME, src, cc, flags)
    assert path is not None  # (build=True: a library or an exception)
    return path


def _reset() -> None:
    """Forget the loaded module (tests)."""
    _STATE.clear()
