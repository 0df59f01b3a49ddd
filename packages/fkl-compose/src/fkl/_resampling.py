"""OpenCV's resampling conventions, traced: ``cv2.resize`` (INTER_LINEAR, INTER_AREA,
INTER_CUBIC, INTER_NEAREST, INTER_NEAREST_EXACT) and ``cv2.warpAffine``/``warpPerspective``
(INTER_LINEAR, INTER_NEAREST with a border mode). The exact rules, and where uint8
results may differ from OpenCV by one grey level, are in ``docs/fkl-resize.md``.

Every sampler reads the stage below through ``src.read`` (backward fusion) and returns the
pixel in the source dtype, as OpenCV does: uint8 uses OpenCV's fixed-point arithmetic,
other integers round half to even and saturate, floats stay floats.
"""

from __future__ import annotations

import math
from typing import Any

from thork import range as tk_range
from thork import var as tk_var
from thork.tracing import Value, cast, where
from thork.tracing import math as tkm
from thork_core import DType, dt

from ._ops import saturate_value
from ._pixel import Pixel, Stage

__all__ = ["Interpolation", "BorderMode", "border_index", "cv_resize_scale", "cv_nearest",
           "cv_nearest_exact", "cv_linear", "cv_cubic", "cv_area", "area_tables",
           "cv_warp_sample"]


class Interpolation:
    """Interpolation modes of ``Resize`` and ``Warping``: FKL's own, and OpenCV's."""

    LINEAR = "linear"        # FKL: corner-aligned bilinear, float32 out
    NEAREST = "nearest"      # FKL: src[floor(x * sw / dw)], float32 out
    CV_LINEAR = "cv_linear"  # cv2.INTER_LINEAR (half-pixel centres), input dtype out
    CV_AREA = "cv_area"      # cv2.INTER_AREA (downscaling only), input dtype out
    CV_CUBIC = "cv_cubic"    # cv2.INTER_CUBIC (a = -0.75), input dtype out
    CV_NEAREST = "cv_nearest"  # cv2.INTER_NEAREST (Resize and Warping), input dtype out
    CV_NEAREST_EXACT = "cv_nearest_exact"  # cv2.INTER_NEAREST_EXACT (Resize), input dtype
    RESIZE = (LINEAR, NEAREST, CV_LINEAR, CV_AREA, CV_CUBIC, CV_NEAREST, CV_NEAREST_EXACT)
    WARP = (LINEAR, CV_LINEAR, CV_NEAREST)
    OPENCV = (CV_LINEAR, CV_AREA, CV_CUBIC, CV_NEAREST, CV_NEAREST_EXACT)


#: OpenCV's INTER_RESIZE_COEF_SCALE: uint8 resize weights are 11-bit fixed point.
_COEF = 2048.0


def _f32(v: Any) -> Value:
    return cast(v, dt.float32)


def _f64(v: Any) -> Value:
    return cast(v, dt.float64)


def _i32(v: Any) -> Value:
    return cast(v, dt.int32)


def _clamp(v: Value, lo: Any, hi: Any) -> Value:
    return tkm.min(tkm.max(v, lo), hi)


# -- Border modes (Warping's, BorderReader's and the filters' reads outside the image)
class BorderMode:
    """Border modes: the ``np.pad`` mode each one equals is in the comment."""

    CONSTANT = "CONSTANT"        # "constant"
    REPLICATE = "REPLICATE"      # "edge"
    REFLECT = "REFLECT"          # "symmetric"
    REFLECT_101 = "REFLECT_101"  # "reflect"
    WRAP = "WRAP"                # "wrap"
    ALL = (CONSTANT, REPLICATE, REFLECT, REFLECT_101, WRAP)


def _pos_mod(a: Value, n: Value) -> Value:
    r = a % n
    return where(r < 0, r + n, r)


def border_index(i: Value, n: Value, mode: str) -> Value:
    """Map any integer coordinate ``i`` into ``[0, n)`` for ``mode`` (any overshoot)."""
    if mode == BorderMode.REPLICATE or mode == BorderMode.CONSTANT:
        return _clamp(i, 0, n - 1)
    if mode == BorderMode.WRAP:
        return _pos_mod(i, n)
    if mode == BorderMode.REFLECT:
        m = _pos_mod(i, n * 2)
        return where(m >= n, n * 2 - 1 - m, m)
    # REFLECT_101: period 2n - 2; a single row/column reflects onto itself.
    period = tkm.max(n * 2 - 2, 1)
    m = _pos_mod(i, period)
    return tkm.min(where(m >= n, period - m, m), n - 1)


