"""What Thork does while a CUDA graph captures must be capture-legal, and replay is one C
call. CPU-runnable: a fake driver records every call and flags the ones CUDA refuses (or
that invalidate the capture) under CUDA's rules for the calling thread's capture mode
(global, thread-local, relaxed) and the captures in progress on every thread. GPU tests:
the bench's sequence (a second capture dropping the first graph), a producer outside the
capture, graphs finalized during Thork's, torch's and CuPy's captures."""

from __future__ import annotations

import ctypes
import gc
import threading
import weakref

import numpy as np
import pytest
import thork as tk
from thork_core import LaunchError, _cuda, _graph
from thork_core._graph import Graph

#: Calls CUDA refuses during a (global or thread-local) capture on this thread: they may
#: synchronize, free or load, and the capture is invalidated.
ILLEGAL_WHILE_CAPTURING = {
    "cuGraphExecDestroy", "cuGraphDestroy", "cuStreamDestroy", "cuStreamSynchronize",
    "cuCtxSynchronize", "cuEventSynchronize", "cuEventQuery", "cuStreamQuery", "cuMemAlloc",
    "cuMemFree", "cuMemcpyHtoD", "cuMemcpyDtoH", "cuModuleLoadData", "cuLibraryLoadData",
}


GLOBAL, THREAD_LOCAL, RELAXED = 0, 1, 2


class FakeDriver:
    """Records calls; tracks which streams capture (in which thread and mode), each
    thread's capture mode and where each event was recorded."""

    class CUstreamCaptureMode:
        CU_STREAM_CAPTURE_MODE_GLOBAL = GLOBAL
        CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = THREAD_LOCAL
        CU_STREAM_CAPTURE_MODE_RELAXED = RELAXED

    class CUevent_flags:
        CU_EVENT_DISABLE_TIMING = 2

    CUresult = int

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.violations: list[str] = []
        self.capturing: dict[int, int] = {}  # stream -> capture id
        self.capture_of: dict[int, tuple[int, int]] = {}  # stream -> (thread, begin mode)
        self.event_stream: dict[int, int] = {}
        self.modes: dict[int, int] = {}  # thread -> capture mode (default global)
        self.mode_at: list[int] = []  # the calling thread's mode at each call
        self._next = 1000
        self._lock = threading.Lock()

    @property
    def mode(self) -> int:
        """This thread's capture mode (cuThreadExchangeStreamCaptureMode)."""
        return self.modes.get(threading.get_ident(), GLOBAL)

    def _new(self) -> int:
        with self._lock:
            self._next += 1
            return self._next

    def __getattr__(self, name: str):  # any call not modelled below: recorded, succeeds
        if not name.startswith("cu"):
            raise AttributeError(name)

        def call(*args):
            self._note(name, args)
            return (0,)
        return call

    def prohibited(self) -> bool:
        """CUDA's rule: is the calling thread barred from potentially unsafe calls now?"""
        me, mode = threading.get_ident(), self.mode
        if mode == RELAXED:
            return False
        for stream, (thread, begun) in list(self.capture_of.items()):
            if stream not in self.capturing:
                continue
            if thread == me and begun != RELAXED:
                return True
            if mode == GLOBAL and thread != me and begun == GLOBAL:
                return True
        return False

    def _note(self, name: str, args: tuple) -> None:
        with self._lock:
            self.calls.append((name, *args))
            self.mode_at.append(self.mode)
        if name in ILLEGAL_WHILE_CAPTURING and self.prohibited():
            self.violations.append(f"{name}{args} during capture")

    def cuThreadExchangeStreamCaptureMode(self, mode):
        self._note("cuThreadExchangeStreamCaptureMode", (mode,))
        prev = self.mode
        self.modes[threading.get_ident()] = int(mode)
        return 0, prev

    def cuStreamCreate(self, flags):
        self._note("cuStreamCreate", (flags,))
        return 0, self._new()

    def cuStreamBeginCapture(self, stream, mode):
        self._note("cuStreamBeginCapture", (stream,))
        self.capture_of[int(stream)] = (threading.get_ident(), int(mode))
        self.capturing[int(stream)] = self._new()
        return (0,)

    def cuStreamEndCapture(self, stream):
        self._note("cuStreamEndCapture", (stream,))
        self.capturing.pop(int(stream))
        self.capture_of.pop(int(stream), None)
        return 0, self._new()

    def cuGraphInstantiate(self, graph, flags):
        self._note("cuGraphInstantiate", (graph,))
        return 0, self._new()

    def cuStreamGetCaptureInfo(self, stream):
        self._note("cuStreamGetCaptureInfo", (stream,))
        ident = self.capturing.get(int(stream))
        return (0, 1, ident) if ident is not None else (0, 0, 0)

    def cuEventCreate(self, flags):
        self._note("cuEventCreate", (flags,))
        return 0, self._new()

    def cuEventRecord(self, ev, stream):
        self._note("cuEventRecord", (ev, stream))
        self.event_stream[ev] = int(stream)
        return (0,)

    def cuStreamWaitEvent(self, stream, ev, flags):
        self._note("cuStreamWaitEvent", (stream, ev, flags))
        ident = self.capturing.get(int(stream))
        if ident is not None and self.capturing.get(self.event_stream.get(ev, -1)) != ident:
            self.violations.append(f"capturing stream {stream} waits on an event recorded "
                                   "outside its capture")
        return (0,)

    def cuGetErrorName(self, err):
        return 0, b"CUDA_ERROR_FAKE"

    def cuGetErrorString(self, err):
        return 0, b"fake failure"


