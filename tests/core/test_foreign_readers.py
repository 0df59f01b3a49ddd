"""Core's native Binder and Guard reading CuPy and torch arrays through the producers' own
attributes (``_native_launch.c``, "Foreign readers", session 11), without a GPU: stand-ins
with CuPy's and torch's attributes registered as foreign types, the Recorder of
test_native_launch in place of ``cuLaunchKernel``. Nothing of an array may be trusted from
an earlier call: a changed pointer, shape, contiguity, dtype, device or current stream must
be seen on the next call. The GPU suite (tests/interop/test_foreign_hot.py) holds the real
libraries' arrays to the same rules."""

from __future__ import annotations

import sys
import threading
from typing import Any

import numpy as np
import pytest
from helpers import build_shared, run_threads
from helpers.launch_recorder import F32, Recorder, assert_thread_launches, device_array, make_binder
from helpers.launch_recorder import run_binder as _run
from thork_core import DeviceArray
from thork_core._probe import KINDS

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX C compiler")


class Mem:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


class StreamObj:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


class CupyLike:
    """CuPy's ndarray as the reader sees it: _c_contiguous, dtype (NumPy), data.ptr, shape,
    ndim (the shape setter may change the last two)."""

    _c_contiguous = True  # (CuPy's is a read-only attribute of the type)

    def __init__(self, ptr: int, shape: Any = (8,), dtype: Any = np.float32) -> None:
        self.data = Mem(ptr)
        self.shape = shape
        self.dtype = np.dtype(dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)


class TorchDtype:
    def __init__(self, name: str) -> None:
        self.name = name


T_F32, T_F64 = TorchDtype("float32"), TorchDtype("float64")


class TorchLike:
    """torch.Tensor as the reader sees it: is_cuda, dtype, is_contiguous(), data_ptr(),
    shape, dim(), each of which set_/resize_/.data = may change."""

    def __init__(self, ptr: int, shape: Any = (8,), dtype: Any = T_F32) -> None:
        self.ptr, self.shape, self.dtype = ptr, shape, dtype
        self.is_cuda = True
        self.contiguous = True

    def data_ptr(self) -> int:
        return self.ptr

    def is_contiguous(self) -> bool:
        return self.contiguous

    def dim(self) -> int:
        return len(self.shape)


class Currents:
    """The libraries' current streams (per thread, as CuPy's and torch's are)."""

    def __init__(self) -> None:
        self.local = threading.local()
        self.torch_asked: list[int] = []

    def cupy(self) -> StreamObj:
        return StreamObj(getattr(self.local, "cupy", 0))

    def torch(self, device: int) -> int:
        self.torch_asked.append(device)
        return getattr(self.local, "torch", 0)  # type: ignore[no-any-return]


@pytest.fixture
def current(native):
    cur = Currents()
    from thork import dt

    native.foreign(CupyLike, 1, cur.cupy, None)
    native.foreign(TorchLike, 2, cur.torch, {T_F32: dt.float32, T_F64: dt.float64})
    yield cur
    from thork_core._probe import sync_native

    native.foreign()
    sync_native(native)


def test_cupy_arrays_launch_with_what_they_say_now(native, current):
    rec, b = make_binder(native, KINDS)
    out, x = CupyLike(0x100), CupyLike(0x200, (2, 4))
    assert _run(b, (out, 1.0, x, 3))
    x.data = Mem(0x300)  # a pointer is never taken from an earlier call
    assert _run(b, (out, 1.0, x, 3))
    assert [c["pointers"] for c in rec.calls] == [(0x100, 0x200), (0x100, 0x300)]
    assert [c["stream"] for c in rec.calls] == [0, 0]


@pytest.mark.parametrize("change", ["shape", "contiguity", "dtype", "ndim of x is free"])
def test_cupy_changes_between_calls_are_seen(native, current, change):
    rec, b = make_binder(native, KINDS)
    out, x = CupyLike(0x100), CupyLike(0x200)
    assert _run(b, (out, 1.0, x, 3))
    if change == "shape":
        out.shape = (2, 4)  # the shape setter: a 2-D out for the 1-D parameter
    elif change == "contiguity":
        out._c_contiguous = False
    elif change == "dtype":
        out.dtype = np.dtype(np.float64)
    else:
        x.shape = (2, 2, 2)
        assert _run(b, (out, 1.0, x, 3))
        assert len(rec.calls) == 2
        return
    assert not _run(b, (out, 1.0, x, 3))
    assert len(rec.calls) == 1
    out.shape, out._c_contiguous, out.dtype = (8,), True, np.dtype(np.float32)
    assert _run(b, (out, 1.0, x, 3)) and len(rec.calls) == 2


def test_cupy_current_stream_is_read_each_call(native, current):
    rec, b = make_binder(native, KINDS)
    out, x = CupyLike(0x100), CupyLike(0x200)
    assert _run(b, (out, 1.0, x, 3))
    current.local.cupy = 0x55  # `with cupy.cuda.Stream():` around the next calls
    assert not _run(b, (out, 1.0, x, 3))  # produced on 0x55, launched on 0: Python waits
    assert _run(b, (out, 1.0, x, 3), 0x55)  # launched on it: nothing to wait for
    current.local.cupy = 1  # the legacy stream as CuPy's interface names it
    assert _run(b, (out, 1.0, x, 3))
    assert [c["stream"] for c in rec.calls] == [0, 0x55, 0]


