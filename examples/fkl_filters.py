"""Neighbourhood filters fused into one kernel: crop a region, blur it, take the Sobel
gradient, erode/dilate, median — each checked against OpenCV (or NumPy where OpenCV is
not installed) with the same border."""

from __future__ import annotations

import fkl
import numpy as np
from thork_core import plugins

target = plugins().target(None).name
rng = np.random.default_rng()
img = rng.integers(0, 256, (67, 91, 3), dtype=np.uint8)
B = fkl.BorderMode


def run(*ops: fkl.Op, x: np.ndarray = img) -> np.ndarray:
    return fkl.compose(fkl.TensorRead(), *ops, fkl.TensorWrite(), target=target)(x)


def padded(x: np.ndarray, r: int, mode: str) -> np.ndarray:
    """``x`` padded by ``r`` on both spatial axes with ``np.pad``'s ``mode``."""
    return np.pad(x, ((r, r), (r, r)) + ((0, 0),) * (x.ndim - 2), mode=mode)


def windows(x: np.ndarray, k: int, mode: str) -> np.ndarray:
    """Every k x k window of ``x`` (padded with ``mode``): shape (H, W, C, k, k)."""
    from numpy.lib.stride_tricks import sliding_window_view

    return sliding_window_view(padded(x, k // 2, mode), (k, k), axis=(0, 1))


# Crop -> 3x3 Gaussian (REFLECT_101, OpenCV's default) -> x2: one kernel. On uint8 the
# Gaussian is OpenCV's bit-exact fixed-point path: exact sums, halves rounded up.
roi = (5, 4, 61, 47)
kernel = np.outer([0.25, 0.5, 0.25], [0.25, 0.5, 0.25])  # the sigma-0 3x3 Gaussian
blurred = run(fkl.Crop(roi), fkl.GaussianBlur(3, 0), fkl.Mul(2), fkl.SaturateCast("uint8"))
crop = img[4:51, 5:66].astype(np.float64)
want = np.einsum("hwcij,ij->hwc", windows(crop, 3, "reflect"), kernel)  # exact: /16
want = np.clip(2 * np.floor(want + 0.5), 0, 255)
assert (blurred.astype(np.float64) == want).all()

# A 15x15 linear filter with runtime coefficients (a new kernel of the size reuses the
# compiled code), WRAP border, float32.
f = img.astype(np.float32) / 255
k15 = rng.normal(size=(15, 15)).astype(np.float32)
got = run(fkl.LinearFilter(k15, border=B.WRAP), x=f)
want = np.einsum("hwcij,ij->hwc", windows(f.astype(np.float64), 15, "wrap"), k15)
np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)

# Sobel dx on uint8 -> float32, exact (integer sums).
sob = run(fkl.Sobel(1, 0, border=B.REPLICATE))
sobel_x = np.outer([1, 2, 1], [-1, 0, 1])
np.testing.assert_array_equal(sob, np.einsum("hwcij,ij->hwc",
                                             windows(img.astype(np.float64), 3, "edge"),
                                             sobel_x))

# Erode / dilate (5x3 rectangle, REFLECT) and a 5x5 median (REPLICATE): exact.
w3 = windows(img, 5, "symmetric")[..., 1:4, :]  # rows 1..3 of the 5x5 window: kh=3
np.testing.assert_array_equal(run(fkl.Erode((5, 3), border=B.REFLECT)), w3.min(axis=(-2, -1)))
np.testing.assert_array_equal(run(fkl.Dilate((5, 3), border=B.REFLECT)), w3.max(axis=(-2, -1)))
med = np.median(windows(img, 5, "edge").reshape(*img.shape, 25), axis=-1)
np.testing.assert_array_equal(run(fkl.MedianBlur(5)), med.astype(np.uint8))

# The tiled form (shared-memory tile + halo per block) computes the same pixels.
np.testing.assert_array_equal(run(fkl.MedianBlur(5, tiled=True)), med.astype(np.uint8))
np.testing.assert_allclose(run(fkl.LinearFilter(k15, border=B.WRAP, tiled=True), x=f), want,
                           rtol=1e-4, atol=1e-4)

try:
    import cv2
except ImportError:
    cv2 = None
if cv2 is not None:  # the same filters straight against OpenCV
    np.testing.assert_array_equal(run(fkl.GaussianBlur((5, 5), 1.3)),
                                  cv2.GaussianBlur(img, (5, 5), 1.3))  # uint8: bit-exact
    np.testing.assert_array_equal(run(fkl.MedianBlur(5)), cv2.medianBlur(img, 5))
print(f"filters on {target}: OK")
