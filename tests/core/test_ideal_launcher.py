"""bench/ideal_launcher.c, the bound the hot CuPy row is judged against (session 18): the
least a launcher callable from Python does per call. Its launches must carry the arrays'
own addresses (a bound that launched the wrong memory would be cheaper than any launcher
and prove nothing), re-read what can change between calls, and refuse what it does not
read. The driver is stood in for by a ctypes callback, the arrays by slotted classes
whose attributes are C member descriptors (CuPy's are C getsets; both are read through
their descriptors), so this runs without a GPU or CuPy."""

import ctypes
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
if not (BENCH / "ideal_launcher.c").exists():
    pytest.skip("bench/ideal_launcher.c is not beside the tests", allow_module_level=True)

LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 7,
                          ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)
STREAM_FN = ctypes.CFUNCTYPE(ctypes.c_ssize_t)


class Memory:
    __slots__ = ("ptr",)


class Array:
    __slots__ = ("_c_contiguous", "dtype", "data")


F32 = np.dtype(np.float32)


def _array(ptr: int, dtype=F32, contiguous: bool = True) -> Array:
    m = Memory()
    m.ptr = ptr
    a = Array()
    a._c_contiguous, a.dtype, a.data = contiguous, dtype, m
    return a


def _capsule(fn) -> object:
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ctypes.cast(fn, ctypes.c_void_p).value, b"intptr_t (void)", None)


def _bench_floor():
    """bench/_floor.py, imported from beside the tests."""
    sys.path.insert(0, str(BENCH))
    try:
        import _floor
    finally:
        sys.path.remove(str(BENCH))
    return _floor


@pytest.fixture
def rig(rng):
    """(module, launches seen, the arrays, the fixed addresses, grid, block, the stream
    the stand-in CuPy answers: a one-item list the test may change)."""
    _floor = _bench_floor()
    seen: list[tuple] = []
    answer = [0]
    fail = [0]

    @LAUNCH
    def fake(f, gx, gy, gz, bx, by, bz, shared, s, params, extra):
        ptrs = [ctypes.cast(params[i], ctypes.POINTER(ctypes.c_ulonglong))[0]
                for i in range(3)]
        seen.append((gx, gy, gz, bx, by, bz, shared, s, ptrs, extra))
        return fail[0]

    @STREAM_FN
    def current():
        return answer[0]

    ptrs = [int(x) for x in rng.integers(1, 2**63, 3, dtype=np.uint64)]
    arrays = tuple(_array(p) for p in ptrs)
    fixed = tuple(int(x) for x in rng.integers(1, 2**63, 3, dtype=np.uint64))
    gx, bx = int(rng.integers(1, 10**6)), int(rng.integers(1, 1025))
    try:
        module = _floor.ideal_launcher(SimpleNamespace(grid=(gx, 1, 1), block=(bx, 1, 1)),
                                       arrays, fixed, current=_capsule(current),
                                       launch_fn=ctypes.cast(fake, ctypes.c_void_p).value)
    except RuntimeError as exc:
        if "no C compiler" in str(exc):
            pytest.skip(str(exc))
        raise
    rig = SimpleNamespace(module=module, seen=seen, arrays=arrays, ptrs=ptrs, fixed=fixed,
                          gx=gx, bx=bx, answer=answer, fail=fail, keep=(fake, current),
                          floor=_floor)
    yield rig


def test_arrays_launches_with_each_arrays_own_address(rig):
    for _ in range(3):
        rig.module.arrays(*rig.arrays)
    assert rig.seen == [(rig.gx, 1, 1, rig.bx, 1, 1, 0, None, rig.ptrs, None)] * 3


