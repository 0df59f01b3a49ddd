"""Two GPUs: kernels and pipes on both devices from two threads at once, results checked
against NumPy; arrays on different devices refused by name; DLPack exports of a buffer on
device 1 reporting device 1. Every test needs two visible CUDA devices and is skipped,
saying so, with fewer (the routing logic itself: tests/core/test_device_routing.py).

Run on a 2-GPU machine: ``python -m pytest tests/core/test_multi_gpu.py -q``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import thork as tk
from thork_core import DeviceError
from thork_core.runtime import DeviceArray, device_count, gpu_status


def _devices() -> int:
    return device_count() if gpu_status()[0] else 0


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(_devices() < 2, reason=f"needs 2 CUDA devices, {_devices()} visible"),
]

ROUNDS = 20


def _both(work: Callable[[int, int], None]) -> None:
    """``work(device, round)`` for ROUNDS rounds in one thread per device, both threads
    starting together; re-raise the first failure."""
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def run(device: int) -> None:
        try:
            start.wait()
            for r in range(ROUNDS):
                work(device, r)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(d,)) for d in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def _axpb() -> Any:
    @tk.jit
    def axpb(out: tk.DevicePointer[tk.dt.float32], x: tk.DevicePointer[tk.dt.float32],
             a: tk.dt.float32, b: tk.dt.float32, n: tk.dt.int32, bid: tk.Uint[tk.BlockIdx],
             tid: tk.Uint[tk.ThreadIdx], bdm: tk.Uint[tk.BlockDim]):
        i = bid * bdm + tid
        with tk.if_(i < n):
            out[i] = x[i] * a + b

    return axpb


def test_kernels_on_both_gpus_from_two_threads(rng):
    k = _axpb()
    seed = int(rng.integers(2**31))

    def work(device: int, r: int) -> None:
        g = np.random.default_rng([seed, device, r])
        n = int(g.integers(1000, 300_000)) | 1
        x = g.standard_normal(n).astype(np.float32)
        a, b = float(np.float32(g.uniform(0.5, 3))), float(np.float32(g.uniform(-5, 5)))
        want = x * np.float32(a) + np.float32(b)
        grid = (n + 255) // 256
        # Device arrays on `device`: the launch follows them (no device= given).
        dx = DeviceArray.from_host(x, device=device)
        dout = DeviceArray.from_host(np.full(n, np.nan, np.float32), device=device)
        k[grid, 256](dout, dx, a, b, n)
        np.testing.assert_allclose(dout.to_host(), want, rtol=1e-6, atol=1e-6)
        # NumPy arrays with device=: copied to that device, run there, copied back.
        out = np.full(n, np.nan, np.float32)
        k[grid, 256](out, x, a, b, n, device=device)
        np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)

    _both(work)
    ordinals = sorted(exe.ordinal for exe, _ in k._exes.values())
    assert ordinals == [0, 1]  # one module per device


def test_a_launch_armed_on_one_device_serves_the_other(rng):
    """kernel[grid, block] armed by its first call (the C binder holds device 0's function)
    runs device-1 arrays through the routed Python path, device-0 arrays in C, and still
    names arrays on two devices; every result against NumPy."""
    from thork_core._launch import launch_call_base

    k = _axpb()
    n = int(rng.integers(1000, 5000)) | 1
    launch = k[(n + 255) // 256, 256]
    for r in range(6):
        device = (r // 2) % 2 if r else 0
        x = rng.standard_normal(n).astype(np.float32)
        dx = DeviceArray.from_host(x, device=device)
        dout = DeviceArray.from_host(np.full(n, np.nan, np.float32), device=device)
        launch(dout, dx, 2.0, -1.0, n)
        np.testing.assert_allclose(dout.to_host(), x * np.float32(2) - 1, rtol=1e-6,
                                   atol=1e-6)
        if r == 0 and launch_call_base() is not None:
            assert launch._hot_binder is not None  # armed on device 0
    with pytest.raises(DeviceError, match="cuda:0.*cuda:1|cuda:1.*cuda:0"):
        launch(DeviceArray(n, "float32", device=1),
               DeviceArray.from_host(np.ones(n, np.float32), device=0), 1.0, 0.0, n)


def test_kernel_arguments_on_two_gpus_are_a_named_error():
    k = _axpb()
    x0 = DeviceArray.from_host(np.ones(64, np.float32), device=0)
    out1 = DeviceArray(64, "float32", device=1)
    with pytest.raises(DeviceError) as e:
        k[1, 64](out1, x0, 1.0, 0.0, 64)
    msg = str(e.value)
    assert "axpb()" in msg and "'out'" in msg and "'x'" in msg
    assert "cuda:0" in msg and "cuda:1" in msg
    with pytest.raises(DeviceError, match=r"parameter 'out' is on cuda:1 .*cuda:0"):
        k[1, 64](out1, x0, 1.0, 0.0, 64, device=0)


def test_pipes_on_both_gpus_from_two_threads(rng):
    fkl = pytest.importorskip("fkl")
    mean = [0.485, 0.456, 0.406]
    std = [0.229, 0.224, 0.225]
    pipe = fkl.compose(fkl.TensorRead(), fkl.ColorConversion("BGR2RGB"), fkl.Mul(1 / 255.0),
                       fkl.Sub(mean), fkl.Div(std), fkl.TensorSplit(), target="gpu")
    seed = int(rng.integers(2**31))

    def reference(frame: np.ndarray) -> np.ndarray:
        rgb = frame[..., ::-1].astype(np.float32) * np.float32(1 / 255.0)
        return ((rgb - np.float32(mean)) / np.float32(std)).transpose(2, 0, 1)

    def work(device: int, r: int) -> None:
        g = np.random.default_rng([seed, device, r])
        h, w = int(g.integers(17, 300)) | 1, int(g.integers(17, 300)) | 1
        frame = g.integers(0, 256, (h, w, 3), dtype=np.uint8)
        x = fkl.DeviceBuffer.from_host(frame, device=device)
        y = pipe(x)  # follows the input's device
        assert y.device == device and y.__dlpack_device__() == (2, device)
        np.testing.assert_allclose(y.to_host(), reference(frame), rtol=1e-5, atol=1e-5)
        out = fkl.DeviceBuffer((3, h, w), "float32", device=device)
        pipe(x, out=out)
        np.testing.assert_allclose(out.to_host(), reference(frame), rtol=1e-5, atol=1e-5)
        host = pipe(frame, device=device)  # host frame, run on `device`
        np.testing.assert_allclose(host, reference(frame), rtol=1e-5, atol=1e-5)

    _both(work)
    x0 = fkl.DeviceBuffer.from_host(np.zeros((9, 11, 3), np.uint8), device=0)
    with pytest.raises(DeviceError, match=r"out\[0\] is on cuda:1, the call runs on cuda:0"):
        pipe(x0, out=fkl.DeviceBuffer((3, 9, 11), "float32", device=1))
    with pytest.raises(DeviceError, match=r"input 0 is on cuda:0, device=1 on cuda:1"):
        pipe(x0, device=1)


def test_circular_tensor_on_device_1(rng):
    fkl = pytest.importorskip("fkl")
    w, h, batch = 37, 21, 3
    ct = fkl.CircularTensor(w, h, batch=batch, channels=3, out_dtype="float32", device=1,
                            target="gpu")
    frames = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for _ in range(4)]
    for f in frames:
        ct.update(fkl.DeviceBuffer.from_host(f, device=1), [fkl.Cast("float32")])
    snap = ct.snapshot()
    assert snap.__dlpack_device__() == (2, 1)
    got = np.asarray(snap.to_host())
    want = np.stack([f.astype(np.float32) for f in frames[::-1][:batch]])
    np.testing.assert_array_equal(got, want)
    with pytest.raises(DeviceError, match=r"frame is on cuda:0, the window on cuda:1"):
        ct.update(fkl.DeviceBuffer.from_host(frames[0], device=0), [fkl.Cast("float32")])


def test_dlpack_export_of_a_buffer_on_device_1(rng):
    x = rng.standard_normal(1001).astype(np.float32)
    buf = DeviceArray.from_host(x, device=1)
    assert buf.__dlpack_device__() == (2, 1)
    view = DeviceArray.from_dlpack(buf)  # Thork's own consumer reads the capsule's device
    assert view.device == 1
    np.testing.assert_array_equal(view.to_host(), x)
    torch = pytest.importorskip("torch", reason="torch absent: Thork's own consumer checked")
    t = torch.from_dlpack(buf)
    assert t.device == torch.device("cuda", 1)
    np.testing.assert_array_equal(t.cpu().numpy(), x)


def test_divergent_pipes_on_both_gpus_from_two_threads(rng):
    """One divergent pipe called from a thread per device: each call runs where its batch
    is (kernel, tables and outputs there), results against NumPy; an out= on the other
    device is refused by name."""
    fkl = pytest.importorskip("fkl")
    div = fkl.compose_divergent(
        [1, 0, 1], [fkl.TensorRead(), fkl.Mul(2.0), fkl.TensorWrite()],
        [fkl.TensorRead(), fkl.Add(-3.0), fkl.Mul(0.5), fkl.TensorWrite()], target="gpu")
    xs = {d: rng.standard_normal((3, 13, 17, 3)).astype(np.float32) for d in (0, 1)}

    def work(device: int, r: int) -> None:
        x = xs[device] + r
        outs = div(fkl.DeviceBuffer.from_host(x, device=device))
        assert [o.device for o in outs] == [device, device]
        np.testing.assert_allclose(outs[0].to_host(), x[[1]] * 2.0, rtol=1e-6)
        np.testing.assert_allclose(outs[1].to_host(), (x[[0, 2]] - 3.0) * 0.5, rtol=1e-6)

    _both(work)
    x1 = fkl.DeviceBuffer.from_host(xs[1], device=1)
    wrong = [fkl.DeviceBuffer((1, 13, 17, 3), "float32", device=0),
             fkl.DeviceBuffer((2, 13, 17, 3), "float32", device=0)]
    with pytest.raises(DeviceError, match=r"out\[0\] is on cuda:0, the call runs on cuda:1"):
        div(x1, out=wrong)
