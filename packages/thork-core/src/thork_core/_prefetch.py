"""A fresh process's first launch: the driver's module load started early, on a guess.

A kernel's first call in a process finds its artifact only at the end of a long host path
(the native launch module, the trace, the selection record, the render, the cache key);
the CUDA driver then spends ~1–1.5 ms loading the module, with the process waiting. Here
the front-end guesses the artifact at the first ``kernel[grid, block]``: a small record
in the cache folder (``pre/<digest>``, written by Thork after each first build of a
kernel) names the cache key that kernel's last build in an earlier process used. The
entry is read through the disk cache (its HMAC and ownership checks: nothing is loaded
that Thork did not write) and a thread loads it into the driver (``cuModuleLoadData``,
``cuModuleGetFunction`` and the attributes, through ctypes: the GIL is released) while
this thread takes the full path. The guess is only a head start: the full path computes
the key as always, and the loaded module is used only when that key, the artifact object
it read and the device are the same ones (:func:`take`); otherwise the guess is unloaded
(:func:`settle`) and the artifact the full path found is loaded as usual. A stale record
therefore costs a wasted load in the background, never a wrong kernel.

Off by default until a GPU run shows a gain (session 11, run 8: none measurable, see
docs/benchmarks.md "Session 11, first call"): ``THORK_PREFETCH=1`` turns it on. It runs
only where the process already holds the device's context (a first call never creates
one here), outside a graph capture, without an ahead-of-time bundle
(``THORK_CACHE_BUNDLE``, which the full path asks first).
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

from ._artifact import Artifact
from ._digest import sha256_hex

__all__ = ["artifact", "enabled", "note", "record_id", "settle", "start", "take"]

#: The record folder's name inside the cache folder.
FOLDER = "pre"
#: Pending loads by (cache key, device ordinal).
_PENDING: dict[tuple[str, int], _Load] = {}
_LOCK = threading.Lock()
#: What a record's identity covers besides the kernel's own facts: the variables that
#: change which target or compiler a default build takes.
_VARIABLES = ("THORK_TARGET", "THORK_COMPILER", "THORK_ARCH", "THORK_PLUGIN_DEFAULTS",
              "THORK_DISABLE_PLUGINS")
#: ``CUfunction_attribute`` values (cuda.h) of the attributes a GPU executable reports.
_ATTRIBUTES = (("registers", 4), ("shared_bytes", 1), ("local_bytes", 3),
               ("max_threads_per_block", 0))


class _Load:
    """One guessed artifact being loaded on a thread of its own."""

    __slots__ = ("artifact", "key", "ordinal", "done", "module", "function", "attributes",
                 "error", "taken")

    def __init__(self, artifact: Artifact, key: str, ordinal: int) -> None:
        self.artifact, self.key, self.ordinal = artifact, key, ordinal
        self.done = threading.Event()
        self.module = self.function = 0
        self.attributes: dict[str, int] = {}
        self.error = 0
        self.taken = False


def enabled() -> bool:
    """``THORK_PREFETCH`` is ``1`` (or on/true/yes; ``ctypes``: on, loading through ctypes
    instead of the native module's one call, for comparison)."""
    if os.environ.get("THORK_PREFETCH", "").strip().lower() == "ctypes":
        return True
    from ._env import env_flag

    return env_flag("THORK_PREFETCH", False)


def record_id(parts: list[Any]) -> str:
    """The record's file name for a kernel described by ``parts`` (JSON-able facts that
    tell kernels apart: module, qualified name, file, name, options) and the variables
    that steer a default build."""
    text = repr([*parts, [os.environ.get(v) for v in _VARIABLES]])
    return sha256_hex(text.encode())[:40]


def _record_path(rid: str) -> str:
    from ._cache import cache_root

    return os.path.join(cache_root(), FOLDER, rid)


def start(rid: str, ordinal: int = 0) -> str | None:
    """Start loading the artifact the record ``rid`` names on device ``ordinal`` when
    everything allows it (see the module docstring); returns the key the record names
    (None: no valid record), whether or not a load started. Never raises."""
    try:
        return _start(rid, ordinal)
    except Exception:  # a guess is an optimization: the full path stands without it
        return None


def _start(rid: str, ordinal: int) -> str | None:
    if not enabled() or os.environ.get("THORK_CACHE_BUNDLE"):
        return None
    from ._cache import _Untrusted, disk_cache, read_private

    try:
        key = read_private(_record_path(rid), 256).decode("ascii").strip()
    except (OSError, _Untrusted, UnicodeDecodeError):
        return None
    if len(key) != 64 or not all(c in "0123456789abcdef" for c in key):
        return None
    from . import _cuda
    from ._graph import capturing

    ctx = _cuda.retained_context(ordinal)
    if ctx is None or capturing():
        return key  # (what the record says, so that it is not written again)
    with _LOCK:
        if (key, ordinal) in _PENDING:
            return key
    art = disk_cache().get(key)  # HMAC-checked: only what Thork's writer stored
    if art is None or art.kind not in ("cubin", "ptx"):
        return key
    _native_loader()  # (the native module: loaded here, not on the loading thread)
    load = _Load(art, key, ordinal)
    with _LOCK:
        if (key, ordinal) in _PENDING:
            return key
        _PENDING[(key, ordinal)] = load
    _fast_switching(True)
    try:
        threading.Thread(target=_run, args=(load, int(ctx)), daemon=True,
                         name="thork-prefetch").start()
    except BaseException:
        _fast_switching(False)
        raise
    return key


#: [guesses loading, the interpreter's switch interval before the first of them].
_SWITCHING: list[Any] = [0, None]
#: The switch interval while a guess loads (seconds). The loading thread takes the GIL
#: back after each of its driver calls; at CPython's default (5 ms) it would wait that
#: long each time while this thread runs Python, and the load would finish after the
#: host path instead of during it.
SWITCH_S = 5e-5


def _fast_switching(on: bool) -> None:
    """Lower the switch interval while any guess loads; restore it after the last."""
    import sys

    with _LOCK:
        if on:
            if _SWITCHING[0] == 0:
                _SWITCHING[1] = sys.getswitchinterval()
                sys.setswitchinterval(min(SWITCH_S, _SWITCHING[1]))
            _SWITCHING[0] += 1
        else:
            _SWITCHING[0] -= 1
            if _SWITCHING[0] == 0 and _SWITCHING[1] is not None:
                sys.setswitchinterval(_SWITCHING[1])


def _run(load: _Load, ctx: int) -> None:
    try:
        _load_module(load, ctx)
    except Exception:  # noqa: BLE001 - the full path loads (and reports) instead
        load.error = -1
    finally:
        load.done.set()
        _fast_switching(False)


def _proto(name: str, *args: Any) -> Any:
    from . import _cuda

    return ctypes.CFUNCTYPE(ctypes.c_int, *args)(_cuda.function_address(name))


def _load_module(load: _Load, ctx: int) -> None:
    """The driver's part (this thread): in one call of the native module with the GIL
    released (:func:`_native_loader`), else through ctypes (which releases the GIL during
    each call, but takes it back between them)."""
    native = _native_loader()
    if native is not None:
        from . import _cuda

        art = load.artifact
        data = art.data + (b"\0" if art.kind == "ptx" else b"")
        fns = tuple(_cuda.function_address(n) for n in (
            "cuCtxSetCurrent", "cuModuleLoadData", "cuModuleGetFunction",
            "cuFuncGetAttribute"))
        err, module, function, values = native(fns, ctx, data, art.entry.encode())
        load.module = module
        if err:
            load.error = err
            return
        load.function = function
        load.attributes = {name: v for (name, _), v in zip(_ATTRIBUTES, values) if v >= 0}
        return
    vp = ctypes.c_void_p
    err = _proto("cuCtxSetCurrent", vp)(ctx)
    if err:
        load.error = err
        return
    art = load.artifact
    data = art.data + (b"\0" if art.kind == "ptx" else b"")
    module = vp()
    err = _proto("cuModuleLoadData", ctypes.POINTER(vp), ctypes.c_char_p)(
        ctypes.byref(module), data)
    if err:
        load.error = err
        return
    load.module = module.value or 0
    function = vp()
    err = _proto("cuModuleGetFunction", ctypes.POINTER(vp), vp, ctypes.c_char_p)(
        ctypes.byref(function), module, art.entry.encode())
    if err:
        load.error = err
        return
    load.function = function.value or 0
    get = _proto("cuFuncGetAttribute", ctypes.POINTER(ctypes.c_int), ctypes.c_int, vp)
    value = ctypes.c_int()
    for name, attr in _ATTRIBUTES:  # (reading one loads the function: lazy loading)
        if get(ctypes.byref(value), attr, function) == 0:
            load.attributes[name] = int(value.value)


def _native_loader() -> Any:
    """The native module's ``load_module`` (one GIL-free call for the whole load), unless
    ``THORK_PREFETCH=ctypes`` asks for the ctypes loader (a comparison) or the native
    module is unavailable. Asked on the calling thread before the loading thread starts
    (the module is loaded there once per process: the first launch needs it anyway)."""
    if os.environ.get("THORK_PREFETCH", "").strip().lower() == "ctypes":
        return None
    from ._native import native_module

    mod = native_module()
    return getattr(mod, "load_module", None) if mod is not None else None


def artifact(key: str, ordinal: int = 0) -> Artifact | None:
    """The artifact a pending guess read for ``key`` (already checked by the disk
    cache), so the full path does not read it again; None without one."""
    load = _PENDING.get((key, ordinal))
    return load.artifact if load is not None else None


def take(art: Artifact, ordinal: int) -> tuple[int, int, dict[str, int]] | None:
    """``(module, function, attributes)`` where a guess loaded exactly the artifact
    object ``art`` (the one the full path chose) on device ``ordinal``: waits for its
    thread; None otherwise (and where the guess failed: the caller loads as usual)."""
    with _LOCK:
        load = next((p for p in _PENDING.values()
                     if p.artifact is art and p.ordinal == ordinal and not p.taken), None)
        if load is None:
            return None
        load.taken = True
        del _PENDING[(load.key, load.ordinal)]
    load.done.wait()
    if load.error or not load.function:
        _unload(load)
        return None
    return load.module, load.function, load.attributes


def settle(key: str | None, ordinal: int = 0) -> None:
    """Drop the guess of ``key`` if the full path did not take it (a stale record):
    wait for its thread and unload what it loaded."""
    if key is None:
        return
    with _LOCK:
        load = _PENDING.pop((key, ordinal), None)
    if load is not None:
        load.done.wait()
        _unload(load)


def _unload(load: _Load) -> None:
    if load.module:
        try:
            _proto("cuModuleUnload", ctypes.c_void_p)(load.module)
        except Exception:  # noqa: BLE001 - a leaked module is harmless
            pass
        load.module = 0


def note(rid: str, key: str, recorded: str | None) -> None:
    """After a kernel's first build: record ``key`` for the next process where it
    differs from what the record said (``recorded``, :func:`start`'s answer). Never
    raises."""
    if key == recorded or not enabled():
        return
    try:
        from ._cache import _write_private, cache_root, writable_root

        writable_root(cache_root())
        _write_private(_record_path(rid), key.encode("ascii"))
    except Exception:  # noqa: BLE001 - a record is an optimization
        pass
