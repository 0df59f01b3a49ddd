"""DLPack in core's native module without a GPU (session 10, issue 11).

``DeviceArray.__dlpack__`` builds its capsule in C (``dlpack_export``; ctypes where the
module is unavailable) and core's Guard reads DLPack-only producers in C (their
``__dlpack_device__``, ``__dlpack__`` with the launch stream, the capsule's fields): the
capsules' fields, the keep-alive of the exported array until its deleter runs (from any
thread), the stream handshake, and the guard's decisions (native and Python, one
behaviour) are checked here with made-up addresses and a recording launch; the GPU suite
hands the same capsules to torch and CuPy.
"""

from __future__ import annotations

import ctypes
import gc
import threading
import weakref
from typing import Any

import numpy as np
import pytest
from helpers import run_threads
from helpers.launch_recorder import (
    F32,
    SHAPE_IN,
    SHAPE_OUT,
    U8,
    CaiArray,
    PyLaunch,
    Recorder,
    guard_array,
    to_handle,
)
from thork_core import DeviceArray, dt
from thork_core._dtype import dlpack_code
from thork_core._launch import ArrayGuard

_name = ctypes.pythonapi.PyCapsule_GetName
_name.restype, _name.argtypes = ctypes.c_char_p, [ctypes.py_object]
_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_pointer.restype, _pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
_set_name = ctypes.pythonapi.PyCapsule_SetName
_set_name.restype, _set_name.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]


class DLPackOnly:
    """A producer with only the DLPack protocol (a wrapper of a DeviceArray): records the
    streams it was asked for; ``device`` overrides what ``__dlpack_device__`` says,
    ``readonly`` marks its versioned capsules read-only, ``legacy`` refuses max_version,
    ``fail`` makes ``__dlpack__`` raise it."""

    def __init__(self, a: Any, device: Any = None, readonly: bool = False,
                 legacy: bool = False, fail: Exception | None = None) -> None:
        self.a, self.device, self.readonly, self.legacy, self.fail = \
            a, device, readonly, legacy, fail
        self.streams: list[Any] = []

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None) -> Any:
        self.streams.append(stream)
        if self.fail is not None:
            raise self.fail
        if self.legacy and max_version is not None:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        cap = self.a.__dlpack__(stream=stream, max_version=max_version)
        if self.readonly:
            from thork_core._adapter import _DLManagedTensorVersioned

            m = _DLManagedTensorVersioned.from_address(_pointer(cap, b"dltensor_versioned"))
            m.flags |= 1
        return cap

    def __dlpack_device__(self) -> Any:
        return self.device or self.a.__dlpack_device__()


def _exporters(native: Any) -> list[Any]:
    from thork_core import _device_array

    return [native.dlpack_export, _device_array._export_ctypes]


def _live() -> int:
    from thork_core._device_array import live_exports

    return live_exports()


# -- the exporter ---------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["native", "ctypes"])
def test_exporters_build_the_same_tensor(native: Any, which: str) -> None:
    """dlpack_export and its ctypes twin: the same fields for compact, pitched and 0-d
    arrays, both capsule versions, every dtype; the deleter runs once, when the capsule
    goes."""
    from thork_core import _probe

    export = _exporters(native)[which == "ctypes"]
    arrays = [guard_array(0x10000, (3, 4, 5), U8), guard_array(1 << 40, (), dt.float64),
              DeviceArray.wrap((1 << 33) + 64, (7, 9), "float16", pitch=32),
              DeviceArray.wrap(1 << 34, (2, 3), "bfloat16", device=3)]
    arrays += [guard_array(1 << 35, (5,), d) for d in (dt.bool, dt.int8, dt.uint64, dt.float32)]
    n0 = _live()
    for a in arrays:
        code = dlpack_code(a.dtype)
        for versioned in (False, True):
            cap = export(a, a.ptr, a.shape, a._dl_strides(), *code, a.device, versioned)
            assert _name(cap) == (b"dltensor_versioned" if versioned else b"dltensor")
            assert _live() == n0 + 1
            got = native.dlpack_read(cap)
            strides = a._dl_strides()
            assert got == (a.ptr, a.shape, *code, 2, a.device, strides, False)
            assert _probe._read_capsule(cap) == got
            del cap
            assert _live() == n0


