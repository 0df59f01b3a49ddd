"""CuPy-style arrays on a machine with several GPUs (session 7): ``__cuda_array_interface__``
names no device, so core's probe used to decline such arrays there and every pipe call
re-ran the general path (adapters, planning: 137 us per call measured on the two-GPU H200
machine against ~5 us with one GPU). A producer that also speaks DLPack (CuPy does) says
its device in one call: the probe keys the array with it and the call stays hot, on that
device's plan. A hot call's ``out=`` on another device is refused by name, as the first
call's is.

Runs without a GPU: the GPU target's call path with kernels traced for CUDA and launches
recorded (``fake_gpu`` of tests/compose/conftest.py), arrays wrapping made-up addresses.
"""

from __future__ import annotations

from typing import Any

import fkl
import pytest
from thork_core import ArgumentError, DeviceError
from thork_core import _probe as probe_mod
from thork_core.launch import probe

pytestmark = pytest.mark.plugin("compose")


@pytest.fixture
def devices(fake_gpu: list[Any], monkeypatch: pytest.MonkeyPatch) -> int:
    """How many GPUs ``fake_gpu`` pretends (core's adapters ask the driver's count too)."""
    from thork_core import _cuda

    n = 1 if probe_mod._ONE_GPU[0] else 2
    monkeypatch.setattr(_cuda, "device_count", lambda: n)
    return n


class CupyLike:
    """A device array as CuPy presents it: the interface dict and ``__dlpack_device__``."""

    def __init__(self, ptr: int, shape: tuple[int, ...], typestr: str, device: int,
                 dl_type: int = 2) -> None:
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                         "data": (ptr, False), "version": 3}
        self._dev = (dl_type, device)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._dev


class CaiOnly:
    """A producer with the interface only (no way to say its device but the driver)."""

    def __init__(self, ptr: int, shape: tuple[int, ...], typestr: str) -> None:
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                         "data": (ptr, False), "version": 3}


@pytest.mark.parametrize("gpus", [1, 2])
def test_probe_keys_a_dlpack_speaking_producer_with_its_device(monkeypatch, gpus: int):
    monkeypatch.setattr(probe_mod, "_ONE_GPU", [gpus == 1])
    a = CupyLike(0x7000, (5, 7), "<f4", device=1)
    got = probe(a)
    assert got is not None
    if gpus == 1:  # one GPU: the array is on it, nothing is asked
        assert got[0] == 0x7000 and got[3] == 0
    else:
        assert got[0] == 0x7000 and got[3] == 1 and got[1][-1] == 1
        b = CupyLike(0x7000, (5, 7), "<f4", device=0)
        assert probe(b)[1] != got[1]  # a plan per device
        assert probe(CaiOnly(0x7000, (5, 7), "<f4")) is None  # the adapters ask the driver
        assert probe(CupyLike(0x7000, (5, 7), "<f4", 0, dl_type=1)) is None  # host memory


def test_cupy_like_inputs_stay_hot_on_two_gpus(fake_gpu: list[Any],
                                                slow_calls: list[int],
                                                devices: int) -> None:
    """Inputs on device 1 then device 0, each with an out= on its own device: one general
    call per device, then hot; each launch gets that call's addresses."""
    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.TensorWrite(), target="gpu")
    from thork_core.runtime import DeviceArray

    for rnd in range(3):
        for dev in range(devices - 1, -1, -1):
            x = CupyLike((dev + 1) << 32 | rnd << 12, (37, 45, 3), "<f4", device=dev)
            out = DeviceArray.wrap((dev + 5) << 32, (37, 45, 3), "float32", device=dev)
            fake_gpu.clear()
            assert pipe(x, out=out) is out
            (_, ptrs), = fake_gpu
            assert ptrs == [x.__cuda_array_interface__["data"][0], out.ptr]
    assert slow_calls[0] == devices  # one general call per device, then hot


def test_a_hot_call_refuses_an_out_on_another_device(fake_gpu: list[Any],
                                                     slow_calls: list[int],
                                                     devices: int) -> None:
    if devices == 1:
        pytest.skip("one GPU: every device array is on it")
    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.TensorWrite(), target="gpu")
    from thork_core.runtime import DeviceArray

    x = CupyLike(1 << 32, (9, 11, 3), "<f4", device=1)
    good = DeviceArray.wrap(3 << 32, (9, 11, 3), "float32", device=1)
    pipe(x, out=good)
    pipe(x, out=good)
    assert slow_calls[0] == 1  # hot
    fake_gpu.clear()
    for wrong in (DeviceArray.wrap(4 << 32, (9, 11, 3), "float32", device=0),
                  CupyLike(5 << 32, (9, 11, 3), "<f4", device=0)):
        with pytest.raises(DeviceError, match=r"out\[0\] is on cuda:0, the call runs on cuda:1"):
            pipe(x, out=wrong)
    assert fake_gpu == []  # nothing launched


def test_cupy_arrays_in_and_out_are_launched_by_the_guard(fake_gpu: list[Any],
                                                          slow_calls: list[int],
                                                          devices: int,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          ) -> None:
    """(session 8) CuPy in and out on one GPU: after the first calls the pipe's guard
    reads both interfaces and launches (in C on a GPU, before any Python runs; core's
    Python guard here, the first thing the pipe's call tries), without the probe and
    the hot table; an out= over the input is left to the full check, which refuses it;
    exactly the input computes in place. With two GPUs there is no such guard."""
    from fkl import _call

    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.TensorWrite(), target="gpu")
    shape = (37, 45, 3)
    probed = [0]
    fast_info = _call.fast_info

    def counting(x: Any) -> Any:
        probed[0] += 1
        return fast_info(x)

    monkeypatch.setattr(_call, "fast_info", counting)
    x = CupyLike(1 << 32, shape, "<f4", device=0)
    for k in range(4):
        out = CupyLike((1 << 33) + k * (1 << 16), shape, "<f4", device=0)
        fake_gpu.clear()
        assert pipe(x, out=out) is out
        (_, ptrs), = fake_gpu
        assert ptrs == [1 << 32, (1 << 33) + k * (1 << 16)]
    assert probed[0] == (1 if devices == 1 else 4)  # one GPU: the guard from call 2 on
    assert (pipe._hot_guard is not None) is (devices == 1)
    fake_gpu.clear()
    with pytest.raises(ArgumentError, match="separate from input 0"):
        pipe(x, out=CupyLike((1 << 32) + 64, shape, "<f4", device=0))
    assert not fake_gpu
    pipe(x, out=CupyLike(1 << 32, shape, "<f4", device=0))  # in place: a pointwise chain
    (_, ptrs), = fake_gpu
    assert ptrs == [1 << 32, 1 << 32]
