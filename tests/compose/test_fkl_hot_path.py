"""fkl's hot path on the GPU: after the first call a call is one prepared launch; what it
must still check (out's kind, alignment, the producer stream) and what it must get right."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import poisoned, random_array

fkl = pytest.importorskip("fkl")
pytestmark = [pytest.mark.plugin("compose"), pytest.mark.gpu]


def _pipe():
    return fkl.compose(fkl.TensorRead(), fkl.Mul(1.5), fkl.Add(-0.25), fkl.Max(-1.0),
                       fkl.TensorWrite(), target="gpu")


def _ref(x):
    return np.maximum(x * np.float32(1.5) + np.float32(-0.25), np.float32(-1.0))


def _sync():
    from thork_core import _cuda

    _cuda.check(_cuda.driver().cuCtxSynchronize(), "sync")


def test_repeated_calls_take_the_one_launch_path(rng):
    shape = (29, 67, 3)
    pipe = _pipe()
    for _ in range(3):  # fresh inputs every call; the second and third are hot
        x = random_array(rng, shape, np.float32)
        out = fkl.DeviceBuffer.from_host(poisoned(shape, np.float32))
        assert pipe(fkl.DeviceBuffer.from_host(x), out=out) is out
        np.testing.assert_allclose(out.to_host(), _ref(x), rtol=1e-6, atol=1e-6)
    assert len(pipe._hot) == 1 and fkl.stats()["builds"] >= 1


def test_hot_path_still_rejects_a_wrong_out(rng):
    shape = (29, 67, 3)
    pipe = _pipe()
    x = fkl.DeviceBuffer.from_host(random_array(rng, shape, np.float32))
    pipe(x, out=fkl.DeviceBuffer(shape, "float32"))
    pipe(x, out=fkl.DeviceBuffer(shape, "float32"))  # hot now
    with pytest.raises(fkl.ArgumentError, match=r"out: expected shape .* float32, got .*"
                       r"float64"):
        pipe(x, out=fkl.DeviceBuffer(shape, "float64"))
    with pytest.raises(fkl.ArgumentError, match="out: expected shape"):
        pipe(x, out=fkl.DeviceBuffer((29, 66, 3), "float32"))


@pytest.fixture
def stream():
    """A fresh CUDA stream (raw handle), destroyed after the test."""
    from thork_core import _cuda

    drv = _cuda.driver()
    _cuda.make_current(0)  # a test that runs first in its process has no context yet
    handle = _cuda.check(drv.cuStreamCreate(0), "cuStreamCreate")
    yield int(handle)
    _cuda.check(drv.cuStreamDestroy(handle), "cuStreamDestroy")


def test_hot_path_waits_for_the_input_producer_stream(rng, stream):
    """An input whose producer stream is not the launch stream is waited for, also once
    the pipe is hot (the result is checked after a full synchronization)."""
    from thork_core._device_array import DeviceArray

    shape = (31, 45, 3)
    pipe = _pipe()
    for _ in range(3):
        x = random_array(rng, shape, np.float32)
        buf = fkl.DeviceBuffer.from_host(x)
        tagged = DeviceArray.wrap(buf.ptr, shape, "float32", stream=stream, owner=buf)
        out = fkl.DeviceBuffer.from_host(poisoned(shape, np.float32))
        assert pipe(tagged, out=out) is out
        _sync()
        np.testing.assert_allclose(out.to_host(), _ref(x), rtol=1e-6, atol=1e-6)


def test_hot_path_on_a_given_stream(rng, stream):
    from thork_core import _cuda

    shape = (17, 33, 3)
    pipe = _pipe()
    for _ in range(3):
        x = random_array(rng, shape, np.float32)
        buf = fkl.DeviceBuffer.from_host(x)
        out = fkl.DeviceBuffer.from_host(poisoned(shape, np.float32))
        pipe(buf, out=out, stream=stream)
        _cuda.check(_cuda.driver().cuStreamSynchronize(stream), "cuStreamSynchronize")
        np.testing.assert_allclose(out.to_host(), _ref(x), rtol=1e-6, atol=1e-6)


def test_cuda_array_interface_inputs_take_the_hot_path(rng):
    """CuPy arrays (any __cuda_array_interface__ producer) get the hot path too: fresh
    data every call, results right; a non-contiguous view takes the general path and is
    read in place (issue 18: strided inputs)."""
    cp = pytest.importorskip("cupy")
    shape = (23, 59, 3)
    pipe = _pipe()
    for _ in range(3):
        x = random_array(rng, shape, np.float32)
        out = cp.asarray(poisoned(shape, np.float32))
        assert pipe(cp.asarray(x), out=out) is out
        np.testing.assert_allclose(cp.asnumpy(out), _ref(x), rtol=1e-6, atol=1e-6)
    from thork_core.runtime import device_count

    # Keyed by the CAI type; with several devices such arrays take the routed general
    # path (their interface does not name the owning device).
    assert any(isinstance(k[0][0], type) for k in pipe._hot) == (device_count() == 1)
    wide = cp.asarray(random_array(rng, (23, 118, 3), np.float32))
    out = cp.asarray(poisoned(shape, np.float32))
    pipe(wide[:, ::2], out=out)
    np.testing.assert_allclose(cp.asnumpy(out), _ref(cp.asnumpy(wide)[:, ::2]), rtol=1e-6,
                               atol=1e-6)
    with pytest.raises(fkl.ArgumentError, match="out: expected shape"):
        pipe(cp.asarray(random_array(rng, shape, np.float32)), out=cp.empty(shape, cp.float64))


def test_hot_path_is_the_native_guard_where_core_built_it(rng):
    """With the default launcher the hot call is one C call (core's native guard); the
    same pipe with THORK_LAUNCHER=ctypes uses the Python guard, with the same results."""
    import os

    from thork_core._launch import ArrayGuard
    from thork_core._native import native_module

    shape = (17, 41, 3)
    guards = {}
    for launcher in ("native", "ctypes"):
        os.environ["THORK_LAUNCHER"] = launcher
        try:
            fkl.reset_stats(clear_cache=True)  # a fresh prepare under this launcher
            pipe = _pipe()
            for _ in range(3):
                x = random_array(rng, shape, np.float32)
                out = fkl.DeviceBuffer.from_host(poisoned(shape, np.float32))
                assert pipe(fkl.DeviceBuffer.from_host(x), out=out) is out
                np.testing.assert_allclose(out.to_host(), _ref(x), rtol=1e-6, atol=1e-6)
            guards[launcher] = pipe._hot_guard
        finally:
            del os.environ["THORK_LAUNCHER"]
            # Kernels built under the Python launcher must not serve later tests: their
            # prepared launches give Python guards, which the C call never tries.
            fkl.reset_stats(clear_cache=True)
    assert isinstance(guards["ctypes"], ArrayGuard)
    if native_module() is not None:
        assert type(guards["native"]).__name__ == "Guard"


def test_hot_guards_keep_errors_and_other_calls(rng):
    """Once hot: a wrong out= still gets the clear error, host inputs still come back as
    NumPy, and two pipes each keep their own guard (interleaved calls)."""
    shape = (13, 37, 3)
    pipe = _pipe()
    x = random_array(rng, shape, np.float32)
    dx = fkl.DeviceBuffer.from_host(x)
    for _ in range(2):
        out = fkl.DeviceBuffer.from_host(poisoned(shape, np.float32))
        assert pipe(dx, out=out) is out
    np.testing.assert_allclose(out.to_host(), _ref(x), rtol=1e-6, atol=1e-6)
    with pytest.raises(fkl.ArgumentError, match="out: expected shape"):
        pipe(dx, out=fkl.DeviceBuffer((13, 36, 3), "float32"))
    np.testing.assert_allclose(pipe(x), _ref(x), rtol=1e-6, atol=1e-6)  # NumPy in, out
    other = fkl.compose(fkl.TensorRead(), fkl.Mul(-2.0), fkl.TensorWrite(), target="gpu")
    y = random_array(rng, (9, 11, 3), np.float32)
    dy = fkl.DeviceBuffer.from_host(y)
    for _ in range(2):
        oy = fkl.DeviceBuffer.from_host(poisoned((9, 11, 3), np.float32))
        assert other(dy, out=oy) is oy
        assert pipe(dx, out=out) is out
    _sync()
    np.testing.assert_allclose(oy.to_host(), y * np.float32(-2.0), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(out.to_host(), _ref(x), rtol=1e-6, atol=1e-6)


def test_the_hot_call_is_taken_in_c(rng):
    """With core's native module, a GPU pipe is a GuardedCall: once hot, pipe(x, out=y)
    and pipe(x, out=y, stream=s) launch without running any Python of the pipe (its
    general path, _miss, is replaced here by one that fails)."""
    from thork_core import guarded_call_base

    base = guarded_call_base()
    if base is None:
        pytest.skip("no native module here")
    shape = (23, 45, 3)
    fkl.reset_stats(clear_cache=True)  # kernels built here, under the native launcher
    pipe = _pipe()
    assert isinstance(pipe, base) and isinstance(pipe, fkl.Pipe)
    x = random_array(rng, shape, np.float32)
    dx = fkl.DeviceBuffer.from_host(x)
    pipe(dx, out=fkl.DeviceBuffer(shape, "float32"))  # the first call prepares the guard
    assert type(pipe._hot_guard).__name__ == "Guard"  # core's native guard, tried in C

    def general(*args, **kwargs):
        raise AssertionError(f"the general path ran: {args} {kwargs}")

    pipe._miss = general
    out = fkl.DeviceBuffer.from_host(poisoned(shape, np.float32))
    assert pipe(dx, out=out) is out
    np.testing.assert_allclose(out.to_host(), _ref(x), rtol=1e-6, atol=1e-6)
    from thork_core import _cuda

    drv = _cuda.driver()
    handle = _cuda.check(drv.cuStreamCreate(0), "cuStreamCreate")
    try:
        out2 = fkl.DeviceBuffer.from_host(poisoned(shape, np.float32))
        assert pipe(dx, out=out2, stream=int(handle)) is out2
        _cuda.check(drv.cuStreamSynchronize(handle), "sync")
        np.testing.assert_allclose(out2.to_host(), _ref(x), rtol=1e-6, atol=1e-6)
    finally:
        _cuda.check(drv.cuStreamDestroy(handle), "cuStreamDestroy")
    with pytest.raises(AssertionError, match="the general path ran"):
        pipe(dx, out=fkl.DeviceBuffer((23, 44, 3), "float32"))  # a miss goes there
    del pipe._miss
    with pytest.raises(fkl.ArgumentError, match="out: expected shape"):
        pipe(dx, out=fkl.DeviceBuffer((23, 44, 3), "float32"))


def test_the_allocating_call_is_taken_in_c(rng):
    """Once hot, pipe(x) and pipe(x, stream=s) make their output from the pool and launch
    in C (GuardedCall's _hot_out and _hot_guard); the outputs are fresh arrays with the
    right values, each recording the stream it was made on; a new input shape still goes
    to the general path."""
    from thork_core import _cuda, guarded_call_base

    if guarded_call_base() is None:
        pytest.skip("no native module here")
    shape = (19, 37, 3)
    fkl.reset_stats(clear_cache=True)
    pipe = _pipe()
    x = random_array(rng, shape, np.float32)
    dx = fkl.DeviceBuffer.from_host(x)
    first = pipe(dx)  # the general path: plans, launches, makes the maker
    np.testing.assert_allclose(first.to_host(), _ref(x), rtol=1e-6, atol=1e-6)
    assert type(pipe._hot_out).__name__ == "OutMaker"

    def general(*args, **kwargs):
        raise AssertionError(f"the general path ran: {args} {kwargs}")

    pipe._miss = general
    outs = [pipe(dx) for _ in range(3)]
    assert len({o.ptr for o in outs} | {first.ptr}) == 4  # each call its own array
    for o in outs:
        assert type(o) is fkl.DeviceBuffer and o.shape == shape and o.stream == 0
        np.testing.assert_allclose(o.to_host(), _ref(x), rtol=1e-6, atol=1e-6)
    drv = _cuda.driver()
    handle = int(_cuda.check(drv.cuStreamCreate(0), "cuStreamCreate"))
    try:
        o = pipe(dx, stream=handle)
        assert o.stream == handle
        _cuda.check(drv.cuStreamSynchronize(handle), "sync")
        np.testing.assert_allclose(o.to_host(), _ref(x), rtol=1e-6, atol=1e-6)
        del o
        _cuda.check(drv.cuCtxSynchronize(), "sync")
    finally:
        _cuda.check(drv.cuStreamDestroy(handle), "cuStreamDestroy")
    with pytest.raises(AssertionError, match="the general path ran"):
        pipe(fkl.DeviceBuffer.from_host(random_array(rng, (19, 36, 3), np.float32)))
    del pipe._miss
    y = random_array(rng, (19, 36, 3), np.float32)
    np.testing.assert_allclose(pipe(fkl.DeviceBuffer.from_host(y)).to_host(), _ref(y),
                               rtol=1e-6, atol=1e-6)