@pytest.mark.parametrize("which", ["native", "ctypes"])
def test_export_keeps_the_array_alive_until_the_deleter_runs(
        native: Any, which: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The capsule (then a consumer) holds the array: dropped unconsumed, the capsule's
    destructor runs the deleter; consumed (renamed ``used_dltensor*``, the deleter called
    by the consumer, here from another thread without the GIL), the destructor leaves it
    alone: one deleter call either way."""
    from thork_core import _device_array

    monkeypatch.setattr(_device_array, "_EXPORT", [_exporters(native)[which == "ctypes"]])
    deleter_t = ctypes.CFUNCTYPE(None, ctypes.c_void_p)  # called without the GIL
    for versioned in (False, True):
        a = guard_array(0x10000, (4, 4), F32)
        ref = weakref.ref(a)
        n0 = _live()
        cap = a.__dlpack__(max_version=(1, 0) if versioned else None)
        del a
        gc.collect()
        assert ref() is not None and _live() == n0 + 1
        name = b"dltensor_versioned" if versioned else b"dltensor"
        managed = _pointer(cap, name)
        # the deleter's address: after major/minor/ctx in the versioned struct, after the
        # DLTensor (48 bytes) and ctx in the legacy one
        at = managed + (16 if versioned else 56)
        deleter = deleter_t(ctypes.c_void_p.from_address(at).value)
        assert _set_name(cap, b"used_" + name) == 0
        assert ref() is not None
        th = threading.Thread(target=deleter, args=(managed,))
        th.start()
        th.join()
        gc.collect()
        assert ref() is None and _live() == n0
        del cap  # consumed: the destructor does not run the deleter again
        assert _live() == n0


def test_dlpack_handshake_and_refusals(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stream the consumer names waits for the array's stream (none for -1, the same
    stream, or the legacy one when the array has no stream of its own); copy=True and
    another device are refused."""
    from thork_core import _device_array

    waits: list[tuple[int, int, int]] = []
    monkeypatch.setattr(_device_array, "stream_wait",
                        lambda d, producer, consumer: waits.append((d, producer, consumer)))
    a = DeviceArray.wrap(0x10000, (3,), "float32", device=2, stream=0x500)
    for stream in (None, 0, 1, 2, -1, 0x500, 0x700):
        a.__dlpack__(stream=stream, max_version=(1, 0))
    assert waits == [(2, 0x500, 0)] * 3 + [(2, 0x500, 2), (2, 0x500, 0x700)]
    waits.clear()
    b = DeviceArray.wrap(0x10000, (3,), "float32")  # legacy stream: nothing to wait for
    for stream in (None, 1, 0x700):
        b.__dlpack__(stream=stream)
    assert waits == [(0, 0, 0x700)]
    with pytest.raises(BufferError, match="copy=True"):
        a.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="cannot export to device"):
        a.__dlpack__(dl_device=(2, 0))
    assert a.__dlpack__(dl_device=(2, 2), copy=False) is not None


def test_export_checks_its_arguments(native: Any) -> None:
    a = guard_array(0x10000, (2, 3), F32)
    with pytest.raises(TypeError, match="8 arguments"):
        native.dlpack_export(a, 0, (2, 3))
    with pytest.raises(TypeError, match="shape must be a tuple"):
        native.dlpack_export(a, 0, [2, 3], None, 2, 32, 0, True)
    with pytest.raises(TypeError, match="strides must be a tuple of 2 ints"):
        native.dlpack_export(a, 0, (2, 3), (3,), 2, 32, 0, True)
    with pytest.raises(OverflowError):
        native.dlpack_export(a, -1, (2, 3), None, 2, 32, 0, True)


# -- the guard with DLPack-only producers: native and Python, one behaviour -----------------

DL_IN, DL_OUT = (U8.bits | 1 << 8), (F32.bits | 2 << 8)  # DLPack code << 8 | bits
DL_SPECS = [(SHAPE_IN, U8, 0, "|u1", False, DL_IN), (SHAPE_OUT, F32, 0, "<f4", True, DL_OUT)]


