"""Color pipelines: channel swaps, alpha, gray, and a color matrix, checked with NumPy."""

from __future__ import annotations

import fkl
import numpy as np
from thork_core import plugins

target = plugins().target(None).name
rng = np.random.default_rng()
bgr = rng.integers(0, 256, (359, 479, 3)).astype(np.uint8)


def run(*ops):
    return fkl.compose(fkl.TensorRead(), *ops, fkl.TensorWrite(), target=target)(bgr)


np.testing.assert_array_equal(run(fkl.ColorConversion("BGR2RGB")), bgr[..., ::-1])
rgba = run(fkl.ColorConversion("BGR2RGBA"))
assert rgba.shape == (359, 479, 4) and (rgba[..., 3] == 255).all()
gray = run(fkl.ColorConversion("BGR2GRAY"))
f = bgr.astype(np.float32)
ref = np.rint(f[..., 2] * np.float32(0.299) + f[..., 1] * np.float32(0.587)
              + f[..., 0] * np.float32(0.114))
assert np.abs(gray.astype(int) - ref.astype(int)).max() <= 1

# Sepia: float math, a 3x3 matrix on each pixel, saturate back to uint8 — one kernel.
sepia = np.array([[0.272, 0.534, 0.131], [0.349, 0.686, 0.168], [0.393, 0.769, 0.189]])
out = run(fkl.ColorConversion("BGR2RGB"), fkl.MxVFloat3(sepia[::-1, ::-1].copy()),
          fkl.SaturateCast("uint8"), fkl.ColorConversion("RGB2BGR"))
rgb = bgr[..., ::-1].astype(np.float32)
ref = np.einsum("ij,hwj->hwi", sepia[::-1, ::-1].astype(np.float32), rgb)
ref = np.clip(np.rint(ref), 0, 255).astype(np.uint8)[..., ::-1]
assert np.abs(out.astype(int) - ref.astype(int)).max() <= 1
print(f"color pipelines on {target}: OK")