def _install_fake(monkeypatch) -> FakeDriver:
    """The fixture's work: first, other tests' garbage graphs are collected and destroyed
    through the driver that made them (never through this fake, which would record their
    real handles and leak them); then the fake replaces the driver."""
    gc.collect()
    _graph.release_retired()
    drv = FakeDriver()
    monkeypatch.setattr(_cuda, "driver", lambda: drv)
    monkeypatch.setattr(_cuda, "make_current", lambda ordinal=0: None)
    # replay through the fake's cuGraphLaunch (not libcuda's, which would get fake handles)
    monkeypatch.setattr(_graph, "_graph_launcher", lambda: (drv.cuGraphLaunch, False))
    return drv


@pytest.fixture
def fake(monkeypatch):
    drv = _install_fake(monkeypatch)
    yield drv
    # and this test's garbage (fake handles) goes through the fake, not a later test's
    # real driver
    gc.collect()
    _graph.release_retired()
    left = dict(_graph._CAPTURES)
    _graph._CAPTURES.clear()
    assert not left, f"capture counts left over: {left}"
    assert not _graph._RETIRED, "handles left queued"


def _destroyed(drv: FakeDriver) -> list[tuple]:
    return [c for c in drv.calls if c[0] in ("cuGraphExecDestroy", "cuGraphDestroy",
                                             "cuStreamDestroy")]


def test_dropping_a_graph_while_capturing_defers_its_destruction(fake):
    """``with tk.graph() as g`` a second time frees the first ``g`` right after the new
    capture began (the bench_interop failure): its destroy calls must wait for the end."""
    g = Graph(target="gpu")
    with g:
        pass
    first = (g._exec, g._graph, g._own_stream)
    with Graph(target="gpu") as g:  # rebinding g drops the first graph here
        gc.collect()
        assert fake.capturing, "the second capture is active"
        assert not _destroyed(fake), "the first graph was destroyed during the capture"
    assert not fake.violations, fake.violations
    names = [c[0] for c in fake.calls]
    end = max(i for i, n in enumerate(names) if n == "cuStreamEndCapture")
    gone = {c[1] for c in _destroyed(fake)}
    assert set(first) <= gone
    assert all(i > end for i, c in enumerate(fake.calls) if c in _destroyed(fake))
    g.close()
    assert {g._exec, g._graph} == {None}


def test_close_outside_a_capture_destroys_at_once(fake):
    g = Graph(target="gpu")
    with g:
        pass
    exec_ = g._exec
    g.close()
    assert ("cuGraphExecDestroy", exec_) in fake.calls
    with pytest.raises(LaunchError, match="closed"):
        g.replay()


