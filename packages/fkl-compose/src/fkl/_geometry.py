"""Geometry (ReadBack) operations: fused *into* the read (backward vertical fusion).

Each op turns the stage below it into a new stage: ``read(x, y, z)`` of the new stage
computes source coordinates and calls the lower stage's ``read`` (once, or four times for
bilinear sampling). No intermediate image is ever written. Sizes, rectangles, matrices and
background values are runtime parameters; modes and interpolation are types.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from thork.tracing import Value, cast, where
from thork.tracing import math as tkm
from thork_core import ArgumentError, DType, dt

from ._batch import PerItem, plane
from ._ops import Op, saturate_value
from ._pixel import Geom, Pixel, PixType, Stage, per_channel
from ._resampling import (
    BorderMode,
    Interpolation,
    _clamp,
    _f32,
    _i32,
    area_tables,
    border_index,
    cv_area,
    cv_cubic,
    cv_linear,
    cv_nearest,
    cv_nearest_exact,
    cv_resize_scale,
    cv_warp_sample,
)

__all__ = ["Crop", "Resize", "Warping", "Interpolation", "BorderReader", "Deinterlace",
           "AspectRatio", "DeinterlaceMode", "letterbox"]


class ReadBack(Op):
    """Base of the geometry ops."""

    kind: ClassVar[str] = "readback"
    #: Whether the op may sample planes of different sizes (a batch of crops of different
    #: sizes below it): it then reads each plane's size in the kernel.
    takes_ragged: ClassVar[bool] = False

    def batches(self) -> bool:
        """Whether this op gives the output a batch axis (a batch of crops)."""
        return False

    def out_type(self, t: PixType) -> PixType:
        if t.pair:
            raise ArgumentError(f"{self.name}: cannot sample a pair of pixels from a "
                                "dual-source read; combine it first (e.g. fkl.Sub())")
        return t


def bilinear(src: Stage, sx: Value, sy: Value, z: Value) -> Pixel:
    """FKL's bilinear sample at float source coordinates (``sx``, ``sy``) ≥ 0.

    ``x1 = floor(sx)``, ``x2 = x1 + 1``; weights use the unclamped ``x2`` and the reads
    clamp it to the last column (same in y). ``x1`` is also clamped so that a coordinate
    the caller discards anyway never reads outside the plane.
    """
    wm1, hm1 = src.w - 1, src.h - 1
    fx1, fy1 = tkm.floor(sx), tkm.floor(sy)
    wx1 = (fx1 + 1.0) - sx
    wx2 = sx - fx1
    wy1 = (fy1 + 1.0) - sy
    wy2 = sy - fy1
    x1 = _clamp(_i32(fx1), 0, wm1)
    y1 = _clamp(_i32(fy1), 0, hm1)
    x2 = tkm.min(x1 + 1, wm1)
    y2 = tkm.min(y1 + 1, hm1)
    a, b = src.read(x1, y1, z), src.read(x2, y1, z)
    c, d = src.read(x1, y2, z), src.read(x2, y2, z)
    out = []
    for k in range(src.type.channels):
        top = _f32(a[k]) * wx1 + _f32(b[k]) * wx2
        bot = _f32(c[k]) * wx1 + _f32(d[k]) * wx2
        out.append(top * wy1 + bot * wy2)
    return out


#: The largest output side: sizes reach the kernels as int32 values.
_MAX_SIDE = 2**31 - 1


def _size(w: Any, h: Any, what: str) -> tuple[int, int]:
    """An output size ``(w, h)`` in pixels: positive ints (NumPy integers too, as a size
    computed with NumPy is; never bools), each at most :data:`_MAX_SIDE`."""
    try:
        vals = [v.item() if hasattr(v, "item") else v for v in (w, h)]
    except (TypeError, ValueError):  # an array of several values
        vals = [None, None]
    if not all(isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= _MAX_SIDE
               for v in vals):
        raise ArgumentError(f"{what} size: expected positive ints w, h (at most "
                            f"{_MAX_SIDE}), got {w!r}, {h!r}")
    return vals[0], vals[1]


# -- Crop ---------------------------------------------------------------------------------
def _rect(r: Any, what: str) -> tuple[int, int, int, int]:
    try:
        vals = [v.item() if hasattr(v, "item") else v for v in r]
        if len(vals) != 4 or not all(isinstance(v, int) and not isinstance(v, bool)
                                     for v in vals):
            raise TypeError
    except (TypeError, ValueError):
        raise ArgumentError(f"{what}: expected (x, y, w, h) integers, got {r!r}") from None
    x, y, w, h = vals
    if w < 1 or h < 1:
        raise ArgumentError(f"{what}: width and height must be positive, got {r!r}")
    return x, y, w, h


class Crop(ReadBack):
    """``out[j, i] = src[y + j, x + i]`` for the rectangle ``(x, y, w, h)`` (runtime values).

    ``Crop((x, y, w, h))`` or ``Crop(x, y, w, h)``: one crop. ``Crop([(x, y, w, h), ...])``
    (a list of rects, or an (N, 4) integer array): a *batch* of N crops in one kernel,
    plane k = rect k; the output always has a batch axis. From a single image every crop
    reads that image; from a batch of N images crop k reads image k (a per-item rect).
    Crops of different sizes must be followed by a Resize (the output is one array).
    A rectangle outside the source is an error unless a BorderReader sits below the crop.
    """

    def __init__(self, *rect: Any) -> None:
        if len(rect) == 4:
            self.rects = [_rect(rect, "fkl.Crop(x, y, w, h)")]
            self.batch = False
        elif len(rect) == 1 and _is_rect_list(rect[0]):
            rects = list(rect[0])
            if not rects:
                raise ArgumentError("fkl.Crop rects: expected at least one (x, y, w, h) rect, "
                                    "got an empty list")
            if len(rects) > 65535:
                raise ArgumentError(f"fkl.Crop rects: {len(rects)} crops exceed the CUDA grid "
                                    "limit of 65535 planes")
            self.rects = [_rect(r, f"fkl.Crop rects[{i}]") for i, r in enumerate(rects)]
            self.batch = True
        elif len(rect) == 1:
            self.rects = [_rect(rect[0], "fkl.Crop rect")]
            self.batch = False
        else:
            raise ArgumentError(f"fkl.Crop: expected a rect (x, y, w, h), four integers x, y, "
                                f"w, h, or a list of rects, got {len(rect)} arguments")

    @property
    def rect(self) -> tuple[int, int, int, int]:
        """The rect of a single crop (the first of a batch)."""
        return self.rects[0]

    def key(self) -> tuple[Any, ...]:
        # A batch's size is a type: changing N compiles one more kernel, changing rects
        # does not.
        return ("Crop", len(self.rects)) if self.batch else ("Crop",)

    def out_geom(self, g: Geom, t: PixType) -> Geom:
        if self.batch and g.batch not in (1, len(self.rects)):
            raise ArgumentError(
                f"fkl.Crop rects: {len(self.rects)} crops of a batch of {g.batch} images; "
                f"give one rect per image, or crop a single image")
        for i, (x, y, w, h) in enumerate(self.rects):
            if not g.unbounded and (x < 0 or y < 0 or x + w > g.w or y + h > g.h):
                which = f"rects[{i}]" if self.batch else "rect"
                raise ArgumentError(
                    f"fkl.Crop {which} (x={x}, y={y}, w={w}, h={h}) lies outside the "
                    f"{g.w}x{g.h} source; put a fkl.BorderReader before it to read outside "
                    "the image")
        if not self.batch:
            return Geom(self.rects[0][2], self.rects[0][3], g.batch)
        ws = {r[2] for r in self.rects}
        hs = {r[3] for r in self.rects}
        return Geom(max(ws), max(hs), len(self.rects), ragged=len(ws) > 1 or len(hs) > 1)

    def scalar_types(self, t: PixType) -> list[DType]:
        return [dt.int32] if self.batch else [dt.int32] * 4

    def values(self, t: PixType, g: Geom) -> list[Any]:
        if not self.batch:
            x, y, w, h = self.rects[0]
            return [w, h, x, y]
        # The source plane of crop k is k * step: every crop reads image 0 of a single
        # image, image k of a batch.
        return [0 if g.batch == 1 else 1]

    def table_types(self, t: PixType) -> list[DType]:
        return [dt.int32] if self.batch else []

    def tables(self, t: PixType, g: Geom) -> list[tuple[DType, list[Any]]]:
        if not self.batch:
            return []
        return [(dt.int32, [v for x, y, w, h in self.rects for v in (w, h, x, y)])]

    def sample(self, src: Stage, p: list[Value]) -> Stage:
        if not self.batch:
            w, h, cx, cy = p
            return Stage(lambda x, y, z: src.read(x + cx, y + cy, z), w, h, src.type)
        step = p[0]
        rects: Any = p[1]  # a pointer parameter (the rect table)
        z = plane()
        base = z * 4  # this plane's (w, h, x, y), loaded once per thread
        w, h, cx, cy = (rects[base + k] for k in range(4))
        zs = z * step
        return Stage(lambda x, y, _z: src.read(x + cx, y + cy, zs), w, h, src.type,
                     per_plane=True)

    def batches(self) -> bool:
        return self.batch


def _is_rect_list(v: Any) -> bool:
    """A list of rects (its first item is itself a sequence), or an (N, 4) array."""
    shape = getattr(v, "shape", None)
    if shape is not None:
        return len(shape) == 2
    try:
        first = v[0]
    except (TypeError, IndexError, KeyError):
        return isinstance(v, (list, tuple))
    # A NumPy scalar has a shape too (()): a rect of NumPy ints is one rect.
    return hasattr(first, "__len__") or bool(getattr(first, "ndim", 0))


# -- Resize -------------------------------------------------------------------------------
class AspectRatio:
    """Aspect-ratio modes of Resize."""

    IGNORE_AR = "IGNORE_AR"
    PRESERVE_AR = "PRESERVE_AR"
    PRESERVE_AR_LEFT = "PRESERVE_AR_LEFT"
    PRESERVE_AR_RN_EVEN = "PRESERVE_AR_RN_EVEN"
    ALL = (IGNORE_AR, PRESERVE_AR, PRESERVE_AR_LEFT, PRESERVE_AR_RN_EVEN)


def _round_half_away(v: float) -> int:
    return int(math.floor(v + 0.5)) if v >= 0 else -int(math.floor(-v + 0.5))


def _scaled(num: int, den: int, length: int) -> int:
    """``round_half_away(float32(num) / float32(den) * float32(length))``: FKL's letterbox
    scale and product are float32 (``dh / (float)sh``), so exact .5 ties round as there."""
    import numpy as np

    scale = np.float32(num) / np.float32(den)
    return _round_half_away(float(scale * np.float32(length)))


def letterbox(sw: int, sh: int, dw: int, dh: int, mode: str) -> tuple[int, int, int, int]:
    """``(tw, th, x1, y1)``: where the resized image lands in the ``dw`` x ``dh`` output.

    FKL's fit rule: height first (``th = dh``, ``tw`` scaled); when that width exceeds
    ``dw``, width first. ``PRESERVE_AR_RN_EVEN`` floors the *scaled* side to even and
    compares the evened width; the side taken from the output stays as it is (odd stays
    odd). Scale arithmetic is float32, as FKL's."""
    if mode == AspectRatio.IGNORE_AR:
        return dw, dh, 0, 0
    even = mode == AspectRatio.PRESERVE_AR_RN_EVEN

    def fit(v: int) -> int:
        return v - v % 2 if even else v

    th, tw = dh, fit(_scaled(dh, sh, sw))
    if tw > dw:
        tw, th = dw, fit(_scaled(dw, sw, sh))
    tw, th = max(tw, 1), max(th, 1)
    x1 = 0 if mode == AspectRatio.PRESERVE_AR_LEFT else (dw - tw) // 2
    return tw, th, x1, (dh - th) // 2


