"""NumPy references for fkl's YUV frame layouts (docs/fkl-video.md): the formats' sample
types and subsampling, random frames, and frames unpacked to samples or packed from them,
shared by the fkl video and pitched-frame tests."""

from __future__ import annotations

import fkl
import numpy as np

__all__ = ["FORMATS", "pack", "random_frame", "unpack"]

#: format -> (dtype, depth, shift, subsampling (x, y))
FORMATS = {
    "NV12": (np.uint8, 8, 0, (2, 2)), "NV21": (np.uint8, 8, 0, (2, 2)),
    "I420": (np.uint8, 8, 0, (2, 2)), "YV12": (np.uint8, 8, 0, (2, 2)),
    "P010": (np.uint16, 10, 6, (2, 2)), "P016": (np.uint16, 16, 0, (2, 2)),
    "P210": (np.uint16, 10, 6, (2, 1)), "P216": (np.uint16, 16, 0, (2, 1)),
    "UYVY": (np.uint8, 8, 0, (2, 1)), "Y210": (np.uint16, 10, 6, (2, 1)),
    "Y216": (np.uint16, 16, 0, (2, 1)), "Y416": (np.uint16, 16, 0, (1, 1)),
}


def random_frame(rng: np.random.Generator, fmt: str, w: int, h: int) -> np.ndarray:
    """A ``w`` x ``h`` pixel frame of ``fmt`` with random samples (junk in the low bits of
    shifted formats)."""
    dtype, depth, shift, (sx, sy) = FORMATS[fmt]
    shape = fkl.YUV_FORMATS[fmt].frame_shape(w, h)
    frame = rng.integers(0, 2**depth, shape).astype(dtype) << dtype(shift)
    if shift:  # junk in the low bits: a read must drop it
        frame |= rng.integers(0, 2**shift, shape).astype(dtype)
    return frame


def unpack(fmt: str, frame: np.ndarray, w: int, h: int) -> np.ndarray:
    """(H, W, 3|4) samples with chroma replicated, from the layouts of docs/fkl-video.md."""
    dtype, depth, shift, (sx, sy) = FORMATS[fmt]
    f = frame >> shift if shift else frame
    if fmt in ("NV12", "NV21", "P010", "P016", "P210", "P216"):
        y = f[:h]
        uv = f[h:h + h // sy].reshape(h // sy, w // 2, 2)
        u, v = (uv[..., 1], uv[..., 0]) if fmt == "NV21" else (uv[..., 0], uv[..., 1])
    elif fmt in ("I420", "YV12"):
        y = f[:h]
        rest = f[h:].reshape(-1)
        n = (h // 2) * (w // 2)
        p0, p1 = rest[:n].reshape(h // 2, w // 2), rest[n:2 * n].reshape(h // 2, w // 2)
        u, v = (p0, p1) if fmt == "I420" else (p1, p0)
    elif fmt == "UYVY":
        g = f.reshape(h, w // 2, 4)
        y = np.stack([g[..., 1], g[..., 3]], -1).reshape(h, w)
        u, v = g[..., 0], g[..., 2]
    elif fmt in ("Y210", "Y216"):
        g = f.reshape(h, w // 2, 4)
        y = np.stack([g[..., 0], g[..., 2]], -1).reshape(h, w)
        u, v = g[..., 1], g[..., 3]
    else:  # Y416: U Y V A
        g = f.reshape(h, w, 4)
        return np.stack([g[..., 1], g[..., 0], g[..., 2], g[..., 3]], -1)
    up = np.repeat(np.repeat(u, sx, 1), sy, 0)
    vp = np.repeat(np.repeat(v, sx, 1), sy, 0)
    return np.stack([y, up, vp], -1)


def pack(fmt: str, yuv: np.ndarray) -> np.ndarray:
    """The frame a write must produce from float (H, W, 3|4) samples: round half to even,
    clamp, chroma = mean of each block (float32, row-major sum, then times 1/n)."""
    dtype, depth, shift, (sx, sy) = FORMATS[fmt]
    h, w = yuv.shape[:2]
    m = 2**depth - 1

    def q(a: np.ndarray) -> np.ndarray:
        return (np.clip(np.rint(a), 0, m).astype(dtype) << dtype(shift)).astype(dtype)

    f32 = yuv.astype(np.float32)
    blocks = f32[..., 1:3].reshape(h // sy, sy, w // sx, sx, 2)
    acc = np.zeros((h // sy, w // sx, 2), np.float32)
    for dy in range(sy):
        for dx in range(sx):
            acc = acc + blocks[:, dy, :, dx]
    c = q(acc * np.float32(1.0 / (sx * sy)))
    y = q(f32[..., 0])
    if fmt in ("NV12", "NV21", "P010", "P016", "P210", "P216"):
        uv = c[..., ::-1] if fmt == "NV21" else c
        return np.concatenate([y, uv.reshape(h // sy, w)], 0)
    if fmt in ("I420", "YV12"):
        u, v = c[..., 0].reshape(-1), c[..., 1].reshape(-1)
        rest = np.concatenate([u, v] if fmt == "I420" else [v, u])
        return np.concatenate([y.reshape(-1), rest]).reshape(h * 3 // 2, w)
    if fmt == "UYVY":
        g = np.stack([c[..., 0], y[:, 0::2], c[..., 1], y[:, 1::2]], -1)
        return g.reshape(h, w, 2)
    if fmt in ("Y210", "Y216"):
        g = np.stack([y[:, 0::2], c[..., 0], y[:, 1::2], c[..., 1]], -1)
        return g.reshape(h, w, 2)
    alpha = q(f32[..., 3]) if yuv.shape[2] == 4 else np.full((h, w), m << shift, dtype)
    return np.stack([c[..., 0], y, c[..., 1], alpha], -1)
