"""fkl tests written to kill mutants the rest of the suite let survive (issue 17):
``out=`` dtype unchecked on the CPU path, letterbox offsets rounding up and sizes rounding
half to even (a reference built with ``fkl.letterbox`` cannot see those), uint8 gray
truncating (a ±1 tolerance cannot see that). Expected values are worked out by hand
(below, next to each case) or come from OpenCV."""

from __future__ import annotations

import fkl
import numpy as np
import pytest
from helpers import poisoned, random_array
from thork_core import ArgumentError

pytestmark = pytest.mark.plugin("compose")


def pipe(target, *ops):
    return fkl.compose(fkl.TensorRead(), *ops, fkl.TensorWrite(), target=target)


@pytest.mark.parametrize("wrong", [np.int32, np.float64, np.uint8])
def test_out_dtype_is_checked_on_every_path(target, rng, wrong):
    x = random_array(rng, (7, 13, 3), np.float32)
    p = pipe(target, fkl.Mul(2.0))
    bad = np.zeros((7, 13, 3), wrong)
    with pytest.raises(ArgumentError, match=r"out.*dtype float32.*" + np.dtype(wrong).name):
        p(x, out=bad)
    assert not bad.any()  # nothing ran
    out = poisoned((7, 13, 3), np.float32)
    p(x, out=out)
    np.testing.assert_array_equal(out, x * np.float32(2))


# (src w, h), (dst w, h), mode -> (tw, th, x1, y1), worked out by hand from FKL's rule
# (height first: th = dh, tw = round_half_away(float32(dh) / float32(sh) * sw); when tw > dw,
# width first; offsets (dw - tw) // 2, (dh - th) // 2, rounding down):
LETTERBOX_PINS = [
    # 29/31*17 = 15.90 -> 16; x1 = (45 - 16) // 2 = 14 (29 is odd: rounding up gives 15)
    ((17, 31), (45, 29), fkl.PRESERVE_AR, (16, 29, 14, 0)),
    ((17, 31), (45, 29), fkl.PRESERVE_AR_LEFT, (16, 29, 0, 0)),
    ((17, 31), (45, 29), fkl.PRESERVE_AR_RN_EVEN, (16, 29, 14, 0)),
    # 5/2*4 = 10 > 5: width first, th = 5/4*2 = 2.5 exactly -> 3 (half away; half even: 2)
    ((4, 2), (5, 5), fkl.PRESERVE_AR, (5, 3, 0, 1)),
    ((4, 2), (5, 5), fkl.PRESERVE_AR_RN_EVEN, (5, 2, 0, 1)),  # 3 evened down to 2
    # 5/4*2 = 2.5 -> 3; x1 = (5 - 3) // 2 = 1
    ((2, 4), (5, 5), fkl.PRESERVE_AR, (3, 5, 1, 0)),
    # 7/3*10 = 23.3 > 8: width first, th = 0.8f*3 = 2.4 -> 2; y1 = (7 - 2) // 2 = 2 (not 3)
    ((10, 3), (8, 7), fkl.PRESERVE_AR, (8, 2, 0, 2)),
    # 8/10*3 = 2.4 -> 2; x1 = (7 - 2) // 2 = 2
    ((3, 10), (7, 8), fkl.PRESERVE_AR, (2, 8, 2, 0)),
    ((3, 10), (7, 8), fkl.PRESERVE_AR_LEFT, (2, 8, 0, 0)),
    ((3, 10), (7, 8), fkl.IGNORE_AR, (7, 8, 0, 0)),
    # 3/1*200 = 600 > 3: width first, th = 3/200*1 = 0.015 -> 0, at least 1 row;
    # y1 = (3 - 1) // 2 = 1
    ((200, 1), (3, 3), fkl.PRESERVE_AR, (3, 1, 0, 1)),
    ((1, 200), (3, 3), fkl.PRESERVE_AR, (1, 3, 1, 0)),
]


@pytest.mark.parametrize(("src", "dst", "mode", "placed"), LETTERBOX_PINS)
def test_letterbox_is_pinned_by_hand(src, dst, mode, placed):
    assert fkl.letterbox(*src, *dst, mode) == placed


@pytest.mark.parametrize(("src", "dst", "mode", "placed"), LETTERBOX_PINS)
def test_letterboxed_pixels_land_where_the_hand_pins_say(target, rng, src, dst, mode, placed):
    (sw, sh), (dw, dh), (tw, th, x1, y1) = src, dst, placed
    x = rng.uniform(1.0, 2.0, (sh, sw, 2)).astype(np.float32)  # never the background
    out = pipe(target, fkl.Resize(dw, dh, aspect_ratio=mode, background=[-1.0, -3.0]))(x)
    assert out.shape == (dh, dw, 2)
    inside = np.zeros((dh, dw), bool)
    inside[y1:y1 + th, x1:x1 + tw] = True
    np.testing.assert_array_equal(out[..., 0] != -1.0, inside)
    np.testing.assert_array_equal(out[~inside], np.broadcast_to([-1.0, -3.0], out[~inside].shape))
    assert ((out[inside] >= 1.0) & (out[inside] <= 2.0)).all()