def test_torch_tensors_launch_on_torchs_current_stream(native, current):
    rec, b = make_binder(native, KINDS)
    out, x = TorchLike(0x100), TorchLike(0x200, (4, 2))
    current.local.torch = 0x77
    assert _run(b, (out, 1.0, x, 3))  # no stream given: torch's current one
    current.local.torch = 0x99  # switched between calls
    assert _run(b, (out, 1.0, x, 3))
    assert _run(b, (out, 1.0, x, 3), 0x99)  # given, and it is torch's: launched
    assert not _run(b, (out, 1.0, x, 3), 0x42)  # another one: Python waits and records
    assert [c["stream"] for c in rec.calls] == [0x77, 0x99, 0x99]
    assert set(current.torch_asked) == {0}


@pytest.mark.parametrize("change", ["set_", "resize_", ".data = float64", "not contiguous",
                                    "cpu"])
def test_torch_changes_between_calls_are_seen(native, current, change):
    rec, b = make_binder(native, KINDS)
    out, x = TorchLike(0x100), TorchLike(0x200)
    assert _run(b, (out, 1.0, x, 3))
    if change == "set_":  # another storage: the new address is launched
        out.ptr = 0x900
        assert _run(b, (out, 1.0, x, 3))
        assert rec.calls[-1]["pointers"] == (0x900, 0x200)
        return
    if change == "resize_":
        out.shape = (2, 4)
    elif change == ".data = float64":
        out.dtype = T_F64
    elif change == "not contiguous":
        out.contiguous = False
    else:
        out.is_cuda = False
    assert not _run(b, (out, 1.0, x, 3))
    assert len(rec.calls) == 1


def test_mixed_kinds_follow_torchs_stream(native, current):
    """A DeviceArray produced on torch's stream and a CuPy array on a default stream
    launch on torch's current stream; a DeviceArray from another stream goes to Python."""
    rec, b = make_binder(native, KINDS)
    current.local.torch = 0x77
    assert _run(b, (device_array(0x100, stream=0x77), 1.0, TorchLike(0x200), 3))
    assert _run(b, (CupyLike(0x100), 1.0, TorchLike(0x200), 3))
    assert not _run(b, (device_array(0x100, stream=0x33), 1.0, TorchLike(0x200), 3))
    assert [c["stream"] for c in rec.calls] == [0x77, 0x77]


def test_unregistered_types_are_not_read(native, current):
    from thork_core._probe import KINDS

    rec, b = make_binder(native, KINDS)
    native.foreign()
    assert KINDS.get(CupyLike) is None
    assert not _run(b, (CupyLike(0x100), 1.0, CupyLike(0x200), 3))
    assert not _run(b, (TorchLike(0x100), 1.0, TorchLike(0x200), 3))
    assert rec.calls == []


def test_a_stream_reader_that_fails_is_a_miss(native, current):
    def broken(*_: Any) -> Any:
        raise RuntimeError("no stream")

    from thork import dt

    native.foreign(CupyLike, 1, broken, None)
    native.foreign(TorchLike, 2, broken, {T_F32: dt.float32})
    rec, b = make_binder(native, KINDS)
    assert not _run(b, (CupyLike(0x100), 1.0, CupyLike(0x200), 3))
    assert not _run(b, (TorchLike(0x100), 1.0, TorchLike(0x200), 3))
    assert rec.calls == []


def test_registration_checks_its_arguments(native, current):
    with pytest.raises(TypeError, match="foreign"):
        native.foreign(CupyLike, 1)
    with pytest.raises(ValueError, match="style 1 or 2"):
        native.foreign(CupyLike, 3, lambda: 0, None)
    with pytest.raises(TypeError, match="dict of dtypes"):
        native.foreign(TorchLike, 2, lambda d: 0, None)


def test_eight_threads_share_one_binder(native, current):
    """The same binder from 8 threads, each with its own arrays and current streams: every
    launch carries its own thread's pointers and stream."""
    rec, b = make_binder(native, KINDS)

    def work(i: int) -> None:
        current.local.torch = 0x1000 + i
        current.local.cupy = 0
        out, x = TorchLike(0x10000 * (i + 1)), CupyLike(0x10000 * (i + 1) + 0x80)
        for _ in range(300):
            assert _run(b, (out, 1.0, x, i))

    run_threads(work, 8, join_seconds=60)
    assert_thread_launches(rec, 8, 300)


# -- the Guard (fkl's hot call): exact shapes ----------------------------------------

def _guard(native):
    from thork_core._probe import KINDS

    rec = Recorder()
    from thork import dt

    prepared = rec.launch(native)
    g = prepared.guard(DeviceArray, [((8,), dt.float32, 0, "<f4", False, None),
                                     ((2, 4), dt.float32, 0, "<f4", True, None)],
                       [0, 1], 0, lambda s: int(s), KINDS, False)
    return rec, g