class Legacy(DLPackOnly):
    """A DLPack 0.x producer's type (no max_version): core's guard leaves it to the
    caller's path, which reads it with legacy capsules."""


def _dl(ptr: int, shape: Any = SHAPE_IN, dtype: Any = U8, **kw: Any) -> DLPackOnly:
    return DLPackOnly(guard_array(ptr, shape, dtype), **kw)


OUT_DL = (0x20000, SHAPE_OUT, F32)
DL_CASES = [  # (name, x, out, stream, launched with (pointers, stream) or None)
    ("DLPack in and out", _dl(0x10000), _dl(*OUT_DL), None, ((0x20000, 0x10000), 0)),
    ("on a stream", _dl(0x10000), _dl(*OUT_DL), 77, ((0x20000, 0x10000), 77)),
    ("DLPack in, DeviceArray out", _dl(0x10000), guard_array(*OUT_DL), None,
     ((0x20000, 0x10000), 0)),
    ("DeviceArray in, DLPack out", guard_array(0x10000), _dl(*OUT_DL), None,
     ((0x20000, 0x10000), 0)),
    ("DLPack in, CAI out", _dl(0x10000), CaiArray(0x20000, SHAPE_OUT, "<f4"), None,
     ((0x20000, 0x10000), 0)),
    ("another dtype", _dl(0x10000, SHAPE_IN, dt.int8), _dl(*OUT_DL), None, None),
    ("another shape", _dl(0x10000, (7, 33, 4)), _dl(*OUT_DL), None, None),
    ("pitched", DLPackOnly(DeviceArray.wrap(0x10000, SHAPE_IN, "uint8", pitch=128)),
     _dl(*OUT_DL), None, None),
    ("another device", _dl(0x10000, device=(2, 1)), _dl(*OUT_DL), None, None),
    ("host memory", _dl(0x10000, device=(1, 0)), _dl(*OUT_DL), None, None),
    ("managed memory", _dl(0x10000, device=(13, 0)), _dl(*OUT_DL), None,
     ((0x20000, 0x10000), 0)),
    ("read-only out", _dl(0x10000), _dl(*OUT_DL, readonly=True), None, None),
    ("read-only input", _dl(0x10000, readonly=True), _dl(*OUT_DL), None,
     ((0x20000, 0x10000), 0)),
    ("no max_version", Legacy(guard_array(0x10000), legacy=True), _dl(*OUT_DL), None, None),
    ("__dlpack__ raises", _dl(0x10000, fail=RuntimeError("gone")), _dl(*OUT_DL), None, None),
    ("misaligned", _dl(0x10004), _dl(*OUT_DL), None, None),
    ("out over the input", _dl(0x10000), _dl(0x10000 + 16 * 40, SHAPE_OUT, F32), None, None),
    ("out right after the input", _dl(0x10000), _dl(0x10000 + 16 * 44, SHAPE_OUT, F32), None,
     ((0x10000 + 16 * 44, 0x10000), 0)),
]


@pytest.fixture
def kinds(monkeypatch: pytest.MonkeyPatch) -> dict[type, Any]:
    from thork_core import _device_array, _probe

    monkeypatch.setitem(_probe.KINDS, DLPackOnly, _probe.DLPACK)
    monkeypatch.setitem(_probe.KINDS, Legacy, _probe.DLPACK)
    monkeypatch.setattr(_probe, "_NO_MAX_VERSION", set())
    # the producer's own handshake (DeviceArray.__dlpack__ on another stream): no driver
    monkeypatch.setattr(_device_array, "stream_wait", lambda *a, **k: None)
    monkeypatch.setitem(_probe.KINDS, CaiArray, _probe.CAI)
    return _probe.KINDS


def _dl_guard(native: Any, kinds: Any, which: str, specs: Any = DL_SPECS,
              in_place: bool = False) -> tuple[Any, Any]:
    if which == "native":
        rec = Recorder()
        guard = rec.launch(native).guard(DeviceArray, specs, [1, 0], 15, to_handle, kinds,
                                         in_place)
        return guard, lambda: [(c["pointers"], c["stream"]) for c in rec.calls]
    py = PyLaunch()
    return ArrayGuard(py, DeviceArray, specs, [1, 0], 15, to_handle,  # type: ignore
                      kinds, in_place), lambda: py.calls