class Resize(ReadBack):
    """Resize to ``w`` x ``h``. ``interpolation`` (a :class:`Interpolation` value):

    - ``"linear"`` (the default, FKL's): corner-aligned bilinear, ``src_x = x * sw / dw``;
      output float32. ``"nearest"``: ``src[floor(x * sw / dw)]``, float32.
    - ``"cv_linear"``, ``"cv_area"`` (downscaling only), ``"cv_cubic"``, ``"cv_nearest"``,
      ``"cv_nearest_exact"``: ``cv2.resize``'s INTER_LINEAR, INTER_AREA, INTER_CUBIC,
      INTER_NEAREST and INTER_NEAREST_EXACT with
      OpenCV's pixel centres, borders and uint8 fixed-point arithmetic; output in the
      input dtype (docs/fkl-resize.md).

    ``aspect_ratio`` letterboxes onto ``background``."""

    def __init__(self, w: int, h: int, interpolation: str = "linear",
                 aspect_ratio: str = AspectRatio.IGNORE_AR, background: Any = 0) -> None:
        w, h = _size(w, h, "fkl.Resize")
        if interpolation not in Interpolation.RESIZE:
            raise ArgumentError(f"fkl.Resize interpolation: expected one of "
                                f"{Interpolation.RESIZE}, got {interpolation!r}")
        if aspect_ratio not in AspectRatio.ALL:
            raise ArgumentError(f"fkl.Resize aspect_ratio: expected one of {AspectRatio.ALL}, "
                                f"got {aspect_ratio!r}")
        self.size = (w, h)
        self.interpolation = interpolation
        self.aspect_ratio = aspect_ratio
        self.background = background
        #: One background per batch item (``background=fkl.PerItem([...])``), else None.
        self.item_backgrounds = background.items if isinstance(background, PerItem) else None
        #: FKL's ``linear`` by whole factors on integer pixels reads one tap per pixel
        #: (:meth:`whole_steps`: the same values as the four taps). A benchmark knob:
        #: False keeps the four taps.
        self.one_tap = True

    def _opencv(self) -> bool:
        return self.interpolation in Interpolation.OPENCV

    def key(self) -> tuple[Any, ...]:
        return ("Resize", self.interpolation, self.aspect_ratio != AspectRatio.IGNORE_AR,
                self.items())

    def items(self) -> int:
        # Backgrounds matter only when letterboxing.
        if self.item_backgrounds is None or not self._letterboxed():
            return 0
        return len(self.item_backgrounds)

    def _backgrounds(self, t: PixType) -> list[float]:
        """Each item's background (one item without PerItem), per channel, flat."""
        return [float(v) for item in (self.item_backgrounds or [self.background])
                for v in per_channel(item, t.channels, "fkl.Resize background")]

    def out_type(self, t: PixType) -> PixType:
        super().out_type(t)
        self._backgrounds(t)
        # OpenCV's modes keep the dtype, as cv2.resize does; FKL's give float32.
        return t if self._opencv() else t.with_(dt.float32)

    takes_ragged = True

    def out_geom(self, g: Geom, t: PixType) -> Geom:
        if g.ragged and self._letterboxed():
            raise ArgumentError(
                f"fkl.Resize aspect_ratio={self.aspect_ratio}: the planes below have "
                "different sizes (crops of different sizes), so each would be letterboxed "
                "differently; crop equal sizes or use IGNORE_AR")
        if self.interpolation == Interpolation.CV_AREA:
            if g.ragged:
                raise ArgumentError(
                    "fkl.Resize interpolation='cv_area': the planes below have different "
                    "sizes (crops of different sizes); crop equal sizes, or use 'cv_linear'")
            tw, th, _, _ = letterbox(g.w, g.h, *self.size, self.aspect_ratio)
            if tw > g.w or th > g.h:
                raise ArgumentError(
                    f"fkl.Resize interpolation='cv_area' only downscales: {g.w}x{g.h} to "
                    f"{tw}x{th} enlarges a side; use 'cv_linear' or 'cv_cubic' to upscale")
        return Geom(self.size[0], self.size[1], g.batch)

    def _letterboxed(self) -> bool:
        return self.aspect_ratio != AspectRatio.IGNORE_AR

    def scalar_types(self, t: PixType) -> list[DType]:
        types = [dt.int32, dt.int32, dt.float32, dt.float32]
        if self.interpolation == Interpolation.CV_AREA:
            types.append(dt.int32)  # OpenCV's exact 2 x 2 uint8 path rounds halves up
        if self._letterboxed():
            types += [dt.int32] * 4 + ([] if self.items() else [dt.float32] * t.channels)
        return types

    def table_types(self, t: PixType) -> list[DType]:
        types = [dt.float32] if self.items() else []
        if self.interpolation == Interpolation.CV_AREA:  # cells and weights, x then y
            types += [dt.int32, dt.float32, dt.int32, dt.float32]
        return types

    def tables(self, t: PixType, g: Geom) -> list[tuple[DType, list[Any]]]:
        tables: list[tuple[DType, list[Any]]] = \
            [(dt.float32, self._backgrounds(t))] if self.items() else []
        if self.interpolation == Interpolation.CV_AREA:
            # The weights OpenCV computes per column and row (computeResizeAreaTab), here
            # too on the host in double: the kernel only reads them (a double division
            # per tap on the GPU cost more than the taps).
            tw, th, _, _ = letterbox(g.w, g.h, *self.size, self.aspect_ratio)
            for n, d in ((g.w, tw), (g.h, th)):
                index, weights = area_tables(n, d)
                tables += [(dt.int32, index), (dt.float32, weights)]
        return tables

    def values(self, t: PixType, g: Geom) -> list[Any]:
        import numpy as np

        dw, dh = self.size
        tw, th, x1, y1 = letterbox(g.w, g.h, dw, dh, self.aspect_ratio)
        # The scale is a float32 division, as in FKL: sw / dw.
        fx = float(np.float32(g.w) / np.float32(tw))
        fy = float(np.float32(g.h) / np.float32(th))
        vals: list[Any] = [dw, dh, fx, fy]
        if self.interpolation == Interpolation.CV_AREA:
            vals.append(int(g.w == 2 * tw and g.h == 2 * th))
        if self._letterboxed():
            vals += [tw, th, x1, y1] + ([] if self.items() else self._backgrounds(t))
        return vals

    def whole_steps(self, g: Geom, t: PixType) -> bool:
        """Whether this Resize, reading planes of geometry ``g`` and pixels ``t``, is
        FKL's ``linear`` by whole factors on integer pixels: the float32 scales
        ``sw / tw`` and ``sh / th`` are whole numbers (planes of one size, sides below
        2**24). Every ``sx = x · fx`` is then an exact whole number, the weights are
        exactly (1, 0), and each 4-tap sum is ``a · 1 + b · 0 + ... = a`` bit for bit
        (integer samples are finite): the kernel reads tap ``a`` alone
        (:meth:`sample` ``one_tap``), a quarter of the reads. Checked by the plan, per
        input geometry; :attr:`one_tap` False turns it off."""
        import numpy as np

        if (self.interpolation != Interpolation.LINEAR or not self.one_tap or g.ragged
                or t.dtype.is_float or t.pair or max(g.w, g.h) >= 1 << 24):
            return False
        tw, th, _, _ = letterbox(g.w, g.h, *self.size, self.aspect_ratio)
        fx = np.float32(g.w) / np.float32(tw)
        fy = np.float32(g.h) / np.float32(th)
        return bool(fx == np.floor(fx) and fy == np.floor(fy))

    def sample(self, src: Stage, p: list[Value], one_tap: bool = False) -> Stage:
        """The resized stage; ``one_tap``: the plan found whole factors
        (:meth:`whole_steps`), so FKL's ``linear`` reads the one tap of weight 1."""
        dw, dh, fx, fy = p[:4]
        lb = self._letterboxed()
        t = self.out_type(src.type)
        mode = self.interpolation
        area = mode == Interpolation.CV_AREA
        half_up = p[4] if area else None
        area_tabs: list[Any] = []
        if area:
            p, area_tabs = p[:4] + p[5:-4], p[-4:]

        if src.per_plane and not lb:
            # Planes of different sizes (a batch of crops): each plane's scale, in float32
            # as the host computes it (sw / dw), from its own size.
            fx, fy = _f32(src.w) / _f32(dw), _f32(src.h) / _f32(dh)
        bg: list[Any] = list(p[8:])
        if self.items():  # this item's background, from the table
            table: Any = p[8]
            base = plane() * src.type.channels
            bg = [table[base + k] for k in range(src.type.channels)]

        def read(x: Value, y: Value, z: Value) -> Pixel:
            if lb:
                tw, th, x0, y0 = p[4:8]
                xi, yi = x - x0, y - y0
                inside = (xi >= 0) & (xi < tw) & (yi >= 0) & (yi < th)
                xi, yi = _clamp(xi, 0, tw - 1), _clamp(yi, 0, th - 1)
            else:
                xi, yi = x, y
            if self._opencv():
                tw, th = (p[4], p[5]) if lb else (dw, dh)
                if not area:
                    csx, csy = cv_resize_scale(src.w, tw), cv_resize_scale(src.h, th)
                if mode == Interpolation.CV_LINEAR:
                    vals = cv_linear(src, xi, yi, z, csx, csy)
                elif mode == Interpolation.CV_CUBIC:
                    vals = cv_cubic(src, xi, yi, z, csx, csy)
                elif mode == Interpolation.CV_NEAREST:
                    vals = cv_nearest(src, xi, yi, z, csx, csy)
                elif mode == Interpolation.CV_NEAREST_EXACT:
                    vals = cv_nearest_exact(src, xi, yi, z, tw, th)
                else:
                    assert half_up is not None  # set for the area mode above
                    xtab, wx, ytab, wy = area_tabs
                    vals = cv_area(src, xi, yi, z, xtab, wx, ytab, wy, half_up)
                if lb:
                    vals = [where(inside, v, saturate_value(bg[k], t.dtype))
                            for k, v in enumerate(vals)]
                return vals
            sx, sy = _f32(xi) * fx, _f32(yi) * fy
            if self.interpolation == "nearest":
                px = src.read(_clamp(_i32(sx), 0, src.w - 1), _clamp(_i32(sy), 0, src.h - 1), z)
                vals = [_f32(v) for v in px]
            elif one_tap:  # whole factors: sx, sy are whole numbers, weights (1, 0)
                px = src.read(_clamp(_i32(sx), 0, src.w - 1), _clamp(_i32(sy), 0, src.h - 1), z)
                vals = [_f32(v) for v in px]
            else:
                vals = bilinear(src, sx, sy, z)
            if lb:
                vals = [where(inside, v, bg[k]) for k, v in enumerate(vals)]
            return vals

        return Stage(read, dw, dh, t)


