"""Stream handshakes with torch, CuPy and DLPack on the GPU. Each test has a slow producer
(a ~50 ms spin on one stream, then the write) and a consumer on another stream: without
the wait Thork owes, the consumer reads the old values and the test fails."""

from __future__ import annotations

import numpy as np
import pytest
import thork as tk

pytestmark = pytest.mark.gpu
fkl = pytest.importorskip("fkl")

SPIN_CYCLES = 100_000_000  # ~50 ms at the H200's ~2 GHz


@tk.jit
def scale(x: tk.DevicePointer[tk.dt.float32], a: tk.dt.float32, n: tk.dt.int32,
          out: tk.DevicePointer[tk.dt.float32], bid: tk.Uint[tk.BlockIdx],
          tid: tk.Uint[tk.ThreadIdx], bdm: tk.Uint[tk.BlockDim]):
    i = bid * bdm + tid
    with tk.if_(i < n):
        out[i] = x[i] * a


N = 1 << 20
GRID = N // 256


def _torch():  # type: ignore[no-untyped-def]
    return pytest.importorskip("torch")


def _cupy():  # type: ignore[no-untyped-def]
    return pytest.importorskip("cupy")


def _sync(stream: int) -> None:
    """Wait for ``stream`` (a non-blocking stream: the legacy stream does not order it)."""
    from thork_core.runtime import check, driver

    check(driver().cuStreamSynchronize(stream), "cuStreamSynchronize")


def _new_stream() -> int:
    from thork_core.runtime import check, driver, make_current

    make_current(0)
    drv = driver()
    return int(check(drv.cuStreamCreate(1),
                     "cuStreamCreate"))


# -- torch -------------------------------------------------------------------------------
def test_torch_wrap_waits_for_torchs_current_stream_when_given_another():
    torch = _torch()
    import thork_torch

    x = torch.zeros(N, device="cuda")
    out = torch.full((N,), float("nan"), device="cuda")
    torch.cuda.synchronize()
    producer = torch.cuda.Stream()
    other = _new_stream()
    with torch.cuda.stream(producer):
        torch.cuda._sleep(SPIN_CYCLES)
        x.fill_(3.0)
        # torch's current stream is the producer: Thork launches on `other` and must
        # order it after the producer's pending fill
        thork_torch.wrap(scale[GRID, 256])(x, 2.0, N, out, stream=other)
    torch.cuda.synchronize()
    assert torch.all(out == 6.0).item()


def test_torch_wrap_runs_on_torchs_current_stream():
    torch = _torch()
    import thork_torch

    x = torch.zeros(N, device="cuda")
    out = torch.full((N,), float("nan"), device="cuda")
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(SPIN_CYCLES)
        x.fill_(1.5)
        thork_torch.wrap(scale[GRID, 256])(x, 4.0, N, out)  # on s: after the fill
        res = out.clone()  # on s: after Thork's kernel
    torch.cuda.synchronize()
    assert torch.all(res == 6.0).item()


def test_torch_record_stream_keeps_memory_until_thorks_kernel_ran():
    torch = _torch()
    import thork_torch

    other = torch.cuda.Stream()
    x = torch.full((N,), 5.0, device="cuda")
    out = torch.full((N,), float("nan"), device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(other):
        torch.cuda._sleep(SPIN_CYCLES)  # Thork's kernel on `other` starts late
    thork_torch.wrap(scale[GRID, 256])(x, 1.0, N, out, stream=other)
    del x  # without record_stream the allocator hands this block out again at once
    y = torch.empty(N, device="cuda")
    y.fill_(-1.0)  # on the current stream: runs while Thork's kernel still waits
    torch.cuda.synchronize()
    assert torch.all(out == 5.0).item()


@pytest.mark.parametrize("call", ["first", "hot"])
def test_direct_kernel_call_given_another_stream_waits_for_torchs(call):
    """kernel[...](tensors, stream=s) without thork_torch.wrap: the launch on ``s`` waits
    for torch's current stream (the producer). "hot": the third call of one launch object
    (armed: the C binder declines tensors, the Python fast path reads them through the
    torch adapter's ``fast`` and waits)."""
    torch = _torch()
    launch = scale[GRID, 256]
    other = _new_stream()
    x = torch.zeros(N, device="cuda")
    out = torch.full((N,), float("nan"), device="cuda")
    if call == "hot":
        for _ in range(2):
            launch(x, 1.0, N, out, stream=other)
        _sync(other)
    torch.cuda.synchronize()
    producer = torch.cuda.Stream()
    with torch.cuda.stream(producer):
        torch.cuda._sleep(SPIN_CYCLES)
        x.fill_(3.0)
        launch(x, 2.0, N, out, stream=other)
    _sync(other)
    torch.cuda.synchronize()
    assert torch.all(out == 6.0).item()


@pytest.mark.parametrize("call", ["first", "hot"])
def test_direct_kernel_call_follows_torchs_stream_on_every_call(call):
    """No stream=: every call (the armed C path included) runs on torch's current stream
    ``s``: queued after a slow fill there, read by a clone queued after it on ``s``."""
    torch = _torch()
    launch = scale[GRID, 256]
    x = torch.zeros(N, device="cuda")
    out = torch.full((N,), float("nan"), device="cuda")
    if call == "hot":
        for _ in range(2):
            launch(x, 1.0, N, out)
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(SPIN_CYCLES)
        x.fill_(1.5)
        launch(x, 4.0, N, out)
        res = out.clone()
    torch.cuda.synchronize()
    assert torch.all(res == 6.0).item()


@pytest.mark.parametrize("given", [False, True])
def test_direct_pipe_call_with_tensors_waits_or_follows_on_the_hot_path(given):
    """fkl pipes called directly with tensors, on their hot path (calls 3+): given no
    stream they run on torch's current stream; given another stream they wait for it
    (and record_stream the tensors)."""
    torch = _torch()
    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.TensorWrite(), target="gpu")
    x = torch.zeros(1024, 1024, device="cuda")
    out = torch.full((1024, 1024), float("nan"), device="cuda")
    other = _new_stream()
    kw = {"stream": other} if given else {}
    for _ in range(3):
        pipe(x, out=out, **kw)
    _sync(other)
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(SPIN_CYCLES)
        x.fill_(3.0)
        pipe(x, out=out, **kw)
        res = out.clone()
    _sync(other)
    torch.cuda.synchronize()
    assert torch.all(out == 6.0).item()
    if not given:  # the clone on s came after the pipe's kernel on s
        assert torch.all(res == 6.0).item()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "uint8", "int64"])
