"""Core's native launch module (``_native_launch.c``) without a GPU: a ctypes stand-in for
``cuLaunchKernel`` records what the C code passes, so the slot writes, the geometry, the
stream, the error path and the guard's decisions are checked here; the GPU suite runs the
same module against the driver. The Python guard (``ArrayGuard``, the fallback) is held to
the same decisions."""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import threading
from typing import Any

import numpy as np
import pytest
from helpers import run_python
from helpers.launch_recorder import (
    BIND_CASES,
    F32,
    SHAPE_IN,
    SHAPE_OUT,
    U8,
    Cai,
    CaiArray,
    PyLaunch,
    Recorder,
    Stream,
    device_array,
    guard_array,
    make_binder,
    to_handle,
)
from thork_core import DeviceArray, LaunchError, dt
from thork_core._launch import CONV_CU, ArrayGuard, PyLauncher
from thork_core._native import _reset, native_module, native_status


@pytest.fixture(params=["native", "python"])
def which(request, native):
    """The native module, or "python" for the Python launcher: one behaviour."""
    return native if request.param == "native" else "python"


def test_status_names_what_happened(native):
    status = native_status()
    assert status.split()[0] == "ready"
    # The module's file is the cache's verified library store entry (lib/<sha256 of its
    # bytes>.so). Another test of this worker may have cleared the cache since the module
    # was loaded (a loaded library needs no file), so the name is checked always and the
    # content where the file is still there.
    path = status.split(maxsplit=1)[1]
    folder, name = os.path.split(path)
    assert os.path.basename(folder) == "lib"
    assert re.fullmatch(r"[0-9a-f]{64}\.so", name), name
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return
    assert hashlib.sha256(data).hexdigest() == name[:-3]


def test_run_passes_the_pointers_scalars_and_launch(which, rng):
    rec = Recorder()
    launch = rec.launch(which)
    for _ in range(3):
        a, b = (int(v) for v in rng.integers(1, 2**63, size=2, dtype=np.int64))
        stream = int(rng.integers(1, 2**40))
        assert launch.run([a, b], stream) is None
        call = rec.calls[-1]
        assert call["pointers"] == (a, b) and call["stream"] == stream
        assert call["scalars"] == (2.5, -7)  # the prepared scalars
        assert call["function"] == 0xF00D and call["extra"] is None
        assert call["grid"] == (5, 3, 1) and call["block"] == (128, 2, 1)
        assert call["shared"] == 96
    launch.run((1, 2**64 - 1))  # tuples too; stream defaults to the legacy stream
    assert rec.calls[-1]["pointers"] == (1, 2**64 - 1) and rec.calls[-1]["stream"] == 0


def test_a_plain_run_converts_every_value(which, rng):
    rec = Recorder()
    launcher = rec.launcher(which)
    for _ in range(3):
        a, b = (int(v) for v in rng.integers(1, 2**63, size=2, dtype=np.int64))
        f = float(np.float32(rng.standard_normal()))
        k = int(rng.integers(-2**31, 2**31))
        launcher.run((7, 1, 2), (32, 4, 1), 0, 11, [a, f, b, k])
        call = rec.calls[-1]
        assert call["pointers"] == (a, b) and call["scalars"] == (f, k)
        assert call["grid"] == (7, 1, 2) and call["block"] == (32, 4, 1)
        assert call["stream"] == 11
    with pytest.raises(OverflowError):
        launcher.run((1, 1, 1), (1, 1, 1), 0, 0, [1, 1.0, 2, 2**31])  # int32 slot
    with pytest.raises(ValueError, match="values: 4 expected"):
        launcher.run((1, 1, 1), (1, 1, 1), 0, 0, [1, 1.0, 2])
    assert len(rec.calls) == 3


def test_run_rejects_bad_arguments_before_launching(which):
    rec = Recorder()
    launch = rec.launch(which)
    with pytest.raises(ValueError, match="pointers: 2 addresses expected, got 3"):
        launch.run([1, 2, 3], 0)
    with pytest.raises(TypeError):
        launch.run(5, 0)
    with pytest.raises(OverflowError):
        launch.run([-1, 2], 0)
    with pytest.raises(TypeError):
        launch.run()
    assert rec.calls == []


def test_construction_checks_its_arguments(which):
    rec = Recorder()
    cls = PyLauncher if which == "python" else which.Launcher
    fn = ctypes.cast(rec.fn, ctypes.c_void_p).value
    with pytest.raises(ValueError, match="fn: a non-null function address"):
        cls(CONV_CU, 0, 1, "PP", print)
    with pytest.raises(TypeError, match="on_error must be callable"):
        cls(CONV_CU, fn, 1, "PP", None)
    with pytest.raises(ValueError, match="conv: 0, 1 or 2"):
        cls(7, fn, 1, "PP", print)
    with pytest.raises(ValueError, match="kinds: unknown parameter kind"):
        cls(CONV_CU, fn, 1, "Px", print)
    with pytest.raises(ValueError, match="ctx needs ctx_get and ctx_set"):
        cls(CONV_CU, fn, 1, "PP", print, 5)
    launcher = cls(CONV_CU, fn, 1, "PP", print)
    with pytest.raises(ValueError, match="grid: dimensions must be 1..2"):
        launcher.run((0, 1, 1), (1, 1, 1), 0, 0, [1, 2])
    with pytest.raises(ValueError, match="block: expected 3 dimensions"):
        launcher.prepare((1, 1, 1), (1, 1), 0, [1, 2])
    with pytest.raises(ValueError, match="values: 2 expected"):
        launcher.prepare((1, 1, 1), (1, 1, 1), 0, [1])
    assert rec.calls == []