# -- Warping ------------------------------------------------------------------------------
class Warping(ReadBack):
    """Warp with ``M`` mapping destination → source (an inverse map: OpenCV's matrix with
    ``WARP_INVERSE_MAP``): 2x3 affine or 3x3 perspective (divides by ``M20 x + M21 y +
    M22``). Output ``w`` x ``h``.

    ``interpolation="linear"`` (the default, FKL's): exact bilinear inside the source, 0
    outside, float32 out; ``border`` must stay ``CONSTANT`` with ``value=0``.
    ``"cv_linear"`` / ``"cv_nearest"``: ``cv2.warpAffine``/``warpPerspective`` with
    ``INTER_LINEAR``/``INTER_NEAREST | WARP_INVERSE_MAP``, ``borderMode=border``,
    ``borderValue=value``: OpenCV's 1/32-pixel fixed-point source positions, its border
    rules and uint8 arithmetic; output in the input dtype (docs/fkl-resize.md)."""

    def __init__(self, matrix: Any, w: int, h: int, interpolation: str = "linear",
                 border: str = BorderMode.CONSTANT, value: Any = 0) -> None:
        import numpy as np

        items = matrix.items if isinstance(matrix, PerItem) else [matrix]
        ms = [np.asarray(m, dtype=np.float64) for m in items]
        for i, m in enumerate(ms):
            which = f"matrix[{i}]" if isinstance(matrix, PerItem) else "matrix"
            if m.shape not in ((2, 3), (3, 3)) or m.shape != ms[0].shape:
                raise ArgumentError(
                    f"fkl.Warping {which}: expected a 2x3 affine or 3x3 perspective matrix "
                    f"(every item the same kind), got shape {m.shape}")
            if not np.isfinite(m).all():
                raise ArgumentError(f"fkl.Warping {which}: every coefficient must be finite, "
                                    f"got {m.tolist()}")
        w, h = _size(w, h, "fkl.Warping")
        if interpolation not in Interpolation.WARP:
            raise ArgumentError(f"fkl.Warping interpolation: expected one of "
                                f"{Interpolation.WARP}, got {interpolation!r}")
        if border not in BorderMode.ALL:
            raise ArgumentError(f"fkl.Warping border: expected one of {BorderMode.ALL}, "
                                f"got {border!r}")
        if interpolation == Interpolation.LINEAR and (
                border != BorderMode.CONSTANT or isinstance(value, PerItem) or
                any(v != 0 for v in per_channel(value, None, "fkl.Warping value"))):
            raise ArgumentError(
                f"fkl.Warping border={border!r}, value={value!r}: FKL's 'linear' warp "
                "reads 0 outside the source; give interpolation='cv_linear' or "
                "'cv_nearest' for OpenCV's border modes")
        if isinstance(value, PerItem):
            raise ArgumentError("fkl.Warping value: one border value for the whole batch "
                                "(a number or one per channel), not fkl.PerItem")
        self.matrices = ms
        self.per_item = isinstance(matrix, PerItem)
        self.matrix, self.size = ms[0], (w, h)
        self.perspective = ms[0].shape == (3, 3)
        self.interpolation, self.border, self.value = interpolation, border, value

    def _opencv(self) -> bool:
        return self.interpolation in Interpolation.OPENCV

    def _mtype(self) -> DType:
        return dt.float32  # OpenCV's warps, too, compute positions from a float32 matrix

    def key(self) -> tuple[Any, ...]:
        return ("Warping", self.perspective, len(self.matrices) if self.per_item else 0,
                self.interpolation, self.border)

    def items(self) -> int:
        return len(self.matrices) if self.per_item else 0

    def out_type(self, t: PixType) -> PixType:
        t = super().out_type(t)
        if not self._opencv():
            return t.with_(dt.float32)
        self._values(t)
        return t

    def _values(self, t: PixType) -> list[float]:
        """The border value per channel (OpenCV modes with a CONSTANT border)."""
        if not self._opencv() or self.border != BorderMode.CONSTANT:
            return []
        return [float(v) for v in per_channel(self.value, t.channels, "fkl.Warping value")]

    takes_ragged = True  # the inside test and the reads use each plane's own size

    def out_geom(self, g: Geom, t: PixType) -> Geom:
        return Geom(self.size[0], self.size[1], g.batch)

    def scalar_types(self, t: PixType) -> list[DType]:
        return ([dt.int32, dt.int32] + ([] if self.per_item else
                                        [self._mtype()] * self.matrix.size)
                + [dt.float64] * len(self._values(t)))

    def values(self, t: PixType, g: Geom) -> list[Any]:
        m = [] if self.per_item else [float(v) for v in self.matrix.reshape(-1)]
        return [*self.size, *m, *self._values(t)]

    def table_types(self, t: PixType) -> list[DType]:
        return [self._mtype()] if self.per_item else []

    def tables(self, t: PixType, g: Geom) -> list[tuple[DType, list[Any]]]:
        if not self.per_item:
            return []
        return [(self._mtype(), [float(v) for m in self.matrices for v in m.reshape(-1)])]

    def sample(self, src: Stage, p: list[Value]) -> Stage:
        # Scalars: w, h, the matrix (unless per item), the border value; then the table.
        w, h = p[0], p[1]
        size = self.matrix.size
        nm = 0 if self.per_item else size
        nv = len(self._values(src.type))
        m = p[2:2 + nm]
        cval: list[Any] = p[2 + nm:2 + nm + nv] or [0.0] * src.type.channels
        if self.per_item:  # matrix k for plane k, loaded once per thread
            base = plane() * size
            table: Any = p[2 + nm + nv]  # a pointer parameter (the matrix table)
            m = [table[base + i] for i in range(size)]
        if self._opencv():
            return _warp_opencv(self, src, w, h, m, cval)
        t = src.type.with_(dt.float32)

        def read(x: Value, y: Value, z: Value) -> Pixel:
            fx, fy = _f32(x), _f32(y)
            xs = m[0] * fx + m[1] * fy + m[2]
            ys = m[3] * fx + m[4] * fy + m[5]
            if self.perspective:
                d = m[6] * fx + m[7] * fy + m[8]
                xs, ys = xs / d, ys / d
            inside = (xs >= 0.0) & (xs < _f32(src.w)) & (ys >= 0.0) & (ys < _f32(src.h))
            # Outside coordinates (also NaN/inf) are replaced before sampling.
            sx = where(inside, xs, 0.0)
            sy = where(inside, ys, 0.0)
            vals = bilinear(src, sx, sy, z)
            return [where(inside, v, 0.0) for v in vals]

        return Stage(read, w, h, t)


