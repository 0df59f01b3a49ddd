"""fkl.Resize's OpenCV modes against cv2.resize (INTER_LINEAR, INTER_AREA, INTER_CUBIC) on
fresh random odd-sized images, uint8 and float32, up and down, into poisoned outputs.

Tolerance (docs/fkl-resize.md): uint8 within 1 of OpenCV and exact on almost every pixel
(OpenCV's vectorised and scalar uint8 linear paths round differently; fkl follows the
vectorised one); float32 within float rounding.
"""

from __future__ import annotations

import fkl
import numpy as np
import pytest
from helpers import poisoned, random_array

cv2 = pytest.importorskip("cv2")

pytestmark = pytest.mark.plugin("compose")

IM = fkl.Interpolation
CV = {IM.CV_LINEAR: cv2.INTER_LINEAR, IM.CV_AREA: cv2.INTER_AREA, IM.CV_CUBIC: cv2.INTER_CUBIC,
      IM.CV_NEAREST: cv2.INTER_NEAREST, IM.CV_NEAREST_EXACT: cv2.INTER_NEAREST_EXACT}


def run(target: str, x: np.ndarray, op: fkl.Op, shape: tuple[int, ...], *more: fkl.Op,
        dtype: object = None) -> np.ndarray:
    pipe = fkl.compose(fkl.TensorRead(), op, *more, fkl.TensorWrite(), target=target)
    out = poisoned(shape, dtype or x.dtype)
    assert pipe(x, out=out) is out
    return out


def near(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    if got.dtype == np.uint8:
        diff = np.abs(got.astype(np.int32) - want.astype(np.int32))
        assert diff.max() <= 1, f"max |diff| {diff.max()} at {np.argwhere(diff > 1)[:5]}"
        # The ±1 is a rounding-path difference on a few pixels, not a wrong convention.
        assert (diff == 0).mean() >= 0.95, f"only {(diff == 0).mean():.3f} exact"
    else:
        # Summation order differs: a few float32 ulps of the 0..255 range.
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-3)


def letterboxed(x: np.ndarray, dw: int, dh: int, background: int, flag: int) -> np.ndarray:
    """OpenCV's resize with ``flag`` into fkl's PRESERVE_AR placement on ``background``."""
    h, w = x.shape[:2]
    tw, th, x1, y1 = fkl.letterbox(w, h, dw, dh, fkl.PRESERVE_AR)
    want = np.full((dh, dw, *x.shape[2:]), background, x.dtype)
    want[y1:y1 + th, x1:x1 + tw] = cv2.resize(x, (tw, th), interpolation=flag)
    return want


def odd(rng: np.random.Generator, lo: int, hi: int) -> int:
    return int(rng.integers(lo, hi)) * 2 + 1


@pytest.mark.parametrize("mode", [IM.CV_LINEAR, IM.CV_CUBIC])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_resize_up_and_down_vs_opencv(target, rng, mode, dtype):
    h, w = odd(rng, 12, 25), odd(rng, 12, 25)
    x = rng.uniform(0, 256, (h, w, 3)).astype(dtype)
    # Down in both axes, up in both, and mixed: new sizes are runtime values (one kernel).
    run(target, x, fkl.Resize(3, 3, interpolation=mode), (3, 3, 3))
    builds = fkl.stats()["builds"]
    for dw, dh in [(odd(rng, 4, 10), odd(rng, 4, 10)), (odd(rng, 30, 45), odd(rng, 30, 45)),
                   (odd(rng, 30, 45), odd(rng, 4, 10))]:
        got = run(target, x, fkl.Resize(dw, dh, interpolation=mode), (dh, dw, 3))
        near(got, cv2.resize(x, (dw, dh), interpolation=CV[mode]))
    assert fkl.stats()["builds"] == builds


