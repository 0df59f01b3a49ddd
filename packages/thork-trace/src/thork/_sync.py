"""Barriers and memory fences: ``tk.syncthreads()``, ``tk.syncwarp()``, ``tk.threadfence*()``.

``syncthreads`` waits until every (not yet returned) thread of the block reached it, and
makes their shared- and global-memory writes visible to each other. It must be reached
by all threads of the block or none (a branch around it must be uniform per block).
"""

from __future__ import annotations

from typing import Any

from thork_core import dt
from thork_core.ir import BlockReduce, Sync

from ._trace import Value, _to, as_value, current

__all__ = [
    "syncthreads", "syncwarp", "threadfence", "threadfence_block", "threadfence_system",
    "syncthreads_count", "syncthreads_and", "syncthreads_or", "FULL_MASK", "grid_sync",
    "this_grid", "Grid",
]

#: All 32 lanes of a warp.
FULL_MASK = 0xFFFFFFFF


def syncthreads() -> None:
    """Block-wide barrier (CUDA ``__syncthreads``)."""
    current().emit(Sync("syncthreads"))


def syncwarp(mask: Any = FULL_MASK) -> None:
    """Warp barrier for the lanes in ``mask`` (CUDA ``__syncwarp``)."""
    m = _to(as_value(mask), dt.uint32)
    current().emit(Sync("syncwarp", m))


def threadfence_block() -> None:
    """Order this thread's memory accesses as seen by its block (``__threadfence_block``)."""
    current().emit(Sync("fence_block"))


def threadfence() -> None:
    """Order this thread's memory accesses as seen by the whole device (``__threadfence``)."""
    current().emit(Sync("fence"))


def threadfence_system() -> None:
    """Order accesses as seen by the device, the host and peers (``__threadfence_system``)."""
    current().emit(Sync("fence_system"))


def _block_reduce(op: str, pred: Any) -> Value:
    p = _to(as_value(pred), dt.bool)
    t = dt.int32 if op == "count" else dt.bool
    return Value(current().temp(BlockReduce(t, op, p)))


def syncthreads_count(pred: Any) -> Value:
    """Barrier that returns how many threads of the block had ``pred`` true (int32)."""
    return _block_reduce("count", pred)


def syncthreads_and(pred: Any) -> Value:
    """Barrier that returns whether ``pred`` was true in every thread of the block."""
    return _block_reduce("and", pred)


def syncthreads_or(pred: Any) -> Value:
    """Barrier that returns whether ``pred`` was true in any thread of the block."""
    return _block_reduce("or", pred)




def grid_sync() -> None:
    """Grid-wide barrier (cooperative groups' ``this_grid().sync()``): every thread of the
    launch waits here until all have arrived; writes before it are visible to every
    thread after it. A kernel using it is launched cooperatively: all its blocks must be
    resident at once (checked at launch, with an error naming the limit), and every
    thread of every block must reach each grid barrier (none may return before it)."""
    current().emit(Sync("grid"))


class Grid:
    """The launch's grid as a cooperative group: ``tk.this_grid().sync()``."""

    __slots__ = ()

    def sync(self) -> None:
        """See :func:`grid_sync`."""
        grid_sync()

    def __repr__(self) -> str:
        return "<tk.this_grid()>"


def this_grid() -> Grid:
    """The grid group (CUDA's ``cooperative_groups::this_grid()``)."""
    return Grid()
