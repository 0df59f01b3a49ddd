"""fkl inputs a kernel cannot read correctly get a named error before the launch
(docs/guarantees.md): non-native byte order, an ``out=`` sharing memory with an input
(exact in-place use of a per-pixel chain is allowed and computes correctly), float
rectangles, float values that would become inf. Plus integer ``Div`` by zero and
``MIN / -1`` as docs/fkl.md states, and ``SaturateCast`` to 64-bit integers exact at the
bounds."""

from __future__ import annotations

import fkl
import numpy as np
import pytest
from helpers import poisoned, random_array
from thork_core import ArgumentError

pytestmark = pytest.mark.plugin("compose")


def pipe(target, *ops):
    return fkl.compose(fkl.TensorRead(), *ops, fkl.TensorWrite(), target=target)


def test_big_endian_input_and_output_are_rejected(target, rng):
    x = random_array(rng, (11, 17, 3), np.float32)
    p = pipe(target, fkl.Mul(2.0))
    with pytest.raises(ArgumentError, match=r"input.*'>f4'.*non-native byte order"):
        p(x.astype(">f4"))
    with pytest.raises(ArgumentError, match=r"out.*non-native byte order"):
        p(x, out=np.zeros((11, 17, 3), ">f4"))
    np.testing.assert_array_equal(p(x), x * np.float32(2))  # native order still runs


@pytest.mark.parametrize("crop_out", ["rows of the input", "same start"])
def test_crop_into_its_own_input_is_rejected(target, rng, crop_out):
    src = random_array(rng, (41, 53, 3), np.float32)
    keep = src.copy()
    p = pipe(target, fkl.Crop((0, 2, 53, 9)))
    out = src[5:14] if crop_out == "rows of the input" else src.reshape(-1)[:9 * 53 * 3] \
        .reshape(9, 53, 3)
    assert np.shares_memory(out, src)
    with pytest.raises(ArgumentError, match="separate from input 0"):
        p(src, out=out)
    np.testing.assert_array_equal(src, keep)  # nothing was launched
    fresh = poisoned((9, 53, 3), np.float32)
    p(src, out=fresh)
    np.testing.assert_array_equal(fresh, src[2:11])


def test_warping_into_an_equal_sized_input_is_rejected(target, rng):
    src = random_array(rng, (23, 29), np.float32)
    m = np.array([[1.0, 0.1, 1.5], [0.05, 1.0, -2.0]], np.float32)
    p = fkl.compose(fkl.TensorRead(), fkl.Warping(m, 29, 23), fkl.TensorWrite(),
                    target=target)
    with pytest.raises(ArgumentError, match="separate from input 0"):
        p(src, out=src)


def test_per_pixel_chain_may_write_in_place(target, rng):
    x = random_array(rng, (19, 31, 3), np.float32)
    ref = (x * np.float32(3) + np.float32(1)).astype(np.float32)
    p = pipe(target, fkl.Mul(3.0), fkl.Add(1.0))
    p(x, out=x)
    np.testing.assert_allclose(x, ref, rtol=1e-6, atol=1e-6)  # FMA on the GPU
    # Partly overlapping (shifted by one float): wrong even for a per-pixel chain.
    buf = random_array(rng, 19 * 31 * 3 + 1, np.float32)
    inp, out = buf[1:].reshape(19, 31, 3), buf[:-1].reshape(19, 31, 3)
    with pytest.raises(ArgumentError, match="overlap partially"):
        p(inp, out=out)


@pytest.mark.parametrize("rect", [(1.5, 2, 3, 4), (1, 2, 3.0, 4), (np.float32(1), 2, 3, 4),
                                  (True, 2, 3, 4), (1, 2, 3)])
def test_float_or_malformed_rects_are_rejected(rect):
    with pytest.raises(ArgumentError, match=r"fkl.Crop rects?(\[0\])?: expected \(x, y, w, h\) integers"):
        fkl.Crop(rect)


def test_integer_rects_of_any_int_type_are_accepted():
    assert fkl.Crop((np.int64(1), np.uint8(2), 3, 4)).rect == (1, 2, 3, 4)
    # a batch's rect is its first one
    assert fkl.Crop([(5, 6, 2, 3), (1, 2, 2, 3)]).rect == (5, 6, 2, 3)


@pytest.mark.parametrize("rect", [(0, 0, 0, 4), (0, 0, 4, 0), (0, 0, -1, 4), (2, 2, 1, -3)])
def test_empty_or_negative_rects_are_rejected(rect):
    """A rect of width or height 0 or less is an error that shows it (1 x 1 is fine)."""
    with pytest.raises(ArgumentError, match=r"width and height must be positive, got"):
        fkl.Crop(rect)
    assert fkl.Crop((0, 0, 1, 1)).rect == (0, 0, 1, 1)


def test_float_value_overflowing_float32_is_rejected(target, rng):
    x = random_array(rng, (7, 9), np.float32)
    with pytest.raises(ArgumentError, match="would become inf"):
        pipe(target, fkl.Mul(1e39))(x)
    np.testing.assert_array_equal(pipe(target, fkl.Mul(float("inf")))(np.abs(x) + 1),
                                  np.full((7, 9), np.inf, np.float32))


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint32"])
def test_integer_div_by_zero_and_min_by_minus_one(target, rng, dtype):
    info = np.iinfo(dtype)
    x = np.concatenate([[info.min, info.max, 0, 7], random_array(rng, 37, dtype)]) \
        .astype(dtype).reshape(-1, 1)
    xi = [int(v) for v in x.ravel()]
    res_t = np.result_type(dtype, np.int32) if np.dtype(dtype).itemsize < 4 else \
        np.dtype(dtype)
    for divisor in ([0, -1, 3] if info.min < 0 else [0, 3]):
        got = pipe(target, fkl.Div(divisor))(x).ravel()
        if divisor == 0:
            want = [0] * len(xi)  # docs/fkl.md: a zero divisor gives 0
        elif divisor == -1:
            bits = res_t.itemsize * 8
            want = [((-v + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1)) for v in xi]
        else:
            want = [abs(v) // divisor * (1 if v >= 0 else -1) for v in xi]
        np.testing.assert_array_equal(got.astype(object), np.array(want, dtype=object))


@pytest.mark.parametrize("to", ["int64", "uint64"])
def test_saturate_cast_to_64_bit_is_exact_at_the_bounds(target, rng, to):
    info = np.iinfo(to)
    top = 2.0**63 if to == "int64" else 2.0**64
    below = np.nextafter(top, 0)  # the largest double below the top: must stay exact
    edge = [below, below - 1024 * (1 if to == "int64" else 2), top, 1e30, -1e30, np.nan,
            float(info.min), -0.5, 0.5, 1.5, 2.5, -2.5, np.inf, -np.inf]
    x = np.concatenate([edge, rng.uniform(-2e19, 2e19, 41)]).reshape(-1, 1)
    got = pipe(target, fkl.SaturateCast(to))(x).ravel()

    def model(v: float) -> int:
        if np.isnan(v):
            return 0
        r = round(v) if np.isfinite(v) else (int(info.max) if v > 0 else int(info.min))
        return max(int(info.min), min(int(info.max), int(r)))

    want = np.array([model(v) for v in x.ravel()], dtype=object)
    np.testing.assert_array_equal(got.astype(object), want)
    assert int(got[0]) == int(below)  # 2**63 - 1024 (int64) is not clamped lower
