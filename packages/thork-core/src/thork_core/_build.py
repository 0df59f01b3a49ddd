"""From kernel IR to something that runs: render → disk cache or compile → load.

The in-memory level of the cache belongs to the front-end (it knows its call
signatures); this module is the shared path behind it.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from . import _plugins
from ._artifact import Artifact
from ._cache import cache_key, disk_cache
from ._compiler import Compiler
from ._env import env_flag
from ._errors import ArchError, CompileError
from ._ir import KernelIR
from ._plugins import plugins
from ._record import Record
from ._selection import compiler_candidates, target_candidates
from ._target import Executable, Target

__all__ = ["CompileInfo", "build", "build_kernel", "build_stats", "choose", "compile_artifact",
           "key_parts", "precompile", "recording", "remember_traced", "resolve_arch",
           "traced_build"]

#: What builds in this process did: ``compiles`` (a compiler ran), ``bundle`` (an
#: ahead-of-time bundle served the artifact), ``disk`` (the disk cache did).
_STATS = {"compiles": 0, "bundle": 0, "disk": 0}
_STATS_LOCK = threading.Lock()
#: Lists receiving (key, artifact) of every artifact fetched (``recording``).
_RECORDERS: list[list[tuple[str, Artifact]]] = []


def build_stats() -> dict[str, int]:
    """Counts of this process's artifact fetches: ``compiles`` (a compiler ran),
    ``bundle`` (from ``THORK_CACHE_BUNDLE``'s bundle), ``disk`` (from the disk cache)."""
    with _STATS_LOCK:
        return dict(_STATS)


@contextmanager
def recording() -> Iterator[list[tuple[str, Artifact]]]:
    """Collect ``(cache key, artifact)`` of every artifact fetched or compiled in this
    process while the block runs (``thork precompile`` writes them into a bundle)."""
    got: list[tuple[str, Artifact]] = []
    with _STATS_LOCK:
        _RECORDERS.append(got)
    try:
        yield got
    finally:
        with _STATS_LOCK:
            _RECORDERS.remove(got)


def _count(what: str, key: str, artifact: Artifact) -> None:
    with _STATS_LOCK:
        _STATS[what] += 1
        for r in _RECORDERS:
            r.append((key, artifact))


class CompileInfo(Record):
    """How a kernel was built: ``cache`` is ``disk`` (hit), ``bundle`` (from the
    ahead-of-time bundle ``THORK_CACHE_BUNDLE`` names) or ``compiled`` (miss);
    times are milliseconds; ``attributes`` are the target's resource report
    (registers, shared and local bytes on the GPU). Compared by its fields (a dataclass
    written out: :mod:`thork_core._record`)."""

    _fields = ("target", "compiler", "arch", "kind", "flags", "cache", "key", "compile_ms",
               "load_ms", "log", "fallback", "attributes", "device")
    target: str
    compiler: str
    arch: str
    kind: str
    flags: list[str]
    cache: str
    key: str
    compile_ms: float
    load_ms: float
    log: str
    fallback: str
    attributes: dict[str, Any]
    #: The CUDA device it was loaded on (0 for targets without devices).
    device: int

    def __init__(self, target: str, compiler: str, arch: str, kind: str, flags: list[str],
                 cache: str, key: str, compile_ms: float, load_ms: float, log: str = "",
                 fallback: str = "", attributes: dict[str, Any] | None = None,
                 device: int = 0) -> None:
        self.target = target
        self.compiler = compiler
        self.arch = arch
        self.kind = kind
        self.flags = flags
        self.cache = cache
        self.key = key
        self.compile_ms = compile_ms
        self.load_ms = load_ms
        self.log = log
        self.fallback = fallback
        self.attributes = {} if attributes is None else attributes
        self.device = device


def choose(target: str | Target | None, compiler: str | Compiler | None
           ) -> tuple[Target, Compiler]:
    """Resolve the target and compiler a build will use (objects pass through)."""
    reg = plugins()
    tgt = target if isinstance(target, Target) else reg.target(target)
    if isinstance(compiler, Compiler):
        return tgt, compiler
    return tgt, reg.compiler(compiler, tgt)


def key_parts(compiler: Compiler, kind: str, arch: str) -> tuple[str, list[str]]:
    """The compiler's part of a cache key: its identity (name and version) and its flags
    for ``kind`` and ``arch``.

    A compiler may define ``key_fingerprint()``, returning a JSON-able value that changes
    whenever its identity or flags could (its executable's path, size and modification
    time; the environment variables it reads...), or None when it cannot tell. With one,
    both are memoized on disk (``memo.json``) under that fingerprint and the modification
    times of the files defining the compiler's class, so a disk-cache hit in a fresh
    process neither runs nor loads the toolchain to learn them. Without one, they are
    asked for every time (NVRTC memoizes its own version).
    """
    probe = getattr(compiler, "key_fingerprint", None)
    fingerprint = probe() if callable(probe) else None
    if fingerprint is None:
        return compiler.identity(), list(compiler.flags(kind, arch))
    from ._memo import memo, path_fingerprint

    cls = type(compiler)
    files = sorted({f for c in cls.__mro__ if (f := _file_of(c)) is not None})
    ident, flags = memo(
        f"key_parts {cls.__module__}.{cls.__qualname__} {compiler.name} {kind} {arch}",
        [fingerprint, path_fingerprint(files)],
        lambda: [compiler.identity(), list(compiler.flags(kind, arch))])
    return str(ident), [str(f) for f in flags]


def _file_of(cls: type) -> str | None:
    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__file__", None)
    return path if isinstance(path, str) and cls.__module__ not in ("builtins", "abc") else None


def compile_artifact(
    kernel: KernelIR, source: str, compiler: Compiler, kind: str, arch: str
) -> tuple[Artifact, str, bool]:
    """The artifact for ``source``: from the disk cache, else compiled and stored.

    Returns the artifact, its cache key and whether it was a cache hit. Needs no GPU.
    """
    arch = resolve_arch(kernel, arch)
    ident, flags = key_parts(compiler, kind, arch)
    artifact, key, how = _fetch(kernel, source, compiler, kind, arch, ident, flags)
    return artifact, key, how != "compiled"


def resolve_arch(kernel: KernelIR, arch: str) -> str:
    """The architecture to compile ``kernel`` for on a GPU of architecture ``arch``: the
    arch-specific ``sm_90a`` for a kernel using Hopper operations (``wgmma``, TMA,
    ``mbarrier`` transactions) on an sm_90 GPU — part of the cache key and of every
    compiler's flags — else ``arch`` itself. Raises :class:`ArchError` for a Hopper kernel
    on any other GPU (sm_90a code runs on sm_90 only) and :class:`CompileError` where the
    kernel needs a newer GPU (``mma``, ``cp.async``, ``evict=``: sm_80)."""
    if not arch.startswith(("sm_", "compute_")):
        return arch  # not a GPU architecture (the CPU target)
    feature = kernel.hopper_feature
    if feature is None:
        _check_arch(kernel, arch)
        return arch
    if arch.split("_", 1)[1].rstrip("af") != "90":
        raise ArchError(kernel.name, feature, arch, "sm_90a (Hopper: H100/H200)")
    return arch.split("_", 1)[0] + "_90a"


def _check_arch(kernel: KernelIR, arch: str) -> None:
    """A clear error where the kernel uses instructions ``arch`` (``sm_XY``) lacks."""
    if not arch.startswith(("sm_", "compute_")):
        return  # not a GPU architecture (the CPU target)
    digits = "".join(ch for ch in arch.split("_", 1)[1] if ch.isdigit())
    need = kernel.min_sm
    if digits and int(digits) < need:
        raise CompileError(
            f"kernel '{kernel.name}' uses {kernel.sm80_feature or 'tensor-core mma or cp.async'}"
            f", which needs sm_{need} or newer; cannot compile it for {arch}")


def _cached(key: str) -> tuple[Artifact, str] | None:
    """The artifact stored under ``key`` (bundle, then disk cache) and where from."""
    if os.environ.get("THORK_CACHE_BUNDLE"):  # (else a disk-cache hit never imports _bundle)
        from ._bundle import bundle_get

        artifact = bundle_get(key)
        if artifact is not None:
            _count("bundle", key, artifact)
            return artifact, "bundle"
    artifact = disk_cache().get(key)
    if artifact is not None:
        _count("disk", key, artifact)
        return artifact, "disk"
    return None


def _fetch(
    kernel: KernelIR, source: str, compiler: Compiler, kind: str, arch: str, ident: str,
    flags: list[str], *, later: bool = False, key: str | None = None,
) -> tuple[Artifact, str, str]:
    """The artifact, its key and where it came from: ``bundle``, ``disk`` or
    ``compiled``. ``arch`` has been through :func:`resolve_arch`. ``later``: a compiled
    artifact is written by the cache's background writer (:meth:`DiskCache.put_later`)
    while the caller loads it; else before returning. ``key``: the cache key when the
    caller has it (and has looked it up already)."""
    if key is None:
        key = cache_key(source, ident, flags, kind, arch)
        got = _cached(key)
        if got is not None:
            return got[0], key, got[1]
    cache = disk_cache()
    with cache.lock(key) as held:  # processes building the same key compile it once
        artifact = cache.get(key)
        if artifact is not None:
            _count("disk", key, artifact)
            return artifact, key, "disk"
        artifact = compiler.compile(source, entry=kernel.name, kind=kind, arch=arch)
        if later:
            cache.put_later(key, artifact, held)  # the lock goes with the write
        else:
            cache.put(key, artifact)
    _count("compiles", key, artifact)
    return artifact, key, "compiled"


def build_kernel(
    kernel: KernelIR, target: str | Target | None = None, compiler: str | Compiler | None = None,
    device: int = 0,
) -> tuple[Executable, CompileInfo]:
    """The one build path: render ``kernel`` for ``target``, key it, take the artifact from
    the disk cache or compile it with ``compiler`` (and store it), load it.

    ``target`` and ``compiler`` are objects or names; None applies the selection rules
    (:meth:`~thork_core.plugin.Plugins.target`, :meth:`~thork_core.plugin.Plugins.compiler`).
    ``device``: the CUDA device to load on (compiled for that device's architecture: the
    disk cache keeps one artifact per architecture). Returns the loaded executable and how
    it was built.
    """
    if isinstance(target, Target) or isinstance(compiler, Compiler):
        tgt, comp = choose(target, compiler)
        return build(kernel, tgt.renderer().render(kernel), tgt, comp, device)
    # Where this process's registry already chose for this request, the full path costs
    # what a record's look-up would (its choice is answered from objects in memory), and
    # the record's validation (~50 stats, the memo's digests: ~0.5 ms) is skipped.
    request = (target, compiler, *(os.environ.get(v) for v in _SELECTION_VARIABLES))
    registry = _plugins._INSTANCE
    warm = registry is not None and _CHOSEN.get(request) is registry
    got = None if warm else _recorded(kernel, target, compiler, device)
    if isinstance(got, tuple):
        return got
    tgt, comp = choose(target, compiler)
    if len(_CHOSEN) > 64:
        _CHOSEN.clear()
    _CHOSEN[request] = _plugins._INSTANCE
    # A record naming this target rendered the source already and looked its key up (a
    # miss of the disk cache: a cold compile renders and hashes once).
    if got is not None and _same_target(got.target, tgt):
        source, looked_up = got.source, got.looked_up
    else:
        source, looked_up = tgt.renderer().render(kernel), None
    exe, info = build(kernel, source, tgt, comp, device, looked_up=looked_up)
    _write_record(target, compiler, tgt, comp, info)
    return exe, info


#: The registry (``_plugins._INSTANCE``) that answered each request (target, compiler
#: and the selection variables) of :func:`build_kernel` in this process.
_CHOSEN: dict[tuple[Any, ...], Any] = {}


def _same_target(a: Target, b: Target) -> bool:
    """Whether ``a`` and ``b`` render alike: one object, or two of one class with equal
    state (the record makes its own instance of the registry's target)."""
    return a is b or (type(a) is type(b) and a.name == b.name
                      and getattr(a, "__dict__", None) == getattr(b, "__dict__", None))


def build(
    kernel: KernelIR, source: str, target: Target, compiler: Compiler, device: int = 0,
    looked_up: tuple[str, str, str, list[str], str] | None = None,
) -> tuple[Executable, CompileInfo]:
    """:func:`build_kernel` for ``source`` already rendered for ``target``.
    ``looked_up``: ``(arch, kind, ident, flags, key)`` of ``source`` whose look-up in the
    bundle and the disk cache just missed (a selection record's); used where this build's
    parts are the same (the key is then neither hashed nor looked up again before the
    build lock, under which the disk cache is read once more)."""
    arch = resolve_arch(kernel, target.arch_on(device) if device else target.arch())
    kind = next(k for k in target.consumes if k in compiler.produces)
    t0 = time.perf_counter()
    ident, flags = key_parts(compiler, kind, arch)
    key = looked_up[4] if looked_up is not None \
        and looked_up[:4] == (arch, kind, ident, flags) else None
    artifact, key, how = _fetch(kernel, source, compiler, kind, arch, ident, flags,
                                later=True, key=key)
    return _load(kernel, target, device, artifact, key, how, arch, kind, flags, t0)


def _load(kernel: KernelIR, target: Target, device: int, artifact: Artifact, key: str,
          how: str, arch: str, kind: str, flags: list[str], t0: float
          ) -> tuple[Executable, CompileInfo]:
    """Load ``artifact`` (fetched since ``t0``) and say how it was built."""
    t1 = time.perf_counter()
    exe = target.load_on(artifact, kernel, device) if device else target.load(artifact, kernel)
    if kernel.debug_sites is not None:  # debug mode: read the error record after launches
        from ._debug import DebugExecutable

        exe = DebugExecutable(exe, kernel.debug_sites)
    exe.cache = how
    t2 = time.perf_counter()
    info = CompileInfo(
        target=target.name, compiler=artifact.compiler, arch=arch, kind=kind,
        flags=flags,
        cache=exe.cache, key=key, compile_ms=(t1 - t0) * 1e3, load_ms=(t2 - t1) * 1e3,
        log=artifact.log, fallback=str(artifact.info.get("fallback", "")),
        attributes=dict(getattr(exe, "attributes", {})), device=device,
    )
    return exe, info


def precompile(kernel: KernelIR, target: str | Target, compiler: str | Compiler | None = None,
               arch: str | None = None) -> str:
    """Compile ``kernel`` for ``target`` as a build there would (same source, compiler,
    kind and cache key), without loading it: from the bundle or disk cache, or compiled
    and stored. ``arch`` (GPU targets; default: the target's) may name a GPU this machine
    does not have, and a GPU target needs no GPU here. Returns the cache key (a
    :func:`recording` around it collects the artifact: ``thork precompile``)."""
    if isinstance(target, Target):
        tgt = target
    elif target == "gpu":  # its renderer and compilers work without a GPU
        from ._gpu import GpuTarget

        tgt = GpuTarget()
    else:
        tgt = plugins().target(target)
    comp = compiler if isinstance(compiler, Compiler) else plugins().compiler(compiler, tgt)
    kind = next(k for k in tgt.consumes if k in comp.produces)
    if arch is not None and tgt.language == "cuda":
        from ._arch import parse_arch

        arch = parse_arch(arch)
    else:
        arch = tgt.arch()
    return compile_artifact(kernel, tgt.renderer().render(kernel), comp, kind, arch)[1]


# -- the selection record ----------------------------------------------------------------
# A disk-cache hit in a fresh process needs the target (to render, load and launch) but of
# the compiler only its part of the key. The record (``memo.json``, written by Thork)
# keeps, per requested target and compiler name, which target was chosen (its plugin's
# entry point and position) and, per architecture, the chosen compiler's key parts. It is
# used only while everything the choice and those parts depend on is unchanged: the
# selection variables, the Python, the installed distributions (their metadata), every
# plugin's indexed files and core's selection files (fingerprint of the memo entry), and
# the variables and files the compiler declares (:meth:`Compiler.key_inputs`, re-read
# and re-stat'ed). It is written only where the choice involved no fallback (the first
# ranked target and compiler were taken), so availability elsewhere cannot change it
# unseen; the target's own availability is asked every time. On a cache miss (or any
# doubt) the full path runs: the registry, the compiler and a compile.

_RECORD = "selection"
#: Variables the selection rules read (``_selection``, ``_plugins``).
_SELECTION_VARIABLES = ("THORK_TARGET", "THORK_COMPILER", "THORK_PLUGIN_DEFAULTS",
                        "THORK_DISABLE_PLUGINS", "THORK_PLUGINS_AUTOLOAD")
#: Targets made from a record in this process, by (entry point, position, name).
_TARGETS: dict[tuple[str, int, str], Target] = {}


def _record_base(target: str | None, compiler: str | None) -> list[Any] | None:
    """The fingerprint a selection record is stored under (None: no plugin index yet)."""
    from ._memo import installed_fingerprint, path_fingerprint, recall
    from ._plugins import _INDEX, _INDEX_FORMAT

    index = recall(_INDEX, [_INDEX_FORMAT])
    if not isinstance(index, dict) or not index:
        return None
    files = {os.path.join(os.path.dirname(__file__), f)
             for f in ("_build.py", "_selection.py", "_plugins.py")}
    try:
        for entry in index.values():
            files.update(f[0] for f in entry["files"])
    except (TypeError, KeyError, IndexError):
        return None
    return [target, compiler, [os.environ.get(v) for v in _SELECTION_VARIABLES],
            sys.version, installed_fingerprint(), sorted(index),
            path_fingerprint(sorted(files))]


def _record_target(ref: Any) -> Target | None:
    """The target a record names: its plugin's hook called directly (the index said the
    plugin's hooks are plain functions), the object at the recorded position."""
    try:
        value, pos, name = ref
        key = (str(value), int(pos), str(name))
    except (TypeError, ValueError):
        return None
    got = _TARGETS.get(key)
    if got is None:
        from ._plugins import _load_object

        try:
            hook = _load_object(key[0]).thork_register_targets
            made = list(hook() or ())
            got = made[key[1]]
        except Exception:
            return None
        if not isinstance(got, Target) or got.name != key[2]:
            return None
        _TARGETS[key] = got
    return got


def _recorded_build(kernel: KernelIR, target: str | None, compiler: str | None,
                    device: int) -> tuple[Executable, CompileInfo] | None:
    """:func:`build_kernel` through a valid selection record when the artifact is in the
    bundle or the disk cache; None otherwise (the caller takes the full path)."""
    got = _recorded(kernel, target, compiler, device)
    return got if isinstance(got, tuple) else None


class _Rendered:
    """What a valid record's look-up made before the disk cache missed: the recorded
    target and ``source`` rendered for it (the full path reuses it for that target)."""

    __slots__ = ("target", "source", "looked_up")

    def __init__(self, target: Target, source: str,
                 looked_up: tuple[str, str, str, list[str], str]) -> None:
        self.target = target
        self.source = source
        #: (arch, kind, compiler identity, flags, key) whose look-up missed
        self.looked_up = looked_up


def _recorded(kernel: KernelIR, target: str | None, compiler: str | None, device: int
              ) -> tuple[Executable, CompileInfo] | _Rendered | None:
    """:func:`_recorded_build`, or on a miss of a valid record what it rendered."""
    choice = _record_choice(target, compiler)
    if choice is None:
        return None
    tgt, keys = choice
    try:
        arch = resolve_arch(kernel, tgt.arch_on(device) if device else tgt.arch())
        kind, ident, flags = keys[arch]
        kind, ident, flags = str(kind), str(ident), [str(f) for f in flags]
    except (TypeError, KeyError, ValueError):
        return None
    t0 = time.perf_counter()
    source = tgt.renderer().render(kernel)
    key = cache_key(source, ident, flags, kind, arch)
    got = _cached(key)
    if got is None:
        return _Rendered(tgt, source, (arch, kind, ident, flags, key))
    return _load(kernel, tgt, device, got[0], key, got[1], arch, kind, flags, t0)


def _record_choice(target: str | None, compiler: str | None
                   ) -> tuple[Target, dict[str, Any]] | None:
    """The target a valid selection record names for this request (available now) and its
    compiler's key parts by architecture; None where there is no valid record."""
    got = _valid_record(target, compiler)
    return (got[0], got[1]["keys"]) if got is not None else None


def _valid_record(target: str | None, compiler: str | None
                  ) -> tuple[Target, dict[str, Any], list[Any]] | None:
    """:func:`_record_choice`'s target, the whole record and its base."""
    if not env_flag("THORK_SELECTION_RECORD", True):
        return None
    from ._memo import path_fingerprint, recall

    base = _record_base(target, compiler)
    if base is None:
        return None
    rec = recall(_RECORD, base)
    try:
        inputs = rec["inputs"]
        if any(os.environ.get(k) != v for k, v in inputs["env"].items()):
            return None
        if path_fingerprint(f[0] for f in inputs["files"]) != inputs["files"]:
            return None
        tgt = _record_target(rec["target"])
        if tgt is None or not tgt.available()[0]:
            return None
        if not isinstance(rec["keys"], dict):
            return None
    except (TypeError, KeyError, ValueError):
        return None
    return tgt, rec, base


# -- the traced record -------------------------------------------------------------------
# A front-end that can fingerprint what a kernel's trace depends on (thork._fingerprint)
# keeps, per fingerprint and requested target and compiler, a signed cache entry holding
# the traced IR and, per device architecture, the key of the artifact built from it,
# with a copy of what the selection record that chose the target and compiler was
# checked against (the selection and declared variables, the Python, the ``sys.path``
# folders' stamps, the stamps of the plugin index's files, the compiler's declared files
# and the files of Thork's own modules that traced and rendered it; those a regular
# install listed in its RECORD are covered by the folders' stamps). A fresh process's
# first launch then takes the IR and the artifact from the cache without tracing,
# rendering, hashing the source or reading ``memo.json``, while all of that is unchanged.
# Anything else, or any doubt, takes the full path. docs/cache.md "The traced record".

_TRACED_KIND = "traced"
_TRACED_FORMAT = 3
#: The packages whose loaded modules' files a traced record is checked against.
_TRACE_PACKAGES = ("thork", "thork_core")


def _traced_key(fingerprint: bytes, target: str | None, compiler: str | None) -> str:
    from ._digest import sha256

    h = sha256(b"thork traced record\0" + fingerprint)
    h.update(f"\0{target}\0{compiler}\0{_TRACED_FORMAT}".encode())
    return h.hexdigest()


def _code_files() -> list[str]:
    """The files of the loaded modules of Thork's trace and core packages that a traced
    record is checked against: all but those a regular (not editable) install put in a
    ``sys.path`` folder, which its ``RECORD`` lists (reinstalling replaces the
    distribution's metadata folder, which the folders' stamps cover)."""
    out = set()
    for name, mod in list(sys.modules.items()):
        top = name.partition(".")[0]
        if top in _TRACE_PACKAGES:
            f = getattr(mod, "__file__", None)
            if isinstance(f, str) and not _installed(f, name.count(".")
                                                      + (f.endswith("__init__.py"))):
                out.add(f)
    return sorted(out)


#: Per folder: the paths (relative, ``/``-separated) the RECORDs of its ``thork*``
#: distributions list.
_RECORDS: dict[str, frozenset[str]] = {}


def _installed(path: str, depth: int) -> bool:
    """Whether ``path`` (a module file ``depth`` folders below its ``sys.path`` folder) is
    listed by the RECORD of a ``thork*`` distribution installed in that folder."""
    parts = os.path.abspath(path).split(os.sep)
    if depth < 1 or len(parts) <= depth + 1:
        return False
    site = os.sep.join(parts[:-depth - 1])
    listed = _RECORDS.get(site)
    if listed is None:
        found: set[str] = set()
        try:
            with os.scandir(site) as it:
                metas = [e.path for e in it if e.name.startswith("thork")
                         and e.name.endswith(".dist-info")]
            for meta in metas:
                with open(os.path.join(meta, "RECORD"), encoding="utf-8") as f:
                    found.update(line.split(",", 1)[0] for line in f)
        except OSError:
            pass
        listed = _RECORDS[site] = frozenset(found)
    return "/".join(parts[-depth - 1:]) in listed


def _snapshot(rec: dict[str, Any], base: list[Any], target: str | None,
              compiler: str | None) -> list[Any]:
    """What a valid selection record ``rec`` (stored under ``base``) was checked against,
    flattened for a traced record: the request, the Python, its variables, the
    ``sys.path`` folders (their names and stamps, the installed distributions' digest),
    every file's stamp (the index's, core's selection files, the compiler's declared files,
    Thork's code files) and the target it names. The names are one string, the stamps one
    tuple of integers (:func:`_stamp_ints`): a hit reads them without a list per file."""
    from ._memo import path_fingerprint, sys_path_stamps

    env = {v: os.environ.get(v) for v in _SELECTION_VARIABLES}
    env.update(rec["inputs"]["env"])
    files = {f[0] for f in base[-1]} | {f[0] for f in rec["inputs"]["files"]}
    files.update(_code_files())
    stamps = path_fingerprint(sorted(files))
    paths = sys_path_stamps()
    return [target, compiler, sys.version, [[k, env[k]] for k in sorted(env)],
            "\0".join(p[0] for p in paths), _stamp_ints(paths), base[4],
            "\0".join(f[0] for f in stamps), _stamp_ints(stamps), list(rec["target"])]


def _stamp_ints(stamps: list[Any]) -> tuple[int, ...]:
    """``path_fingerprint``'s stamps as one flat tuple: modification time, size, ..."""
    return tuple(x for _, m, n in stamps for x in (m, n))


def _unchanged(paths: list[str], stamps: tuple[int, ...]) -> bool:
    """Whether each of ``paths`` exists with the modification time and size
    :func:`_stamp_ints` recorded (one ``stat`` each, stopping at the first change)."""
    if len(stamps) != 2 * len(paths):
        return False
    stat = os.stat
    i = 0
    for p in paths:
        try:
            st = stat(p)
        except OSError:
            return False
        if st.st_mtime_ns != stamps[i] or st.st_size != stamps[i + 1]:
            return False
        i += 2
    return True


def _current(check: list[Any], target: str | None, compiler: str | None) -> bool:
    """Whether nothing a traced record's snapshot (:func:`_snapshot`) lists has changed."""
    from ._memo import sys_path_stamps

    (c_target, c_compiler, python, env, path_names, path_stamps, installed, file_names,
     file_stamps, _) = check
    if c_target != target or c_compiler != compiler or python != sys.version:
        return False
    environ = os.environ
    for k, v in env:
        if environ.get(k) != v:
            return False
    stamps = sys_path_stamps()
    names = "\0".join(p[0] for p in stamps)
    if names != path_names:
        return False
    if _stamp_ints(stamps) != path_stamps:
        # A folder changed (a script's folder gaining files...): the same folders and
        # the same installed distributions still qualify.
        from ._memo import installed_fingerprint

        if installed_fingerprint() != installed:
            return False
    return _unchanged(file_names.split("\0") if file_names else [], file_stamps)


#: Opens a traced record's data (then ``marshal``: plain values, bytes and strings).
_TRACED_MAGIC = b"thork traced record 3\0"


def _launch_view(ir: KernelIR) -> list[Any] | None:
    """What a launch reads of ``ir`` (:meth:`KernelIR.partial`) as plain values: its name,
    each parameter as ``(name, dtype name, address space or None for a scalar, reads,
    writes, ndim, derived)``, launch bounds, cluster dims and whether it is cooperative;
    None where that is not all of it (debug mode, vector or struct parameters) or it
    does not read back equal (the record then holds the whole IR only)."""
    import marshal

    from ._dtype import DType, dt
    from ._ir import PointerType

    if ir.debug_sites is not None:
        return None
    rows = []
    for p in ir.params:
        t = p.type
        if type(t) is PointerType:
            elem, space = t.elem, t.space
        elif type(t) is DType:
            elem, space = t, None
        else:
            return None
        if getattr(dt, elem.name, None) is not elem:
            return None
        rows.append((p.name, elem.name, space, p.reads, p.writes, p.ndim, p.derived))
    view = [ir.name, rows, ir.launch_bounds, ir.cluster_dims, bool(ir.cooperative)]
    try:
        made = _partial_ir(marshal.loads(marshal.dumps(view)), b"")
    except (ValueError, TypeError, AttributeError):
        return None
    d = made.__dict__
    if (d["name"], d["params"], d["launch_bounds"], d["cluster_dims"]) \
            != (ir.name, ir.params, ir.launch_bounds, ir.cluster_dims) \
            or any(type(a) is not type(b) for a, b in (
                (d["launch_bounds"], ir.launch_bounds), (d["cluster_dims"], ir.cluster_dims))):
        return None
    return view


def _partial_ir(view: list[Any], blob: bytes) -> KernelIR:
    """The :meth:`KernelIR.partial` that ``view`` (:func:`_launch_view`) describes; the
    rest is unpickled from ``blob`` (the whole IR) when first needed."""
    import functools
    import pickle

    from ._dtype import DType, dt
    from ._ir import Param, PointerType

    name, rows, bounds, clusters, cooperative = view
    params = []
    for pname, ename, space, reads, writes, ndim, derived in rows:
        elem = getattr(dt, ename)
        if type(elem) is not DType:
            raise TypeError(f"{ename!r} is not a dtype")
        params.append(Param(pname, elem if space is None else PointerType(elem, space),
                            reads, writes, ndim, derived))
    return KernelIR.partial(name, params, bounds, clusters, cooperative,
                            functools.partial(pickle.loads, blob))


def _read_traced(data: bytes) -> dict[str, Any] | None:
    """A traced record's content (see :func:`remember_traced`), or None for another
    format. ``data`` is the payload of a signed entry of this user's private cache."""
    import marshal

    if not data.startswith(_TRACED_MAGIC):
        return None
    rec = marshal.loads(memoryview(data)[len(_TRACED_MAGIC):])
    if type(rec) is not dict or rec.get("format") != _TRACED_FORMAT:
        return None
    return rec


def traced_enabled() -> bool:
    """Whether a first build may take the traced record (``THORK_TRACED_RECORD``, on by
    default; the selection record must be on too: :func:`traced_build` checks that)."""
    return env_flag("THORK_TRACED_RECORD", True)


def traced_build(fingerprint: bytes, target: str | None, compiler: str | None
                 ) -> tuple[Executable, CompileInfo, KernelIR, Any] | None:
    """The build of a kernel whose trace has this ``fingerprint``, on device 0, from its
    traced record and the disk cache: the loaded executable, how it was built, the IR and
    the front-end's ``extra`` (what :func:`remember_traced` stored). None where there is
    no current record or no artifact (the caller traces and builds). The IR is partial
    where the record allows (:meth:`KernelIR.partial`): its body is unpickled only when
    something reads it."""
    if not env_flag("THORK_SELECTION_RECORD", True):
        return None
    try:
        import pickle

        entry = disk_cache().get(_traced_key(fingerprint, target, compiler))
        if entry is None or entry.kind != _TRACED_KIND:
            return None
        # A signed entry of this user's private cache: written by remember_traced.
        rec = _read_traced(entry.data)
        if rec is None or rec["fingerprint"] != fingerprint \
                or not _current(rec["check"], target, compiler):
            return None
        tgt = _record_target(rec["check"][-1])
        if tgt is None or not tgt.available()[0]:
            return None
        arch, kind, ident, flags, key, image = rec["archs"][tgt.arch()]
        artifact = None if image is None else Artifact(
            kind=image[0], data=image[1], entry=image[2], compiler=image[3], arch=image[4],
            log=image[5], info=image[6])
        view = rec["launch"]
        ir = pickle.loads(rec["ir"]) if view is None else _partial_ir(view, rec["ir"])
        extra = None if rec["extra"] is None else pickle.loads(rec["extra"])
        if not isinstance(ir, KernelIR):
            return None
    except Exception:  # noqa: BLE001 - a record is an optimization: the full path decides
        return None
    t0 = time.perf_counter()
    if artifact is not None:  # (signed with the record: one read for both)
        got = (artifact, "disk")
        _count("disk", key, artifact)
    else:
        cached = _cached(key)
        if cached is None:
            return None
        got = cached
    exe, info = _load(ir, tgt, 0, got[0], key, got[1], arch, kind, flags, t0)
    return exe, info, ir, extra


def remember_traced(fingerprint: bytes, ir: KernelIR, target: str | None,
                    compiler: str | None, info: CompileInfo, extra: Any = None) -> None:
    """Store (or extend by this architecture) the traced record of a build just made on
    device 0 (see above) where a valid selection record names the target and compiler it
    used; never raises. The record is ``marshal``'s plain values (the checks, the keys,
    the module image, what a launch reads of the IR: :func:`_launch_view`) with the whole
    IR and ``extra`` pickled inside, behind :data:`_TRACED_MAGIC`."""
    try:
        import marshal
        import pickle

        if info.device:
            return
        got = _valid_record(target, compiler)
        if got is None:
            return
        tgt, rec, base = got
        parts = rec["keys"].get(info.arch)
        if tgt.name != info.target or not isinstance(parts, list) or len(parts) != 3:
            return
        kind, ident, flags = parts
        if kind != info.kind or flags != info.flags \
                or cache_key(tgt.renderer().render(ir), ident, flags, kind, info.arch) \
                != info.key:
            return  # not the build the record's choice makes
        check = _snapshot(rec, base, target, compiler)
        cache = disk_cache()
        key = _traced_key(fingerprint, target, compiler)
        archs: dict[str, Any] = {}
        old = cache.get(key, count=False)
        if old is not None and old.kind == _TRACED_KIND:
            try:
                prev = _read_traced(old.data)
                if prev is not None and prev["check"] == check:
                    archs = dict(prev["archs"])
            except Exception:  # noqa: BLE001 - replaced below
                archs = {}
        # A module image travels with the record (a fresh process's hit reads one file);
        # a host library is loaded from its own checked file (the artifact's entry).
        image = None
        if info.cache != "bundle":
            art = cache.get(info.key, count=False)
            if art is None:
                return
            if art.kind != "hostlib" and not art.path:
                image = [art.kind, art.data, art.entry, art.compiler, art.arch, art.log,
                         art.info]
        archs[tgt.arch()] = [info.arch, kind, ident, flags, info.key, image]
        data = _TRACED_MAGIC + marshal.dumps({
            "format": _TRACED_FORMAT, "fingerprint": fingerprint, "check": check,
            "archs": archs, "launch": _launch_view(ir),
            "ir": pickle.dumps(ir, protocol=pickle.HIGHEST_PROTOCOL),
            "extra": None if extra is None else pickle.dumps(
                extra, protocol=pickle.HIGHEST_PROTOCOL)})
        cache.put_later(key, Artifact(kind=_TRACED_KIND, data=data, entry=ir.name,
                                      compiler=info.compiler, arch=info.arch))
    except Exception:  # noqa: BLE001 - a record is an optimization: the build stands
        return


#: Records this process has written or found current, by what :func:`_write_record`
#: decides on (the memo's generation: a re-read memo, e.g. after ``thork cache clear``,
#: checks again). A record left stale by a change during this process (an edited
#: plugin file) is rewritten by the next process, which cannot use it.
_RECORDED: set[tuple[Any, ...]] = set()


def _write_record(target: str | None, compiler: str | None, tgt: Target, comp: Compiler,
                  info: CompileInfo) -> None:
    """Record this build's choice (see above) where it qualifies; never raises."""
    try:
        from ._cache import cache_root
        from ._memo import generation

        done = (target, compiler, tgt, comp, info.kind, info.arch, cache_root(),
                generation(), *(os.environ.get(v) for v in _SELECTION_VARIABLES))
        if done in _RECORDED:
            return  # (a cold compile would spend ~0.5 ms finding it current again)
        _write_record_now(target, compiler, tgt, comp, info)
        if len(_RECORDED) > 256:
            _RECORDED.clear()
        _RECORDED.add(done)
    except Exception:  # a record is an optimization: the build stands without it
        return


def _write_record_now(target: str | None, compiler: str | None, tgt: Target,
                      comp: Compiler, info: CompileInfo) -> None:
    """:func:`_write_record`'s work."""
    try:
        declared = comp.key_inputs()
        if declared is None or not env_flag("THORK_SELECTION_RECORD", True):
            return
        names, paths = declared
        ref = _first_choice(target, compiler, tgt, comp)
        if ref is None:
            return
        base = _record_base(target, compiler)
        if base is None:
            return
        from ._memo import path_fingerprint, recall, remember

        files = path_fingerprint(sorted({str(p) for p in paths}))
        if len(files) != len(set(paths)):
            return  # a declared file is missing: nothing to validate against
        inputs = {"env": {str(n): os.environ.get(str(n)) for n in names}, "files": files}
        old = recall(_RECORD, base)
        keys = dict(old["keys"]) if isinstance(old, dict) and old.get("target") == ref \
            and old.get("inputs") == inputs and isinstance(old.get("keys"), dict) else {}
        entry = [info.kind, *key_parts(comp, info.kind, info.arch)]
        if keys.get(info.arch) == entry and len(keys) == len(old["keys"]):
            return
        keys[info.arch] = entry
        remember(_RECORD, base, {"target": ref, "inputs": inputs, "keys": keys})
    except Exception:  # a record is an optimization: the build stands without it
        return


def _first_choice(target: str | None, compiler: str | None, tgt: Target, comp: Compiler
                  ) -> list[Any] | None:
    """The record's reference to ``tgt`` (entry point, position, name) when the selection
    rules took the first candidate for both the target and the compiler (no fallback
    past an unavailable one); None otherwise. The candidates and their order are
    ``_selection``'s, the ones :func:`~thork_core._selection.pick_target` and
    :func:`~thork_core._selection.pick_compiler` walked."""
    reg = plugins()
    with reg._lock:
        targets = reg._items("targets")
        compilers = reg._items("compilers")
    mine = [i for i in targets if i.obj is tgt]
    if len(mine) != 1 or not mine[0].plugin.direct:
        return None
    item = mine[0]
    named, order = target_candidates(targets, target)
    if named is None and order[0] is not item:
        return None
    named, _, candidates = compiler_candidates(compilers, compiler, tgt)
    if named is None and (not candidates or candidates[0].obj is not comp):
        return None
    pos = [i for i in item.plugin.items.get("targets", ())].index(item)
    return [item.plugin.value, pos, item.name]
