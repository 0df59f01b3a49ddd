"""Device routing logic, runnable without a GPU: which device a launch runs on, and the
named error for arrays on different devices (fake arrays exposing DLPack's device or a
``__cuda_array_interface__`` pointer whose device the driver would report), explicit
``device=`` on kernels, pipes and circular tensors, per-device executables (a fake
target with several "devices" running the CPU target's code), and kernels pickling.
The same behaviour on two real GPUs: tests/core/test_multi_gpu.py."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest
import thork as tk
from helpers import poisoned
from thork_core import DeviceError, plugins
from thork_core.runtime import array_device, check_device, route


class FakeDL:
    """An array that says where it lives through DLPack's ``__dlpack_device__``."""

    def __init__(self, kind: int, ordinal: int) -> None:
        self.kind, self.ordinal = kind, ordinal

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self.kind, self.ordinal)


class FakeCAI:
    """An array known only by ``__cuda_array_interface__`` (no device field: the driver
    is asked which device owns the pointer)."""

    def __init__(self, ptr: int) -> None:
        self.__cuda_array_interface__ = {"shape": (4,), "typestr": "<f4",
                                         "data": (ptr, False), "version": 3}


def _axpy_kernel() -> Any:
    @tk.jit
    def axpy(out: tk.DevicePointer[tk.dt.float32], x: tk.DevicePointer[tk.dt.float32],
             a: tk.dt.float32, n: tk.dt.int32, bid: tk.Uint[tk.BlockIdx],
             tid: tk.Uint[tk.ThreadIdx], bdm: tk.Uint[tk.BlockDim]):
        i = bid * bdm + tid
        with tk.if_(i < n):
            out[i] = x[i] * a + 1.0

    return axpy


@tk.jit
def scale_add(out: tk.DevicePointer[tk.dt.float32], x: tk.DevicePointer[tk.dt.float32],
              a: tk.dt.float32, n: tk.dt.int32, k: tk.Constexpr[int] = 2,
              bid: tk.Uint[tk.BlockIdx] = None, tid: tk.Uint[tk.ThreadIdx] = None,
              bdm: tk.Uint[tk.BlockDim] = None):
    i = bid * bdm + tid
    with tk.if_(i < n):
        out[i] = x[i] * a + k


# -- device resolution ----------------------------------------------------------------------
def test_array_device_reads_dlpack_and_cai(monkeypatch):
    assert array_device(FakeDL(2, 3)) == 3  # kDLCUDA
    assert array_device(FakeDL(13, 1)) == 1  # kDLCUDAManaged
    assert array_device(FakeDL(1, 0)) is None  # kDLCPU: host memory
    assert array_device(FakeDL(3, 0)) is None  # kDLCUDAHost: pinned host memory
    assert array_device(np.zeros(3)) is None
    assert array_device(7) is None
    asked = []

    def owner(ptr: int) -> int:
        asked.append(ptr)
        return {0x1000: 0, 0x2000: 1}[ptr]

    import thork_core._cuda as cuda

    monkeypatch.setattr(cuda, "pointer_device", owner)
    assert array_device(FakeCAI(0x2000)) == 1 and asked == [0x2000]
    assert array_device(FakeCAI(0x1000)) == 0


def test_route_follows_the_arrays_and_names_mixed_devices():
    assert route("k()", [("a", FakeDL(2, 1)), ("b", np.zeros(2)), ("c", FakeDL(2, 1))]) == 1
    assert route("k()", [("a", np.zeros(2))]) == 0  # host only: device 0
    assert route("k()", [("a", np.zeros(2))], 1) == 1  # host only, explicit
    with pytest.raises(DeviceError) as e:
        route("blur()", [("src", FakeDL(2, 0)), ("dst", FakeDL(2, 1))])
    msg = str(e.value)
    assert "blur()" in msg and "'src'" in msg and "'dst'" in msg
    assert "cuda:0" in msg and "cuda:1" in msg and "different devices" in msg
    with pytest.raises(DeviceError, match=r"blur\(\): parameter 'dst' is on cuda:1 .*cuda:0"):
        route("blur()", [("src", FakeDL(2, 0)), ("dst", FakeDL(2, 1))], 0)


def test_check_device_accepts_ordinals_and_names():
    assert check_device(0, "k") == 0 and check_device(np.int64(2), "k") == 2
    assert check_device("cuda:1", "k") == 1
    for bad in (-1, "gpu", 1.0, True, None, "cuda:"):
        with pytest.raises(DeviceError, match=r"k: device must be a CUDA ordinal"):
            check_device(bad, "k")


# -- kernels ----------------------------------------------------------------------------------
@pytest.mark.plugin("cpu")
def test_kernel_mixed_device_arguments_are_a_named_error():
    k = _axpy_kernel()
    with pytest.raises(DeviceError) as e:
        k[1, 32](FakeDL(2, 0), FakeDL(2, 1), 2.0, 4, target="cpu", device=0)
    assert "axpy()" in str(e.value) and "'x'" in str(e.value) and "cuda:1" in str(e.value)
    with pytest.raises(DeviceError, match=r"axpy\(\): device must be a CUDA ordinal"):
        k[1, 32](np.zeros(4, np.float32), np.zeros(4, np.float32), 2.0, 4, target="cpu",
                 device="gpu1")


