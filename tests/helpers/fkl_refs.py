"""NumPy references for fkl's geometry ops (FKL's conventions), shared by the fkl tests."""

from __future__ import annotations

import numpy as np

__all__ = ["ref_bilinear", "ref_resize", "ref_warp"]


def ref_bilinear(src: np.ndarray, sx: np.ndarray, sy: np.ndarray) -> np.ndarray:
    """FKL's bilinear at float32 coordinates (weights use the unclamped x2)."""
    s = src.astype(np.float32)
    h, w = s.shape[:2]
    fx1, fy1 = np.floor(sx), np.floor(sy)
    x1 = np.clip(fx1.astype(np.int64), 0, w - 1)
    y1 = np.clip(fy1.astype(np.int64), 0, h - 1)
    x2, y2 = np.minimum(x1 + 1, w - 1), np.minimum(y1 + 1, h - 1)
    wx1, wx2 = (fx1 + 1) - sx, sx - fx1
    wy1, wy2 = (fy1 + 1) - sy, sy - fy1
    if s.ndim == 3:
        wx1, wx2, wy1, wy2 = (a[..., None] for a in (wx1, wx2, wy1, wy2))
    top = s[y1, x1] * wx1 + s[y1, x2] * wx2
    bot = s[y2, x1] * wx1 + s[y2, x2] * wx2
    return top * wy1 + bot * wy2


def ref_resize(src: np.ndarray, dw: int, dh: int) -> np.ndarray:
    h, w = src.shape[:2]
    fx, fy = np.float32(w) / np.float32(dw), np.float32(h) / np.float32(dh)
    xs = np.arange(dw, dtype=np.float32) * fx
    ys = np.arange(dh, dtype=np.float32) * fy
    sx, sy = np.meshgrid(xs, ys)
    return ref_bilinear(src, sx, sy)


def ref_warp(src: np.ndarray, m: np.ndarray, w: int, h: int) -> np.ndarray:
    m = m.astype(np.float32)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    xs = m[0, 0] * xx + m[0, 1] * yy + m[0, 2]
    ys = m[1, 0] * xx + m[1, 1] * yy + m[1, 2]
    if m.shape[0] == 3:
        d = m[2, 0] * xx + m[2, 1] * yy + m[2, 2]
        xs, ys = xs / d, ys / d
    sh, sw = src.shape[:2]
    inside = (xs >= 0) & (xs < sw) & (ys >= 0) & (ys < sh)
    v = ref_bilinear(src, np.where(inside, xs, 0), np.where(inside, ys, 0))
    mask = inside[..., None] if v.ndim == 3 else inside
    return np.where(mask, v, 0).astype(np.float32)
