"""Pitched DeviceArrays (``DeviceArray(shape, dtype, pitch=...)``, as cudaMallocPitch):
the layout against a NumPy padded allocation, the protocols' strides, the errors; on the
GPU, uploads and downloads, CuPy/torch views, and fkl reading and writing them in place
(the padding around the rows keeps its poison)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import poisoned
from thork_core import ArgumentError, DeviceArray
from thork_core.runtime import PitchedArray


def padded_reference(shape: tuple[int, ...], dtype: np.dtype, pitch: int,
                     axis: int) -> np.ndarray:
    """The view of a NumPy allocation of rows ``pitch`` bytes long that a pitched array
    of ``shape`` is: rows of the packed axes after ``axis``, the rest padded."""
    isz = np.dtype(dtype).itemsize
    rows = np.zeros((*shape[:axis + 1], pitch // isz), dtype)
    row = math.prod(shape[axis + 1:])
    return rows[..., :row].reshape(shape)


@pytest.mark.parametrize("shape,dtype,pitch,axis", [
    ((37, 45, 3), np.uint8, 160, 0), ((5, 7), np.float32, 36, 0),
    ((3, 9, 20), np.uint16, 48, 1), ((2, 5, 7, 3), np.float32, 100, 1),
    ((4, 3, 5, 2), np.int16, 32, 2), ((6, 11), np.uint8, 11, 0)])
def test_layout_matches_a_padded_numpy_allocation(shape, dtype, pitch, axis):
    ref = padded_reference(shape, dtype, pitch, axis)
    a = DeviceArray.wrap(1 << 20, shape, dtype, pitch=pitch, pitch_axis=axis)
    assert type(a) is PitchedArray and isinstance(a, DeviceArray)
    assert a.strides == ref.strides and a.pitch == pitch and a.pitch_axis == axis
    assert a.alloc_bytes == ref.base.nbytes and a.nbytes == ref.nbytes
    cai = a.__cuda_array_interface__
    assert cai["strides"] == ref.strides and cai["shape"] == shape
    assert cai["data"] == (1 << 20, False)
    neg = DeviceArray.wrap(1 << 20, shape, dtype, pitch=pitch, pitch_axis=axis - len(shape))
    assert neg.strides == ref.strides


def test_dlpack_exports_the_strides():
    """The DLPack tensor carries the strides in elements (read back by core's DLPack
    adapter, which a consumer such as torch reads the same way)."""
    from thork_core._adapter import DLPackAdapter

    a = DeviceArray.wrap(1 << 20, (6, 10, 3), "uint16", pitch=128)
    v = DLPackAdapter().view(a, None)
    assert v.shape == (6, 10, 3) and v.strides == (128, 6, 2) and not v.contiguous
    plain = DeviceArray.wrap(1 << 20, (6, 10, 3), "uint16")
    assert DLPackAdapter().view(plain, None).contiguous
    assert plain.__cuda_array_interface__["strides"] is None


@pytest.mark.parametrize("kwargs,msg", [
    ({"pitch": 48}, "at least the row's 60 bytes"),
    ({"pitch": True, "pitch_axis": -4}, "pitch_axis: expected an axis"),
    ({"pitch": 0}, "pitch"),
    ({"pitch": 2.5}, "expected True or the bytes"),
    ({"pitch": 128, "pitch_axis": 2}, "pitch_axis: expected an axis"),
    ({"pitch": 128, "pitch_axis": True}, "pitch_axis: expected an axis"),
    ({"pitch_axis": 0}, "give pitch="),
])
def test_bad_pitches_are_errors_before_allocating(kwargs, msg):
    with pytest.raises(ArgumentError, match=msg):
        DeviceArray((4, 20, 3), "uint8", **kwargs)
    with pytest.raises(ArgumentError, match="whole number of float32 elements"):
        DeviceArray((4, 20), "float32", pitch=82)
    with pytest.raises(ArgumentError, match="at least 2 axes"):
        DeviceArray((4,), "uint8", pitch=True)
    with pytest.raises(ArgumentError, match="give its pitch in bytes"):
        DeviceArray.wrap(1 << 20, (4, 4), "uint8", pitch=True)
    with pytest.raises(ArgumentError, match="no reshaped view"):
        DeviceArray.wrap(1 << 20, (4, 4), "uint8", pitch=8).reshape(16)


@pytest.mark.gpu
def test_pitch_true_round_trip_and_views(rng):
    """pitch=True picks rows of 512 bytes; upload and download; CuPy and torch see the
    strides (zero copy)."""
    host = rng.integers(0, 256, (9, 50, 3)).astype(np.uint8)
    a = DeviceArray.from_host(host, pitch=True)
    assert a.pitch == 512 and a.strides == (512, 3, 1)
    np.testing.assert_array_equal(a.to_host(), host)
    out = np.empty_like(host)
    assert a.to_host(out) is out
    np.testing.assert_array_equal(out, host)
    f = DeviceArray((3, 7, 33), "float32", pitch=256, pitch_axis=1)
    assert f.strides == (7 * 256, 256, 4)
    cupy = pytest.importorskip("cupy")
    c = cupy.asarray(a)
    assert c.strides == (512, 3, 1) and c.data.ptr == a.ptr
    np.testing.assert_array_equal(cupy.asnumpy(c), host)
    torch = pytest.importorskip("torch")
    t = torch.from_dlpack(a)
    assert t.stride() == (512, 3, 1) and t.data_ptr() == a.ptr
    np.testing.assert_array_equal(t.cpu().numpy(), host)


@pytest.mark.gpu
def test_fkl_reads_and_writes_pitched_device_arrays_in_place(rng):
    """fkl reads a pitched DeviceBuffer and writes into one in place: the rows hold the
    NumPy reference, the padding between them keeps its poison (a pitched view wrapped
    over a poisoned contiguous allocation)."""
    fkl = pytest.importorskip("fkl")
    img = rng.integers(0, 256, (13, 21, 3)).astype(np.uint8)
    src = fkl.DeviceBuffer.from_host(img, pitch=96)
    canvas = DeviceArray.from_host(poisoned((13, 80), np.float32))  # rows of 320 bytes
    dst = DeviceArray.wrap(canvas.ptr + 8, (13, 21, 3), "float32", pitch=320, owner=canvas)
    pipe = fkl.compose(fkl.TensorRead(), fkl.Cast("float32"), fkl.Mul(0.5),
                       fkl.TensorWrite(), target="gpu")
    pipe(src, out=dst)
    got = canvas.to_host()
    np.testing.assert_array_equal(got[:, 2:2 + 63].reshape(13, 21, 3),
                                  img.astype(np.float32) * 0.5)
    assert np.isnan(got[:, :2]).all() and np.isnan(got[:, 65:]).all()
    planar = DeviceArray((3, 13, 21), "float32", pitch=True, pitch_axis=1)
    fkl.compose(fkl.TensorRead(), fkl.Cast("float32"), fkl.TensorSplit(), target="gpu")(
        src, out=planar)
    np.testing.assert_array_equal(planar.to_host(), img.astype(np.float32).transpose(2, 0, 1))
    back = fkl.compose(fkl.TensorPack(), fkl.SaturateCast("uint8"), fkl.TensorWrite(),
                       target="gpu")(planar)
    np.testing.assert_array_equal(back.to_host(), img)


@pytest.mark.gpu
def test_thork_kernels_reject_pitched_arrays():
    import thork as tk

    @tk.jit
    def fill(out: tk.DevicePointer[tk.dt.float32], tid: tk.Uint[tk.ThreadIdx]):
        out[tid] = 1.0

    a = DeviceArray((4, 8), "float32", pitch=64)
    with pytest.raises(ArgumentError, match="C-contiguous"):
        fill[1, 32](a, target="gpu")


@pytest.mark.parametrize("one_gpu", [True, False])
def test_probe_keys_a_pitched_array_by_its_strides(one_gpu, monkeypatch):
    """Core's probe (fkl's hot-path key) reads a pitched array from its fields, strides
    included, with one GPU or several (its __cuda_array_interface__ names no device, so a
    plain CAI producer is not keyed with several); its kind for the native binder stays
    a CAI producer's, never a contiguous DeviceArray's (h-pitch7)."""
    from thork_core import _probe
    from thork_core.launch import probe

    monkeypatch.setattr(_probe, "_ONE_GPU", [one_gpu])
    a = DeviceArray.wrap(1 << 20, (15, 10), "uint16", pitch=64)
    b = DeviceArray.wrap(1 << 21, (15, 10), "uint16", pitch=128)
    plain = DeviceArray.wrap(1 << 22, (15, 10), "uint16")
    pa, pb, pp = probe(a), probe(b), probe(plain)
    assert pa == (1 << 20, ((15, 10), a.dtype, 0, (64, 2)), a.stream, 0, None)
    assert pb[1] == ((15, 10), b.dtype, 0, (128, 2)) and pb[1] != pa[1]
    assert pp[1] == ((15, 10), plain.dtype, 0) and pp[1] != pa[1]
    assert _probe.kind_of(PitchedArray) == _probe.CAI