def _f32_row(m0: Value, m1: Value, m2: Value, x: Value, y: Value) -> Value:
    """``m0 * x + (m1 * y + m2)`` as OpenCV's vectorised warp computes it in float32: the
    row term with two roundings, then one fused multiply-add. Spelled as double products
    cast to float32 so that no compiler contraction can change a rounding."""
    f64 = dt.float64
    prod = _f32(cast(m1, f64) * cast(y, f64))            # float32 product, rounded once
    row = _f32(cast(prod, f64) + cast(m2, f64))          # float32 sum, rounded once
    return _f32(cast(m0, f64) * cast(x, f64) + cast(row, f64))  # exact m0*x: an fma


def _warp_opencv(self: Warping, src: Stage, w: Value, h: Value, m: list[Value],
                 cval: list[Value]) -> Stage:
    """OpenCV's warp: the float32 source position of destination ``(x, y)`` (a float32
    matrix; perspective divides by the third row), then OpenCV's remap of that position
    (``cv_warp_sample``)."""
    nearest = self.interpolation == Interpolation.CV_NEAREST
    m = [_f32(v) for v in m]

    def read(x: Value, y: Value, z: Value) -> Pixel:
        xs = _f32_row(m[0], m[1], m[2], x, y)
        ys = _f32_row(m[3], m[4], m[5], x, y)
        if self.perspective:
            d = _f32_row(m[6], m[7], m[8], x, y)
            xs, ys = xs / d, ys / d
        return cv_warp_sample(src, xs, ys, z, nearest, self.border, cval)

    return Stage(read, w, h, src.type)