# -- uint8 gray: exact ---------------------------------------------------------------------
def _gray_hand(rgb: np.ndarray) -> np.ndarray:
    """fkl's documented formula: float32 ``(0.299 R + 0.587 G) + 0.114 B``, each step
    rounded to float32, then round half to even and saturate."""
    f = rgb.astype(np.float32)
    g = (f[..., 0] * np.float32(0.299) + f[..., 1] * np.float32(0.587)) \
        + f[..., 2] * np.float32(0.114)
    return np.clip(np.rint(g), 0, 255).astype(np.uint8)


def test_uint8_gray_pinned_values(target):
    # Hand values: R only 255*0.299 = 76.245 -> 76; G only 149.685 -> 150 (truncation: 149);
    # B only 29.07 -> 29; equal channels v*(0.299+0.587+0.114) = v (within float32) -> v.
    rgb = np.array([[[255, 0, 0], [0, 255, 0], [0, 0, 255], [0, 0, 0], [255, 255, 255],
                     [1, 1, 1], [2, 1, 0], [0, 1, 2]]], np.uint8)
    ramp = np.repeat(np.arange(256, dtype=np.uint8)[None, :, None], 3, axis=2)
    got = pipe(target, fkl.ColorConversion("RGB2GRAY"))(rgb)
    # (2,1,0): 0.598 + 0.587 = 1.185 -> 1; (0,1,2): 0.587 + 0.228 = 0.815 -> 1
    assert got.reshape(-1).tolist() == [76, 150, 29, 0, 255, 1, 1, 1]
    gray = pipe(target, fkl.ColorConversion("BGR2GRAY"))(ramp)
    assert gray.reshape(-1).tolist() == list(range(256))


@pytest.mark.parametrize("code", ["RGB2GRAY", "BGR2GRAY", "RGBA2GRAY", "BGRA2GRAY"])
def test_uint8_gray_exact_against_the_formula_and_opencv(target, rng, code):
    cv2 = pytest.importorskip("cv2")
    ch = 4 if "A2" in code else 3
    x = rng.integers(0, 256, (37, 53, ch)).astype(np.uint8)
    got = pipe(target, fkl.ColorConversion(code))(x)
    rgb = x[..., [2, 1, 0]] if code.startswith("BGR") else x[..., :3]
    want = _gray_hand(rgb)
    exact = rgb.astype(np.float64) @ np.array([0.299, 0.587, 0.114])
    tie = np.abs(exact - np.floor(exact) - 0.5) < 1e-3
    if target == "cpu":  # the host C++ is built with -ffp-contract=off: bit-exact
        np.testing.assert_array_equal(got.reshape(want.shape), want)
    else:  # a GPU compiler may fuse a multiply-add: exact except within 1e-3 of a tie
        np.testing.assert_array_equal(got.reshape(want.shape)[~tie], want[~tie])
    # OpenCV's fixed-point weights differ from 0.299/0.587/0.114 by < 2e-5 each (< 0.01
    # over 255): away from ties the results are the same pixel for pixel.
    cv_code = {"RGB2GRAY": cv2.COLOR_RGB2GRAY, "BGR2GRAY": cv2.COLOR_BGR2GRAY,
               "RGBA2GRAY": cv2.COLOR_RGBA2GRAY, "BGRA2GRAY": cv2.COLOR_BGRA2GRAY}[code]
    ref = cv2.cvtColor(x, cv_code)
    far = np.abs(exact - np.floor(exact) - 0.5) > 0.02
    assert far.mean() > 0.9
    np.testing.assert_array_equal(got.reshape(ref.shape)[far], ref[far])


def test_border_reader_default_constant_is_zero(target, rng):
    # fkl.BorderReader() pads with 0 (docs/fkl.md): np.pad's default constant.
    x = rng.uniform(1.0, 2.0, (5, 7)).astype(np.float32)
    got = pipe(target, fkl.BorderReader(), fkl.Crop((-2, -1, 10, 8)))(x)
    np.testing.assert_array_equal(got, np.pad(x, ((1, 2), (2, 1))))


def test_crop_takes_four_integers_as_one_rect(target, rng):
    # fkl.Crop(x, y, w, h) is fkl.Crop((x, y, w, h)) (docs/fkl.md): NumPy's slice.
    x = random_array(rng, (int(rng.integers(9, 20)) | 1, 17, 3), np.uint8)
    got = pipe(target, fkl.Crop(3, 2, 7, 5))(x)
    np.testing.assert_array_equal(got, x[2:7, 3:10])
    with pytest.raises(ArgumentError, match="four integers"):
        fkl.Crop(3, 2, 7)


@pytest.mark.parametrize("shapes", [[(4, 4)], [(2, 3), (3, 3)], [(3, 3), (2, 3)]])
def test_warping_matrices_are_all_2x3_or_all_3x3(shapes):
    # docs/fkl.md: a 2x3 affine or a 3x3 perspective matrix, per item all of one kind.
    ms = [np.eye(*s) for s in shapes]
    with pytest.raises(ArgumentError, match="expected a 2x3 affine or 3x3 perspective"):
        fkl.Warping(ms[0] if len(ms) == 1 else fkl.PerItem(ms), 8, 6)


