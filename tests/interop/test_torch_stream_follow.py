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
    """What the adapter reads of torch: ``Tensor`` (device, ``is_cuda``, contiguity,
    dtype, ``get_device``, ``data_ptr``, shape), dtypes, the raw current-stream query."""
    torch = types.ModuleType("torch")

    class dtype:  # noqa: N801 - torch's name
        def __init__(self, name: str) -> None:
            self.name = name

        def __str__(self) -> str:
            return f"torch.{self.name}"

    torch.dtype = dtype
    for name in ("float32", "float16", "int32", "uint8"):
        setattr(torch, name, dtype(name))
    torch.complex64 = dtype("complex64")  # no Thork dtype: the adapters' path says so

    class Tensor:
        def __init__(self, kind: str, index: int | None = None, ptr: int = 0x1000,
                     shape: tuple[int, ...] = (4, 6), dt: object = None,
                     contiguous: bool = True) -> None:
            self.device = _Device(kind, index)
            self.is_cuda = kind == "cuda"
            self.shape, self.dtype, self._ptr = shape, dt or torch.float32, ptr
            self._contiguous = contiguous

        def is_contiguous(self) -> bool:
            return self._contiguous

        def get_device(self) -> int:
            return (self.device.index or 0) if self.is_cuda else -1

        def data_ptr(self) -> int:
            return self._ptr

    torch.Tensor = Tensor
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda i: current[i])
    return torch


@pytest.fixture
def torch_fake(monkeypatch):
    current = {0: 0x51, 1: 0x77}
    fake = _fake_torch(current)
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setattr(thork_torch_adapter, "_RAW_STREAM", [])  # cache the fake's call
    monkeypatch.setattr(thork_torch_adapter, "_FAST_DTYPES", thork_torch_adapter._Dtypes())
    return fake, current


@pytest.fixture
def used(monkeypatch):
    """Stream waits and record_stream calls, recorded instead of made."""
    from thork_core import _cuda

    seen: dict[str, list] = {"waits": [], "records": []}
    monkeypatch.setattr(_cuda, "stream_wait",
                        lambda device, producer, consumer:
                        seen["waits"].append((device, producer, consumer)))
    monkeypatch.setattr(thork_torch_adapter, "record",
                        lambda t, stream: seen["records"].append((t, stream)))
    return seen


def test_probe_reads_a_cuda_tensor_through_its_adapter(torch_fake):
    """Core's probe (the fkl hot path's reading) takes a contiguous CUDA tensor through
    the torch adapter: its address, a key fixing type, shape, Thork dtype and device,
    torch's current stream on its device as producer, and the adapter as follower."""
    from thork_core import dt
    from thork_core.launch import probe

    torch, current = torch_fake
    t = torch.Tensor("cuda", 1, ptr=0xABC00, shape=(3, 5))
    ptr, key, stream, device, follower = probe(t)
    assert (ptr, stream, device) == (0xABC00, 0x77, 1)
    assert key == (torch.Tensor, (3, 5), dt.float32, 1)
    assert isinstance(follower, thork_torch_adapter.TorchAdapter)
    current[1] = 0x99  # torch.cuda.set_stream between calls: read per call
    assert probe(t)[2] == 0x99
    assert probe(torch.Tensor("cuda", 0, dt=torch.float16))[1][2] == dt.float16
    # Not for the hot path: strided, host, a dtype Thork lacks (the adapters decide).
    assert probe(torch.Tensor("cuda", 0, contiguous=False)) is None
    assert probe(torch.Tensor("cpu")) is None
    assert probe(torch.Tensor("cuda", 0, dt=torch.complex64)) is None