# -- BorderReader -------------------------------------------------------------------------
class BorderReader(ReadBack):
    """Let later stages read outside the image: ``CONSTANT`` (``value``), ``REPLICATE``,
    ``REFLECT``, ``REFLECT_101``, ``WRAP`` — exactly ``np.pad`` for any overshoot."""

    def __init__(self, mode: str = BorderMode.CONSTANT, value: Any = 0) -> None:
        if mode not in BorderMode.ALL:
            raise ArgumentError(f"fkl.BorderReader mode: expected one of {BorderMode.ALL}, "
                                f"got {mode!r}")
        self.mode, self.value = mode, value
        #: One value per batch item (``value=fkl.PerItem([...])``), else None.
        self.item_values = value.items if isinstance(value, PerItem) else None

    def key(self) -> tuple[Any, ...]:
        return ("BorderReader", self.mode, self.items())

    def items(self) -> int:
        return 0 if self.item_values is None else len(self.item_values)

    def _per_item(self, t: PixType) -> list[Any]:
        """The constant of each item (one item without PerItem), per channel, flat."""
        return [v for item in (self.item_values or [self.value])
                for v in per_channel(item, t.channels, "fkl.BorderReader value")]

    def out_type(self, t: PixType) -> PixType:
        super().out_type(t)
        self._per_item(t)
        return t

    def out_geom(self, g: Geom, t: PixType) -> Geom:
        return Geom(g.w, g.h, g.batch, unbounded=True)

    def _constant(self) -> bool:
        return self.mode == BorderMode.CONSTANT

    def scalar_types(self, t: PixType) -> list[DType]:
        return [t.dtype] * t.channels if self._constant() and not self.items() else []

    def values(self, t: PixType, g: Geom) -> list[Any]:
        return self._per_item(t) if self._constant() and not self.items() else []

    def table_types(self, t: PixType) -> list[DType]:
        return [t.dtype] if self._constant() and self.items() else []

    def tables(self, t: PixType, g: Geom) -> list[tuple[DType, list[Any]]]:
        return [(t.dtype, self._per_item(t))] if self._constant() and self.items() else []

    def sample(self, src: Stage, p: list[Value]) -> Stage:
        mode = self.mode
        c = src.type.channels
        if self._constant() and self.items():  # this item's constant, from the table
            table: Any = p[0]
            base = plane() * c
            p = [table[base + k] for k in range(c)]

        def read(x: Value, y: Value, z: Value) -> Pixel:
            xm, ym = border_index(x, src.w, mode), border_index(y, src.h, mode)
            px = src.read(xm, ym, z)
            if mode != BorderMode.CONSTANT:
                return px
            inside = (x >= 0) & (x < src.w) & (y >= 0) & (y < src.h)
            return [where(inside, v, p[k]) for k, v in enumerate(px)]

        return Stage(read, src.w, src.h, src.type)


