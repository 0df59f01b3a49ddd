"""Core's array probe (``thork_core.launch.probe`` / ``cai_pointer``): the hot-path reading
of an array that kernel launches and fkl pipes share. Every accepted array must read as
core's full adapter reads it (address, shape, producer stream); every array the probe
declines must be one the adapters have to look at (strided, masked, a producer stream,
several GPUs, a read-only output...)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from thork_core import DeviceArray, dt
from thork_core import _probe as probe_mod
from thork_core.launch import cai_pointer, probe
from thork_core.plugin import find_view


class Cai:
    """A device array as CuPy or torch presents it: only ``__cuda_array_interface__``."""

    def __init__(self, ptr: int, typestr: str = "<f4", shape: Any = (5, 7), **extra: Any):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                         "data": (ptr, extra.pop("readonly", False)),
                                         "version": 3, **extra}


class Refuses:
    """An array whose interface getter raises (torch does for a CPU tensor)."""

    @property
    def __cuda_array_interface__(self) -> Any:
        raise AttributeError("not on the GPU")


@pytest.fixture
def one_gpu(monkeypatch):
    """As on a machine with exactly one GPU (the CAI path needs no pointer query)."""
    monkeypatch.setattr(probe_mod, "_ONE_GPU", [True])


def _adapted(x: Any) -> tuple[int, tuple[int, ...], int]:
    v = find_view(x, None)
    assert v is not None
    return v.ptr, tuple(v.shape), v.stream or 0


def test_device_arrays_read_like_the_adapter():
    a = DeviceArray.wrap(0x1234500, (3, 4), dt.float32, device=0, stream=77)
    ptr, key, stream, device, follower = probe(a)
    assert (ptr, stream, device, follower) == (0x1234500, 77, 0, None)
    assert key == ((3, 4), dt.float32, 0)


def test_numpy_arrays_read_like_the_adapter(rng):
    x = rng.standard_normal((9, 13)).astype(np.float32)
    ptr, key, stream, device, follower = probe(x)
    assert (ptr, (x.shape, 0)) == (_adapted(x)[0], (_adapted(x)[1], _adapted(x)[2]))
    assert key == (x.shape, x.dtype, -1) and (stream, device, follower) == (0, -1, None)
    # A strided view keys by its strides (a plan made for it holds them).
    v = x[:, ::2]
    ptr, key, _, _, _ = probe(v)
    assert ptr == _adapted(v)[0] and key == (v.shape, v.dtype, v.strides)
    assert probe(x.T)[1] == (x.T.shape, x.dtype, x.T.strides) != probe(x)[1]


CAI_TAKEN = [  # (name, array, producer stream the probe reports)
    ("no stream", Cai(0x1000), 0),
    ("stream 0", Cai(0x1000, stream=0), 0),
    ("legacy stream", Cai(0x1000, stream=1), 0),
    ("per-thread stream", Cai(0x1000, stream=2), 0),
    ("a producer stream", Cai(0x1000, stream=0x5000), 0x5000),
    ("strides", Cai(0x1000, strides=(56, 4)), 0),
]


@pytest.mark.parametrize("case", CAI_TAKEN, ids=[c[0] for c in CAI_TAKEN])
def test_cai_arrays_read_like_the_adapter(one_gpu, case):
    _, arr, stream = case
    ptr, key, got_stream, device, follower = probe(arr)
    aptr, ashape, astream = _adapted(arr)
    assert (ptr, key[1], got_stream) == (aptr, ashape, astream) == (0x1000, (5, 7), stream)
    strides = arr.__cuda_array_interface__.get("strides")
    assert key == (Cai, (5, 7), "<f4", 0, *([strides] if strides else [])) and device == 0
    assert follower is None


CAI_DECLINED = [
    ("a mask", Cai(0x1000, mask=object())),
    ("no interface", object()),
    ("a refusing getter", Refuses()),
]


@pytest.mark.parametrize("case", CAI_DECLINED, ids=[c[0] for c in CAI_DECLINED])
def test_cai_arrays_the_probe_declines(one_gpu, case):
    assert probe(case[1]) is None


def test_several_gpus_decline_cai(monkeypatch):
    """With more than one GPU the owning device must be asked: the adapter's job."""
    monkeypatch.setattr(probe_mod, "_ONE_GPU", [False])
    assert probe(Cai(0x1000)) is None
    assert cai_pointer(Cai(0x1000), "<f4") is None
    assert cai_pointer(Cai(0x1000), "<f4", device=0) is None


