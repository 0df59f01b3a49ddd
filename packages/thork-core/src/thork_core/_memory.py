"""Device memory from the driver's stream-ordered pool, and pinned host staging.

Device allocations use ``cuMemAllocAsync`` on the device's default memory pool with its
release threshold raised, so freed blocks stay cached in the pool instead of going back
to the OS: allocation after warm-up costs about a microsecond. Host staging for NumPy
arguments goes through page-locked buffers lent to one launch at a time (:func:`staging`),
copied in chunks so that the host copy of one chunk overlaps the DMA of the previous one.
:func:`pinned_empty` gives users pinned NumPy arrays, which launches copy directly.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import math
import threading
from collections.abc import Iterator
from typing import Any

from ._cuda import check, driver, function_address
from ._errors import LaunchError

__all__ = [
    "DevicePool", "PinnedBlock", "PinnedStaging", "device_pool", "pinned_base", "pinned_empty",
    "staging",
]

#: Bytes per staging chunk: small enough to overlap copies, large enough to amortize calls.
CHUNK = 1 << 20
#: ``CU_MEMHOSTALLOC_PORTABLE``: pinned for every context, so one staging buffer serves
#: launches on any device (h-multi).
_PORTABLE = 1
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

        # The pool calls go to libcuda through private ctypes prototypes (~0.3 us a call,
        # against ~2 us through cuda-bindings' checked wrappers): fkl's allocating
        # pipe(x) and every DeviceArray pay them.
        self._alloc: Any
        self._free: Any
        try:
            self._alloc = _ALLOC(function_address("cuMemAllocAsync"))
            self._free = _FREE_ASYNC(function_address("cuMemFreeAsync"))
        except LaunchError:
            self._alloc = self._free = None

    def alloc(self, nbytes: int, stream: int) -> int:
        """Allocate ``nbytes`` (at least 1) ordered on ``stream``; return the address."""
        if self._alloc is None:
            return int(check(driver().cuMemAllocAsync(max(nbytes, 1), stream),
                             "cuMemAllocAsync"))
        ptr = ctypes.c_uint64()
        err = self._alloc(ctypes.byref(ptr), max(nbytes, 1), stream or None)
        if err:
            check((driver().CUresult(err),), f"cuMemAllocAsync of {nbytes} bytes")
        return ptr.value

    def free(self, ptr: int, stream: int) -> None:
        """Return ``ptr`` to the pool, ordered on ``stream``."""
        if self._free is None:
            check(driver().cuMemFreeAsync(ptr, stream), "cuMemFreeAsync")
            return
        err = self._free(ptr, stream or None)
        if err:
            check((driver().CUresult(err),), "cuMemFreeAsync")


    # -- accounting (h-debug: the pool tests of docs/debug-mode.md) -----------------------
    def _attribute(self, name: str) -> int:
        drv = driver()
        attr = getattr(drv.CUmemPool_attribute, name)
        return int(check(drv.cuMemPoolGetAttribute(self._pool, attr), "cuMemPoolGetAttribute"))

    def used_bytes(self) -> int:
        """Bytes of the pool allocated and not yet freed (frees count once the stream they
        were ordered on has reached them: synchronize first)."""
        return self._attribute("CU_MEMPOOL_ATTR_USED_MEM_CURRENT")

    def reserved_bytes(self) -> int:
        """Bytes the pool holds from the device (in use, or cached for reuse)."""
        return self._attribute("CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT")

    def trim(self, keep: int = 0) -> None:
        """Give cached memory back to the device, keeping at least ``keep`` bytes
        (``cuMemPoolTrimTo``; memory in use is never released)."""
        check(driver().cuMemPoolTrimTo(self._pool, keep), "cuMemPoolTrimTo")


_ALLOC = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t,
                          ctypes.c_void_p)
_FREE_ASYNC = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64, ctypes.c_void_p)


class PinnedStaging:
    """A page-locked host buffer of ``size`` bytes and its reusable events: one staged
    launch's scratch space. :func:`staging` lends one to one call at a time."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.address = int(check(driver().cuMemHostAlloc(max(size, 1), _PORTABLE),
                                 "cuMemHostAlloc"))
        # Events belong to the context they were created in: one list per context (a
        # staged launch on device 1 must not record an event made on device 0).
        self._events: dict[int, list[Any]] = {}

    def close(self) -> None:
        """Give the pinned memory back (the buffer is unusable afterwards)."""
        if self.address:
            check(driver().cuMemFreeHost(self.address), "cuMemFreeHost")
            self.address, self.size = 0, 0

    def events(self) -> list[Any]:
        """The reusable events of the calling thread's current context."""
        ctx = int(check(driver().cuCtxGetCurrent(), "cuCtxGetCurrent"))
        return self._events.setdefault(ctx, [])

    def event(self, i: int, events: list[Any] | None = None) -> Any:
        """The ``i``-th reusable event of ``events`` (default: the current context's),
        created on demand, timing disabled."""
        drv = driver()
        if events is None:
            events = self.events()
        while len(events) <= i:
            flags = drv.CUevent_flags.CU_EVENT_DISABLE_TIMING
            events.append(check(drv.cuEventCreate(flags), "cuEventCreate"))
        return events[i]

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

        done = map(copy, chunks) if len(chunks) == 1 else _copy_threads().map(copy, chunks)
        for off, k in done:
            check(drv.cuMemcpyHtoDAsync(dst + off, pinned + off, k, stream),
                  "cuMemcpyHtoDAsync")

    def download_start(self, src: int, pinned: int, nbytes: int, stream: int,
                       first_event: int) -> int:
        """Queue device→pinned copies in chunks, each followed by an event; return count."""
        drv = driver()
        events = self.events()
        count = 0
        for off in range(0, nbytes, CHUNK):
            k = min(CHUNK, nbytes - off)
            check(drv.cuMemcpyDtoHAsync(pinned + off, src + off, k, stream),
                  "cuMemcpyDtoHAsync")
            check(drv.cuEventRecord(self.event(first_event + count, events), stream),
                  "cuEventRecord")
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
        events = self.events()  # the copy threads have no current context of their own

        def copy(item: tuple[int, int]) -> None:
            i, off = item
            k = min(CHUNK, n - off)
            check(drv.cuEventSynchronize(self.event(first_event + i, events)),
                  "cuEventSynchronize")
            dst[off:off + k] = stage[off:off + k]

        if len(chunks) == 1:
            copy(chunks[0])
        else:
            for event_index in range(first_event, first_event + len(chunks)):
                self.event(event_index, events)  # create events here, not racing in threads
            list(_copy_threads().map(copy, chunks))


