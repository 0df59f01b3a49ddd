"""Direct calls with torch tensors follow torch's current stream when no ``stream=`` is
given. CPU-runnable: a stand-in ``torch`` module (tensors with a device, a current raw
stream per device) and a CUDA executable whose native binder records the launch stream.
The GPU test runs a kernel on a side stream made current with ``torch.cuda.stream``."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest
from thork_core import _gpu
from thork_core.runtime import implied_stream

thork_torch_adapter = pytest.importorskip("thork_torch._adapter")


class _Device:
    def __init__(self, kind: str, index: int | None) -> None:
        self.type, self.index = kind, index


def _fake_torch(current: dict[int, int]) -> types.ModuleType:
    torch = types.ModuleType("torch")

    class Tensor:
        def __init__(self, kind: str, index: int | None = None) -> None:
            self.device = _Device(kind, index)

    torch.Tensor = Tensor
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda i: current[i])
    return torch


@pytest.fixture
def torch_fake(monkeypatch):
    current = {0: 0x51, 1: 0x77}
    fake = _fake_torch(current)
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setattr(thork_torch_adapter, "_RAW_STREAM", [])  # cache the fake's call
    return fake, current


def test_implied_stream_is_torchs_current_stream_of_the_tensors_device(torch_fake):
    torch, current = torch_fake
    assert implied_stream([3, torch.Tensor("cuda", 1), 2.0]) == 0x77
    assert implied_stream([torch.Tensor("cuda", None)]) == 0x51  # no index: device 0
    current[0] = 0x99  # torch.cuda.set_stream(...) between calls: followed
    assert implied_stream([torch.Tensor("cuda", 0)]) == 0x99
    assert implied_stream([torch.Tensor("cpu"), np.zeros(3)]) == 0  # no CUDA tensor
    assert implied_stream([np.zeros(3)]) == 0


def test_implied_stream_without_torch_imported_is_the_legacy_stream(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert implied_stream([object(), np.zeros(2)]) == 0


def test_a_launch_given_no_stream_runs_on_torchs_stream(torch_fake):
    """CudaExecutable.launch hands the native binder torch's current stream (stream=None)
    and the given stream otherwise."""
    torch, current = torch_fake
    seen: list[int] = []
    exe = _gpu.CudaExecutable.__new__(_gpu.CudaExecutable)
    exe._binder = lambda grid, block, shared, handle, args: seen.append(handle) or True
    exe._dynamic_limit = 48 * 1024
    t = torch.Tensor("cuda", 1)
    exe.launch((1, 1, 1), (32, 1, 1), [t, 5])
    exe.launch((1, 1, 1), (32, 1, 1), [t, 5], stream=0x1234)
    exe.launch((1, 1, 1), (32, 1, 1), [np.zeros(4), 5])
    assert seen == [0x77, 0x1234, 0]


@pytest.mark.gpu
def test_gpu_direct_call_follows_torchs_side_stream(rng):
    """A kernel called with tensors inside ``with torch.cuda.stream(side)`` runs on
    ``side``: queued after a long torch op there, it sees that op's result."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    import thork as tk

    @tk.jit
    def twice(x: tk.DevicePointer[tk.dt.float32], n: tk.dt.int32,
              out: tk.DevicePointer[tk.dt.float32], bid: tk.Uint[tk.BlockIdx],
              tid: tk.Uint[tk.ThreadIdx], bdm: tk.Uint[tk.BlockDim]):
        i = bid * bdm + tid
        with tk.if_(i < n):
            out[i] = x[i] * 2.0

    n = 1 << 20
    side = torch.cuda.Stream()
    big = torch.randn(2048, 2048, device="cuda")
    with torch.cuda.stream(side):
        x = torch.empty(n, device="cuda")
        for _ in range(4):  # keep the side stream busy before x is written
            big = big @ big / 2048
        host = rng.standard_normal(n, dtype=np.float32)
        x.copy_(torch.from_numpy(host).to("cuda", non_blocking=True))
        out = torch.full((n,), float("nan"), device="cuda")
        twice[(n + 255) // 256, 256](x, n, out)
        assert torch.cuda.current_stream().cuda_stream == side.cuda_stream
    side.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), host * 2, rtol=1e-6)


def test_a_pipe_given_no_stream_runs_on_torchs_stream(torch_fake):
    """fkl pipes called directly with CUDA tensors follow torch's current stream too (the
    call's stream before any path is chosen); a given stream wins; host arrays keep None."""
    fkl = pytest.importorskip("fkl")
    torch, current = torch_fake
    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.TensorWrite(), target="cpu")
    seen: list[object] = []
    pipe._call_slow = lambda inputs, out, stream, key, active=None, device=None: \
        seen.append(stream)
    t = torch.Tensor("cuda", 1)
    pipe(t, active_batch=0)
    pipe(t, active_batch=0, stream=5)
    pipe(np.zeros((2, 3), np.float32), active_batch=0)
    assert seen == [0x77, 5, None]
