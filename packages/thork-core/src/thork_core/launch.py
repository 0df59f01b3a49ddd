"""Launching loaded kernels: geometry checks, the per-launch argument pack and prepared
launches (fixed geometry and scalars, only pointers per call) for front-ends that check
their arguments once.

:meth:`Executable.launch <thork_core.plugin.Executable.launch>` is the checked path;
:meth:`Executable.prepare <thork_core.plugin.Executable.prepare>` returns a
:class:`PreparedLaunch`; :func:`guarded_call_base` is the native hot path's base class
where the C extension is available.
"""

from __future__ import annotations

from ._binding import check_arg_count
from ._launch import PreparedLaunch, guarded_call_base
from ._target import ArgumentPack, Dim3, normalize_dims

__all__ = ["ArgumentPack", "Dim3", "PreparedLaunch", "check_arg_count", "guarded_call_base",
           "normalize_dims"]
