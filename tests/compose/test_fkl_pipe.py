"""fkl pipes as a whole: kernel identity and compile counting, DNN preprocessing, bad-input
errors, DeviceBuffer (DLPack/CAI export), the seed example, CPU/GPU agreement and the
compilation of every fkl kernel shape to cubin for sm_75 and sm_90 with NVRTC."""

from __future__ import annotations

import ctypes

import fkl
import numpy as np
import pytest
from helpers import TARGETS, poisoned, random_array
from thork_core import ArgumentError

pytestmark = pytest.mark.plugin("compose")


def close(a, b, rtol=1e-5, atol=1e-4):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64),
                               rtol=rtol, atol=atol)


# -- kernel identity ----------------------------------------------------------------------
def test_values_never_recompile(target, rng):
    x = random_array(rng, (15, 17, 3), np.float32)

    def pipe(f, rect, size, m, bg):
        return fkl.compose(fkl.TensorRead(), fkl.Mul(f), fkl.Crop(rect),
                           fkl.Resize(*size, aspect_ratio=fkl.PRESERVE_AR, background=bg),
                           fkl.Warping(m, 9, 8), fkl.Add([f, 1.0, 2.0]), fkl.TensorWrite(),
                           target=target)

    m = np.array([[1, 0, 0.5], [0, 1, 0.25]], np.float32)
    pipe(2.0, (1, 1, 10, 12), (11, 10), m, 0)(x)
    before = fkl.stats()["builds"]
    for f, rect, size, bg in ((3.0, (0, 2, 14, 9), (13, 7), 5), (-1.0, (4, 3, 5, 5), (9, 9), 1)):
        pipe(f, rect, size, m * 1.1, bg)(x)
    assert fkl.stats()["builds"] == before
    # A different type (dtype, channels, op list) builds one more.
    pipe(2.0, (1, 1, 10, 12), (11, 10), m, 0)(x.astype(np.float64))
    assert fkl.stats()["builds"] == before + 1


def test_same_pipe_different_sizes_reuses_kernel(target, rng):
    pipe = fkl.compose(fkl.TensorRead(), fkl.Resize(7, 5), fkl.TensorWrite(), target=target)
    pipe(random_array(rng, (9, 11), np.float32))
    before = fkl.stats()["builds"]
    for shape in ((13, 3), (31, 29)):
        x = random_array(rng, shape, np.float32)
        assert pipe(x).shape == (5, 7)
    assert fkl.stats()["builds"] == before


# -- DNN preprocessing --------------------------------------------------------------------
def test_dnn_preprocessing(target, rng):
    from helpers.fkl_refs import ref_resize

    img = rng.integers(0, 256, (241, 319, 3)).astype(np.uint8)
    rect = (13, 7, 201, 187)
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    pipe = fkl.compose(fkl.TensorRead(), fkl.Crop(rect), fkl.Resize(224, 224),
                       fkl.ColorConversion("BGR2RGB"), fkl.Mul(1 / 255.0), fkl.Sub(mean),
                       fkl.Div(std), fkl.TensorSplit(), target=target)
    out = poisoned((3, 224, 224), np.float32)
    pipe(img, out=out)
    x, y, w, h = rect
    r = ref_resize(img[y:y + h, x:x + w], 224, 224)[..., ::-1]
    ref = ((r * np.float32(1 / 255.0) - np.float32(mean)) / np.float32(std)).transpose(2, 0, 1)
    close(out, ref, rtol=1e-4, atol=1e-4)


# -- errors -------------------------------------------------------------------------------
def test_crop_outside_source_is_an_error(target, rng):
    x = random_array(rng, (9, 11), np.float32)
    pipe = fkl.compose(fkl.TensorRead(), fkl.Crop((5, 2, 7, 3)), fkl.TensorWrite(),
                       target=target)
    with pytest.raises(ArgumentError, match=r"Crop rect .* outside the 11x9 source"):
        pipe(x)