def test_kinds_are_decided_once_per_type_and_cost_other_arrays_nothing(torch_fake):
    """CuPy-like arrays get the plain-producer kind (their interface is read) without the
    torch adapter being asked per call; a tensor type is the adapter's."""
    from thork_core import _probe

    torch, _ = torch_fake

    class CupyLike:
        __cuda_array_interface__ = {"shape": (2,), "typestr": "<f4", "data": (0x10, False),
                                    "version": 3}

    assert _probe.kind_of(CupyLike) == _probe.CAI
    assert _probe.KINDS[CupyLike] == _probe.CAI
    assert isinstance(_probe.kind_of(torch.Tensor), thork_torch_adapter.TorchAdapter)
    asked: list[type] = []
    adapter = _probe.KINDS[torch.Tensor]
    original = type(adapter).claims
    type(adapter).claims = lambda self, tx: asked.append(tx) or original(self, tx)
    try:
        for _ in range(3):
            assert _probe.implied_stream([CupyLike(), 2.0, 7]) == 0
    finally:
        type(adapter).claims = original
    assert asked == []  # decided before: a dict lookup per argument


def test_follow_waits_once_per_stream_and_records_each_tensor(torch_fake, used):
    from thork_core.launch import follow, followers

    torch, current = torch_fake
    a, b = torch.Tensor("cuda", 1, ptr=0x100), torch.Tensor("cuda", 1, ptr=0x200)
    found = followers([a, 3, b, np.zeros(2)])
    assert [(x, s) for x, _, s in found] == [(a, 0x77), (b, 0x77)]
    follow(found, 0x77, 1)  # the launch runs on torch's stream: nothing to do
    assert used == {"waits": [], "records": []}
    follow(found, 0x1234, 1)
    assert used["waits"] == [(1, 0x77, 0x1234)]
    assert used["records"] == [(a, 0x1234), (b, 0x1234)]
    assert followers([np.zeros(2), 1.0]) is None


def _python_path_exe(torch_fake):  # type: ignore[no-untyped-def]
    """A CudaExecutable of ``scale(x, a, n, out)`` on cuda:1 whose launcher records what
    a launch would get (no binder: the Python path every call)."""
    import thork as tk
    from thork_core._ir import PointerType

    @tk.jit
    def scale(x: tk.DevicePointer[tk.dt.float32], a: tk.dt.float32, n: tk.dt.int32,
              out: tk.DevicePointer[tk.dt.float32], tid: tk.Uint[tk.ThreadIdx]):
        with tk.if_(tid < n):
            out[tid] = x[tid] * a

    ir = scale.ir
    runs: list[tuple[int, list]] = []
    exe = _gpu.CudaExecutable.__new__(_gpu.CudaExecutable)
    exe.kernel, exe.ordinal, exe._fast, exe._binder = ir, 1, None, None
    exe._pointer = [isinstance(p.type, PointerType) for p in ir.params]
    exe._elem = [p.type.elem if isinstance(p.type, PointerType) else None for p in ir.params]
    exe._dynamic_limit = 48 * 1024
    exe.launcher = types.SimpleNamespace(
        run=lambda grid, block, shared, handle, values: runs.append((handle, list(values))))
    return exe, runs


def test_launch_python_path_takes_tensors_on_torchs_stream_or_waits(torch_fake, used):
    """CudaExecutable.launch's fast path for tensors: given no stream, torch's current
    stream and no wait; given another stream (a torch Stream object too), the launch runs
    there after one wait for torch's stream and record_stream on each tensor."""
    torch, current = torch_fake
    exe, runs = _python_path_exe(torch_fake)
    x, out = torch.Tensor("cuda", 1, ptr=0x100, shape=(8,)), \
        torch.Tensor("cuda", 1, ptr=0x200, shape=(8,))
    exe.launch((1, 1, 1), (8, 1, 1), [x, 2.0, 8, out])
    assert runs[-1][0] == 0x77 and (runs[-1][1][0], runs[-1][1][3]) == (0x100, 0x200)
    assert used == {"waits": [], "records": []}
    side = types.SimpleNamespace(cuda_stream=0x4242)  # what torch.cuda.Stream offers
    exe.launch((1, 1, 1), (8, 1, 1), [x, 2.0, 8, out], stream=side)
    assert runs[-1][0] == 0x4242
    assert used["waits"] == [(1, 0x77, 0x4242)]
    assert used["records"] == [(x, 0x4242), (out, 0x4242)]


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
