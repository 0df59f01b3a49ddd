"""Video frames into a DNN tensor: NV12 / P010 (pitched too) -> RGB -> resize -> normalize
-> CHW in one kernel, and RGB -> NV12 encoding (into a pitched frame too), each checked
against NumPy."""

from __future__ import annotations

import fkl
import numpy as np
from thork_core import plugins

target = plugins().target(None).name
rng = np.random.default_rng()
H, W = 270, 482  # 4:2:0 needs even sizes

# A decoder's NV12 frame: Y plane (H rows), then interleaved U V rows (H/2 of them).
frame = rng.integers(16, 236, (H * 3 // 2, W)).astype(np.uint8)

# NumPy reference: unpack, replicate chroma, BT.709 limited range to RGB (from Kr, Kb).
kr, kb = 0.2126, 0.0722
kg = 1 - kr - kb
y = frame[:H].astype(np.float64)
uv = frame[H:].reshape(H // 2, W // 2, 2).astype(np.float64)
u = np.repeat(np.repeat(uv[..., 0], 2, 0), 2, 1) - 128
v = np.repeat(np.repeat(uv[..., 1], 2, 0), 2, 1) - 128
yn, pb, pr = (y - 16) / 219, u / 224, v / 224
rgb = 255 * np.stack([yn + 2 * (1 - kr) * pr,
                      yn - 2 * kb * (1 - kb) / kg * pb - 2 * kr * (1 - kr) / kg * pr,
                      yn + 2 * (1 - kb) * pb], -1)

to_rgb = fkl.compose(fkl.ReadYUV("NV12", to_rgb="bt709"), fkl.TensorWrite(), target=target)
np.testing.assert_allclose(to_rgb(frame), rgb, rtol=1e-4, atol=1e-2)

# The DNN chain, one kernel: FKL's corner-aligned bilinear resize to 224 x 224.
mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
dnn = fkl.compose(fkl.ReadYUV("NV12", to_rgb="bt709"), fkl.Resize(224, 224),
                  fkl.NormalizePixel(8), fkl.Sub(mean.tolist()), fkl.Div(std.tolist()),
                  fkl.TensorSplit(), target=target)
out = dnn(frame)
sy, sx = np.arange(224) * (H / 224), np.arange(224) * (W / 224)
y1, x1 = np.floor(sy).astype(int), np.floor(sx).astype(int)
y2, x2 = np.minimum(y1 + 1, H - 1), np.minimum(x1 + 1, W - 1)
wy, wx = (sy - y1)[:, None, None], (sx - x1)[None, :, None]
small = (rgb[y1][:, x1] * (1 - wy) * (1 - wx) + rgb[y1][:, x2] * (1 - wy) * wx
         + rgb[y2][:, x1] * wy * (1 - wx) + rgb[y2][:, x2] * wy * wx)
ref = ((small / 255 - mean) / std).transpose(2, 0, 1)
assert out.shape == (3, 224, 224) and out.dtype == np.float32
np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-3)

# A pitched frame (rows 512 samples apart, as a decoder allocates) is read in place.
padded = np.zeros((H * 3 // 2, 512), np.uint8)
padded[:, :W] = frame
np.testing.assert_array_equal(dnn(padded[:, :W]), out)

# 10-bit: P010 keeps the sample in the high 10 bits of each 16-bit word.
# The 8-bit frame as 10-bit samples (x 4), shifted up: normalized, the same colours.
p010 = frame.astype(np.uint16) << 8
norm10 = fkl.compose(fkl.ReadYUV("P010", to_rgb="bt709"), fkl.NormalizePixel(10),
                     fkl.TensorWrite(), target=target)(p010)
np.testing.assert_allclose(norm10, rgb / 255, rtol=1e-4, atol=1e-4)

# Encoding: RGB uint8 -> BT.709 limited YUV -> NV12 (chroma = mean of each 2x2 block).
img = rng.integers(0, 256, (H, W, 3)).astype(np.uint8)
enc = fkl.compose(fkl.TensorRead(), fkl.RGB2YUV("bt709"), fkl.WriteYUV("NV12"),
                  target=target)(img)
f = img.astype(np.float64) / 255
yl = kr * f[..., 0] + kg * f[..., 1] + kb * f[..., 2]
ycc = np.stack([16 + 219 * yl, 128 + 224 * (f[..., 2] - yl) / (2 * (1 - kb)),
                128 + 224 * (f[..., 0] - yl) / (2 * (1 - kr))], -1)
chroma = ycc[..., 1:].reshape(H // 2, 2, W // 2, 2, 2).mean(axis=(1, 3))
want = np.concatenate([ycc[..., 0], chroma.reshape(H // 2, W)], 0)
assert enc.shape == (H * 3 // 2, W) and np.abs(enc - np.rint(want)).max() <= 1

# ... straight into a pitched frame (rows 512 bytes apart), in place: the padding between
# the rows is left alone.
pitched = np.full((H * 3 // 2, 512), 3, np.uint8)
fkl.compose(fkl.TensorRead(), fkl.RGB2YUV("bt709"), fkl.WriteYUV("NV12"),
            target=target)(img, out=pitched[:, :W])
np.testing.assert_array_equal(pitched[:, :W], enc)
assert (pitched[:, W:] == 3).all()

# Planar tensors in place too: the DNN tensor into a crop of a padded (3, 256, 256) canvas.
canvas = np.zeros((3, 256, 256), np.float32)
dnn(frame, out=canvas[:, 16:240, 16:240])
np.testing.assert_array_equal(canvas[:, 16:240, 16:240], out)
assert canvas[:, :16].max() == 0 and canvas[:, :, 240:].max() == 0
print(f"video pipelines on {target}: OK")