def test_a_module_loaded_during_a_capture_is_loaded_in_relaxed_mode(fake):
    """A kernel's first call loads its module: GpuExecutable does that inside
    capture_relaxed(), which switches this thread to relaxed mode and back, always (a
    capture another library began, which Thork cannot see, is protected too)."""
    from thork_core._graph import capture_relaxed

    with capture_relaxed():
        assert fake.mode == RELAXED
    assert fake.mode == GLOBAL
    assert [c[0] for c in fake.calls] == ["cuThreadExchangeStreamCaptureMode"] * 2
    with Graph(target="gpu"):
        with capture_relaxed():
            fake.cuModuleLoadData(b"cubin")
        assert fake.mode == GLOBAL  # restored
        fake.cuModuleLoadData(b"cubin")  # the same load without it: flagged
    assert len(fake.violations) == 1 and "cuModuleLoadData" in fake.violations[0]
    fake.violations.clear()
    foreign = 4242  # torch.cuda.graph's default: a global-mode capture, on another thread
    t = threading.Thread(target=fake.cuStreamBeginCapture, args=(foreign, GLOBAL))
    t.start()
    t.join()
    with capture_relaxed():
        fake.cuModuleLoadData(b"cubin")
    assert not fake.violations, fake.violations
    fake.cuModuleLoadData(b"cubin")
    assert len(fake.violations) == 1  # (the fake's rule: global mode sees the capture)
    fake.violations.clear()
    fake.capturing.pop(foreign)


def test_stream_wait_inside_a_capture_is_capture_legal(fake):
    """A producer outside the capture gets no wait node (CUDA forbids waiting on an event
    recorded outside it); a producer forked inside the same capture is waited for; outside
    any capture the wait is made as always."""
    other = 7
    with Graph(target="gpu") as g:
        _cuda.stream_wait(0, producer=other, consumer=g.stream)
        _cuda.stream_wait(0, producer=0, consumer=g.stream)
        assert not [c for c in fake.calls if c[0] == "cuStreamWaitEvent"]
        fake.capturing[other] = fake.capturing[g.stream]  # 'other' joined this capture
        _cuda.stream_wait(0, producer=other, consumer=g.stream)
        waits = [c for c in fake.calls if c[0] == "cuStreamWaitEvent"]
        assert len(waits) == 1 and waits[0][1] == g.stream
        del fake.capturing[other]
    _cuda.stream_wait(0, producer=other, consumer=g.stream)
    assert len([c for c in fake.calls if c[0] == "cuStreamWaitEvent"]) == 2
    assert not fake.violations, fake.violations
    g.close()


def test_native_replay_is_one_c_call_and_refuses_a_closed_graph(fake, monkeypatch):
    from thork_core._native import native_module

    mod = native_module()
    if mod is None:
        pytest.skip("no native module here (no C compiler)")
    seen: list[tuple[int | None, int | None]] = []
    fail = {"code": 0}

    @ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
    def launch(exec_, stream):
        seen.append((exec_, stream))
        return fail["code"]

    monkeypatch.setattr(_cuda, "function_address",
                        lambda name: ctypes.cast(launch, ctypes.c_void_p).value)
    g = Graph(target="gpu")
    with g:
        pass
    g._launch, g._by_ctypes = launch, True  # what _graph_launcher gives with libcuda
    g._exec_arg = ctypes.c_void_p(int(g._exec))
    g._native_replay()
    assert isinstance(g.replay, mod.GraphLaunch)
    g.replay()
    g.replay(12345)
    g()  # __call__ takes the same path
    assert seen == [(g._exec, g.stream), (g._exec, 12345), (g._exec, g.stream)]

    class Stream:  # a stream object: the Python replay resolves it
        cuda_stream = 999
    g.replay(Stream())
    assert seen[-1] == (g._exec, 999)
    fail["code"] = 700
    with pytest.raises(LaunchError, match="cuGraphLaunch failed: CUDA_ERROR_FAKE"):
        g.replay()
    fail["code"] = 0
    kept = g.replay
    g.close()
    n = len(seen)
    with pytest.raises(LaunchError, match="closed"):
        kept()
    assert len(seen) == n  # the closed graph's handle was not launched


def _made(drv: FakeDriver) -> Graph:
    """A recorded GPU graph (empty) on the installed driver."""
    g = Graph(target="gpu")
    with g:
        pass
    return g


def _handles(g: Graph) -> set:
    return {g._exec, g._graph, g._own_stream}