def cv_resize_scale(sw: Any, dw: Any) -> Value:
    """OpenCV's source step per destination pixel: ``1 / (dw / sw)`` in double."""
    return 1.0 / (_f64(dw) / _f64(sw))


def _half_pixel(d: Value, scale: Value) -> tuple[Value, Value]:
    """``fx = float((d + 0.5) * scale - 0.5)``, split into ``floor`` (int32) and fraction."""
    f = _f32((_f64(d) + 0.5) * scale - 0.5)
    fl = tkm.floor(f)
    return _i32(fl), f - fl


def _store(v: Value, to: DType) -> Value:
    return saturate_value(v, to)


def cv_nearest(src: Stage, x: Value, y: Value, z: Value, sx: Value, sy: Value) -> Pixel:
    """``cv2.resize(..., INTER_NEAREST)``: ``src[min(floor(x * scale), sw - 1)]`` with the
    double scale (no half-pixel shift; OpenCV's INTER_NEAREST_EXACT would add one)."""
    ix = tkm.min(_i32(tkm.floor(_f64(x) * sx)), src.w - 1)
    iy = tkm.min(_i32(tkm.floor(_f64(y) * sy)), src.h - 1)
    return list(src.read(ix, iy, z))


def _nearest_exact_index(d: Value, sn: Any, dn: Any) -> Value:
    """OpenCV's INTER_NEAREST_EXACT source index of destination index ``d``: the pixel
    whose centre is nearest, in 16-bit fixed point. ``step = ((sn << 16) + dn / 2) / dn``
    (integer division), ``start = step / 2 - sn % 2``, index ``(start + d * step) >> 16``
    clamped into ``[0, sn - 1]``. In int64: OpenCV's int arithmetic overflows from
    ``sn = 32768`` on, where this keeps the exact value."""
    s64, d64 = cast(sn, dt.int64), cast(dn, dt.int64)
    step = ((s64 << 16) + d64 // 2) // d64
    start = step // 2 - s64 % 2
    return _clamp(_i32((start + cast(d, dt.int64) * step) >> 16), 0, sn - 1)


def cv_nearest_exact(src: Stage, x: Value, y: Value, z: Value, dw: Any, dh: Any) -> Pixel:
    """``cv2.resize(..., INTER_NEAREST_EXACT)`` at destination ``(x, y)`` of a ``dw`` x
    ``dh`` result: the source pixel whose centre is nearest to the destination centre
    (as Pillow and TensorFlow pick it), OpenCV's fixed-point rule per axis."""
    ix = _nearest_exact_index(x, src.w, dw)
    iy = _nearest_exact_index(y, src.h, dh)
    return list(src.read(ix, iy, z))


def cv_linear(src: Stage, x: Value, y: Value, z: Value, sx: Value, sy: Value) -> Pixel:
    """``cv2.resize(..., INTER_LINEAR)`` at destination ``(x, y)``; ``sx``/``sy`` are the
    double scales. uint8: 11-bit weights, horizontal sums in int, the vertical pass as
    OpenCV's vectorised uint8 path (``((b0 * (r0 >> 4)) >> 16 + (b1 * (r1 >> 4)) >> 16 + 2)
    >> 2``)."""
    def axis(d: Value, scale: Value, n: Any) -> tuple[Value, Value, Value]:
        i0, f = _half_pixel(d, scale)
        # OpenCV: a coordinate left of the first centre or right of the last one takes
        # that edge pixel with weight 1.
        edge = (i0 < 0) | (i0 >= n - 1)
        f = where(edge, 0.0, f)
        i0 = _clamp(i0, 0, n - 1)
        return i0, tkm.min(i0 + 1, n - 1), f

    x0, x1, fx = axis(x, sx, src.w)
    y0, y1, fy = axis(y, sy, src.h)
    a, b = src.read(x0, y0, z), src.read(x1, y0, z)
    c, d = src.read(x0, y1, z), src.read(x1, y1, z)
    to = src.type.dtype
    out = []
    if to == dt.uint8:
        a0, a1 = _i32(tkm.rint((1.0 - fx) * _COEF)), _i32(tkm.rint(fx * _COEF))
        b0, b1 = _i32(tkm.rint((1.0 - fy) * _COEF)), _i32(tkm.rint(fy * _COEF))
        for k in range(src.type.channels):
            r0 = _i32(a[k]) * a0 + _i32(b[k]) * a1
            r1 = _i32(c[k]) * a0 + _i32(d[k]) * a1
            v = (((b0 * (r0 >> 4)) >> 16) + ((b1 * (r1 >> 4)) >> 16) + 2) >> 2
            out.append(_store(v, to))
        return out
    ft = dt.float64 if to == dt.float64 else dt.float32
    wx0, wy0 = 1.0 - fx, 1.0 - fy
    for k in range(src.type.channels):
        r0 = cast(a[k], ft) * wx0 + cast(b[k], ft) * fx
        r1 = cast(c[k], ft) * wx0 + cast(d[k], ft) * fx
        out.append(_store(r0 * wy0 + r1 * fy, to))
    return out


_A = -0.75  # OpenCV's cubic coefficient


def _cubic_weights(t: Value) -> list[Value]:
    """OpenCV's ``interpolateCubic`` at fraction ``t`` (float32), the last weight taking
    the remainder so that the four sum to 1."""
    a = _A
    t1 = t + 1.0
    u = 1.0 - t
    c0 = ((t1 * a - 5.0 * a) * t1 + 8.0 * a) * t1 - 4.0 * a
    c1 = ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0
    c2 = ((a + 2.0) * u - (a + 3.0)) * u * u + 1.0
    return [c0, c1, c2, 1.0 - c0 - c1 - c2]


def cv_cubic(src: Stage, x: Value, y: Value, z: Value, sx: Value, sy: Value) -> Pixel:
    """``cv2.resize(..., INTER_CUBIC)``: 4 x 4 taps at ``floor(f) - 1 .. floor(f) + 2``,
    each index clamped into the image (OpenCV's replicated border); rows weighted first,
    then columns, in float32 (float64 for float64 pixels) for every dtype — OpenCV 5's
    uint8 cubic path is float too — then rounded half to even and saturated."""
    ix, fx = _half_pixel(x, sx)
    iy, fy = _half_pixel(y, sy)
    wx, wy = _cubic_weights(fx), _cubic_weights(fy)
    xs = [_clamp(ix + (i - 1), 0, src.w - 1) for i in range(4)]
    ys = [_clamp(iy + (j - 1), 0, src.h - 1) for j in range(4)]
    to = src.type.dtype
    ch = src.type.channels
    ft = dt.float64 if to == dt.float64 else dt.float32
    acc: list[Any] = [None] * ch
    for j in range(4):
        row: list[Any] = [None] * ch
        for i in range(4):
            px = src.read(xs[i], ys[j], z)
            for k in range(ch):
                term = cast(px[k], ft) * wx[i]
                row[k] = term if row[k] is None else row[k] + term
        for k in range(ch):
            term = row[k] * wy[j]
            acc[k] = term if acc[k] is None else acc[k] + term
    return [_store(v, to) for v in acc]


def cv_area(src: Stage, x: Value, y: Value, z: Value, xtab: Any, wx: Any, ytab: Any,
            wy: Any, half_up: Value) -> Pixel:
    """``cv2.resize(..., INTER_AREA)`` when downscaling: the weighted mean over the source
    cell of destination pixel (``x``, ``y``), each partly covered pixel weighted by its
    covered length, rows summed first then columns, in float32 (float64 for float64
    pixels). The cells and weights come from the tables :func:`area_tables` filled on the
    host (as OpenCV's ``computeResizeAreaTab`` does): ``xtab``/``ytab`` hold
    ``(first source index, count, offset of its weights)`` per destination column/row,
    ``wx``/``wy`` the float32 weights. ``half_up`` (a runtime flag) rounds uint8 halves
    up, as OpenCV's exact 2 x 2 path."""
    ch = src.type.channels
    to = src.type.dtype
    ft = dt.float64 if to == dt.float64 else dt.float32
    xs, xn, xo = xtab[x * 3], xtab[x * 3 + 1], xtab[x * 3 + 2]
    ys, yn, yo = ytab[y * 3], ytab[y * 3 + 1], ytab[y * 3 + 2]
    acc = [tk_var(cast(0.0, ft), ft) for _ in range(ch)]
    for j in tk_range(0, yn):
        wyj = cast(wy[yo + j], ft)
        row = [tk_var(cast(0.0, ft), ft) for _ in range(ch)]
        for i in tk_range(0, xn):
            wxi = cast(wx[xo + i], ft)
            px = src.read(xs + i, ys + j, z)
            for k in range(ch):
                row[k].set(row[k].get() + cast(px[k], ft) * wxi)
        for k in range(ch):
            acc[k].set(acc[k].get() + row[k].get() * wyj)
    out = []
    for k in range(ch):
        v = acc[k].get()
        if not to.is_float:
            v = where(half_up != 0, tkm.floor(v + 0.5), v)
        out.append(_store(v, to))
    return out


def area_tables(n: int, d: int) -> tuple[list[int], list[float]]:
    """The INTER_AREA cells of ``d`` destination pixels over ``n`` source pixels (a
    downscale, ``d <= n``): per destination pixel ``(first, count, offset)`` into the
    weights, and the weights, float32 values of OpenCV's double arithmetic. Destination
    pixel ``k`` covers ``[k * scale, (k + 1) * scale)`` with ``scale = 1 / (d / n)``; a
    pixel partly covered on the left (more than 1e-3) weighs its covered length, a whole
    one 1, the last its covered length capped at 1 and at the cell, each divided by the
    cell (``min(scale, n - k * scale)``); a partly covered pixel of weight 0 (a sliver
    of at most 1e-3) is left out of the cell, as OpenCV's ``computeResizeAreaTab`` does."""
    import numpy as np

    scale = 1.0 / (float(d) / float(n))
    index: list[int] = []
    weights: list[float] = []
    for k in range(d):
        f1 = float(k) * scale
        f2 = f1 + scale
        cell = min(scale, float(n) - f1)
        s2 = min(int(math.floor(f2)), n - 1)
        s1 = min(int(math.ceil(f1)), s2)
        left, right = float(s1) - f1, f2 - float(s2)
        w_left = left / cell if left > 1e-3 else 0.0
        w_right = min(min(right, 1.0), cell) / cell if right > 1e-3 else 0.0
        # A sliver's weight is 0: OpenCV's table has no entry for it, and here neither
        # (it would be a tap read and multiplied by 0: 9 taps instead of 4 per pixel at
        # 1080p -> 720p).
        lo = s1 - 1 if s1 >= 1 and w_left > 0.0 else s1
        hi = s2 + 1 if w_right > 0.0 or s1 == s2 else s2
        index += [lo, hi - lo, len(weights)]
        weights += [w_left if s == s1 - 1 else 1.0 / cell if s < s2 else w_right
                    for s in range(lo, hi)]
    return index, np.asarray(weights, np.float64).astype(np.float32).tolist()


#: Source positions are clamped to this magnitude before conversion to int (an infinite
#: or NaN position, from a perspective divide by ~0, lands far outside: the border).
_FAR = float(1 << 30)


def _finite(v: Value) -> Value:
    """A float32 position with NaN, inf and huge values moved to ``±2^30`` (outside)."""
    return _clamp(where(tkm.isnan(v), -_FAR, v), -_FAR, _FAR)


def cv_warp_sample(src: Stage, sx: Value, sy: Value, z: Value, nearest: bool,
                   border: str, cval: list[Any]) -> Pixel:
    """OpenCV's remap of one destination pixel from its float32 source position
    (``sx``, ``sy``): nearest takes ``rint`` (half to even); linear the 2 x 2 taps at
    ``floor`` with weights ``1 - a, a`` (``a`` the float32 fraction), rows first, in
    float32, rounded half to even and saturated for integer pixels. A tap outside the
    image reads through ``border`` (``CONSTANT``: the value ``cval``)."""
    to = src.type.dtype
    ch = src.type.channels
    w, h = src.w, src.h
    constant = border == BorderMode.CONSTANT
    ft = dt.float64 if to == dt.float64 else dt.float32

    def tap(ix: Value, iy: Value) -> list[Value]:
        px = src.read(border_index(ix, w, border), border_index(iy, h, border), z)
        vals = [cast(v, ft) for v in px]
        if not constant:
            return vals
        inside = (ix >= 0) & (ix < w) & (iy >= 0) & (iy < h)
        return [where(inside, v, cast(cval[k], ft)) for k, v in enumerate(vals)]

    sx, sy = _finite(sx), _finite(sy)
    if nearest:
        return [_store(v, to) for v in tap(_i32(tkm.rint(sx)), _i32(tkm.rint(sy)))]
    fx, fy = tkm.floor(sx), tkm.floor(sy)
    ax, ay = cast(sx - fx, ft), cast(sy - fy, ft)
    x0, y0 = _i32(fx), _i32(fy)
    t00, t10 = tap(x0, y0), tap(x0 + 1, y0)
    t01, t11 = tap(x0, y0 + 1), tap(x0 + 1, y0 + 1)
    bx, by = 1.0 - ax, 1.0 - ay
    return [_store((t00[k] * bx + t10[k] * ax) * by + (t01[k] * bx + t11[k] * ax) * ay, to)
            for k in range(ch)]
