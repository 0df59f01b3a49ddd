"""A prepared launch: one kernel, fixed geometry and scalar values, pointers per call.

Front-ends that validated their arguments once (fkl-compose's hot path, replay loops)
prepare a :class:`PreparedLaunch` and then call it with nothing but array addresses and
a stream. Each one owns its :class:`~thork_core.ArgumentPack`, so two prepared launches of
the same executable with different scalar values never overwrite each other's slots.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._target import ArgumentPack, Dim3

if TYPE_CHECKING:
    from ._target import Executable

__all__ = ["PreparedLaunch"]


class PreparedLaunch:
    """``launch(pointers, stream)``: write the pointer arguments and launch; no checks.

    ``values`` holds one entry per kernel parameter: a
    :func:`~thork_core._binding.scalar_value` result for each scalar (written once, here)
    and anything for each pointer (replaced on every call). ``pointers`` are device (or, on
    the CPU target, host) addresses in parameter order; ``stream`` a raw CUDA stream
    handle (0: the legacy default stream; ignored by the CPU target).
    """

    __slots__ = ("exe", "grid", "block", "shared_mem", "pack", "_pointer_slots")

    def __init__(self, exe: Executable, grid: Dim3, block: Dim3, values: Sequence[Any],
                 shared_mem: int = 0) -> None:
        params = exe.kernel.params
        if len(values) != len(params):
            raise ValueError(f"{exe.kernel.name}: {len(params)} values expected for a "
                             f"prepared launch, got {len(values)}")
        self.exe = exe
        self.grid = grid
        self.block = block
        self.shared_mem = shared_mem
        self.pack = ArgumentPack(params)
        for slot, is_pointer, value in zip(self.pack.slots, self.pack.pointer, values):
            slot.value = 0 if is_pointer else value
        self._pointer_slots = [s for s, p in zip(self.pack.slots, self.pack.pointer) if p]

    def __call__(self, pointers: Sequence[int], stream: int = 0) -> None:
        for slot, ptr in zip(self._pointer_slots, pointers):
            slot.value = ptr
        self.exe._run(self.grid, self.block, stream, self.shared_mem, self.pack.address)
