"""The round trip of NumPy arguments around one GPU launch: copy every host array in,
launch, copy the written ones out, one stream synchronization.

Every host array goes in (elements the kernel does not write must keep their host
values); written arrays come back. Arguments sharing host memory are one transfer (one
device copy of their union, see :class:`Transfer`). Two kinds of host memory:

- *direct*: page-locked arrays (:func:`~thork_core.pinned_empty`), which the DMA engine
  reads and writes in place: one ``cuMemcpyHtoDAsync`` in, one ``cuMemcpyDtoHAsync`` out.
- *staged*: ordinary (pageable) NumPy arrays, copied through a pinned staging buffer lent
  to this call (:func:`~thork_core._memory.staging`) in chunks of :data:`CHUNK_BYTES`.
  Going in, *lanes* (threads of a shared pool; ``ctypes.memmove`` releases the GIL) copy
  chunks into the staging buffer while the calling thread queues each finished chunk's DMA,
  so host copies and transfers overlap and several cores share the host copying. Coming
  out, every chunk's DMA is queued with an event after it; lanes (and the calling thread)
  wait on a chunk's event and copy it into the array while later chunks are in flight.

The driver is reached through :class:`DriverCopies` (ctypes prototypes of the six driver
calls, each about a microsecond); tests hand :func:`round_trip` a stub with the same
methods. Totals under :data:`INLINE_BYTES` are copied on the calling thread alone.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import concurrent.futures

# concurrent.futures (which imports logging) and queue are imported by the functions that
# copy through lanes: a round trip small enough to copy inline on the calling thread needs
# neither (~3 ms of imports).

from ._errors import ArgumentError, LaunchError

__all__ = ["CHUNK_BYTES", "INLINE_BYTES", "LANES", "DriverCopies", "Transfer",
           "configure_staging", "driver_copies", "round_trip"]

#: Bytes per staged chunk (one DMA and one host copy each). 2 MiB with 8 lanes was the
#: fastest of ``bench/diag_staging.py``'s grid on the H200 machine (session 10: 1.27 ms
#: for the 1024^2 round trip, 0.76x CuPy; 1 MiB 1.55-1.60 ms, 256 KiB 2.4 ms).
CHUNK_BYTES = 2 << 20
#: Threads copying between NumPy arrays and the staging buffer for one call (the calling
#: thread queues the DMA and, coming out, copies too). Host copies saturate near 4-8
#: threads there (12 MB pageable -> pinned: 13 GB/s on one thread, 17 GB/s on 8).
LANES = max(1, min(8, os.cpu_count() or 1))
#: Staged totals at or below this many bytes are copied by the calling thread alone
#: (waking lanes costs more than it saves).
INLINE_BYTES = 512 << 10

_memmove = ctypes.memmove  # a foreign call: releases the GIL while it copies


def configure_staging(*, lanes: int | None = None, chunk_bytes: int | None = None,
                      inline_bytes: int | None = None) -> dict[str, int]:
    """Set how pageable NumPy arrays are staged on the GPU target; return the settings
    before the call (pass them back as keywords to restore).

    ``lanes``: host threads copying a call's chunks (1–64); ``chunk_bytes``: bytes per
    chunk (4 KiB–256 MiB, a multiple of 4096); ``inline_bytes``: staged totals at or below
    this (bytes, ≥ 0) are copied without lanes. Applies to launches that start afterwards.
    """
    global LANES, CHUNK_BYTES, INLINE_BYTES
    before = {"lanes": LANES, "chunk_bytes": CHUNK_BYTES, "inline_bytes": INLINE_BYTES}
    for name, value, low, high in (("lanes", lanes, 1, 64),
                                   ("chunk_bytes", chunk_bytes, 4096, 1 << 28),
                                   ("inline_bytes", inline_bytes, 0, 1 << 40)):
        if value is None:
            continue
        if type(value) is not int or not low <= value <= high:
            raise ArgumentError(f"configure_staging(): '{name}' expects an int in "
                                f"[{low}, {high}], got {value!r}")
    if chunk_bytes is not None and chunk_bytes % 4096:
        raise ArgumentError(f"configure_staging(): 'chunk_bytes' expects a multiple of "
                            f"4096, got {chunk_bytes}")
    if lanes is not None:
        LANES = lanes
    if chunk_bytes is not None:
        CHUNK_BYTES = chunk_bytes
    if inline_bytes is not None:
        INLINE_BYTES = inline_bytes
    return before


@dataclass(slots=True)
class Transfer:
    """One host array of a launch: ``host`` and ``device`` addresses, ``nbytes``;
    ``direct``: page-locked (copied in place); ``back``: written by the kernel (copied
    out); ``queued``: a direct array whose copy in the caller has queued on the stream
    already (:func:`round_trip` does not copy it in again); ``spans``: where only parts
    are written, the ``(offset, nbytes)`` byte ranges copied out (empty: all ``nbytes``).

    One transfer may serve several parameters: arguments sharing host memory are one
    device copy of the union of their ranges (``CudaExecutable``'s aliasing groups), whose
    ``spans`` are the written parameters' ranges, so memory that only read-only
    parameters cover is never written back."""

    host: int
    device: int
    nbytes: int
    direct: bool
    back: bool
    queued: bool = False
    spans: tuple[tuple[int, int], ...] = ()

    def out_spans(self) -> tuple[tuple[int, int], ...]:
        """The ``(offset, nbytes)`` ranges copied out (the whole transfer unless
        ``spans`` says otherwise)."""
        return self.spans or ((0, self.nbytes),)


class Copies(Protocol):
    """The driver calls a round trip makes; each returns the driver's error code (0: ok)."""

    def htod(self, dst: int, src: int, nbytes: int, stream: int) -> int: ...
    def dtoh(self, dst: int, src: int, nbytes: int, stream: int) -> int: ...
    def record(self, event: int, stream: int) -> int: ...
    def event_sync(self, event: int) -> int: ...
    def stream_sync(self, stream: int) -> int: ...
    def fail(self, err: int, what: str) -> LaunchError: ...


class Stage(Protocol):
    """A pinned staging buffer lent to one call (:class:`~thork_core._memory.PinnedStaging`)."""

    address: int
    size: int

    def raw_events(self, key: int, count: int) -> Sequence[int]: ...


_U64 = ctypes.c_uint64
_PTR = ctypes.c_void_p
_MEMCPY = ctypes.CFUNCTYPE(ctypes.c_int, _U64, _PTR, ctypes.c_size_t, _PTR)
_EVENT_RECORD = ctypes.CFUNCTYPE(ctypes.c_int, _PTR, _PTR)
_ONE = ctypes.CFUNCTYPE(ctypes.c_int, _PTR)
_EVENT_CREATE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_PTR), ctypes.c_uint)


