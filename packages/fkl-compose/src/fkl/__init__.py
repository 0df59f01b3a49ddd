"""fkl-compose: the Fused Kernel Library's operation set as a Thork front-end.

``fkl.compose(fkl.TensorRead(), op..., fkl.TensorWrite(), target="gpu"|"cpu")`` builds a
lazy chain; calling it traces the whole chain into **one** kernel (vertical fusion, with
geometry ops fused backwards into the read), compiles it once per type signature and runs
it. Values (factors, rects, sizes, matrices...) are runtime parameters: changing them
never recompiles. See ``docs/fkl.md``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from thork_core import ArgumentError

if TYPE_CHECKING:  # the real imports, for type checkers and IDEs
    from ._batch import PerItem
    from ._circular import CircularTensor
    from ._color import COLOR_CODES, ColorCode, ColorConversion
    from ._depth import (
        AddOpaqueAlpha,
        ColorDepth,
        DenormalizePixel,
        NormalizePixel,
        SaturateDepth,
    )
    from ._divergent import Divergent, compose_divergent
    from ._filter import (
        MAX_KSIZE,
        BoxFilter,
        Dilate,
        Erode,
        GaussianBlur,
        LinearFilter,
        MedianBlur,
        Sobel,
        gaussian_kernel,
        gaussian_kernel_q8,
    )
    from ._geometry import (
        AspectRatio,
        BorderReader,
        Crop,
        Deinterlace,
        DeinterlaceMode,
        Interpolation,
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
        IsEven,
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
        VectorAnd,
        VectorOr,
        VectorReduce,
        VectorReorder,
        VectorReorderRT,
        Xor,
    )
    from ._pipe import Pipe, compose, reset_stats, stats
    from ._pitched import PitchedBuffer
    from ._resampling import BorderMode
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
        TupleRead,
    )
    from ._yuv import YUV_FORMATS, ReadYUV, WriteYUV
    from ._yuvcolor import RGB2YUV, YUV2RGB, rgb_to_yuv_matrix, yuv_to_rgb_matrix

# Lazy public names (PEP 562): `import fkl` (and its plugin entry point, loaded by
# every Thork process) stays cheap; a name's module loads on first use.
_EXPORTS = {
    "BoxFilter": "._filter",
    "Dilate": "._filter",
    "Erode": "._filter",
    "GaussianBlur": "._filter",
    "LinearFilter": "._filter",
    "MAX_KSIZE": "._filter",
    "gaussian_kernel": "._filter",
    "gaussian_kernel_q8": "._filter",
    "MedianBlur": "._filter",
    "Sobel": "._filter",
    "Abs": "._ops",
    "AbsDiff": "._ops",
    "Add": "._ops",
    "AddLast": "._ops",
    "And": "._ops",
    "AspectRatio": "._geometry",
    "BorderMode": "._resampling",
    "BorderReader": "._geometry",
    "COLOR_CODES": "._color",
    "CircularTensor": "._circular",
    "Divergent": "._divergent",
    "compose_divergent": "._divergent",
    "Cast": "._ops",
    "ColorCode": "._color",
    "ColorConversion": "._color",
    "Crop": "._geometry",
    "Deinterlace": "._geometry",
    "DeinterlaceMode": "._geometry",
    "Discard": "._ops",
    "Div": "._ops",
    "DualRead": "._tensor",
    "Equal": "._ops",
    "Exp": "._ops",
    "Ln": "._ops",
    "Max": "._ops",
    "MidWrite": "._tensor",
    "Min": "._ops",
    "Mul": "._ops",
    "MxVFloat3": "._ops",
    "Normalize": "._ops",
    "Not": "._ops",
    "Op": "._ops",
    "Or": "._ops",
    "PerItem": "._batch",
    "Pipe": "._pipe",
    "ReadSet": "._tensor",
    "Resize": "._geometry",
    "Saturate": "._ops",
    "SaturateCast": "._ops",
    "SaturateFloat": "._ops",
    "ShiftLeft": "._ops",
    "ShiftRight": "._ops",
    "SplitWrite": "._tensor",
    "Sqr": "._ops",
    "Sqrt": "._ops",
    "StaticLoop": "._loop",
    "Sub": "._ops",
    "TensorPack": "._tensor",
    "TupleRead": "._tensor",
    "TensorRead": "._tensor",
    "TensorSplit": "._tensor",
    "TensorTPack": "._tensor",
    "TensorTSplit": "._tensor",
    "TensorWrite": "._tensor",
    "VectorReduce": "._ops",
    "VectorAnd": "._ops",
    "VectorOr": "._ops",
    "IsEven": "._ops",
    "VectorReorder": "._ops",
    "VectorReorderRT": "._ops",
    "Warping": "._geometry",
    "Interpolation": "._resampling",
    "Xor": "._ops",
    "ReadYUV": "._yuv",
    "WriteYUV": "._yuv",
    "YUV_FORMATS": "._yuv",
    "YUV2RGB": "._yuvcolor",
    "RGB2YUV": "._yuvcolor",
    "yuv_to_rgb_matrix": "._yuvcolor",
    "rgb_to_yuv_matrix": "._yuvcolor",
    "ColorDepth": "._depth",
    "PitchedBuffer": "._pitched",
    "NormalizePixel": "._depth",
    "DenormalizePixel": "._depth",
    "SaturateDepth": "._depth",
    "AddOpaqueAlpha": "._depth",
    "compose": "._pipe",
    "letterbox": "._geometry",
    "reset_stats": "._pipe",
    "stats": "._pipe",
}
_MODES = {"IGNORE_AR", "PRESERVE_AR", "PRESERVE_AR_LEFT", "PRESERVE_AR_RN_EVEN"}

def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module, __name__), name)
    elif name in _MODES:  # aspect-ratio modes at top level, as in FKL
        value = getattr(__getattr__("AspectRatio"), name)
    elif name == "DeviceBuffer":  # lives in core, shared with the tracer
        from thork_core.runtime import DeviceArray

        value = DeviceArray
    elif name == "ops":
        value = importlib.import_module(".ops", __name__)
    else:
        # An op from an installed op plugin (``fkl.ops`` entry points), never a
        # built-in name: those are all in _EXPORTS. The ``_`` guard keeps dunder probes
        # (copy, pickle) from scanning entry points.
        from ._registry import plugin_ops

        value = None if name.startswith("_") else plugin_ops(set(_EXPORTS)).get(name)
        if value is None:
            raise AttributeError(f"module 'fkl' has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "Abs", "AbsDiff", "Add", "AddLast", "And", "ArgumentError", "AspectRatio", "BorderMode",
    "BorderReader", "BoxFilter", "Cast", "CircularTensor", "COLOR_CODES", "ColorCode",
    "ColorConversion", "compose", "compose_divergent", "Crop", "Deinterlace", "DeinterlaceMode",
    "DeviceBuffer", "Dilate", "Discard", "Div", "Divergent", "DualRead", "Equal", "Erode",
    "Exp", "gaussian_kernel", "gaussian_kernel_q8", "GaussianBlur", "IGNORE_AR",
    "Interpolation", "IsEven", "letterbox", "LinearFilter", "Ln",
    "Max", "MAX_KSIZE", "MedianBlur", "MidWrite", "Min", "Mul", "MxVFloat3", "Normalize", "Not",
    "Op", "ops", "Or", "PerItem", "Pipe", "PRESERVE_AR", "PRESERVE_AR_LEFT",
    "PRESERVE_AR_RN_EVEN", "ReadSet", "reset_stats", "Resize", "Saturate", "SaturateCast",
    "SaturateFloat", "ShiftLeft", "ShiftRight", "Sobel", "SplitWrite", "Sqr", "Sqrt",
    "StaticLoop", "stats", "Sub", "TensorPack", "TensorRead", "TensorSplit", "TensorTPack",
    "TensorTSplit", "TensorWrite", "TupleRead", "VectorAnd", "VectorOr", "VectorReduce",
    "VectorReorder", "VectorReorderRT",
    "Warping", "Xor", "ReadYUV", "WriteYUV", "YUV_FORMATS", "YUV2RGB", "RGB2YUV",
    "yuv_to_rgb_matrix", "rgb_to_yuv_matrix", "ColorDepth", "NormalizePixel",
    "DenormalizePixel", "SaturateDepth", "AddOpaqueAlpha", "PitchedBuffer",
]
__version__ = "0.1.0"