def test_a_new_data_object_or_array_is_read_again(rig, rng):
    m = rig.module
    m.arrays(*rig.arrays)
    moved = int(rng.integers(1, 2**63))
    rig.arrays[1].data = _array(moved).data
    m.arrays(*rig.arrays)
    other = _array(int(rng.integers(1, 2**63)))
    m.arrays(rig.arrays[0], rig.arrays[1], other)
    assert [s[8] for s in rig.seen] == [
        rig.ptrs, [rig.ptrs[0], moved, rig.ptrs[2]],
        [rig.ptrs[0], moved, other.data.ptr]]


def test_fixed_reads_nothing_and_launches_the_fixed_addresses(rig):
    rig.module.fixed(None, 1, "x")
    assert rig.seen == [(rig.gx, 1, 1, rig.bx, 1, 1, 0, None, list(rig.fixed), None)]


def test_what_it_does_not_read_is_refused_before_any_launch(rig):
    m, (a, b, c) = rig.module, rig.arrays
    with pytest.raises(ValueError, match="argument 1: not contiguous"):
        m.arrays(a, _array(5, contiguous=False), c)
    with pytest.raises(ValueError, match="argument 2: not contiguous or not the dtype"):
        m.arrays(a, b, _array(5, dtype=np.dtype(np.float64)))
    with pytest.raises(TypeError, match="argument 0: Array expected, got int"):
        m.arrays(7, b, c)
    rig.answer[0] = 0x7F00
    with pytest.raises(ValueError, match="current stream is not the launch stream"):
        m.arrays(a, b, c)
    assert rig.seen == []
    rig.answer[0] = 2  # the per-thread default stream: launches
    m.arrays(a, b, c)
    assert len(rig.seen) == 1


def test_a_failed_launch_names_the_drivers_code(rig):
    rig.fail[0] = 719
    with pytest.raises(RuntimeError, match="driver code 719"):
        rig.module.arrays(*rig.arrays)
    with pytest.raises(RuntimeError, match="driver code 719"):
        rig.module.fixed(*rig.arrays)


class Tensor:
    """torch.Tensor as the bound reads it: is_cuda and dtype C-level attributes (slots
    here, getsets in torch), is_contiguous() and data_ptr() methods."""

    __slots__ = ("is_cuda", "dtype", "ptr", "contiguous", "asked")

    def __init__(self, ptr: int, dtype: object = "f32") -> None:
        self.is_cuda, self.dtype, self.ptr, self.contiguous = True, dtype, ptr, True
        self.asked = 0

    def is_contiguous(self) -> bool:
        return self.contiguous

    def data_ptr(self) -> int:
        self.asked += 1
        return self.ptr


@pytest.fixture
def torch_rig(rig, rng):
    devices: list[int] = []
    stream = [0]

    def current(device: int) -> int:
        devices.append(device)
        return stream[0]

    ts = tuple(Tensor(int(p)) for p in rng.integers(1, 2**63, 3, dtype=np.uint64))
    rig.floor.ideal_torch(rig.module, ts, current=current, device=3)
    return SimpleNamespace(rig=rig, ts=ts, devices=devices, stream=stream)


def test_tensors_read_every_pointer_and_the_stream_each_call(torch_rig):
    t, (a, b, c) = torch_rig, torch_rig.ts
    t.rig.module.tensors(a, b, c)
    a.ptr = a.ptr + 256  # torch keeps no pointer a caller may trust: read again
    t.rig.module.tensors(a, b, c)
    assert [s[8] for s in t.rig.seen] == [[a.ptr - 256, b.ptr, c.ptr], [a.ptr, b.ptr, c.ptr]]
    assert t.devices == [3, 3] and a.asked == b.asked == c.asked == 2
    assert {s[7] for s in t.rig.seen} == {None}  # the launch stream


@pytest.mark.parametrize("change", ["host", "dtype", "strided", "stream", "type"])
def test_tensors_refuse_what_they_do_not_read(torch_rig, change):
    t, (a, b, c) = torch_rig, torch_rig.ts
    if change == "host":
        b.is_cuda = False
    elif change == "dtype":
        b.dtype = "f64"
    elif change == "strided":
        b.contiguous = False
    elif change == "stream":
        t.stream[0] = 0x5100
    else:
        b = _array(5)
    with pytest.raises((ValueError, TypeError), match="stream|argument 1"):
        t.rig.module.tensors(a, b, c)
    assert t.rig.seen == []


