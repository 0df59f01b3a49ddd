"""Device memory from the driver's stream-ordered pool, and pinned host staging.

Device allocations use ``cuMemAllocAsync`` on the device's default memory pool with its
release threshold raised, so freed blocks stay cached in the pool instead of going back
to the OS: allocation after warm-up costs about a microsecond. Host staging for NumPy
arguments goes through page-locked buffers lent to one launch at a time (:func:`staging`;
the chunked, threaded copies through them are :mod:`thork_core._staging`'s).
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
from ._dtype import array_dtype, array_shape
from ._errors import LaunchError

__all__ = [
    "DevicePool", "PinnedBlock", "PinnedStaging", "device_pool", "pinned_base", "pinned_empty",
    "staging",
]

#: ``CU_MEMHOSTALLOC_PORTABLE``: pinned for every context, so one staging buffer serves
#: launches on any device (h-multi).
_PORTABLE = 1


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
        # Raw event handles per device (see raw_events).
        self._events: dict[int, list[int]] = {}

    def close(self) -> None:
        """Give the pinned memory back (the buffer is unusable afterwards)."""
        if self.address:
            if self._events:
                from ._staging import driver_copies

                for events in self._events.values():
                    for ev in events:
                        driver_copies().event_destroy(ev)
                self._events.clear()
            check(driver().cuMemFreeHost(self.address), "cuMemFreeHost")
            self.address, self.size = 0, 0

    def raw_events(self, key: int, count: int) -> list[int]:
        """``count`` reusable events (raw ``CUevent`` handles, timing disabled) of the
        calling thread's current context, which is device ``key``'s: events belong to a
        context, so a staged launch on device 1 never records one made on device 0."""
        events = self._events.setdefault(key, [])
        if len(events) < count:
            from ._staging import driver_copies

            make = driver_copies().event_create
            while len(events) < count:
                events.append(make())
        return events


#: Staging buffers not lent out now (each lent to one staged launch at a time).
_FREE: list[PinnedStaging] = []
_FREE_LOCK = threading.Lock()


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
                # (through the graph module's queue: a finalizer may run inside any capture,
                # and cuMemFreeHost may synchronize: see docs/graphs.md)
                from ._graph import retire

                retire(("cuMemFreeHost", self.address))
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

    d = array_dtype(dtype, "pinned_empty").numpy
    dims = array_shape(shape, "pinned_empty")
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


@functools.cache
def device_pool(ordinal: int = 0) -> DevicePool:
    return DevicePool(ordinal)


