"""fkl geometry (ReadBack) ops and backward vertical fusion against NumPy (and OpenCV where
the conventions coincide), plus the pins of fkl-semantics.md."""

from __future__ import annotations

import fkl
import numpy as np
import pytest
from helpers import random_array
from helpers.fkl_refs import ref_resize, ref_warp

pytestmark = pytest.mark.plugin("compose")


def chain(target: str, *ops):
    return fkl.compose(fkl.TensorRead(), *ops, fkl.TensorWrite(), target=target)


def close(a, b, rtol=1e-5, atol=1e-4):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64),
                               rtol=rtol, atol=atol)


# -- Crop ---------------------------------------------------------------------------------
def test_crop(target, rng):
    x = random_array(rng, (17, 23, 3), np.uint8)
    np.testing.assert_array_equal(chain(target, fkl.Crop((3, 5, 11, 7)))(x), x[5:12, 3:14])
    # Changing the rect reuses the kernel.
    before = fkl.stats()["builds"]
    np.testing.assert_array_equal(chain(target, fkl.Crop((0, 0, 23, 17)))(x), x)
    np.testing.assert_array_equal(chain(target, fkl.Crop((22, 16, 1, 1)))(x), x[16:, 22:])
    assert fkl.stats()["builds"] == before


# -- Resize -------------------------------------------------------------------------------
def test_resize_pins(target):
    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    np.testing.assert_array_equal(chain(target, fkl.Resize(2, 2))(a), [[0, 2], [8, 10]])
    b = np.array([[0, 10], [20, 30]], dtype=np.float32)
    np.testing.assert_array_equal(chain(target, fkl.Resize(4, 4))(b), [
        [0, 5, 10, 10], [10, 15, 20, 20], [20, 25, 30, 30], [20, 25, 30, 30]])


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_resize_random(target, rng, dtype):
    x = random_array(rng, (19, 27, 3), dtype)
    for dw, dh in ((13, 7), (41, 33), (27, 19)):
        got = chain(target, fkl.Resize(dw, dh))(x)
        assert got.dtype == np.float32 and got.shape == (dh, dw, 3)
        close(got, ref_resize(x, dw, dh))


def test_resize_preserve_ar_pin(target, rng):
    x = random_array(rng, (50, 100, 3), np.uint8)  # w=100, h=50
    got = chain(target, fkl.Resize(64, 64, aspect_ratio=fkl.PRESERVE_AR, background=114))(x)
    assert (got[:16] == 114).all() and (got[48:] == 114).all()
    close(got[16:48], ref_resize(x, 64, 32))


@pytest.mark.parametrize("mode", [fkl.PRESERVE_AR, fkl.PRESERVE_AR_LEFT,
                                  fkl.PRESERVE_AR_RN_EVEN])
def test_resize_aspect_ratio_modes(target, rng, mode):
    x = random_array(rng, (31, 17, 2), np.float32)  # tall: pillarbox
    dw, dh = 45, 29
    bg = [float(v) for v in rng.standard_normal(2)]
    got = chain(target, fkl.Resize(dw, dh, aspect_ratio=mode, background=bg))(x)
    tw, th, x1, y1 = fkl.letterbox(17, 31, dw, dh, mode)
    ref = np.empty((dh, dw, 2), np.float32)
    ref[...] = np.float32(bg)
    ref[y1:y1 + th, x1:x1 + tw] = ref_resize(x, tw, th)
    close(got, ref)
    if mode == fkl.PRESERVE_AR_RN_EVEN:  # height fits first: the scaled width is evened,
        assert (tw, th) == (16, 29)        # the output's odd height kept (FKL's rule)
    if mode == fkl.PRESERVE_AR_LEFT:
        assert x1 == 0


@pytest.mark.parametrize(("src", "dst", "mode", "placed"), [
    # Pins from running the FKL C++ library on these sizes (w, h): (tw, th, x1, y1).
    ((10, 10), (20, 15), "PRESERVE_AR_RN_EVEN", (14, 15, 3, 0)),
    ((400, 300), (223, 224), "PRESERVE_AR_RN_EVEN", (223, 166, 0, 29)),
    ((225, 224), (224, 224), "PRESERVE_AR_RN_EVEN", (224, 224, 0, 0)),
    # float32 scale: 117/14 * 7 is 58.4999971 in float32 (58.5, rounding to 59, in float64)
    ((14, 7), (117, 157), "PRESERVE_AR", (117, 58, 0, 49)),
    ((100, 50), (64, 64), "PRESERVE_AR", (64, 32, 0, 16)),
])
def test_letterbox_matches_fkl(src, dst, mode, placed):
    assert fkl.letterbox(*src, *dst, mode) == placed