@pytest.mark.parametrize("kind", [CupyLike, TorchLike])
def test_guard_reads_exact_shapes_each_call(native, current, kind):
    rec, g = _guard(native)
    x, y = kind(0x100), kind(0x200, (2, 4))
    assert g(x, y, None)
    x.shape = (2, 4)  # CuPy's shape setter / torch's resize_: same bytes, another plan
    assert not g(x, y, None)
    x.shape = (8,)
    y.shape = (4, 2)
    assert not g(x, y, None)
    y.shape = (2, 4)
    assert g(x, y, None)
    y2 = kind(0x104, (2, 4))  # overlapping the input: the caller's path reports it
    assert not g(x, y2, None)
    assert [c["pointers"] for c in rec.calls] == [(0x100, 0x200)] * 2


def test_allocating_call_with_a_torch_input_and_no_stream_goes_to_python(native, current):
    """pipe(x) allocating: its output belongs on torch's stream, which only the Python path
    allocates on."""
    class Pipe(native.GuardedCall):
        def __init__(self) -> None:
            self.missed = 0

        def _miss(self, *args: Any, **kw: Any) -> Any:
            self.missed += 1
            return "python"

    p = Pipe()
    _, g = _guard(native)
    p._hot_guard = g
    p._hot_out = object()  # not an OutMaker: never used for the torch input anyway
    assert p(TorchLike(0x100)) == "python" and p.missed == 1


def test_foreign_reader_decisions(monkeypatch):
    """Which types get a reader: CuPy's ndarray with the flag its own interface reads (a
    CuPy without it keeps the interface path), torch.Tensor itself (not subclasses)."""
    import types

    from thork_core._probe import CAI, foreign_reader

    fake = types.ModuleType("cupy")
    fake.cuda = types.SimpleNamespace(get_current_stream=lambda: StreamObj(0))
    # (the GPU suite has the real CuPy loaded: its C function would be preferred)
    monkeypatch.delitem(sys.modules, "cupy_backends.cuda.stream", raising=False)

    class NoFlag:
        pass

    fake.ndarray = NoFlag
    monkeypatch.setitem(sys.modules, "cupy", fake)
    assert foreign_reader(NoFlag, CAI) is None
    fake.ndarray = CupyLike
    assert foreign_reader(CupyLike, CAI) == (1, fake.cuda.get_current_stream, None)
    assert foreign_reader(CupyLike, "plain") is None
    del fake.cuda
    assert foreign_reader(CupyLike, CAI) is None


def test_torch_reader_and_its_stream_fallback(monkeypatch):
    torch = pytest.importorskip("torch")
    from thork_torch import _adapter, _reader

    a = _adapter.TorchAdapter()
    assert a.native_reader(torch.nn.Parameter) is None
    # torch's Python API (the C++ reader, test_torch_reader.py, off here)
    monkeypatch.setenv("THORK_TORCH_READER", "0")
    monkeypatch.setattr(_reader, "_STATE", {})
    monkeypatch.setattr(_adapter, "_RAW_STREAM", [None])  # a torch without the raw read
    style, current, dtypes = a.native_reader(torch.Tensor)
    assert style == 2 and current is _adapter.torch_stream
    from thork import dt

    assert dtypes[torch.float32] is dt.float32 and dtypes[torch.bfloat16] is dt.bfloat16
    monkeypatch.setattr(_adapter, "_RAW_STREAM", [])
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    assert a.native_reader(torch.Tensor)[1] is (raw or _adapter.torch_stream)


def test_registrations_beyond_the_table_drop_the_oldest(native, current):
    """Types made at run time (stand-ins, reloaded modules) never make registering fail:
    the oldest registration goes."""
    made = [type(f"Made{i}", (CupyLike,), {}) for i in range(6)]
    for tx in made:
        native.foreign(tx, 1, current.cupy, None)
    rec, b = make_binder(native, KINDS)
    assert _run(b, (made[-1](0x100), 1.0, made[-1](0x200), 3))
    assert not _run(b, (CupyLike(0x100), 1.0, CupyLike(0x200), 3))  # dropped


# -- (session 12) attributes read through their descriptors' getters ----------------------

class SlotMem:
    __slots__ = ("ptr",)

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


class CupySlots:
    """CupyLike with C-level attributes (member descriptors, as CuPy's are C getters): the
    readers call their getters directly while the type is unchanged."""

    __slots__ = ("_c_contiguous", "data", "dtype", "ndim", "shape")

    def __init__(self, ptr: int, shape: Any = (8,), dtype: Any = np.float32) -> None:
        self.data = SlotMem(ptr)
        self._c_contiguous = True
        self.dtype = np.dtype(dtype)
        self.shape = shape
        self.ndim = len(shape)


@pytest.fixture
def slots_current(native, current):
    native.foreign(CupySlots, 1, current.cupy, None)
    return current


@pytest.mark.parametrize("change", ["pointer", "pointer object", "contiguity", "dtype",
                                    "ndim", "stream"])
