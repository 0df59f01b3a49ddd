"""The on-disk artifact cache (level two of SPEC §3.6; level one lives on each kernel), and
the trust model that lets Thork load only what it wrote (docs/guarantees.md).

Folder: ``THORK_CACHE_DIR``, else ``$XDG_CACHE_HOME/thork``, else ``~/.cache/thork``; made
0700. A folder owned by another user, writable by others or not writable at all is refused
with one warning and a private temporary folder serves the process instead (slower, never
broken).

Key: SHA-256 of the generated source, the compiler's identity (for the host compiler: its
resolved path and a hash of its executable's content), its flags, the artifact kind and
the arch. The renderers write their codegen version into the source's prelude, so the
source covers it: the cache knows nothing of renderers.

Trust: the folder holds a random secret (``secret``, 0600, made once). Each entry
(``<key[:2]>/<key>.art``, 0600) carries an HMAC-SHA256 under that secret of its key, its
metadata and its payload: a file that someone other than Thork's writer put there (a
planted library, a forged artifact, the artifact of another kernel copied over this one)
fails the check, is deleted and rebuilt. A host library (``hostlib``) is stored once, as
``lib/<sha256>.so`` (``dlopen`` needs a file); its entry records that hash, and every load
compares the file's content with it. Reads refuse anything but a regular file owned by this
user and not writable by others (a symlink to ``/dev/zero``, a FIFO...), and sizes over
the cache's limit. Writes go to a temporary name and are renamed into place.

Size: ``THORK_CACHE_MAX_BYTES`` (default 2 GiB); after each write the least recently used
entries (by modification time, refreshed on every hit) are removed until the cache is
below 90% of the limit. Concurrent processes building one key wait on a lock file
(:meth:`DiskCache.lock`), so each kernel is compiled once.
"""

from __future__ import annotations

import json
import os
import stat
import struct
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ._artifact import Artifact
from ._digest import compare_digest, hmac_sha256, sha256, sha256_hex
from ._record import FrozenRecord

if TYPE_CHECKING:
    from pathlib import Path

# pathlib and tempfile are imported where needed: a disk-cache hit in a fresh process
# uses neither (string paths; temporary files only when writing).

__all__ = ["DiskCache", "cache_dir", "cache_root", "cache_key", "disk_cache", "CacheEntry",
           "CacheWarning", "flush_writes", "library_file", "library_path", "load_library",
           "max_bytes", "on_clear", "read_private", "writable_root"]

#: Called after :meth:`DiskCache.clear`: what keeps an in-memory copy of a file in the
#: cache folder (the memo) registers here, so the cache needs to know nothing about it.
_ON_CLEAR: list[Callable[[], None]] = []


def on_clear(forget: Callable[[], None]) -> None:
    """Call ``forget`` after every :meth:`DiskCache.clear` (once per registration)."""
    if forget not in _ON_CLEAR:
        _ON_CLEAR.append(forget)

_MAGIC = b"THORKC2\n"
_HEADER = struct.Struct("<8sIQ32s")  # magic, meta length, payload length, HMAC-SHA256
_SECRET = "secret"
_LIB = "lib"
_LOCKS = "lock"
_DEFAULT_MAX = 2 << 30


# This process's user; None where the OS has no POSIX owners (then modes are not checked
# for ownership).
_UID: int | None = os.geteuid() if hasattr(os, "geteuid") else None


class CacheWarning(UserWarning):
    """The cache folder cannot be used safely; a private temporary folder serves instead."""


class _Untrusted(Exception):
    """A cache file that must not be read (not regular, foreign, too large)."""


def _requested_root() -> str:
    env = os.environ.get("THORK_CACHE_DIR")
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "thork")


_ROOTS: dict[str, str] = {}  # requested folder -> the folder used (itself or a fallback)
_ROOTS_LOCK = threading.Lock()


def cache_root() -> str:
    """The cache folder in use: the requested one (see the module docstring) once it is
    known to be private to this user, else a private temporary folder (one warning)."""
    requested = _requested_root()
    got = _ROOTS.get(requested)
    if got is None:
        with _ROOTS_LOCK:
            got = _ROOTS.get(requested)
            if got is None:
                got = _ROOTS[requested] = _secure(requested)
    return got