class DriverCopies:
    """The driver's copy, event and stream calls through ctypes prototypes (no
    cuda-bindings wrapper, the GIL released during each call)."""

    def __init__(self) -> None:
        from ._cuda import function_address

        self._htod = _MEMCPY(function_address("cuMemcpyHtoDAsync_v2"))
        # cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t, CUstream)
        self._dtoh = ctypes.CFUNCTYPE(ctypes.c_int, _PTR, _U64, ctypes.c_size_t, _PTR)(
            function_address("cuMemcpyDtoHAsync_v2"))
        self._record = _EVENT_RECORD(function_address("cuEventRecord"))
        self._event_sync = _ONE(function_address("cuEventSynchronize"))
        self._stream_sync = _ONE(function_address("cuStreamSynchronize"))
        self._event_create = _EVENT_CREATE(function_address("cuEventCreate"))
        self._event_destroy = _ONE(function_address("cuEventDestroy_v2"))

    def htod(self, dst: int, src: int, nbytes: int, stream: int) -> int:
        return int(self._htod(dst, src, nbytes, stream or None))

    def dtoh(self, dst: int, src: int, nbytes: int, stream: int) -> int:
        return int(self._dtoh(dst, src, nbytes, stream or None))

    def record(self, event: int, stream: int) -> int:
        return int(self._record(event, stream or None))

    def event_sync(self, event: int) -> int:
        return int(self._event_sync(event))

    def stream_sync(self, stream: int) -> int:
        return int(self._stream_sync(stream or None))

    def event_create(self) -> int:
        """A new event of the current context, timing disabled."""
        ev = _PTR()
        err = self._event_create(ctypes.byref(ev), 2)  # CU_EVENT_DISABLE_TIMING
        if err:
            raise self.fail(err, "cuEventCreate")
        return int(ev.value or 0)

    def event_destroy(self, event: int) -> None:
        self._event_destroy(event)

    def fail(self, err: int, what: str) -> LaunchError:
        """The LaunchError for driver code ``err`` (with the driver's name and text)."""
        from ._cuda import check, driver

        try:
            check((driver().CUresult(int(err)),), what)
        except LaunchError as exc:
            return exc
        return LaunchError(f"{what} failed: CUDA error {err}")  # pragma: no cover


