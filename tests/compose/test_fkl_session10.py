"""Session 10 (issue 14): FKL's ``linear`` Resize by whole factors on integer pixels
reads one tap per pixel instead of four (the plan's ``/1tap`` variant,
:meth:`fkl.Resize.whole_steps`), with every pixel's loads issued before the first store
when a thread computes several. The values must be bit for bit those of the four taps
(weights exactly (1, 0)) and NumPy's decimation ``src[y + s·j, x + s·i]``. Fresh random
inputs, odd sizes, crops touching every border, poisoned outputs, both targets."""

from __future__ import annotations

from typing import Any

import fkl
import numpy as np
import pytest
from fkl import _lowering
from fkl._kernels import reset_stats
from fkl._pixel import Geom, PixType
from helpers import TARGETS, poisoned, random_array
from thork_core import dt

pytestmark = pytest.mark.plugin("compose")

MEAN, STD = [0.4, 0.5, 0.6], [0.2, 0.25, 0.3]


def _pipe(target: str, rects: Any, w: int, h: int, one_tap: bool = True,
          columns: int | None = None, rows: int | None = None, norm: bool = True,
          **resize: Any) -> Any:
    r = fkl.Resize(w, h, **resize)
    r.one_tap = one_tap
    tail = [fkl.Mul(1 / 255), fkl.Sub(MEAN), fkl.Div(STD), fkl.TensorSplit()] if norm \
        else [fkl.TensorWrite()]
    head = [fkl.Crop(rects)] if rects is not None else []
    pipe = fkl.compose(fkl.TensorRead(), *head, r, *tail, target=target)
    pipe.variants.columns, pipe.variants.rows = columns, rows
    return pipe


def _forms(pipe: Any) -> list[str]:
    """The kernel forms the pipe built (``"grid:4/1tap"``...)."""
    return [str(k[1]) for k in pipe.kernels._built]


def _decimated(x: np.ndarray, rects: list[tuple[int, int, int, int]], sx: int,
               sy: int) -> np.ndarray:
    """NumPy's reference: each crop's pixels at whole steps, normalized, CHW float64."""
    out = np.stack([x[cy:cy + ch:sy, cx:cx + cw:sx] for cx, cy, cw, ch in rects])
    return ((out / 255.0 - np.asarray(MEAN)) / np.asarray(STD)).transpose(0, 3, 1, 2)


def _border_rects(rng: Any, hw: tuple[int, int], cw: int, ch: int, n: int
                  ) -> list[tuple[int, int, int, int]]:
    """``n`` rects of ``cw`` x ``ch``: the four corners of the frame first (crops touching
    every border), then random ones."""
    h, w = hw
    rects = [(0, 0), (w - cw, 0), (0, h - ch), (w - cw, h - ch)]
    rects += [(int(a), int(b)) for a, b in zip(rng.integers(0, w - cw + 1, n - 4),
                                                rng.integers(0, h - ch + 1, n - 4))]
    return [(a, b, cw, ch) for a, b in rects[:n]]


@pytest.mark.parametrize("sx,sy,shape", [(2, 2, (23, 17)), (3, 2, (13, 19)),
                                          (1, 4, (41, 9)), (5, 3, (7, 11))])
def test_one_tap_equals_four_taps_and_numpy(target, rng, sx, sy, shape) -> None:
    """Crops of ``sx·w`` x ``sy·h`` (odd sizes, at the frame's corners and at random)
    resized to ``w`` x ``h``: the one-tap kernel is chosen, and its output equals the
    four-tap kernel's bit for bit and NumPy's decimation within float32 rounding, for
    several (columns, rows) per thread (pixels past the plane's edge read clamped and
    store nothing: the poison outside stays out of the result)."""
    w, h = shape
    x = random_array(rng, (97, 131, 3), np.uint8)
    rects = _border_rects(rng, x.shape[:2], sx * w, sy * h, 7)
    want = _decimated(x, rects, sx, sy)
    four = _pipe(target, rects, w, h, one_tap=False, columns=1)
    ref = poisoned((7, 3, h, w), np.float32)
    assert four(x, out=ref) is ref
    assert not any(f.endswith("/1tap") for f in _forms(four))
    np.testing.assert_allclose(ref, want, rtol=0, atol=2e-6)
    for cols, rows in ((1, 1), (2, 1), (3, 2), (4, 1), (1, 3), (8, 2)):
        pipe = _pipe(target, rects, w, h, columns=cols, rows=rows)
        out = poisoned((7, 3, h, w), np.float32)
        assert pipe(x, out=out) is out
        assert _forms(pipe) and all(f.endswith("/1tap") for f in _forms(pipe)), \
            _forms(pipe)
        np.testing.assert_array_equal(out.view(np.uint32), ref.view(np.uint32),
                                      err_msg=f"columns={cols} rows={rows}")