# -- Deinterlace --------------------------------------------------------------------------
class DeinterlaceMode:
    BLEND = "BLEND"
    LINEAR_EVEN = "LINEAR_EVEN"  # keep the even field, interpolate the odd rows
    LINEAR_ODD = "LINEAR_ODD"    # keep the odd field, interpolate the even rows
    ALL = (BLEND, LINEAR_EVEN, LINEAR_ODD)


class Deinterlace(ReadBack):
    """``BLEND``: row y > 0 becomes ``(cur + above + 1) * 0.5``, row 0 unchanged.
    ``LINEAR_EVEN``/``LINEAR_ODD``: the other field's rows become
    ``(above + below + 1) * 0.5``; a missing neighbour (first/last row) is replaced by the
    one that exists. Output float32."""

    def __init__(self, mode: str = DeinterlaceMode.BLEND) -> None:
        if mode not in DeinterlaceMode.ALL:
            raise ArgumentError(f"fkl.Deinterlace mode: expected one of {DeinterlaceMode.ALL}"
                                f", got {mode!r}")
        self.mode = mode

    def key(self) -> tuple[Any, ...]:
        return ("Deinterlace", self.mode)

    def out_type(self, t: PixType) -> PixType:
        return super().out_type(t).with_(dt.float32)

    def sample(self, src: Stage, p: list[Value]) -> Stage:
        t = src.type.with_(dt.float32)
        hm1 = src.h - 1

        def read(x: Value, y: Value, z: Value) -> Pixel:
            cur = [_f32(v) for v in src.read(x, y, z)]
            if self.mode == DeinterlaceMode.BLEND:
                above = [_f32(v) for v in src.read(x, tkm.max(y - 1, 0), z)]
                return [where(y > 0, (c + a + 1.0) * 0.5, c)
                        for c, a in zip(cur, above, strict=True)]
            keep = 0 if self.mode == DeinterlaceMode.LINEAR_EVEN else 1
            ya = where(y > 0, y - 1, y + 1)
            yb = where(y < hm1, y + 1, y - 1)
            ya, yb = _clamp(ya, 0, hm1), _clamp(yb, 0, hm1)
            above = [_f32(v) for v in src.read(x, ya, z)]
            below = [_f32(v) for v in src.read(x, yb, z)]
            interp = (y % 2) != keep
            return [where(interp, (a + b + 1.0) * 0.5, c)
                    for c, a, b in zip(cur, above, below, strict=True)]

        return Stage(read, src.w, src.h, t)
