"""NumPy arguments of GPU launches bound without the adapter lookup
(``CudaExecutable._numpy_arg``): the same address, size and decisions as the full path
(:func:`~thork_core._binding.array_view` and ``check_array``), the same errors for what it
declines, and (on the GPU) the values NumPy computes, pinned and pageable, views and
read-only inputs included."""

from __future__ import annotations

import numpy as np
import pytest
import thork as tk
from helpers import poisoned
from thork_core import _cuda
from thork_core._binding import array_view, check_array
from thork_core._gpu import CudaExecutable, _HostArray
from thork_core._launch import PyLauncher, param_kinds


@tk.jit
def axpy(out: tk.DevicePointer[tk.dt.float32], x: tk.DevicePointer[tk.dt.float32],
         y: tk.DevicePointer[tk.dt.int32], a: tk.dt.float32, n: tk.dt.int32,
         bid: tk.Uint[tk.BlockIdx], tid: tk.Uint[tk.ThreadIdx], bdm: tk.Uint[tk.BlockDim]):
    i = bid * bdm + tid
    with tk.if_(i < n):
        out[i] = x[i] * a + y[i]


class _Recorder(CudaExecutable):
    """A CUDA executable whose round trip records what it was handed (no driver)."""

    def __init__(self, monkeypatch) -> None:
        monkeypatch.setattr(_cuda, "device_count", lambda: 1)
        ir = axpy.ir
        launcher = PyLauncher(0, 1, 0, param_kinds(ir.params), lambda *a: None)
        self._setup(ir, 0, launcher)
        self.calls: list[list] = []

    def _launch_staged(self, grid, block, values, host, handle, shared_mem):
        self.calls.append(host)


def _args(n: int, rng):
    out = poisoned(n, np.float32)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.integers(-50, 50, n).astype(np.int32)
    return out, x, y


def test_fast_binding_matches_the_full_path(monkeypatch, rng):
    from thork_core import _gpu
    # As in a fresh process: no NumPy argument seen yet (an earlier test in this worker may
    # have armed the fast path, which would make the first call below fast too).
    monkeypatch.setattr(_gpu, "_NDARRAY", [_gpu._NoType])
    exe = _Recorder(monkeypatch)
    n = 1000 + int(rng.integers(0, 50))
    out, x, y = _args(n, rng)
    x_view = x[3:][: n - 7]  # a view at an offset
    y_ro = y[: n - 7].copy()
    y_ro.flags.writeable = False  # read-only input: allowed (not written)
    out_v = out[: n - 7]
    for _ in range(3):  # the first call takes the full path and arms the fast one
        exe.launch((8, 1, 1), (128, 1, 1), (out_v, x_view, y_ro, 2.0, n - 7))
    first, *later = exe.calls
    assert type(first[0][1]) is not _HostArray  # the process's first NumPy argument
    args = (out_v, x_view, y_ro)
    for host in later:
        assert [i for i, _ in host] == [0, 1, 2]
        assert all(type(v) is _HostArray for _, v in host)
        for i, fast in host:
            param = axpy.ir.params[i]
            want = array_view(args[i], param, axpy.ir, 0)
            check_array(want, param, axpy.ir)
            assert (fast.ptr, fast.nbytes) == (want.ptr, want.nbytes)
            assert fast.host is args[i]


@pytest.mark.parametrize("bad,match", [
    ("dtype", "expects dtype float32, got float64"),
    ("order", "C-contiguous"),
    ("readonly", "read-only"),
    ("ndim", None),
])
def test_what_the_fast_path_declines_gets_the_full_paths_error(monkeypatch, rng, bad, match):
    exe = _Recorder(monkeypatch)
    out, x, y = _args(64, rng)
    exe.launch((1, 1, 1), (64, 1, 1), (out, x, y, 1.0, 64))  # arms the fast path
    if bad == "dtype":
        x = x.astype(np.float64)
    elif bad == "order":
        x = np.repeat(x, 2)[::2]
    elif bad == "readonly":
        out.flags.writeable = False
    else:  # 2-D is fine for an unshaped pointer: bound, same bytes
        x2 = x.reshape(8, 8)
        exe.launch((1, 1, 1), (64, 1, 1), (out, x2, y, 1.0, 64))
        got = dict(exe.calls[-1])[1]
        assert type(got) is _HostArray and got.ptr == x.ctypes.data and got.nbytes == 256
        return
    with pytest.raises(tk.ArgumentError, match=match):
        exe.launch((1, 1, 1), (64, 1, 1), (out, x, y, 1.0, 64))


def test_empty_arrays_take_the_full_path(monkeypatch, rng):
    exe = _Recorder(monkeypatch)
    out, x, y = _args(16, rng)
    exe.launch((1, 1, 1), (16, 1, 1), (out, x, y, 1.0, 16))
    e = np.empty(0, np.float32)
    exe.launch((1, 1, 1), (16, 1, 1), (e, e, y[:0], 1.0, 0))
    assert all(type(v) is not _HostArray for i, v in exe.calls[-1] if i < 2)


@pytest.mark.gpu
@pytest.mark.parametrize("pinned", [False, True])
def test_numpy_round_trips_against_numpy_on_the_gpu(rng, pinned):
    for n in (1, 129, 4099, 1 << 18):  # the first launch arms the fast path
        out, x, y = _args(n, rng)
        if pinned:
            po, px, py = (tk.pinned_empty(n, a.dtype) for a in (out, x, y))
            po[...], px[...], py[...] = out, x, y
            out, x, y = po, px, py
        y.flags.writeable = False
        grid = ((n + 127) // 128, 1, 1)
        axpy[grid, (128, 1, 1)](out, x, y, np.float32(1.5), n, target="gpu")
        want = x * np.float32(1.5) + y.astype(np.float32)
        np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
        # a view at an offset, written back in place
        view = out[1:]
        x2 = rng.standard_normal(n - 1).astype(np.float32) if n > 1 else x[:0]
        if n > 1:
            axpy[grid, (128, 1, 1)](view, x2, y[1:], np.float32(-2.0), n - 1, target="gpu")
            np.testing.assert_allclose(out[1:], x2 * -2.0 + y[1:], rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(out[:1], want[:1], rtol=1e-6)