def test_wrong_channel_count_for_color_code(target, rng):
    x = random_array(rng, (9, 11, 4), np.uint8)
    pipe = fkl.compose(fkl.TensorRead(), fkl.ColorConversion("BGR2RGB"), fkl.TensorWrite(),
                       target=target)
    with pytest.raises(ArgumentError, match=r"BGR2RGB\): needs a pixel with 3 channel.*got 4"):
        pipe(x)


def test_unsupported_dtype_for_op(target, rng):
    x = random_array(rng, (9, 11), np.float32)
    for op in (fkl.And(3), fkl.ShiftLeft(1), fkl.Not()):
        pipe = fkl.compose(fkl.TensorRead(), op, fkl.TensorWrite(), target=target)
        with pytest.raises(ArgumentError, match="unsupported dtype float32"):
            pipe(x)
    with pytest.raises(ArgumentError, match="SaturateFloat: unsupported dtype uint8"):
        fkl.compose(fkl.TensorRead(), fkl.SaturateFloat(), fkl.TensorWrite(),
                    target=target)(random_array(rng, (3, 3), np.uint8))


def test_non_contiguous_input(target, rng):
    """TensorRead and TensorPack read strided views in place (issue 18); a layout no read
    can index (negative strides) and outputs without a strided form (a MidWrite's) give
    the clear error."""
    x = random_array(rng, (9, 22, 3), np.float32)[:, ::2]
    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.TensorWrite(), target=target)
    np.testing.assert_allclose(pipe(x), x * np.float32(2.0), rtol=1e-6)
    planar = fkl.compose(fkl.TensorPack(), fkl.Mul(2.0), fkl.TensorWrite(), target=target)
    p = random_array(rng, (3, 9, 22), np.float32)[:, :, ::2]
    np.testing.assert_allclose(planar(p), p.transpose(1, 2, 0) * np.float32(2.0), rtol=1e-6)
    with pytest.raises(ArgumentError, match="TensorPack: a strided planar array"):
        planar(p[:, ::-1])
    mid = fkl.compose(fkl.TensorRead(), fkl.MidWrite(), fkl.SplitWrite(), target=target)
    outs = [np.zeros((9, 22, 3), np.float32)[:, ::2],
            *[np.zeros((9, 11), np.float32) for _ in range(3)]]
    with pytest.raises(ArgumentError, match="out\\[0\\]: needs a C-contiguous array"):
        mid(x, out=outs)


def test_other_errors(target, rng):
    with pytest.raises(ArgumentError, match="starts with a read op"):
        fkl.compose(fkl.Mul(2.0), fkl.TensorWrite())
    with pytest.raises(ArgumentError, match="ends with a write op"):
        fkl.compose(fkl.TensorRead(), fkl.Mul(2.0))
    with pytest.raises(ArgumentError, match="Resize size"):
        fkl.Resize(0, 3)
    with pytest.raises(ArgumentError, match="expected one of"):
        fkl.ColorConversion("BGR2YUV")
    x = random_array(rng, (5, 6, 3), np.float32)
    with pytest.raises(ArgumentError, match="got 2 values but the pixel has 3"):
        fkl.compose(fkl.TensorRead(), fkl.Mul([1.0, 2.0]), fkl.TensorWrite(),
                    target=target)(x)
    with pytest.raises(ArgumentError, match="reads 1 array"):
        fkl.compose(fkl.TensorRead(), fkl.TensorWrite(), target=target)(x, x)
    with pytest.raises(ArgumentError, match="out: expected shape"):
        fkl.compose(fkl.TensorRead(), fkl.TensorWrite(), target=target)(
            x, out=np.empty((5, 6), np.float32))
    with pytest.raises(ArgumentError, match="MidWrite sits before"):
        fkl.compose(fkl.TensorRead(), fkl.MidWrite(), fkl.Resize(3, 3), fkl.TensorWrite(),
                    target=target)(x)
    with pytest.raises(ArgumentError, match="StaticLoop.*must keep the pixel type"):
        fkl.compose(fkl.TensorRead(), fkl.StaticLoop(fkl.Add(1), 3), fkl.TensorWrite(),
                    target=target)(random_array(rng, (3, 3), np.uint8))
    with pytest.raises(ArgumentError, match="pair of pixels"):
        fkl.compose(fkl.DualRead(), fkl.Mul(2.0), fkl.TensorWrite(), target=target)(x, x)


