"""Record a sequence of launches once and replay it as one: ``Graph`` / ``thork.graph()``.

On the GPU a graph is CUDA stream capture: inside ``with Graph() as g:`` every launch
queued on ``g.stream`` (kernels, fkl pipes, other libraries' work) is recorded instead of
run; leaving the block instantiates it, and ``g.replay()`` is one ``cuGraphLaunch``. On
the CPU target the launches are recorded (each with a private copy of its arguments) and
``replay()`` runs them in order. Either way the recorded arguments can be changed between
replays: :meth:`Graph.rebind` swaps an array for another everywhere, :meth:`Graph.set_arg`
sets one argument of one launch (``cuGraphExecKernelNodeSetParams`` on the GPU).

Arrays used inside a graph must stay alive while it is replayed (as in CUDA); outputs a
pipe would allocate should be given as ``out=``.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import ctypes
import struct
import threading
import weakref
from collections.abc import Iterator
from typing import Any

from ._errors import ArgumentError, LaunchError

__all__ = ["Graph", "GraphNode", "RecordingLauncher", "capture_relaxed", "capturing",
           "recorder", "release_retired", "retire"]

_LOCAL = threading.local()

#: GPU captures of Thork Graphs in progress: thread id -> how many that thread began and
#: has not ended. Each Graph counts itself once, at a successful cuStreamBeginCapture, and
#: uncounts itself once, in __exit__ (whatever cuStreamEndCapture answers), under the lock:
#: the counts cannot go out of balance.
_CAPTURES: dict[int, int] = {}
_CAPTURES_LOCK = threading.Lock()

#: Driver handles waiting to be destroyed, process-wide: (driver function name, handle) in
#: the order they are to be destroyed. Finalizers and close() queue here (retire) and
#: never make an unsafe driver call while a Thork capture is in progress; release_retired
#: empties it. A deque: append/popleft are atomic and allocate no tracked object, so a
#: finalizer that the garbage collector runs in the middle of a release, in this thread
#: or another, only queues more.
_RETIRED: collections.deque[tuple[str, Any]] = collections.deque()


def recorder() -> Graph | None:
    """The CPU-target graph recording on this thread, or None. Targets that run launches on
    the host call this first and hand the launch to :meth:`Graph.record` when it is set."""
    return getattr(_LOCAL, "graph", None)


#: struct code of each launcher parameter kind (``P``: a pointer).
_STRUCT = {"P": "Q", "?": "?", "b": "b", "B": "B", "h": "h", "H": "H", "i": "i", "I": "I",
           "q": "q", "Q": "Q", "f": "f", "d": "d"}


class RecordingLauncher:
    """A host target's launcher (``run``/``prepare`` as core's launchers) that hands its
    launches to the CPU :class:`Graph` recording on the calling thread, if any; otherwise
    the wrapped launcher runs them (one attribute lookup more per launch)."""

    __slots__ = ("inner", "kinds")

    def __init__(self, inner: Any, kinds: str) -> None:
        self.inner = inner
        self.kinds = kinds

    def run(self, grid: Any, block: Any, shared: int, stream: int | None, values: Any
            ) -> None:
        graph = getattr(_LOCAL, "graph", None)
        if graph is None:
            self.inner.run(grid, block, shared, stream, values)
        else:
            graph.record(self.inner, self.kinds, grid, block, shared, values)

    def prepare(self, grid: Any, block: Any, shared: int, values: Any) -> _RecordingPrepared:
        return _RecordingPrepared(self, self.inner.prepare(grid, block, shared, values),
                                  grid, block, shared, values)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    # isinstance() sees the wrapped launcher's class (native Launcher or PyLauncher): code
    # that asks which launcher runs a kernel gets the true answer.
    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return type(self.inner)


class _RecordingPrepared:
    """A prepared launch of a :class:`RecordingLauncher`: ``run(pointers, stream=0)``."""

    __slots__ = ("owner", "inner", "grid", "block", "shared", "values", "_pointer_index")

    def __init__(self, owner: RecordingLauncher, inner: Any, grid: Any, block: Any,
                 shared: int, values: Any) -> None:
        self.owner, self.inner = owner, inner
        self.grid, self.block, self.shared = tuple(grid), tuple(block), shared
        self.values = list(values)
        self._pointer_index = [i for i, k in enumerate(owner.kinds) if k == "P"]

    def run(self, pointers: Any, stream: int | None = 0) -> None:
        graph = getattr(_LOCAL, "graph", None)
        if graph is None:
            self.inner.run(pointers, stream)
            return
        values = list(self.values)
        for i, p in zip(self._pointer_index, pointers):
            values[i] = p
        graph.record(self.owner.inner, self.owner.kinds, self.grid, self.block, self.shared,
                     values)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # as RecordingLauncher's: the wrapped prepared's class
        return type(self.inner)


class GraphNode:
    """One recorded kernel launch: ``args`` are its arguments as raw bytes, in parameter
    order (pointers are 8-byte addresses)."""

    __slots__ = ("args", "_graph", "_index", "_handle", "_sizes")

    def __init__(self, graph: Graph, index: int, args: list[bytes], handle: Any = None
                 ) -> None:
        # weak: graph._nodes holds the nodes, so a strong reference back would make every
        # graph whose nodes were read a reference cycle, freed only by the cyclic garbage
        # collector at an unpredictable moment (inside another library's capture, say)
        self._graph = weakref.ref(graph)
        self._index = index
        self.args = args
        self._handle = handle
        self._sizes = [len(a) for a in args]

    def __repr__(self) -> str:
        return f"<GraphNode {self._index}: {len(self.args)} argument(s)>"


class Graph:
    """``with Graph(target=None, stream=None, device=0) as g: ...`` then ``g.replay()``.

    ``target``: ``"gpu"`` (stream capture), ``"cpu"`` (record and replay on the host) or
    None: the GPU when one is usable, else the CPU. ``stream`` (GPU): the stream to
    capture; None creates one, ``g.stream`` (its raw handle), which launches inside the
    block must be queued on. Replays go to ``replay(stream=...)`` (default: the capture
    stream). Thread-safe to replay from several threads; record from one.
    """

    def __init__(self, *, target: str | None = None, stream: Any = None, device: int = 0
                 ) -> None:
        if target not in (None, "gpu", "cpu"):
            raise ArgumentError(f"Graph target: expected 'gpu', 'cpu' or None, got {target!r}")
        if target is None:
            from . import _cuda

            target = "gpu" if _cuda.gpu_status()[0] else "cpu"
        self.target = target
        self.device = device
        self._given_stream = stream
        self.stream = 0
        self._own_stream: Any = None
        self._graph: Any = None
        self._exec: Any = None
        self._launch: Any = None
        self._exec_arg: Any = None
        # cpu: (launcher, kinds, grid, block, shared bytes, values) per recorded launch
        self._host: list[tuple[Any, str, Any, Any, int, list[Any]]] = []
        self._nodes: list[GraphNode] | None = None
        self._state = "new"
        self._lock = threading.RLock()

    # -- recording -----------------------------------------------------------------------
    def __enter__(self) -> Graph:
        if self._state != "new":
            raise LaunchError("a Graph records once; make a new Graph to record again")
        self._state = "recording"
        if self.target == "cpu":
            if recorder() is not None:
                raise LaunchError("a CPU Graph is already recording on this thread")
            _LOCAL.graph = self
            return self
        from . import _cuda

        drv = _cuda.driver()
        _cuda.make_current(self.device)
        if self._given_stream is None:
            self._own_stream = _cuda.check(
                drv.cuStreamCreate(1), "cuStreamCreate")
            self.stream = int(self._own_stream)
        else:
            self.stream = _cuda.stream_handle(self._given_stream)
        if self.stream in (0, 1, 2):
            raise ArgumentError("Graph stream: the legacy/per-thread default stream cannot "
                                "be captured; give a created stream or None")
        release_retired()  # a safe point: no capture of Thork's is in progress here
        _cuda.check(drv.cuStreamBeginCapture(
            self.stream, drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
            "cuStreamBeginCapture")
        self._capture_thread = threading.get_ident()
        with _CAPTURES_LOCK:
            _CAPTURES[self._capture_thread] = _CAPTURES.get(self._capture_thread, 0) + 1
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self.target == "cpu":
            _LOCAL.graph = None
            self._state = "ready" if exc_type is None else "failed"
            return
        from . import _cuda

        drv = _cuda.driver()
        _cuda.make_current(self.device)
        try:
            err, graph = drv.cuStreamEndCapture(self.stream)
        finally:
            self._uncount()
        release_retired()  # what finalizers queued during the capture
        if exc_type is not None or int(err) != 0:
            self._state = "failed"
            if int(err) == 0 and graph is not None:
                retire(("cuGraphDestroy", graph))
            if exc_type is not None:
                return
            _cuda.check((err, graph), "cuStreamEndCapture")
        self._graph = graph
        self._exec = _cuda.check(drv.cuGraphInstantiate(self._graph, 0), "cuGraphInstantiate")
        self._launch, self._by_ctypes = _graph_launcher()
        self._exec_arg = ctypes.c_void_p(int(self._exec)) if self._by_ctypes else self._exec
        self._state = "ready"
        self._native_replay()

    def _uncount(self) -> None:
        """Take this graph's capture off the count, once (a second __exit__ does nothing)."""
        ident = self.__dict__.pop("_capture_thread", None)
        if ident is None:
            return
        with _CAPTURES_LOCK:
            left = _CAPTURES.get(ident, 0) - 1
            if left > 0:
                _CAPTURES[ident] = left
            else:
                _CAPTURES.pop(ident, None)

    def _native_replay(self) -> None:
        """Make ``self.replay`` the native module's ``GraphLaunch`` (one C call per replay:
        no Python frame, no ctypes conversion); where there is no native module, the
        method below serves. The native object hands anything but ``replay()`` /
        ``replay(int handle)`` back to the method, through a weak reference (no cycle)."""
        if not self._by_ctypes:
            return
        from ._cuda import function_address
        from ._native import native_module

        mod = native_module()
        if mod is None or not hasattr(mod, "GraphLaunch"):
            return
        ref = weakref.ref(self)

        def slow(*args: Any, **kw: Any) -> None:
            g = ref()
            if g is None:
                raise LaunchError("Graph.replay: the graph was freed")
            Graph.replay(g, *args, **kw)

        self.replay = mod.GraphLaunch(  # type: ignore[method-assign]
            function_address("cuGraphLaunch"), int(self._exec), self.stream, slow,
            _launch_failed)

    def record(self, launcher: Any, kinds: str, grid: Any, block: Any, shared: int,
               values: Any) -> None:
        """Record one CPU-target launch instead of running it (called by
        :class:`RecordingLauncher`): ``values`` (one per parameter, ``kinds`` as
        :func:`~thork_core._launch.param_kinds`) are copied."""
        self._host.append((launcher, kinds, tuple(grid), tuple(block), shared, list(values)))

    # -- replaying -----------------------------------------------------------------------
    def replay(self, stream: Any = None) -> None:
        """Run the recorded launches: one ``cuGraphLaunch`` on ``stream`` (default: the
        capture stream), asynchronous; on the CPU target, each launch in order."""
        if self._state != "ready":
            raise LaunchError(f"Graph.replay: the graph is {self._state} (record it in a "
                              "'with' block that completes first)")
        if self.target == "cpu":
            for launcher, _, grid, block, shm, values in self._host:
                launcher.run(grid, block, shm, 0, values)
            return
        handle = self.stream if stream is None else _handle(stream)
        if self._by_ctypes:
            err = self._launch(self._exec_arg, ctypes.c_void_p(handle) if handle else None)
        else:
            err = self._launch(self._exec, handle)[0]
        if err:
            _launch_failed(int(err))

    def __call__(self, stream: Any = None) -> None:
        """``g()``: the same as ``g.replay()`` (the native replay where there is one)."""
        self.replay(stream)

    @property
    def exec_handle(self) -> int:
        """The raw ``CUgraphExec`` handle of a recorded GPU graph, as an int (0 on the CPU
        target), for C code or another library that launches it with ``cuGraphLaunch``;
        it stays valid until :meth:`close`.

        Raises:
            LaunchError: If the graph is not recorded (still recording, failed or closed).
        """
        if self._state != "ready":
            raise LaunchError(f"Graph.exec_handle: the graph is {self._state}")
        return 0 if self.target == "cpu" else int(self._exec)

    # -- nodes and updates ---------------------------------------------------------------
    @property
    def nodes(self) -> list[GraphNode]:
        """The recorded kernel launches in order (GPU: the graph's kernel nodes)."""
        if self._state != "ready":
            raise LaunchError(f"Graph.nodes: the graph is {self._state}")
        with self._lock:
            if self._nodes is None:
                self._nodes = self._read_nodes()
            return self._nodes

    def _read_nodes(self) -> list[GraphNode]:
        if self.target == "cpu":
            return [GraphNode(self, i, [struct.pack("<" + _STRUCT[k], v)
                                        for k, v in zip(kinds, values)])
                    for i, (_, kinds, _, _, _, values) in enumerate(self._host)]
        from . import _cuda

        drv = _cuda.driver()
        _, count = _cuda.check(drv.cuGraphGetNodes(self._graph, 0), "cuGraphGetNodes")
        nodes, _ = _cuda.check(drv.cuGraphGetNodes(self._graph, count), "cuGraphGetNodes") \
            if count else ([], 0)
        out: list[Any] = []
        for node in nodes:
            kind = _cuda.check(drv.cuGraphNodeGetType(node), "cuGraphNodeGetType")
            if kind != drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL:
                continue
            params = _KernelNodeParams()
            rc = _node_fn("cuGraphKernelNodeGetParams")(ctypes.c_void_p(int(node)),
                                                        ctypes.byref(params))
            if rc:
                _cuda.check((drv.CUresult(rc),), "cuGraphKernelNodeGetParams")
            args = []
            if params.kernelParams:
                argv = ctypes.cast(params.kernelParams, ctypes.POINTER(ctypes.c_void_p))
                for i, size in enumerate(_param_sizes(params.func)):
                    args.append(ctypes.string_at(argv[i], size))
            out.append(GraphNode(self, len(out), args, (node, params)))
        return out

    def set_arg(self, node: int, index: int, value: Any) -> None:
        """Set argument ``index`` of kernel node ``node`` for later replays.

        ``value``: an array (its address), a NumPy scalar or ctypes value of exactly the
        parameter's size, or bytes of that size. Raises ArgumentError on a size mismatch."""
        n = self.nodes[node] if 0 <= node < len(self.nodes) else None
        if n is None:
            raise ArgumentError(f"Graph.set_arg: node {node} out of range (the graph has "
                                f"{len(self.nodes)} kernel node(s))")
        if not 0 <= index < len(n.args):
            raise ArgumentError(f"Graph.set_arg: node {node} has {len(n.args)} argument(s), "
                                f"got index {index}")
        raw = _bytes_of(value, n._sizes[index], f"Graph.set_arg(node {node}, index {index})")
        with self._lock:
            n.args[index] = raw
            self._apply(n)

    def rebind(self, old: Any, new: Any) -> int:
        """Replace the address of array ``old`` with that of ``new`` in every recorded
        launch; returns how many arguments changed (ArgumentError when none)."""
        a, b = _address(old), _address(new)
        old_raw, new_raw = a.to_bytes(8, "little"), b.to_bytes(8, "little")
        changed = 0
        with self._lock:
            for n in self.nodes:
                hit = False
                for i, raw in enumerate(n.args):
                    if raw == old_raw:
                        n.args[i] = new_raw
                        hit = True
                        changed += 1
                if hit:
                    self._apply(n)
        if not changed:
            raise ArgumentError(f"Graph.rebind: no recorded launch uses the array at {a:#x}")
        return changed

    def _apply(self, n: GraphNode) -> None:
        if self.target == "cpu":
            _, kinds, _, _, _, values = self._host[n._index]
            for i, (k, raw) in enumerate(zip(kinds, n.args)):
                values[i] = struct.unpack("<" + _STRUCT[k], raw)[0]
            return
        node, params = n._handle
        bufs = [ctypes.create_string_buffer(raw, len(raw)) for raw in n.args]
        argv = (ctypes.c_void_p * max(len(bufs), 1))(*[ctypes.addressof(b) for b in bufs])
        new = _KernelNodeParams()
        ctypes.memmove(ctypes.byref(new), ctypes.byref(params), ctypes.sizeof(new))
        new.kernelParams = ctypes.cast(argv, ctypes.c_void_p)
        new.extra = None
        rc = _node_fn("cuGraphExecKernelNodeSetParams")(
            ctypes.c_void_p(int(self._exec)), ctypes.c_void_p(int(node)), ctypes.byref(new))
        if rc:
            from . import _cuda

            _cuda.check((_cuda.driver().CUresult(rc),), "cuGraphExecKernelNodeSetParams")

    def __len__(self) -> int:
        return len(self.nodes)

    # -- lifetime ------------------------------------------------------------------------
    def close(self) -> None:
        """Free the graph (also done when it is garbage collected).

        The driver handles are retired (:func:`retire`): destroyed now, in CUDA's relaxed
        capture mode, unless a Thork capture is in progress in this process, in which case
        they wait for the last one to end. Either way this never invalidates a capture,
        Thork's or another library's (``torch.cuda.graph``, CuPy), on any thread."""
        if "_state" not in self.__dict__:
            return  # __init__ refused its arguments: nothing was made
        native = self.__dict__.pop("replay", None)
        if native is not None:
            native.close()  # a reference kept to g.replay now reaches the method: refused
        if self._exec is None and self._graph is None and self._own_stream is None:
            return
        handles = (("cuGraphExecDestroy", self._exec), ("cuGraphDestroy", self._graph),
                   ("cuStreamDestroy", self._own_stream))
        self._exec = self._graph = self._own_stream = None
        self._state = "closed"
        retire(*[(name, h) for name, h in handles if h is not None])

    def __del__(self) -> None:
        if "_capture_thread" in self.__dict__:
            # dropped mid-capture (its 'with' never exited): its stream is still capturing
            # and must not be destroyed; the count is released so others are not held up
            self._uncount()
            self._own_stream = None  # (leaked: a capturing stream cannot be destroyed)
        self.close()

    def __repr__(self) -> str:
        return f"<Graph {self.target} {self._state}>"