_COPIES: list[DriverCopies] = []
_POOL: list[_LanePool] = []
_POOL_LOCK = threading.Lock()
#: Seconds an idle lane thread waits for more work before it ends (session 12): a live
#: idle thread keeps a Python thread state, and while any other thread state exists every
#: native launch releases and retakes the GIL (``_native_launch.c``'s ``alone()``; the
#: cache writer ends the same way). Calls in a burst find their lanes still running.
_LANE_LINGER_S = 0.5


def driver_copies() -> DriverCopies:
    """The process's :class:`DriverCopies` (made on first use)."""
    if not _COPIES:
        with _POOL_LOCK:
            if not _COPIES:
                _COPIES.append(DriverCopies())
    return _COPIES[0]


class _LanePool:
    """Daemon threads running submitted functions, at most ``workers`` at once; a thread
    idle for :data:`_LANE_LINGER_S` ends (the next submit starts another).

    Every decision is taken under one condition's lock: a lane ends only while holding
    it and seeing no work, and :meth:`submit` queues its work and counts the idle lanes
    under it, starting a thread when there are fewer idle lanes than queued works, so no
    submitted work is left without a lane. A forked child starts with no threads and an
    empty queue (:meth:`after_fork_in_child`)."""

    def __init__(self, workers: int) -> None:
        import collections

        self.workers = workers
        self._cond = threading.Condition(threading.Lock())
        self._work: collections.deque[tuple[Callable[[], None],
                                            concurrent.futures.Future[None]]] = (
            collections.deque())
        self._threads = 0  # lane threads alive (started, not yet ended)
        self._idle = 0  # of them, those waiting for work

    def submit(self, fn: Callable[[], None]) -> concurrent.futures.Future[None]:
        """Run ``fn()`` on a lane; its future holds the outcome."""
        import concurrent.futures

        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        with self._cond:
            self._work.append((fn, future))
            if len(self._work) > self._idle and self._threads < self.workers:
                self._threads += 1
                try:
                    threading.Thread(target=self._lane, name="thork-staging",
                                     daemon=True).start()
                except BaseException:
                    self._threads -= 1  # no thread: the work waits for a running lane
                    if not self._threads:
                        self._work.pop()
                        raise
            else:
                self._cond.notify()
        return future

    def alive(self) -> int:
        """Lane threads alive now."""
        with self._cond:
            return self._threads

    def _lane(self) -> None:
        while True:
            with self._cond:
                if not self._work:
                    self._idle += 1
                    self._cond.wait(_LANE_LINGER_S)
                    self._idle -= 1
                    if not self._work:  # idle (or woken for work another lane took)
                        self._threads -= 1
                        return
                fn, future = self._work.popleft()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the waiter
                future.set_exception(exc)
            else:
                future.set_result(None)
            del fn, future

    def after_fork_in_child(self) -> None:
        """The child has none of the parent's threads: forget them and their work."""
        import collections

        self._cond = threading.Condition(threading.Lock())
        self._work = collections.deque()
        self._threads = self._idle = 0


