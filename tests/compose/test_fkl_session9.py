"""Session 9 (issues 14 and 21): the uint8 Gaussian's bit-exact fixed-point arithmetic
(equal to cv2.GaussianBlur), the tiled filters' whole-word tile loads and output-row
stores (and the scalar kernel misaligned arrays fall back to), several output pixels per
thread of the 2-D kernel (``pipe.variants.columns``), and INTER_AREA cells without
zero-weight slivers. Fresh random inputs, odd sizes, poisoned outputs; references from
OpenCV / NumPy."""

from __future__ import annotations

from typing import Any

import fkl
import numpy as np
import pytest
from fkl._pixel import PixType
from helpers import TARGETS, poisoned, random_array
from thork_core import dt

pytestmark = pytest.mark.plugin("compose")

B = fkl.BorderMode


def opencv() -> Any:
    """cv2, or skip the test (only the tests that compare with OpenCV need it)."""
    return pytest.importorskip("cv2")


def cv_border(mode: str) -> int:
    cv2 = opencv()
    return {B.CONSTANT: cv2.BORDER_CONSTANT, B.REPLICATE: cv2.BORDER_REPLICATE,
            B.REFLECT: cv2.BORDER_REFLECT, B.REFLECT_101: cv2.BORDER_REFLECT_101}[mode]


def run(target: str, x: np.ndarray, op: fkl.Op, debug: bool = False) -> np.ndarray:
    """TensorRead → op → TensorWrite into a poisoned output of x's shape."""
    pipe = fkl.compose(fkl.TensorRead(), op, fkl.TensorWrite(), target=target, debug=debug)
    out = poisoned(x.shape, x.dtype)
    assert pipe(x, out=out) is out
    return out


# -- GaussianBlur on uint8: OpenCV's fixed point ------------------------------------------
def test_gaussian_kernel_q8_is_opencv_fixed_point() -> None:
    """Units of 1/256 summing to exactly 256, symmetric, non-negative; OpenCV's fixed
    tables for sigma <= 0 (n <= 7) are exact in 8.8."""
    assert fkl.gaussian_kernel_q8(3, 0) == [64, 128, 64]
    assert fkl.gaussian_kernel_q8(5, 0) == [16, 64, 96, 64, 16]
    assert fkl.gaussian_kernel_q8(1, 2.0) == [256]
    for n in (3, 5, 7, 9, 11, 13, 15):
        for sigma in (0.0, 0.3, 0.8, 1.7, 4.0):
            k = fkl.gaussian_kernel_q8(n, sigma)
            assert sum(k) == 256 and k == k[::-1] and min(k) >= 0, (n, sigma, k)
            # within the error diffusion's reach of the exact kernel (OpenCV's float one)
            want = np.asarray(fkl.gaussian_kernel(n, sigma)) * 256
            assert np.abs(np.asarray(k) - want).max() <= 1.0, (n, sigma, k)


@pytest.mark.parametrize("channels,border", [(1, B.REFLECT_101), (3, B.REPLICATE),
                                             (4, B.REFLECT), (2, B.REFLECT_101)])
def test_gaussian_uint8_equals_opencv(target, rng, channels, border) -> None:
    """Equal to cv2.GaussianBlur on every pixel, for random sigmas (also 0: OpenCV's
    tables) and window sides up to 15, tiled and untiled (packed tiles for 2 to 4
    channels), where OpenCV's own float path would differ by up to 2."""
    for _ in range(3):
        kw, kh = (int(v) for v in rng.choice([1, 3, 5, 7, 9, 15], 2))
        sx = float(rng.choice([0.0, rng.uniform(0.3, 3.0)]))
        sy = float(rng.choice([0.0, rng.uniform(0.3, 3.0)]))
        h, w = (int(v) * 2 + 1 for v in rng.integers(4, 40, 2))
        x = random_array(rng, (h, w, channels) if channels > 1 else (h, w), np.uint8)
        want = opencv().GaussianBlur(x, (kw, kh), sx, sigmaY=sy, borderType=cv_border(border))
        for tiled in (None, True, False):
            got = run(target, x, fkl.GaussianBlur((kw, kh), sx, sy, border=border,
                                                  tiled=tiled))
            np.testing.assert_array_equal(got, want, err_msg=f"{(kw, kh, sx, sy, tiled)}")