class _KernelNodeParams(ctypes.Structure):
    """``CUDA_KERNEL_NODE_PARAMS_v2`` (CUDA 12+)."""

    _fields_ = [
        ("func", ctypes.c_void_p),
        ("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
        ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint),
        ("blockDimZ", ctypes.c_uint),
        ("sharedMemBytes", ctypes.c_uint),
        ("kernelParams", ctypes.c_void_p),
        ("extra", ctypes.c_void_p),
        ("kern", ctypes.c_void_p),
        ("ctx", ctypes.c_void_p),
    ]


def capturing() -> bool:
    """True while a GPU :class:`Graph` captures on this thread: CUDA then refuses the
    calls that may synchronize (allocation, destruction, stream/event waits on work
    outside the capture), and Thork defers or skips them."""
    return threading.get_ident() in _CAPTURES


@contextlib.contextmanager
def capture_relaxed() -> Iterator[None]:
    """Run the block in CUDA's relaxed capture mode (``cuThreadExchangeStreamCaptureMode``)
    on this thread, restoring the mode after: a kernel's first call loads its module,
    which a capture in progress refuses otherwise, whether it is a Thork Graph's on this
    thread (thread-local mode) or another library's in global mode on any thread
    (``torch.cuda.graph``'s default). Two driver calls, on a kernel's first call only (a
    module load costs far more). Without a driver (the CPU target): nothing."""
    with _relaxed():
        yield


