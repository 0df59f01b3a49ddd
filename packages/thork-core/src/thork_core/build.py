"""The one build path, shared by every front-end: kernel IR → rendered source → cache key
→ disk cache or compile → loaded :class:`~thork_core.plugin.Executable`.

``build_kernel(ir, target, compiler)`` is all a front-end calls; it keeps its own
in-memory level (it knows its call signatures). :func:`choose` resolves names to plugin
objects by the selection rules; :func:`compile_artifact` stops before loading (no GPU
needed); :func:`key_parts` is a compiler's part of the cache key.
"""

from __future__ import annotations

from ._build import CompileInfo, build_kernel, choose, compile_artifact, key_parts
from ._cache import DiskCache, cache_dir, cache_key, disk_cache

__all__ = [
    "CompileInfo", "DiskCache", "build_kernel", "cache_dir", "cache_key", "choose",
    "compile_artifact", "disk_cache", "key_parts",
]
