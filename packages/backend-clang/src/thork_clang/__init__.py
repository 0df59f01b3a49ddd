"""Thork compiler plugin: clang++ in CUDA mode, with a silent fallback to nvcc."""

from __future__ import annotations

from ._compiler import ClangCompiler
from ._install import ClangInstall, find_clang
from ._preamble import PREAMBLE

__all__ = ["ClangCompiler", "ClangInstall", "PREAMBLE", "find_clang"]
__version__ = "0.1.0"
