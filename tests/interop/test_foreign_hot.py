"""Hot calls with CuPy arrays and torch tensors on the GPU (session 11): once armed,
``kernel[grid, block](...)`` and ``pipe(x, out=y)`` read such arrays in C through the
libraries' own attributes (``_native_launch.c``, "Foreign readers"). Nothing may be
trusted from an earlier call: CuPy's shape setter, torch's ``set_``, ``resize_`` and
``.data =``, and a switch of the library's current stream between calls must all give
the results NumPy gives (or the Python path's error); 8 threads share one launch."""

from __future__ import annotations

import numpy as np
import pytest
import thork as tk
from helpers import run_threads

pytestmark = pytest.mark.gpu


# The same kernel as helpers.kernels.scale_add, kept apart on purpose: these tests patch
# `_miss` on the memoized Launch of `scale_add[g, b]`, which other files' calls would share.
@tk.jit(target="gpu")
def scale_add(
    out: tk.DevicePointer[tk.dt.float32],
    x: tk.DevicePointer[tk.dt.float32],
    s: tk.dt.float32,
    n: tk.dt.int32,
    bid: tk.Uint[tk.BlockIdx],
    tid: tk.Uint[tk.ThreadIdx],
    bdm: tk.Uint[tk.BlockDim],
):
    i = bid * bdm + tid
    with tk.if_(i < n):
        out[i] = x[i] * s + 1.0


