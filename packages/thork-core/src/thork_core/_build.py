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
from dataclasses import dataclass, field
from typing import Any

from ._artifact import Artifact
from ._cache import cache_key, disk_cache
from ._compiler import Compiler
from ._errors import ArchError, CompileError
from ._ir import KernelIR
from ._plugins import plugins
from ._target import Executable, Target

__all__ = ["CompileInfo", "build", "build_kernel", "build_stats", "choose", "compile_artifact",
           "key_parts", "precompile", "recording", "resolve_arch"]

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


@dataclass
class CompileInfo:
    """How a kernel was built: ``cache`` is ``disk`` (hit), ``bundle`` (from the
    ahead-of-time bundle ``THORK_CACHE_BUNDLE`` names) or ``compiled`` (miss);
    times are milliseconds; ``attributes`` are the target's resource report
    (registers, shared and local bytes on the GPU)."""

    target: str
    compiler: str
    arch: str
    kind: str
    flags: list[str]
    cache: str
    key: str
    compile_ms: float
    load_ms: float
    log: str = ""
    fallback: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)
    #: The CUDA device it was loaded on (0 for targets without devices).
    device: int = 0


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
    kernel needs a newer GPU (``mma``: sm_80)."""
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
            f"kernel '{kernel.name}' uses tensor-core mma or cp.async, which need sm_{need} "
            f"or newer; cannot compile it for {arch}")


def _fetch(
    kernel: KernelIR, source: str, compiler: Compiler, kind: str, arch: str, ident: str,
    flags: list[str],
) -> tuple[Artifact, str, str]:
    """The artifact, its key and where it came from: ``bundle``, ``disk`` or
    ``compiled``. ``arch`` has been through :func:`resolve_arch`."""
    key = cache_key(source, ident, flags, kind, arch)
    if os.environ.get("THORK_CACHE_BUNDLE"):  # (else a disk-cache hit never imports _bundle)
        from ._bundle import bundle_get

        artifact = bundle_get(key)
        if artifact is not None:
            _count("bundle", key, artifact)
            return artifact, key, "bundle"
    cache = disk_cache()
    artifact = cache.get(key)
    if artifact is not None:
        _count("disk", key, artifact)
        return artifact, key, "disk"
    with cache.lock(key):  # processes building the same key compile it once
        artifact = cache.get(key)
        if artifact is not None:
            _count("disk", key, artifact)
            return artifact, key, "disk"
        artifact = compiler.compile(source, entry=kernel.name, kind=kind, arch=arch)
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
    tgt, comp = choose(target, compiler)
    return build(kernel, tgt.renderer().render(kernel), tgt, comp, device)


def build(
    kernel: KernelIR, source: str, target: Target, compiler: Compiler, device: int = 0,
) -> tuple[Executable, CompileInfo]:
    """:func:`build_kernel` for ``source`` already rendered for ``target``."""
    arch = resolve_arch(kernel, target.arch_on(device) if device else target.arch())
    kind = next(k for k in target.consumes if k in compiler.produces)
    t0 = time.perf_counter()
    ident, flags = key_parts(compiler, kind, arch)
    artifact, key, how = _fetch(kernel, source, compiler, kind, arch, ident, flags)
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
