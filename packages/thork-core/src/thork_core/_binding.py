"""Binding call arguments to kernel parameters: the checks every target shares.

Each failure is an :class:`ArgumentError` naming the kernel, the parameter, what it
expected and what it got.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ._adapter import ArrayView
from ._dtype import DType, dt, int_range
from ._errors import ArgumentError
from ._ir import KernelIR, Param, PointerType
from ._limits import float_scalar

__all__ = ["check_arg_count", "array_view", "check_array", "find_view", "scalar_value"]


def check_arg_count(kernel: KernelIR, args: Sequence[Any]) -> None:
    if len(args) != len(kernel.params):
        names = ", ".join(p.name for p in kernel.params)
        raise ArgumentError(
            f"{kernel.name}() takes {len(kernel.params)} argument(s) ({names}), "
            f"got {len(args)}"
        )


def _registry() -> Any:
    """The plugin registry (``_plugins`` imports this module: imported on first use)."""
    global _registry
    from ._plugins import plugins

    _registry = plugins  # later calls go straight to it
    return plugins()


def find_view(obj: Any, stream: int | None = None) -> ArrayView | None:
    """``obj`` through the registered array adapters (highest priority first), or None
    when none takes it: the one adapter lookup (kernel launches, fkl pipes). An adapter
    raises TypeError for an array it recognizes but cannot give (dtype, byte order...).
    Plugins are imported as the lookup reaches their adapters (a NumPy array: none)."""
    reg = _registry()
    tx = type(obj)
    lead = reg.lead_adapter.get(tx)
    if lead is not None:  # NumPy arrays: no walk over the registry
        view = lead.view(obj, stream)
        if view is not None:
            return view
    first = True
    for adapter in reg.each_adapter():
        view = adapter.view(obj, stream)
        if view is not None:
            if first and len(reg.lead_adapter) < 64:
                reg.lead_adapter[tx] = adapter
            return view
        first = False
    return None


def array_view(obj: Any, param: Param, kernel: KernelIR, stream: int | None) -> ArrayView:
    """Adapt ``obj`` through the registered array adapters; an error naming the kernel
    and parameter when none takes it."""
    try:
        view = find_view(obj, stream)
    except TypeError as exc:  # an array the kernel cannot read (dtype, byte order...)
        raise ArgumentError(f"{kernel.name}(): parameter '{param.name}': {exc}") from None
    if view is not None:
        return view
    raise ArgumentError(
        f"{kernel.name}(): parameter '{param.name}' expects an array of "
        f"{_elem(param).name} (NumPy, __cuda_array_interface__ or DLPack), "
        f"got {type(obj).__name__}"
    )


def check_array(view: ArrayView, param: Param, kernel: KernelIR) -> None:
    """Check dtype, dimensions, contiguity and writability against ``param``."""
    elem = _elem(param)
    where = f"{kernel.name}(): parameter '{param.name}'"
    if view.dtype != elem:
        raise ArgumentError(f"{where} expects dtype {elem.name}, got {view.dtype.name}")
    if param.ndim is not None and view.ndim != param.ndim:
        raise ArgumentError(
            f"{where} expects a {param.ndim}-D array, got {view.ndim}-D with shape {view.shape}"
        )
    if not view.contiguous:
        raise ArgumentError(
            f"{where} needs a C-contiguous array, got shape {view.shape} with strides "
            f"{view.strides} (use numpy.ascontiguousarray or .copy())"
        )
    if param.writes and view.readonly:
        raise ArgumentError(f"{where} is written by the kernel but the array is read-only")


def scalar_value(value: Any, param: Param, kernel: KernelIR) -> Any:
    """Check a scalar argument and return what its ctypes slot should hold."""
    import numpy as np

    t = param.type
    assert isinstance(t, DType)
    where = f"{kernel.name}(): parameter '{param.name}'"
    if (isinstance(value, np.ndarray) and value.ndim > 0) or hasattr(
            value, "__cuda_array_interface__"):
        raise ArgumentError(
            f"{where} is a scalar {t.name}, got an array (ndim {getattr(value, 'ndim', '?')})"
        )
    if isinstance(value, np.generic):
        value = value.item()
    if t == dt.bool:
        if not isinstance(value, (bool, int)):
            raise ArgumentError(f"{where} expects a bool, got {type(value).__name__}")
        return bool(value)
    if t.is_int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ArgumentError(
                f"{where} expects an int for {t.name}, got {type(value).__name__} {value!r}")
        lo, hi = int_range(t)
        if not lo <= value <= hi:
            raise ArgumentError(f"{where} value {value} is out of range for {t.name} [{lo}, {hi}]")
        return value
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ArgumentError(f"{where} expects a number for {t.name}, got {type(value).__name__}")
    try:
        value = float_scalar(float(value), t, where)  # overflow to inf is an error
    except OverflowError:  # an int beyond float64
        raise ArgumentError(f"{where} is {t.name}: got an int of {value.bit_length()} bits, "
                            "beyond any float") from None
    if t == dt.float16:
        return int(np.array(value, dtype=np.float16).view(np.uint16))
    if t == dt.bfloat16:
        return _bfloat16_bits(value)
    return float(value)


def _bfloat16_bits(value: float) -> int:
    """``value`` (a float64) rounded once to nearest even bfloat16: through float32
    rounded to odd (truncated, lowest bit set when inexact), which keeps the bits the final
    rounding needs; a plain float32 first would round twice (1 + 2**-8 + 2**-40 → 1)."""
    import numpy as np

    if math.isnan(value):
        return (int(np.array(value, dtype=np.float32).view(np.uint32)) >> 16) | 0x40
    with np.errstate(over="ignore"):
        f = np.array(value, dtype=np.float32)
    bits = int(f.view(np.uint32))
    if math.isfinite(value) and float(f) != value:
        if abs(float(f)) > abs(value):
            bits -= 1  # toward zero
        bits |= 1
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def _elem(param: Param) -> DType:
    assert isinstance(param.type, PointerType)
    return param.type.elem