def test_loads_first_off_gives_the_same(target, rng) -> None:
    """The benchmark knob ``LOADS_FIRST`` (each pixel's loads next to its store) changes
    the order of the code only: the same bits."""
    x = random_array(rng, (61, 83, 3), np.uint8)
    rects = _border_rects(rng, x.shape[:2], 38, 26, 5)
    outs = []
    old = _lowering.LOADS_FIRST
    try:
        for early in (True, False):
            _lowering.LOADS_FIRST = early
            reset_stats(clear_cache=True)
            pipe = _pipe(target, rects, 19, 13, columns=3, rows=2)
            out = poisoned((5, 3, 13, 19), np.float32)
            outs.append(pipe(x, out=out))
    finally:
        _lowering.LOADS_FIRST = old
        reset_stats(clear_cache=True)
    np.testing.assert_array_equal(outs[0].view(np.uint32), outs[1].view(np.uint32))
    np.testing.assert_allclose(outs[0], _decimated(x, rects, 2, 2), rtol=0, atol=2e-6)


@pytest.mark.parametrize("dtype,channels", [(np.uint16, 1), (np.int32, 4), (np.int8, 2)])
def test_one_tap_other_integer_dtypes(target, rng, dtype, channels) -> None:
    """Whole-image resizes of other integer pixels (no crop, no normalization, float32
    out): one tap, NumPy's decimation exactly (int32 beyond 2**24 rounds to float32 in
    both)."""
    x = random_array(rng, (2 * 13, 3 * 11, channels), dtype)
    pipe = _pipe(target, None, 11, 13, norm=False)
    out = poisoned((13, 11, channels), np.float32)
    assert pipe(x, out=out) is out
    assert all(f.endswith("/1tap") for f in _forms(pipe))
    np.testing.assert_array_equal(out, x[::2, ::3].astype(np.float32))
    four = _pipe(target, None, 11, 13, one_tap=False, norm=False)
    np.testing.assert_array_equal(four(x).reshape(out.shape).view(np.uint32),
                                  out.view(np.uint32))


def test_one_tap_letterboxed_and_image_batch(target, rng) -> None:
    """PRESERVE_AR onto a background (the resized part at whole factors) and a batch of
    same-size images: the one-tap kernel, the four taps' bits."""
    x = random_array(rng, (3, 34, 46, 3), np.uint8)
    for kw in ({"aspect_ratio": "PRESERVE_AR", "background": 7},
               {"aspect_ratio": "PRESERVE_AR_LEFT", "background": [1, 2, 3]}):
        outs = []
        for one_tap in (True, False):
            pipe = _pipe(target, None, 23, 21, one_tap=one_tap, norm=False, **kw)
            out = poisoned((3, 21, 23, 3), np.float32)
            outs.append(pipe(x, out=out))
            assert any(f.endswith("/1tap") for f in _forms(pipe)) == one_tap, kw
        np.testing.assert_array_equal(outs[0].view(np.uint32), outs[1].view(np.uint32))
    # IGNORE_AR 46x34 -> 23x17 is plain decimation
    got = _pipe(target, None, 23, 17, norm=False)(x)
    np.testing.assert_array_equal(got, x[:, ::2, ::2].astype(np.float32))