def test_torch_cuda_tensors_every_dtype_zero_copy(dtype, rng):
    torch = _torch()
    import thork_torch
    from thork_core import dt

    d = getattr(dt, dtype)

    @tk.jit(name=f"torch_gpu_copy_{dtype}")
    def copy(src: tk.DevicePointer[d], dst: tk.DevicePointer[d], n: tk.dt.int32,
             bid: tk.Uint[tk.BlockIdx], tid: tk.Uint[tk.ThreadIdx],
             bdm: tk.Uint[tk.BlockDim]):
        i = bid * bdm + tid
        with tk.if_(i < n):
            dst[i] = src[i]

    n = 1001
    src = (torch.randn(n, device="cuda") * 50).to(thork_torch.to_torch(d))
    dst = torch.empty_like(src)
    dst.view(torch.uint8).fill_(0xA5)
    thork_torch.wrap(copy[4, 256])(src, dst, n)
    torch.cuda.synchronize()
    assert torch.equal(dst.view(torch.uint8), src.view(torch.uint8))


def test_torch_pipe_like_input_and_custom_op_under_cuda_graph(rng):
    torch = _torch()
    import thork_torch

    pipe = fkl.compose(fkl.TensorRead(), fkl.Cast("float32"), fkl.Mul(1 / 255),
                       fkl.Sub(0.5), fkl.TensorWrite(), target="gpu")
    img = torch.randint(0, 256, (61, 83, 3), dtype=torch.uint8, device="cuda")
    ref = img.float() / 255 - 0.5
    r = thork_torch.wrap(pipe, output="like_input")(img)
    assert isinstance(r, torch.Tensor) and r.device == img.device
    torch.testing.assert_close(r, ref)
    plain = pipe(img)
    assert type(plain).__name__ == "DeviceArray"  # Thork's own array by default
    thork_torch.custom_op("thork_gpu_test::norm", pipe)
    static_in = img.clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up outside capture
        torch.ops.thork_gpu_test.norm(static_in)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_out = torch.ops.thork_gpu_test.norm(static_in) * 2
    new = torch.randint(0, 256, (61, 83, 3), dtype=torch.uint8, device="cuda")
    static_in.copy_(new)
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(static_out, (new.float() / 255 - 0.5) * 2)


def test_torch_compile_fullgraph_with_pipe_op_on_gpu():
    torch = _torch()
    import thork_torch

    pipe = fkl.compose(fkl.TensorRead(), fkl.Cast("float32"), fkl.Mul(2.0),
                       fkl.TensorWrite(), target="gpu")
    thork_torch.custom_op("thork_gpu_test::double", pipe)

    @torch.compile(fullgraph=True)
    def f(x):  # type: ignore[no-untyped-def]
        return torch.ops.thork_gpu_test.double(x + 1).sum(dim=-1)

    x = torch.randint(0, 100, (45, 67, 3), dtype=torch.uint8, device="cuda")
    torch.testing.assert_close(f(x), ((x + 1).float() * 2).sum(dim=-1))


# -- DLPack ------------------------------------------------------------------------------
def test_dlpack_export_makes_the_consumer_wait(rng):
    torch = _torch()
    from thork_core.runtime import DeviceArray

    prod = _new_stream()
    x = DeviceArray.from_host(np.full(N, 2.0, np.float32))
    arr = DeviceArray.from_host(np.full(N, np.nan, np.float32), stream=prod)
    with torch.cuda.stream(torch.cuda.ExternalStream(prod)):
        torch.cuda._sleep(SPIN_CYCLES)
    scale[GRID, 256](x, 3.0, N, arr, stream=prod)
    t = torch.from_dlpack(arr)  # torch's current stream must wait for `prod`
    got = t.clone()
    torch.cuda.synchronize()
    assert t.device.index == arr.device
    assert torch.all(got == 6.0).item()