@pytest.mark.parametrize("which", ["native", "python"])
@pytest.mark.parametrize("case", DL_CASES, ids=[c[0] for c in DL_CASES])
def test_guard_decisions_with_dlpack_arrays(native: Any, kinds: Any, which: str,
                                            case: Any) -> None:
    """Each case launched (with its addresses and stream) or refused (nothing launched);
    the producers were asked for the launch stream (1: the legacy one) at most once per
    call, and every capsule was released when the guard returned."""
    name, x, out, stream, launched = case
    guard, calls = _dl_guard(native, kinds, which)
    for a in (x, out):
        if isinstance(a, DLPackOnly):
            a.streams.clear()
    n0 = _live()
    assert guard(x, out, stream) is (launched is not None)
    assert calls() == ([launched] if launched else [])
    assert _live() == n0
    for a in (x, out):
        if isinstance(a, DLPackOnly):
            assert set(a.streams) <= {stream or 1}
            # one handshake per call (the Python guard's probe retries a 0.x producer
            # without max_version once, learning its type)
            assert len(a.streams) <= 1 + (which == "python" and isinstance(a, Legacy))
    if name in ("another device", "host memory"):
        assert x.streams == []  # refused from __dlpack_device__: no handshake asked


@pytest.mark.parametrize("which", ["native", "python"])
@pytest.mark.parametrize("in_place", [False, True])
def test_dlpack_guard_in_place_rule(native: Any, kinds: Any, which: str,
                                    in_place: bool) -> None:
    specs = [(SHAPE_OUT, F32, 0, None, False, DL_OUT), (SHAPE_OUT, F32, 0, None, True, DL_OUT)]
    guard, calls = _dl_guard(native, kinds, which, specs, in_place)
    x = _dl(0x10000, SHAPE_OUT, F32)
    assert guard(x, _dl(0x10000, SHAPE_OUT, F32), None) is in_place
    assert guard(x, _dl(0x10000 + 16, SHAPE_OUT, F32), None) is False
    # no typestr in the specs (several GPUs): a CAI array is not taken, a DeviceArray is
    assert guard(x, CaiArray(0x20000, SHAPE_OUT, "<f4"), None) is False
    assert guard(x, guard_array(0x20000, SHAPE_OUT, F32), None) is True
    assert len(calls()) == 1 + in_place


def test_dlpack_guard_other_device(native: Any, kinds: Any) -> None:
    """A guard for device 1 takes arrays its producers place there, not on device 0."""
    specs = [(SHAPE_IN, U8, 1, None, False, DL_IN), (SHAPE_OUT, F32, 1, None, True, DL_OUT)]
    for which in ("native", "python"):
        guard, calls = _dl_guard(native, kinds, which, specs)
        x1 = DLPackOnly(DeviceArray.wrap(0x10000, SHAPE_IN, "uint8", device=1))
        y1 = DLPackOnly(DeviceArray.wrap(0x20000, SHAPE_OUT, "float32", device=1))
        assert guard(x1, y1, None) is True
        assert guard(_dl(0x10000), y1, None) is False
        assert len(calls()) == 1


def test_dlpack_guard_from_many_threads(native: Any, kinds: Any) -> None:
    """One native guard called from 8 threads, each with producers of its own: every
    launch gets its own call's addresses; no capsule outlives its call."""
    guard, calls = _dl_guard(native, kinds, "native")
    n_threads, per = 8, 50
    barrier = threading.Barrier(n_threads)
    n0 = _live()

    def work(t: int) -> None:
        barrier.wait()
        for k in range(per):
            i = t * per + k
            x = _dl((1 << 32) + i * 4096)
            y = _dl((1 << 40) + i * 4096, SHAPE_OUT, F32)
            assert guard(x, y, None) is True

    run_threads(work, n_threads)
    got = sorted(p for p, _ in calls())
    assert got == sorted(((1 << 40) + i * 4096, (1 << 32) + i * 4096)
                         for i in range(n_threads * per))
    assert _live() == n0