def test_an_uninitialized_launcher_refuses_to_run(native):
    launcher = native.Launcher.__new__(native.Launcher)
    with pytest.raises(RuntimeError, match="Launcher was not initialized"):
        launcher.run((1, 1, 1), (1, 1, 1), 0, 0, [])
    with pytest.raises(RuntimeError, match="Launcher was not initialized"):
        launcher.prepare((1, 1, 1), (1, 1, 1), 0, [])


def test_a_driver_error_goes_to_on_error(which):
    rec = Recorder(result=701)  # CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES

    def on_error(err: int, grid: Any, block: Any) -> None:
        raise LaunchError(f"cuLaunchKernel failed with {err} for {tuple(grid)} "
                          f"{tuple(block)}")

    launch = rec.launch(which, on_error)
    with pytest.raises(LaunchError, match=r"failed with 701 for \(5, 3, 1\) \(128, 2, 1\)"):
        launch.run([16, 32], 0)
    assert len(rec.calls) == 1


# -- the guard: native and Python, one behaviour -------------------------------------------

def _guards(native):
    """(guard, calls) for the native and the Python implementation, same configuration:
    a uint8 input and a float32 output, kernel slots (out, in), 16-byte alignment."""
    specs = [(SHAPE_IN, U8, 0), (SHAPE_OUT, F32, 0)]
    rec = Recorder()
    native_guard = rec.launch(native).guard(DeviceArray, specs, [1, 0], 15, to_handle)
    py = PyLaunch()
    py_guard = ArrayGuard(py, DeviceArray, specs, [1, 0], 15, to_handle)  # type: ignore
    return [
        (native_guard, lambda: [(c["pointers"], c["stream"]) for c in rec.calls]),
        (py_guard, lambda: py.calls),
    ]


CASES = [  # (name, x, out, stream, launched with (pointers, stream) or None)
    ("the prepared kind", guard_array(0x1000), guard_array(0x2000, SHAPE_OUT, F32), None,
     ((0x2000, 0x1000), 0)),
    ("an int stream", guard_array(0x1000), guard_array(0x2000, SHAPE_OUT, F32), 77, ((0x2000, 0x1000), 77)),
    ("a stream object", guard_array(0x1000), guard_array(0x2000, SHAPE_OUT, F32), Stream(99),
     ((0x2000, 0x1000), 99)),
    ("input produced on the launch stream", guard_array(0x1000, stream=77),
     guard_array(0x2000, SHAPE_OUT, F32), 77, ((0x2000, 0x1000), 77)),
    ("input produced on another stream", guard_array(0x1000, stream=5),
     guard_array(0x2000, SHAPE_OUT, F32), 77, None),
    ("output produced on another stream", guard_array(0x1000),
     guard_array(0x2000, SHAPE_OUT, F32, stream=5), None, None),
    ("out is None", guard_array(0x1000), None, None, None),
    ("out is a NumPy array", guard_array(0x1000), np.zeros(SHAPE_OUT, np.float32), None, None),
    ("wrong output shape", guard_array(0x1000), guard_array(0x2000, (3, 7, 32), F32), None, None),
    ("wrong output dtype", guard_array(0x1000), guard_array(0x2000, SHAPE_OUT, dt.float64), None, None),
    ("wrong input shape", guard_array(0x1000, (7, 33, 4)), guard_array(0x2000, SHAPE_OUT, F32), None, None),
    ("input on another device", guard_array(0x1000, device=1), guard_array(0x2000, SHAPE_OUT, F32), None,
     None),
    ("output on another device", guard_array(0x1000), guard_array(0x2000, SHAPE_OUT, F32, device=1), None,
     None),
    ("misaligned input", guard_array(0x1004), guard_array(0x2000, SHAPE_OUT, F32), None, None),
    ("misaligned output", guard_array(0x1000), guard_array(0x2008, SHAPE_OUT, F32), None, None),
]


@pytest.mark.parametrize("which", ["native", "python"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_guard_decisions(native, which, case):
    _, x, out, stream, launched = case
    guard, calls = _guards(native)[0 if which == "native" else 1]
    result = guard(x, out, stream)
    assert result is (launched is not None)
    assert calls() == ([launched] if launched else [])


@pytest.mark.parametrize("which", ["native", "python"])
def test_guard_errors(native, which):
    guard, calls = _guards(native)[0 if which == "native" else 1]
    x, out = guard_array(0x1000), guard_array(0x2000, SHAPE_OUT, F32)
    with pytest.raises(TypeError, match="2 arrays and a stream expected"):
        guard(x, out)
    with pytest.raises(TypeError, match="stream must be None, an int handle"):
        guard(x, out, object())
    assert calls() == []


def test_guard_checks_its_configuration(native):
    launch = Recorder().launch(native)
    with pytest.raises(ValueError, match="order: 2 entries expected"):
        launch.guard(DeviceArray, [(SHAPE_IN, U8, 0)], [0], 0, to_handle)
    with pytest.raises(ValueError, match="order: index 2 outside 0..1"):
        launch.guard(DeviceArray, [(SHAPE_IN, U8, 0), (SHAPE_OUT, F32, 0)], [0, 2], 0,
                     to_handle)
    with pytest.raises(TypeError, match="array_type must be a type"):
        launch.guard("DeviceArray", [(SHAPE_IN, U8, 0)], [0, 0], 0, to_handle)


def test_disabled_by_environment(monkeypatch):
    monkeypatch.setenv("THORK_NATIVE", "0")
    _reset()
    try:
        assert native_module() is None
        assert native_status() == "unavailable: THORK_NATIVE=0"
    finally:
        monkeypatch.delenv("THORK_NATIVE")
        _reset()


def test_a_broken_compiler_falls_back_with_the_reason(monkeypatch, tmp_path):
    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path))  # nothing cached there
    monkeypatch.setenv("CC", "false")  # exists, always fails
    _reset()
    try:
        assert native_module() is None
        assert native_status().startswith("unavailable: building _native_launch.c: false failed")
    finally:
        monkeypatch.delenv("CC")
        _reset()
    assert not any(p.suffix == ".so" for p in tmp_path.rglob("*"))  # no half-written file


