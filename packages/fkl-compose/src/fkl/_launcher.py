"""The hot path: pre-converted kernel arguments and one check-free launch.

A :class:`Launcher` belongs to one (pipe, input shape). Scalar values are converted once;
a call writes the array addresses and goes through core's
:meth:`~thork_core.Executable.launch_packed`: one driver call on the GPU, one C call on
the CPU, no synchronization.
"""

from __future__ import annotations

from typing import Any

from thork_core import Executable, PointerType
from thork_core._binding import scalar_value

__all__ = ["Launcher", "make_launcher"]


class Launcher:
    """Pre-converted arguments for one executable, grid and set of runtime values."""

    __slots__ = ("_exe", "_values", "_pointer_pos", "_grid", "_block")

    def __init__(self, exe: Executable, kernel: Any, args: list[Any], grid: tuple[int, ...],
                 block: tuple[int, ...]) -> None:
        self._exe = exe
        self._values: list[Any] = []
        self._pointer_pos: list[int] = []
        for i, p in enumerate(kernel.params):
            if isinstance(p.type, PointerType):
                self._values.append(0)
                self._pointer_pos.append(i)
            else:
                self._values.append(scalar_value(args[i], p, kernel))
        self._grid = tuple(grid)
        self._block = tuple(block)

    def launch(self, pointers: list[int], stream: int) -> None:
        """Write the array addresses (in parameter order) and launch on ``stream``."""
        values = self._values
        for pos, ptr in zip(self._pointer_pos, pointers, strict=False):
            values[pos] = ptr
        self._exe.launch_packed(self._grid, self._block, values, stream=stream)  # type: ignore[arg-type]


def make_launcher(exe: Executable, kernel: Any, args: list[Any], grid: tuple[int, ...],
                  block: tuple[int, ...]) -> Launcher | None:
    """A :class:`Launcher` when ``exe`` has an argument pack (core's executables do)."""
    if getattr(exe, "args", None) is None:
        return None
    return Launcher(exe, kernel, args, grid, block)