def test_dlpack_guard_checks_its_configuration(native: Any, kinds: Any) -> None:
    launch = Recorder().launch(native)
    with pytest.raises(TypeError):
        launch.guard(DeviceArray, [(SHAPE_IN, U8, 0, None, False, "u8"), (SHAPE_OUT, F32, 0)],
                     [1, 0], 15, to_handle, kinds, False)


@pytest.mark.plugin("compose")
@pytest.mark.plugin("cpu")
def test_dlpack_guard_runs_the_cpu_kernel_on_host_memory(native: Any,
                                                         kinds: Any) -> None:
    """End to end: a pipe's prepared launch on the CPU target, guarded in C over
    DLPack-only producers whose capsules (built by the native exporter) point at NumPy
    memory, computes the chain (values against NumPy; fresh random data, a poisoned
    output)."""
    fkl = pytest.importorskip("fkl")

    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.Add(1.0), fkl.TensorWrite(),
                       target="cpu")
    rng = np.random.default_rng()
    shape = (5, 9, 3)
    src = rng.standard_normal(shape).astype(np.float32)
    pipe(src, out=np.empty_like(src))
    (hot,) = pipe._hot.values()
    plan = hot.plan
    code = F32.bits | 2 << 8
    guard = plan.launcher.prepared.guard(
        DeviceArray, [(shape, F32, 0, None, False, code), (shape, F32, 0, None, True, code)],
        plan.order, plan.align_mask, None, cai=True)
    for _ in range(3):
        src = rng.standard_normal(shape).astype(np.float32)
        out = np.full_like(src, np.nan)
        x = DLPackOnly(DeviceArray.wrap(src.ctypes.data, shape, "float32", owner=src))
        y = DLPackOnly(DeviceArray.wrap(out.ctypes.data, shape, "float32", owner=out))
        assert guard(x, y, None) is True
        np.testing.assert_allclose(out, src * 2 + 1, rtol=1e-6)
        assert x.streams == [1] and y.streams == [1]
    bad = DLPackOnly(DeviceArray.wrap(out.ctypes.data, (5, 9, 4), "float32", owner=out))
    assert guard(x, bad, None) is False


# -- session 12: the guard's remembered kinds, hostile producers ----------------------------