def test_threads_sharing_one_launch_keep_their_own_pointers(which):
    """Each call launches with its own addresses even while other threads call the same
    Launch (the GIL is released around the driver call)."""
    import sys

    rec = Recorder()
    launch = rec.launch(which)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    # All four alive before any launches: a thread that ended could otherwise hand its
    # identity (which the recorder keys calls by) to one started after it.
    started = threading.Barrier(4)
    try:
        def work(i: int) -> None:
            started.wait()
            for _ in range(2000):
                launch.run([0x1000 * (i + 1), 0x10 * (i + 1)], 0)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert len(rec.calls) == 8000
    seen: dict[int, set[tuple[int, int]]] = {}
    for call in rec.calls:
        seen.setdefault(call["thread"], set()).add(call["pointers"])
    assert sorted(map(sorted, seen.values())) == [[(0x1000 * (i + 1), 0x10 * (i + 1))]
                                                  for i in range(4)]



# -- GuardedCall: the C call entry of a Python class ---------------------------------------

def _guarded_class(native):
    class Hot(native.GuardedCall):
        """What fkl's Pipe does: no __call__ of its own, _miss takes every other call."""

        def __init__(self) -> None:
            self._hot_guard = None
            self.missed: list[tuple[Any, ...]] = []

        def _miss(self, *args: Any, **kwargs: Any) -> Any:
            self.missed.append((args, kwargs))
            return "general path"

    return Hot


def test_guarded_call_launches_through_its_guard_in_c(native):
    rec = Recorder()
    hot = _guarded_class(native)()
    hot._hot_guard = rec.launch(native).guard(
        DeviceArray, [(SHAPE_IN, U8, 0), (SHAPE_OUT, F32, 0)], [1, 0], 15, to_handle)
    x, out = guard_array(0x1000), guard_array(0x2000, SHAPE_OUT, F32)
    assert hot(x, out=out) is out
    assert hot(x, out=out, stream=77) is out
    assert hot(x, stream=Stream(99), out=out) is out  # keyword order does not matter
    assert [(c["pointers"], c["stream"]) for c in rec.calls] == [
        ((0x2000, 0x1000), 0), ((0x2000, 0x1000), 77), ((0x2000, 0x1000), 99)]
    assert hot.missed == []
    # A Python-level call of __call__ takes the same entry (tp_call on Python 3.11).
    assert type(hot).__call__(hot, x, out=out) is out and len(rec.calls) == 4


@pytest.mark.parametrize("call", [
    lambda h, x, o: h(x, out=guard_array(0x2000, (3, 7, 32), F32)),  # guard says no
    lambda h, x, o: h(x, o),  # out positional: not the hot shape of a call
    lambda h, x, o: h(x),
    lambda h, x, o: h(x, out=o, stream=None, extra=1),
    lambda h, x, o: h(x, x, out=o),
    lambda h, x, o: h(out=o),
    lambda h, x, o: h(x, stream=0),
], ids=["guard-misses", "positional-out", "no-out", "unknown-keyword", "two-inputs",
        "no-input", "stream-only"])
def test_guarded_call_sends_everything_else_to_miss(native, call):
    rec = Recorder()
    hot = _guarded_class(native)()
    hot._hot_guard = rec.launch(native).guard(
        DeviceArray, [(SHAPE_IN, U8, 0), (SHAPE_OUT, F32, 0)], [1, 0], 15, to_handle)
    x, out = guard_array(0x1000), guard_array(0x2000, SHAPE_OUT, F32)
    assert call(hot, x, out) == "general path"
    assert rec.calls == [] and len(hot.missed) == 1


def test_guarded_call_passes_arguments_to_miss_unchanged(native):
    hot = _guarded_class(native)()
    x = guard_array(0x1000)
    assert hot(x, 1, out=2, stream=3) == "general path"
    assert hot(x, out=5) == "general path"  # no guard yet
    hot._hot_guard = lambda *a: True  # not a native guard: C never calls it
    assert hot(x, out=6, stream=7) == "general path"
    assert hot.missed == [((x, 1), {"out": 2, "stream": 3}), ((x,), {"out": 5}),
                          ((x,), {"out": 6, "stream": 7})]


def test_guarded_call_errors(native):
    rec = Recorder()
    hot = _guarded_class(native)()
    guard = rec.launch(native).guard(
        DeviceArray, [(SHAPE_IN, U8, 0), (SHAPE_OUT, F32, 0)], [1, 0], 15, to_handle)
    hot._hot_guard = guard
    x, out = guard_array(0x1000), guard_array(0x2000, SHAPE_OUT, F32)
    with pytest.raises(TypeError, match="stream must be None, an int handle"):
        hot(x, out=out, stream=object())  # the guard's error comes out, no fallback
    assert rec.calls == [] and hot.missed == []
    # A guard over another number of arrays is never called from the hot entry.
    hot._hot_guard = rec.launch(native).guard(
        DeviceArray, [(SHAPE_IN, U8, 0)], [0, 0], 15, to_handle)
    assert hot(x, out=out) == "general path" and rec.calls == []

    class NoMiss(native.GuardedCall):
        pass

    with pytest.raises(AttributeError, match="_miss"):
        NoMiss()(x)
    assert NoMiss()._hot_guard is None  # unset reads as None