def test_gaussian_uint8_constant_border_and_runtime_sigma(rng) -> None:
    """CONSTANT with a value equals OpenCV on the image padded with it; a new sigma of the
    same window size reuses the compiled kernel (the coefficients are runtime ints)."""
    cv2 = opencv()
    x = random_array(rng, (37, 45, 3), np.uint8)
    pad = cv2.copyMakeBorder(x, 2, 2, 1, 1, cv2.BORDER_CONSTANT, value=[90] * 4)
    want = cv2.GaussianBlur(pad, (3, 5), 1.1, borderType=cv2.BORDER_REPLICATE)[2:-2, 1:-1]
    got = run("cpu", x, fkl.GaussianBlur((3, 5), 1.1, border=B.CONSTANT, value=90,
                                         tiled=True))
    np.testing.assert_array_equal(got, want)
    before = fkl.stats()["builds"]
    got = run("cpu", x, fkl.GaussianBlur((3, 5), 2.3, border=B.CONSTANT, value=90,
                                         tiled=True))
    assert fkl.stats()["builds"] == before
    want = cv2.GaussianBlur(pad, (3, 5), 2.3, borderType=cv2.BORDER_REPLICATE)[2:-2, 1:-1]
    np.testing.assert_array_equal(got, want)


def test_gaussian_uint8_packed_lanes_do_not_carry(rng) -> None:
    """Values near 255 in every channel (each 16-bit lane's row sum reaches 255 * 256):
    the packed tile's lane arithmetic keeps channels apart, for 2 and 4 channels."""
    cv2 = opencv()
    for channels in (2, 4):
        x = (255 - random_array(rng, (33, 70, channels), np.uint8) % 3).astype(np.uint8)
        op = fkl.GaussianBlur(15, 2.0, tiled=True)
        op.tile_packed = True
        np.testing.assert_array_equal(run("cpu", x, op), cv2.GaussianBlur(x, (15, 15), 2.0))


# -- whole-word tile loads and output-row stores ----------------------------------------
#: (h, w[, batch]): widths that make rows word-aligned (w * C % 4 == 0 for C = 3) and
#: not, interior blocks (the word loads) and edge blocks, a batch of planes, a plane
#: smaller than one block.
WORD_SIZES = [(70, 132), (97, 100), (70, 131), (66, 96, 2), (9, 8), (40, 257)]


def _filters(vec: str | None) -> list[fkl.Op]:
    out = []
    for op in (fkl.BoxFilter(3, tiled=True), fkl.GaussianBlur((5, 3), 1.2, tiled=True),
               fkl.BoxFilter((3, 5), border=B.CONSTANT, value=7, tiled=True)):
        op.tile_vec = vec
        out.append(op)
    return out


@pytest.mark.parametrize("channels", [2, 3, 4])
def test_word_loads_and_stores_equal_the_untiled_kernel(target, rng, channels) -> None:
    """Every tile_vec setting (the default: none; both, loads only, stores only) gives the
    untiled kernel's pixels, on sizes with and without word-aligned rows, batches and
    planes smaller than a block; a kernel with word accesses asks for 4-byte-aligned
    arrays, the default and the scalar form for none."""
    for size in WORD_SIZES:
        h, w = size[:2]
        shape = (*size[2:], h, w, channels)
        x = random_array(rng, shape, np.uint8)
        refs = [run(target, x, fkl.BoxFilter(3, tiled=False)),
                run(target, x, fkl.GaussianBlur((5, 3), 1.2, tiled=False)),
                run(target, x, fkl.BoxFilter((3, 5), border=B.CONSTANT, value=7,
                                             tiled=False))]
        for vec in (None, "both", "load", "store", "none"):
            for op, ref in zip(_filters(vec), refs):
                np.testing.assert_array_equal(run(target, x, op), ref,
                                              err_msg=f"{size} {op.name} vec={vec}")
    t = PixType(dt.uint8, channels)
    for vec, align in ((None, 0), ("both", 4), ("load", 4), ("store", 4 if channels > 2
                                                                       else 0)):
        op = fkl.BoxFilter(3)
        op.tile_vec = vec
        pipe = fkl.compose(fkl.TensorRead(), op, fkl.TensorWrite(), target="gpu")
        assert pipe.lowered(t, "grid", "gpu").align == align, vec
        assert pipe.lowered(t, "scalar", "gpu").align == 0


def test_word_paths_are_bounds_checked_and_opencv(rng) -> None:
    """The word paths under debug mode (every access bounds-checked: a word load or store
    outside an array raises) on the CPU target, and against OpenCV."""
    cv2 = opencv()
    for h, w in ((70, 132), (35, 64)):
        x = random_array(rng, (h, w, 3), np.uint8)
        gauss, box3 = fkl.GaussianBlur(3, 0.8, tiled=True), fkl.BoxFilter(3, tiled=True)
        gauss.tile_vec = box3.tile_vec = "both"
        got = run("cpu", x, gauss, debug=True)
        np.testing.assert_array_equal(got, cv2.GaussianBlur(x, (3, 3), 0.8))
        box = run("cpu", x, box3, debug=True)
        diff = np.abs(box.astype(int) - cv2.blur(x, (3, 3)).astype(int))
        assert diff.max() <= 1