#: Staging buffers not lent out now (each lent to one staged launch at a time).
_FREE: list[PinnedStaging] = []
_FREE_LOCK = threading.Lock()
_THREADS: list[Any] = []


@contextlib.contextmanager
def staging(nbytes: int) -> Iterator[PinnedStaging]:
    """Lend a staging buffer of at least ``nbytes`` to the calling launch.

    Concurrent staged launches get distinct buffers (as many as ever ran at once are
    kept; a buffer that is too small is replaced by one twice its size or ``nbytes``)."""
    with _FREE_LOCK:
        st = _FREE.pop() if _FREE else None
    if st is None or st.size < nbytes:
        size = max(nbytes, 8 << 20, 2 * st.size if st is not None else 0)
        if st is not None:
            st.close()
        st = PinnedStaging(size)
    try:
        yield st
    finally:
        with _FREE_LOCK:
            _FREE.append(st)


def _copy_threads() -> Any:
    # Host copies into pinned memory run in threads (NumPy releases the GIL for raw
    # copies): one core copies ~10 GB/s, well under what PCIe takes. Shared by all
    # staging buffers (the executor is thread-safe).
    if not _THREADS:
        with _FREE_LOCK:
            if not _THREADS:
                from concurrent.futures import ThreadPoolExecutor

                _THREADS.append(ThreadPoolExecutor(max_workers=_COPY_THREADS,
                                                   thread_name_prefix="thork-staging"))
    return _THREADS[0]


class PinnedBlock:
    """Page-locked host memory owned by a NumPy array from :func:`pinned_empty` (the
    array's ``base``); freed when the last array viewing it is collected."""

    __slots__ = ("address", "nbytes", "__array_interface__", "__weakref__")

    def __init__(self, nbytes: int) -> None:
        self.address = 0
        self.nbytes = nbytes
        self.address = int(check(driver().cuMemHostAlloc(max(nbytes, 1), _PORTABLE),
                                 "cuMemHostAlloc"))
        self.__array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                    "data": (self.address, False), "version": 3}

    def __del__(self) -> None:
        if self.address:
            try:
                check(driver().cuMemFreeHost(self.address), "cuMemFreeHost")
            except Exception:  # interpreter shutdown: the process frees it
                pass
            self.address = 0


def pinned_empty(shape: Any, dtype: Any = "float32") -> Any:
    """An uninitialized C-contiguous NumPy array in page-locked (pinned) host memory.

    Launches on the GPU copy pinned arrays straight to and from the device (no staging
    copy through Thork's own pinned buffer), and the copies run at full PCIe speed.
    ``shape``: an int or a tuple of ints; ``dtype``: anything :func:`thork_core.dtype_of`
    takes. Without a usable GPU (the CPU target) it returns an ordinary NumPy array, so
    code written for both targets runs on either. The memory is freed when the array (and
    every view of it) is garbage collected.
    """
    import numpy as np

    from ._cuda import gpu_status, make_current
    from ._device_array import _dtype, _shape

    d = _dtype(dtype).numpy
    dims = _shape(shape)
    if not gpu_status()[0]:
        return np.empty(dims, dtype=d)
    make_current(0)  # pinned memory is portable across contexts; one must be current
    nbytes = math.prod(dims) * d.itemsize
    return np.asarray(PinnedBlock(nbytes))[:nbytes].view(d).reshape(dims)


def pinned_base(array: Any) -> PinnedBlock | None:
    """The :class:`PinnedBlock` under NumPy ``array`` (a :func:`pinned_empty` array or a view
    of one), else None."""
    base = array
    for _ in range(64):  # views of views: a chain of .base links
        if isinstance(base, PinnedBlock):
            return base if base.address else None
        base = getattr(base, "base", None)
        if base is None:
            return None
    return None


def _host_view(address: int, nbytes: int) -> Any:
    """A uint8 NumPy view of ``nbytes`` of host memory at ``address``."""
    import numpy as np

    return np.ctypeslib.as_array((ctypes.c_uint8 * max(nbytes, 1)).from_address(address))


@functools.cache
def device_pool(ordinal: int = 0) -> DevicePool:
    return DevicePool(ordinal)