def test_guarded_call_releases_what_it_holds(native):
    import gc
    import sys
    import weakref

    rec = Recorder()
    Hot = _guarded_class(native)
    guard = rec.launch(native).guard(
        DeviceArray, [(SHAPE_IN, U8, 0), (SHAPE_OUT, F32, 0)], [1, 0], 15, to_handle)
    x, out = guard_array(0x1000), guard_array(0x2000, SHAPE_OUT, F32)
    before = sys.getrefcount(guard), sys.getrefcount(out)
    hot = Hot()
    hot._hot_guard = guard
    for _ in range(100):
        hot(x, out=out)
    del hot
    assert (sys.getrefcount(guard), sys.getrefcount(out)) == before
    hot = Hot()
    hot._hot_guard = hot  # a cycle through the C member is collected
    ref = weakref.ref(hot)
    del hot
    gc.collect()
    assert ref() is None


# -- Binder: kernel[grid, block](*args) checked and launched in C -----------------------

@pytest.mark.parametrize("case", BIND_CASES, ids=[c[0] for c in BIND_CASES])
def test_binder_decisions(native, case):
    """The binder launches exactly the argument kinds CudaExecutable.launch's fast paths
    take and leaves everything else (with nothing launched) to the Python path."""
    _, args, stream, launched = case
    rec, binder = make_binder(native)
    assert binder((3, 1, 1), (64, 1, 1), 16, stream, args) is (launched is not None)
    if launched is None:
        assert rec.calls == []
        return
    (call,) = rec.calls
    assert (call["pointers"], call["scalars"]) == launched
    assert call["grid"] == (3, 1, 1) and call["block"] == (64, 1, 1)
    assert call["shared"] == 16 and call["stream"] == stream


def test_binder_without_cai_takes_only_device_arrays(native):
    rec, binder = make_binder(native, cai=False)
    assert binder((1, 1, 1), (1, 1, 1), 0, 0, (Cai(0x100), 1.0, device_array(0x200), 0)) is False
    assert binder((1, 1, 1), (1, 1, 1), 0, 0, (device_array(0x100), 1.0, device_array(0x200), 0)) is True
    assert len(rec.calls) == 1


def test_binder_with_the_kinds_table_reads_only_plain_producers(native, monkeypatch):
    """Given core's kinds table (what CudaExecutable passes), the binder reads the
    interface only of types listed as plain producers: a follower's array (a torch tensor,
    whose interface names no stream) and a type not decided yet go to the Python path,
    which decides once and waits or follows."""
    from thork_core import _probe

    class Plain(Cai):
        pass

    class Followed(Cai):
        pass

    class Unseen(Cai):
        pass

    monkeypatch.setitem(_probe.KINDS, Plain, _probe.CAI)
    monkeypatch.setitem(_probe.KINDS, Followed, object())  # an adapter object
    rec = Recorder()
    specs = [(F32, "<f4", 1, True), (True,), (F32, "<f4", -1, False), (False,)]
    binder = native.Binder(rec.launcher(native), DeviceArray, 0, specs, _probe.KINDS)
    for kind in (Followed, Unseen):
        assert binder((1, 1, 1), (1, 1, 1), 0, 0, (kind(0x100), 1.0, device_array(0x200), 0)) is False
        assert binder((1, 1, 1), (1, 1, 1), 0, 0, (device_array(0x100), 1.0, kind(0x200), 0)) is False
    assert rec.calls == [] and Unseen not in _probe.KINDS
    assert binder((1, 1, 1), (1, 1, 1), 0, 0, (Plain(0x100), 1.0, device_array(0x200), 0)) is True
    assert [c["pointers"] for c in rec.calls] == [(0x100, 0x200)]


def test_binder_checks_its_configuration(native):
    rec = Recorder()
    launcher = rec.launcher(native)
    with pytest.raises(ValueError, match="specs: 4 expected"):
        native.Binder(launcher, DeviceArray, 0, [(True,)], True)
    with pytest.raises(TypeError, match=r"specs\[0\]: \(dtype, typestr, ndim, writes\)"):
        native.Binder(launcher, DeviceArray, 0, [(True,)] * 4, True)
    with pytest.raises(TypeError, match=r"specs\[1\]: \(is_float,\)"):
        native.Binder(launcher, DeviceArray, 0, [(F32, None, -1, False)] * 4, True)
    with pytest.raises(TypeError):
        native.Binder("launcher", DeviceArray, 0, [], True)


# -- OutMaker: the allocating hot call obj(x) made in C ----------------------------------

ALLOC = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t,
                         ctypes.c_void_p)
FREE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64, ctypes.c_void_p)


class Arr:
    """DeviceArray's slots, recording when an owned array is collected."""

    __slots__ = ("ptr", "shape", "dtype", "device", "stream", "_owner", "_owns",
                 "__weakref__")
    collected: list[int] = []

    def __del__(self) -> None:
        if getattr(self, "_owns", False):
            Arr.collected.append(self.ptr)


class Pool:
    """A fake stream-ordered pool: hands out 0x10000, 0x20000, ... (or refuses)."""

    def __init__(self, refuse: bool = False) -> None:
        self.allocs: list[tuple[int, int]] = []
        self.frees: list[int] = []
        self.refuse = refuse

        def alloc(ptr, nbytes, stream):
            if self.refuse:
                return 2  # CUDA_ERROR_OUT_OF_MEMORY
            ptr[0] = 0x10000 * (len(self.allocs) + 1)
            self.allocs.append((nbytes, stream or 0))
            return 0

        self.alloc, self.free = ALLOC(alloc), FREE(lambda p, s: self.frees.append(p) or 0)

    def maker(self, native, shape=SHAPE_OUT, dtype=F32):
        addr = ctypes.cast
        return native.OutMaker(Arr, shape, dtype, 0, 4 * 3 * 7 * 33,
                               addr(self.alloc, ctypes.c_void_p).value,
                               addr(self.free, ctypes.c_void_p).value, 0, 0, 0)


def _in(ptr: int = 0x1000, shape: Any = SHAPE_IN) -> Arr:
    a = Arr()
    a.ptr, a.shape, a.dtype, a.device, a.stream, a._owner, a._owns = \
        ptr, shape, U8, 0, 0, None, False
    return a