def cache_dir() -> Path:
    """:func:`cache_root` as a :class:`~pathlib.Path`."""
    from pathlib import Path

    return Path(cache_root())


def max_bytes() -> int:
    """``THORK_CACHE_MAX_BYTES`` (bytes; default 2 GiB): the size eviction keeps below."""
    raw = os.environ.get("THORK_CACHE_MAX_BYTES", "")
    if not raw.strip():
        return _DEFAULT_MAX
    error = max_bytes_error(raw)
    if error is not None:  # a typo must not silently change the cache's size
        warnings.warn(f"THORK_CACHE_MAX_BYTES={raw!r} ignored: {error}; using the default "
                      f"{_DEFAULT_MAX} bytes", CacheWarning, stacklevel=2)
        return _DEFAULT_MAX
    return int(raw)


def max_bytes_error(raw: str) -> str | None:
    """Why ``raw`` is not a valid ``THORK_CACHE_MAX_BYTES`` value, or None."""
    try:
        value = int(raw)
    except ValueError:
        return "expected a whole number of bytes"
    return None if value > 0 else "expected a positive number of bytes"


def _secure(path: str) -> str:
    reason = _unsafe(path)
    if reason is None:
        return path
    return _fallback(path, reason, stacklevel=4)


def _fallback(path: str, reason: str, stacklevel: int) -> str:
    """A private temporary folder (removed at exit) standing in for ``path``, with the one
    warning that says why."""
    import tempfile

    fallback = tempfile.mkdtemp(prefix="thork-cache-")  # 0700, owned by this user
    _remove_at_exit(fallback)
    warnings.warn(f"thork: cache folder {path} {reason}; using the private temporary folder "
                  f"{fallback} for this process (kernels are recompiled)", CacheWarning,
                  stacklevel=stacklevel)
    return fallback


#: Cache folders a file was created in by this process (:func:`writable_root`).
_WRITTEN: set[str] = set()


def writable_root(root: str) -> str:
    """``root`` (a folder :func:`cache_root` returned) once a file could be created in it:
    called before this process's first write there. ``os.access`` (asked when the folder
    was first used) answers for modes, read-only mounts and immutable folders; what it
    cannot see (a file system refusing writes it claims to allow) is found here, by
    creating and removing an empty file, instead of in every process that only reads (a
    cache hit writes nothing: ~0.05–0.25 ms saved per process). If that fails, the folder
    is refused as :func:`cache_root` would have refused it (one ``CacheWarning``; a private
    temporary folder serves the rest of the process) and ``OSError`` is raised: the
    write in progress is dropped (a later miss), nothing is written there."""
    if root in _WRITTEN:
        return root
    probe = os.path.join(root, f".probe-{os.getpid()}-{threading.get_ident()}")
    try:
        os.makedirs(root, mode=0o700, exist_ok=True)  # (removed while this process ran)
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                     0o600)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        with _ROOTS_LOCK:
            for requested, used in list(_ROOTS.items()):
                if used == root:
                    _ROOTS[requested] = _fallback(root, f"is not writable ({exc.strerror})",
                                                  stacklevel=3)
        raise OSError(f"cache folder {root} is not writable ({exc.strerror})") from None
    _WRITTEN.add(root)
    return root


def _remove_at_exit(folder: str) -> None:
    import atexit
    import shutil

    atexit.register(shutil.rmtree, folder, ignore_errors=True)