def test_per_item_values_need_one_number_per_channel(target):
    # Two numbers per item for a 3-channel pixel: neither one number nor one per channel;
    # an error when the pixel type is known, before any array is seen (pipe.source) too.
    x = np.zeros((2, 5, 7, 3), np.float32)
    p = pipe(target, fkl.Mul(fkl.PerItem([(1.0, 2.0), (3.0, 4.0)])))
    for call in (lambda: p(x), lambda: p.source(dtype="float32", channels=3)):
        with pytest.raises(ArgumentError, match="got 2 values but the pixel has 3 channel"):
            call()


@pytest.mark.parametrize(("src", "dst"), [((4, 4), (1, 1)), ((8, 12), (2, 3)),
                                          ((2, 2), (1, 1)), ((6, 4), (3, 2)),
                                          # one side halves, the other does not
                                          ((4, 6), (2, 2)), ((6, 4), (2, 2))])
def test_area_downscale_rounds_uint8_halves_as_opencv(target, src, dst):
    # Means that end in exactly .5: OpenCV's INTER_AREA rounds them to even on its general
    # path (4x: 0.5 -> 0, 2.5 -> 2) but up on its exact 2 x 2 path (0.5 -> 1).
    cv2 = pytest.importorskip("cv2")
    (h, w), (dh, dw) = src, dst
    cell = (h // dh) * (w // dw)
    x = np.zeros((h, w), np.uint8)
    for k, (r, c) in enumerate((r, c) for r in range(0, h, h // dh) for c in range(0, w, w // dw)):
        x[r, c] = (2 * (k % 3) + 1) * cell // 2  # means 0.5, 1.5, 2.5, 0.5, ...
    got = pipe(target, fkl.Resize(dw, dh, interpolation=fkl.Interpolation.CV_AREA))(x)
    want = cv2.resize(x, (dw, dh), interpolation=cv2.INTER_AREA)
    np.testing.assert_array_equal(got.reshape(want.shape), want)


@pytest.mark.parametrize("size", [(0, 5), (5, 0), (-1, 5)])
def test_warping_size_must_be_positive(size):
    with pytest.raises(ArgumentError, match="expected positive ints w, h"):
        fkl.Warping(np.eye(3)[:2], *size)
    fkl.Warping(np.eye(3)[:2], 1, 1)  # the smallest size is fine


def test_letterbox_background_defaults_to_zero(target, rng):
    # A 10x4 image letterboxed (PRESERVE_AR) into 10x10: rows above and below it are the
    # background, 0 unless given (docs/fkl-resize.md).
    x = rng.uniform(1.0, 2.0, (4, 10, 3)).astype(np.float32)
    got = pipe(target, fkl.Resize(10, 10, aspect_ratio=fkl.AspectRatio.PRESERVE_AR))(x)
    rows = np.nonzero((got != 0).any(axis=(1, 2)))[0]
    assert len(rows) == 4 and (got[:rows[0]] == 0).all() and (got[rows[-1] + 1:] == 0).all()
    np.testing.assert_array_equal(got[rows[0]:rows[-1] + 1], x)  # same size: a copy


def test_linear_warp_takes_a_zero_value_per_channel(target, rng):
    # 'linear' reads 0 outside the source; a zero given per channel (3 channels here) is
    # that same value. Identity matrix into a larger canvas: NumPy's zero padding.
    x = rng.uniform(1.0, 2.0, (5, 7, 3)).astype(np.float32)
    for value in (0, (0, 0, 0), np.zeros(3)):
        warp = fkl.Warping(np.eye(3)[:2], 9, 8, value=value)
        np.testing.assert_array_equal(pipe(target, warp)(x),
                                      np.pad(x, ((0, 3), (0, 2), (0, 0))))
    with pytest.raises(ArgumentError, match="expected a number or one number per channel"):
        fkl.Warping(np.eye(3)[:2], 9, 8, value="zero")


@pytest.mark.parametrize("op", [fkl.And, fkl.Or, fkl.Xor, fkl.ShiftLeft])
def test_bitwise_ops_refuse_float_pixels_and_values(target, op):
    # The error names the offending (float) type: the pixels' or the value's (a Python
    # float is a weak float32 literal).
    for pixels, value, bad in ((np.float32, 3, "float32"), (np.float64, 3, "float64"),
                               (np.uint8, 1.5, "float32")):
        with pytest.raises(ArgumentError, match=f"unsupported dtype {bad}; bitwise ops need "
                                                "integer pixels"):
            pipe(target, op(value))(np.zeros((3, 5), pixels))


def test_one_per_item_warp_matrix_is_not_one_shared_matrix(target, rng):
    # fkl.Warping(fkl.PerItem([m])) (one matrix per item, a batch of one) and
    # fkl.Warping(m) (one matrix for every image) are different kernels: building both in
    # one process must not give the second the first's (they read their matrix from
    # different places). Each against the NumPy reference warp.
    from helpers.fkl_refs import ref_warp

    xs = random_array(rng, (1, 15, 19), np.float32)
    m1 = np.array([[1.1, 0.1, 2.0], [-0.05, 0.9, 1.0]])
    m2 = np.array([[0.8, 0.0, 3.0], [0.0, 1.2, -2.0]])
    per_item = fkl.compose(fkl.TensorRead(batch=True), fkl.Warping(fkl.PerItem([m1]), 13, 11),
                           fkl.TensorWrite(), target=target)
    shared = fkl.compose(fkl.TensorRead(batch=True), fkl.Warping(m2, 13, 11),
                         fkl.TensorWrite(), target=target)
    for p, m in ((per_item, m1), (shared, m2), (per_item, m1)):
        np.testing.assert_allclose(p(xs)[0], ref_warp(xs[0], m, 13, 11), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_discard_keeps_the_first_n_channels_of_four(target, rng, n):
    # fkl.Discard(n) keeps channels [:n] for n in 1..4 (docs/fkl.md); 4 of 4 is a copy.
    x = random_array(rng, (5, 9, 4), np.float32)
    got = pipe(target, fkl.Discard(n))(x)
    np.testing.assert_array_equal(got.reshape(5, 9, n), x[..., :n])


@pytest.mark.parametrize("n", [0, 5, 2.0])
def test_discard_outside_one_to_four_is_an_error(n):
    with pytest.raises(ArgumentError, match=r"fkl.Discard n: expected an int in 1..4"):
        fkl.Discard(n)


def test_integer_and_float_values_are_different_kernels(target, rng):
    # fkl.Mul(3) on uint8 pixels stays integer, fkl.Mul(2.5) promotes to float32 (a Python
    # float is a weak float32): built one after the other in one process, the second must
    # not reuse the first's kernel (their identities differ in the values' kind).
    x = random_array(rng, (6, 11, 3), np.uint8)
    ints = pipe(target, fkl.Mul(3))(x)
    floats = pipe(target, fkl.Mul(2.5))(x)
    assert ints.dtype.kind in "iu"
    np.testing.assert_array_equal(ints, x.astype(np.int64) * 3)
    assert floats.dtype == np.float32
    np.testing.assert_array_equal(floats, x.astype(np.float32) * np.float32(2.5))


def test_per_channel_and_uniform_saturate_are_different_kernels(target, rng):
    # fkl.Saturate with one bound per channel and with one bound for every channel, built
    # one after the other in one process: each clips as np.clip does with its own bounds
    # (the second must not reuse the first's kernel).
    x = random_array(rng, (5, 9, 3), np.float32)
    for lo, hi in ((0.25, 0.5), (0.25, [0.3, 0.5, 0.7]), ([0.1, 0.2, 0.3], 0.6)):
        got = pipe(target, fkl.Saturate(lo, hi))(x)
        np.testing.assert_array_equal(
            got, np.clip(x, np.float32(lo) if np.isscalar(lo) else np.float32(lo),
                         np.asarray(hi, np.float32)))


def test_one_channel_sum_keeps_its_type_and_several_promote(target, rng):
    # VectorReduce("sum"/"prod") adds channels in the promoted type (C++: uint8 + uint8 is
    # int), but one channel is the pixel itself: its type is kept.
    one = random_array(rng, (4, 7), np.uint8)
    three = random_array(rng, (4, 7, 3), np.uint8)
    for op in ("sum", "prod"):
        got = pipe(target, fkl.VectorReduce(op))(one)
        assert got.dtype == np.uint8, op
        np.testing.assert_array_equal(got.reshape(4, 7), one)
    got = pipe(target, fkl.VectorReduce("sum"))(three)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got.reshape(4, 7), three.astype(np.int32).sum(-1))
    two = random_array(rng, (4, 7, 2), np.uint8)
    got = pipe(target, fkl.VectorReduce("sum"))(two)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got.reshape(4, 7), two.astype(np.int32).sum(-1))


def test_value_count_add_last_and_runtime_perm_are_checked(target):
    # docs/fkl.md: one to four values, at most four channels, perm indices in 0..C-1.
    with pytest.raises(ArgumentError, match="expected 1 to 4 values"):
        fkl.Mul([])
    with pytest.raises(ArgumentError, match="already has 4 channels"):
        pipe(target, fkl.AddLast(1.0))(np.zeros((2, 3, 4), np.float32))
    x = np.arange(2 * 3 * 3, dtype=np.float32).reshape(2, 3, 3)
    np.testing.assert_array_equal(pipe(target, fkl.VectorReorderRT([2, 0, 1]))(x),
                                  x[..., [2, 0, 1]])
    with pytest.raises(ArgumentError, match="index 3 is outside the pixel"):
        pipe(target, fkl.VectorReorderRT([0, 1, 3]))(x)


@pytest.mark.parametrize("to", ["uint8", "int8", "uint16", "int16"])
def test_saturate_cast_of_float64_rounds_the_float64_value(target, to):
    # Values a hair above/below .5 that float32 would round onto the tie: the float64 value
    # itself rounds (to nearest, ties to even, docs/fkl.md), as NumPy's rint does.
    eps = 2.0**-30
    x = np.array([[2.5 + eps, 2.5 - eps, 3.5, 2.5, -2.5 - eps, 100.5 + eps, 1e9, -1e9]],
                 np.float64)
    if to.startswith("u"):
        x = np.abs(x)
    info = np.iinfo(to)
    ref = np.clip(np.rint(x), info.min, info.max).astype(to)
    np.testing.assert_array_equal(pipe(target, fkl.SaturateCast(to))(x), ref)


def test_crop_takes_at_most_65535_rects():
    # docs/fkl.md: one grid plane per crop, CUDA's grid limit of 65535 planes.
    assert len(fkl.Crop([(0, 0, 1, 1)] * 65535).rects) == 65535
    with pytest.raises(ArgumentError, match="65536 crops exceed the CUDA grid limit of 65535"):
        fkl.Crop([(0, 0, 1, 1)] * 65536)


def test_cast_works_in_place(target, rng):
    # A cast is element-wise: out may be the input itself (docs/fkl.md, "out= and
    # aliasing").
    x = random_array(rng, (7, 11, 3), np.float32)
    want = x * np.float32(2)
    pipe(target, fkl.Cast("float32"), fkl.Mul(2.0))(x, out=x)
    np.testing.assert_array_equal(x, want)


@pytest.mark.parametrize(("to", "lo", "hi"), [("int32", -(2**31), 2**31 - 1),
                                              ("uint32", 0, 2**32 - 1)])
def test_saturate_cast_of_float32_to_32_bit_ints_clamps_exactly(target, to, lo, hi):
    # float32 cannot hold 2**31 - 1 or 2**32 - 1: the clamp must not round the bound up
    # (it would overflow the conversion). OpenCV's saturate_cast gives the bounds.
    x = np.array([[3e9, -3e9, 5e9, -5e9, 2.5, 3.5, 2147483520.0, 1e30, -1e30]], np.float32)
    ref = np.clip(np.rint(x.astype(np.float64)), lo, hi).astype(to)
    np.testing.assert_array_equal(pipe(target, fkl.SaturateCast(to))(x), ref)


def test_integer_division_truncates_and_zero_divisor_gives_zero(target, rng):
    # docs/guarantees.md: integer x // 0 == 0; C++ division truncates toward zero. One
    # divisor per channel: 1 (the identity), 0, 7, -3.
    x = rng.integers(-1000, 1000, (5, 9, 4)).astype(np.int32)
    got = pipe(target, fkl.Div((1, 0, 7, -3)))(x)
    d = np.array([1, 1, 7, -3], np.int64)
    ref = np.sign(x) * np.sign(d) * (np.abs(x.astype(np.int64)) // np.abs(d))
    ref[..., 1] = 0
    np.testing.assert_array_equal(got, ref)


def test_per_item_values_mix_one_value_and_one_per_channel(target, rng):
    # fkl.PerItem items each give 1 value or one per channel (docs/fkl.md).
    x = random_array(rng, (2, 4, 5, 3), np.float32)
    got = pipe(target, fkl.Mul(fkl.PerItem([2.0, (1.0, 2.0, 3.0)])))(x)
    np.testing.assert_array_equal(got[0], x[0] * np.float32(2))
    np.testing.assert_array_equal(got[1], x[1] * np.array([1, 2, 3], np.float32))
    with pytest.raises(ArgumentError, match="every item needs as many values"):
        fkl.Mul(fkl.PerItem([(1.0, 2.0), (1.0, 2.0, 3.0)]))


@pytest.mark.parametrize(("w", "h"), [(0, 5), (5, 0), (-1, 5), (2.0, 5), (True, 5),
                                    (np.bool_(True), 5), ("4", 4), (2**31, 4),
                                    (np.float32(4), 4), (np.array([4, 5]), 4)])
def test_resize_size_must_be_positive_ints(w, h):
    # bools and strings were taken (True became a width of 1 and failed inside the
    # kernel's argument packing), a size beyond int32 only at the call
    with pytest.raises(ArgumentError, match="fkl.Resize size: expected positive ints w, h"):
        fkl.Resize(w, h)
    with pytest.raises(ArgumentError, match="fkl.Warping size: expected positive ints w, h"):
        fkl.Warping(np.eye(2, 3), w, h)


def test_a_size_computed_with_numpy_is_a_size(target, rng):
    x = random_array(rng, (9, 14, 3), np.float32)
    w, h = np.int64(7), np.int32(5)  # e.g. np.round(shape * scale).astype(int)
    got = pipe(target, fkl.Resize(w, h))(x)
    want = pipe(target, fkl.Resize(7, 5))(x)
    assert got.shape == want.shape == (5, 7, 3)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("value", ["2", ["1", "2", "3"], [1.0, True], np.str_("3"), 1 + 2j,
                                   [1.0, 2j]])
def test_arithmetic_values_must_be_numbers(value):
    # a string was read as a number in the kernel ("2" multiplied by 2)
    with pytest.raises(ArgumentError, match="fkl.Mul: expected"):
        fkl.Mul(value)


def test_numpy_numbers_are_values(target, rng):
    x = random_array(rng, (5, 11, 3), np.float32)
    got = pipe(target, fkl.Mul(np.array([1.5, 2.0, 0.5], np.float32)),
               fkl.Add((np.int64(3), 1, np.float64(-2.0))))(x)
    prod = x * np.array([1.5, 2.0, 0.5], np.float32)
    want = prod + np.array([3, 1, -2], np.float32)
    # GPU compilers may contract the multiply and the add into one FMA (CUDA's default;
    # clang did on the H200): within one rounding of the product and one of the sum. A
    # value read wrongly (an int64 as float bits, -2.0 as -2 truncated...) is off by far more.
    bound = np.float32(2.0**-23) * (np.abs(prod) + np.abs(want))
    assert np.all(np.abs(got - want) <= bound), np.max(np.abs(got - want) - bound)


def test_normalize_works_in_place(target, rng):
    # Normalize is element-wise: out may be the input itself (docs/fkl.md).
    x = random_array(rng, (6, 9, 3), np.float32)
    want = pipe(target, fkl.Normalize(0.25, 2.0))(x)
    pipe(target, fkl.Normalize(0.25, 2.0))(x, out=x)
    np.testing.assert_array_equal(x, want)



def test_is_even_works_in_place(target, rng):
    # IsEven is element-wise: cast back to the input's type, out may be the input itself.
    x = rng.integers(-50, 50, (5, 7, 3)).astype(np.int32)
    want = ((x & 1) == 0).astype(np.int32)
    pipe(target, fkl.IsEven(), fkl.Cast("int32"))(x, out=x)
    np.testing.assert_array_equal(x, want)



def test_warp_positions_exactly_at_the_far_edge_are_outside(target, rng):
    # The inside test is 0 <= x < w, 0 <= y < h (the NumPy reference, docs/fkl.md): a pure
    # translation that lands some rows/columns exactly on x == w or y == h reads the border.
    from helpers.fkl_refs import ref_warp

    x = random_array(rng, (7, 9), np.float32) + 1.0
    m = np.array([[1.0, 0.0, 5.0], [0.0, 1.0, 3.0]])  # column 4 -> x = 9 = w, row 4 -> y = 7
    got = pipe(target, fkl.Warping(m, 9, 7))(x)
    np.testing.assert_array_equal(got, ref_warp(x, m, 9, 7))
    assert (got[4:, :] == 0).all() and (got[:, 4:] == 0).all()


def test_per_item_border_constants_per_channel(target, rng):
    # Per-item CONSTANT border values with one value per channel: item k's border pixels
    # are its (r, g, b), in channel order (NumPy's pad, channel by channel).
    x = random_array(rng, (9, 11, 3), np.float32)
    rects = [(-2, -3, 6, 5), (8, 7, 6, 5)]
    consts = [(7.0, 8.0, 9.0), (-1.0, -2.0, -3.0)]
    got = pipe(target, fkl.BorderReader(fkl.BorderMode.CONSTANT, fkl.PerItem(consts)),
               fkl.Crop(rects))(x)
    for k, (cx, cy, w, h) in enumerate(rects):
        pad = np.stack([np.pad(x[..., c], 8, constant_values=consts[k][c]) for c in range(3)],
                       -1)
        np.testing.assert_array_equal(got[k], pad[8 + cy:8 + cy + h, 8 + cx:8 + cx + w])


def test_one_warp_matrix_for_a_batch_of_three(target, rng):
    # fkl.Warping(m) (not per item) warps every image of a batch with m.
    from helpers.fkl_refs import ref_warp

    xs = random_array(rng, (3, 15, 19), np.float32)
    m = np.array([[0.9, 0.1, 1.5], [-0.1, 1.1, 0.5]])
    got = fkl.compose(fkl.TensorRead(batch=True), fkl.Warping(m, 13, 11), fkl.TensorWrite(),
                      target=target)(xs)
    for k in range(3):
        np.testing.assert_allclose(got[k], ref_warp(xs[k], m, 13, 11), rtol=1e-5, atol=1e-4)



@pytest.mark.parametrize("op", ["and", "or"])
def test_vector_reduce_and_or_give_one_bool_channel(target, rng, op):
    # C++ bool(x) per channel, folded: one bool per pixel (NumPy's all/any of x != 0).
    x = rng.integers(0, 3, (4, 6, 3)).astype(np.int32)
    got = pipe(target, fkl.VectorReduce(op))(x)
    want = (x != 0).all(-1) if op == "and" else (x != 0).any(-1)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got.reshape(4, 6), want)


def test_static_reorder_takes_1_to_4_indices_within_the_pixel(target):
    # docs/fkl.md: VectorReorder(perm) picks 1 to 4 channels by index 0..C-1.
    x = np.arange(2 * 3 * 3, dtype=np.float32).reshape(2, 3, 3)
    np.testing.assert_array_equal(pipe(target, fkl.VectorReorder([2]))(x).reshape(2, 3),
                                  x[..., 2])
    np.testing.assert_array_equal(pipe(target, fkl.VectorReorder([2, 2, 0, 1]))(x),
                                  x[..., [2, 2, 0, 1]])
    with pytest.raises(ArgumentError, match="3"):
        pipe(target, fkl.VectorReorder([0, 1, 3]))(x)


def test_saturate_works_in_place(target, rng):
    # Saturate is element-wise: out may be the input itself (np.clip, docs/fkl.md).
    x = random_array(rng, (6, 9, 3), np.float32)
    want = np.clip(x, np.float32(0.2), np.float32(0.8))
    pipe(target, fkl.Saturate(0.2, 0.8))(x, out=x)
    np.testing.assert_array_equal(x, want)


@pytest.mark.parametrize("v, want", [(0.0, 0), (0.49, 0), (0.5, 1), (0.75, 1), (2.5, 3),
                                     (-0.5, -1), (-0.49, 0), (-2.5, -3), (-2.4, -2)])
def test_letterbox_rounding_is_half_away_from_zero(v, want):
    """FKL's letterbox rounds sizes and offsets half away from zero (C's round()); the
    values are worked by hand."""
    from fkl._geometry import _round_half_away

    assert _round_half_away(v) == want


# -- survivors of the full run of 2026-12-01 (session 8) ---------------------------------
def test_batch_of_equal_crops_letterboxed_nearest_pinned(target):
    # Two 20x8 crops (equal sizes: one plane per crop, not ragged) letterboxed into 10x8:
    # scale min(10/20, 8/8) = 1/2, so the image is 10x4 placed at row (8 - 4) / 2 = 2.
    # FKL's nearest reads crop[int(yi * 8/4), int(x * 20/10)] (scales in float32: exactly
    # 2) inside, the background (-1) elsewhere. Worked by hand.
    x = np.arange(30 * 40, dtype=np.float32).reshape(30, 40)
    rects = [(1, 2, 20, 8), (5, 9, 20, 8)]
    got = fkl.compose(fkl.TensorRead(), fkl.Crop(rects),
                      fkl.Resize(10, 8, interpolation="nearest",
                                 aspect_ratio=fkl.AspectRatio.PRESERVE_AR, background=-1.0),
                      fkl.TensorWrite(), target=target)(x)
    assert got.shape == (2, 8, 10)
    for k, (cx, cy, _, _) in enumerate(rects):
        want = np.full((8, 10), -1.0, np.float32)
        for y in range(2, 6):
            for xo in range(10):
                want[y, xo] = x[cy + 2 * (y - 2), cx + 2 * xo]
        np.testing.assert_array_equal(got[k], want)


def test_ragged_crops_warp_with_their_own_sizes(target, rng):
    # Crops of two widths (one height): an identity warp into 9x6 copies each crop and
    # reads 0 ("linear" outside the plane) past its own width and height, not the pixels
    # of the source beyond the crop: NumPy's zero padding of each crop.
    x = rng.uniform(1.0, 2.0, (20, 30)).astype(np.float32)
    rects = [(3, 2, 5, 4), (10, 5, 7, 4)]
    got = fkl.compose(fkl.TensorRead(), fkl.Crop(rects), fkl.Warping(np.eye(3)[:2], 9, 6),
                      fkl.TensorWrite(), target=target)(x)
    assert got.shape == (2, 6, 9)
    for k, (cx, cy, w, h) in enumerate(rects):
        crop = x[cy:cy + h, cx:cx + w]
        np.testing.assert_array_equal(got[k], np.pad(crop, ((0, 6 - h), (0, 9 - w))))
    # Different widths alone, or different heights alone, make the batch ragged:
    # INTER_AREA refuses it.
    for two in (rects, [(3, 2, 5, 4), (10, 5, 5, 6)]):
        with pytest.raises(ArgumentError, match="different sizes"):
            fkl.compose(fkl.TensorRead(), fkl.Crop(two),
                        fkl.Resize(4, 3, interpolation=fkl.Interpolation.CV_AREA),
                        fkl.TensorWrite(), target=target)(x)


def test_five_values_are_an_error_when_the_op_is_made():
    # At most one value per channel, and a pixel has at most 4 channels (docs/fkl.md).
    with pytest.raises(ArgumentError, match="expected 1 to 4 values"):
        fkl.Add([1, 2, 3, 4, 5])
    assert len(fkl.Add([1, 2, 3, 4])._flat) == 4


@pytest.mark.parametrize("perm", [[], [0, 1, 2, 3, 0]])
def test_reorder_takes_one_to_four_indices(perm):
    with pytest.raises(ArgumentError, match="expected 1 to 4 indices"):
        fkl.VectorReorder(perm)
    with pytest.raises(ArgumentError, match="expected 1 to 4 indices"):
        fkl.VectorReorderRT(perm)


def test_not_works_in_place(target, rng):
    # ~x is element-wise: out may be the input itself (docs/fkl.md, "out= and aliasing").
    x = random_array(rng, (7, 11, 3), np.uint8)
    want = ~x
    pipe(target, fkl.Not())(x, out=x)
    np.testing.assert_array_equal(x, want)


def test_one_value_in_a_list_applies_to_every_channel(target, rng):
    # [2.0] is one value (docs/fkl.md: a number or one per channel): all three channels.
    x = random_array(rng, (5, 9, 3), np.float32)
    np.testing.assert_array_equal(pipe(target, fkl.Add([2.0]))(x), x + np.float32(2.0))


def test_two_value_and_one_value_ops_are_different_kernels(target, rng):
    # Add(5.0) and Add((1.0, 2.0)) on a 2-channel image, built in one process: the second
    # must not reuse the first's kernel (one value vs one per channel).
    x = random_array(rng, (5, 9, 2), np.float32)
    for value in (5.0, (1.0, 2.0), 5.0):
        want = x + np.asarray(value, np.float32)
        np.testing.assert_array_equal(pipe(target, fkl.Add(value))(x), want)


def test_per_item_scalars_and_mixed_items_are_different_kernels(target, rng):
    # PerItem items of one value each, then items mixing one value and one per channel,
    # in one process: different kernels. NumPy adds each item's values.
    xs = random_array(rng, (2, 5, 7, 3), np.float32)
    for items in ([2.0, 3.0], [2.0, (1.0, 2.0, 4.0)], [2.0, 3.0]):
        p = fkl.compose(fkl.TensorRead(), fkl.Add(fkl.PerItem(items)), fkl.TensorWrite(),
                        target=target)
        got = p(xs)
        for k in range(2):
            np.testing.assert_array_equal(got[k], xs[k] + np.asarray(items[k], np.float32))


def test_normalize_with_per_channel_mean_and_one_std_is_its_own_kernel(target, rng):
    # Normalize(1, 2) and Normalize((1, 2, 3), 2) in one process: the second has a value
    # per channel for its mean, so not the first's kernel. (x - mean) / std in float32.
    x = random_array(rng, (5, 9, 3), np.float32)
    for mean, std in ((1.0, 2.0), ((1.0, 2.0, 3.0), 2.0), (1.0, (2.0, 4.0, 8.0))):
        want = (x - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)
        np.testing.assert_allclose(pipe(target, fkl.Normalize(mean, std))(x), want,
                                   rtol=1e-6)


@pytest.mark.parametrize("op", ["sum", "max", "and", "or"])
def test_vector_reduce_gives_one_channel_that_later_ops_see(target, rng, op):
    # A reduction leaves one channel: AddLast then makes two (the reduction, the value).
    x = random_array(rng, (4, 7, 3), np.uint8)
    got = pipe(target, fkl.VectorReduce(op), fkl.Cast("int32"), fkl.AddLast(7))(x)
    ref = {"sum": x.astype(np.int32).sum(-1), "max": x.max(-1).astype(np.int32),
           "and": (x != 0).all(-1).astype(np.int32), "or": (x != 0).any(-1).astype(np.int32)}
    assert got.shape == (4, 7, 2)
    np.testing.assert_array_equal(got[..., 0], ref[op])
    assert (got[..., 1] == 7).all()


@pytest.mark.plugin("cpu")
@pytest.mark.parametrize("rect", [(0, 3, 2, 5), (4, 0, 3, 2), (0, 2, 2, 5)])
def test_crop_rect_past_the_right_or_bottom_edge_is_an_error(rect):
    # A 6x6 source: x + w > 6 or y + h > 6 lies outside (no BorderReader before it).
    x = np.zeros((6, 6), np.float32)
    with pytest.raises(ArgumentError, match="lies outside the 6x6 source"):
        fkl.compose(fkl.TensorRead(), fkl.Crop(rect), fkl.TensorWrite(), target="cpu")(x)
    edge = fkl.compose(fkl.TensorRead(), fkl.Crop((0, 1, 6, 5)),
                       fkl.TensorWrite(), target="cpu")(x)
    assert edge.shape == (5, 6)  # exactly to the edge is inside


@pytest.mark.parametrize("h", [1, 2])
@pytest.mark.parametrize("mode, keep", [("LINEAR_EVEN", 0), ("LINEAR_ODD", 1)])
def test_deinterlace_of_one_and_two_rows(target, rng, h, mode, keep):
    # docs/fkl.md: the other field's rows become (above + below + 1) * 0.5, the existing
    # neighbour used twice at the first/last row; with one row, the row itself.
    x = random_array(rng, (h, 9, 3), np.uint8)
    f = x.astype(np.float32)
    want = f.copy()
    for y in range(h):
        if y % 2 != keep:
            n = f[1 - y] if h == 2 else f[y]
            want[y] = (n + n + 1) * np.float32(0.5)
    np.testing.assert_array_equal(pipe(target, fkl.Deinterlace(mode))(x), want)


def test_a_bad_item_of_a_rect_list_is_named_by_its_index():
    # A list whose first item is a rect is a list of rects: the error names the bad item.
    with pytest.raises(ArgumentError, match=r"fkl.Crop rects\[1\]: expected \(x, y, w, h\) "
                                            r"integers, got 7"):
        fkl.Crop([[0, 0, 1, 1], 7])
    with pytest.raises(ArgumentError, match=r"fkl.Crop rect: expected \(x, y, w, h\) "):
        fkl.Crop([5, (0, 0, 1, 1)])



@pytest.mark.parametrize("target_kind", [pytest.param("cpu", marks=pytest.mark.plugin("cpu")),
                                         "gpu"])
@pytest.mark.parametrize(("to", "hi", "rounded_up"), [("int32", "2147483647.0", "2147483648.0f"),
                                                      ("uint32", "4294967295.0", "4294967296.0f")])
def test_saturate_cast_clamps_32_bit_bounds_in_double(target_kind, to, hi, rounded_up):
    # C++ [conv.fpint] (and CUDA): converting a floating value outside the integer type's
    # range is undefined. float32 rounds 2**31 - 1 and 2**32 - 1 up to 2**31 and 2**32,
    # both out of range, so a float32 pixel is clamped in double, at the exact bound. (The
    # values test above cannot see a float32 clamp: g++ and PTX's cvt happen to saturate.)
    p = fkl.compose(fkl.TensorRead(), fkl.SaturateCast(to), fkl.TensorWrite(),
                    target=target_kind)
    src = p.source(dtype=np.float32, channels=3)
    assert f"({hi}) < (" in src and rounded_up not in src, src[-2000:]