def _allocating(native, pool: Pool):
    rec = Recorder()
    hot = _guarded_class(native)()
    hot._hot_guard = rec.launch(native).guard(
        Arr, [(SHAPE_IN, U8, 0), (SHAPE_OUT, F32, 0)], [1, 0], 15, to_handle)
    hot._hot_out = pool.maker(native)
    return rec, hot


def test_allocating_call_makes_the_output_and_launches_in_c(native):
    pool = Pool()
    rec, hot = _allocating(native, pool)
    x = _in()
    out = hot(x)
    assert type(out) is Arr and out.ptr == 0x10000 and out._owns is True
    assert (out.shape, out.dtype, out.device, out.stream) == (SHAPE_OUT, F32, 0, 0)
    out2 = hot(x, stream=Stream(99))
    assert out2.ptr == 0x20000 and out2.stream == 99
    assert pool.allocs == [(4 * 3 * 7 * 33, 0), (4 * 3 * 7 * 33, 99)]
    assert [(c["pointers"], c["stream"]) for c in rec.calls] == [
        ((0x10000, 0x1000), 0), ((0x20000, 0x1000), 99)]
    assert hot.missed == []


def test_allocating_call_misses_go_to_python(native):
    pool = Pool()
    rec, hot = _allocating(native, pool)
    Arr.collected.clear()
    assert hot(_in(shape=(7, 33, 4))) == "general path"  # the guard says no
    assert Arr.collected == [0x10000]  # the output made for it went back
    assert hot(_in(ptr=0x1004)) == "general path"  # misaligned
    with pytest.raises(TypeError, match="stream must be None, an int handle"):
        hot(_in(), stream=object())  # the guard's error comes out, as for out= calls
    assert rec.calls == [] and len(hot.missed) == 2


def test_allocating_call_when_the_pool_refuses(native):
    pool = Pool(refuse=True)
    rec, hot = _allocating(native, pool)
    assert hot(_in()) == "general path" and rec.calls == [] and len(hot.missed) == 1
    assert pool.maker(native)(0) is None


def test_out_maker_needs_the_array_slots(native):
    pool = Pool()
    addr = ctypes.cast(pool.alloc, ctypes.c_void_p).value
    with pytest.raises(TypeError, match="'ptr' must be a __slots__ entry"):
        native.OutMaker(Stream, SHAPE_OUT, F32, 0, 4, addr, addr, 0, 0, 0)
    with pytest.raises(ValueError, match="non-null"):
        native.OutMaker(Arr, SHAPE_OUT, F32, 0, 4, 0, addr, 0, 0, 0)
    made = pool.maker(native)(5)
    assert type(made) is Arr and made.stream == 5 and pool.allocs[-1][1] == 5


# -- Finalizer: DeviceArray.__del__ in C (the allocating call's other half) ---------------

CTX_GET = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))
CTX_SET = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)


class Driver:
    """Fake cuMemFreeAsync / cuCtxGetCurrent / cuCtxSetCurrent: records frees with the
    context current at the time."""

    def __init__(self, current: int = 0) -> None:
        self.current = current
        self.frees: list[tuple[int, int, int]] = []  # (ptr, stream, context)
        self.sets: list[int] = []

        def get(out):
            out[0] = self.current
            return 0

        def set_(ctx):
            self.sets.append(ctx or 0)
            self.current = ctx or 0
            return 0

        self.free = FREE(lambda p, s: self.frees.append((p, s or 0, self.current)) or 0)
        self.get, self.set = CTX_GET(get), CTX_SET(set_)

    def finalizer(self, native, cls, fallback, ctx=0x5000):
        a = ctypes.cast
        return native.Finalizer(cls, 0, a(self.free, ctypes.c_void_p).value, ctx,
                                a(self.get, ctypes.c_void_p).value,
                                a(self.set, ctypes.c_void_p).value, fallback)


def _array_class(native, drv: Driver, fallen: list[Any]):
    class FArr:
        """DeviceArray's slots, with the native finalizer as its __del__."""

        __slots__ = ("ptr", "shape", "dtype", "device", "stream", "_owner", "_owns",
                     "__weakref__")

    class Pitched(FArr):
        __slots__ = ("pitch",)

    FArr.__del__ = drv.finalizer(native, FArr, lambda a: fallen.append(a.ptr))
    return FArr, Pitched


def _owned(cls, ptr: int, device: int = 0, stream: int = 0, owns: Any = True) -> Any:
    a = cls()
    a.ptr, a.shape, a.dtype, a.device, a.stream, a._owner, a._owns = \
        ptr, (4,), F32, device, stream, None, owns
    return a


def test_finalizer_frees_owned_arrays_in_c(native):
    drv, fallen = Driver(), []
    FArr, Pitched = _array_class(native, drv, fallen)
    a = _owned(FArr, 0x1000, stream=7)
    del a
    # The device's context current for the free, the thread's own (none) restored after.
    assert drv.frees == [(0x1000, 7, 0x5000)] and drv.sets == [0x5000, 0]
    drv.current = 0x5000
    b = _owned(Pitched, 0x2000)  # a subclass with the same slots
    del b
    assert drv.frees[-1] == (0x2000, 0, 0x5000) and drv.sets == [0x5000, 0]  # was current
    drv.current = 0x7000  # another device's context: switched for the free, then back
    c = _owned(FArr, 0x2800)
    del c
    assert drv.frees[-1] == (0x2800, 0, 0x5000) and drv.sets[-2:] == [0x5000, 0x7000]
    assert drv.current == 0x7000
    view = _owned(FArr, 0x3000, owns=False)
    del view
    half = FArr()  # __init__ never finished: no slot set
    del half
    assert len(drv.frees) == 3 and fallen == []


