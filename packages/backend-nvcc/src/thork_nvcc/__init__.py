"""Thork compiler plugin: nvcc for cubin, PTX and host launch libraries (``hostlib``).

Also registers the ``gpu-hostlib`` target, which launches kernels through the library's
C entry with ctypes (seed 004's path). Heavy parts import lazily.
"""

from __future__ import annotations

from ._compiler import HOST_ENTRY, NvccCompiler, host_wrapper, supported_archs
from ._toolkit import Toolkit, find_toolkit, toolkit_from_nvcc, wheel_nvcc

__all__ = [
    "HOST_ENTRY", "NvccCompiler", "Toolkit", "find_toolkit", "host_wrapper",
    "supported_archs", "toolkit_from_nvcc", "wheel_nvcc",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # The target imports core's GPU module; load it only when someone asks for it.
    if name in ("HostlibTarget", "HostlibExecutable"):
        from . import _hostlib

        return getattr(_hostlib, name)
    raise AttributeError(f"module 'thork_nvcc' has no attribute {name!r}")