def test_direct_attribute_reads_see_every_change(native, slots_current, change):
    rec, b = make_binder(native, KINDS)
    out, x = CupySlots(0x100), CupySlots(0x200, (2, 4))
    for _ in range(3):
        assert _run(b, (out, 1.0, x, 3))
    if change == "pointer":
        out.data.ptr = 0x180
        assert _run(b, (out, 1.0, x, 3))
        assert rec.calls[-1]["pointers"] == (0x180, 0x200)
        return
    if change == "pointer object":
        x.data = SlotMem(0x280)
        assert _run(b, (out, 1.0, x, 3))
        assert rec.calls[-1]["pointers"] == (0x100, 0x280)
        return
    if change == "contiguity":
        out._c_contiguous = False
    elif change == "dtype":
        out.dtype = np.dtype(np.int32)
    elif change == "ndim":
        out.ndim = 2
    else:
        slots_current.local.cupy = 0x77
    assert not _run(b, (out, 1.0, x, 3))
    assert len(rec.calls) == 3


def test_a_type_changed_after_its_reads_were_resolved_is_read_anew(native, slots_current):
    """Replacing a type's attribute (here the slot ``data`` by a property) changes the
    type's version tag: the next read resolves it again instead of calling the old
    getter."""
    rec, b = make_binder(native, KINDS)
    out, x = CupySlots(0x100), CupySlots(0x200)
    assert _run(b, (out, 1.0, x, 3))
    slot = CupySlots.__dict__["data"]
    try:
        CupySlots.data = property(lambda self: SlotMem(0x900))  # type: ignore[assignment]
        assert _run(b, (out, 1.0, x, 3))
        assert rec.calls[-1]["pointers"] == (0x900, 0x900)
    finally:
        CupySlots.data = slot  # type: ignore[assignment]
    assert _run(b, (out, 1.0, x, 3))
    assert rec.calls[-1]["pointers"] == (0x100, 0x200)


def test_direct_reads_from_eight_threads(native, slots_current):
    rec, b = make_binder(native, KINDS)

    def work(i: int) -> None:
        slots_current.local.cupy = 0
        out, x = CupySlots(0x10000 * (i + 1)), CupySlots(0x10000 * (i + 1) + 0x80, (2, 2))
        for k in range(300):
            x.data.ptr = 0x10000 * (i + 1) + 0x80 + 4 * (k % 3)
            assert _run(b, (out, 1.0, x, i))

    run_threads(work, 8, join_seconds=60)
    assert len(rec.calls) == 8 * 300
    for c in rec.calls:
        i = c["scalars"][1]
        assert c["pointers"][0] == 0x10000 * (i + 1)
        assert c["pointers"][1] - 0x10000 * (i + 1) - 0x80 in (0, 4, 8)


# -- (session 16) CuPy's current stream through its C function -----------------------

_C_STREAM = r"""
#include <Python.h>
#include <stdint.h>
/* CuPy's get_current_stream_ptr as the reader sees it: a per-thread handle; `failing`
 * stands for CuPy's error path (no device: an exception set, -1 returned; 2: the
 * exception set with the handle returned, as an "except *" function may). */
static _Thread_local intptr_t value;
static _Thread_local int failing;
void set_stream(intptr_t v, int fail) { value = v; failing = fail; }
intptr_t current_stream(void) {
    if (failing) {
        PyErr_SetString(PyExc_RuntimeError, "cudaErrorNoDevice");
        return failing == 2 ? value : -1;
    }
    return value;
}
"""


class CStream:
    """A compiled ``intptr_t (void)`` function and capsules of it under chosen names."""

    def __init__(self, lib: Any) -> None:
        import ctypes

        self.lib = lib
        self.lib.set_stream.argtypes = [ctypes.c_ssize_t, ctypes.c_int]
        self._names: list[bytes] = []  # a capsule's name must outlive it

    def set(self, value: int, fail: int = 0) -> None:
        self.lib.set_stream(value, fail)

    def capsule(self, name: str = "intptr_t (void)") -> Any:
        import ctypes

        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        raw = name.encode()
        self._names.append(raw)
        addr = ctypes.cast(self.lib.current_stream, ctypes.c_void_p).value
        return new(addr, raw, None)


@pytest.fixture(scope="module")
def c_stream(tmp_path_factory):
    import ctypes

    d = tmp_path_factory.mktemp("cstream")
    (d / "s.c").write_text(_C_STREAM)
    return CStream(ctypes.CDLL(str(build_shared(d / "s.c", d / "s.so", python=True))))