# -- every kernel compiles for the GPU without one ------------------------------------------
@pytest.mark.plugin("nvrtc")
@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
def test_every_fkl_kernel_compiles_to_cubin(arch):
    """One pipe per op family (and the full DNN chain) → NVRTC cubin for the arch."""
    m2 = np.eye(2, 3, dtype=np.float32)
    chains = [
        ((fkl.TensorRead(), fkl.Mul(2.0), fkl.Add(1.0), fkl.Sub(1), fkl.Div(3.0), fkl.Max(0.0),
          fkl.Min(9.0), fkl.AbsDiff(1.0), fkl.Abs(), fkl.Sqr(), fkl.Sqrt(), fkl.Ln(),
          fkl.Exp(), fkl.TensorWrite()), "float32", 3),
        ((fkl.TensorRead(), fkl.And(3), fkl.Or(1), fkl.Xor(7), fkl.Not(), fkl.ShiftLeft(1),
          fkl.ShiftRight(2), fkl.Div(3), fkl.SaturateCast("uint8"), fkl.TensorWrite()),
         "int32", 2),
        ((fkl.TensorRead(), fkl.Cast("float32"), fkl.Saturate(0.0, 1.0), fkl.SaturateFloat(),
          fkl.SaturateCast("int8"), fkl.Cast("float16"), fkl.SplitWrite()), "uint8", 4),
        ((fkl.TensorRead(), fkl.Discard(3), fkl.VectorReorder([2, 1, 0]),
          fkl.VectorReorderRT([0, 2, 1]), fkl.MxVFloat3(np.eye(3)), fkl.AddLast(1.0),
          fkl.VectorReduce("sum"), fkl.MidWrite(), fkl.StaticLoop(fkl.Mul(1.5), 100),
          fkl.TensorWrite()), "float32", 4),
        ((fkl.TensorRead(), fkl.BorderReader("REFLECT_101"), fkl.Crop((-2, -2, 9, 9)),
          fkl.Resize(5, 5, aspect_ratio=fkl.PRESERVE_AR), fkl.Warping(m2, 4, 4),
          fkl.TensorTSplit()), "uint8", 3),
        ((fkl.TensorRead(), fkl.Deinterlace("LINEAR_ODD"), fkl.Warping(np.eye(3), 5, 5),
          fkl.ColorConversion("BGR2GRAY"), fkl.TensorWrite()), "uint16", 3),
        ((fkl.TensorPack(), fkl.ColorConversion("RGBA2BGR"), fkl.TensorWrite()), "float32", 4),
        ((fkl.DualRead(), fkl.AbsDiff(), fkl.Equal(0), fkl.TensorWrite()), "uint8", 1),
        ((fkl.ReadSet(1.0, (4, 4, 2)), fkl.Normalize(0.5, 2.0), fkl.TensorWrite()),
         "float32", 2),
        ((fkl.TensorRead(), fkl.Crop((1, 1, 50, 50)), fkl.Resize(224, 224),
          fkl.ColorConversion("BGR2RGB"), fkl.Mul(1 / 255), fkl.Sub([0.4, 0.4, 0.4]),
          fkl.Div([0.2, 0.2, 0.2]), fkl.TensorSplit()), "uint8", 3),
    ]
    for ops, dtype, channels in chains:
        pipe = fkl.compose(*ops)
        art = pipe.artifact(dtype=dtype, channels=channels, arch=arch)
        assert art.kind == "cubin" and art.data[:4] == b"\x7fELF", [o.name for o in ops]


# -- DeviceBuffer -------------------------------------------------------------------------
def test_device_buffer_is_core_device_array():
    from thork_core._device_array import DeviceArray

    assert fkl.DeviceBuffer is DeviceArray