def _unsafe(path: str) -> str | None:
    """Why ``path`` cannot be this user's private cache folder, or None (made 0700)."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.stat(path)
    except OSError as exc:
        return f"cannot be created ({exc.strerror})"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a folder"
    if _UID is not None and st.st_uid != _UID:
        return f"is owned by another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        return f"is writable by other users (mode {stat.S_IMODE(st.st_mode):o})"
    if stat.S_IMODE(st.st_mode) != 0o700:
        try:
            os.chmod(path, 0o700)  # ours and not writable by others: only tighten reading
        except OSError as exc:
            return f"cannot be made private ({exc.strerror})"
    # access(2) also refuses a read-only mount (EROFS) and an immutable folder (EPERM),
    # for root too; a file system that claims more than it allows is found at the first
    # write (writable_root), not by writing in every process.
    if not os.access(path, os.W_OK | os.X_OK):
        return "is not writable"
    return None


def read_private(path: str, limit: int) -> bytes:
    """The content of ``path`` if it is a regular file owned by this user, not writable by
    others, of at most ``limit`` bytes. Raises FileNotFoundError when absent and
    ``_Untrusted`` (or another OSError) otherwise. Never follows a symlink and never
    blocks on a FIFO."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) \
        | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:  # ELOOP: a symlink
        raise _Untrusted(f"{path}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _Untrusted(f"{path}: not a regular file")
        if (_UID is not None and st.st_uid != _UID) or st.st_mode & 0o022:
            raise _Untrusted(f"{path}: not this user's private file")
        if st.st_size > limit:
            raise _Untrusted(f"{path}: {st.st_size} bytes (limit {limit})")
        chunks = []
        left = st.st_size + 1  # one more byte tells a file that grew after fstat
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) != st.st_size:
            raise _Untrusted(f"{path}: changed while read")
        return data
    finally:
        os.close(fd)


def _write_private(path: str, data: bytes) -> None:
    """``data`` into ``path`` (0600) atomically: a temporary name, then rename."""
    import tempfile

    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")  # created 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


_SECRETS: dict[str, bytes] = {}
#: Per cache folder: (bytes it held at the last listing plus this process's writes since,
#: writes since that listing); see :meth:`DiskCache._evict_after_write`.
_ESTIMATE: dict[str, tuple[int, int]] = {}
_ESTIMATE_LOCK = threading.Lock()


def _secret(root: str) -> bytes:
    """The folder's HMAC key: 32 random bytes in ``secret`` (0600), made on first use.

    Every process using the folder must hold the same key (an entry signed with another
    is invalid to all the rest), so the file is only ever made or replaced whole
    (:func:`_write_private`: a temporary name renamed into place, never seen half
    written) and only under the folder's secret lock, after reading it again there: of
    processes starting together on an empty or damaged folder, the first makes the key
    and the others read it. (Before session 15 each made its own with ``O_EXCL`` and
    wrote it after: a process reading the empty file in between took it for damaged
    and replaced it, and 88 of 200 trials of six processes ended with one holding a key
    not on disk.)"""
    got = _SECRETS.get(root)
    if got is not None:
        return got
    path = os.path.join(root, _SECRET)
    data = _read_secret(path)
    if data is None:
        with _folder_lock(writable_root(root), "secret"):
            data = _read_secret(path)  # another process may have made it meanwhile
            if data is None:
                data = os.urandom(32)
                _write_private(path, data)  # replaces a damaged or untrusted file whole
    _SECRETS[root] = data
    return data


def _read_secret(path: str) -> bytes | None:
    """The key in ``path``, or None where it is absent, damaged (not 32 bytes) or not
    this user's private regular file."""
    try:
        data = read_private(path, 64)
    except (FileNotFoundError, _Untrusted):
        return None
    return data if len(data) == 32 else None