def test_the_libtorch_ideal_is_built_as_thork_torchs_reader_is(tmp_path, monkeypatch):
    """bench/ideal_torch.cpp's build (_floor.build_libtorch_ideal, session 20): thork_torch's
    recipe for the installed torch (its headers, libraries, C++ ABI, CUDA's runtime
    header), C++20 then C++17, through core's host-extension build path; a failure names
    the source and quotes the compiler. A stand-in torch package and a stand-in
    host_extension (it records each request; C++20 fails) serve here."""
    pytest.importorskip("thork_torch._reader")
    import types
    import uuid

    import thork_core.build
    from thork_core import CompileError

    pkg = tmp_path / "site" / "torch"
    (pkg / "include").mkdir(parents=True)
    (pkg / "lib").mkdir()
    torch = types.ModuleType("torch")  # only sys.modules holds it: gone after the test
    torch.__file__ = str(pkg / "__init__.py")
    torch.__version__ = f"test-{uuid.uuid4().hex}"  # type: ignore[attr-defined]
    torch._C = SimpleNamespace(_GLIBCXX_USE_CXX11_ABI=False)  # type: ignore[attr-defined]
    torch.version = SimpleNamespace(cuda="13.0")  # type: ignore[attr-defined]
    cuda = tmp_path / "cuda"
    (cuda / "include").mkdir(parents=True)
    (cuda / "include" / "cuda_runtime_api.h").write_text("")
    monkeypatch.setenv("CXX", sys.executable)  # any program that exists: nothing runs it
    monkeypatch.setenv("CUDA_HOME", str(cuda))
    monkeypatch.setitem(sys.modules, "torch", torch)
    calls: list[dict] = []
    built = types.ModuleType("ideal_torch")

    def host_extension(name, source, *, compiler, flags=(), libs=(), extra_key=(),
                       build=True, load=True):
        calls.append({"name": name, "source": source, "compiler": compiler,
                      "flags": list(flags), "libs": list(libs), "extra": list(extra_key)})
        if "-std=c++20" in flags or fail:
            raise CompileError(f"error: {flags[0]} is not enough")
        return built

    fail = False
    monkeypatch.setattr(thork_core.build, "host_extension", host_extension)
    _floor = _bench_floor()
    assert _floor.build_libtorch_ideal() is built
    assert [c["flags"][0] for c in calls] == ["-std=c++20", "-std=c++17"]
    got = calls[1]
    assert got["name"] == "ideal_torch" and got["source"] == str(BENCH / "ideal_torch.cpp")
    assert got["compiler"] == sys.executable
    flags, libs = got["flags"], got["libs"]
    assert "-D_GLIBCXX_USE_CXX11_ABI=0" in flags and "-DTHORK_TORCH_CUDA" in flags
    for folder in (pkg / "include", pkg / "include" / "torch" / "csrc" / "api" / "include",
                   cuda / "include"):
        assert flags[flags.index(str(folder)) - 1] == "-I"
    assert libs[libs.index(str(pkg / "lib")) - 1] == "-L"
    assert f"-Wl,-rpath,{pkg / 'lib'}" in libs
    assert {"-lc10", "-lc10_cuda", "-ltorch_python"} <= set(libs)
    assert torch.__version__ in got["extra"]
    fail = True
    with pytest.raises(RuntimeError, match="ideal_torch.cpp failed: error: -std=c\\+\\+17"):
        _floor.build_libtorch_ideal()
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-c++"))
    with pytest.raises(RuntimeError, match="no C\\+\\+ compiler"):
        _floor.build_libtorch_ideal()