def test_another_tests_cyclic_garbage_graph_never_reaches_the_fake(monkeypatch):
    """The session-12 suite failure, made deterministic: a Graph an earlier test left in a
    reference cycle (made with the real driver) was finalized once this file's fake was
    installed, so its real handles were "destroyed" through the fake (the test saw them,
    and they leaked). Without collecting first it happens; the fixture collects first."""
    real = FakeDriver()  # the earlier test's (real) driver
    real._next = 10**6  # (its handles differ from the fake's)
    monkeypatch.setattr(_cuda, "driver", lambda: real)
    monkeypatch.setattr(_cuda, "make_current", lambda ordinal=0: None)
    monkeypatch.setattr(_graph, "_graph_launcher", lambda: (real.cuGraphLaunch, False))
    gc.disable()  # (no automatic collection in between: the order is the test's)
    try:
        old = _made(real)
        first = _handles(old)
        old.cycle = old  # garbage only the cyclic collector frees
        del old
        bare = FakeDriver()  # the failure: a fake installed over uncollected garbage
        monkeypatch.setattr(_cuda, "driver", lambda: bare)
        gc.collect()
        assert {c[1] for c in _destroyed(bare)} == first  # real handles went to the fake
        monkeypatch.setattr(_cuda, "driver", lambda: real)
        old = _made(real)
        second = _handles(old)
        old.cycle = old
        del old
        fake = _install_fake(monkeypatch)  # the fixture's way: collect first
        g = _made(fake)
        with Graph(target="gpu") as g:  # noqa: F811 - drops the first g here
            gc.collect()
            assert not _destroyed(fake)
        assert not fake.violations, fake.violations
        g.close()
    finally:
        gc.enable()
    assert {c[1] for c in _destroyed(real)} == second
    assert not {c[1] for c in fake.calls} & second


def test_a_graph_finalized_in_another_thread_during_a_capture_waits_for_its_end(fake):
    """The garbage collector runs finalizers in whichever thread allocates: a graph
    finalized in another thread while this one captures is queued, not destroyed, and
    destroyed (each handle once, in relaxed mode) when the capture ends."""
    old = _made(fake)
    handles = _handles(old)
    old.cycle = old
    ref = weakref.ref(old)
    del old
    with Graph(target="gpu") as g:
        t = threading.Thread(target=gc.collect)
        t.start()
        t.join()
        assert ref() is None, "finalized in the other thread"
        assert not _destroyed(fake), "destroyed during the capture"
        assert len(_graph._RETIRED) == 3
    assert not fake.violations, fake.violations
    names = [c[0] for c in fake.calls]
    end = max(i for i, n in enumerate(names) if n == "cuStreamEndCapture")
    gone = [(i, c) for i, c in enumerate(fake.calls) if c in _destroyed(fake)]
    assert sorted(c[1] for _, c in gone) == sorted(handles)  # each once
    assert all(i > end and fake.mode_at[i] == RELAXED for i, _ in gone)
    assert not _graph._RETIRED and fake.mode == GLOBAL
    g.close()


@pytest.mark.parametrize("where", ["this thread", "another thread"])
def test_a_graph_dropped_during_a_foreign_global_capture_leaves_it_valid(fake, where):
    """A capture Thork did not begin (torch.cuda.graph, CuPy) in global mode, which Thork
    cannot see: a Thork graph finalized meanwhile is destroyed with this thread in relaxed
    mode, which CUDA does not refuse (the same call in global mode would invalidate the
    capture: the torch test's segfault of session 12)."""
    foreign = 4242
    if where == "this thread":
        fake.cuStreamBeginCapture(foreign, GLOBAL)
    else:
        t = threading.Thread(target=fake.cuStreamBeginCapture, args=(foreign, GLOBAL))
        t.start()
        t.join()
    old = _made(fake)
    assert not fake.violations  # (an empty Thork capture inside is legal: thread-local)
    handles = _handles(old)
    old.cycle = old
    del old
    gc.collect()
    assert not fake.violations, fake.violations
    gone = [(i, c) for i, c in enumerate(fake.calls) if c in _destroyed(fake)]
    assert sorted(c[1] for _, c in gone) == sorted(handles)
    assert all(fake.mode_at[i] == RELAXED for i, _ in gone)
    assert fake.mode == GLOBAL
    fake.cuStreamDestroy(1)  # the control: the same call in the thread's own mode
    assert len(fake.violations) == 1
    fake.violations.clear()
    fake.capturing.pop(foreign)


