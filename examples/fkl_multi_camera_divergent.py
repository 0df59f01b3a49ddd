"""Divergent horizontal fusion: one kernel, different pipelines per camera.

Four cameras deliver same-size frames as one batch. Cameras 0 and 2 feed a detector
(resize 96x64, BGR->RGB, normalize, planar float); cameras 1 and 3 feed a recorder
(a 2x-downscaled crop, kept uint8 packed). `fkl.compose_divergent(plane_map, ...)` runs
each camera's plane through its own chain in ONE kernel; plane_map is 0-based. A rolling
window of the detector's input is kept with `fkl.CircularTensor` (preprocess + rotate in
one kernel per frame). Checked against NumPy."""

from __future__ import annotations

import fkl
import numpy as np
from _reference import resize_fkl
from thork_core import plugins

target = plugins().target(None).name
rng = np.random.default_rng()
frames = rng.integers(0, 256, (4, 240, 320, 3)).astype(np.uint8)  # one per camera
mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]

detector = [fkl.TensorRead(), fkl.Resize(96, 64), fkl.ColorConversion("BGR2RGB"),
            fkl.Mul(1 / 255), fkl.Sub(mean), fkl.Div(std), fkl.TensorSplit()]
recorder = [fkl.TensorRead(), fkl.Crop((40, 20, 240, 200)), fkl.Resize(120, 100),
            fkl.SaturateCast("uint8"), fkl.TensorWrite()]
plane_map = [0, 1, 0, 1]  # camera z runs chain plane_map[z]
cams = fkl.compose_divergent(plane_map, detector, recorder, target=target)
det, rec = cams(frames)
assert det.shape == (2, 3, 64, 96) and rec.shape == (2, 100, 120, 3)
assert cams.planes(0) == [0, 2] and cams.planes(1) == [1, 3]


def detector_ref(f: np.ndarray) -> np.ndarray:
    rgb = resize_fkl(f, 96, 64)[..., ::-1]
    return ((rgb / np.float32(255) - np.float32(mean)) / np.float32(std)).transpose(2, 0, 1)


def recorder_ref(f: np.ndarray) -> np.ndarray:
    r = resize_fkl(f[20:220, 40:280], 120, 100)
    return np.clip(np.rint(r), 0, 255).astype(np.uint8)


for j, z in enumerate(cams.planes(0)):
    np.testing.assert_allclose(det[j], detector_ref(frames[z]), rtol=1e-4, atol=1e-3)
for j, z in enumerate(cams.planes(1)):
    # Rounding to uint8 may differ by 1 where FMA contraction moves a value across .5.
    diff = np.abs(rec[j].astype(int) - recorder_ref(frames[z]).astype(int))
    assert diff.max() <= 1 and (diff == 0).mean() > 0.99, diff.max()

# The detector's input over time: the last 3 frames of camera 0, newest first.
window = fkl.CircularTensor(320, 240, batch=3, dtype="uint8", channels=3, layout="planar",
                            out_dtype="float32", target=target)
history = []
for _ in range(5):
    frame = rng.integers(0, 256, (240, 320, 3)).astype(np.uint8)
    window.update(frame, ops=[fkl.Cast("float32"), fkl.Mul(1 / 255)])
    history.append(frame)
snap = window.snapshot()
snap = snap.to_host() if hasattr(snap, "to_host") else snap
for z, frame in enumerate(history[::-1][:3]):
    ref = (frame.astype(np.float32) * np.float32(1 / 255)).transpose(2, 0, 1)
    np.testing.assert_allclose(snap[3 * z:3 * z + 3], ref, rtol=1e-6, atol=1e-6)
print(f"multi-camera divergent pipeline on {target}: OK, planes {plane_map} -> "
      f"{det.shape} + {rec.shape}; window {snap.shape}")