class CaiOnDevice(Cai):
    """A producer that also says its device through DLPack (as CuPy does)."""

    def __init__(self, ptr: int, device: int, dl_type: int = 2, **extra: Any) -> None:
        super().__init__(ptr, **extra)
        self._dev = (dl_type, device)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._dev


def test_several_gpus_take_cai_that_names_its_device(monkeypatch):
    """With several GPUs an array that names its device is taken for that device only
    (kernel launches and pipe outputs ask for their own)."""
    monkeypatch.setattr(probe_mod, "_ONE_GPU", [False])
    a = CaiOnDevice(0x3000, device=1)
    assert cai_pointer(a, "<f4", device=1) == 0x3000
    assert cai_pointer(a, "<f4", device=0) is None
    assert cai_pointer(a, "<f4") is None  # no device asked for: the adapters decide
    assert cai_pointer(CaiOnDevice(0x3000, 1, dl_type=1), "<f4", device=1) is None  # host
    assert cai_pointer(CaiOnDevice(0x3000, 1, readonly=True), "<f4", device=1,
                       writable=True) is None
    got = probe(a)
    assert got is not None and got[3] == 1 and got[1] == (CaiOnDevice, (5, 7), "<f4", 1)


POINTER_CASES = [  # (name, array, kwargs, address or None)
    ("matching", Cai(0x2000), {}, 0x2000),
    ("ndim matches", Cai(0x2000), {"ndim": 2}, 0x2000),
    ("ndim differs", Cai(0x2000), {"ndim": 1}, None),
    ("shape matches", Cai(0x2000), {"shape": (5, 7)}, 0x2000),
    ("shape differs", Cai(0x2000), {"shape": (7, 5)}, None),
    ("shape as a list", Cai(0x2000, shape=[5, 7]), {"shape": (5, 7)}, 0x2000),
    ("typestr differs", Cai(0x2000, "<f8"), {}, None),
    ("read-only, read", Cai(0x2000, readonly=True), {}, 0x2000),
    ("read-only, written", Cai(0x2000, readonly=True), {"writable": True}, None),
    ("strides", Cai(0x2000, strides=(28, 4)), {}, None),
    ("empty strides", Cai(0x2000, strides=()), {}, 0x2000),
    ("a mask", Cai(0x2000, mask=object()), {}, None),
    ("legacy stream", Cai(0x2000, stream=1), {}, 0x2000),
    ("a producer stream", Cai(0x2000, stream=0x5000), {}, None),
    ("no interface", object(), {}, None),
    ("a refusing getter", Refuses(), {}, None),
]


@pytest.mark.parametrize("case", POINTER_CASES, ids=[c[0] for c in POINTER_CASES])
def test_cai_pointer_decisions(one_gpu, case):
    """What kernel launches and fkl's out= check take without the adapters."""
    _, arr, kwargs, expected = case
    assert cai_pointer(arr, "<f4", **kwargs) == expected


def test_cai_pointer_without_a_typestr_takes_nothing(one_gpu):
    assert cai_pointer(Cai(0x2000), None) is None


def test_fkl_reads_arrays_with_cores_probe():
    """One mechanism: fkl's hot-path reading is core's probe."""
    fkl_arrays = pytest.importorskip("fkl._arrays")
    assert fkl_arrays.fast_info is probe
