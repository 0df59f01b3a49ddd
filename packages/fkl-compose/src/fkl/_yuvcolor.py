"""YUV <-> RGB colour matrices (BT.601, BT.709, BT.2020; limited and full range) and the
ops that apply them.

Every matrix is derived from the standard's published luma coefficients Kr and Kb
(Kg = 1 - Kr - Kb), for a sample depth of n bits (M = 2**n - 1); docs/fkl-video.md
writes the derivation and the resulting numbers down. The matrix and the offsets are
runtime values of the ops (twelve float32 scalars), so changing the standard, the range
or the depth never compiles another kernel.
"""

from __future__ import annotations

from typing import Any

from thork.tracing import Value, cast
from thork_core import ArgumentError, DType, dt

from ._ops import Op
from ._pixel import Geom, Pixel, PixType

__all__ = ["STANDARDS", "YUV2RGB", "RGB2YUV", "yuv_to_rgb_matrix", "rgb_to_yuv_matrix",
           "check_depth", "default_depth"]

#: Published luma coefficients (Kr, Kb): ITU-R BT.601, BT.709, BT.2020 (non-constant
#: luminance).
STANDARDS: dict[str, tuple[float, float]] = {
    "bt601": (0.299, 0.114),
    "bt709": (0.2126, 0.0722),
    "bt2020": (0.2627, 0.0593),
}

#: The sample depths fkl's video ops know (FKL's ColorDepth: 8, 10, 12, 16 bits).
DEPTHS = (8, 10, 12, 16)


def check_depth(depth: Any, what: str) -> int:
    """``depth`` checked as one of 8, 10, 12, 16 (bits per sample)."""
    if isinstance(depth, bool) or depth not in DEPTHS:
        raise ArgumentError(f"{what}: expected a colour depth of 8, 10, 12 or 16 bits, got "
                            f"{depth!r}")
    return int(depth)


def default_depth(d: DType) -> int:
    """The depth a pixel dtype implies when none is given: 16 for 16-bit integers, else 8
    (float pixels are taken to hold values on the 8-bit scale)."""
    return 16 if d in (dt.uint16, dt.int16) else 8


def _standard(standard: Any, what: str) -> tuple[float, float]:
    key = str(standard).lower().replace(".", "").replace("_", "").replace("-", "")
    if key not in STANDARDS:
        raise ArgumentError(f"{what}: expected a standard of 'bt601', 'bt709' or 'bt2020', "
                            f"got {standard!r}")
    return STANDARDS[key]


def _scales(depth: int, full_range: bool) -> tuple[float, float, float, float, float]:
    """``(M, y_offset, y_scale, c_offset, c_scale)`` for ``depth`` bits: a normalized
    E'y in [0, 1] is stored as ``y_offset + y_scale * E'y`` and a normalized E'pb/pr in
    [-0.5, 0.5] as ``c_offset + c_scale * E'pb``."""
    m = float(2**depth - 1)
    s = float(2 ** (depth - 8))
    if full_range:
        return m, 0.0, m, float(2 ** (depth - 1)), m
    return m, 16.0 * s, 219.0 * s, 128.0 * s, 224.0 * s


def yuv_to_rgb_matrix(standard: str = "bt601", full_range: bool = False,
                      depth: int = 8) -> tuple[list[list[float]], list[float]]:
    """``(A, off)`` (float64) with ``rgb = A @ (yuv - off)``, RGB on the same 0..M scale
    as the samples (M = 2**depth - 1)."""
    kr, kb = _standard(standard, "fkl YUV standard")
    kg = 1.0 - kr - kb
    m, yo, ys, co, cs = _scales(check_depth(depth, "fkl YUV depth"), full_range)
    # Normalized: R = Y + 2(1-Kr) Pr; B = Y + 2(1-Kb) Pb;
    # G = Y - 2Kb(1-Kb)/Kg Pb - 2Kr(1-Kr)/Kg Pr; then scaled by M.
    ay, ac = m / ys, m / cs
    a = [[ay, 0.0, ac * 2 * (1 - kr)],
         [ay, -ac * 2 * kb * (1 - kb) / kg, -ac * 2 * kr * (1 - kr) / kg],
         [ay, ac * 2 * (1 - kb), 0.0]]
    return a, [yo, co, co]


