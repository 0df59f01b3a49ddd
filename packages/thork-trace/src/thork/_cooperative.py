"""Cooperative launches: a kernel with a grid barrier needs every block resident at once.

The GPU target launches such a kernel with ``cuLaunchCooperativeKernel`` and reports how
many blocks fit (``max_coresident_blocks``: the occupancy calculator times the SMs); the
CPU target runs one OS thread per block, within the limits below. This check runs before
the launch so that the error names the kernel, the grid and the limit.
"""

from __future__ import annotations

from typing import Any

from thork_core import KernelIR, LaunchError

__all__ = ["check_coresident", "CPU_MAX_BLOCKS", "CPU_MAX_THREADS"]

#: Blocks of a cooperative launch on the CPU target (one OS thread each).
CPU_MAX_BLOCKS = 256
#: Threads of a cooperative launch on the CPU target (each a fiber with a 64 KiB stack).
CPU_MAX_THREADS = 65536


def check_coresident(exe: Any, ir: KernelIR, grid: tuple[int, int, int],
                     block: tuple[int, int, int], shared_mem: int) -> None:
    """Raise :class:`LaunchError` when the grid cannot be resident all at once."""
    nblocks = grid[0] * grid[1] * grid[2]
    nthreads = block[0] * block[1] * block[2]
    probe = getattr(exe, "max_coresident_blocks", None)
    if probe is None:
        from thork_core.plugin import CudaExecutable

        if isinstance(exe, CudaExecutable):  # a CUDA target without cooperative launches
            raise LaunchError(
                f"{ir.name}: uses tk.grid_sync(), which needs a cooperative launch "
                f"(cuLaunchCooperativeKernel); {type(exe).__name__} launches otherwise: run "
                "it on the 'gpu' or the 'cpu' target")
    if probe is not None:
        limit = int(probe(block, shared_mem))
        where = (f"the GPU holds at most {limit} blocks of {nthreads} threads "
                 f"({shared_mem} dynamic shared bytes) at once")
    else:
        limit = min(CPU_MAX_BLOCKS, CPU_MAX_THREADS // max(nthreads, 1))
        where = (f"the CPU target runs at most {CPU_MAX_BLOCKS} blocks and "
                 f"{CPU_MAX_THREADS} threads at once")
    if nblocks > limit:
        raise LaunchError(
            f"{ir.name}: uses tk.grid_sync(), so all {nblocks} blocks of grid {grid} must be "
            f"resident at once, but {where}; launch at most {limit} blocks (loop over the "
            "work inside the kernel)")
