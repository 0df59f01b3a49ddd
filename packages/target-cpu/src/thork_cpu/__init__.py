"""Thork target plugin: run kernels on the CPU, compiled as host C++ (OpenMP blocks)."""

from __future__ import annotations

from ._compiler import HostCompiler
from ._renderer import CppRenderer
from ._target import CpuExecutable, CpuTarget

__all__ = ["CpuExecutable", "CpuTarget", "CppRenderer", "HostCompiler"]
__version__ = "0.1.0"