def rgb_to_yuv_matrix(standard: str = "bt601", full_range: bool = False,
                      depth: int = 8) -> tuple[list[list[float]], list[float]]:
    """``(A, off)`` (float64) with ``yuv = A @ rgb + off``, RGB on the 0..M scale."""
    kr, kb = _standard(standard, "fkl YUV standard")
    kg = 1.0 - kr - kb
    m, yo, ys, co, cs = _scales(check_depth(depth, "fkl YUV depth"), full_range)
    # E'y = Kr R + Kg G + Kb B; E'pb = (B - E'y) / (2 (1 - Kb)); E'pr = (R - E'y) / (2 (1 - Kr))
    y = [kr, kg, kb]
    pb = [-kr / (2 * (1 - kb)), -kg / (2 * (1 - kb)), (1 - kb) / (2 * (1 - kb))]
    pr = [(1 - kr) / (2 * (1 - kr)), -kg / (2 * (1 - kr)), -kb / (2 * (1 - kr))]
    a = [[ys / m * v for v in y], [cs / m * v for v in pb], [cs / m * v for v in pr]]
    return a, [yo, co, co]


class _Matrix(Op):
    """A 3x3 matrix and offsets on channels 0..2 (a 4th channel, alpha, passes through
    as float32). Output float32."""

    _sub_first = True  # YUV2RGB subtracts the offsets first; RGB2YUV adds them after

    def __init__(self, standard: str = "bt601", full_range: bool = False,
                 depth: int | None = None) -> None:
        _standard(standard, self.name)
        if depth is not None:
            check_depth(depth, f"{self.name} depth")
        self.standard = standard
        self.full_range = bool(full_range)
        self.depth = depth

    def key(self) -> tuple[Any, ...]:
        return (type(self).__name__,)  # the matrix is a runtime value

    def out_type(self, t: PixType) -> PixType:
        self._no_pair(t)
        self._need_channels(t, (3, 4))
        if t.dtype == dt.bool:
            raise ArgumentError(f"{self.name}: unsupported dtype bool")
        return t.with_(dtype=dt.float32)

    def _matrix(self, t: PixType) -> tuple[list[list[float]], list[float]]:
        raise NotImplementedError

    def scalar_types(self, t: PixType) -> list[DType]:
        return [dt.float32] * 12

    def values(self, t: PixType, g: Geom) -> list[Any]:
        a, off = self._matrix(t)
        return [v for row in a for v in row] + off

    def apply(self, px: Pixel, p: list[Value], t: PixType) -> Pixel:
        f = [cast(v, dt.float32) for v in px]
        a, off = p[:9], p[9:]
        src = [f[i] - off[i] for i in range(3)] if self._sub_first else f[:3]
        out = []
        for r in range(3):
            acc = src[0] * a[3 * r] + src[1] * a[3 * r + 1] + src[2] * a[3 * r + 2]
            out.append(acc if self._sub_first else acc + off[r])
        return out + f[3:]


class YUV2RGB(_Matrix):
    """YUV (Y, U=Cb, V=Cr) samples of ``depth`` bits → float32 RGB on the same 0..2**depth-1
    scale (not clamped), with ``standard`` 'bt601', 'bt709' or 'bt2020' and limited
    (default) or full range. ``depth`` None: 16 for 16-bit pixels, else 8 (a YUV read
    passes its format's depth itself)."""

    def _matrix(self, t: PixType) -> tuple[list[list[float]], list[float]]:
        d = self.depth if self.depth is not None else default_depth(t.dtype)
        return yuv_to_rgb_matrix(self.standard, self.full_range, d)


class RGB2YUV(_Matrix):
    """RGB on the 0..2**depth-1 scale → float32 YUV samples (Y, U=Cb, V=Cr) of ``depth``
    bits (not rounded or clamped: a YUV write does that)."""

    _sub_first = False

    def _matrix(self, t: PixType) -> tuple[list[list[float]], list[float]]:
        d = self.depth if self.depth is not None else default_depth(t.dtype)
        return rgb_to_yuv_matrix(self.standard, self.full_range, d)
