"""Thork target plugin: run kernels on the CPU, compiled as host C++ (OpenMP blocks).

Public names load on first use (PEP 562): every Thork process imports this package to
register the plugin, and most never touch the CPU target.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._compiler import HostCompiler
    from ._renderer import CppRenderer
    from ._target import CpuExecutable, CpuTarget

__all__ = ["CpuExecutable", "CpuTarget", "CppRenderer", "HostCompiler"]
__version__ = "0.1.0"

_EXPORTS = {"HostCompiler": "._compiler", "CppRenderer": "._renderer",
            "CpuExecutable": "._target", "CpuTarget": "._target"}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'thork_cpu' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