def test_dlpack_import_orders_thorks_stream_after_the_producer():
    torch = _torch()
    from thork_core.runtime import DeviceArray

    t = torch.zeros(N, device="cuda")
    torch.cuda.synchronize()
    producer = torch.cuda.Stream()
    mine = _new_stream()
    out = DeviceArray.from_host(np.full(N, np.nan, np.float32))
    with torch.cuda.stream(producer):
        torch.cuda._sleep(SPIN_CYCLES)
        t.fill_(7.0)
        a = DeviceArray.from_dlpack(t, stream=mine)  # producer orders `mine` after its fill
    assert a.device == t.device.index and a.stream == mine and a.shape == (N,)
    scale[GRID, 256](a, 1.0, N, out, stream=mine)
    _sync(mine)
    np.testing.assert_array_equal(out.to_host(), np.full(N, 7.0, np.float32))


class _DLPackOnly:
    """An array known to Thork only through DLPack (as JAX arrays are)."""

    def __init__(self, t) -> None:  # type: ignore[no-untyped-def]
        self.t = t

    def __dlpack__(self, **kw):  # type: ignore[no-untyped-def]
        return self.t.__dlpack__(**kw)

    def __dlpack_device__(self):  # type: ignore[no-untyped-def]
        return self.t.__dlpack_device__()


def test_fkl_pipe_asks_dlpack_producers_for_its_launch_stream():
    torch = _torch()
    from thork_core.runtime import DeviceArray

    pipe = fkl.compose(fkl.TensorRead(), fkl.Add(1.0), fkl.TensorWrite(), target="gpu")
    t = torch.zeros(N, device="cuda")
    torch.cuda.synchronize()
    producer = torch.cuda.Stream()
    mine = _new_stream()
    out = DeviceArray.from_host(np.full(N, np.nan, np.float32))
    with torch.cuda.stream(producer):
        torch.cuda._sleep(SPIN_CYCLES)
        t.fill_(4.0)
        pipe(_DLPackOnly(t), out=out, stream=mine)
    _sync(mine)
    np.testing.assert_array_equal(out.to_host(), np.full(N, 5.0, np.float32))


# -- CuPy --------------------------------------------------------------------------------
_SPIN = r"""
extern "C" __global__ void spin_fill(float* x, float v, int n, long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v;
}
"""


def _slow_fill_cupy(cp, x, value: float) -> None:  # type: ignore[no-untyped-def]
    """On CuPy's current stream: spin ~50 ms, then fill."""
    k = cp.RawKernel(_SPIN, "spin_fill")
    k(((x.size + 255) // 256,), (256,), (x, np.float32(value), np.int32(x.size),
                                         np.int64(SPIN_CYCLES)))


def test_cupy_array_on_cupys_stream_is_waited_for():
    cp = _cupy()
    from thork_core.runtime import DeviceArray

    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(3.0), fkl.TensorWrite(), target="gpu")
    x = cp.zeros(N, dtype=cp.float32)
    cp.cuda.Device().synchronize()
    out = DeviceArray.from_host(np.full(N, np.nan, np.float32))
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        _slow_fill_cupy(cp, x, 2.0)
        # CAI v3 names CuPy's current stream; Thork launches on the legacy stream
        r = pipe(x, out=out)
    assert r is out
    np.testing.assert_array_equal(out.to_host(), np.full(N, 6.0, np.float32))
    # and a kernel launched on CuPy's stream by name
    y = cp.zeros(N, dtype=cp.float32)
    cp.cuda.Device().synchronize()
    with s:
        _slow_fill_cupy(cp, x, 1.0)
        scale[GRID, 256](x, 5.0, N, y, stream=cp.cuda.get_current_stream())
    s.synchronize()
    assert bool((y == 5.0).all())


def test_cupy_external_stream_and_graph_capture():
    cp = _cupy()
    pipe = fkl.compose(fkl.TensorRead(), fkl.Add(2.0), fkl.TensorWrite(), target="gpu")
    handle = _new_stream()
    ext = cp.cuda.ExternalStream(handle)
    x = cp.arange(N, dtype=cp.float32)
    y = cp.full(N, cp.nan, dtype=cp.float32)
    cp.cuda.Device().synchronize()  # CuPy's interface names the current stream, not x's
    with ext:
        pipe(x, out=y, stream=ext)  # warm-up (builds the kernel) on the external stream
    ext.synchronize()
    assert bool((y == x + 2).all())
    s = cp.cuda.Stream(non_blocking=True)
    y[:] = cp.nan
    cp.cuda.Device().synchronize()
    with s:
        s.begin_capture()
        pipe(x, out=y, stream=s)
        scale[GRID, 256](y, 0.5, N, y, stream=s)
        graph = s.end_capture()
    assert bool(cp.isnan(y).all())  # captured, not run
    graph.launch(s)
    s.synchronize()
    cp.testing.assert_array_equal(y, (x + 2) * 0.5)