def test_capture_counts_stay_balanced(fake):
    """Each capture counts once and uncounts once, whatever happens: an exception in the
    block, a failed cuStreamEndCapture, a failed cuStreamBeginCapture, a graph dropped
    with its capture never ended."""
    with pytest.raises(ZeroDivisionError):
        with Graph(target="gpu"):
            1 / 0  # noqa: B018
    assert not _graph._CAPTURES and not _graph.capturing()

    def end_invalidated(stream):
        fake.capturing.pop(int(stream))
        return 901, None  # CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
    fake.cuStreamEndCapture = end_invalidated
    g = Graph(target="gpu")
    with pytest.raises(LaunchError, match="cuStreamEndCapture"):
        with g:
            pass
    assert g._state == "failed" and not _graph._CAPTURES
    del fake.cuStreamEndCapture
    fake.cuStreamBeginCapture = lambda stream, mode: (999,)
    with pytest.raises(LaunchError, match="cuStreamBeginCapture"):
        Graph(target="gpu").__enter__()
    assert not _graph._CAPTURES
    del fake.cuStreamBeginCapture
    g = Graph(target="gpu")
    g.__enter__()  # never exited: dropped mid-capture
    assert _graph.capturing()
    stream = g._own_stream
    del g
    gc.collect()
    assert not _graph._CAPTURES and not _graph.capturing()
    assert ("cuStreamDestroy", stream) not in fake.calls  # a capturing stream: left alone
    fake.capturing.clear()


def test_eight_threads_capturing_and_dropping_graphs(fake):
    """8 threads, each capturing 25 graphs into the same name (dropping the previous one
    during the capture), some left as cyclic garbage that any thread's collection
    finalizes: every handle is destroyed exactly once, always in relaxed mode, nothing is
    refused, and no count is left over."""
    made: list[tuple] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def work(k: int) -> None:
        try:
            barrier.wait()
            for i in range(25):
                with Graph(target="gpu") as g:
                    assert _graph.capturing()
                    if (i + k) % 4 == 0:
                        gc.collect()
                made.append((g._exec, g._graph, g._own_stream))
                if i % 2:
                    g.cycle = g
            assert not _graph.capturing()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    gc.collect()
    _graph.release_retired()
    assert not errors, errors
    assert not fake.violations, fake.violations
    handles = [h for hs in made for h in hs]
    assert len(handles) == len(set(handles)) == 8 * 25 * 3
    gone = [(i, c) for i, c in enumerate(fake.calls) if c[0] in
            ("cuGraphExecDestroy", "cuGraphDestroy", "cuStreamDestroy")]
    assert sorted(c[1] for _, c in gone) == sorted(handles)  # each exactly once
    assert all(fake.mode_at[i] == RELAXED for i, _ in gone)
    assert not _graph._CAPTURES and not _graph._RETIRED


def test_reading_nodes_leaves_no_reference_cycle(fake):
    """A graph's nodes refer to it weakly: dropping the last reference frees it at once
    (not at some later cyclic collection, inside whatever runs then)."""
    from thork_core._graph import GraphNode

    g = _made(fake)
    handles = _handles(g)
    g._nodes = [GraphNode(g, 0, [])]  # what .nodes builds
    ref = weakref.ref(g)
    gc.disable()
    try:
        del g
        assert ref() is None
    finally:
        gc.enable()
    assert {c[1] for c in _destroyed(fake)} == handles


def test_a_pinned_block_freed_during_a_capture_waits_for_its_end(fake):
    """tk.pinned_empty's memory (cuMemFreeHost, which may synchronize) takes the same
    queue as graphs."""
    from thork_core._memory import PinnedBlock

    block = PinnedBlock.__new__(PinnedBlock)  # (no driver allocation: a fake address)
    block.address = 0xDEAD000
    with Graph(target="gpu") as g:
        del block
        assert not [c for c in fake.calls if c[0] == "cuMemFreeHost"]
    i = fake.calls.index(("cuMemFreeHost", 0xDEAD000))
    assert fake.mode_at[i] == RELAXED and not fake.violations
    g.close()