def test_dlpack_guard_follows_the_kinds_table(native: Any, kinds: Any,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The native guard remembers per slot the type it found mapped to "dlpack" and
    looks the table up again once the table changed in any way (a type re-mapped,
    removed, put back): the same decisions as the Python guard, every call."""
    from thork_core import _probe

    for which in ("native", "python"):
        guard, calls = _dl_guard(native, kinds, which)
        x, y = _dl(0x10000), _dl(*OUT_DL)
        assert guard(x, y, None) is True
        assert guard(x, y, None) is True
        monkeypatch.setitem(kinds, DLPackOnly, _probe.CAI)  # no interface: refused
        assert guard(x, y, None) is False
        monkeypatch.setitem(kinds, DLPackOnly, _probe.DLPACK)
        assert guard(x, y, None) is True
        monkeypatch.delitem(kinds, DLPackOnly)
        assert guard(x, y, None) is False
        monkeypatch.setitem(kinds, DLPackOnly, _probe.DLPACK)
        assert guard(x, y, None) is True
        assert len(calls()) == 4, which


_CAPSULE_NEW = ctypes.pythonapi.PyCapsule_New
_CAPSULE_NEW.restype, _CAPSULE_NEW.argtypes = ctypes.py_object, [
    ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
#: capsule names must outlive their capsules: module-level bytes
_NAMES = {n: ctypes.create_string_buffer(n) for n in (
    b"dltensor_versioned", b"dltensor", b"used_dltensor_versioned", b"garbage")}


class _Fake:
    """A DLPack tensor built in Python memory (no deleter: nothing to release), held with
    its shape and strides arrays for as long as its capsules live (the test's)."""

    def __init__(self, data: int, shape: Any, code: int, *, major: int = 1,
                 versioned: bool = True, strides: Any = None, lanes: int = 1,
                 device: tuple[int, int] = (2, 0), null_shape: bool = False,
                 readonly: bool = False) -> None:
        from thork_core._adapter import _DLManagedTensor, _DLManagedTensorVersioned

        self.shape = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        self.strides = None if strides is None else (ctypes.c_int64 * len(strides))(*strides)
        if versioned:
            self.m: Any = _DLManagedTensorVersioned(major=major, minor=0, flags=int(readonly))
        else:
            self.m = _DLManagedTensor()
        t = self.m.dl_tensor
        t.data, t.ndim = data, len(shape)
        t.device.device_type, t.device.device_id = device
        t.dtype.code, t.dtype.bits, t.dtype.lanes = code >> 8, code & 0xFF, lanes
        if not null_shape:
            t.shape = ctypes.cast(self.shape, ctypes.POINTER(ctypes.c_int64))
        if self.strides is not None:
            t.strides = ctypes.cast(self.strides, ctypes.POINTER(ctypes.c_int64))
        self.name = b"dltensor_versioned" if versioned else b"dltensor"

    def capsule(self, name: bytes | None = None) -> Any:
        return _CAPSULE_NEW(ctypes.addressof(self.m), _NAMES[name or self.name], None)


class Hostile:
    """A DLPack-only producer whose replies are given: ``dlpack()`` makes what
    ``__dlpack__`` returns (or raises), ``device`` what ``__dlpack_device__`` returns."""

    def __init__(self, dlpack: Any, device: Any = (2, 0)) -> None:
        self.dlpack, self.device = dlpack, device

    def __dlpack__(self, **kw: Any) -> Any:
        return self.dlpack()

    def __dlpack_device__(self) -> Any:
        return self.device


class _Kind(int):
    """An int subclass (an IntEnum-like device type): read by value, not identity."""


_IN = (0x30000, SHAPE_IN, DL_IN)
_GOOD = _Fake(*_IN)
_SAME_CAPSULE = _GOOD.capsule()
HOSTILE = [  # (name, __dlpack__ reply maker, __dlpack_device__ reply, launched)
    ("None", lambda: None, (2, 0), False),
    ("an int", lambda: 12345, (2, 0), False),
    ("a foreign capsule", lambda: _GOOD.capsule(b"garbage"), (2, 0), False),
    ("a consumed capsule", lambda: _GOOD.capsule(b"used_dltensor_versioned"), (2, 0), False),
    ("a capsule without a name",
     lambda: _CAPSULE_NEW(ctypes.addressof(_GOOD.m), None, None), (2, 0), False),
    ("ABI 2", (lambda f: f.capsule)(_Fake(*_IN, major=2)), (2, 0), False),
    ("no shape array", (lambda f: f.capsule)(_Fake(*_IN, null_shape=True)), (2, 0), False),
    ("2 lanes", (lambda f: f.capsule)(_Fake(*_IN, lanes=2)), (2, 0), False),
    ("another rank", (lambda f: f.capsule)(_Fake(0x30000, (7, 99), DL_IN)), (2, 0), False),
    ("capsule on another device", (lambda f: f.capsule)(_Fake(*_IN, device=(2, 1))), (2, 0),
     False),
    ("capsule in host memory", (lambda f: f.capsule)(_Fake(*_IN, device=(1, 0))), (2, 0),
     False),
    ("strided", (lambda f: f.capsule)(_Fake(*_IN, strides=(198, 3, 1))), (2, 0), False),
    ("raises", lambda: (_ for _ in ()).throw(BufferError("no")), (2, 0), False),
    ("device None", _GOOD.capsule, None, False),
    ("device of one entry", _GOOD.capsule, (2,), False),
    ("device of strings", _GOOD.capsule, ("2", "0"), False),
    ("device id too large", _GOOD.capsule, (2, 1 << 70), False),
    ("device True (CPU)", _GOOD.capsule, (True, 0), False),
    ("no deleter, compact", _GOOD.capsule, (2, 0), True),
    ("legacy capsule, no deleter", (lambda f: f.capsule)(_Fake(*_IN, versioned=False)),
     (2, 0), True),
    ("compact strides given", (lambda f: f.capsule)(_Fake(*_IN, strides=(99, 3, 1))),
     (2, 0), True),
    ("the same capsule each call", lambda: _SAME_CAPSULE, (2, 0), True),
    ("device as an int subclass", _GOOD.capsule, (_Kind(2), _Kind(0)), True),
    ("managed memory", (lambda f: f.capsule)(_Fake(*_IN, device=(13, 0))), (13, 0), True),
]


@pytest.mark.parametrize("which", ["native", "python"])
@pytest.mark.parametrize("case", HOSTILE, ids=[c[0] for c in HOSTILE])
def test_dlpack_guard_hostile_producers(native: Any, kinds: Any,
                                        monkeypatch: pytest.MonkeyPatch, case: Any,
                                        which: str) -> None:
    """Whatever a DLPack-only producer answers, the native guard does not crash: a
    capsule it cannot take (another name, ABI, device, rank, lanes, layout; no shape
    array; not a capsule; an exception; a bad device reply) refuses the call (the
    caller's path says why), a valid one is taken (a NULL deleter, a legacy capsule, the
    same capsule object again), twice in a row (the remembered type, the kept extents)."""
    monkeypatch.setitem(kinds, Hostile, _probe_dlpack())
    name, make, device, launched = case
    guard, calls = _dl_guard(native, kinds, which)
    x = Hostile(make, device)
    for _ in range(2):
        assert guard(x, guard_array(*OUT_DL), None) is launched
    assert calls() == ([((0x20000, 0x30000), 0)] * 2 if launched else [])


def _probe_dlpack() -> Any:
    from thork_core import _probe

    return _probe.DLPACK


def test_dlpack_guard_shapes_of_high_rank(native: Any, kinds: Any) -> None:
    """A spec shape of more dimensions than the guard keeps as C ints (8) is compared
    through its tuple: taken when equal, refused when one extent differs."""
    shape = (2, 1, 3, 1, 2, 1, 2, 1, 3)
    specs = [(shape, U8, 0, "|u1", False, DL_IN), (SHAPE_OUT, F32, 0, "<f4", True, DL_OUT)]
    guard, calls = _dl_guard(native, kinds, "native", specs)
    assert guard(_dl(0x10000, shape), _dl(*OUT_DL), None) is True
    other = shape[:-1] + (2,)
    assert guard(_dl(0x10000, other), _dl(*OUT_DL), None) is False
    assert len(calls()) == 1


def test_capsule_readers_refuse_another_abi_major(native: Any) -> None:
    """A DLPack 2.x tensor (its layout may differ) is not read: the native reader gives
    None, the ctypes one None too, the adapters' reader a TypeError naming the version;
    a 1.x tensor reads the same through all three."""
    from thork_core import _probe
    from thork_core._adapter import capsule_tensor

    future = _Fake(*_IN, major=2)
    cap = future.capsule()
    assert native.dlpack_read(cap) is None
    assert _probe._read_capsule(cap) is None
    with pytest.raises(TypeError, match=r"DLPack 2\.0 tensor; Thork reads DLPack 1\.x"):
        capsule_tensor(cap)
    good = _GOOD.capsule()
    assert native.dlpack_read(good) == _probe._read_capsule(good)
    assert native.dlpack_read(good)[:2] == (0x30000, SHAPE_IN)
    t, readonly = capsule_tensor(good)
    assert (t.data, t.ndim, readonly) == (0x30000, 3, False)


def test_dlpack_device_replies_read_as_integers() -> None:
    """``__dlpack_device__`` entries are integers (an int, an IntEnum, a NumPy int), as
    the C guard reads them: a float, a string or a bool's CPU code is no CUDA device."""
    from thork_core._probe import dlpack_cuda_device

    class Dev:
        def __init__(self, reply: Any) -> None:
            self.reply = reply

        def __dlpack_device__(self) -> Any:
            return self.reply

    assert dlpack_cuda_device(Dev((2, 0))) == 0
    assert dlpack_cuda_device(Dev((np.int32(13), np.int64(1)))) == 1
    assert dlpack_cuda_device(Dev((_Kind(2), _Kind(3)))) == 3
    for bad in [(2.0, 0), (2, 0.0), ("2", "0"), (True, 0), (1, 0), None, (2,)]:
        assert dlpack_cuda_device(Dev(bad)) == -1, bad