def test_four_taps_where_the_factor_is_not_whole(target, rng) -> None:
    """Fractional factors, crops of different sizes, float pixels, OpenCV's and FKL's
    other modes keep the general kernel (no ``/1tap``), with FKL's bilinear values."""
    x = random_array(rng, (57, 71, 3), np.uint8)
    cases = [([(0, 0, 45, 34), (26, 23, 45, 34)], {}, np.uint8),      # 45 / 23
             ([(0, 0, 46, 34), (25, 23, 44, 34)], {}, np.uint8),      # ragged
             ([(0, 0, 46, 34), (25, 23, 46, 34)], {}, np.float32),    # float pixels
             ([(0, 0, 46, 34)], {"interpolation": "cv_linear"}, np.uint8),
             ([(0, 0, 46, 34)], {"interpolation": "nearest"}, np.uint8)]
    for rects, kw, dtype in cases:
        pipe = _pipe(target, rects, 23, 17, norm=False, **kw)
        got = pipe(x.astype(dtype))
        assert not any(f.endswith("/1tap") for f in _forms(pipe)), (rects, kw, dtype)
        if kw or dtype != np.uint8:
            continue
        for k, (cx, cy, cw, ch) in enumerate(rects):  # FKL's bilinear in float64
            crop = x[cy:cy + ch, cx:cx + cw].astype(np.float64)
            fx, fy = np.float32(cw) / np.float32(23), np.float32(ch) / np.float32(17)
            sxs = (np.arange(23, dtype=np.float32) * fx).astype(np.float64)
            sys_ = (np.arange(17, dtype=np.float32) * fy).astype(np.float64)
            x1, y1 = np.floor(sxs).astype(int), np.floor(sys_).astype(int)
            ax, ay = (sxs - x1)[None, :, None], (sys_ - y1)[:, None, None]
            x2, y2 = np.minimum(x1 + 1, cw - 1), np.minimum(y1 + 1, ch - 1)
            top = crop[y1][:, x1] * (1 - ax) + crop[y1][:, x2] * ax
            bot = crop[y2][:, x1] * (1 - ax) + crop[y2][:, x2] * ax
            # The kernel's float32 source position may be contracted into an FMA (clang
            # does: x * fx - x1 unrounded), moving a weight by up to one ulp of sx (2**-18
            # below 64) times a pixel step of up to 255 in each axis: <= 2e-3.
            np.testing.assert_allclose(got[k], top * (1 - ay) + bot * ay, atol=2e-3)


def test_whole_steps_rule() -> None:
    """:meth:`fkl.Resize.whole_steps`: FKL's linear, integer pixels, one plane size,
    float32 scales that are whole numbers; the knob turns it off."""
    u8, f32 = PixType(dt.uint8, 3), PixType(dt.float32, 3)
    r = fkl.Resize(224, 224)
    assert r.whole_steps(Geom(448, 448, 64), u8)
    assert r.whole_steps(Geom(224, 672), u8)            # factors 1 and 3
    assert not r.whole_steps(Geom(448, 447), u8)
    assert not r.whole_steps(Geom(112, 112), u8)        # an enlargement: 0.5
    assert not r.whole_steps(Geom(448, 448, 4, ragged=True), u8)
    assert not r.whole_steps(Geom(448, 448), f32)
    assert not r.whole_steps(Geom(448, 448), PixType(dt.uint8, 3, 2))
    assert not fkl.Resize(224, 224, interpolation="cv_linear").whole_steps(
        Geom(448, 448), u8)
    r.one_tap = False
    assert not r.whole_steps(Geom(448, 448), u8)


@pytest.mark.skipif("gpu" not in TARGETS, reason="no GPU visible")
def test_64_crops_of_a_4k_frame_on_the_gpu(rng) -> None:
    """[gpu] The bench's shape: 64 crops 448² of a 3840x2160 frame -> 224² normalized
    CHW (default 4 pixels per thread, one tap, loads first) on device arrays: NumPy's
    decimation, and the four-tap kernel's bits."""
    from thork_core._device_array import DeviceArray

    x = random_array(rng, (2160, 3840, 3), np.uint8)
    rects = _border_rects(rng, x.shape[:2], 448, 448, 64)
    frame = DeviceArray.from_host(x)
    outs = []
    for one_tap in (True, False):
        pipe = _pipe("gpu", rects, 224, 224, one_tap=one_tap)
        out = DeviceArray((64, 3, 224, 224), "float32")
        out.copy_from_host(poisoned((64, 3, 224, 224), np.float32))
        pipe(frame, out=out)
        plan = next(iter(pipe._plans.values()))
        assert plan.built.lowered.cols == 4
        assert any(f.endswith("/1tap") for f in _forms(pipe)) == one_tap
        outs.append(out.to_host())
    np.testing.assert_array_equal(outs[0].view(np.uint32), outs[1].view(np.uint32))
    np.testing.assert_allclose(outs[0], _decimated(x, rects, 2, 2), rtol=0, atol=2e-6)