def test_misaligned_arrays_run_the_scalar_kernel(rng) -> None:
    """An input or output one byte off a word boundary (views into larger buffers) runs
    the plan's fallback, the kernel without word accesses: the same pixels."""
    x = random_array(rng, (70, 132, 3), np.uint8)
    op = fkl.BoxFilter(3, tiled=True)
    op.tile_vec = "both"
    pipe = fkl.compose(fkl.TensorRead(), op, fkl.TensorWrite(), target="cpu")
    ref = run("cpu", x, fkl.BoxFilter(3, tiled=False))
    buf = np.empty(x.size + 3, np.uint8)
    xo = buf[1:1 + x.size].reshape(x.shape)
    xo[...] = x
    np.testing.assert_array_equal(pipe(xo), ref)
    obuf = np.full(x.size + 3, 255, np.uint8)
    out = obuf[3:].reshape(x.shape)
    assert pipe(x, out=out) is out
    np.testing.assert_array_equal(out, ref)
    assert (obuf[:3] == 255).all()
    plan = next(iter(pipe._plans.values()))
    assert plan.align_mask == 3 and plan.fallback is not None
    assert plan.fallback.built.lowered.align == 0
    np.testing.assert_array_equal(pipe(x), ref)  # aligned again: the word kernel


@pytest.mark.skipif("gpu" not in TARGETS, reason="no GPU visible")
def test_misaligned_device_arrays_on_the_gpu(rng) -> None:
    """[gpu] Device views one byte off: the hot path's guard refuses them and the call
    runs the scalar kernel; aligned calls after them run the word kernel again."""
    from thork_core._device_array import DeviceArray

    x = random_array(rng, (70, 132, 3), np.uint8)
    ref = run("cpu", x, fkl.GaussianBlur(3, 0.8, tiled=False))
    op = fkl.GaussianBlur(3, 0.8)
    op.tile_vec = "both"
    pipe = fkl.compose(fkl.TensorRead(), op, fkl.TensorWrite(), target="gpu")
    big = DeviceArray.from_host(np.concatenate([np.zeros(1, np.uint8), x.reshape(-1)]))
    odd = DeviceArray.wrap(big.ptr + 1, x.shape, "uint8", owner=big)
    even = DeviceArray.from_host(x)
    out = DeviceArray(x.shape, "uint8")
    for src in (even, odd, odd, even, even):
        out.copy_from_host(poisoned(x.shape, np.uint8))
        pipe(src, out=out)
        np.testing.assert_array_equal(out.to_host(), ref)


# -- several output pixels per thread ---------------------------------------------------
def _crop_chain(rects: list[tuple[int, int, int, int]]) -> list[fkl.Op]:
    return [fkl.TensorRead(), fkl.Crop(rects), fkl.Resize(37, 23), fkl.Mul(1 / 255),
            fkl.Sub([0.4, 0.5, 0.6]), fkl.Div([0.2, 0.25, 0.3]), fkl.TensorSplit()]


