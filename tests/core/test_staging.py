"""The round trip of NumPy arguments around a GPU launch (``thork_core._staging``).

Most tests stub the driver: "device" memory is host memory, a host→device copy reads its
source when it is queued (so a DMA queued before its chunk was filled would carry stale
bytes), while device→host copies and the kernel run only when an event or the stream is
synchronized (so a chunk copied out before its event would carry stale bytes). The
``[gpu]`` tests check values against NumPy on the GPU target.
"""

from __future__ import annotations

import ctypes
import random
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import numpy as np
import pytest
import thork as tk
from helpers import poisoned, run_threads
from thork_core import ArgumentError, LaunchError, _staging
from thork_core._staging import Transfer, configure_staging, round_trip


class FakeStage:
    """A staging buffer in ordinary memory, its events plain integers."""

    def __init__(self, size: int) -> None:
        self.buf = np.full(max(size, 1), 0xAB, np.uint8)
        self.address = self.buf.ctypes.data
        self.size = size

    def raw_events(self, key: int, count: int) -> list[int]:
        return list(range(1000, 1000 + count))


class FakeDriver:
    """The six driver calls of a round trip on one stream, failures injectable."""

    def __init__(self, fail_htod_at: int = -1, fail_event: bool = False,
                 sticky: int = 0) -> None:
        self.lock = threading.Lock()
        self.pending: list[tuple[str, Any]] = []  # lazy ops: ("op", fn) or ("event", ev)
        self.fired: set[int] = set()
        self.htods = 0
        self.syncs = 0
        self.fail_htod_at, self.fail_event, self.sticky = fail_htod_at, fail_event, sticky

    def _drain(self, until: int | None = None) -> None:
        with self.lock:
            while self.pending:
                kind, x = self.pending.pop(0)
                if kind == "op":
                    x()
                else:
                    self.fired.add(x)
                    if x == until:
                        return

    def htod(self, dst: int, src: int, nbytes: int, stream: int) -> int:
        with self.lock:
            self.htods += 1
            if self.htods == self.fail_htod_at:
                return 1  # CUDA_ERROR_INVALID_VALUE
        ctypes.memmove(dst, src, nbytes)  # reads its source now
        return 0

    def dtoh(self, dst: int, src: int, nbytes: int, stream: int) -> int:
        with self.lock:
            self.pending.append(("op", lambda: ctypes.memmove(dst, src, nbytes)))
        return 0

    def launch(self, fn: Any) -> None:
        with self.lock:
            self.pending.append(("op", fn))

    def record(self, event: int, stream: int) -> int:
        with self.lock:
            self.pending.append(("event", event))
        return 0

    def event_sync(self, event: int) -> int:
        if self.fail_event:
            return self.sticky or 700
        time.sleep(0.0005)  # the DMA takes a while: other lanes run meanwhile
        self._drain(event)
        return 0

    def stream_sync(self, stream: int) -> int:
        self.syncs += 1
        self._drain()
        return self.sticky

    def fail(self, err: int, what: str) -> LaunchError:
        return LaunchError(f"{what} failed: error {err}")


class Device:
    """Fake device buffers for host arrays."""

    def __init__(self) -> None:
        self.keep: list[np.ndarray] = []

    def alloc(self, nbytes: int) -> np.ndarray:
        d = np.full(max(nbytes, 1), 0xCD, np.uint8)
        self.keep.append(d)
        return d


def _transfers(arrays, writes, direct, dev: Device):
    ts, bufs = [], []
    for a, w, d in zip(arrays, writes, direct):
        buf = dev.alloc(a.nbytes)
        bufs.append(buf)
        ts.append(Transfer(a.ctypes.data, buf.ctypes.data, a.nbytes, d, w))
    return ts, bufs


def _add_kernel(bufs, n):
    def run() -> None:  # out = out + a + b on the "device"
        out, a, b = (buf[: 4 * n].view(np.float32) for buf in bufs)
        out[:] = out + a + b
    return run


@pytest.mark.parametrize("lanes,chunk,inline", [(4, 4096, 0), (3, 64 << 10, 0),
                                                (1, 8192, 0), (8, 1 << 20, 1 << 30)])
