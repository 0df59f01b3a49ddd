"""YUV frame formats: the read that starts a chain from a YUV frame and the write that
ends one in a YUV frame (docs/fkl-video.md gives every byte layout).

A frame is one array holding every plane, as decoders and OpenCV hand it over:
NV12/NV21/P010/P016 and YV12/I420 are ``(3H/2, W)``, P210/P216 ``(2H, W)``,
UYVY/Y210/Y216 ``(H, 2W)`` or ``(H, W, 2)``, Y416 ``(H, 4W)`` or ``(H, W, 4)``. The read
accepts a *pitched* frame — a view whose rows are further apart than their width (a
crop, a slice, a padded allocation) — in place, and the write stores into a pitched
``out=`` in place (everything between its rows left alone): the row pitch is a runtime
value, so a new pitch plans again but never compiles again. The planar formats
(YV12/I420) pack two half-width chroma rows per row, so they must be contiguous.

The read produces (Y, U, V) pixels on the format's depth (P010 samples shifted down to
0..1023), plus alpha for Y416; chroma is replicated over its 2x2 (4:2:0) or 2x1 (4:2:2)
block, never interpolated. The write takes (Y, U, V[, A]) pixels on the format's depth
(any dtype), rounds half to even and clamps each sample to 0..2**depth-1; a chroma sample
is the mean of its block's pixels (in float32) rounded the same way. The write's kernel
runs one thread per chroma block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from thork.tracing import Pointer, Value, cast
from thork.tracing import math as tkm
from thork_core import ArgumentError, ArrayView, DType, dt

from ._pixel import Geom, Pixel, PixType, Stage
from ._tensor import Layout, ReadOp, WriteOp, c_strides, check_span

__all__ = ["YUVFormat", "YUV_FORMATS", "ReadYUV", "WriteYUV", "yuv_format"]


@dataclass(frozen=True)
class YUVFormat:
    """One frame format. ``layout``: ``"semi"`` (a Y plane, then one interleaved chroma
    plane), ``"planar"`` (Y, then two chroma planes of half pitch), ``"packed"`` (every
    sample in one plane). ``sub``: chroma subsampling (x, y). ``pos``: for semi, the
    offsets of U and V in a chroma pair; for planar, which plane (0 or 1) holds U and V;
    for packed, the offsets of (Y0, U, V[, A]) in a group of words. ``shift``: how far the
    sample sits up in its word (P010/Y210: 6)."""

    name: str
    dtype: DType
    depth: int
    layout: str
    sub: tuple[int, int]
    pos: tuple[int, ...]
    shift: int = 0

    @property
    def channels(self) -> int:
        return 4 if len(self.pos) == 4 else 3

    @property
    def max_value(self) -> int:
        return int(2**self.depth - 1)

    def frame_shape(self, w: int, h: int) -> tuple[int, ...]:
        """The shape of a contiguous frame of ``w`` x ``h`` pixels."""
        if self.layout == "packed":
            k = 2 if self.sub == (2, 1) else 4
            return (h, w, k)
        rows = h + h // 2 if self.sub == (2, 2) else 2 * h
        return (rows, w)


_U8, _U16 = dt.uint8, dt.uint16
YUV_FORMATS: dict[str, YUVFormat] = {f.name: f for f in (
    YUVFormat("NV12", _U8, 8, "semi", (2, 2), (0, 1)),
    YUVFormat("NV21", _U8, 8, "semi", (2, 2), (1, 0)),
    YUVFormat("P010", _U16, 10, "semi", (2, 2), (0, 1), 6),
    YUVFormat("P016", _U16, 16, "semi", (2, 2), (0, 1)),
    YUVFormat("P210", _U16, 10, "semi", (2, 1), (0, 1), 6),
    YUVFormat("P216", _U16, 16, "semi", (2, 1), (0, 1)),
    YUVFormat("I420", _U8, 8, "planar", (2, 2), (0, 1)),
    YUVFormat("YV12", _U8, 8, "planar", (2, 2), (1, 0)),
    YUVFormat("UYVY", _U8, 8, "packed", (2, 1), (1, 0, 2)),
    YUVFormat("Y210", _U16, 10, "packed", (2, 1), (0, 1, 3), 6),
    YUVFormat("Y216", _U16, 16, "packed", (2, 1), (0, 1, 3)),
    YUVFormat("Y416", _U16, 16, "packed", (1, 1), (1, 0, 2, 3)),
)}


def yuv_format(name: Any, what: str) -> YUVFormat:
    """The format called ``name`` (case-insensitive)."""
    f = YUV_FORMATS.get(str(name).upper())
    if f is None:
        raise ArgumentError(f"{what}: expected a YUV format of {', '.join(YUV_FORMATS)}, "
                            f"got {name!r}")
    return f


def _frame_geometry(f: YUVFormat, v: ArrayView, what: str) -> tuple[int, int, int]:
    """``(w, h, pitch)`` of a frame array (pitch: elements between rows)."""
    isz = v.dtype.itemsize
    if v.dtype != f.dtype:
        raise ArgumentError(f"{what}: a {f.name} frame holds {f.dtype.name} samples, got "
                            f"dtype {v.dtype.name}")
    shape = v.shape
    strides = v.strides if v.strides is not None else c_strides(shape, isz)
    if f.layout == "packed" and len(shape) == 3:
        k = 2 if f.sub == (2, 1) else 4
        if shape[2] != k or strides[2] != isz or strides[1] != k * isz:
            raise ArgumentError(f"{what}: a {f.name} frame is (H, W, {k}) with packed "
                                f"pixels, got shape {shape} with strides {strides}")
        rows, cols = shape[0], shape[1] * k
    elif len(shape) == 2:
        if strides[1] != isz:
            raise ArgumentError(f"{what}: the samples of a row must be adjacent (a row "
                                f"stride is accepted, a column stride is not), got shape "
                                f"{shape} with strides {strides}")
        rows, cols = shape
    else:
        want = "(H, 2W) or (H, W, 2)" if f.sub == (2, 1) and f.layout == "packed" else \
            "(H, 4W) or (H, W, 4)" if f.layout == "packed" else \
            "(3H/2, W)" if f.sub == (2, 2) else "(2H, W)"
        raise ArgumentError(f"{what}: a {f.name} frame is a {want} array, got shape {shape}")
    if strides[0] % isz or strides[0] < cols * isz:
        raise ArgumentError(f"{what}: the row stride {strides[0]} bytes is not a whole "
                            f"number of samples at least a row long (shape {shape})")
    pitch = strides[0] // isz
    check_span(rows * pitch, what)
    if f.layout == "packed":
        per = 2 if f.sub == (2, 1) else 1  # pixels per group of 4 samples
        if cols % 4:
            raise ArgumentError(
                f"{what}: a {f.name} row holds groups of 4 samples ({per} pixel(s) each), "
                f"got {cols} samples per row" + (" (the width must be even)" if per == 2
                                                 else ""))
        w, h = cols // 4 * per, rows
    elif f.sub == (2, 2):
        if rows % 3:
            raise ArgumentError(f"{what}: a {f.name} frame has 3H/2 rows (H luma rows, "
                                f"H/2 chroma rows, H even), got {rows} rows")
        w, h = cols, rows // 3 * 2
    else:
        if rows % 2:
            raise ArgumentError(f"{what}: a {f.name} frame has 2H rows, got {rows}")
        w, h = cols, rows // 2
    sx, sy = f.sub
    if w % sx or h % sy or w < 1 or h < 1:
        raise ArgumentError(
            f"{what}: {f.name} subsamples chroma {sx}x{sy}, so the image needs a width "
            f"that is a multiple of {sx} and a height that is a multiple of {sy}; got "
            f"{w}x{h} (from shape {shape})")
    if f.layout == "planar" and pitch != cols:
        # Its chroma rows are half a row long: in a pitched array they would lie partly
        # outside the view's columns, so only a contiguous frame is unambiguous.
        raise ArgumentError(f"{what}: a {f.name} frame must be contiguous (its chroma "
                            f"planes pack two half-width rows per row), got a row stride "
                            f"of {pitch} samples for rows of {cols}")
    return w, h, pitch


class ReadYUV(ReadOp):
    """Read a YUV frame of ``format`` (``"NV12"``, ``"P010"``, ``"UYVY"``...): pixels
    (Y, U, V) — (Y, U, V, A) for Y416 — on the format's depth, as uint8 or uint16.

    ``to_rgb``: a standard (``"bt601"``, ``"bt709"``, ``"bt2020"``) to convert to float32
    RGB right in the read (as :class:`fkl.YUV2RGB` with the format's depth), with
    ``full_range``. The frame may be a pitched view (module docstring)."""

    pitched = True

    def __init__(self, format: str, to_rgb: str | None = None,  # noqa: A002
                 full_range: bool = False) -> None:
        self.format = yuv_format(format, "fkl.ReadYUV format")
        if full_range and to_rgb is None:
            raise ArgumentError("fkl.ReadYUV full_range: applies to the RGB conversion; give "
                                "to_rgb='bt601', 'bt709' or 'bt2020' with it")
        self.to_rgb = None
        if to_rgb is not None:
            from ._yuvcolor import YUV2RGB

            self.to_rgb = YUV2RGB(to_rgb, full_range, self.format.depth)

    @property
    def name(self) -> str:
        return f"fkl.ReadYUV({self.format.name})"

    def key(self) -> tuple[Any, ...]:
        return ("ReadYUV", self.format.name, self.to_rgb is not None)

    def host_type(self, views: list[ArrayView]) -> tuple[PixType, Geom, Layout]:
        f = self.format
        w, h, pitch = _frame_geometry(f, views[0], self.name)
        t = PixType(f.dtype, f.channels)
        if self.to_rgb is not None:
            t = self.to_rgb.out_type(t)
        return t, Geom(w, h, 1, strides=(pitch,)), Layout(False, True)

    def _raw(self) -> PixType:
        return PixType(self.format.dtype, self.format.channels)

    def input_dtypes(self, t: PixType) -> list[DType]:
        return [self.format.dtype]

    def scalar_types(self, t: PixType) -> list[DType]:
        extra = self.to_rgb.scalar_types(self._raw()) if self.to_rgb is not None else []
        return [dt.int32, dt.int32, dt.int32, *extra]

    def values(self, t: PixType, g: Geom) -> list[Any]:
        extra = self.to_rgb.values(self._raw(), g) if self.to_rgb is not None else []
        return [g.w, g.h, g.strides[0] if g.strides else g.w, *extra]

    def stage(self, ptrs: list[Pointer], p: list[Value], t: PixType) -> Stage:
        src, w, h, pitch = ptrs[0], p[0], p[1], p[2]
        f = self.format
        raw = self._raw()

        def sample(i: Value) -> Value:
            v = src[i]
            return cast(v >> f.shift, f.dtype) if f.shift else v

        def read(x: Value, y: Value, z: Value) -> Pixel:
            if f.layout == "packed":
                if f.sub == (1, 1):
                    base = y * pitch + x * 4
                    px = [sample(base + k) for k in f.pos]
                else:
                    base = y * pitch + (x >> 1) * 4
                    y0, u, v = f.pos
                    px = [sample(base + (x & 1) * 2 + y0), sample(base + u),
                          sample(base + v)]
            else:
                cy = (y >> 1) if f.sub == (2, 2) else y
                luma = sample(y * pitch + x)
                if f.layout == "semi":
                    cbase = (h + cy) * pitch + (x >> 1) * 2
                    px = [luma, sample(cbase + f.pos[0]), sample(cbase + f.pos[1])]
                else:
                    half = w >> 1  # contiguous (checked on the host)
                    plane = (h >> 1) * half
                    cbase = h * w + cy * half + (x >> 1)
                    px = [luma, sample(cbase + plane * f.pos[0] if f.pos[0] else cbase),
                          sample(cbase + plane * f.pos[1] if f.pos[1] else cbase)]
            if self.to_rgb is not None:
                px = self.to_rgb.apply(px, list(p[3:]), raw)
            return px

        return Stage(read, w, h, t)


class WriteYUV(WriteOp):
    """Write a YUV frame of ``format`` from (Y, U, V) pixels — (Y, U, V[, A]) for Y416,
    alpha = 2**16-1 when the pixel has none — on the format's depth (module docstring for
    rounding and chroma). The output is a new contiguous frame of the format's shape, or
    ``out=`` of that shape with any row stride (a pitched frame, written in place; not
    for YV12/I420)."""

    pitched = True
    #: The pitched form takes the row pitch in samples.
    stride_count = 1

    def __init__(self, format: str) -> None:  # noqa: A002
        self.format = yuv_format(format, "fkl.WriteYUV format")

    @property
    def name(self) -> str:
        return f"fkl.WriteYUV({self.format.name})"

    @property
    def block(self) -> tuple[int, int]:
        """Pixels (x, y) one thread writes: the chroma block."""
        return self.format.sub

    def key(self) -> tuple[Any, ...]:
        return ("WriteYUV", self.format.name)

    def out_type(self, t: PixType) -> PixType:
        self._no_pair(t)
        allowed = (3, 4) if self.format.channels == 4 else (3,)
        self._need_channels(t, allowed)
        if t.dtype == dt.bool:
            raise ArgumentError(f"{self.name}: unsupported dtype bool")
        return t

    def out_specs(self, t: PixType, g: Geom, lay: Layout) -> list[tuple[tuple[int, ...],
                                                                         DType]]:
        f = self.format
        sx, sy = f.sub
        if g.w % sx or g.h % sy:
            raise ArgumentError(
                f"{self.name}: {f.name} subsamples chroma {sx}x{sy}, so the image needs a "
                f"width that is a multiple of {sx} and a height that is a multiple of {sy}; "
                f"got {g.w}x{g.h}")
        if g.batch != 1:
            raise ArgumentError(f"{self.name}: writes one frame, got a batch of {g.batch}")
        return [(f.frame_shape(g.w, g.h), f.dtype)]

    def out_strides(self, views: list[ArrayView], t: PixType) -> tuple[int, ...]:
        return (_frame_geometry(self.format, views[0], f"{self.name} out")[2],)

    def store_strided(self, ptrs: list[Pointer], px: Pixel, x: Value, y: Value, z: Value,
                      strides: list[Value], t: PixType) -> None:
        # Reached for 4:4:4 (Y416: a block of one pixel); the pitch is all it needs.
        self.store_block(ptrs, [[px]], x, y, z, None, None, None, t, strides)

    def _quantize(self, v: Value) -> Value:
        """A sample on the format's depth: rounded half to even, clamped, shifted up."""
        f = self.format
        q = tkm.min(tkm.max(tkm.rint(cast(v, dt.float32)), 0.0), float(f.max_value))
        s = cast(q, f.dtype)
        return cast(s << f.shift, f.dtype) if f.shift else s

    def _sample(self, v: Value, t: PixType) -> Value:
        if t.dtype == self.format.dtype and not self.format.shift:
            # Already a sample of the format's dtype using all its bits (a read's pixel):
            # every value is a valid sample, stored as it is.
            return v
        return self._quantize(v)

    def store(self, ptrs: list[Pointer], px: Pixel, x: Value, y: Value, z: Value, w: Value,
              h: Value, nb: Value, t: PixType) -> None:
        self.store_block(ptrs, [[px]], x, y, z, w, h, nb, t)

    def store_block(self, ptrs: list[Pointer], pixels: list[list[Pixel]], x: Value,
                    y: Value, z: Value, w: Any, h: Any, nb: Any, t: PixType,
                    strides: list[Value] | None = None) -> None:
        """Store the block of ``pixels[dy][dx]`` whose chroma sample is (x, y);
        ``strides``: ``[pitch]``, the row pitch in samples of a pitched ``out=`` (None: a
        contiguous frame, rows ``w`` samples apart or one packed row of pixels)."""
        f, out = self.format, ptrs[0]
        sx, sy = f.sub
        flat = [px for row in pixels for px in row]
        pitch = strides[0] if strides is not None else None

        def chroma(k: int) -> Value:
            if len(flat) == 1:
                return self._sample(flat[0][k], t)
            acc = cast(flat[0][k], dt.float32)
            for px in flat[1:]:
                acc = acc + cast(px[k], dt.float32)
            return self._quantize(acc * (1.0 / len(flat)))

        u, v = chroma(1), chroma(2)
        if f.layout == "packed":
            if f.sub == (1, 1):
                base = (y * w + x) * 4 if pitch is None else y * pitch + x * 4
                alpha = flat[0][3] if t.channels == 4 else None
                vals = [flat[0][0], flat[0][1], flat[0][2]]
                samples = [self._sample(s, t) for s in vals]
                samples.append(self._sample(alpha, t) if alpha is not None
                               else cast(f.max_value << f.shift, f.dtype))
                for k, s in zip(f.pos, samples, strict=True):
                    out[base + k if k else base] = s
                return
            base = (y * (w >> 1) + x) * 4 if pitch is None else y * pitch + x * 4
            y0, up, vp = f.pos
            out[base + y0 if y0 else base] = self._sample(flat[0][0], t)
            out[base + y0 + 2] = self._sample(flat[1][0], t)
            out[base + up if up else base] = u
            out[base + vp] = v
            return
        x0, y0_ = x * sx, y * sy
        row = w if pitch is None else pitch
        for dy in range(sy):
            for dx in range(sx):
                out[(y0_ + dy) * row + x0 + dx] = self._sample(pixels[dy][dx][0], t)
        if f.layout == "semi":
            cbase = (h + y) * row + x * 2
            out[cbase + f.pos[0] if f.pos[0] else cbase] = u
            out[cbase + f.pos[1] if f.pos[1] else cbase] = v
        else:
            half = w >> 1
            plane = (h >> 1) * half
            cbase = h * w + y * half + x
            out[cbase + plane * f.pos[0] if f.pos[0] else cbase] = u
            out[cbase + plane * f.pos[1] if f.pos[1] else cbase] = v