def _lanes(count: int) -> _LanePool:
    """The shared pool of copy threads, with at least ``count`` workers. Shared by every
    call: lanes never wait on each other, so calls from many threads only queue."""
    pool = _POOL[0] if _POOL else None
    if pool is None or pool.workers < count:
        with _POOL_LOCK:
            pool = _POOL[0] if _POOL else None
            if pool is None:
                pool = _LanePool(max(count, 8))
                _POOL.append(pool)
                if hasattr(os, "register_at_fork"):
                    os.register_at_fork(after_in_child=pool.after_fork_in_child)
            elif pool.workers < count:
                pool.workers = count  # read under the pool's lock by the next submit
    return pool


def _chunks(transfers: Sequence[Transfer], chunk: int, out: bool,
            stage: int) -> list[tuple[int, int, int, int]]:
    """``(host, stage, device, nbytes)`` of every staged chunk, in array order: staged
    arrays lie one after another in the staging buffer from ``stage`` (going out, written
    arrays alone, from the start again: the DMA in reads the buffer before, in stream
    order, the DMA out writes it)."""
    got = []
    off = 0
    for t in transfers:
        if t.direct or (out and not t.back):
            continue
        # going out, only the written ranges (an aliasing group's ``spans``)
        for start, size in t.out_spans() if out else ((0, t.nbytes),):
            host, dev = t.host + start, t.device + start
            for o in range(0, size, chunk):
                got.append((host + o, stage + off + o, dev + o, min(chunk, size - o)))
            off += size
    return got


def staged_bytes(transfers: Sequence[Transfer]) -> int:
    """Bytes of the staging buffer ``transfers`` need (every pageable array, once)."""
    return sum(t.nbytes for t in transfers if not t.direct)


def round_trip(copies: Copies, stage: Stage | None, stream: int,
               transfers: Sequence[Transfer], launch: Callable[[], None], *,
               key: int = 0, what: str = "the kernel", lanes: int | None = None,
               chunk_bytes: int | None = None, inline_bytes: int | None = None,
               before_sync: Callable[[], None] | None = None) -> None:
    """Copy ``transfers`` in on ``stream``, call ``launch()`` (it queues the kernel on
    ``stream``), copy the written ones out, and return once everything has finished.

    ``stage``: the staging buffer (None when every transfer is direct), at least
    :func:`staged_bytes` long; ``key``: which of its event lists to use (the device
    ordinal: events belong to a context); ``what`` names the kernel in errors;
    ``before_sync()``, if given, runs once every copy is queued, right before the one
    stream synchronization (the caller frees its device memory there, in stream order).
    Direct transfers marked ``queued`` were copied in by the caller. Every copy and the
    launch are queued back to back on ``stream``; nothing waits between them. On any
    error the lanes are drained and the stream is synchronized before the error is
    raised, so the staging buffer is idle when the caller gives it back.
    """
    lanes = LANES if lanes is None else lanes
    chunk = CHUNK_BYTES if chunk_bytes is None else chunk_bytes
    inline = INLINE_BYTES if inline_bytes is None else inline_bytes
    busy: list[concurrent.futures.Future[None]] = []
    stop: list[bool] = []
    settled = False
    try:
        for t in transfers:  # page-locked arrays first: their DMA starts at once
            if t.direct and t.nbytes and not t.queued:
                err = copies.htod(t.device, t.host, t.nbytes, stream)
                if err:
                    raise copies.fail(err, "cuMemcpyHtoDAsync")
        staged = staged_bytes(transfers)
        if staged:
            if stage is None or stage.size < staged:
                raise LaunchError(f"staging {staged} bytes for {what}: no staging buffer "
                                  "that large was lent")
            parallel = lanes > 1 and staged > inline
            _copy_in(copies, stream, _chunks(transfers, chunk, False, stage.address),
                     lanes if parallel else 0, busy, stop)
        launch()
        for t in transfers:
            if t.direct and t.back and t.nbytes:
                for start, size in t.out_spans():  # all of it, or an aliasing group's parts
                    err = copies.dtoh(t.host + start, t.device + start, size, stream)
                    if err:
                        raise copies.fail(err, "cuMemcpyDtoHAsync")
        out = _chunks(transfers, chunk, True, stage.address) if staged and stage else []
        if out:
            events = stage.raw_events(key, len(out)) if stage is not None else ()
            out_bytes = sum(c[3] for c in out)
            _copy_out(copies, stream, out, events,
                      lanes if lanes > 1 and out_bytes > inline else 0, busy, stop)
        if before_sync is not None:
            before_sync()
        err = copies.stream_sync(stream)
        settled = True
        if err:
            raise copies.fail(err, f"running {what}")
    except BaseException as exc:
        stop.append(True)
        _wait(busy)  # no lane touches the buffer after we return
        if not settled:  # nor does a DMA
            err = copies.stream_sync(stream)
            if err and isinstance(exc, LaunchError):  # the kernel failed: say so
                raise copies.fail(err, f"running {what}") from exc
        raise