@pytest.fixture(params=["python", "c++"])
def torch(request):
    """torch, with its tensors read on the native path through torch's Python API or
    (session 19) thork_torch's C++ reader, built here if the cache lacks it (a failure
    to build fails the test: a GPU machine with torch has what it needs)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    from thork_core._native import native_module
    from thork_core._probe import kind_of
    from thork_core.launch import refresh_readers
    from thork_torch import _reader

    mod = native_module()
    if mod is None:
        pytest.skip("no native module here")
    if request.param == "c++":
        _reader.build_reader()
    else:
        _reader._reset()
        _reader._STATE["status"] = "off (this test reads through torch's Python API)"
    kind_of(torch.Tensor)
    refresh_readers()
    assert mod.foreign_reading(torch.Tensor) == ("c" if request.param == "c++" else "torch")
    yield torch
    _reader._reset()
    refresh_readers()


def _ref(x, s):
    return x.astype(np.float64) * np.float32(s) + 1.0


def _counting(launch):
    """The launch with its Python path counted (the C call runs first)."""
    from thork_core._launch import launch_call_base

    if launch_call_base() is None:
        pytest.skip("no native module here")
    missed = []
    python = type(launch)._miss

    def miss(*args, **kw):
        missed.append(kw.get("stream"))
        return python(launch, *args, **kw)

    launch._miss = miss
    return missed


def test_cupy_hot_calls_and_changes(rng):
    cp = pytest.importorskip("cupy")
    n = 1003
    launch = scale_add[(n + 127) // 128, 128]
    xh = rng.standard_normal(n).astype(np.float32)
    x, out = cp.asarray(xh), cp.full(n, cp.nan, cp.float32)
    launch(out, x, 2.0, n)
    assert launch._hot_binder is not None
    missed = _counting(launch)
    for s in (3.0, -1.5):
        out.fill(cp.nan)
        launch(out, x, s, n)
        np.testing.assert_allclose(cp.asnumpy(out), _ref(xh, s), rtol=1e-6, atol=1e-6)
    assert missed == []
    x.shape = (17, 59)  # the shape setter (no copy): the same memory, still contiguous
    launch(out, x, 0.5, n)
    np.testing.assert_allclose(cp.asnumpy(out), _ref(xh, 0.5), rtol=1e-6, atol=1e-6)
    x.shape = (n,)
    assert missed == []
    xt = x[::2]  # not contiguous: the Python path (its adapters say why or copy)
    try:
        launch(out, xt, 1.0, n // 2)
    except Exception:  # noqa: BLE001, S110 - the Python path's own answer either way
        pass
    assert len(missed) == 1
    with cp.cuda.Stream(non_blocking=True) as s:  # produced on another current stream
        y = x * 1.0
        launch(out, y, 4.0, n)  # the Python path waits for CuPy's stream
    cp.cuda.runtime.deviceSynchronize()
    np.testing.assert_allclose(cp.asnumpy(out), _ref(xh, 4.0), rtol=1e-6, atol=1e-6)
    assert len(missed) == 2 and s.ptr != 0


def test_cupy_current_stream_is_read_through_cupys_c_function(rng):
    """(session 16) CuPy's current stream comes from its exported C function
    ``get_current_stream_ptr`` (CuPy 14.2 exports it): launched on CuPy's current stream,
    the hot path takes the call; given no stream under another current stream, the Python
    path waits; back on the default stream, the hot path again. Values against NumPy."""
    cp = pytest.importorskip("cupy")
    from thork_core._probe import CAI, foreign_reader

    got = foreign_reader(cp.ndarray, CAI)
    assert got is not None and type(got[1]).__name__ == "PyCapsule", got
    n = 1301  # a grid of its own: the other tests patch their Launch's _miss
    launch = scale_add[(n + 127) // 128, 128]
    xh = rng.standard_normal(n).astype(np.float32)
    x, out = cp.asarray(xh), cp.full(n, cp.nan, cp.float32)
    launch(out, x, 2.0, n)
    missed = _counting(launch)
    cp.cuda.runtime.deviceSynchronize()
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        for k in (3.0, -2.0):
            out.fill(cp.nan)  # on s, as the launch
            launch(out, x, k, n, stream=s)
            s.synchronize()
            np.testing.assert_allclose(cp.asnumpy(out), _ref(xh, k), rtol=1e-6, atol=1e-6)
        assert missed == []
        launch(out, x, 5.0, n)  # produced on s, launched on the legacy stream: waits
        assert len(missed) == 1
    cp.cuda.runtime.deviceSynchronize()
    np.testing.assert_allclose(cp.asnumpy(out), _ref(xh, 5.0), rtol=1e-6, atol=1e-6)
    out.fill(cp.nan)
    launch(out, x, 0.25, n)
    assert len(missed) == 1
    np.testing.assert_allclose(cp.asnumpy(out), _ref(xh, 0.25), rtol=1e-6, atol=1e-6)


def test_cupy_pointer_is_kept_per_data_object(rng):
    """(session 16) The hot path keeps a CuPy array's pointer for its data object: a live
    array's ``__init__`` run again on other memory is seen, a view sharing the object
    takes the kept pointer, and a kernel keeps none of a temporary's memory alive. Values
    against NumPy."""
    cp = pytest.importorskip("cupy")
    n = 1501  # a grid of its own
    launch = scale_add[(n + 127) // 128, 128]
    xh, zh = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    x, z, out = cp.asarray(xh), cp.asarray(zh), cp.full(n, cp.nan, cp.float32)
    launch(out, x, 2.0, n)
    missed = _counting(launch)
    for s in (1.0, 3.0):
        out.fill(cp.nan)
        launch(out, x, s, n)
        np.testing.assert_allclose(cp.asnumpy(out), _ref(xh, s), rtol=1e-6, atol=1e-6)
    # __init__ run again on the same array object, for z's memory. (CuPy 14.2 builds its
    # arrays in __new__: x keeps its memory, as the GPU run of session 16 showed; a CuPy
    # whose __init__ sets the fields gives x z's.) The kernel must read what x holds now.
    x.__init__((n,), cp.float32, z.data)
    now = cp.asnumpy(x)
    out.fill(cp.nan)
    launch(out, x, 2.0, n)
    np.testing.assert_allclose(cp.asnumpy(out), _ref(now, 2.0), rtol=1e-6, atol=1e-6)
    assert missed == []
    pool = cp.get_default_memory_pool()
    t = cp.ones(16 << 20, cp.float32)  # 64 MiB, read in part
    launch(out, t, 1.0, n)
    cp.cuda.runtime.deviceSynchronize()
    np.testing.assert_array_equal(cp.asnumpy(out), np.full(n, 2.0, np.float32))
    used = pool.used_bytes()
    del t
    assert pool.used_bytes() <= used - (64 << 20)
    assert missed == []
    # (session 20) a view holding x's data object takes the pointer kept for it, before
    # and after x (the array the kernel's slot watches) is gone
    v = x.view()
    for arr in (v, x, v):
        out.fill(cp.nan)
        launch(out, arr, 2.0, n)
        np.testing.assert_allclose(cp.asnumpy(out), _ref(now, 2.0), rtol=1e-6, atol=1e-6)
    del x
    out.fill(cp.nan)
    launch(out, v, 0.5, n)
    np.testing.assert_allclose(cp.asnumpy(out), _ref(now, 0.5), rtol=1e-6, atol=1e-6)
    assert missed == []


def test_torch_hot_calls_and_changes(rng, torch):
    n = 1003
    launch = scale_add[(n + 127) // 128, 128]
    xh = rng.standard_normal(n).astype(np.float32)
    x = torch.from_numpy(xh).cuda()
    out = torch.full((n,), float("nan"), device="cuda")
    launch(out, x, 2.0, n)
    assert launch._hot_binder is not None
    missed = _counting(launch)
    launch(out, x, 3.0, n)
    np.testing.assert_allclose(out.cpu().numpy(), _ref(xh, 3.0), rtol=1e-6, atol=1e-6)
    assert missed == []
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):  # switched between calls: launched on it, in C
        y = x * 2.0
        launch(out, y, 1.0, n)
        ys = y.cpu().numpy()
    side.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), _ref(ys, 1.0), rtol=1e-6, atol=1e-6)
    assert missed == []
    other = torch.cuda.Stream()
    launch(out, x, 5.0, n, stream=other.cuda_stream)  # another stream: Python follows
    other.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), _ref(xh, 5.0), rtol=1e-6, atol=1e-6)
    assert len(missed) == 1
    fresh = torch.full((n,), float("nan"), device="cuda")
    out.set_(fresh)  # another storage under the same tensor object
    launch(out, x, 6.0, n)
    np.testing.assert_allclose(fresh.cpu().numpy(), _ref(xh, 6.0), rtol=1e-6, atol=1e-6)
    old = x.data_ptr()
    x.resize_(4 * n)  # may move the storage
    x[:n] = torch.from_numpy(xh).cuda()
    launch(out, x, 7.0, n)
    np.testing.assert_allclose(out.cpu().numpy(), _ref(xh, 7.0), rtol=1e-6, atol=1e-6)
    assert len(missed) == 1, (old, x.data_ptr())
    out.data = torch.zeros(n, dtype=torch.float64, device="cuda")  # another dtype
    try:
        launch(out, x, 1.0, n)
    except Exception:  # noqa: BLE001, S110 - the Python path's own answer either way
        pass
    assert len(missed) == 2


def _pipe():
    fkl = pytest.importorskip("fkl")
    return fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.Add(1.0), fkl.TensorWrite(),
                       target="gpu")


def test_fkl_pipe_with_cupy_sees_the_shape_setter(rng):
    cp = pytest.importorskip("cupy")
    pipe = _pipe()
    xh = rng.standard_normal((4, 30)).astype(np.float32)
    x, y = cp.asarray(xh), cp.full((4, 30), cp.nan, cp.float32)
    for _ in range(3):
        pipe(x, out=y)
    np.testing.assert_allclose(cp.asnumpy(y), xh * 2 + 1, rtol=1e-6)
    x.shape = (8, 15)  # the same bytes, another shape: the (4, 30) plan must not run
    with pytest.raises(Exception):  # noqa: B017 - out= no longer matches: Python says so
        pipe(x, out=y)
    y.shape = (8, 15)
    y.fill(cp.nan)
    pipe(x, out=y)
    np.testing.assert_allclose(cp.asnumpy(y), (xh * 2 + 1).reshape(8, 15), rtol=1e-6)


def test_fkl_pipe_with_torch_follows_its_stream_and_changes(rng, torch):
    pipe = _pipe()
    xh = rng.standard_normal((4, 30)).astype(np.float32)
    x = torch.from_numpy(xh).cuda()
    y = torch.full((4, 30), float("nan"), device="cuda")
    for _ in range(3):
        pipe(x, out=y)
    np.testing.assert_allclose(y.cpu().numpy(), xh * 2 + 1, rtol=1e-6)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x2 = x * 3.0  # queued on the side stream: the pipe must run after it
        pipe(x2, out=y)
    side.synchronize()
    np.testing.assert_allclose(y.cpu().numpy(), xh * 6 + 1, rtol=1e-5)
    x.resize_(8, 15)  # same storage, another shape
    with pytest.raises(Exception):  # noqa: B017 - out= no longer matches
        pipe(x, out=y)
    y2 = torch.full((8, 15), float("nan"), device="cuda")
    y.set_(y2)
    pipe(x, out=y)
    np.testing.assert_allclose(y2.cpu().numpy(), (xh * 2 + 1).reshape(8, 15), rtol=1e-6)


def test_eight_threads_share_one_launch_cupy(rng):
    _eight_threads(rng, "cupy", pytest.importorskip("cupy"))


def test_eight_threads_share_one_launch_torch(rng, torch):
    _eight_threads(rng, "torch", torch)


def _eight_threads(rng, lib, mod):
    n = 777
    launch = scale_add[(n + 127) // 128, 128]
    xs = [rng.standard_normal(n).astype(np.float32) for _ in range(8)]

    def dev(a):
        return mod.asarray(a) if lib == "cupy" else mod.from_numpy(a).cuda()

    def host(a):
        return mod.asnumpy(a) if lib == "cupy" else a.cpu().numpy()

    first = dev(xs[0])
    launch(dev(np.zeros(n, np.float32)), first, 1.0, n)  # arms

    def work(i: int) -> None:
        x, out = dev(xs[i]), dev(np.full(n, np.nan, np.float32))
        for _ in range(200):
            launch(out, x, float(i + 1), n)
        if lib == "cupy":
            mod.cuda.runtime.deviceSynchronize()
        else:
            mod.cuda.synchronize()
        np.testing.assert_allclose(host(out), _ref(xs[i], i + 1), rtol=1e-6, atol=1e-6)

    run_threads(work, 8, join_seconds=120)
