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
