"""OpenCV's resize and warp conventions in fkl (docs/fkl-resize.md), checked against NumPy
references written from those conventions: INTER_AREA as block means, INTER_LINEAR with
half-pixel centres, a replicated-border warp and INTER_NEAREST_EXACT's centre picks."""

from __future__ import annotations

import fkl
import numpy as np
from thork_core import plugins

target = plugins().target(None).name
rng = np.random.default_rng()
img = rng.uniform(0, 255, (45, 63, 3)).astype(np.float32)


def chain(*ops: fkl.Op) -> fkl.Pipe:
    return fkl.compose(fkl.TensorRead(), *ops, fkl.TensorWrite(), target=target)


# INTER_AREA by an integer factor (3): each output pixel is the mean of a 3 x 3 block.
area = chain(fkl.Resize(21, 15, interpolation="cv_area"))(img)
blocks = img.reshape(15, 3, 21, 3, 3).mean(axis=(1, 3))
np.testing.assert_allclose(area, blocks, rtol=1e-5, atol=1e-3)


# INTER_LINEAR with half-pixel centres: fx = (x + 0.5) * sw / dw - 0.5, edges replicated.
def linear_axis(n_src: int, n_dst: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    f = ((np.arange(n_dst) + 0.5) * (n_src / n_dst) - 0.5).astype(np.float32)
    i0 = np.floor(f).astype(int)
    a = f - i0
    edge = (i0 < 0) | (i0 >= n_src - 1)
    a[edge] = 0
    i0 = np.clip(i0, 0, n_src - 1)
    return i0, np.minimum(i0 + 1, n_src - 1), a


x0, x1, ax = linear_axis(63, 40)
y0, y1, ay = linear_axis(45, 29)
rows = img[:, x0] * (1 - ax)[None, :, None] + img[:, x1] * ax[None, :, None]
ref = rows[y0] * (1 - ay)[:, None, None] + rows[y1] * ay[:, None, None]
lin = chain(fkl.Resize(40, 29, interpolation="cv_linear"))(img)
np.testing.assert_allclose(lin, ref, rtol=1e-5, atol=1e-3)

# A warp by an integer translation with a replicated border: np.pad(..., "edge") shifted.
# fkl's matrix maps destination -> source (OpenCV's WARP_INVERSE_MAP).
m = np.array([[1.0, 0.0, -6.0], [0.0, 1.0, 4.0]])  # dst (x, y) reads src (x - 6, y + 4)
warp = chain(fkl.Warping(m, 63, 45, interpolation="cv_linear",
                         border=fkl.BorderMode.REPLICATE))(img)
padded = np.pad(img, ((0, 4), (6, 0), (0, 0)), mode="edge")
np.testing.assert_array_equal(warp, padded[4:, :63])

# uint8 in, uint8 out (OpenCV's modes keep the dtype).
u8 = rng.integers(0, 256, (45, 63, 3), dtype=np.uint8)
small = chain(fkl.Resize(21, 15, interpolation="cv_area"))(u8)
assert small.dtype == np.uint8
want = np.rint(u8.reshape(15, 3, 21, 3, 3).astype(np.float64).mean(axis=(1, 3)))
assert np.abs(small.astype(int) - want).max() <= 1
# INTER_NEAREST_EXACT: the source pixel whose centre is nearest to the destination
# centre, floor((x + 0.5) * sw / dw) (OpenCV's 16-bit fixed-point form of it agrees here).
exact = chain(fkl.Resize(40, 29, interpolation="cv_nearest_exact"))(u8)
ix = np.minimum(((np.arange(40) + 0.5) * 63 / 40).astype(int), 62)
iy = np.minimum(((np.arange(29) + 0.5) * 45 / 29).astype(int), 44)
np.testing.assert_array_equal(exact, u8[iy][:, ix])
print(f"OpenCV resize and warp modes on {target}: OK")