def test_finalizer_leaves_other_cases_to_python(native):
    drv, fallen = Driver(current=0x5000), []
    FArr, _ = _array_class(native, drv, fallen)
    other = _owned(FArr, 0x4000, device=1)  # another device: its context is Python's job
    del other
    odd = _owned(FArr, 0x5000, owns=1)  # not the plain True the C path expects
    del odd
    assert fallen == [0x4000, 0x5000] and drv.frees == []


def test_finalizer_runs_once_and_binds_like_a_method(native):
    drv, fallen = Driver(current=0x5000), []
    FArr, _ = _array_class(native, drv, fallen)
    a = _owned(FArr, 0x6000)
    a.__del__()  # an explicit call (as DeviceArray's own code may make): freed, disowned
    assert drv.frees == [(0x6000, 0, 0x5000)] and a._owns is False
    del a
    assert len(drv.frees) == 1
    with pytest.raises(TypeError):
        FArr.__del__()
    with pytest.raises(TypeError, match="array_type: 'ptr' must be a __slots__ entry"):
        drv.finalizer(native, Stream, print)
    with pytest.raises(ValueError, match="non-null"):
        drv.finalizer(native, FArr, print, ctx=0)


def test_device_array_gets_the_native_finalizer_only_with_a_driver(native, monkeypatch):
    import thork_core._device_array as da
    from thork_core import _cuda

    # Start from the Python method, as a fresh process does: an earlier GPU test in this
    # worker may already have installed the native finalizer.
    monkeypatch.setattr(da.DeviceArray, "__del__", da._PY_DEL)
    before = da.DeviceArray.__dict__["__del__"]
    retained: dict[int, int] = {}
    monkeypatch.setattr(_cuda, "retained_context", retained.get)
    made: list[int] = []
    monkeypatch.setattr(_cuda, "make_current", lambda device=0: made.append(device))
    assert da.use_native_finalizer(native) is False  # device 0 unused: nothing retained
    retained[0] = 0x5000
    monkeypatch.setattr(_cuda, "function_address", lambda name: (_ for _ in ()).throw(
        LaunchError("no libcuda")))
    assert da.use_native_finalizer(native) is False  # no driver entry points
    assert da.DeviceArray.__dict__["__del__"] is before  # the Python method stays
    assert made == []  # installing never switches the thread's context


# -- the guard with CAI arrays (session 8): native and Python, one behaviour ---------------

class Unlisted(CaiArray):
    """The same interface, of a type the probe's table does not list as a plain producer."""


@pytest.fixture
def kinds(monkeypatch):
    from thork_core import _probe

    monkeypatch.setitem(_probe.KINDS, CaiArray, _probe.CAI)
    monkeypatch.setitem(_probe.KINDS, Unlisted, object())  # e.g. a follower's type
    return _probe.KINDS


def _cai_guards(native, kinds, specs, in_place=False):
    rec = Recorder()
    native_guard = rec.launch(native).guard(DeviceArray, specs, [1, 0], 15, to_handle,
                                            kinds, in_place)
    py = PyLaunch()
    py_guard = ArrayGuard(py, DeviceArray, specs, [1, 0], 15, to_handle,  # type: ignore
                          kinds, in_place)
    return [(native_guard, lambda: [(c["pointers"], c["stream"]) for c in rec.calls]),
            (py_guard, lambda: py.calls)]


class _Size(tuple):  # type: ignore[type-arg]
    """A tuple subclass keeping tuple's comparison (as torch.Size does)."""


CAI_SPECS = [(SHAPE_IN, U8, 0, "|u1", False), (SHAPE_OUT, F32, 0, "<f4", True)]
OUT_CAI = CaiArray(0x20000, SHAPE_OUT, "<f4")
CAI_CASES = [  # (name, x, out, stream, launched with (pointers, stream) or None)
    ("CAI in and out", CaiArray(0x10000, SHAPE_IN), OUT_CAI, None, ((0x20000, 0x10000), 0)),
    ("CAI in, DeviceArray out", CaiArray(0x10000, SHAPE_IN), guard_array(0x20000, SHAPE_OUT, F32), 77,
     ((0x20000, 0x10000), 77)),
    ("DeviceArray in, CAI out", guard_array(0x10000), OUT_CAI, None, ((0x20000, 0x10000), 0)),
    ("per-thread default stream", CaiArray(0x10000, SHAPE_IN, stream=2), OUT_CAI, None,
     ((0x20000, 0x10000), 0)),
    ("no stream key", CaiArray(0x10000, SHAPE_IN, stream=None), OUT_CAI, None,
     ((0x20000, 0x10000), 0)),
    ("produced on the launch stream", CaiArray(0x10000, SHAPE_IN, stream=77), OUT_CAI, 77,
     ((0x20000, 0x10000), 77)),
    ("produced on another stream", CaiArray(0x10000, SHAPE_IN, stream=5), OUT_CAI, 77, None),
    ("another typestr", CaiArray(0x10000, SHAPE_IN, "|i1"), OUT_CAI, None, None),
    ("another shape", CaiArray(0x10000, (7, 33, 4)), OUT_CAI, None, None),
    ("a list shape", CaiArray(0x10000, [7, 33, 3]), OUT_CAI, None, None),
    # session 12: shapes compared with the tuple's loop inlined where that is the compare
    ("a tuple subclass shape (torch.Size's kind)", CaiArray(0x10000, _Size(SHAPE_IN)), OUT_CAI,
     None, ((0x20000, 0x10000), 0)),
    ("a tuple subclass of another shape", CaiArray(0x10000, _Size((7, 33, 4))), OUT_CAI, None,
     None),
    ("a shape of NumPy ints", CaiArray(0x10000, tuple(np.int64(e) for e in SHAPE_IN)), OUT_CAI,
     None, ((0x20000, 0x10000), 0)),
    ("a shape of large equal ints", CaiArray(0x10000, SHAPE_IN),
     CaiArray(0x20000, tuple(int(str(e)) for e in SHAPE_OUT), "<f4"), None,
     ((0x20000, 0x10000), 0)),
    ("a shorter shape", CaiArray(0x10000, SHAPE_IN[:2]), OUT_CAI, None, None),
    ("strides", CaiArray(0x10000, SHAPE_IN, strides=(99, 3, 1)), OUT_CAI, None, None),
    ("a mask", CaiArray(0x10000, SHAPE_IN, mask=object()), OUT_CAI, None, None),
    ("read-only out", CaiArray(0x10000, SHAPE_IN), CaiArray(0x20000, SHAPE_OUT, "<f4", readonly=True),
     None, None),
    ("read-only input", CaiArray(0x10000, SHAPE_IN, readonly=True), OUT_CAI, None,
     ((0x20000, 0x10000), 0)),
    ("a type not listed as plain", Unlisted(0x10000, SHAPE_IN), OUT_CAI, None, None),
    ("misaligned", CaiArray(0x10004, SHAPE_IN), OUT_CAI, None, None),
    ("out over the input", CaiArray(0x10000, SHAPE_IN), CaiArray(0x10000 + 16 * 40, SHAPE_OUT, "<f4"),
     None, None),
    ("input ending in the out", CaiArray(0x20000 - 16 * 4, SHAPE_IN), OUT_CAI, None, None),
    ("out right after the input", CaiArray(0x10000, SHAPE_IN),
     CaiArray(0x10000 + 16 * 44, SHAPE_OUT, "<f4"), None, ((0x10000 + 16 * 44, 0x10000), 0)),
]


