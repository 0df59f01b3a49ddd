"""The one build path, shared by every front-end: kernel IR → rendered source → cache key
→ disk cache or compile → loaded :class:`~thork_core.plugin.Executable`.

``build_kernel(ir, target, compiler)`` is all a front-end calls; it keeps its own
in-memory level (it knows its call signatures). :func:`choose` resolves names to plugin
objects by the selection rules; :func:`compile_artifact` stops before loading (no GPU
needed); :func:`key_parts` is a compiler's part of the cache key. :func:`precompile` and
:func:`recording` make ahead-of-time bundles (:func:`write_bundle`; read through
``THORK_CACHE_BUNDLE``, see ``docs/scale-out.md``); :func:`build_stats` counts compiles.
:func:`traced_build` / :func:`remember_traced` read and write a kernel's traced record
(keyed by its front-end's fingerprint; ``docs/cache.md``); :func:`traced_enabled` says
whether ``THORK_TRACED_RECORD`` allows it. :func:`host_extension` compiles a plugin's C or
C++ extension module through the same signed disk cache as core's native launcher
(:func:`python_flags`: the flags every such build needs).
"""

from __future__ import annotations

from ._build import (
    CompileInfo,
    build_kernel,
    build_stats,
    choose,
    compile_artifact,
    key_parts,
    precompile,
    recording,
    remember_traced,
    traced_build,
    traced_enabled,
)
from ._bundle import bundle_get, bundle_path, make_bundle, write_bundle
from ._cache import DiskCache, cache_dir, cache_key, disk_cache
from ._extension import host_extension, python_flags

__all__ = [
    "CompileInfo", "DiskCache", "build_kernel", "build_stats", "bundle_get", "bundle_path",
    "cache_dir", "cache_key", "choose", "compile_artifact", "disk_cache", "key_parts",
    "host_extension", "make_bundle", "precompile", "python_flags", "recording",
    "remember_traced", "traced_build", "traced_enabled", "write_bundle",
]
