"""The rest of FKL's operation set: IsEven, VectorAnd / VectorOr (and VectorReduce's
``and`` / ``or``), against NumPy on fresh random odd-sized inputs into poisoned outputs."""

from __future__ import annotations

import fkl
import numpy as np
import pytest
from helpers import poisoned, random_array

pytestmark = pytest.mark.plugin("compose")


def run(target: str, x: np.ndarray, *ops: fkl.Op, shape: tuple[int, ...],
        dtype: object) -> np.ndarray:
    pipe = fkl.compose(fkl.TensorRead(), *ops, fkl.TensorWrite(), target=target)
    out = poisoned(shape, dtype)
    assert pipe(x, out=out) is out
    return out


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.int32])
def test_is_even(target, rng, dtype):
    x = random_array(rng, (17, 23, 3), dtype)  # signed types include negatives
    got = run(target, x, fkl.IsEven(), shape=x.shape, dtype=np.bool_)
    np.testing.assert_array_equal(got, x % 2 == 0)
    assert got.any() and not got.all()


@pytest.mark.parametrize("channels", [2, 3, 4])
def test_vector_and_or(target, rng, channels):
    x = rng.integers(0, 3, (19, 21, channels)).astype(np.uint8)  # many zeros
    want_and, want_or = (x != 0).all(-1), (x != 0).any(-1)
    assert want_and.any() and not want_and.all()  # the inputs exercise both answers
    np.testing.assert_array_equal(
        run(target, x, fkl.VectorAnd(), shape=x.shape[:2], dtype=np.bool_), want_and)
    np.testing.assert_array_equal(
        run(target, x, fkl.VectorOr(), shape=x.shape[:2], dtype=np.bool_), want_or)


def test_vector_and_of_a_comparison(target, rng):
    """FKL's usual use: Equal per channel (bool), then VectorAnd: the whole pixel equal."""
    x = rng.integers(0, 2, (13, 27, 3)).astype(np.int32)
    got = run(target, x, fkl.Equal(1), fkl.VectorAnd(), shape=(13, 27), dtype=np.bool_)
    np.testing.assert_array_equal(got, (x == 1).all(-1))
    got = run(target, x, fkl.IsEven(), fkl.VectorOr(), shape=(13, 27), dtype=np.bool_)
    np.testing.assert_array_equal(got, (x % 2 == 0).any(-1))


def test_vector_reduce_and_or_float_nan_is_true(target, rng):
    x = random_array(rng, (11, 15, 3), np.float32)
    x[rng.random(x.shape) < 0.3] = 0.0
    x[0, 0] = [np.nan, 1.0, 2.0]  # C++ bool(NaN) is true
    np.testing.assert_array_equal(
        run(target, x, fkl.VectorReduce("and"), shape=(11, 15), dtype=np.bool_),
        (x != 0).all(-1))
    np.testing.assert_array_equal(
        run(target, x, fkl.VectorReduce("or"), shape=(11, 15), dtype=np.bool_),
        (x != 0).any(-1))


def test_errors(target):
    x = np.zeros((3, 3, 3), np.float32)
    with pytest.raises(fkl.ArgumentError, match="IsEven: expected an integer pixel, got "
                                                "float32x3"):
        fkl.compose(fkl.TensorRead(), fkl.IsEven(), fkl.TensorWrite(), target=target)(x)
    with pytest.raises(fkl.ArgumentError, match="VectorReduce op: expected one of"):
        fkl.VectorReduce("xor")


@pytest.mark.plugin("nvrtc")
def test_extra_ops_compile_for_sm90():
    for ops, dtype in [((fkl.IsEven(), fkl.VectorAnd()), np.int16),
                       ((fkl.VectorOr(),), np.float32), ((fkl.Equal(2), fkl.VectorOr()),
                                                         np.uint8)]:
        pipe = fkl.compose(fkl.TensorRead(), *ops, fkl.TensorWrite(), target="gpu")
        art = pipe.artifact(np.zeros((9, 7, 3), dtype), arch="sm_90", compiler="nvrtc")
        assert art.kind == "cubin" and art.data[:4] == b"\x7fELF", ops


# -- FKL's 1-D and 3-D per-thread reads and writes ------------------------------------------
def test_per_thread_1d_read_write(target, rng):
    """FKL's PerThreadRead/Write<_1D>: a vector (N,) is one row of N pixels."""
    x = random_array(rng, (int(rng.integers(50, 99)) * 2 + 1,), np.int16)
    got = run(target, x, fkl.Cast("int32"), fkl.Mul(3), fkl.Sub(7), shape=x.shape,
              dtype=np.int32)
    np.testing.assert_array_equal(got, x.astype(np.int32) * 3 - 7)