@contextlib.contextmanager
def _relaxed() -> Iterator[Any]:
    """This thread in relaxed capture mode for the block; yields the driver (None where
    there is none: the block then must not call it)."""
    from . import _cuda

    try:
        drv = _cuda.driver()
        relaxed = drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
        prev = _cuda.check(drv.cuThreadExchangeStreamCaptureMode(relaxed),
                           "cuThreadExchangeStreamCaptureMode")
    except Exception:  # noqa: BLE001 - no driver (CPU target) or interpreter shutdown
        yield None
        return
    try:
        yield drv
    finally:
        _cuda.check(drv.cuThreadExchangeStreamCaptureMode(prev),
                    "cuThreadExchangeStreamCaptureMode")


def retire(*items: tuple[str, Any]) -> None:
    """Destroy driver objects safely: each item is ``(driver function name, handle)``,
    e.g. ``("cuStreamDestroy", stream)``, destroyed in the order given.

    Safe from a finalizer, in any thread, at any moment: the handles are queued, and
    destroyed at once only where no capture of Thork's is in progress in this process
    (else when the last one ends), always with the calling thread in CUDA's relaxed
    capture mode, so that a capture another library runs in global mode (on this thread
    or another) is not invalidated by the calls. Never raises."""
    _RETIRED.extend(items)
    if not _CAPTURES:
        release_retired()


