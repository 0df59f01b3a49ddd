"""Thork compiler plugin: NVRTC (``cuda.bindings.nvrtc``), the default compiler."""

from __future__ import annotations

from ._compiler import NvrtcCompiler

__all__ = ["NvrtcCompiler"]
__version__ = "0.1.0"