def test_cupy_stream_read_through_a_c_function(native, current, c_stream):
    """The capsule's function is asked each call, per thread, with the same rules as the
    Python reader: a default stream or the launch stream launches; another is the caller's."""
    native.foreign(CupyLike, 1, c_stream.capsule(), None)
    rec, b = make_binder(native, KINDS)
    out, x = CupyLike(0x100), CupyLike(0x200)
    c_stream.set(0)
    assert _run(b, (out, 1.0, x, 3))
    c_stream.set(0x55)  # `with cupy.cuda.Stream():`
    assert not _run(b, (out, 1.0, x, 3))
    assert _run(b, (out, 1.0, x, 3), 0x55)
    c_stream.set(2)  # the per-thread default stream
    assert _run(b, (out, 1.0, x, 3))
    assert [c["stream"] for c in rec.calls] == [0, 0x55, 0]

    def work(i: int) -> None:  # each thread its own current stream
        c_stream.set(0x1000 + i)
        o, y = CupyLike(0x10000 * (i + 1)), CupyLike(0x10000 * (i + 1) + 0x80)
        for _ in range(200):
            assert _run(b, (o, 1.0, y, i), 0x1000 + i)
            assert not _run(b, (o, 1.0, y, i), 0x2000 + i)

    run_threads(work, 8, join_seconds=60)
    assert len(rec.calls) == 3 + 8 * 200
    for c in rec.calls[3:]:
        i = c["scalars"][1]
        assert c["stream"] == 0x1000 + i and c["pointers"][0] == 0x10000 * (i + 1)


def test_a_c_stream_function_that_raises_is_a_miss(native, current, c_stream):
    """CuPy's function raising (no device, say) leaves the call to the caller with nothing
    raised and nothing left set; the next call reads it again."""
    native.foreign(CupyLike, 1, c_stream.capsule("intptr_t (void) except? -1"), None)
    rec, b = make_binder(native, KINDS)
    out, x = CupyLike(0x100), CupyLike(0x200)
    c_stream.set(0, fail=1)
    assert not _run(b, (out, 1.0, x, 3))
    assert sys.exc_info() == (None, None, None)
    c_stream.set(0)
    assert _run(b, (out, 1.0, x, 3))
    assert [c["stream"] for c in rec.calls] == [0]


@pytest.mark.parametrize("fail", [1, 2])
def test_an_except_star_stream_function_is_checked_after_every_call(native, current, c_stream,
                                                                   fail):
    """(session 17) For "except *" the error check follows every call, whatever the value
    (for the other names it follows a -1 only, Cython's convention: the check costs a
    thread-local read per call)."""
    native.foreign(CupyLike, 1, c_stream.capsule("intptr_t (void) except *"), None)
    rec, b = make_binder(native, KINDS)
    out, x = CupyLike(0x100), CupyLike(0x200)
    for stream in (None, 0x55):
        c_stream.set(stream or 0, fail=fail)
        assert not _run(b, (out, 1.0, x, 3), stream)
        assert sys.exc_info() == (None, None, None)
    c_stream.set(0)
    assert _run(b, (out, 1.0, x, 3))
    assert [c["stream"] for c in rec.calls] == [0]


def test_an_error_left_by_an_except_star_stream_function_is_never_carried_on(
        native, current, c_stream, ro):
    """The same with arrays read through C getters only and no ndim to read (nothing
    after the stream read would notice an error left set): the call is the caller's, and
    no error is left behind (without the check: SystemError, a result with an error set)."""
    from thork_core._probe import KINDS

    native.foreign(ro.Array, 1, c_stream.capsule("intptr_t (void) except *"), None)
    rec = Recorder()
    specs = [(F32, "<f4", -1, True), (True,), (F32, "<f4", -1, False), (False,)]
    b = native.Binder(rec.launcher(native), DeviceArray, 0, specs, KINDS)
    out, x = ro.Array(ro.Mem(0x100), F4, (8,)), ro.Array(ro.Mem(0x200), F4, (8,))
    c_stream.set(0, fail=2)
    assert not _run(b, (out, 1.0, x, 3))
    assert sys.exc_info() == (None, None, None)
    c_stream.set(0)
    assert _run(b, (out, 1.0, x, 3))
    assert [c["pointers"] for c in rec.calls] == [(0x100, 0x200)]


def test_a_capsule_of_another_signature_is_refused(native, current, c_stream):
    with pytest.raises(ValueError, match=r"'intptr_t \(void\)'.*named 'int \(int\)'"):
        native.foreign(CupyLike, 1, c_stream.capsule("int (int)"), None)
    with pytest.raises(ValueError, match=r"named 'thork.array_reader' \(style 2\) expected, "
                       r"got one named 'intptr_t \(void\)'"):
        native.foreign(TorchLike, 2, c_stream.capsule(), {})


def test_cupy_registration_prefers_its_c_function(native, current, c_stream, monkeypatch):
    """_probe registers CuPy's ndarray with cupy_backends.cuda.stream's exported
    get_current_stream_ptr when there is one, and with get_current_stream when the
    native module refuses the capsule (another signature) or CuPy exports none."""
    import types

    from thork_core import _probe

    fake = types.ModuleType("cupy")
    fake.ndarray = CupyLike
    calls: list[int] = []

    def gcs() -> StreamObj:
        calls.append(1)
        return StreamObj(0)

    fake.cuda = types.SimpleNamespace(get_current_stream=gcs)
    stream_mod = types.ModuleType("cupy_backends.cuda.stream")
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.stream", stream_mod)
    good = c_stream.capsule()
    stream_mod.__pyx_capi__ = {"get_current_stream_ptr": good}  # type: ignore[attr-defined]
    assert _probe.foreign_reader(CupyLike, _probe.CAI) == (1, good, None)
    assert _probe.foreign_reader(CupyLike, _probe.CAI, c_api=False) == (1, gcs, None)
    rec, b = make_binder(native, KINDS)
    args = (CupyLike(0x100), 1.0, CupyLike(0x200), 3)
    for capi, python_asked in ((good, 0), (c_stream.capsule("long (void)"), 1), (None, 1)):
        stream_mod.__pyx_capi__ = {} if capi is None else {  # type: ignore[attr-defined]
            "get_current_stream_ptr": capi}
        calls.clear()
        c_stream.set(0x99)  # what the C function would answer: not a launchable stream
        _probe._register(native, CupyLike, _probe.CAI)
        assert _run(b, args) is (python_asked == 1), capi
        assert len(calls) == python_asked


