"""NumPy references the fkl examples check themselves against (FKL's conventions)."""

from __future__ import annotations

import numpy as np

__all__ = ["resize_fkl"]


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