def test_device_array_protocols_without_gpu():
    """Export a wrapped buffer as DLPack and CAI and read it back with core's adapters."""
    from thork_core._adapter import CudaArrayInterfaceAdapter, DLPackAdapter
    from thork_core._device_array import DeviceArray, live_exports

    backing = np.zeros(7 * 5 * 3, np.float32)
    arr = DeviceArray.wrap(backing.ctypes.data, (7, 5, 3), "float32", device=0, owner=backing)
    cai = arr.__cuda_array_interface__
    assert cai["version"] == 3 and cai["typestr"] == "<f4" and cai["shape"] == (7, 5, 3)
    assert cai["data"] == (backing.ctypes.data, False)
    assert arr.__dlpack_device__() == (2, 0)
    n0 = live_exports()
    for max_version in (None, (1, 0)):
        cap = arr.__dlpack__(max_version=max_version)
        assert live_exports() == n0 + 1
        name = ctypes.pythonapi.PyCapsule_GetName
        name.restype, name.argtypes = ctypes.c_char_p, [ctypes.py_object]
        assert name(cap) == (b"dltensor" if max_version is None else b"dltensor_versioned")
        del cap  # unconsumed: the capsule's destructor calls the deleter
        assert live_exports() == n0

    class Holder:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            kw.pop("stream", None)
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    view = DLPackAdapter().view(Holder(arr), None)
    assert view.ptr == backing.ctypes.data and view.shape == (7, 5, 3)
    assert view.device == "cuda" and view.dtype.name == "float32" and view.contiguous
    u8 = DeviceArray.wrap(123456, (4,), "uint8")
    assert CudaArrayInterfaceAdapter().view(u8, None).dtype.name == "uint8"
    assert arr.reshape(35, 3).shape == (35, 3)
    with pytest.raises(ArgumentError, match="cannot reshape"):
        arr.reshape(4, 4)


@pytest.mark.gpu
def test_device_buffer_round_trip_and_pipe(rng):
    x = random_array(rng, (37, 41, 3), np.float32)
    buf = fkl.DeviceBuffer.from_host(x)
    np.testing.assert_array_equal(buf.to_host(), x)
    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.Add(1.0), fkl.Mul(3.0),
                       fkl.TensorWrite(), target="gpu")
    out = pipe(buf)
    assert isinstance(out, fkl.DeviceBuffer) and out.shape == x.shape
    close(out.to_host(), (x * 2 + 1) * 3)
    given = fkl.DeviceBuffer(x.shape, "float32")
    assert pipe(buf, out=given) is given
    close(given.to_host(), (x * 2 + 1) * 3)


@pytest.mark.gpu
def test_seed_example_with_torch_or_device_buffer():
    """Seed 004's example, with torch when installed (zero-copy, its stream)."""
    pipe = fkl.compose(
        fkl.TensorRead(),
        fkl.Mul(2.0),  # fused
        fkl.Add(1.0),  # fused -> ONE kernel, one DRAM read + one write
        fkl.Mul(3.0),  # fused
        fkl.TensorWrite(),
    )
    try:
        import torch
    except ImportError:
        x = fkl.DeviceBuffer.from_host(np.arange(16, dtype=np.float32))
        out = pipe(x)
        close(out.to_host(), (np.arange(16) * 2 + 1) * 3)
        return
    x = torch.arange(16, device="cuda", dtype=torch.float32)
    out = pipe(x, stream=torch.cuda.current_stream())  # zero-copy, async
    t = torch.from_dlpack(out)
    close(t.cpu().numpy(), (np.arange(16) * 2 + 1) * 3)


@pytest.mark.gpu
def test_cpu_and_gpu_agree(rng):
    if "cpu" not in TARGETS:
        pytest.skip("CPU target not installed")
    img = rng.integers(0, 256, (97, 131, 3)).astype(np.uint8)
    ops = (fkl.TensorRead(), fkl.BorderReader("REFLECT"), fkl.Crop((-5, -3, 120, 90)),
           fkl.Resize(64, 48, aspect_ratio=fkl.PRESERVE_AR, background=3),
           fkl.ColorConversion("BGR2RGB"), fkl.Mul(1 / 255), fkl.Normalize(0.5, 0.25),
           fkl.Warping(np.array([[0.9, 0.1, 1.5], [0.0, 1.1, -0.5]]), 60, 40),
           fkl.TensorSplit())
    cpu = fkl.compose(*ops, target="cpu")(img)
    gpu = fkl.compose(*ops, target="gpu")(img)
    # The GPU contracts a*b+c into FMA (the CPU target does not): through the warp, the
    # resize weights and the normalization that moves values of magnitude ~2 by a few
    # 1e-5 (1.1e-5 seen on the H200); a wrong pixel would be off by far more.
    close(gpu, cpu, rtol=1e-5, atol=1e-4)