def test_letterbox_rn_even_odd_height_kept_in_the_image(target, rng):
    """10x10 -> 20x15 RN_EVEN: a 14x15 image at (3, 0); the rest is the background."""
    x = random_array(rng, (10, 10, 3), np.float32)
    got = chain(target, fkl.Resize(20, 15, aspect_ratio=fkl.PRESERVE_AR_RN_EVEN,
                                   background=-7.0))(x)
    ref = np.full((15, 20, 3), -7.0, np.float32)
    ref[0:15, 3:17] = ref_resize(x, 14, 15)
    close(got, ref)


@pytest.mark.parametrize("src, dst", [((15, 21), (11, 9)), ((5, 4), (13, 12))],
                         ids=["down", "up"])
def test_resize_nearest(target, rng, src, dst):
    """FKL's nearest: source index int(x * (sw / dw)) in float32; upscaling reaches the
    last row and column (the clamp to the image must not cut them)."""
    (sh, sw), (dh, dw) = src, dst
    x = random_array(rng, src, np.float32)
    got = chain(target, fkl.Resize(dw, dh, interpolation="nearest"))(x)
    fx, fy = np.float32(sw) / np.float32(dw), np.float32(sh) / np.float32(dh)
    xs = (np.arange(dw, dtype=np.float32) * fx).astype(int)
    ys = (np.arange(dh, dtype=np.float32) * fy).astype(int)
    assert xs[0] == 0 and ys[0] == 0 and xs.max() <= sw - 1 and ys.max() <= sh - 1
    close(got, x[ys][:, xs])


def test_resize_values_do_not_recompile(target, rng):
    x = random_array(rng, (19, 27, 3), np.float32)
    chain(target, fkl.Resize(10, 10))(x)
    before = fkl.stats()["builds"]
    for dw, dh in ((5, 9), (33, 3)):
        close(chain(target, fkl.Resize(dw, dh))(x), ref_resize(x, dw, dh))
    assert fkl.stats()["builds"] == before


# -- backward fusion ordering -------------------------------------------------------------
def test_ordering_rule_min_before_resize(target, rng):
    x = rng.integers(0, 256, (21, 25)).astype(np.uint8)
    got = chain(target, fkl.Cast("float32"), fkl.Min(100.0), fkl.Resize(11, 13))(x)
    ref = ref_resize(np.minimum(x.astype(np.float32), 100), 11, 13)
    close(got, ref)
    # Not the same as resizing first when values straddle 100: this guards the rule.
    after = np.minimum(ref_resize(x.astype(np.float32), 11, 13), 100)
    assert not np.allclose(ref, after) or np.allclose(got, after)


def test_compute_after_last_readback_runs_once(target, rng):
    x = random_array(rng, (21, 25, 3), np.float32)
    got = chain(target, fkl.Mul(2.0), fkl.Crop((2, 3, 15, 11)), fkl.Resize(9, 7),
                fkl.Add(1.0))(x)
    close(got, ref_resize((x * 2)[3:14, 2:17], 9, 7) + 1)


def test_crop_resize_crop(target, rng):
    x = random_array(rng, (23, 29, 3), np.uint8)
    got = chain(target, fkl.Crop((1, 2, 20, 17)), fkl.Resize(31, 25), fkl.Crop((3, 4, 10, 9))
                )(x)
    close(got, ref_resize(x[2:19, 1:21], 31, 25)[4:13, 3:13])


# -- Warping ------------------------------------------------------------------------------
def test_warp_affine_and_perspective(target, rng):
    x = random_array(rng, (19, 23, 3), np.float32)
    a = np.array([[0.9, 0.1, 2.3], [-0.15, 1.1, -1.7]], np.float32)
    close(chain(target, fkl.Warping(a, 25, 17))(x), ref_warp(x, a, 25, 17))
    p = np.array([[1.0, 0.05, 1.5], [0.02, 0.95, -2.0], [0.001, 0.002, 1.0]], np.float32)
    close(chain(target, fkl.Warping(p, 21, 21))(x), ref_warp(x, p, 21, 21))