@contextmanager
def _folder_lock(root: str, name: str) -> Iterator[_Held]:
    """Hold the advisory lock ``name`` of the cache folder ``root`` (a file in its lock
    folder; other processes and threads taking it wait). Without locking support, or
    where the lock file cannot be made, nothing is held (yields a :class:`_Held` of
    -1). A :class:`_Held` that was :meth:`~_Held.detach`-ed is left to its new owner."""
    held = _Held(-1)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield held
        return
    try:
        folder = os.path.join(root, _LOCKS)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd = os.open(os.path.join(folder, f"{name}.lock"),
                     os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError:
        yield held
        return
    held = _Held(fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield held
    finally:
        if not held.detached:
            held.release()  # closing the file releases the lock


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def cache_key(source: str, compiler: str, flags: Iterable[str], kind: str, arch: str) -> str:
    """The hex key of an artifact (see the module docstring for what it covers)."""
    h = sha256(size_hint=len(source))
    for part in (compiler, kind, arch, "\x1f".join(flags), source):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


class _Held:
    """A build lock's file descriptor (-1: no lock), released once: by :meth:`DiskCache.lock`
    when its block ends, or, once :meth:`detach`-ed, by the background writer after the
    write it guards."""

    __slots__ = ("fd", "detached")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.detached = False

    def detach(self) -> None:
        self.detached = True

    def release(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass


#: Artifacts handed to the background writer and not yet on disk, by (folder, key).
_PENDING: dict[tuple[str, str], Artifact] = {}
#: Seconds the background writer waits for more work before its thread ends (a burst of
#: compiles keeps one thread; a process that compiled once runs launches without it).
_WRITER_LINGER_S = 0.5


class _Writer:
    """One daemon thread per process writing :meth:`DiskCache.put_later`'s entries in the
    order given, ended when idle for :data:`_WRITER_LINGER_S` (the next entry starts
    another). :func:`flush_writes` waits for the queue; an ``atexit`` hook flushes
    before the interpreter exits; a forked child starts with no queue (its parent
    writes what it queued, and the child closes its copies of their locks so that they
    are released when the parent's writes are done)."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[tuple[DiskCache, str, str, Artifact, _Held | None]] = []
        self._busy = 0  # queued or being written
        self._thread: threading.Thread | None = None
        self._hooked = False

    def submit(self, cache: DiskCache, root: str, key: str, artifact: Artifact,
               held: _Held | None) -> None:
        with self._cond:
            _PENDING[(root, key)] = artifact
            self._queue.append((cache, root, key, artifact, held))
            self._busy += 1
            if self._thread is None:
                if not self._hooked:
                    import atexit

                    atexit.register(flush_writes)
                    self._hooked = True
                self._thread = threading.Thread(target=self._run, name="thork-cache-writer",
                                                daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _run(self) -> None:
        me = threading.current_thread()
        while True:
            with self._cond:
                if not self._queue:
                    self._cond.wait(_WRITER_LINGER_S)
                if not self._queue:
                    # (session 12) idle: the thread ends, and with it its Python thread
                    # state; while any other thread state exists, every native launch
                    # releases and retakes the GIL (~25% of a hot call's instructions,
                    # _native_launch.c's alone()). The next submit starts a new one.
                    if self._thread is me:
                        self._thread = None
                    return
                cache, root, key, artifact, held = self._queue.pop(0)
            try:
                cache._put_at(root, key, artifact)
            except Exception:  # never lose the writer: a failed write is a later miss
                pass
            finally:
                with self._cond:
                    if _PENDING.get((root, key)) is artifact:
                        del _PENDING[(root, key)]
                    self._busy -= 1
                    self._cond.notify_all()
                if held is not None:
                    held.release()

    def flush(self) -> None:
        if threading.current_thread() is self._thread:
            return  # the writer's own eviction lists the folder: nothing to wait for
        with self._cond:
            while self._busy:
                self._cond.wait()

    def after_fork_in_child(self) -> None:
        for *_, held in self._queue:
            if held is not None:
                held.release()
        self._cond = threading.Condition(threading.Lock())
        self._queue = []
        self._busy = 0
        self._thread = None
        _PENDING.clear()


_WRITER = _Writer()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_WRITER.after_fork_in_child)


def flush_writes() -> None:
    """Wait until this process's background cache writes (:meth:`DiskCache.put_later`)
    are on disk."""
    _WRITER.flush()


class CacheEntry(FrozenRecord):
    """One entry of the cache as ``thork cache list`` shows it: ``size`` is bytes on disk
    (entry file and its library), ``last_used`` a POSIX time (seconds). Immutable (a
    frozen dataclass written out: :mod:`thork_core._record`)."""

    _fields = ("key", "path", "size", "entry", "compiler", "kind", "arch", "last_used")
    key: str
    path: Path
    size: int
    entry: str
    compiler: str
    kind: str
    arch: str
    last_used: float

    def __init__(self, key: str, path: Path, size: int, entry: str, compiler: str, kind: str,
                 arch: str, last_used: float = 0.0) -> None:
        d = self.__dict__
        d["key"], d["path"], d["size"], d["entry"] = key, path, size, entry
        d["compiler"], d["kind"], d["arch"], d["last_used"] = compiler, kind, arch, last_used


class DiskCache:
    """Artifacts by key under ``root``. ``stats`` counts hits, misses, rejected entries
    (``corrupt``: damaged, forged, swapped or not a regular file), writes and evictions."""

    def __init__(self, root: Path | None = None) -> None:
        self._root = root
        self._stats = {"hits": 0, "misses": 0, "corrupt": 0, "writes": 0, "evicted": 0}

    @property
    def stats(self) -> dict[str, int]:
        """The counters (read after this process's pending background writes are done,
        so ``writes`` counts every artifact handed to :meth:`put_later`)."""
        flush_writes()
        return self._stats

    @property
    def root(self) -> Path:
        from pathlib import Path

        return Path(self._root_str())

    def _root_str(self) -> str:
        return os.fspath(self._root) if self._root is not None else cache_root()

    def _path(self, key: str) -> str:
        return os.path.join(self._root_str(), key[:2], f"{key}.art")

    def get(self, key: str, *, count: bool = True) -> Artifact | None:
        """The artifact stored under ``key`` if Thork's writer stored exactly it, else None
        (a damaged, forged or swapped entry is removed). ``count=False`` leaves the hit
        and miss counters alone (Thork reading its own entry again, not a look-up)."""
        root = self._root_str()
        pending = _PENDING.get((root, key))
        if pending is not None:  # this process's own artifact, on its way to the disk
            if count:
                self._stats["hits"] += 1
            return pending
        path = self._path(key)
        limit = max_bytes()
        try:
            blob = read_private(path, limit)
            art, lib = _decode(blob, key, _secret(root))
            if lib is not None:
                lib_path = _lib_path(root, lib)
                data = read_private(lib_path, limit)
                if sha256_hex(data) != lib:
                    _remove(lib_path)
                    raise _Untrusted(f"{lib_path}: content does not match its entry")
                _touch(lib_path)
                art = _with_data(art, data, _checked(lib_path))
            _touch(path)
        except FileNotFoundError:
            if count:
                self._stats["misses"] += 1
            return None
        except (_Untrusted, OSError, ValueError, KeyError, TypeError):
            self._stats["corrupt"] += 1
            if count:
                self._stats["misses"] += 1
            _remove(path)
            return None
        if count:
            self._stats["hits"] += 1
        return art

    def put(self, key: str, artifact: Artifact) -> None:
        """Store atomically, then evict down to the size limit; failures to write
        (read-only disk, full disk...) are not fatal."""
        self._put_at(self._root_str(), key, artifact)

    def _put_at(self, root: str, key: str, artifact: Artifact) -> None:
        """:meth:`put` into the folder ``root`` (resolved by the caller)."""
        try:
            secret = _secret(writable_root(root))
            lib = None
            if artifact.kind == "hostlib":
                lib = _store_library(root, artifact.data)
            blob = _encode(artifact, key, secret, lib)
            _write_private(os.path.join(root, key[:2], f"{key}.art"), blob)
            self._stats["writes"] += 1
        except OSError:
            return
        self._evict_after_write(len(blob) + (len(artifact.data) if lib is not None else 0),
                                root)

    def put_later(self, key: str, artifact: Artifact, held: _Held | None = None) -> None:
        """:meth:`put` on this process's background writer: the caller uses ``artifact``
        at once (a kernel's first launch does not wait for the disk). Until the file is
        in place, :meth:`get` in this process returns ``artifact`` from memory; ``held``
        (the build lock of ``key``, from :meth:`lock`) is released only after the write,
        so other processes waiting to build ``key`` find the file instead of compiling
        again. The write itself is :meth:`put`'s (a temporary name, renamed into place:
        a crash leaves at most an ignored ``.tmp-`` file, never a partial entry), and the
        writer finishes pending writes before the process exits. Host libraries are
        written at once (loading them needs the file)."""
        if artifact.kind == "hostlib":
            try:
                self.put(key, artifact)
            finally:
                if held is not None:
                    held.release()
            return
        root = self._root_str()
        if held is not None:
            held.detach()  # the writer releases it after the write
        _WRITER.submit(self, root, key, artifact, held)

    def _evict_after_write(self, nbytes: int, root: str | None = None) -> None:
        """:meth:`evict` after a write of ``nbytes``, without listing the folder each
        time: the first write of a process (and of each folder) lists it and keeps its
        total; later writes add their sizes and list again only when that estimate
        reaches the limit or 64 writes have passed (other processes' writes are then
        counted too). A cold compile thus spends no ~0.1–0.5 ms stat'ing every entry."""
        limit = max_bytes()
        root = self._root_str() if root is None else root
        with _ESTIMATE_LOCK:
            est = _ESTIMATE.get(root)
            if est is not None and est[1] < 64 and est[0] + nbytes <= limit:
                _ESTIMATE[root] = (est[0] + nbytes, est[1] + 1)
                return
        if root == self._root_str():
            self.evict(limit)
            total = self.size()
        else:  # a background write into a folder no longer the current one
            self._evict_in(root, limit)
            total = sum(st.st_size for _, st in self._files(root))
        with _ESTIMATE_LOCK:
            _ESTIMATE[root] = (total, 0)

    @contextmanager
    def lock(self, key: str) -> Iterator[_Held]:
        """Hold the build lock of ``key`` (an advisory lock file; other processes and
        threads building the same key wait). Without locking support, a no-op. Yields
        a :class:`_Held` that :meth:`put_later` may take over (the lock then outlives
        the block until the background write is done)."""
        try:
            root = writable_root(self._root_str())
        except OSError:  # an unusable folder costs at worst a duplicate compile
            yield _Held(-1)
            return
        with _folder_lock(root, key) as held:
            yield held

    def _files(self, root: str | None = None) -> list[tuple[str, os.stat_result]]:
        """Every entry and library file with its ``lstat`` (in ``root``, default the
        cache's folder)."""
        root = self._root_str() if root is None else root
        out: list[tuple[str, os.stat_result]] = []
        try:
            subs = [e.name for e in os.scandir(root) if e.is_dir(follow_symlinks=False)]
        except OSError:
            return out
        for sub in subs:
            if sub == _LOCKS:
                continue
            folder = os.path.join(root, sub)
            try:
                with os.scandir(folder) as it:
                    for e in it:
                        if e.name.endswith((".art", ".so")) and not e.name.startswith("."):
                            try:
                                out.append((e.path, e.stat(follow_symlinks=False)))
                            except OSError:
                                pass
            except OSError:
                pass
        return out

    def evict(self, limit: int | None = None) -> int:
        """Remove least recently used files until the cache is below 90% of ``limit``
        (default :func:`max_bytes`) when it is above ``limit``; return how many went."""
        limit = max_bytes() if limit is None else limit
        flush_writes()
        return self._evict_in(self._root_str(), limit)

    def _evict_in(self, root: str, limit: int) -> int:
        """:meth:`evict` in the folder ``root``."""
        files = self._files(root)
        total = sum(st.st_size for _, st in files)
        if total <= limit:
            return 0
        n = 0
        for path, st in sorted(files, key=lambda f: f[1].st_mtime_ns):
            if total <= limit * 0.9:
                break
            try:
                os.unlink(path)
            except OSError:
                continue
            total -= st.st_size
            n += 1
        self._stats["evicted"] += n
        return n

    def entries(self) -> list[CacheEntry]:
        """Every valid entry with its size on disk (entry file plus library)."""
        flush_writes()
        out: list[CacheEntry] = []
        root = self._root_str()
        from pathlib import Path

        try:
            secret = _secret(root)
        except OSError:
            return out
        for path, st in self._files():
            if not path.endswith(".art"):
                continue
            key = os.path.basename(path)[:-4]
            try:
                art, lib = _decode(read_private(path, max_bytes()), key, secret)
                size = st.st_size
                if lib is not None:
                    size += os.lstat(_lib_path(root, lib)).st_size
            except (_Untrusted, OSError, ValueError, KeyError, TypeError):
                continue
            out.append(CacheEntry(key, Path(path), size, art.entry, art.compiler, art.kind,
                                  art.arch, st.st_mtime))
        out.sort(key=lambda e: e.key)
        return out

    def size(self) -> int:
        """Total bytes of all entry and library files."""
        flush_writes()
        return sum(st.st_size for _, st in self._files())

    def clear(self) -> int:
        """Delete every file of the cache (entries, libraries, damaged or foreign files,
        locks, temporary files, the memo of slow facts ``memo.json``; relearned on next
        use), keeping the folder and its secret; return how many entries were removed."""
        flush_writes()
        n = _clear_tree(self._root_str(), keep=_SECRET)
        for forget in list(_ON_CLEAR):
            forget()
        return n


def _clear_tree(folder: str, keep: str | None = None) -> int:
    """Remove what ``folder`` holds (but an entry named ``keep``), folders included;
    return how many artifacts (``.art`` files) went."""
    n = 0
    try:
        items = list(os.scandir(folder))
    except OSError:
        return 0
    for e in items:
        if e.name == keep:
            continue
        if e.is_dir(follow_symlinks=False):
            n += _clear_tree(e.path)
            try:
                os.rmdir(e.path)
            except OSError:
                pass
            continue
        try:
            os.unlink(e.path)
            n += e.name.endswith(".art")
        except OSError:
            pass
    return n


def _touch(path: str) -> None:
    """Mark ``path`` used now (the LRU order eviction follows)."""
    try:
        os.utime(path)
    except OSError:
        pass


def _lib_path(root: str, digest: str) -> str:
    return os.path.join(root, _LIB, f"{digest}.so")


def _store_library(root: str, data: bytes) -> str:
    """Write ``data`` as ``lib/<sha256>.so`` unless a verified copy is there; its digest."""
    digest = sha256_hex(data)
    path = _lib_path(root, digest)
    try:
        if read_private(path, max(len(data), 1)) == data:
            return digest
    except FileNotFoundError:
        pass
    except _Untrusted:
        _remove(path)
    _write_private(path, data)
    return digest


def _mac(secret: bytes, key: str, meta: bytes, payload: bytes) -> bytes:
    return hmac_sha256(secret, (key.encode() + b"\0", struct.pack("<Q", len(meta)), meta,
                                 payload))


def _encode(a: Artifact, key: str, secret: bytes, lib: str | None) -> bytes:
    meta = json.dumps({
        "key": key, "kind": a.kind, "entry": a.entry, "compiler": a.compiler, "arch": a.arch,
        "log": a.log, "info": a.info, "lib": lib,
    }).encode()
    payload = b"" if lib is not None else a.data
    return _HEADER.pack(_MAGIC, len(meta), len(payload), _mac(secret, key, meta, payload)) \
        + meta + payload


def _decode(blob: bytes, key: str, secret: bytes) -> tuple[Artifact, str | None]:
    """The artifact in ``blob`` and its library digest (None when the payload is inline);
    raises ``_Untrusted`` unless Thork's writer signed exactly this entry for ``key``."""
    if len(blob) < _HEADER.size:
        raise _Untrusted("truncated entry")
    magic, mlen, plen, mac = _HEADER.unpack_from(blob)
    body = blob[_HEADER.size:]
    if magic != _MAGIC or len(body) != mlen + plen:
        raise _Untrusted("damaged entry")
    meta_b, payload = body[:mlen], body[mlen:]
    if not compare_digest(mac, _mac(secret, key, meta_b, payload)):
        raise _Untrusted("entry not written by Thork for this key")
    meta = json.loads(meta_b)
    if meta["key"] != key:  # covered by the MAC; checked again for clarity
        raise _Untrusted("entry of another key")
    art = Artifact(
        kind=meta["kind"], data=bytes(payload), entry=meta["entry"],
        compiler=meta["compiler"], arch=meta["arch"], log=meta.get("log", ""),
        info=meta.get("info", {}),
    )
    return art, meta.get("lib")


def _with_data(a: Artifact, data: bytes, path: str = "") -> Artifact:
    return Artifact(kind=a.kind, data=data, entry=a.entry, compiler=a.compiler, arch=a.arch,
                    log=a.log, info=a.info, path=path)


#: Library files whose content this process compared with an entry's digest, with their
#: (inode, size, modification time) right after: unchanged since, the file still holds
#: those bytes, so loading it needs no second read and hash (:func:`library_file`).
_CHECKED: dict[str, tuple[int, int, int]] = {}


def _stamp(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def _checked(path: str) -> str:
    """Record ``path`` as compared just now; returns it ("" when it cannot be stat'ed)."""
    stamp = _stamp(path)
    if stamp is None:
        return ""
    if len(_CHECKED) > 4096:  # bounded: a process loading many libraries re-checks old ones
        _CHECKED.clear()
    _CHECKED[path] = stamp
    return path


def library_file(art: Artifact) -> str:
    """The file to load for hostlib ``art``: the one the disk cache compared with its
    entry when ``art`` came from there (:attr:`Artifact.path`) and it is unchanged since
    (same inode, size and modification time: a replaced or evicted file is not), else
    :func:`library_path` of its bytes (compared or written now). Either way the content
    was checked exactly once in this process before it is loaded."""
    path = art.path
    if path:
        stamp = _CHECKED.get(path)
        if stamp is not None and stamp == _stamp(path):
            return path
    return library_path(art.data)


_FALLBACK: list[str] = []


def library_path(data: bytes, folder: str = _LIB) -> str:
    """A file holding exactly ``data`` (a shared library: ``dlopen`` needs a path), in the
    cache's one library store (``lib/<sha256>.so``, shared with the entries: one copy per
    library). An existing file is used only after its content is compared with ``data``;
    a wrong or untrusted one is replaced. Where the cache cannot be written, a private
    temporary folder serves. ``folder`` is accepted for callers of the former layout."""
    del folder
    try:
        root = writable_root(cache_root())
        return _lib_path(root, _store_library(root, data))
    except OSError:
        pass
    if not _FALLBACK:
        import tempfile

        _FALLBACK.append(tempfile.mkdtemp(prefix="thork-lib-"))
        _remove_at_exit(_FALLBACK[0])
    root = _FALLBACK[0]
    return _lib_path(root, _store_library(root, data))


def load_library(data: bytes | Artifact) -> Any:
    """``ctypes.CDLL`` of the library ``data`` (bytes: through :func:`library_path`'s
    verified file; a hostlib :class:`Artifact`: through :func:`library_file`, which reuses
    the disk cache's check), unloaded (``dlclose``) when the returned object and every
    function taken from it are gone: a process that makes and drops many kernels does not
    keep every library mapped. Callers keep the object (or its functions) while they may
    call into it."""
    import ctypes
    import weakref

    from ._fpenv import loading

    path = library_file(data) if isinstance(data, Artifact) else library_path(data)
    with loading(f"the host library {os.path.basename(path)}"):  # -ffast-math's FTZ: undone
        lib = ctypes.CDLL(path)
    _pin_runtimes()
    weakref.finalize(lib, _dlclose, lib._handle).atexit = False  # not at shutdown
    return lib


_PINNED: dict[str, Any] = {}


def _pin_runtimes() -> None:
    """Keep the OpenMP runtime a library pulled in loaded for good: its worker threads
    outlive any one library, so unloading the last library that needed it must not
    unload it (``RTLD_NOLOAD``: only where already loaded)."""
    import ctypes

    for name in ("libgomp.so.1", "libomp.so", "libomp.so.5"):
        if name in _PINNED:
            continue
        try:
            _PINNED[name] = ctypes.CDLL(name, mode=os.RTLD_NOLOAD | ctypes.RTLD_GLOBAL)
        except (OSError, AttributeError):
            pass


def _dlclose(handle: int) -> None:
    try:
        import _ctypes

        _ctypes.dlclose(handle)  # type: ignore[attr-defined]
    except (ImportError, AttributeError, OSError):  # pragma: no cover - not POSIX
        pass


def _reset() -> None:
    """Forget the folders checked and secrets read (tests change ``THORK_CACHE_DIR``
    and permissions)."""
    flush_writes()
    with _ROOTS_LOCK:
        _ROOTS.clear()
    _SECRETS.clear()
    _CHECKED.clear()
    _WRITTEN.clear()
    with _ESTIMATE_LOCK:
        _ESTIMATE.clear()


_DEFAULT = DiskCache()


def disk_cache() -> DiskCache:
    """The process-wide cache (its root follows ``THORK_CACHE_DIR`` at each access)."""
    return _DEFAULT
