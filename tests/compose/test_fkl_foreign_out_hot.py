"""An ``out=`` of a foreign kind on the hot path (session 8, issue 11): a torch tensor (an
array whose library has a current stream: a *follower*), or a ``__cuda_array_interface__``
array on a stream of its own, used to be checked by the full path on every call (two
adapter views and the aliasing check: ~30 us of host time per call with torch tensors on
the H200, against ~3.5 us with DeviceArrays). A hot entry now remembers the probe keys of
the outputs its full check accepted, and a later ``out=`` with such a key is read like an
input: its address, its stream.

Runs without a GPU: the GPU target's call path with recorded launches (``fake_gpu`` of
tests/compose/conftest.py), a made-up follower adapter standing for torch's.
"""

from __future__ import annotations

from typing import Any

import fkl
import pytest
from helpers.fake_gpu import wrap_device
from thork_core import ArgumentError, ArrayAdapter, ArrayView, dt

pytestmark = pytest.mark.plugin("compose")

_STREAM = 0x7000


class Tensor:
    """A stand-in for a CUDA tensor: an address, a shape, float32, device 0."""

    def __init__(self, ptr: int, shape: tuple[int, ...], dtype: str = "<f4") -> None:
        self.ptr, self.shape, self.typestr = ptr, shape, dtype

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {"shape": self.shape, "typestr": self.typestr, "data": (self.ptr, False),
                "version": 3, "strides": None, "stream": _STREAM}


class Follower(ArrayAdapter):
    """torch's adapter in miniature: a current stream, ``used_on`` recorded."""

    name = "fake-follower"
    follows = "fkl"

    def __init__(self) -> None:
        self.fast_calls = 0
        self.views = 0
        self.used: list[tuple[int, int]] = []

    def claims(self, tx: type) -> bool:
        return tx is Tensor

    def fast(self, obj: Any) -> tuple[int, Any, int, int] | None:
        self.fast_calls += 1
        if obj.typestr != "<f4":
            return None
        return obj.ptr, (Tensor, obj.shape, dt.float32, 0), _STREAM, 0

    def launch_stream(self, obj: Any) -> int | None:
        return _STREAM

    def used_on(self, obj: Any, stream: int) -> None:
        self.used.append((obj.ptr, stream))

    def view(self, obj: Any, stream: int | None) -> ArrayView | None:
        if type(obj) is not Tensor:
            return None
        self.views += 1
        d = {"<f4": dt.float32, "<f2": dt.float16}[obj.typestr]
        return ArrayView(ptr=obj.ptr, shape=obj.shape, strides=None, dtype=d,
                         device="cuda", device_id=0, readonly=False, stream=_STREAM,
                         keepalive=obj)


@pytest.fixture(autouse=True)
def _no_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    """Made-up addresses: the driver's answer for their device is 0."""
    from thork_core import _cuda

    monkeypatch.setattr(_cuda, "pointer_device", lambda ptr: 0)


@pytest.fixture
def follower(monkeypatch: pytest.MonkeyPatch) -> Follower:
    from thork_core import _plugins, _probe

    adapter = Follower()
    monkeypatch.setitem(_probe.KINDS, Tensor, adapter)
    each = _plugins.Plugins.each_adapter

    def with_follower(self: Any) -> Any:
        yield adapter
        yield from each(self)

    monkeypatch.setattr(_plugins.Plugins, "each_adapter", with_follower)
    return adapter


def _pipe() -> Any:
    return fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.Add(1.0), fkl.TensorWrite(),
                       target="gpu")


def test_follower_out_is_hot_after_its_first_call(fake_gpu: list[Any],
                                                  slow_calls: list[int],
                                                  follower: Follower) -> None:
    pipe = _pipe()
    x = Tensor(1 << 32, (3, 17))
    pipe(x, out=Tensor(1 << 33, (3, 17)))  # the general path: plans, checks
    pipe(x, out=Tensor(1 << 34, (3, 17)))  # hot input; out= checked in full once more
    views = follower.views
    for k in range(5):
        fake_gpu.clear()
        y = Tensor((1 << 35) + k * 4096, (3, 17))
        assert pipe(x, out=y) is y
        (_, ptrs), = fake_gpu
        assert ptrs == [x.ptr, y.ptr]  # this call's out= address, not a remembered one
    assert follower.views == views  # no adapter view: the out= was read by its probe key
    assert slow_calls[0] == 1


