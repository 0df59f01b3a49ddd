"""``kernel[grid, block](...)`` on the GPU once hot: decided in C (core's LaunchCall armed
with the executable's Binder) for device arrays, and every call the binder does not take
reaches the Python path with the same results (checked against NumPy)."""

from __future__ import annotations

import numpy as np
import pytest
import thork as tk
from helpers import poisoned, random_array
from helpers.kernels import scale_add
from thork_core.runtime import device_count

pytestmark = pytest.mark.gpu


def _ref(x, s):
    """Exact in float64: the GPU may fuse x * s + 1 into one rounding (an FMA), NumPy
    rounds twice; both are within the tolerances below of this."""
    return x.astype(np.float64) * np.float32(s) + 1.0


def _no_python(*args, **kwargs):
    raise AssertionError(f"the Python path ran: {args} {kwargs}")


def _armed(n):
    from thork_core import DeviceArray
    from thork_core._launch import launch_call_base

    if launch_call_base() is None:
        pytest.skip("no native module here")
    launch = scale_add[(n + 127) // 128, 128]
    x = DeviceArray(n, "float32")
    out = DeviceArray(n, "float32")
    launch(out, x, 1.0, n)  # the first call (Python) arms the C call
    assert launch._hot_binder is not None
    return launch


def test_hot_device_array_calls_run_in_c(rng):
    from thork_core import DeviceArray

    n = 1001
    launch = _armed(n)
    launch._miss = _no_python
    try:
        for s in (2.5, -3, 0.0):
            x = random_array(rng, n, np.float32)
            dx = DeviceArray.from_host(x)
            out = DeviceArray.from_host(poisoned(n, np.float32))
            assert launch(out, dx, s, n) is None
            np.testing.assert_allclose(out.to_host(), _ref(x, s), rtol=1e-6, atol=1e-6)
    finally:
        del launch._miss


def test_hot_call_on_a_stream_runs_in_c(rng):
    from thork_core import DeviceArray, _cuda

    n = 777
    launch = _armed(n)
    drv = _cuda.driver()
    handle = int(_cuda.check(drv.cuStreamCreate(0), "cuStreamCreate"))
    launch._miss = _no_python
    try:
        x = random_array(rng, n, np.float32)
        dx = DeviceArray.from_host(x)
        out = DeviceArray.from_host(poisoned(n, np.float32))
        launch(out, dx, 0.5, n, stream=handle)
        _cuda.check(drv.cuStreamSynchronize(handle), "sync")
        np.testing.assert_allclose(out.to_host(), _ref(x, 0.5), rtol=1e-6, atol=1e-6)
    finally:
        del launch._miss
        _cuda.check(drv.cuStreamDestroy(handle), "cuStreamDestroy")


def test_calls_the_binder_does_not_take_give_the_same_results(rng):
    """NumPy arrays (staged), a NumPy scalar, an array produced on another stream and a
    strided CAI view fall back to the Python path, with results equal to NumPy's; wrong
    arguments still get the Python path's errors."""
    from thork_core import ArgumentError, DeviceArray, _cuda

    n = 513
    launch = _armed(n)
    x = random_array(rng, n, np.float32)
    # NumPy in and out: staged through pinned memory, synchronous.
    out = poisoned(n, np.float32)
    launch(out, x, 1.5, n)
    np.testing.assert_allclose(out, _ref(x, 1.5), rtol=1e-6, atol=1e-6)
    # A NumPy float32 scalar.
    dx = DeviceArray.from_host(x)
    dout = DeviceArray.from_host(poisoned(n, np.float32))
    launch(dout, dx, np.float32(2.0), n)
    np.testing.assert_allclose(dout.to_host(), _ref(x, 2.0), rtol=1e-6, atol=1e-6)
    # An input last written on another stream: the Python path waits on it.
    drv = _cuda.driver()
    handle = int(_cuda.check(drv.cuStreamCreate(0), "cuStreamCreate"))
    try:
        other = DeviceArray.from_host(x, stream=handle)
        dout2 = DeviceArray.from_host(poisoned(n, np.float32))
        launch(dout2, other, 3.0, n)
        np.testing.assert_allclose(dout2.to_host(), _ref(x, 3.0), rtol=1e-6, atol=1e-6)
    finally:
        _cuda.check(drv.cuCtxSynchronize(), "sync")
        # An array's memory is freed ordered on its stream: drop the arrays tagged with
        # this stream before destroying it (a free on a destroyed stream is undefined).
        other = dout2 = None
        _cuda.check(drv.cuStreamDestroy(handle), "cuStreamDestroy")
    # Errors are the Python path's.
    with pytest.raises(ArgumentError, match="expects dtype float32, got float64"):
        launch(DeviceArray(n, "float64"), dx, 1.0, n)
    with pytest.raises(ArgumentError, match="takes 4 argument"):
        launch(dout, dx, 1.0)
    with pytest.raises(ArgumentError, match="out of range for int32"):
        launch(dout, dx, 1.0, 2**31)
    # And the call is still armed afterwards: the hot case runs in C.
    launch._miss = _no_python
    try:
        launch(dout, dx, 4.0, n)
        np.testing.assert_allclose(dout.to_host(), _ref(x, 4.0), rtol=1e-6, atol=1e-6)
    finally:
        del launch._miss


def test_cupy_arrays_hot_call(rng):
    cp = pytest.importorskip("cupy")
    n = 999
    launch = scale_add[(n + 127) // 128, 128]
    x = random_array(rng, n, np.float32)
    cx = cp.asarray(x)
    cout = cp.full(n, cp.nan, dtype=cp.float32)
    launch(cout, cx, 2.0, n)
    # With several devices a __cuda_array_interface__ does not say which device owns the
    # pointer, so the binder leaves such arrays to the Python path (which routes them).
    one_device = device_count() == 1
    if one_device:
        launch._miss = _no_python
    try:
        cout.fill(cp.nan)
        launch(cout, cx, 2.0, n)
        cp.cuda.runtime.deviceSynchronize()
        np.testing.assert_allclose(cp.asnumpy(cout), _ref(x, 2.0), rtol=1e-6, atol=1e-6)
    finally:
        if one_device:
            del launch._miss
    # A strided view is not the binder's: the Python path reports it.
    from thork_core import ArgumentError

    with pytest.raises(ArgumentError, match="C-contiguous"):
        launch(cp.zeros(2 * n, cp.float32)[::2], cx, 2.0, n)


@tk.jit(target="gpu")
def scale_rows(a: tk.DevicePointer[tk.dt.float32, 2], out: tk.DevicePointer[tk.dt.float32, 2]):
    x = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    y = tk.block_idx().y
    h, w = a.shape
    with tk.if_((y < h) & (x < w)):
        out[y, x] = a[y, x] * 2.0 + 1.0


def test_shaped_arrays_stay_on_the_python_path(rng):
    """A kernel whose array extents are hidden parameters (added from the arrays' shapes
    per call) is not armed: every call, of any size, takes the Python path, correctly."""
    from thork_core import DeviceArray

    for h, w in [(7, 45), (3, 130)]:
        a = random_array(rng, (h, w), np.float32)
        out = DeviceArray.from_host(poisoned((h, w), np.float32))
        launch = scale_rows[((w + 63) // 64, h), (64, 1)]
        launch(DeviceArray.from_host(a), out)
        launch(DeviceArray.from_host(a), out)
        assert getattr(launch, "_hot_binder", None) is None
        np.testing.assert_allclose(out.to_host(), a.astype(np.float64) * 2 + 1, rtol=1e-6,
                                   atol=1e-6)
