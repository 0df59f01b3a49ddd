"""The hot path: pre-converted kernel arguments and one check-free launch.

A :class:`Launcher` belongs to one (pipe, input shape). Scalar values are converted once
into a core :class:`~thork_core.PreparedLaunch`; a call passes the
array addresses and makes one foreign call: the driver's ``cuLaunchKernel`` on the GPU,
the kernel library's entry on the CPU. No synchronization.
"""

from __future__ import annotations

from typing import Any

from thork_core import Executable, PointerType
from thork_core.plugin import scalar_value

__all__ = ["Launcher", "make_launcher"]


class Launcher:
    """A prepared launch of one executable, grid and set of runtime values."""

    __slots__ = ("prepared", "launch")

    def __init__(self, exe: Executable, kernel: Any, args: list[Any], grid: tuple[int, ...],
                 block: tuple[int, ...]) -> None:
        values = [0 if isinstance(p.type, PointerType) else scalar_value(args[i], p, kernel)
                  for i, p in enumerate(kernel.params)]
        self.prepared = exe.prepare(tuple(grid), tuple(block), values)  # type: ignore[arg-type]
        #: ``launch(pointers, stream)``: array addresses in parameter order, a raw stream
        #: (the prepared launch's fastest entry: a C function where core built one).
        self.launch = self.prepared.call


def make_launcher(exe: Executable, kernel: Any, args: list[Any], grid: tuple[int, ...],
                  block: tuple[int, ...]) -> Launcher | None:
    """A :class:`Launcher` when ``exe`` has core's launcher (core's executables do)."""
    if getattr(exe, "launcher", None) is None:
        return None
    return Launcher(exe, kernel, args, grid, block)