def test_per_thread_3d_read_write(target, rng):
    """FKL's PerThreadRead/Write<_3D>: (planes, H, W) with ``batch=True``; thread (x, y, z)
    reads element [z, y, x] and writes it in the same place."""
    x = random_array(rng, (3, 11, 13), np.float32)
    pipe = fkl.compose(fkl.TensorRead(batch=True), fkl.Mul(2.0), fkl.Add(1.0),
                       fkl.TensorWrite(), target=target)
    out = poisoned(x.shape, np.float32)
    assert pipe(x, out=out) is out
    np.testing.assert_allclose(out, x * 2 + 1, rtol=1e-6)
    # The planes stay apart: a Crop after a 3-D read crops every plane.
    got = fkl.compose(fkl.TensorRead(batch=True), fkl.Crop((2, 3, 5, 4)), fkl.TensorWrite(),
                      target=target)(x)
    np.testing.assert_array_equal(got, x[:, 3:7, 2:7])


def variants(ops: list, target: str) -> list:
    """The pipe of ``ops`` on each kernel it may run: the flat kernel, the channel-folded
    flat kernel and the 2-D one (the GPU picks per chain; here every one runs)."""
    pipes = []
    for flat, fold in ((True, False), (True, True), (False, False)):
        pipe = fkl.compose(*ops, target=target)
        pipe.flat, pipe.fold = flat, fold
        pipes.append(pipe)
    return pipes


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_per_thread_1d_vector_pixels(target, rng, channels, dtype):
    """``TensorRead(vector=True)``: an (N, C) array is N pixels of C channels (FKL's
    PerThreadRead<_1D> of a vector type), written back (N, C)."""
    n = int(rng.integers(40, 90)) * 2 + 1
    x = random_array(rng, (n, channels), dtype)
    want = x.astype(np.float32) * np.float32(0.5) + np.float32(1.0)
    ops = [fkl.TensorRead(vector=True), fkl.Cast("float32"), fkl.Mul(0.5), fkl.Add(1.0),
           fkl.TensorWrite()]
    for pipe in variants(ops, target):
        out = poisoned((n, channels), np.float32)
        assert pipe(x, out=out) is out
        np.testing.assert_allclose(out, want, rtol=1e-6)
    # A per-channel value sees the channels: channel c gets c + 1.
    per = fkl.compose(fkl.TensorRead(vector=True), fkl.Add(list(range(1, channels + 1))),
                      fkl.TensorWrite(), target=target)(x)
    want = x.astype(per.dtype) + np.arange(1, channels + 1).astype(per.dtype)
    # One channel drops the channel axis, as for images: (N, 1) in, (N,) out.
    np.testing.assert_array_equal(per, want[:, 0] if channels == 1 else want)


@pytest.mark.parametrize("vector", [False, True])
def test_per_thread_1d_writes(target, rng, vector):
    """A 1-D chain writes 1-D: (N, C') packed, (C', N) planar, C' arrays (N,) split."""
    n = int(rng.integers(30, 60)) * 2 + 1
    x = random_array(rng, (n, 2) if vector else (n,), np.float32)
    cols = [x[:, 0], x[:, 1]] if vector else [x]
    want = np.stack([*cols, np.full(n, 7.5, np.float32)], -1)  # AddLast(7.5)
    c = want.shape[-1]
    read = fkl.TensorRead(vector=vector)
    for write, shape, ref in ((fkl.TensorWrite(), (n, c), want),
                              (fkl.TensorSplit(), (c, n), want.T),
                              (fkl.TensorTSplit(), (c, n), want.T)):
        for pipe in variants([read, fkl.AddLast(7.5), write], target):
            out = poisoned(shape, np.float32)
            assert pipe(x, out=out) is out
            np.testing.assert_array_equal(out, ref)
    outs = tuple(poisoned((n,), np.float32) for _ in range(c))
    got = fkl.compose(read, fkl.AddLast(7.5), fkl.SplitWrite(), target=target)(x, out=outs)
    for k in range(c):
        assert got[k] is outs[k]
        np.testing.assert_array_equal(outs[k], want[:, k])