# -- (session 16) the pointer kept for the same array and data object ----------------

@pytest.fixture(scope="module")
def ro(tmp_path_factory):
    """tests/helpers/readonly_arrays.c built: CuPy-like types whose ``data`` and ``ptr``
    are read-only in C (the condition for keeping a pointer between calls)."""
    import importlib.util
    import sysconfig
    from pathlib import Path

    src = Path(__file__).parent.parent / "helpers" / "readonly_arrays.c"
    out = build_shared(src, tmp_path_factory.mktemp("ro") / (
        "readonly_arrays" + sysconfig.get_config_var("EXT_SUFFIX")), python=True)
    spec = importlib.util.spec_from_file_location("readonly_arrays", out)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def ro_current(native, current, ro):
    native.foreign(ro.Array, 1, current.cupy, None)
    native.foreign(ro.FixedArray, 1, current.cupy, None)
    return current


F4 = np.dtype(np.float32)


def test_a_read_only_pointer_is_read_once_per_data_object(native, ro, ro_current):
    rec, b = make_binder(native, KINDS)
    m1, m2 = ro.Mem(0x100), ro.Mem(0x200)
    out, x = ro.Array(m1, F4, (8,)), ro.Array(m2, F4, (2, 4))
    base = ro.Mem.reads()
    for _ in range(5):
        assert _run(b, (out, 1.0, x, 3))
    assert ro.Mem.reads() - base == 2  # the first call's two reads, then none
    # (session 20) another array on the same data object: the pointer is that object's,
    # kept (the slot holds the object, so the same address is the same object)
    x2 = ro.Array(m2, F4, (8,))
    assert _run(b, (out, 1.0, x2, 3))
    assert ro.Mem.reads() - base == 2
    x2.reinit(ro.Mem(0x300), F4)  # its __init__ run again: a new data object
    assert _run(b, (out, 1.0, x2, 3))
    assert ro.Mem.reads() - base == 3
    x2.reinit(ro.Mem(0x340), np.dtype(np.int32))  # and a dtype the kernel does not take
    assert not _run(b, (out, 1.0, x2, 3))
    x2.reinit(ro.Mem(0x380), F4)
    x2._c_contiguous = False  # still checked each call
    assert not _run(b, (out, 1.0, x2, 3))
    x2._c_contiguous = True
    assert _run(b, (out, 1.0, x2, 3))
    assert [c["pointers"] for c in rec.calls] == \
        [(0x100, 0x200)] * 5 + [(0x100, 0x200), (0x100, 0x300), (0x100, 0x380)]


def test_arrays_sharing_a_data_object_share_its_kept_pointer_until_the_kept_one_goes(
        native, ro, ro_current):
    """(session 20) Two arrays on one data object: the second's call takes the pointer
    kept for the first; once the first (the one the slot watches) is gone the slot drops
    the object and the next call reads the second anew."""
    rec, b = make_binder(native, KINDS)
    out, m = ro.Array(ro.Mem(0x100), F4, (8,)), ro.Mem(0x240)
    x, y = ro.Array(m, F4, (8,)), ro.Array(m, F4, (2, 4))
    base = ro.Mem.reads()
    assert _run(b, (out, 1.0, x, 3))
    held = sys.getrefcount(m)
    for _ in range(3):
        assert _run(b, (out, 1.0, y, 3))
    assert ro.Mem.reads() - base == 2  # out and x once each; y none
    del x
    assert sys.getrefcount(m) == held - 2  # x's, and the slot's with it
    assert _run(b, (out, 1.0, y, 3))
    assert ro.Mem.reads() - base == 3
    assert [c["pointers"] for c in rec.calls] == [(0x100, 0x240)] * 5


def test_a_kept_pointer_never_outlives_its_array(native, ro, ro_current):
    """An array freed and another made at its address, holding a data object made at the
    old one's address (CPython reuses both): the weak reference is dead, the pointer is
    read anew. The case is made until both addresses repeat (it must, some time)."""
    rec, b = make_binder(native, KINDS)
    out = ro.Array(ro.Mem(0x100), F4, (8,))
    repeated, last = 0, None
    for k in range(200):
        m = ro.Mem(0x1000 + 16 * k)
        x = ro.Array(m, F4, (8,))
        ids = (id(x), id(m))
        assert _run(b, (out, 1.0, x, 3))
        assert rec.calls[-1]["pointers"] == (0x100, 0x1000 + 16 * k)
        repeated += ids == last
        last = ids
        del x, m  # both freed here (no cycle): their memory is CPython's to reuse
    assert repeated > 0, "CPython never reused the addresses: the case was not made"


