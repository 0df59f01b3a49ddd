"""Device-resident arguments: Thork DeviceArray, CuPy, PyTorch (CAI and DLPack), zero-copy
and asynchronous on the caller's stream; and the CPU target's view of foreign arrays."""

import numpy as np
import pytest
import thork as tk
from helpers import poisoned
from thork_core import ArgumentError, DeviceArray


@tk.jit
def axpy(out: tk.DevicePointer[tk.dt.float32], x: tk.DevicePointer[tk.dt.float32],
         y: tk.DevicePointer[tk.dt.float32], a: tk.dt.float32, n: tk.dt.int32,
         bid: tk.Uint[tk.BlockIdx], tid: tk.Uint[tk.ThreadIdx], bdm: tk.Uint[tk.BlockDim]):
    i = bid * bdm + tid
    with tk.if_(i < n):
        out[i] = a * x[i] + y[i]


def assert_axpy(out, a, x, y):
    """``out == a*x + y`` up to the FMA contraction CUDA compilers apply by default."""
    x, y = np.asarray(x), np.asarray(y)
    ax = np.float32(a) * x
    bound = np.float32(2.0**-23) * (np.abs(ax) + np.abs(y))
    assert np.all(np.abs(np.asarray(out) - (ax + y)) <= bound)


class DLPackOnly:
    """Hides every protocol but DLPack, to force that adapter."""

    def __init__(self, arr):
        self._arr = arr

    def __dlpack__(self, **kw):
        return self._arr.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._arr.__dlpack_device__()


@pytest.mark.plugin("cpu")  # runs on the CPU target by name
def test_dlpack_host_arrays_on_cpu(rng):
    n = 777
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = poisoned(n, np.float32)
    axpy[(n + 127) // 128, 128](out, DLPackOnly(x), DLPackOnly(y), 2.5, n, target="cpu")
    assert_axpy(out, 2.5, x, y)


@pytest.mark.gpu
def test_device_array_in_and_out(rng):
    n = 5003
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    dx, dy = DeviceArray.from_host(x), DeviceArray.from_host(y)
    dout = DeviceArray.from_host(poisoned(n, np.float32))
    axpy[(n + 255) // 256, 256](dout, dx, dy, -1.5, n, target="gpu")
    assert_axpy(dout.to_host(), -1.5, x, y)


@pytest.mark.gpu
def test_cupy_arrays_zero_copy_on_a_stream(rng):
    cp = pytest.importorskip("cupy")
    n = 4099
    x = cp.asarray(rng.standard_normal(n).astype(np.float32))
    y = cp.asarray(rng.standard_normal(n).astype(np.float32))
    out = cp.full(n, cp.nan, cp.float32)
    ptr = out.data.ptr
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        axpy[(n + 127) // 128, 128](out, x, y, 3.0, n, stream=s)
    s.synchronize()
    assert out.data.ptr == ptr  # written in place
    assert_axpy(out.get(), 3.0, x.get(), y.get())


@pytest.mark.gpu
@pytest.mark.parametrize("protocol", ["cai", "dlpack"])
def test_torch_tensors(rng, protocol):
    torch = pytest.importorskip("torch")
    n = 3001
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    wrap = (lambda t: t) if protocol == "cai" else DLPackOnly
    stream = torch.cuda.current_stream()
    axpy[(n + 127) // 128, 128](wrap(out), wrap(x), wrap(y), 0.5, n, stream=stream)
    torch.cuda.synchronize()
    assert_axpy(out.cpu().numpy(), 0.5, x.cpu().numpy(), y.cpu().numpy())


@pytest.mark.gpu
def test_mixed_host_and_device_arguments(rng):
    n = 1000
    x = rng.standard_normal(n).astype(np.float32)
    dy = DeviceArray.from_host(rng.standard_normal(n).astype(np.float32))
    out = poisoned(n, np.float32)
    axpy[(n + 127) // 128, 128](out, x, dy, 2.0, n, target="gpu")
    assert_axpy(out, 2.0, x, dy.to_host())


@pytest.mark.gpu
def test_device_array_on_cpu_target_is_an_error():
    d = DeviceArray.from_host(np.zeros(8, np.float32))
    with pytest.raises(ArgumentError, match=r"parameter 'x' is on cuda:0 but the CPU target "
                                            r"needs host arrays"):
        axpy[1, 8](np.zeros(8, np.float32), d, np.zeros(8, np.float32), 1.0, 8, target="cpu")


@pytest.mark.gpu
def test_wrong_dtype_device_array_is_named():
    d = DeviceArray.from_host(np.zeros(8, np.float64))
    with pytest.raises(ArgumentError, match=r"parameter 'x' expects dtype float32, got float64"):
        axpy[1, 8](np.zeros(8, np.float32), d, np.zeros(8, np.float32), 1.0, 8, target="gpu")