@pytest.mark.parametrize("which", ["native", "python"])
@pytest.mark.parametrize("case", CAI_CASES, ids=[c[0] for c in CAI_CASES])
def test_guard_decisions_with_cai_arrays(native, kinds, which, case):
    _, x, out, stream, launched = case
    guard, calls = _cai_guards(native, kinds, CAI_SPECS)[0 if which == "native" else 1]
    assert guard(x, out, stream) is (launched is not None)
    assert calls() == ([launched] if launched else [])


def test_cai_guard_checks_its_configuration(native, kinds):
    launch = Recorder().launch(native)
    with pytest.raises(TypeError, match="typestr must be a str or None"):
        launch.guard(DeviceArray, [(SHAPE_IN, U8, 0, 7, False), (SHAPE_OUT, F32, 0)],
                     [1, 0], 15, to_handle, kinds, False)
    with pytest.raises(TypeError, match="kinds must be a dict"):
        launch.guard(DeviceArray, CAI_SPECS, [1, 0], 15, to_handle, [], False)


@pytest.mark.parametrize("which", ["native", "python"])
@pytest.mark.parametrize("in_place", [False, True])
def test_cai_guard_in_place_rule(native, kinds, which, in_place):
    """Same-size arrays: exactly the input is allowed only in place; a shifted one never."""
    specs = [(SHAPE_OUT, F32, 0, "<f4", False), (SHAPE_OUT, F32, 0, "<f4", True)]
    guard, calls = _cai_guards(native, kinds, specs, in_place)[0 if which == "native" else 1]
    x = CaiArray(0x10000, SHAPE_OUT, "<f4")
    assert guard(x, CaiArray(0x10000, SHAPE_OUT, "<f4"), None) is in_place
    assert guard(x, CaiArray(0x10000 + 16, SHAPE_OUT, "<f4"), None) is False
    assert guard(x, guard_array(0x10000, SHAPE_OUT, F32), None) is in_place  # a DeviceArray too
    assert len(calls()) == 2 * in_place


@pytest.mark.plugin("compose")
@pytest.mark.plugin("cpu")
def test_cai_guard_runs_the_cpu_kernel_on_host_memory(kinds):
    """End to end on the CPU target: a pipe's prepared launch, guarded over CAI objects
    pointing at NumPy memory, computes the chain (the values against NumPy)."""
    fkl = pytest.importorskip("fkl")

    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.Add(1.0), fkl.TensorWrite(),
                       target="cpu")
    rng = np.random.default_rng()
    src = rng.standard_normal((5, 9, 3)).astype(np.float32)
    pipe(src, out=np.empty_like(src))
    (hot,) = pipe._hot.values()
    plan = hot.plan
    guard = plan.launcher.prepared.guard(
        DeviceArray, [((5, 9, 3), F32, 0, "<f4", False), ((5, 9, 3), F32, 0, "<f4", True)],
        plan.order, plan.align_mask, None, cai=True)
    out = np.full_like(src, np.nan)
    x = CaiArray(src.ctypes.data, (5, 9, 3), "<f4")
    y = CaiArray(out.ctypes.data, (5, 9, 3), "<f4")
    assert guard(x, y, None) is True
    np.testing.assert_allclose(out, src * 2 + 1, rtol=1e-6)
    assert guard(x, CaiArray(out.ctypes.data, (5, 9, 4), "<f4"), None) is False


# -- Subscript: kernel[grid, block] answered from the memo in C (session 11) --------------

class _Memoized:
    """A class whose ``obj[key]`` is the native Subscript over ``obj._memo``; the fallback
    records what reached it and memoizes like thork's Kernel (plain configurations)."""

    def __init__(self) -> None:
        self._memo: dict[Any, Any] = {}
        self.fell: list[Any] = []

    def _slow(self, key: Any) -> Any:
        self.fell.append(key)
        made = ("launch", key)
        memo = getattr(self, "_memo", None)
        if type(memo) is dict and type(key) is tuple and all(type(x) is int for x in key):
            memo[key] = made
        return made


@pytest.fixture
def memoized(native):
    class Memoized(_Memoized):
        __getitem__ = native.Subscript("_memo", _Memoized._slow)

    return Memoized()