def test_the_kernel_keeps_no_array_and_no_data_object_alive(native, ro, ro_current):
    """The slot holds the array weakly and its data object only while the array lives (a
    kernel called once with a large temporary must not hold its memory)."""
    import weakref

    rec, b = make_binder(native, KINDS)
    m = ro.Mem(0x200)
    out, x = ro.Array(ro.Mem(0x100), F4, (8,)), ro.Array(m, F4, (8,))
    held = sys.getrefcount(m)
    assert _run(b, (out, 1.0, x, 3))
    assert sys.getrefcount(m) == held + 1  # the slot's, while x lives
    gone = weakref.ref(x)
    del x
    assert gone() is None
    assert sys.getrefcount(m) == held - 1  # x's and the slot's references both gone


def test_a_weak_reference_kept_past_its_kernel_calls_nothing(native, ro, ro_current):
    """Someone keeping the slot's weak reference (weakref.getweakrefs) past the kernel, and
    the array going after: its callback finds no slot and does nothing."""
    import weakref

    rec, b = make_binder(native, KINDS)
    x = ro.Array(ro.Mem(0x200), F4, (8,))
    assert _run(b, (ro.Array(ro.Mem(0x100), F4, (8,)), 1.0, x, 3))
    kept = weakref.getweakrefs(x)
    assert kept
    del b, rec
    del x  # the callback runs against a slot that is gone: nothing happens
    assert all(r() is None for r in kept)


def test_types_without_weak_references_or_with_writable_attributes_are_read_each_call(
        native, ro, ro_current, slots_current):
    rec, b = make_binder(native, KINDS)
    out, x = ro.FixedArray(ro.Mem(0x100), F4, (8,)), ro.FixedArray(ro.Mem(0x200), F4, (8,))
    base = ro.Mem.reads()
    for _ in range(3):
        assert _run(b, (out, 1.0, x, 3))
    assert ro.Mem.reads() - base == 6
    s_out, s_x = CupySlots(0x500), CupySlots(0x600)  # __slots__: writable in C
    assert _run(b, (s_out, 1.0, s_x, 3))
    s_x.data.ptr = 0x680
    assert _run(b, (s_out, 1.0, s_x, 3))
    assert rec.calls[-1]["pointers"] == (0x500, 0x680)


def test_kept_pointers_from_eight_threads(native, ro, ro_current):
    """One binder, 8 threads, each alternating its own arrays (the slot's entry changes
    under every call): each launch carries its own thread's pointers."""
    rec, b = make_binder(native, KINDS)

    def work(i: int) -> None:
        out = ro.Array(ro.Mem(0x10000 * (i + 1)), F4, (8,))
        xs = [ro.Array(ro.Mem(0x10000 * (i + 1) + 0x100 * (k + 1)), F4, (8,))
              for k in range(3)]
        for k in range(300):
            assert _run(b, (out, 1.0, xs[k % 3] if k % 5 else xs[0], i))

    run_threads(work, 8, join_seconds=60)
    assert len(rec.calls) == 8 * 300
    for c in rec.calls:
        i = c["scalars"][1]
        assert c["pointers"][0] == 0x10000 * (i + 1)
        assert c["pointers"][1] - 0x10000 * (i + 1) in (0x100, 0x200, 0x300)


def test_the_guard_keeps_pointers_the_same_way(native, ro, ro_current):
    rec, g = _guard(native)
    x, y = ro.Array(ro.Mem(0x100), F4, (8,)), ro.Array(ro.Mem(0x200), F4, (2, 4))
    base = ro.Mem.reads()
    for _ in range(3):
        assert g(x, y, None)
    assert ro.Mem.reads() - base == 2
    y.shape = (4, 2)  # the shape setter: exact shapes are read each call
    assert not g(x, y, None)
    y.shape = (2, 4)
    y.reinit(ro.Mem(0x280), F4)
    assert g(x, y, None)
    assert [c["pointers"] for c in rec.calls] == [(0x100, 0x200)] * 3 + [(0x100, 0x280)]


class CupySlotsWeak(CupySlots):
    """CupySlots (``data`` writable) with weak references."""

    __slots__ = ("__weakref__",)


def test_a_data_attribute_set_between_calls_is_seen(native, ro, ro_current):
    """``data`` writable, ``ptr`` read-only: the pointer is kept for the data object the
    array holds, and setting ``data`` (to a new object, back, and to one made where an
    old one was freed) is seen on the next call."""
    native.foreign(CupySlotsWeak, 1, ro_current.cupy, None)
    rec, b = make_binder(native, KINDS)
    out, x = CupySlotsWeak(0x100), CupySlotsWeak(0x200)
    out.data, x.data = ro.Mem(0x100), ro.Mem(0x200)
    first = x.data
    base = ro.Mem.reads()
    for k in range(40):
        assert _run(b, (out, 1.0, x, 3))
        want = 0x200 if k == 0 else 0x1000 + k - 1
        assert rec.calls[-1]["pointers"] == (0x100, want)
        x.data = ro.Mem(0x1000 + k)  # the previous one freed here (first is kept)
    assert ro.Mem.reads() - base == 41  # out once; x each call (always a new object)
    x.data = first
    assert _run(b, (out, 1.0, x, 3))
    assert _run(b, (out, 1.0, x, 3))
    assert rec.calls[-1]["pointers"] == rec.calls[-2]["pointers"] == (0x100, 0x200)