def test_warp_affine_vs_opencv_integer_translation(target, rng):
    cv2 = pytest.importorskip("cv2")
    x = rng.integers(0, 256, (19, 23, 3)).astype(np.uint8)
    m = np.array([[1, 0, 3], [0, 1, -4]], np.float32)  # dst -> src
    got = chain(target, fkl.Warping(m, 23, 19))(x)
    ref = cv2.warpAffine(x, m, (23, 19), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                         borderMode=cv2.BORDER_CONSTANT, borderValue=0)
    np.testing.assert_array_equal(got, ref.astype(np.float32))


# -- BorderReader -------------------------------------------------------------------------
PAD_MODES = {"CONSTANT": "constant", "REPLICATE": "edge", "REFLECT": "symmetric",
             "REFLECT_101": "reflect", "WRAP": "wrap"}


@pytest.mark.parametrize("mode", list(PAD_MODES))
def test_border_reader_any_overshoot(target, rng, mode):
    x = random_array(rng, (5, 7, 2), np.int16)
    pad = 23  # several periods past the image on every side
    kw = {"constant_values": 9} if mode == "CONSTANT" else {}
    ref = np.pad(x, ((pad, pad), (pad, pad), (0, 0)), mode=PAD_MODES[mode], **kw)
    got = chain(target, fkl.BorderReader(mode, 9),
                fkl.Crop((-pad, -pad, 7 + 2 * pad, 5 + 2 * pad)))(x)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("mode", list(PAD_MODES))
def test_border_reader_vs_opencv(target, rng, mode):
    cv2 = pytest.importorskip("cv2")
    x = rng.integers(0, 256, (9, 11, 3)).astype(np.uint8)
    t, b, lft, r = 3, 5, 4, 2
    cv_mode = {"CONSTANT": cv2.BORDER_CONSTANT, "REPLICATE": cv2.BORDER_REPLICATE,
               "REFLECT": cv2.BORDER_REFLECT, "REFLECT_101": cv2.BORDER_REFLECT_101,
               "WRAP": cv2.BORDER_WRAP}[mode]
    ref = cv2.copyMakeBorder(x, t, b, lft, r, cv_mode, value=(7, 7, 7))
    got = chain(target, fkl.BorderReader(mode, 7), fkl.Crop((-lft, -t, 11 + lft + r, 9 + t + b)))(x)
    np.testing.assert_array_equal(got, ref)


def test_border_reader_single_pixel_reflect101(target):
    x = np.array([[42.0]], np.float32)
    got = chain(target, fkl.BorderReader("REFLECT_101"), fkl.Crop((-3, -2, 7, 5)))(x)
    np.testing.assert_array_equal(got, np.full((5, 7), 42.0, np.float32))


def test_border_then_resize(target, rng):
    x = random_array(rng, (9, 13), np.float32)
    got = chain(target, fkl.BorderReader("REFLECT"), fkl.Crop((-4, -3, 21, 15)),
                fkl.Resize(10, 8))(x)
    close(got, ref_resize(np.pad(x, ((3, 3), (4, 4)), mode="symmetric"), 10, 8))


# -- Deinterlace --------------------------------------------------------------------------
def test_deinterlace(target, rng):
    x = random_array(rng, (11, 9, 3), np.uint8)
    f = x.astype(np.float32)
    blend = f.copy()
    blend[1:] = (f[1:] + f[:-1] + 1) * np.float32(0.5)
    close(chain(target, fkl.Deinterlace("BLEND"))(x), blend)
    h = f.shape[0]
    for mode, keep in (("LINEAR_EVEN", 0), ("LINEAR_ODD", 1)):
        ref = f.copy()
        for y in range(h):
            if y % 2 != keep:
                a = y - 1 if y > 0 else y + 1
                b = y + 1 if y + 1 < h else y - 1
                ref[y] = (f[a] + f[b] + 1) * np.float32(0.5)
        close(chain(target, fkl.Deinterlace(mode))(x), ref)
