"""Color conversions (the non-YUV codes of FKL's ColorConversion).

Channel swaps and alpha changes are pure register moves. Gray is
``0.299 R + 0.587 G + 0.114 B`` in float32; integer pixels round half to even (and
saturate) back to their type. An appended alpha is 255 whatever the dtype, as in FKL.
"""

from __future__ import annotations

from typing import Any

from thork.tracing import Value, cast
from thork.tracing import math as tkm
from thork_core import ArgumentError, dt

from ._ops import Op, saturate_value
from ._pixel import Pixel, PixType

__all__ = ["ColorConversion", "ColorCode", "COLOR_CODES"]

#: code → (input channels, swap R/B first, output: "rgb" | "rgba" | "gray")
COLOR_CODES: dict[str, tuple[int, bool, str]] = {
    "BGR2RGB": (3, True, "rgb"), "RGB2BGR": (3, True, "rgb"),
    "BGRA2RGBA": (4, True, "rgba"), "RGBA2BGRA": (4, True, "rgba"),
    "RGB2RGBA": (3, False, "rgba"), "BGR2BGRA": (3, False, "rgba"),
    "BGR2RGBA": (3, True, "rgba"), "RGB2BGRA": (3, True, "rgba"),
    "RGBA2RGB": (4, False, "rgb"), "BGRA2BGR": (4, False, "rgb"),
    "BGRA2RGB": (4, True, "rgb"), "RGBA2BGR": (4, True, "rgb"),
    "RGB2GRAY": (3, False, "gray"), "RGBA2GRAY": (4, False, "gray"),
    "BGR2GRAY": (3, True, "gray"), "BGRA2GRAY": (4, True, "gray"),
}


class ColorCode:
    """The codes as attributes: ``fkl.ColorCode.BGR2RGB`` is ``"BGR2RGB"``."""


for _code in COLOR_CODES:
    setattr(ColorCode, _code, _code)


class ColorConversion(Op):
    """Convert between RGB/BGR/RGBA/BGRA/GRAY (``code`` such as ``"BGR2RGB"``)."""

    def __init__(self, code: str) -> None:
        if code not in COLOR_CODES:
            raise ArgumentError(
                f"fkl.ColorConversion code: expected one of {', '.join(COLOR_CODES)}, got "
                f"{code!r} (YUV codes are not implemented yet)")
        self.code = code

    def key(self) -> tuple[Any, ...]:
        return ("ColorConversion", self.code)

    @property
    def name(self) -> str:
        return f"fkl.ColorConversion({self.code})"

    def out_type(self, t: PixType) -> PixType:
        self._no_pair(t)
        cin, _, out = COLOR_CODES[self.code]
        self._need_channels(t, (cin,))
        if t.dtype == dt.bool:
            raise ArgumentError(f"{self.name}: unsupported dtype bool")
        return t.with_(channels={"rgb": 3, "rgba": 4, "gray": 1}[out])

    def apply(self, px: Pixel, p: list[Value], t: PixType) -> Pixel:
        _, swap, out = COLOR_CODES[self.code]
        rgb = [px[2], px[1], px[0]] if swap else list(px[:3])
        if out == "rgb":
            return rgb
        if out == "rgba":
            alpha = px[3] if t.channels == 4 else cast(255, t.dtype)
            return [*rgb, alpha]
        f = [cast(v, dt.float32) for v in rgb]
        gray = f[0] * 0.299 + f[1] * 0.587 + f[2] * 0.114
        if t.dtype.is_float:
            return [cast(gray, t.dtype)]
        return [saturate_value(tkm.rint(gray), t.dtype)]