def test_cupys_own_arrays_keep_their_pointer(native, current):
    """CuPy's ndarray itself (CuPy makes arrays on memory it does not own without a GPU;
    its stream function needs one, so the stand-in reader serves): the pointer is read
    once and the data object held while the array lives (its reference count says so),
    then let go with the array."""
    cupy = pytest.importorskip("cupy")
    from cupy.cuda import memory

    native.foreign(cupy.ndarray, 1, current.cupy, None)

    def real(p: int, shape: Any = (8,)) -> Any:
        mem = memory.MemoryPointer(memory.UnownedMemory(p, 4096, None, 0), 0)
        return cupy.ndarray(shape, cupy.float32, memptr=mem)

    rec, b = make_binder(native, KINDS)
    out, x = real(0x10000), real(0x20000, (3, 5))
    data = x.data
    held = sys.getrefcount(data)
    for _ in range(3):
        assert _run(b, (out, 1.0, x, 3))
    assert sys.getrefcount(data) == held + 1  # kept by the slot: the pointer is kept
    x.shape = (15,)  # the shape setter: same data, still contiguous
    assert _run(b, (out, 1.0, x, 3))
    assert not _run(b, (out, 1.0, x[::2], 3))  # a strided view: the caller's path
    del x
    assert sys.getrefcount(data) == held - 1
    x = real(0x30000)
    assert _run(b, (out, 1.0, x, 3))
    assert [c["pointers"] for c in rec.calls] == [(0x10000, 0x20000)] * 4 + [
        (0x10000, 0x30000)]


# -- (session 18) the hot path's quick read (cupy_quick: one version-tag compare) --------

@pytest.mark.parametrize("attr, replacement", [
    ("dtype", np.dtype(np.int32)), ("_c_contiguous", False), ("data", "moved")])
def test_the_quick_read_follows_a_type_changed_after_it_engaged(native, ro, ro_current,
                                                                attr, replacement):
    """x (a pointer parameter of any ndim, its pointer kept) is read by the quick path
    after the first call. Replacing one of the type's three attributes by a property
    changes the type's version tag: the next call must read through the property (a
    quick path that kept calling the old getter would launch the array's old dtype,
    contiguity or memory)."""
    native.foreign(CupySlotsWeak, 1, ro_current.cupy, None)
    rec, b = make_binder(native, KINDS)
    out, x = CupySlotsWeak(0x100), CupySlotsWeak(0x200)
    out.data, x.data = ro.Mem(0x100), ro.Mem(0x200)
    for _ in range(3):
        assert _run(b, (out, 1.0, x, 3))
    value = ro.Mem(0x900) if replacement == "moved" else replacement
    old = CupySlotsWeak.__dict__.get(attr) or CupySlots.__dict__[attr]
    setattr(CupySlotsWeak, attr, property(lambda self: value))
    try:
        if attr == "data":
            assert _run(b, (out, 1.0, x, 3))
            assert rec.calls[-1]["pointers"] == (0x900, 0x900)
        else:
            assert not _run(b, (out, 1.0, x, 3))
            assert len(rec.calls) == 3
    finally:
        delattr(CupySlotsWeak, attr)
    assert old is CupySlots.__dict__[attr]  # the slot itself was never replaced
    assert _run(b, (out, 1.0, x, 3))
    assert rec.calls[-1]["pointers"] == (0x100, 0x200)


def test_the_quick_read_forgets_its_type_when_readers_change(native, ro, ro_current):
    """foreign_of's one-entry memory of the last type found: registering, dropping or
    forgetting readers (entries are freed and moved) must forget it, or a call would read
    through a freed entry."""
    native.foreign(CupySlotsWeak, 1, ro_current.cupy, None)
    rec, b = make_binder(native, KINDS)
    out, x = CupySlotsWeak(0x100), CupySlotsWeak(0x200)
    out.data, x.data = ro.Mem(0x100), ro.Mem(0x200)
    assert _run(b, (out, 1.0, x, 3)) and _run(b, (out, 1.0, x, 3))
    native.foreign()  # every reader forgotten
    assert not _run(b, (out, 1.0, x, 3))
    for i in range(6):  # others registered until the table has moved its entries
        native.foreign(type(f"Other{i}", (CupyLike,), {}), 1, ro_current.cupy, None)
    assert not _run(b, (out, 1.0, x, 3))
    native.foreign(CupySlotsWeak, 1, ro_current.cupy, None)
    assert _run(b, (out, 1.0, x, 3)) and _run(b, (out, 1.0, x, 3))
    x.data = ro.Mem(0x240)
    assert _run(b, (out, 1.0, x, 3))
    assert [c["pointers"] for c in rec.calls] == [(0x100, 0x200)] * 4 + [(0x100, 0x240)]
