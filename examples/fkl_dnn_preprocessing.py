"""DNN preprocessing in one kernel: uint8 BGR HWC -> crop -> resize 224x224 -> RGB ->
scale -> normalize -> planar float CHW. Checked against a NumPy reference."""

from __future__ import annotations

import fkl
import numpy as np
from thork_core import plugins

target = plugins().target(None).name
rng = np.random.default_rng()
frame = rng.integers(0, 256, (721, 1279, 3)).astype(np.uint8)
mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
rect = (280, 20, 700, 680)  # x, y, w, h

pipe = fkl.compose(
    fkl.TensorRead(), fkl.Crop(rect), fkl.Resize(224, 224), fkl.ColorConversion("BGR2RGB"),
    fkl.Mul(1 / 255.0), fkl.Sub(mean), fkl.Div(std), fkl.TensorSplit(), target=target)
chw = pipe(frame)
assert chw.shape == (3, 224, 224) and chw.dtype == np.float32


def resize_fkl(src: np.ndarray, dw: int, dh: int) -> np.ndarray:
    """FKL's corner-aligned bilinear (src_x = x * sw / dw), in float32."""
    s = src.astype(np.float32)
    sh, sw = s.shape[:2]
    sx = np.arange(dw, dtype=np.float32) * (np.float32(sw) / np.float32(dw))
    sy = np.arange(dh, dtype=np.float32) * (np.float32(sh) / np.float32(dh))
    x1, y1 = np.floor(sx).astype(int), np.floor(sy).astype(int)
    x2, y2 = np.minimum(x1 + 1, sw - 1), np.minimum(y1 + 1, sh - 1)
    wx2, wy2 = (sx - x1)[None, :, None], (sy - y1)[:, None, None]
    wx1, wy1 = (x1 + 1 - sx)[None, :, None], (y1 + 1 - sy)[:, None, None]
    top = s[y1][:, x1] * wx1 + s[y1][:, x2] * wx2
    bot = s[y2][:, x1] * wx1 + s[y2][:, x2] * wx2
    return top * wy1 + bot * wy2


x, y, w, h = rect
ref = resize_fkl(frame[y:y + h, x:x + w], 224, 224)[..., ::-1]
ref = ((ref / np.float32(255) - np.float32(mean)) / np.float32(std)).transpose(2, 0, 1)
# CUDA compilers contract a*b+c into FMA (clang more often than NVRTC): one rounding less
# in a bilinear weight moves it by up to 3e-5, i.e. up to ~7.6e-3 on a 0..255 pixel, and
# by ~1.3e-4 after /255 and /std. 1e-3 covers that; a wrong pixel is off by far more.
np.testing.assert_allclose(chw, ref, rtol=1e-4, atol=1e-3)
print(f"DNN preprocessing on {target}: OK, output {chw.shape} {chw.dtype}")