def release_retired() -> int:
    """Destroy the handles :func:`retire` queued, unless a capture of Thork's is in
    progress in this process; returns how many were destroyed. Called at the safe
    points: a Graph's capture begins or ends, ``close()``, interpreter exit. Never
    raises (a handle the driver refuses is dropped: nothing else could free it)."""
    if _CAPTURES or not _RETIRED:
        return 0
    done = 0
    with _relaxed() as drv:
        while not _CAPTURES:
            try:
                name, handle = _RETIRED.popleft()
            except IndexError:
                break
            done += 1
            if drv is None:
                continue
            try:
                getattr(drv, name)(handle)
            except Exception:  # noqa: BLE001 - interpreter shutdown: nothing left to free
                pass
    return done


def _release_at_exit() -> None:
    """At interpreter exit: what is still queued (captures left unfinished are over)."""
    with _CAPTURES_LOCK:
        _CAPTURES.clear()
    try:
        release_retired()
    except Exception:  # noqa: BLE001 - the driver may be gone already
        pass


atexit.register(_release_at_exit)


def _launch_failed(err: int) -> None:
    """Raise LaunchError for the driver code ``err`` of a ``cuGraphLaunch``."""
    from . import _cuda

    _cuda.check((_cuda.driver().CUresult(int(err)),), "cuGraphLaunch")


