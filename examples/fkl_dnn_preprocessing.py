"""DNN preprocessing in one kernel: uint8 BGR HWC -> crop -> resize 224x224 -> RGB ->
scale -> normalize -> planar float CHW. Checked against a NumPy reference."""

from __future__ import annotations

import fkl
import numpy as np
from _reference import resize_fkl
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


x, y, w, h = rect
ref = resize_fkl(frame[y:y + h, x:x + w], 224, 224)[..., ::-1]
ref = ((ref / np.float32(255) - np.float32(mean)) / np.float32(std)).transpose(2, 0, 1)
# CUDA compilers contract a*b+c into FMA (clang more often than NVRTC): one rounding less
# in a bilinear weight moves it by up to 3e-5, i.e. up to ~7.6e-3 on a 0..255 pixel, and
# by ~1.3e-4 after /255 and /std. 1e-3 covers that; a wrong pixel is off by far more.
np.testing.assert_allclose(chw, ref, rtol=1e-4, atol=1e-3)
print(f"DNN preprocessing on {target}: OK, output {chw.shape} {chw.dtype}")
