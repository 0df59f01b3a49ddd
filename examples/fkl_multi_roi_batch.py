"""Horizontal fusion: many regions of interest of one frame, preprocessed in ONE kernel.

Detections of different sizes -> crop each -> resize 64x64 -> x/255 -> planar float CHW,
one batch item per ROI (`fkl.Crop([...])`), with a per-ROI brightness gain
(`fkl.PerItem`). Then the same pipe on a preallocated batch with only the first k ROIs
active (the rest filled with 0). Checked against NumPy, ROI by ROI."""

from __future__ import annotations

import fkl
import numpy as np
from _reference import resize_fkl
from thork_core import plugins

target = plugins().target(None).name
rng = np.random.default_rng()
frame = rng.integers(0, 256, (481, 641, 3)).astype(np.uint8)

rois = []  # (x, y, w, h) of different sizes, inside the frame
for _ in range(6):
    w, h = int(rng.integers(16, 200)), int(rng.integers(16, 200))
    rois.append((int(rng.integers(0, 641 - w)), int(rng.integers(0, 481 - h)), w, h))
gain = [float(g) for g in rng.uniform(0.5, 1.5, len(rois))]

pipe = fkl.compose(fkl.TensorRead(), fkl.Crop(rois), fkl.Resize(64, 64),
                   fkl.Mul(fkl.PerItem([g / 255 for g in gain])), fkl.TensorSplit(),
                   target=target)
batch = pipe(frame)
assert batch.shape == (len(rois), 3, 64, 64) and batch.dtype == np.float32


refs = []
for (x, y, w, h), g in zip(rois, gain):
    ref = resize_fkl(frame[y:y + h, x:x + w], 64, 64) * np.float32(g / 255)
    refs.append(ref.transpose(2, 0, 1))
# 1e-5 absolute: FMA contraction may move a bilinear weight by one rounding (~4e-5 of a
# 0..255 pixel, ~1.5e-7 after the /255 gain); a wrong pixel is off by far more.
np.testing.assert_allclose(batch, np.stack(refs), rtol=1e-5, atol=1e-5)

# A preallocated output, only the first 4 ROIs active this frame: the rest become 0.
out = np.full(batch.shape, np.nan, np.float32)
pipe(frame, out=out, active_batch=4, default=0.0)
np.testing.assert_allclose(out[:4], np.stack(refs[:4]), rtol=1e-5, atol=1e-5)
assert (out[4:] == 0).all()
print(f"multi-ROI batch on {target}: OK, {len(rois)} ROIs -> {batch.shape} in one kernel")