# -- GPU ------------------------------------------------------------------------------------
@tk.jit
def add(out: tk.DevicePointer[tk.dt.float32], a: tk.DevicePointer[tk.dt.float32],
        b: tk.DevicePointer[tk.dt.float32], n: tk.dt.int32, bid: tk.Uint[tk.BlockIdx],
        tid: tk.Uint[tk.ThreadIdx], bdm: tk.Uint[tk.BlockDim]):
    i = bid * bdm + tid
    with tk.if_(i < n):
        out[i] = a[i] + b[i]


@pytest.mark.gpu
def test_gpu_second_capture_after_the_first_graph_is_dropped(rng):
    """bench_interop's sequence: capture 1 node, replay, capture 5 nodes into the same
    name (the first graph is freed during the second capture), replay both counts."""
    from thork_core.runtime import DeviceArray, driver

    n = 1031
    a_np, b_np = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n,
                                                                               dtype=np.float32)
    a, b = DeviceArray.from_host(a_np), DeviceArray.from_host(b_np)
    out = DeviceArray.from_host(np.full(n, np.nan, np.float32))
    launch = add[(n + 127) // 128, 128]
    for nodes in (1, 5):
        out.copy_from_host(np.full(n, np.nan, np.float32))
        with tk.graph() as g:
            for _ in range(nodes):
                launch(out, a, b, n, stream=g.stream)
        assert len(g) == nodes
        g.replay()
        driver().cuStreamSynchronize(g.stream)
        np.testing.assert_allclose(out.to_host(), a_np + b_np, rtol=1e-6)


@pytest.mark.gpu
def test_gpu_capture_with_an_array_produced_on_another_stream(rng):
    """An argument whose producer stream is outside the capture: the capture succeeds (no
    wait node on an outside event) and the replay, ordered after the producer by the
    caller, computes the sum."""
    from thork_core.runtime import DeviceArray, driver

    n = 777
    a_np, b_np = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n,
                                                                               dtype=np.float32)
    _cuda.make_current(0)  # (the driver initialized: this may be a worker's first GPU test)
    producer = int(_cuda.check(driver().cuStreamCreate(1), "cuStreamCreate"))
    try:
        a = DeviceArray.from_host(a_np, stream=producer)  # a.stream: the producer stream
        b = DeviceArray.from_host(b_np)
        out = DeviceArray.from_host(np.full(n, np.nan, np.float32))
        driver().cuStreamSynchronize(producer)
        with tk.graph() as g:
            add[(n + 127) // 128, 128](out, a, b, n, stream=g.stream)
        g.replay()
        driver().cuStreamSynchronize(g.stream)
        np.testing.assert_allclose(out.to_host(), a_np + b_np, rtol=1e-6)
        g.close()
        del a
    finally:
        driver().cuStreamSynchronize(producer)
        driver().cuStreamDestroy(producer)


@pytest.mark.gpu
def test_gpu_first_call_of_a_kernel_inside_a_capture(rng):
    """A kernel never called before is compiled and its module loaded inside the capture
    (in relaxed mode); the capture stays valid and the replay computes."""
    from thork_core.runtime import DeviceArray, driver

    @tk.jit
    def scale3(out: tk.DevicePointer[tk.dt.float32], a: tk.DevicePointer[tk.dt.float32],
               n: tk.dt.int32, bid: tk.Uint[tk.BlockIdx], tid: tk.Uint[tk.ThreadIdx],
               bdm: tk.Uint[tk.BlockDim]):
        i = bid * bdm + tid
        with tk.if_(i < n):
            out[i] = a[i] * 3.0

    n = 515
    a_np = rng.standard_normal(n, dtype=np.float32)
    a = DeviceArray.from_host(a_np)
    out = DeviceArray.from_host(np.full(n, np.nan, np.float32))
    with tk.graph() as g:
        scale3[(n + 127) // 128, 128](out, a, n, stream=g.stream)
    g.replay()
    driver().cuStreamSynchronize(g.stream)
    np.testing.assert_allclose(out.to_host(), a_np * 3, rtol=1e-6)


def _garbage_graph(n: int, out, a, b) -> weakref.ref:
    """A real recorded graph (one ``add``), replayed once, its nodes read, then left in a
    reference cycle: garbage the cyclic collector frees whenever it runs next."""
    from thork_core.runtime import driver

    with tk.graph() as g:
        add[(n + 127) // 128, 128](out, a, b, n, stream=g.stream)
    g.replay()
    driver().cuStreamSynchronize(g.stream)
    assert len(g.nodes) == 1
    g.cycle = g
    return weakref.ref(g)


def _collect(where: str) -> None:
    if where == "this thread":
        gc.collect()
    else:
        t = threading.Thread(target=gc.collect)
        t.start()
        t.join()


@pytest.mark.gpu
@pytest.mark.parametrize("where", ["this thread", "another thread"])
def test_gpu_thork_graph_collected_during_a_torch_capture(rng, where):
    """torch.cuda.graph captures in global mode (its default): a Thork graph finalized
    meanwhile, in this thread or another, must not invalidate it (session 12's suite
    crash: a garbage Graph destroyed inside torch's capture). The capture completes and
    its replay computes; the Thork graph's handles are gone."""
    torch = pytest.importorskip("torch")
    from thork_core.runtime import DeviceArray

    n = 1031
    a = DeviceArray.from_host(rng.standard_normal(n, dtype=np.float32))
    b = DeviceArray.from_host(rng.standard_normal(n, dtype=np.float32))
    out = DeviceArray.from_host(np.full(n, np.nan, np.float32))
    static_in = torch.randn(4099, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up outside capture
        static_in * 2 + 1
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    gc.collect()  # (only the graph below is garbage during the capture)
    ref = _garbage_graph(n, out, a, b)
    tg = torch.cuda.CUDAGraph()
    with torch.cuda.graph(tg):
        static_out = static_in * 2 + 1
        _collect(where)
        assert ref() is None
    new = torch.randn(4099, device="cuda")
    static_in.copy_(new)
    tg.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(static_out, new * 2 + 1)
    assert not _graph._RETIRED and not _graph._CAPTURES


@pytest.mark.gpu
def test_gpu_thork_graph_collected_during_a_cupy_global_capture(rng):
    """CuPy's capture on a blocking stream, in global mode: the same guarantee."""
    cp = pytest.importorskip("cupy")
    from thork_core.runtime import DeviceArray

    n = 1031
    a = DeviceArray.from_host(rng.standard_normal(n, dtype=np.float32))
    b = DeviceArray.from_host(rng.standard_normal(n, dtype=np.float32))
    out = DeviceArray.from_host(np.full(n, np.nan, np.float32))
    x = cp.asarray(rng.standard_normal(2049, dtype=np.float32))
    y = cp.empty_like(x)
    cp.multiply(x, 3, out=y)  # warm-up
    cp.cuda.Device().synchronize()
    gc.collect()  # (only the graph below is garbage during the capture)
    ref = _garbage_graph(n, out, a, b)
    s = cp.cuda.Stream()  # blocking, as CuPy makes them by default
    with s:
        s.begin_capture(mode=cp.cuda.runtime.streamCaptureModeGlobal)
        cp.multiply(x, 3, out=y)
        _collect("another thread")
        assert ref() is None
        graph = s.end_capture()
    y[:] = cp.nan
    cp.cuda.Device().synchronize()
    graph.launch(s)
    s.synchronize()
    cp.testing.assert_allclose(y, x * 3, rtol=1e-6)
    assert not _graph._RETIRED


@pytest.mark.gpu
def test_gpu_thork_graph_collected_in_another_thread_during_a_thork_capture(rng):
    """A garbage graph finalized in another thread while this one captures: queued, freed
    when the capture ends; the capture is valid and its replay computes."""
    from thork_core.runtime import DeviceArray, driver

    n = 1031
    a_np, b_np = (rng.standard_normal(n, dtype=np.float32) for _ in range(2))
    a, b = DeviceArray.from_host(a_np), DeviceArray.from_host(b_np)
    out = DeviceArray.from_host(np.full(n, np.nan, np.float32))
    scratch = DeviceArray.from_host(np.zeros(n, np.float32))
    gc.collect()
    ref = _garbage_graph(n, scratch, a, b)
    with tk.graph() as g:
        add[(n + 127) // 128, 128](out, a, b, n, stream=g.stream)
        _collect("another thread")
        assert ref() is None
        assert len(_graph._RETIRED) == 3  # waiting for this capture's end
    assert not _graph._RETIRED
    g.replay()
    driver().cuStreamSynchronize(g.stream)
    np.testing.assert_allclose(out.to_host(), a_np + b_np, rtol=1e-6)