_LIB: list[Any] = []


def _libcuda() -> Any:
    if not _LIB:
        lib = ctypes.CDLL("libcuda.so.1")
        lib.cuGraphLaunch.restype = ctypes.c_int
        _LIB.append(lib)
    return _LIB[0]


def _node_fn(name: str) -> Any:
    """libcuda's ``name`` taking ``CUDA_KERNEL_NODE_PARAMS_v2`` (the ``_v2`` export; the
    unversioned one reads the same leading fields)."""
    lib = _libcuda()
    try:
        fn = getattr(lib, name + "_v2")
    except AttributeError:
        fn = getattr(lib, name)
    fn.restype = ctypes.c_int
    return fn


def _graph_launcher() -> tuple[Any, bool]:
    """``cuGraphLaunch`` through ctypes (pre-converted arguments, the least work per call),
    or cuda-bindings where libcuda cannot be opened by name."""
    try:
        return _libcuda().cuGraphLaunch, True
    except OSError:
        from . import _cuda

        return _cuda.driver().cuGraphLaunch, False


def _param_sizes(func: int) -> list[int]:
    """Byte size of each parameter of a ``CUfunction`` (``cuFuncGetParamInfo``)."""
    try:
        info = _libcuda().cuFuncGetParamInfo
    except AttributeError:
        raise LaunchError("Graph nodes: the driver lacks cuFuncGetParamInfo (CUDA 12.4+ "
                          "drivers have it); replay works, arguments cannot be changed") \
            from None
    info.restype = ctypes.c_int
    sizes: list[int] = []
    off, size = ctypes.c_size_t(), ctypes.c_size_t()
    while info(ctypes.c_void_p(func), ctypes.c_size_t(len(sizes)),
                                 ctypes.byref(off), ctypes.byref(size)) == 0:
        sizes.append(size.value)
    return sizes