def test_columns_per_thread_equal_one(target, rng) -> None:
    """A crop batch resized and normalized: every column count (1 to 8, widths not
    multiples of 32 * N) gives the one-pixel-per-thread result within a few float32 ulps
    (a compiler may contract ``a * b + c`` into an FMA differently in each variant: clang
    does, on the H200 in session 9), and NumPy's. A wrong or missed pixel differs by
    ~0.02 or stays NaN."""
    x = random_array(rng, (61, 97, 3), np.uint8)
    rects = [(int(a), int(b), int(c), int(d)) for a, b, c, d in zip(
        rng.integers(0, 40, 5), rng.integers(0, 20, 5), rng.integers(9, 57, 5),
        rng.integers(9, 41, 5))]
    one = fkl.compose(*_crop_chain(rects), target=target)
    one.variants.columns = 1
    ref = one(x)
    # FKL's bilinear sample at x * (w / 37), in float64 (fkl: float32, so 1e-4).
    for k, (cx, cy, cw, ch) in enumerate(rects):
        crop = x[cy:cy + ch, cx:cx + cw].astype(np.float64)
        sx, sy = np.arange(37) * np.float32(cw / 37), np.arange(23) * np.float32(ch / 23)
        x1, y1 = np.floor(sx).astype(int), np.floor(sy).astype(int)
        ax, ay = (sx - x1)[None, :, None], (sy - y1)[:, None, None]
        x2, y2 = np.minimum(x1 + 1, cw - 1), np.minimum(y1 + 1, ch - 1)
        top = crop[y1][:, x1] * (1 - ax) + crop[y1][:, x2] * ax
        bot = crop[y2][:, x1] * (1 - ax) + crop[y2][:, x2] * ax
        want = ((top * (1 - ay) + bot * ay) / 255 - [0.4, 0.5, 0.6]) / [0.2, 0.25, 0.3]
        np.testing.assert_allclose(ref[k], want.transpose(2, 0, 1), atol=2e-4)
    for n in (2, 3, 4, 7, 8):
        pipe = fkl.compose(*_crop_chain(rects), target=target)
        pipe.variants.columns = n
        out = poisoned(ref.shape, np.float32)
        assert pipe(x, out=out) is out
        np.testing.assert_allclose(out, ref, rtol=0, atol=2e-6, err_msg=f"columns={n}")
        plan = next(iter(pipe._plans.values()))
        assert plan.built.lowered.cols == n and plan.grid[0] == -(-37 // (32 * n))
    for n, m in ((1, 2), (1, 3), (2, 4), (3, 8)):  # and rows per thread
        pipe = fkl.compose(*_crop_chain(rects), target=target)
        pipe.variants.columns, pipe.variants.rows = n, m
        out = poisoned(ref.shape, np.float32)
        assert pipe(x, out=out) is out
        np.testing.assert_allclose(out, ref, rtol=0, atol=2e-6,
                                   err_msg=f"columns={n} rows={m}")
        plan = next(iter(pipe._plans.values()))
        assert plan.built.lowered.rows == m and plan.grid[1] == -(-23 // (8 * m))


def test_columns_default_and_errors() -> None:
    """The default: 4 on GPU targets for a resampling chain's outputs of 2**21 pixels or
    more, else 1 (the CPU target, smaller outputs, chains whose last geometry op does not
    resample); the knob is checked."""
    x = np.zeros((64, 64, 3), np.uint8)
    big = fkl.compose(*_crop_chain([(0, 0, 9, 9)]), target="gpu")
    t = big._pixtype(x, None, 1)
    assert big.variants.grid_columns(t, 1 << 21, "gpu") == 4
    assert big.variants.grid_columns(t, (1 << 21) - 1, "gpu") == 1
    assert big.variants.grid_columns(t, 1 << 22, "cpu") == 1
    crop = fkl.compose(fkl.TensorRead(), fkl.Crop((0, 0, 9, 9)), fkl.TensorWrite(),
                       target="gpu")
    assert crop.variants.grid_columns(t, 1 << 22, "gpu") == 1
    big.variants.columns = 9
    with pytest.raises(fkl.ArgumentError, match="columns: expected an int from 1 to 8"):
        big.variants.grid_columns(t, 10, "gpu")
    big.variants.columns, big.variants.rows = 2, 0
    with pytest.raises(fkl.ArgumentError, match="rows: expected an int from 1 to 8"):
        big.variants.grid_shape(t, 10, "gpu")
    big.variants.rows = 3
    assert big.variants.grid_shape(t, 10, "gpu") == (2, 3)
    sources = set()
    for n in (1, 4):
        big.variants.columns = n
        variant = "grid" if n == 1 else f"grid:{n}"
        sources.add(big.source(x, variant=variant))
    assert len(sources) == 2


# -- INTER_AREA: no zero-weight slivers ---------------------------------------------------
def test_area_cells_leave_out_slivers(target, rng) -> None:
    """1080p -> 720p cells are 2 source pixels per axis (OpenCV's table), not 3 with a
    zero weight; results stay OpenCV's."""
    cv2 = opencv()
    from fkl._resampling import area_tables

    for n, d in ((1920, 1280), (1080, 720), (64, 32)):
        index, weights = area_tables(n, d)
        counts = index[1::3]
        assert max(counts) == 2 and min(counts) == 2, (n, d)
        assert 0.0 not in weights
    x = random_array(rng, (54, 96, 3), np.uint8)
    pipe = fkl.compose(fkl.TensorRead(), fkl.Resize(64, 36, interpolation="cv_area"),
                       fkl.TensorWrite(), target=target)
    out = poisoned((36, 64, 3), np.uint8)
    got = pipe(x, out=out)
    diff = np.abs(got.astype(int) - cv2.resize(x, (64, 36),
                                               interpolation=cv2.INTER_AREA).astype(int))
    assert diff.max() <= 1 and (diff == 0).mean() >= 0.95