def test_hot_follower_out_still_checks_shape_dtype_and_overlap(
        fake_gpu: list[Any], slow_calls: list[int], follower: Follower) -> None:
    pipe = _pipe()
    x = Tensor(1 << 32, (3, 17))
    for k in range(3):
        pipe(x, out=Tensor((1 << 33) + k * 4096, (3, 17)))
    fake_gpu.clear()
    with pytest.raises(ArgumentError, match="shape"):
        pipe(x, out=Tensor(1 << 36, (3, 16)))  # another key: the full check names it
    with pytest.raises(ArgumentError):
        pipe(x, out=Tensor(1 << 36, (3, 17), "<f2"))  # a dtype the plan does not write
    with pytest.raises(ArgumentError, match="separate from input 0"):
        pipe(x, out=Tensor(x.ptr + 8, (3, 17)))  # the learned key, overlapping the input
    assert not fake_gpu  # nothing launched for any of them
    pipe(x, out=x)  # exactly the input: in place, allowed for a pointwise chain
    (_, ptrs), = fake_gpu
    assert ptrs == [x.ptr, x.ptr]


def test_hot_cai_out_on_its_own_stream_is_waited_for(
        fake_gpu: list[Any], slow_calls: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """A CAI out= naming a stream of its own (no follower): the launch stream waits for
    that stream on every call, on the full path (the first calls; every call with two
    GPUs, where the probe cannot key a CAI array without a device) and hot."""
    from thork_core import runtime

    waits: list[tuple[int, int, int]] = []
    monkeypatch.setattr(runtime, "stream_wait", lambda d, p, c: waits.append((p, c, d)))
    pipe = _pipe()
    x = wrap_device(1 << 32, (3, 17), "float32")
    for k in range(4):
        fake_gpu.clear()
        waits.clear()
        y = Tensor((1 << 33) + k * 4096, (3, 17))
        assert pipe(x, out=y) is y
        (_, ptrs), = fake_gpu
        assert ptrs == [x.ptr, y.ptr]
        assert waits == [(_STREAM, 0, 0)]  # full check or hot: the out='s stream
    assert slow_calls[0] == 1


def test_hot_follower_out_on_another_stream_is_followed_once(
        fake_gpu: list[Any], slow_calls: list[int], follower: Follower,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A hot call given ``stream=`` other than the follower's current stream orders that
    stream after the current one (one wait) and tells the library of both arrays' use
    (``used_on``), the ``out=`` included; the out's current stream is the one its probe
    read (the adapter is not asked for it again)."""
    from thork_core import _cuda, runtime

    waits: list[tuple[int, int, int]] = []

    def wait(device: int, producer: int, consumer: int) -> None:
        waits.append((device, producer, consumer))

    monkeypatch.setattr(_cuda, "stream_wait", wait)  # core's follow()
    monkeypatch.setattr(runtime, "stream_wait", wait)  # fkl's wait()
    asked: list[int] = []
    monkeypatch.setattr(follower, "launch_stream",
                        lambda obj: asked.append(obj.ptr) or _STREAM)
    pipe = _pipe()
    x = Tensor(1 << 32, (3, 17))
    for k in range(2):  # general path, then the out= key learned
        pipe(x, out=Tensor((1 << 33) + k * 4096, (3, 17)), stream=0x9000)
    waits.clear()
    follower.used.clear()
    asked.clear()
    fake_gpu.clear()
    y = Tensor(1 << 36, (3, 17))
    assert pipe(x, out=y, stream=0x9000) is y
    (_, ptrs), = fake_gpu
    assert ptrs == [x.ptr, y.ptr]
    assert set(waits) == {(0, _STREAM, 0x9000)}  # stream= waits for the current stream
    assert sorted(follower.used) == sorted([(x.ptr, 0x9000), (y.ptr, 0x9000)])
    assert asked == []  # the probe's reading of the out= served
