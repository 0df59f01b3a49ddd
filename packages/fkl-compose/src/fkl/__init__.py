"""fkl-compose: the Fused Kernel Library's operation set as a Thork front-end.

``fkl.compose(fkl.TensorRead(), op..., fkl.TensorWrite(), target="gpu"|"cpu")`` builds a
lazy chain; calling it traces the whole chain into **one** kernel (vertical fusion, with
geometry ops fused backwards into the read), compiles it once per type signature and runs
it. Values (factors, rects, sizes, matrices...) are runtime parameters: changing them
never recompiles. See ``docs/fkl.md``.
"""

from __future__ import annotations

from typing import Any

from thork_core import ArgumentError

from ._color import COLOR_CODES, ColorCode, ColorConversion
from ._geometry import (
    AspectRatio,
    BorderMode,
    BorderReader,
    Crop,
    Deinterlace,
    DeinterlaceMode,
    Resize,
    Warping,
    letterbox,
)
from ._loop import StaticLoop
from ._ops import (
    Abs,
    AbsDiff,
    Add,
    AddLast,
    And,
    Cast,
    Discard,
    Div,
    Equal,
    Exp,
    Ln,
    Max,
    Min,
    Mul,
    MxVFloat3,
    Normalize,
    Not,
    Op,
    Or,
    Saturate,
    SaturateCast,
    SaturateFloat,
    ShiftLeft,
    ShiftRight,
    Sqr,
    Sqrt,
    Sub,
    VectorReduce,
    VectorReorder,
    VectorReorderRT,
    Xor,
)
from ._pipe import Pipe, compose, reset_stats, stats
from ._tensor import (
    DualRead,
    MidWrite,
    ReadSet,
    SplitWrite,
    TensorPack,
    TensorRead,
    TensorSplit,
    TensorTPack,
    TensorTSplit,
    TensorWrite,
)

# Aspect-ratio, border and deinterlace modes at top level, as in FKL.
IGNORE_AR = AspectRatio.IGNORE_AR
PRESERVE_AR = AspectRatio.PRESERVE_AR
PRESERVE_AR_LEFT = AspectRatio.PRESERVE_AR_LEFT
PRESERVE_AR_RN_EVEN = AspectRatio.PRESERVE_AR_RN_EVEN


def __getattr__(name: str) -> Any:
    # DeviceBuffer lives in core (shared with the tracer); import it only when asked for.
    if name == "DeviceBuffer":
        from thork_core._device_array import DeviceArray

        return DeviceArray
    raise AttributeError(f"module 'fkl' has no attribute {name!r}")


__all__ = [
    "Abs", "AbsDiff", "Add", "AddLast", "And", "ArgumentError", "AspectRatio", "BorderMode",
    "BorderReader", "COLOR_CODES", "Cast", "ColorCode", "ColorConversion", "Crop",
    "Deinterlace", "DeinterlaceMode", "DeviceBuffer", "Discard", "Div", "DualRead", "Equal",
    "Exp", "IGNORE_AR", "Ln", "Max", "MidWrite", "Min", "Mul", "MxVFloat3", "Normalize", "Not",
    "Op", "Or", "PRESERVE_AR", "PRESERVE_AR_LEFT", "PRESERVE_AR_RN_EVEN", "Pipe", "ReadSet",
    "Resize", "Saturate", "SaturateCast", "SaturateFloat", "ShiftLeft", "ShiftRight",
    "SplitWrite", "Sqr", "Sqrt", "StaticLoop", "Sub", "TensorPack", "TensorRead",
    "TensorSplit", "TensorTPack", "TensorTSplit", "TensorWrite", "VectorReduce",
    "VectorReorder", "VectorReorderRT", "Warping", "Xor", "compose", "letterbox",
    "reset_stats", "stats",
]
__version__ = "0.1.0"