@pytest.mark.parametrize("dtype,channels", [(np.uint8, 3), (np.float32, 1), (np.uint8, 4)])
def test_resize_area_fractional_and_integer_vs_opencv(target, rng, dtype, channels):
    h, w = odd(rng, 15, 25), odd(rng, 15, 25)
    shape = (h, w, channels) if channels > 1 else (h, w)
    x = random_array(rng, shape, dtype)
    # Fractional factors, and an integer factor in each axis (OpenCV's fast path).
    for dw, dh in [(odd(rng, 3, 9), odd(rng, 3, 9)), (w, (h + 1) // 2), (w // 3, h // 3)]:
        got = run(target, x, fkl.Resize(dw, dh, interpolation=IM.CV_AREA),
                  (dh, dw, *shape[2:]))
        near(got, cv2.resize(x, (dw, dh), interpolation=cv2.INTER_AREA))


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_resize_nearest_vs_opencv(target, rng, dtype):
    """INTER_NEAREST picks, so it is exact: up, down and mixed, one kernel."""
    h, w = odd(rng, 12, 25), odd(rng, 12, 25)
    x = random_array(rng, (h, w, 3), dtype)
    for dw, dh in [(odd(rng, 4, 10), odd(rng, 4, 10)), (odd(rng, 30, 45), odd(rng, 30, 45)),
                   (odd(rng, 4, 10), odd(rng, 30, 45))]:
        got = run(target, x, fkl.Resize(dw, dh, interpolation=IM.CV_NEAREST), (dh, dw, 3))
        np.testing.assert_array_equal(got, cv2.resize(x, (dw, dh),
                                                      interpolation=cv2.INTER_NEAREST))


@pytest.mark.parametrize("dtype,channels", [(np.uint8, 3), (np.float32, 1), (np.float32, 4),
                                            (np.uint8, 2)])
def test_resize_nearest_exact_vs_opencv(target, rng, dtype, channels):
    """INTER_NEAREST_EXACT picks (centre to centre, 16-bit fixed point): exact, on odd
    up, down and mixed scales, and sizes where it and INTER_NEAREST pick differently."""
    h, w = odd(rng, 12, 25), odd(rng, 12, 25)
    shape = (h, w, channels) if channels > 1 else (h, w)
    x = random_array(rng, shape, dtype)
    pipe = fkl.compose(fkl.TensorRead(), fkl.Resize(3, 3, interpolation=IM.CV_NEAREST_EXACT),
                       fkl.TensorWrite(), target=target)
    pipe(x)
    builds = fkl.stats()["builds"]
    differs = False
    for dw, dh in [(odd(rng, 4, 10), odd(rng, 4, 10)), (odd(rng, 30, 45), odd(rng, 30, 45)),
                   (odd(rng, 4, 10), odd(rng, 30, 45)), (w, h), (1, 1), (3 * w, h // 3)]:
        out = poisoned((dh, dw, *shape[2:]), dtype)
        pipe = fkl.compose(fkl.TensorRead(),
                           fkl.Resize(dw, dh, interpolation=IM.CV_NEAREST_EXACT),
                           fkl.TensorWrite(), target=target)
        assert pipe(x, out=out) is out
        want = cv2.resize(x, (dw, dh), interpolation=cv2.INTER_NEAREST_EXACT)
        np.testing.assert_array_equal(out, want, err_msg=f"{w}x{h} -> {dw}x{dh}")
        differs |= not np.array_equal(want, cv2.resize(x, (dw, dh),
                                                       interpolation=cv2.INTER_NEAREST))
    assert differs  # the sizes tell the two nearest conventions apart
    assert fkl.stats()["builds"] == builds  # new sizes are runtime values


def test_resize_nearest_exact_letterboxed_and_batched(target, rng):
    """Letterboxing resizes to the placed size; a batch of crops of different sizes uses
    each crop's own size."""
    x = random_array(rng, (29, 43, 3), np.uint8)
    got = run(target, x, fkl.Resize(31, 31, interpolation=IM.CV_NEAREST_EXACT,
                                     aspect_ratio=fkl.PRESERVE_AR, background=7),
              (31, 31, 3))
    np.testing.assert_array_equal(got, letterboxed(x, 31, 31, 7, cv2.INTER_NEAREST_EXACT))
    rects = [(1, 2, 17, 13), (5, 3, 31, 25), (0, 0, 9, 21)]
    got = run(target, x, fkl.Crop(rects), (3, 15, 19, 3),
              fkl.Resize(19, 15, interpolation=IM.CV_NEAREST_EXACT))
    for k, (cx, cy, cw, ch) in enumerate(rects):
        np.testing.assert_array_equal(
            got[k], cv2.resize(x[cy:cy + ch, cx:cx + cw], (19, 15),
                               interpolation=cv2.INTER_NEAREST_EXACT))


def test_resize_area_half_rounds_as_opencv(target, rng):
    """Exactly half the size: OpenCV's 2 x 2 uint8 path rounds .5 up; fkl too."""
    h, w = odd(rng, 10, 20) * 2, odd(rng, 10, 20) * 2
    x = random_array(rng, (h, w, 3), np.uint8)
    for mode in (IM.CV_AREA, IM.CV_LINEAR):  # OpenCV runs INTER_LINEAR at 1/2 as INTER_AREA
        got = run(target, x, fkl.Resize(w // 2, h // 2, interpolation=mode),
                  (h // 2, w // 2, 3))
        np.testing.assert_array_equal(
            got, cv2.resize(x, (w // 2, h // 2), interpolation=CV[mode]))


def test_resize_cv_modes_keep_dtype_and_fuse(target, rng):
    """Crop → cv_linear Resize → Mul in one kernel: the resize reads through the crop."""
    x = random_array(rng, (41, 37, 3), np.uint8)
    got = run(target, x, fkl.Crop((3, 5, 29, 31)), (19, 23, 3),
              fkl.Resize(23, 19, interpolation=IM.CV_LINEAR), fkl.Cast("float32"),
              fkl.Mul(0.5), dtype=np.float32)
    want = cv2.resize(x[5:36, 3:32], (23, 19), interpolation=cv2.INTER_LINEAR)
    np.testing.assert_allclose(got, want.astype(np.float32) * 0.5, atol=0.5)


@pytest.mark.parametrize("mode, src, dst", [
    (IM.CV_CUBIC, (21, 45), (31, 31)),
    (IM.CV_AREA, (47, 93), (33, 31)),  # the area tables' cells are the letterboxed image's
])
def test_resize_cv_letterbox(target, rng, mode, src, dst):
    """PRESERVE_AR with an OpenCV mode: the image is cv2.resize'd into the letterbox."""
    x = random_array(rng, (*src, 3), np.uint8)
    dw, dh = dst
    got = run(target, x, fkl.Resize(dw, dh, interpolation=mode,
                                    aspect_ratio=fkl.PRESERVE_AR, background=114),
              (dh, dw, 3))
    near(got, letterboxed(x, dw, dh, 114, CV[mode]))


def test_resize_cv_batch(target, rng):
    x = random_array(rng, (3, 17, 23, 3), np.float32)
    got = run(target, x, fkl.Resize(11, 9, interpolation=IM.CV_AREA), (3, 9, 11, 3))
    for k in range(3):
        near(got[k], cv2.resize(x[k], (11, 9), interpolation=cv2.INTER_AREA))


def test_resize_cv_errors():
    with pytest.raises(fkl.ArgumentError, match="interpolation: expected one of"):
        fkl.Resize(4, 4, interpolation="INTER_LINEAR")
    x = np.zeros((9, 9, 3), np.uint8)
    pipe = fkl.compose(fkl.TensorRead(), fkl.Resize(12, 5, interpolation=IM.CV_AREA),
                       fkl.TensorWrite(), target="cpu")
    with pytest.raises(fkl.ArgumentError, match="only downscales: 9x9 to 12x5"):
        pipe(x)


# -- Warping with OpenCV's conventions ------------------------------------------------------
B = fkl.BorderMode
CV_BORDER = {B.CONSTANT: cv2.BORDER_CONSTANT, B.REPLICATE: cv2.BORDER_REPLICATE,
             B.REFLECT: cv2.BORDER_REFLECT, B.REFLECT_101: cv2.BORDER_REFLECT_101,
             B.WRAP: cv2.BORDER_WRAP}


def random_matrix(rng: np.random.Generator, perspective: bool) -> np.ndarray:
    """A dst → src map that rotates, scales and shifts enough to sample well outside."""
    ang, s = rng.uniform(-0.6, 0.6), rng.uniform(0.7, 1.4)
    m = np.array([[s * np.cos(ang), -s * np.sin(ang), rng.uniform(-6, 6)],
                  [s * np.sin(ang), s * np.cos(ang), rng.uniform(-6, 6)]])
    if perspective:
        m = np.vstack([m, [rng.uniform(-3e-3, 3e-3), rng.uniform(-3e-3, 3e-3), 1.0]])
    return m


def warp_near(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    if got.dtype == np.uint8:
        diff = np.abs(got.astype(np.int32) - want.astype(np.int32))
        assert diff.max() <= 1 and (diff == 0).mean() >= 0.99, (diff.max(), (diff == 0).mean())
    else:  # float32 interpolation on a 0..255 range: a few ulps apart
        np.testing.assert_allclose(got, want, rtol=0, atol=4e-3)


# Every border with both interpolations; matrix kinds and dtypes rotate over the borders,
# so that each border compiles two kernels per target rather than eight.
_COMBOS = [(IM.CV_LINEAR, False, np.uint8), (IM.CV_LINEAR, True, np.float32),
           (IM.CV_NEAREST, True, np.uint8), (IM.CV_NEAREST, False, np.float32)]


@pytest.mark.parametrize("border,interp,perspective,dtype", [
    (b, *_COMBOS[(i + j) % 4]) for i, b in enumerate(B.ALL) for j in (0, 2)])
def test_warp_border_modes_vs_opencv(target, rng, border, interp, perspective, dtype):
    h, w = odd(rng, 10, 20), odd(rng, 10, 20)
    x = rng.uniform(0, 256, (h, w, 3)).astype(dtype)
    m = random_matrix(rng, perspective)
    dw, dh = odd(rng, 10, 25), odd(rng, 10, 25)
    value = [float(v) for v in rng.integers(0, 256, 3)]
    op = fkl.Warping(m, dw, dh, interpolation=interp, border=border, value=value)
    got = run(target, x, op, (dh, dw, 3))
    fn = cv2.warpPerspective if perspective else cv2.warpAffine
    flag = (cv2.INTER_LINEAR if interp == IM.CV_LINEAR else cv2.INTER_NEAREST)
    want = fn(x, m, (dw, dh), flags=flag | cv2.WARP_INVERSE_MAP, borderMode=CV_BORDER[border],
              borderValue=value + [0.0])
    warp_near(got, want)


def test_warp_forward_matrix_is_inverted_first(target, rng):
    """cv2 without WARP_INVERSE_MAP takes src → dst; fkl takes dst → src: invert it."""
    x = rng.uniform(0, 256, (19, 23, 1)).astype(np.float32)
    fwd = np.array([[1.1, 0.2, 2.0], [-0.1, 0.9, 1.5]])
    inv = cv2.invertAffineTransform(fwd)
    got = run(target, x, fkl.Warping(inv, 21, 17, interpolation=IM.CV_LINEAR,
                                     border=B.REPLICATE), (17, 21))
    want = cv2.warpAffine(x, fwd, (21, 17), flags=cv2.INTER_LINEAR,
                          borderMode=cv2.BORDER_REPLICATE)
    np.testing.assert_allclose(got, want, atol=4e-3)


def test_warp_cv_batch_per_item_matrices(target, rng):
    x = rng.uniform(0, 256, (2, 15, 17, 3)).astype(np.uint8)
    ms = [random_matrix(rng, False) for _ in range(2)]
    op = fkl.Warping(fkl.PerItem(ms), 13, 11, interpolation=IM.CV_LINEAR, border=B.CONSTANT,
                     value=(1, 2, 3))
    got = run(target, x, op, (2, 11, 13, 3))
    for k in range(2):
        warp_near(got[k], cv2.warpAffine(x[k], ms[k], (13, 11),
                                         flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                                         borderValue=(1, 2, 3)))


def test_warp_degenerate_perspective_reads_the_border(target):
    """A third row of zeros divides by 0 everywhere: every pixel is the border value."""
    x = np.full((9, 11, 3), 50, np.uint8)
    m = np.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 0]])
    got = run(target, x, fkl.Warping(m, 7, 5, interpolation=IM.CV_LINEAR, value=(9, 8, 7)),
              (5, 7, 3))
    np.testing.assert_array_equal(got, np.broadcast_to(np.uint8([9, 8, 7]), (5, 7, 3)))
    np.testing.assert_array_equal(got, cv2.warpPerspective(
        x, m, (7, 5), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP, borderValue=(9, 8, 7)))


def test_warp_cv_errors():
    m = np.eye(2, 3)
    with pytest.raises(fkl.ArgumentError, match="border='REFLECT'.*cv_linear"):
        fkl.Warping(m, 4, 4, border=B.REFLECT)
    with pytest.raises(fkl.ArgumentError, match="interpolation: expected one of"):
        fkl.Warping(m, 4, 4, interpolation="cv_cubic")
    with pytest.raises(fkl.ArgumentError, match="border: expected one of"):
        fkl.Warping(m, 4, 4, interpolation=IM.CV_LINEAR, border="ISOLATED")
    with pytest.raises(fkl.ArgumentError, match="must be finite"):
        fkl.Warping([[1, 0, np.nan], [0, 1, 0]], 4, 4)
    pipe = fkl.compose(fkl.TensorRead(), fkl.Warping(m, 4, 4, interpolation=IM.CV_NEAREST,
                                                     value=(1, 2)), fkl.TensorWrite(),
                       target="cpu")
    with pytest.raises(fkl.ArgumentError, match="got 2 values but the pixel has 3"):
        pipe(np.zeros((5, 5, 3), np.uint8))


@pytest.mark.plugin("nvrtc")
def test_opencv_modes_compile_for_sm90():
    """The GPU code of every OpenCV mode builds to cubin without a GPU."""
    m = np.array([[0.9, 0.1, 1.0], [-0.1, 1.1, 2.0], [1e-3, 0, 1.0]])
    ops = [fkl.Resize(9, 7, interpolation=IM.CV_LINEAR),
           fkl.Resize(31, 27, interpolation=IM.CV_CUBIC),
           fkl.Resize(31, 5, interpolation=IM.CV_NEAREST),
           fkl.Resize(31, 5, interpolation=IM.CV_NEAREST_EXACT),
           fkl.Resize(9, 7, interpolation=IM.CV_AREA, aspect_ratio=fkl.PRESERVE_AR),
           fkl.Warping(m, 9, 7, interpolation=IM.CV_LINEAR, border=B.WRAP, value=3),
           fkl.Warping(m[:2], 9, 7, interpolation=IM.CV_NEAREST, border=B.CONSTANT, value=3)]
    for op in ops:
        for dtype in (np.uint8, np.float32):
            x = np.zeros((21, 19, 3), dtype)
            pipe = fkl.compose(fkl.TensorRead(), op, fkl.TensorWrite(), target="gpu")
            art = pipe.artifact(x, arch="sm_90", compiler="nvrtc")
            assert art.kind == "cubin" and art.data[:4] == b"\x7fELF", (op, dtype)


def test_resize_cv_linear_batch_of_crops_of_different_sizes(target, rng):
    """Each crop is resized with its own scale (computed in the kernel from its size)."""
    x = random_array(rng, (41, 47, 3), np.uint8)
    rects = [(1, 2, 17, 13), (5, 3, 31, 29), (0, 0, 9, 21)]
    got = run(target, x, fkl.Crop(rects), (3, 15, 19, 3),
              fkl.Resize(19, 15, interpolation=IM.CV_LINEAR))
    for k, (cx, cy, cw, ch) in enumerate(rects):
        near(got[k], cv2.resize(x[cy:cy + ch, cx:cx + cw], (19, 15),
                                interpolation=cv2.INTER_LINEAR))


# -- INTER_AREA's host tables (session 7) -----------------------------------------------
@pytest.mark.parametrize("n, d", [(1920, 1280), (45, 31), (37, 37), (1080, 224), (9, 4),
                                  (101, 1), (64, 32)])
def test_area_tables_are_the_covered_lengths(n, d):
    """Each destination pixel's cell [k*s, (k+1)*s), s = n/d, against the geometry: a
    source pixel's weight is its overlap with the cell over the cell's length (OpenCV drops
    a left or right sliver of at most 1e-3 pixel); the weights of a cell sum to 1."""
    from fkl._resampling import area_tables

    index, weights = area_tables(n, d)
    assert len(index) == 3 * d
    w32 = np.asarray(weights, np.float32)
    s = n / d
    for k in range(d):
        first, count, off = index[3 * k: 3 * k + 3]
        lo, hi = k * s, min((k + 1) * s, n)
        src = np.arange(first, first + count)
        overlap = np.clip(np.minimum(src + 1, hi) - np.maximum(src, lo), 0, None)
        want = overlap / (hi - lo)
        want[(overlap <= 1e-3 + 1e-9) & (want < 1)] = 0.0  # OpenCV's sliver rule
        got = w32[off: off + count]
        assert 0 <= first and first + count <= n, (k, first, count)
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-6, err_msg=f"cell {k}")
        assert abs(float(got.astype(np.float64).sum()) - 1.0) < 1e-5, k
        # every source pixel the cell covers by more than a sliver is in the range
        covered = [p for p in range(n) if min(p + 1, hi) - max(p, lo) > 1e-3]
        assert set(covered) <= set(src.tolist()), (k, covered, src)


def test_resize_area_with_per_item_backgrounds(target, rng):
    """The area tables come after a per-item background table: each item's border is
    its own value and its image OpenCV's INTER_AREA."""
    xs = random_array(rng, (3, 29, 61, 2), np.float32)
    bgs = [[1.0, 2.0], -3.0, [5.0, 6.0]]
    pipe = fkl.compose(fkl.TensorRead(), fkl.Resize(22, 21, interpolation=IM.CV_AREA,
                                                    aspect_ratio=fkl.PRESERVE_AR,
                                                    background=fkl.PerItem(bgs)),
                       fkl.TensorWrite(), target=target)
    out = poisoned((3, 21, 22, 2), np.float32)
    assert pipe(xs, out=out) is out
    tw, th, x1, y1 = fkl.letterbox(61, 29, 22, 21, fkl.PRESERVE_AR)
    assert th < 21  # there is a border to fill
    for k in range(3):
        want = np.empty((21, 22, 2), np.float32)
        want[...] = np.broadcast_to(np.asarray(bgs[k], np.float32), (2,))
        want[y1:y1 + th, x1:x1 + tw] = cv2.resize(xs[k], (tw, th),
                                                  interpolation=cv2.INTER_AREA)
        near(out[k], want)


@pytest.mark.parametrize("dw, dh", [(45, 13), (20, 29)], ids=["width", "height"])
def test_resize_area_keeps_a_side(target, rng, dw, dh):
    """INTER_AREA may keep one side as it is (only enlarging is refused): that axis's
    cells are single pixels of weight 1."""
    x = random_array(rng, (29, 45, 3), np.uint8)
    got = run(target, x, fkl.Resize(dw, dh, interpolation=IM.CV_AREA), (dh, dw, 3))
    near(got, cv2.resize(x, (dw, dh), interpolation=cv2.INTER_AREA))


@pytest.mark.parametrize("channels", [1, 4])
def test_warp_cv_per_item_constant_border_any_channel_count(target, rng, channels):
    """Per-item matrices with a CONSTANT border value per channel (1 or 4 channels; 3 is
    above): the matrix table comes after the values, and each item matches OpenCV's
    warpAffine. (Not 2: OpenCV 5.0's float32 2-channel warpAffine differs from its own
    4-channel result on the same two channels by up to 2.7 here; fkl matches the latter.)"""
    shape = (2, 15, 17) if channels == 1 else (2, 15, 17, channels)
    x = rng.uniform(0, 256, shape).astype(np.float32)
    ms = [random_matrix(rng, False) for _ in range(2)]
    value = tuple(float(v) for v in rng.integers(1, 256, channels))
    op = fkl.Warping(fkl.PerItem(ms), 13, 11, interpolation=IM.CV_LINEAR, border=B.CONSTANT,
                     value=value)
    got = run(target, x, op, (2, 11, 13) + shape[3:])
    for k in range(2):
        warp_near(got[k], cv2.warpAffine(x[k], ms[k], (13, 11),
                                         flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                                         borderValue=value + (0.0,) * (4 - channels)))


def test_warp_cv_value_is_unused_outside_a_constant_border(target, rng):
    """As cv2.warpAffine's borderValue, ``value`` only matters for a CONSTANT border: with
    REPLICATE, two values for a 3-channel image are not read (and not an error)."""
    x = rng.uniform(0, 256, (15, 17, 3)).astype(np.float32)
    m = random_matrix(rng, False)
    op = fkl.Warping(m, 13, 11, interpolation=IM.CV_LINEAR, border=B.REPLICATE,
                     value=(1.0, 2.0))
    got = run(target, x, op, (11, 13, 3))
    warp_near(got, cv2.warpAffine(x, m, (13, 11), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                                  borderMode=cv2.BORDER_REPLICATE, borderValue=(1.0, 2.0)))