@pytest.mark.parametrize("n", [1, 1023, 300_001])
def test_round_trip_values_with_a_stubbed_driver(rng, lanes, chunk, inline, n):
    """Written arrays come back with the kernel's values, read arrays go in, unwritten
    ones are never copied out; chunks, lanes and the inline path agree."""
    out = rng.standard_normal(n).astype(np.float32)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    want = out + a + b
    a0, b0 = a.copy(), b.copy()
    drv, dev = FakeDriver(), Device()
    ts, bufs = _transfers((out, a, b), (True, False, False), (False, False, False), dev)
    stage = FakeStage(_staging.staged_bytes(ts))
    round_trip(drv, stage, 0, ts, lambda: drv.launch(_add_kernel(bufs, n)),
               lanes=lanes, chunk_bytes=chunk, inline_bytes=inline)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)
    assert drv.syncs == 1
    assert drv.htods == 3 * -(-out.nbytes // chunk)


def test_round_trip_mixes_direct_and_staged_arrays(rng):
    """A 'page-locked' array goes straight in and out, pageable ones through the stage;
    the stage only needs the pageable bytes."""
    n = 50_001
    out = rng.standard_normal(n).astype(np.float32)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    want = out + a + b
    for direct in [(True, False, False), (False, True, True), (True, True, True)]:
        o = out.copy()
        drv, dev = FakeDriver(), Device()
        ts, bufs = _transfers((o, a, b), (True, False, False), direct, dev)
        size = _staging.staged_bytes(ts)
        assert size == sum(x.nbytes for x, d in zip((o, a, b), direct) if not d)
        stage = FakeStage(size) if size else None
        round_trip(drv, stage, 0, ts, lambda bufs=bufs, drv=drv: drv.launch(
            _add_kernel(bufs, n)), lanes=3, chunk_bytes=16384, inline_bytes=0)
        np.testing.assert_array_equal(o, want)


@pytest.mark.parametrize("direct", [False, True], ids=["staged", "direct"])
@pytest.mark.parametrize("lanes,chunk", [(1, 4096), (3, 8192), (8, 1 << 20)])
def test_round_trip_copies_back_only_the_written_spans(rng, direct, lanes, chunk):
    """A transfer serving aliased parameters (one device copy of their union) copies out
    its ``spans`` only: bytes that only read-only parameters cover keep their host
    values even though the "kernel" overwrote every device byte; each span arrives whole
    across chunk boundaries."""
    n = 40_009
    host = rng.standard_normal(n).astype(np.float32)
    orig = host.copy()
    spans = ((4 * 3, 4 * 10_001), (4 * 20_000, 4 * 19_000))  # two ranges, odd lengths
    drv, dev = FakeDriver(), Device()
    buf = dev.alloc(host.nbytes)
    t = Transfer(host.ctypes.data, buf.ctypes.data, host.nbytes, direct, True, False, spans)
    assert t.out_spans() == spans
    assert Transfer(1, 2, 3, False, True).out_spans() == ((0, 3),)

    def kernel() -> None:  # every device element becomes -(itself) - 1
        d = buf[: host.nbytes].view(np.float32)
        d[:] = -d - 1

    stage = None if direct else FakeStage(_staging.staged_bytes([t]))
    round_trip(drv, stage, 0, [t], lambda: drv.launch(kernel), lanes=lanes,
               chunk_bytes=chunk, inline_bytes=0)
    want = orig.copy()
    for off, size in spans:
        sl = slice(off // 4, (off + size) // 4)
        want[sl] = -orig[sl] - 1
    np.testing.assert_array_equal(host, want)
    assert drv.syncs == 1


@pytest.mark.parametrize("staged_b", [False, True])
def test_round_trip_skips_queued_copies_and_releases_before_the_one_sync(rng, staged_b):
    """Direct transfers marked ``queued`` (the caller copied them in: here, by hand) are
    not copied in again; ``before_sync`` runs once, after every copy out is queued and
    before the stream's one synchronization (the caller frees its device memory there, in
    stream order). Values against NumPy, the written output poisoned on the device."""
    n = 30_011
    out = rng.standard_normal(n).astype(np.float32)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    want = out + a + b
    drv, dev = FakeDriver(), Device()
    direct = (True, True, not staged_b)
    ts, bufs = _transfers((out, a, b), (True, False, False), direct, dev)
    for t in ts[:2]:  # "queued by the caller": copied now, marked so
        ctypes.memmove(t.device, t.host, t.nbytes)
    ts[:2] = [Transfer(t.host, t.device, t.nbytes, True, t.back, True) for t in ts[:2]]
    seen: list[tuple[int, int, int]] = []

    def before_sync() -> None:  # (syncs so far, copies out pending, copies in so far)
        seen.append((drv.syncs, sum(1 for k, _ in drv.pending if k == "op"), drv.htods))

    size = _staging.staged_bytes(ts)
    stage = FakeStage(size) if size else None
    round_trip(drv, stage, 0, ts, lambda: drv.launch(_add_kernel(bufs, n)), lanes=2,
               chunk_bytes=8192, inline_bytes=0, before_sync=before_sync)
    np.testing.assert_array_equal(out, want)
    chunks_b = -(-b.nbytes // 8192) if staged_b else 1
    assert drv.htods == chunks_b  # only B went in here: C and A were queued already
    assert drv.syncs == 1
    # before the sync: nothing synchronized yet, the kernel and C's copy out still queued
    assert seen == [(0, 2, chunks_b)]


def test_a_failed_copy_in_drains_the_lanes_and_the_stream(rng, monkeypatch):
    """The error is raised only after every lane has stopped touching the staging buffer
    and the stream was synchronized; the kernel never ran."""
    active = [0]
    seen_after: list[int] = []
    real = _staging._memmove

    def slow_memmove(dst: int, src: int, n: int) -> int:
        active[0] += 1
        time.sleep(0.002)
        try:
            return real(dst, src, n)
        finally:
            active[0] -= 1

    monkeypatch.setattr(_staging, "_memmove", slow_memmove)
    n = 40_000
    arrays = [rng.standard_normal(n).astype(np.float32) for _ in range(3)]
    drv, dev = FakeDriver(fail_htod_at=5), Device()
    ts, _ = _transfers(arrays, (True, False, False), (False,) * 3, dev)
    launched = []
    with pytest.raises(LaunchError, match="cuMemcpyHtoDAsync failed"):
        try:
            round_trip(drv, FakeStage(_staging.staged_bytes(ts)), 0, ts,
                       lambda: launched.append(1), lanes=4, chunk_bytes=4096,
                       inline_bytes=0)
        finally:
            seen_after.append(active[0])
    assert seen_after == [0] and launched == [] and drv.syncs == 1


def test_a_failed_kernel_is_named_when_copying_out(rng):
    """An event wait that fails (a kernel fault is sticky) raises the stream's error,
    naming the kernel."""
    n = 30_000
    arrays = [rng.standard_normal(n).astype(np.float32) for _ in range(3)]
    drv, dev = FakeDriver(fail_event=True, sticky=700), Device()
    ts, _ = _transfers(arrays, (True, False, False), (False,) * 3, dev)
    with pytest.raises(LaunchError, match="running mykernel failed"):
        round_trip(drv, FakeStage(_staging.staged_bytes(ts)), 0, ts, lambda: None,
                   what="mykernel", lanes=4, chunk_bytes=4096, inline_bytes=0)


def test_a_stage_too_small_is_an_error(rng):
    a = rng.standard_normal(1000).astype(np.float32)
    drv, dev = FakeDriver(), Device()
    ts, _ = _transfers((a,), (True,), (False,), dev)
    with pytest.raises(LaunchError, match="staging 4000 bytes for k: no staging buffer"):
        round_trip(drv, FakeStage(100), 0, ts, lambda: None, what="k")


def test_round_trips_from_12_threads_share_the_lanes(rng):
    """Calls from many threads at once, each with its own stage, all through the shared
    lane pool: every result is right."""
    seed = int(rng.integers(2**31))
    wrong: list[int] = []

    def work(t: int) -> None:
        g = np.random.default_rng([seed, t])
        for _ in range(3):
            n = int(g.integers(1000, 60_000)) | 1
            out, a, b = (g.standard_normal(n).astype(np.float32) for _ in range(3))
            want = out + a + b
            drv, dev = FakeDriver(), Device()
            ts, bufs = _transfers((out, a, b), (True, False, False), (False,) * 3, dev)
            round_trip(drv, FakeStage(_staging.staged_bytes(ts)), 0, ts,
                       lambda drv=drv, bufs=bufs, n=n: drv.launch(_add_kernel(bufs, n)),
                       lanes=4, chunk_bytes=8192, inline_bytes=0)
            if not np.array_equal(out, want):
                wrong.append(t)

    run_threads(work, 12)
    assert wrong == []


@pytest.mark.parametrize("kw,msg", [
    ({"lanes": 0}, r"'lanes' expects an int in \[1, 64\], got 0"),
    ({"lanes": 2.0}, r"'lanes' expects an int in \[1, 64\], got 2.0"),
    ({"chunk_bytes": 5000}, r"'chunk_bytes' expects a multiple of 4096, got 5000"),
    ({"chunk_bytes": 1024}, r"'chunk_bytes' expects an int in \[4096, 268435456\], got 1024"),
    ({"inline_bytes": -1}, r"'inline_bytes' expects an int"),
])
def test_configure_staging_rejects_bad_input(kw, msg):
    with pytest.raises(ArgumentError, match=msg):
        configure_staging(**kw)


def test_configure_staging_returns_what_it_replaced():
    before = configure_staging(lanes=3, chunk_bytes=8192)
    try:
        assert (_staging.LANES, _staging.CHUNK_BYTES) == (3, 8192)
    finally:
        assert configure_staging(**before) == {"lanes": 3, "chunk_bytes": 8192,
                                               "inline_bytes": before["inline_bytes"]}
    assert (_staging.LANES, _staging.CHUNK_BYTES) == (before["lanes"], before["chunk_bytes"])


# -- on the GPU ---------------------------------------------------------------------------
@tk.jit
def fma3(out: tk.DevicePointer[tk.dt.float32], x: tk.DevicePointer[tk.dt.float32],
         y: tk.DevicePointer[tk.dt.float32], n: tk.dt.int32, bid: tk.Uint[tk.BlockIdx],
         tid: tk.Uint[tk.ThreadIdx], bdm: tk.Uint[tk.BlockDim]):
    i = bid * bdm + tid
    with tk.if_(i < n):
        out[i] = out[i] * 0.5 + x[i] * y[i]


def _fma3_ref(out, x, y):
    return out * np.float32(0.5) + x * y


@pytest.mark.gpu
@pytest.mark.parametrize("lanes,chunk", [(8, 1 << 20), (3, 256 << 10), (1, 4 << 20)])
def test_gpu_staged_round_trip_matches_numpy(rng, lanes, chunk):
    """Multi-chunk pageable arrays (odd sizes, written array read too) under several
    lane and chunk settings; read arrays come back untouched."""
    before = configure_staging(lanes=lanes, chunk_bytes=chunk, inline_bytes=0)
    try:
        for n in (1_000_003, 262_147, 7):
            out = rng.standard_normal(n).astype(np.float32)
            x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
            x0, y0 = x.copy(), y.copy()
            want = _fma3_ref(out, x, y)
            fma3[(n + 255) // 256, 256](out, x, y, n)
            np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
            np.testing.assert_array_equal(x, x0)
            np.testing.assert_array_equal(y, y0)
    finally:
        configure_staging(**before)


@pytest.mark.gpu
def test_gpu_pinned_and_pageable_mixed(rng):
    n = 1_500_001
    out = tk.pinned_empty(n, "float32")
    out[:] = rng.standard_normal(n)
    x = rng.standard_normal(n).astype(np.float32)
    y = tk.pinned_empty(n, "float32")
    y[:] = rng.standard_normal(n)
    want = _fma3_ref(out, x, y)
    fma3[(n + 255) // 256, 256](out, x, y, n)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
    page = poisoned(n, np.float32)
    page[:] = 2.0
    fma3[(n + 255) // 256, 256](page, x, y, n)
    np.testing.assert_allclose(page, 1.0 + x * y, rtol=1e-6, atol=1e-6)


@pytest.mark.gpu
def test_gpu_staged_round_trips_from_16_threads(rng):
    """16 threads, each launching with its own multi-chunk pageable arrays (1-3 MB,
    odd sizes), all sharing the lanes: every result matches NumPy."""
    seed = int(rng.integers(2**31))
    wrong: list[int] = []
    start = threading.Barrier(16)

    def work(t: int) -> None:
        g = np.random.default_rng([seed, t])
        start.wait()
        for _ in range(4):
            n = int(g.integers(250_000, 800_000)) | 1
            out, x, y = (g.standard_normal(n).astype(np.float32) for _ in range(3))
            want = _fma3_ref(out, x, y)
            fma3[(n + 255) // 256, 256](out, x, y, n)
            if not np.allclose(out, want, rtol=1e-6, atol=1e-6):
                wrong.append(t)

    run_threads(work, 16)
    assert wrong == []


# -- lanes end when idle (session 12) -----------------------------------------------------

def _staging_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "thork-staging"]


def _until(cond: Any, seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def test_lanes_end_when_idle_and_come_back_for_the_next_call(rng, monkeypatch):
    """An idle lane thread ends after the linger (a live thread state makes every native
    launch release the GIL); the next call starts lanes again and is right."""
    monkeypatch.setattr(_staging, "_LANE_LINGER_S", 0.05)
    for _ in range(2):
        n = 70_001
        out, a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
        want = out + a + b
        drv, dev = FakeDriver(), Device()
        ts, bufs = _transfers((out, a, b), (True, False, False), (False,) * 3, dev)
        round_trip(drv, FakeStage(_staging.staged_bytes(ts)), 0, ts,
                   lambda drv=drv, bufs=bufs, n=n: drv.launch(_add_kernel(bufs, n)),
                   lanes=4, chunk_bytes=8192, inline_bytes=0)
        np.testing.assert_array_equal(out, want)
        pool = _staging._lanes(1)
        assert _until(lambda pool=pool: pool.alive() == 0 and not _staging_threads())


@pytest.mark.parametrize("linger", [0.0, 0.0005, 0.002])
def test_work_submitted_while_lanes_end_is_never_lost(linger, monkeypatch):
    """Lanes that end as soon as the queue is empty (linger 0) race submits from four
    threads: every function runs exactly once and every future completes."""
    monkeypatch.setattr(_staging, "_LANE_LINGER_S", linger)
    pool = _staging._lanes(4)
    ran: list[int] = []
    lock = threading.Lock()
    futures: list[Any] = []

    def submitter(t: int) -> None:
        g = random.Random(t)
        mine = []
        for i in range(300):
            def fn(v: int = t * 1000 + i) -> None:
                with lock:
                    ran.append(v)
            mine.append(pool.submit(fn))
            if g.random() < 0.3:
                time.sleep(g.random() * 2 * linger + 1e-5)
        with lock:
            futures.extend(mine)

    run_threads(submitter, 4, join_seconds=60)
    for f in futures:
        assert f.result(timeout=20) is None
    assert sorted(ran) == sorted(t * 1000 + i for t in range(4) for i in range(300))
    assert pool.alive() <= pool.workers
    monkeypatch.setattr(_staging, "_LANE_LINGER_S", 0.0)
    pool.submit(lambda: None).result(timeout=10)  # wakes any lane still waiting
    assert _until(lambda: pool.alive() == 0)


def test_a_lane_failure_reaches_its_future(monkeypatch):
    monkeypatch.setattr(_staging, "_LANE_LINGER_S", 0.01)
    pool = _staging._lanes(2)

    def boom() -> None:
        raise ValueError("lane says no")

    with pytest.raises(ValueError, match="lane says no"):
        pool.submit(boom).result(timeout=10)
    assert pool.submit(lambda: None).result(timeout=10) is None  # the pool still serves


def test_a_forked_child_starts_with_no_lanes():
    """A child forked while a lane runs has none of its threads: its pool starts new
    lanes for its own work instead of waiting on the parent's."""
    code = textwrap.dedent("""
        import os, threading
        from thork_core import _staging
        pool = _staging._lanes(2)
        go = threading.Event()
        busy = pool.submit(go.wait)
        pid = os.fork()
        if pid == 0:
            ok = pool.alive() == 0 and pool.submit(lambda: None).result(timeout=10) is None
            os._exit(0 if ok else 3)
        go.set()
        busy.result(timeout=10)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
    """)
    r = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "0"