def test_subscript_answers_plain_configurations_from_the_memo(memoized):
    first = memoized[2, 128]
    assert first == ("launch", (2, 128)) and memoized.fell == [(2, 128)]
    assert memoized[2, 128] is first and memoized[(2, 128)] is first  # no fallback
    assert memoized.fell == [(2, 128)]
    three = memoized[(4, 1), (32, 2), 64]  # tuples of ints and a third entry: plain
    memoized._memo[(4, 1), (32, 2), 64] = three
    assert memoized[(4, 1), (32, 2), 64] is three and len(memoized.fell) == 2


class _Int(int):
    pass


@pytest.mark.parametrize("key", [
    (2.0, 128), (True, 128), (2, 128.0), (2, True), (np.int64(2), 128), (_Int(2), 128),
    ((2.0,), 128), ((2,), (128.0,)),
])
def test_subscript_never_hands_equal_non_ints_the_plain_launch(memoized, key):
    plain = (tuple(int(x) for x in key[0]) if isinstance(key[0], tuple) else int(key[0]),
             tuple(int(x) for x in key[1]) if isinstance(key[1], tuple) else int(key[1]))
    memoized[plain]
    assert memoized[key] == ("launch", key)  # equal hash and value: still the fallback
    assert memoized.fell[-1] is key


@pytest.mark.parametrize("key", [[2, 128], (2,), (1, 2, 3, 4), 7, "a"])
def test_subscript_sends_other_keys_to_the_fallback(memoized, key):
    assert memoized[key] == ("launch", key) and memoized.fell == [key]


def test_subscript_without_a_dict_memo_falls_back(memoized):
    del memoized._memo
    assert memoized[2, 128] == ("launch", (2, 128)) and memoized.fell == [(2, 128)]
    memoized._memo = [("not", "a dict")]
    memoized.fell.clear()
    assert memoized[2, 128] == ("launch", (2, 128)) and memoized.fell == [(2, 128)]


def test_subscript_binds_like_a_method_and_checks_its_arguments(native, memoized):
    assert memoized.__getitem__((3, 32)) == ("launch", (3, 32))
    assert type(memoized).__dict__["__getitem__"].fallback is _Memoized._slow
    with pytest.raises(TypeError):
        native.Subscript("_memo", 42)
    with pytest.raises(TypeError):
        native.Subscript(42, _Memoized._slow)
    bare = native.Subscript.__new__(native.Subscript)  # never initialized: no crash
    with pytest.raises(RuntimeError, match="not initialized"):
        bare(memoized, (3, 32))
    with pytest.raises(RuntimeError, match="not initialized"):
        bare.__get__(memoized)((3, 32))


def test_kernels_use_the_c_subscript_and_keep_their_checks(native):
    import thork as tk
    from thork._kernel import Kernel
    from thork_core import ArgumentError

    @tk.jit(target="cpu")
    def k(out: tk.DevicePointer[tk.dt.float32], bid: tk.Uint[tk.BlockIdx]):
        out[bid] = 1.0

    launch = k[3, 1]
    assert type(Kernel.__dict__["__getitem__"]) is native.Subscript
    assert k[3, 1] is launch and k[(3, 1)] is launch
    with pytest.raises(ArgumentError, match="grid must be an int"):
        k[3.0, 1]  # equal to (3, 1): checked by the Python path, not handed the launch


def test_a_launch_keeps_the_gil_only_when_its_thread_is_alone(native):
    # Other thread states (a thread that may want the GIL) make a launch release it. Some
    # exist without a threading.Thread (a C thread that ran Python once, as on the GPU
    # machine: run 12), so only one direction holds without knowing the process.
    if native.keeps_gil():
        assert threading.active_count() == 1
    go, stop = threading.Event(), threading.Event()
    t = threading.Thread(target=lambda: (go.set(), stop.wait()))
    t.start()
    go.wait()
    try:
        assert native.keeps_gil() is False
    finally:
        stop.set()
        t.join()


def test_a_launch_releases_the_gil_while_a_subinterpreter_exists(native):
    # (session 17) keeps_gil asks without the caller's thread state: one interpreter
    # holding one thread state. A second interpreter (its own GIL from 3.12) is never
    # alone. In a fresh process: a test worker has threads of its own.
    pytest.importorskip("_xxsubinterpreters")
    script = (
        "import _xxsubinterpreters as interpreters\n"
        "from thork_core._native import native_module\n"
        "native = native_module()\n"
        "seen = [native.keeps_gil()]\n"
        "sub = interpreters.create()\n"
        "seen.append(native.keeps_gil())\n"
        "interpreters.destroy(sub)\n"
        "seen.append(native.keeps_gil())\n"
        "print(seen)\n")
    assert run_python(script).split() == ["[True,", "False,", "True]"]


def test_a_launcher_and_a_binder_are_initialized_once(native):
    # (session 17) Re-running __init__ with other kinds or specs under a live binder would
    # hand the entry values the launch never set; both refuse, and both still work.
    rec = Recorder()
    launcher = rec.launcher(native)
    specs = [(F32, "<f4", -1, True), (True,), (F32, "<f4", -1, False), (False,)]
    binder = native.Binder(launcher, DeviceArray, 0, specs, False)
    with pytest.raises(TypeError, match="Launcher is already initialized"):
        launcher.__init__(CONV_CU, 1, 2, "PfPiPP", print)
    with pytest.raises(TypeError, match="Binder is already initialized"):
        binder.__init__(launcher, DeviceArray, 0, specs, True)
    out = DeviceArray.wrap(0x1000, (8,), "float32", device=0, stream=0)
    x = DeviceArray.wrap(0x2000, (8,), "float32", device=0, stream=0)
    assert binder((2, 1, 1), (32, 1, 1), 0, None, (out, 1.5, x, 7))
    assert rec.calls[-1]["pointers"] == (0x1000, 0x2000)
    assert rec.calls[-1]["scalars"] == (1.5, 7)