def test_vector_input_keeps_its_shape(target, rng):
    """Seed 004 passes a 1-D tensor: it is read as one row and written back as (N,)."""
    x = rng.standard_normal(1001).astype(np.float32)
    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.Add(1.0), fkl.Mul(3.0),
                       fkl.TensorWrite(), target=target)
    out = pipe(x)
    assert out.shape == (1001,)
    np.testing.assert_allclose(out, (x * np.float32(2) + np.float32(1)) * np.float32(3),
                               rtol=1e-6, atol=1e-6)


# -- the pipe's call entry --------------------------------------------------------------------
def test_a_pipe_takes_core_guarded_call_where_available(rng, monkeypatch):
    """GPU (and auto) pipes are GuardedCall instances when core's native module exists,
    CPU pipes never; with THORK_NATIVE=0 all are plain Pipes. Either way they compute the
    same thing (here on the CPU, through the general path)."""
    from fkl import _pipe
    from thork_core import guarded_call_base
    from thork_core._native import _reset

    ops = (fkl.TensorRead(), fkl.Mul(3.0), fkl.Sub(0.5), fkl.TensorWrite())
    assert type(fkl.compose(*ops, target="cpu")) is fkl.Pipe
    base = guarded_call_base()
    gpu = fkl.compose(*ops, target="gpu")
    assert isinstance(gpu, fkl.Pipe)
    assert isinstance(gpu, base) if base is not None else type(gpu) is fkl.Pipe
    x = random_array(rng, (19, 23, 3), np.float32)
    ref = x * np.float32(3.0) - np.float32(0.5)
    auto = fkl.compose(*ops)
    close(auto(x), ref, rtol=1e-6, atol=1e-6)
    out = poisoned((19, 23, 3), np.float32)
    assert auto(x, out=out) is out
    close(out, ref, rtol=1e-6, atol=1e-6)
    monkeypatch.setenv("THORK_NATIVE", "0")
    _reset()
    monkeypatch.setattr(_pipe, "_GUARDED", [])
    try:
        assert type(fkl.compose(*ops, target="gpu")) is fkl.Pipe
        plain = fkl.compose(*ops)
        assert type(plain) is fkl.Pipe
        close(plain(x), ref, rtol=1e-6, atol=1e-6)
    finally:
        monkeypatch.delenv("THORK_NATIVE")
        _reset()


def test_a_pipe_pickles_and_copies_as_its_recipe(rng):
    """Pickle and copy keep the ops and settings (not kernels or launch state); the copy
    computes the same thing, GPU (GuardedCall) pipes included."""
    import copy
    import pickle

    from thork_core._cuda import gpu_status

    ops = (fkl.TensorRead(), fkl.Mul(3.0), fkl.Crop((1, 2, 9, 7)), fkl.Add([1.0, 2.0, 3.0]),
           fkl.TensorWrite())
    x = random_array(rng, (11, 13, 3), np.float32)
    ref = x[2:9, 1:10] * np.float32(3.0) + np.array([1, 2, 3], np.float32)
    for target in ("cpu", None, "gpu"):
        pipe = fkl.compose(*ops, target=target)
        pipe.vectors = 2
        for clone in (pickle.loads(pickle.dumps(pipe)), copy.copy(pipe), copy.deepcopy(pipe)):
            assert type(clone) is type(pipe) and clone is not pipe
            assert repr(clone) == repr(pipe) and clone.target == target
            assert clone.vectors == 2 and clone._hot_guard is None
        if target != "gpu" or gpu_status()[0]:
            close(pipe(x), ref, rtol=1e-6, atol=1e-6)  # built and hot state now exists
            clone = pickle.loads(pickle.dumps(pipe))
            close(clone(x), ref, rtol=1e-6, atol=1e-6)