def _wait(busy: list[concurrent.futures.Future[None]]) -> None:
    """Wait for the lanes in ``busy`` (none started: nothing to import)."""
    if busy:
        import concurrent.futures

        concurrent.futures.wait(busy)


def _copy_in(copies: Copies, stream: int, chunks: list[tuple[int, int, int, int]],
             lanes: int, busy: list[concurrent.futures.Future[None]],
             stop: list[bool]) -> None:
    """Host → staging by ``lanes`` threads (0: this thread), each chunk's DMA queued by
    this thread as soon as its host copy is done."""
    if not lanes:
        for host, pinned, dev, k in chunks:
            _memmove(pinned, host, k)
            err = copies.htod(dev, pinned, k, stream)
            if err:
                raise copies.fail(err, "cuMemcpyHtoDAsync")
        return
    import queue

    work: queue.SimpleQueue[int] = queue.SimpleQueue()
    for i in range(len(chunks)):
        work.put(i)
    done: queue.SimpleQueue[int | BaseException] = queue.SimpleQueue()

    def lane() -> None:
        while not stop:
            try:
                i = work.get_nowait()
            except queue.Empty:
                return
            host, pinned, _, k = chunks[i]
            try:
                _memmove(pinned, host, k)
            except BaseException as exc:  # pragma: no cover - memmove does not raise
                done.put(exc)
                return
            done.put(i)

    pool = _lanes(lanes)
    busy.extend(pool.submit(lane) for _ in range(min(lanes, len(chunks))))
    for _ in range(len(chunks)):
        item = done.get()
        if isinstance(item, BaseException):
            raise item
        _, pinned, dev, k = chunks[item]
        err = copies.htod(dev, pinned, k, stream)
        if err:
            raise copies.fail(err, "cuMemcpyHtoDAsync")


def _copy_out(copies: Copies, stream: int, chunks: list[tuple[int, int, int, int]],
              events: Sequence[int], lanes: int,
              busy: list[concurrent.futures.Future[None]], stop: list[bool]) -> None:
    """Device → staging DMA of every chunk, an event after each; then ``lanes`` threads
    and this one wait on each chunk's event and copy it into its array."""
    for (_, pinned, dev, k), ev in zip(chunks, events):
        err = copies.dtoh(pinned, dev, k, stream)
        if err:
            raise copies.fail(err, "cuMemcpyDtoHAsync")
        err = copies.record(ev, stream)
        if err:
            raise copies.fail(err, "cuEventRecord")
    import queue

    work: queue.SimpleQueue[int] = queue.SimpleQueue()
    for i in range(len(chunks)):
        work.put(i)
    errors: list[BaseException] = []

    def lane() -> None:
        while not stop and not errors:
            try:
                i = work.get_nowait()
            except queue.Empty:
                return
            host, pinned, _, k = chunks[i]
            err = copies.event_sync(events[i])
            if err:
                errors.append(copies.fail(err, "cuEventSynchronize"))
                return
            _memmove(host, pinned, k)

    if lanes:
        pool = _lanes(lanes)
        started = len(busy)
        busy.extend(pool.submit(lane) for _ in range(min(lanes, len(chunks) - 1)))
        lane()  # this thread copies too
        _wait(busy[started:])
    else:
        lane()
    if errors:
        raise errors[0]