@pytest.mark.plugin("cpu")
def test_explicit_device_on_the_cpu_target(rng):
    k = _axpy_kernel()
    n = 301
    x = rng.standard_normal(n).astype(np.float32)
    out = poisoned(n, np.float32)
    k[(n + 127) // 128, 128](out, x, 3.0, n, target="cpu", device=0)
    np.testing.assert_allclose(out, x * np.float32(3) + 1, rtol=1e-6)
    with pytest.raises(DeviceError, match=r"axpy: the cpu target has no CUDA device 1"):
        k[(n + 127) // 128, 128](out, x, 3.0, n, target="cpu", device=1)


def _fake_multi_gpu_target() -> Any:
    """A target with "devices" 0..2 that runs the CPU target's code: it records what was
    loaded where, and its executables route like the GPU target's with several GPUs."""
    cpu = type(plugins().target("cpu"))

    class Devices(cpu):  # type: ignore[misc, valid-type]
        name = "fake-devices"
        loads: list[int] = []

        def arch_on(self, device: int) -> str:
            return self.arch()

        def load(self, artifact: Any, kernel: Any) -> Any:
            return self.load_on(artifact, kernel, 0)

        def load_on(self, artifact: Any, kernel: Any, device: int) -> Any:
            if not 0 <= device < 3:
                raise DeviceError(f"{kernel.name}: cuda:{device} does not exist")
            exe = super().load(artifact, kernel)
            exe.ordinal, exe.routes = device, True
            self.loads.append(device)
            return exe

    return Devices()


@pytest.mark.plugin("cpu")
def test_launches_load_once_per_device_and_run_there(rng):
    tgt = _fake_multi_gpu_target()
    k = _axpy_kernel()
    n = 257
    for device in (0, 2, 2, 1, 0):
        x = rng.standard_normal(n).astype(np.float32)
        out = poisoned(n, np.float32)
        k[(n + 127) // 128, 128](out, x, 2.0, n, target=tgt, device=device)
        np.testing.assert_allclose(out, x * np.float32(2) + 1, rtol=1e-6)
    assert tgt.loads == [0, 2, 1]  # one executable per device, reused afterwards
    exes = {key: exe.ordinal for key, (exe, _) in k._exes.items()}
    assert sorted(exes.values()) == [0, 1, 2]
    assert k.compile_info.device in (0, 1, 2)
    # Device arrays decide the device when device= is absent; a mix is refused.
    with pytest.raises(DeviceError, match=r"axpy\(\): arguments on different devices"):
        k[1, 32](FakeDL(2, 2), FakeDL(2, 1), 2.0, 4, target=tgt)
    with pytest.raises(DeviceError, match="cuda:7 does not exist"):
        k[1, 32](np.zeros(4, np.float32), np.zeros(4, np.float32), 2.0, 4, target=tgt,
                 device=7)


# -- pipes and circular tensors ----------------------------------------------------------------
def test_pipe_device_checks():
    fkl = pytest.importorskip("fkl")
    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.TensorWrite(), target="cpu")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(pipe(x, device=0), x * 2)
    np.testing.assert_allclose(pipe(x, device="cuda:0"), x * 2)
    with pytest.raises(DeviceError, match=r"fkl pipe: the cpu target has no CUDA device 1"):
        pipe(x, device=1)
    with pytest.raises(DeviceError, match=r"fkl pipe: device must be a CUDA ordinal"):
        pipe(x, device=-2)
    with pytest.raises(DeviceError, match=r"out\[0\] is on cuda:1, the call runs on cuda:0"):
        pipe(x, out=FakeDL(2, 1))
    # A divergent pipe follows the same rule (the host batch runs on "device 0").
    div = fkl.compose_divergent([0, 0], [fkl.TensorRead(), fkl.Mul(3.0), fkl.TensorWrite()],
                                target="cpu")
    xs = np.stack([x, x + 1])[..., None].repeat(3, axis=-1)  # (N, H, W, C)
    np.testing.assert_allclose(div(xs)[0], xs * 3)
    with pytest.raises(DeviceError, match=r"out\[0\] is on cuda:1, the call runs on cuda:0"):
        div(xs, out=[FakeDL(2, 1)])
    with pytest.raises(DeviceError, match=r"fkl.CircularTensor: the cpu target has no CUDA"):
        fkl.CircularTensor(8, 4, batch=2, target="cpu", device=1)
    with pytest.raises(DeviceError, match=r"fkl.CircularTensor: device must be"):
        fkl.CircularTensor(8, 4, batch=2, target="cpu", device="one")


# -- pickling ----------------------------------------------------------------------------------
@pytest.mark.plugin("cpu")
def test_module_kernels_pickle_by_reference(rng):
    again = pickle.loads(pickle.dumps(scale_add))
    assert again is scale_add
    spec = scale_add.specialize(k=5)
    assert pickle.loads(pickle.dumps(spec)) is spec  # the same cached specialization
    n = 99
    x = rng.standard_normal(n).astype(np.float32)
    out = poisoned(n, np.float32)
    pickle.loads(pickle.dumps(spec))[1, 128](out, x, 0.5, n, target="cpu")
    np.testing.assert_allclose(out, x * np.float32(0.5) + 5, rtol=1e-6)


def test_local_kernels_pickle_by_value_with_cloudpickle(rng):
    cloudpickle = pytest.importorskip("cloudpickle", reason="cloudpickle (with dask) absent")
    k = _axpy_kernel()
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        pickle.dumps(k)  # a function made inside another cannot travel by reference
    again = cloudpickle.loads(cloudpickle.dumps(k))
    assert again is not k and again.name == "axpy"
    n = 77
    x = rng.standard_normal(n).astype(np.float32)
    out = poisoned(n, np.float32)
    again[1, 128](out, x, -1.5, n, target="cpu")
    np.testing.assert_allclose(out, x * np.float32(-1.5) + 1, rtol=1e-6)
