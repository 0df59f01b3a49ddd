"""The hot path: pre-packed kernel arguments and one direct launch.

A :class:`Launcher` belongs to one (pipe, input shape). It owns one ctypes slot per kernel
parameter and the ``void*`` array pointing at them; the scalar slots are written once,
so a call writes the array pointers and makes one driver call (GPU) or one C call (CPU).
It relies on the loaded executables of core's GPU and CPU targets (their function
handle); for any other target the pipe falls back to ``Executable.launch``.
"""

from __future__ import annotations

import ctypes
from typing import Any

from thork_core import Executable, PointerType
from thork_core._binding import scalar_ctype, scalar_value

__all__ = ["Launcher", "make_launcher"]


class Launcher:
    """Pre-packed arguments for one executable, grid and set of runtime values."""

    __slots__ = ("_slots", "_argv", "_argv_addr", "_pointer_pos", "_call", "_grid", "_block",
                 "_fn", "_gpu", "_by_ctypes", "_extra")

    def __init__(self, exe: Executable, kernel: Any, args: list[Any], grid: tuple[int, ...],
                 block: tuple[int, ...], gpu: bool) -> None:
        self._slots: list[Any] = []
        self._pointer_pos: list[int] = []
        for i, p in enumerate(kernel.params):
            if isinstance(p.type, PointerType):
                self._slots.append(ctypes.c_void_p())
                self._pointer_pos.append(i)
            else:
                slot = scalar_ctype(p.type)()
                slot.value = scalar_value(args[i], p, kernel)
                self._slots.append(slot)
        self._argv = (ctypes.c_void_p * max(len(self._slots), 1))(
            *[ctypes.addressof(s) for s in self._slots])
        self._argv_addr = ctypes.addressof(self._argv)
        self._gpu = gpu
        if gpu:
            # Core's GPU executable picked cuLaunchKernel from cuda-bindings (returns a
            # tuple) or ctypes (returns the error code, takes the raw function handle).
            self._by_ctypes = bool(getattr(exe, "_by_ctypes", False))
            self._fn = getattr(exe, "_function_arg", exe._function)  # type: ignore[attr-defined]
            self._call = exe._launch_fn  # type: ignore[attr-defined]
            self._grid, self._block = grid, block
            self._extra = None if self._by_ctypes else 0
        else:
            self._by_ctypes = False
            self._fn = exe._fn  # type: ignore[attr-defined]
            self._call = None
            self._grid = (ctypes.c_uint * 3)(*grid)
            self._block = (ctypes.c_uint * 3)(*block)
            # The CPU entry may take the dynamic shared-memory size as a 4th argument.
            self._extra = (0,) if len(getattr(self._fn, "argtypes", None) or ()) >= 4 else ()

    def launch(self, pointers: list[int], stream: int) -> None:
        """Write the array addresses (in parameter order) and launch."""
        slots = self._slots
        for pos, ptr in zip(self._pointer_pos, pointers, strict=False):
            slots[pos].value = ptr
        if self._gpu:
            g, b = self._grid, self._block
            res = self._call(self._fn, g[0], g[1], g[2], b[0], b[1], b[2], 0, stream,
                             self._argv_addr, self._extra)
            err = res if self._by_ctypes else res[0]
            if int(err) != 0:
                from thork_core import _cuda

                _cuda.check((err,), "launching an fkl kernel")
        else:
            rc = self._fn(self._argv, self._grid, self._block, *self._extra)
            if rc != 0:
                from thork_core import LaunchError

                raise LaunchError(f"fkl kernel failed on the CPU target (code {rc})")


def make_launcher(exe: Executable, kernel: Any, args: list[Any], grid: tuple[int, ...],
                  block: tuple[int, ...]) -> Launcher | None:
    """A :class:`Launcher` when ``exe`` is one of core's GPU/CPU executables, else None."""
    if hasattr(exe, "_function") and hasattr(exe, "_launch_fn"):
        return Launcher(exe, kernel, args, grid, block, gpu=True)
    if hasattr(exe, "_fn") and hasattr(exe, "_argv"):
        return Launcher(exe, kernel, args, grid, block, gpu=False)
    return None
