"""Device memory from the driver's stream-ordered pool, and pinned host staging.

Device allocations use ``cuMemAllocAsync`` on the device's default memory pool with its
release threshold raised, so freed blocks stay cached in the pool instead of going back
to the OS: allocation after warm-up costs about a microsecond. Host staging for NumPy
arguments goes through one growing page-locked buffer, copied in chunks so that the
host copy of one chunk overlaps the DMA of the previous one.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

from ._cuda import check, driver

__all__ = ["DevicePool", "PinnedStaging", "device_pool", "pinned_staging"]

#: Bytes per staging chunk: small enough to overlap copies, large enough to amortize calls.
CHUNK = 1 << 20
#: Threads copying between NumPy arrays and pinned memory.
_COPY_THREADS = 4


class DevicePool:
    """Stream-ordered device allocations for one device."""

    def __init__(self, ordinal: int) -> None:
        drv = driver()
        self.ordinal = ordinal
        dev = check(drv.cuDeviceGet(ordinal), "cuDeviceGet")
        self._pool = check(drv.cuDeviceGetDefaultMemPool(dev), "cuDeviceGetDefaultMemPool")
        keep_all = drv.cuuint64_t(2**64 - 1)
        check(
            drv.cuMemPoolSetAttribute(
                self._pool, drv.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, keep_all
            ),
            "cuMemPoolSetAttribute",
        )

    def alloc(self, nbytes: int, stream: int) -> int:
        """Allocate ``nbytes`` (at least 1) ordered on ``stream``; return the address."""
        ptr = check(driver().cuMemAllocAsync(max(nbytes, 1), stream), "cuMemAllocAsync")
        return int(ptr)

    def free(self, ptr: int, stream: int) -> None:
        check(driver().cuMemFreeAsync(ptr, stream), "cuMemFreeAsync")


class PinnedStaging:
    """A page-locked host buffer that grows to the largest request and is reused."""

    def __init__(self) -> None:
        self._ptr = 0
        self._size = 0
        self._events: list[Any] = []
        self._threads: Any = None

    def buffer(self, nbytes: int) -> int:
        """Address of at least ``nbytes`` of pinned memory (previous contents undefined)."""
        if nbytes > self._size:
            drv = driver()
            if self._ptr:
                check(drv.cuMemFreeHost(self._ptr), "cuMemFreeHost")
                self._ptr, self._size = 0, 0
            size = max(nbytes, 8 << 20)
            self._ptr = int(check(drv.cuMemHostAlloc(size, 0), "cuMemHostAlloc"))
            self._size = size
        return self._ptr

    def event(self, i: int) -> Any:
        """The ``i``-th reusable event (created on demand, timing disabled)."""
        drv = driver()
        while len(self._events) <= i:
            flags = drv.CUevent_flags.CU_EVENT_DISABLE_TIMING
            self._events.append(check(drv.cuEventCreate(flags), "cuEventCreate"))
        return self._events[i]

    def _pool(self) -> Any:
        # Host copies into pinned memory run in threads (NumPy releases the GIL for raw
        # copies): one core copies ~10 GB/s, well under what PCIe takes.
        if self._threads is None:
            from concurrent.futures import ThreadPoolExecutor

            self._threads = ThreadPoolExecutor(max_workers=_COPY_THREADS,
                                               thread_name_prefix="thork-staging")
        return self._threads

    def upload(self, host: Any, pinned: int, dst: int, stream: int) -> None:
        """Copy NumPy array ``host`` to device ``dst`` through pinned memory at ``pinned``.

        Chunks are copied into pinned memory in parallel; each chunk's DMA is queued as
        soon as its host copy is done, so transfers overlap the remaining copies.
        """
        import numpy as np

        drv = driver()
        src = np.ascontiguousarray(host).reshape(-1).view(np.uint8)
        n = src.nbytes
        stage = _host_view(pinned, n)
        chunks = [(off, min(CHUNK, n - off)) for off in range(0, n, CHUNK)]

        def copy(chunk: tuple[int, int]) -> tuple[int, int]:
            off, k = chunk
            stage[off:off + k] = src[off:off + k]
            return chunk

        done = map(copy, chunks) if len(chunks) == 1 else self._pool().map(copy, chunks)
        for off, k in done:
            check(drv.cuMemcpyHtoDAsync(dst + off, pinned + off, k, stream),
                  "cuMemcpyHtoDAsync")

    def download_start(self, src: int, pinned: int, nbytes: int, stream: int,
                       first_event: int) -> int:
        """Queue device→pinned copies in chunks, each followed by an event; return count."""
        drv = driver()
        count = 0
        for off in range(0, nbytes, CHUNK):
            k = min(CHUNK, nbytes - off)
            check(drv.cuMemcpyDtoHAsync(pinned + off, src + off, k, stream),
                  "cuMemcpyDtoHAsync")
            check(drv.cuEventRecord(self.event(first_event + count), stream), "cuEventRecord")
            count += 1
        return count

    def download_finish(self, host: Any, pinned: int, first_event: int) -> None:
        """Copy pinned memory into NumPy array ``host``, each chunk once its DMA is done."""
        import numpy as np

        drv = driver()
        dst = host.reshape(-1).view(np.uint8)
        n = dst.nbytes
        stage = _host_view(pinned, n)
        chunks = list(enumerate(range(0, n, CHUNK)))

        def copy(item: tuple[int, int]) -> None:
            i, off = item
            k = min(CHUNK, n - off)
            check(drv.cuEventSynchronize(self.event(first_event + i)), "cuEventSynchronize")
            dst[off:off + k] = stage[off:off + k]

        if len(chunks) == 1:
            copy(chunks[0])
        else:
            for event_index in range(first_event, first_event + len(chunks)):
                self.event(event_index)  # create events here, not racing in threads
            list(self._pool().map(copy, chunks))


def _host_view(address: int, nbytes: int) -> Any:
    """A uint8 NumPy view of ``nbytes`` of host memory at ``address``."""
    import numpy as np

    return np.ctypeslib.as_array((ctypes.c_uint8 * max(nbytes, 1)).from_address(address))


@functools.cache
def device_pool(ordinal: int = 0) -> DevicePool:
    return DevicePool(ordinal)


@functools.cache
def pinned_staging() -> PinnedStaging:
    return PinnedStaging()