def _address(a: Any) -> int:
    if isinstance(a, int):
        return a
    ptr = getattr(a, "ptr", None)
    if isinstance(ptr, int):
        return ptr
    cai = getattr(a, "__cuda_array_interface__", None)
    if cai is not None:
        return int(cai["data"][0])
    ai = getattr(a, "__array_interface__", None)
    if ai is not None:
        return int(ai["data"][0])
    data_ptr = getattr(a, "data_ptr", None)
    if callable(data_ptr):
        return int(data_ptr())
    raise ArgumentError(f"Graph: expected an array or an address, got {type(a).__name__}")


def _bytes_of(value: Any, size: int, where: str) -> bytes:
    if isinstance(value, (bytes, bytearray)):
        raw = bytes(value)
    elif isinstance(value, ctypes._SimpleCData):
        raw = ctypes.string_at(ctypes.addressof(value), ctypes.sizeof(value))
    elif hasattr(value, "dtype") and getattr(value, "shape", None) == ():
        raw = value.tobytes()  # a NumPy scalar: its exact width and bits
    elif isinstance(value, (int, float, bool)):
        raise ArgumentError(f"{where}: a Python {type(value).__name__} has no width; give a "
                            f"NumPy scalar (e.g. numpy.float32(x)) or ctypes value of "
                            f"{size} bytes")
    else:
        raw = _address(value).to_bytes(8, "little")
    if len(raw) != size:
        raise ArgumentError(f"{where}: the parameter has {size} bytes, the value {len(raw)}")
    return raw


def _handle(stream: Any) -> int:
    from ._cuda import stream_handle

    return stream_handle(stream)

