"""Warping and border policies: a BorderReader under a Crop reads outside the image with
any of the five modes (exactly np.pad, for any overshoot); Warping maps dst -> src."""

from __future__ import annotations

import fkl
import numpy as np
from thork_core import plugins

target = plugins().target(None).name
rng = np.random.default_rng()
img = rng.standard_normal((61, 83, 3)).astype(np.float32)
pad = 100  # more than the image size: several reflections
for mode, np_mode in [("CONSTANT", "constant"), ("REPLICATE", "edge"),
                      ("REFLECT", "symmetric"), ("REFLECT_101", "reflect"), ("WRAP", "wrap")]:
    pipe = fkl.compose(fkl.TensorRead(), fkl.BorderReader(mode, 0.0),
                       fkl.Crop((-pad, -pad, 83 + 2 * pad, 61 + 2 * pad)), fkl.TensorWrite(),
                       target=target)
    ref = np.pad(img, ((pad, pad), (pad, pad), (0, 0)), mode=np_mode)
    np.testing.assert_array_equal(pipe(img), ref)

# An integer translation through Warping equals a shifted copy, zero outside.
m = np.array([[1.0, 0.0, 5.0], [0.0, 1.0, -7.0]])  # dst (x, y) reads src (x + 5, y - 7)
out = fkl.compose(fkl.TensorRead(), fkl.Warping(m, 83, 61), fkl.TensorWrite(),
                  target=target)(img)
ref = np.zeros_like(img)
ref[7:, :78] = img[:54, 5:]
np.testing.assert_array_equal(out, ref)

# Rotation about the center (perspective matrix with a trivial last row).
a = np.deg2rad(10)
c, s = np.cos(a), np.sin(a)
cx, cy = 41.0, 30.0
rot = np.array([[c, -s, cx - c * cx + s * cy], [s, c, cy - s * cx - c * cy], [0, 0, 1]])
out = fkl.compose(fkl.TensorRead(), fkl.Warping(rot, 83, 61), fkl.TensorWrite(),
                  target=target)(img)
assert out.shape == img.shape and np.isfinite(out).all() and (out[0, 0] == 0).all()
print(f"warping and borders on {target}: OK")