def test_per_thread_1d_geometry(target, rng):
    """Geometry ops see the vector as one row: a filter with its border along the row, a
    crop; a resize to one row stays 1-D, to more rows gives an image."""
    cv2 = pytest.importorskip("cv2")
    n = int(rng.integers(30, 60)) * 2 + 1
    x = random_array(rng, (n, 3), np.float32)
    blur = fkl.compose(fkl.TensorRead(vector=True), fkl.BoxFilter(5), fkl.TensorWrite(),
                       target=target)(x)
    assert blur.shape == (n, 3)
    want = cv2.blur(x[None], (5, 5), borderType=cv2.BORDER_REFLECT_101)[0]
    np.testing.assert_allclose(blur, want, rtol=1e-5, atol=1e-5)
    crop = fkl.compose(fkl.TensorRead(vector=True), fkl.Crop((3, 0, 11, 1)),
                       fkl.TensorWrite(), target=target)(x)
    np.testing.assert_array_equal(crop, x[3:14])
    one = fkl.Resize(17, 1, interpolation="cv_nearest_exact")
    row = fkl.compose(fkl.TensorRead(vector=True), one, fkl.TensorWrite(),
                      target=target)(x)
    assert row.shape == (17, 3)
    np.testing.assert_array_equal(row, cv2.resize(x[None], (17, 1),
                                                  interpolation=cv2.INTER_NEAREST_EXACT)[0])
    img = fkl.compose(fkl.TensorRead(vector=True), fkl.Resize(17, 5, interpolation="cv_linear"),
                      fkl.TensorWrite(), target=target)(x)
    assert img.shape == (5, 17, 3)
    np.testing.assert_allclose(img, cv2.resize(x[None], (17, 5),
                                               interpolation=cv2.INTER_LINEAR), atol=1e-5)


@pytest.mark.parametrize("channels", [1, 3])
def test_per_thread_3d_writes_and_filters_per_plane(target, rng, channels):
    """3-D: every write puts (z, y, x) where its layout says; a filter reads its own plane
    only (the border applies at each plane's edge, never the next plane's rows)."""
    cv2 = pytest.importorskip("cv2")
    b, h, w = 3, 9, 13
    shape = (b, h, w, channels) if channels > 1 else (b, h, w)
    x = random_array(rng, shape, np.float32)
    read = fkl.TensorRead(batch=True)
    want = np.stack([cv2.blur(p, (3, 3), borderType=cv2.BORDER_REPLICATE) for p in x])
    want = want.reshape(shape)
    box = fkl.BoxFilter(3, border=fkl.BorderMode.REPLICATE)
    planar = want[..., None] if channels == 1 else want  # (B, H, W, C)
    for write, oshape, ref in (
            (fkl.TensorWrite(), shape, want),
            (fkl.TensorSplit(), (b, channels, h, w), np.moveaxis(planar, -1, 1)),
            (fkl.TensorTSplit(), (channels, b, h, w), np.moveaxis(planar, -1, 0))):
        pipe = fkl.compose(read, box, write, target=target)
        out = poisoned(oshape, np.float32)
        assert pipe(x, out=out) is out
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    outs = tuple(poisoned((b, h, w), np.float32) for _ in range(channels))
    fkl.compose(read, box, fkl.SplitWrite(), target=target)(x, out=outs)
    for k in range(channels):
        np.testing.assert_allclose(outs[k], planar[..., k], rtol=1e-5, atol=1e-5)


def test_per_thread_read_errors():
    from thork_core import ArgumentError

    pipe = fkl.compose(fkl.TensorRead(vector=True), fkl.TensorWrite(), target="cpu")
    with pytest.raises(ArgumentError, match=r"vector=True: reads a vector of pixels, \(N,\) "
                                            r"or \(N, C\), got shape \(3, 5, 2\)"):
        pipe(np.zeros((3, 5, 2), np.float32))
    with pytest.raises(ArgumentError, match="1 to 4 channels"):
        pipe(np.zeros((9, 5), np.float32))
    both = fkl.compose(fkl.TensorRead(batch=True, vector=True), fkl.TensorWrite(),
                       target="cpu")
    with pytest.raises(ArgumentError, match="with batch=True"):
        both(np.zeros((9, 3), np.float32))
    with pytest.raises(ArgumentError, match="vector: expected True or False"):
        fkl.TensorRead(vector=1)


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
def test_per_thread_kernels_compile_for_sm90(compiler):
    """The 1-D and 3-D chains build to cubin for the GPU (every variant) without a GPU."""
    from helpers import has_plugin

    if not has_plugin(compiler):
        pytest.skip(f"the {compiler} plugin is not installed")
    cases = [([fkl.TensorRead(vector=True), fkl.Cast("float32"), fkl.Mul(0.5),
               fkl.TensorSplit()], np.zeros((101, 3), np.uint8)),
             ([fkl.TensorRead(batch=True), fkl.GaussianBlur(3, 0.8), fkl.TensorTSplit()],
              np.zeros((3, 9, 13, 3), np.float32)),
             ([fkl.TensorRead(), fkl.AddLast(1.0), fkl.TensorWrite()],
              np.zeros((77,), np.float32))]
    for ops, x in cases:
        pipe = fkl.compose(*ops, target="gpu")
        for variant in (None, "grid"):
            art = pipe.artifact(x, arch="sm_90", compiler=compiler, variant=variant)
            assert art.kind == "cubin" and art.data[:4] == b"\x7fELF", (ops, variant)
