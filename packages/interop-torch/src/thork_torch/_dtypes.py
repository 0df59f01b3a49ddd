"""The one table between torch dtypes and Thork dtypes (every Thork dtype has a torch one)."""

from __future__ import annotations

from typing import Any

from thork_core import ArgumentError, DType, dt

__all__ = ["to_thork", "to_torch", "torch_dtypes"]

_NAMES = {
    "bool": "bool", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "float16": "float16", "bfloat16": "bfloat16", "float32": "float32", "float64": "float64",
}


def to_thork(torch_dtype: Any, what: str = "tensor") -> DType:
    """The Thork dtype of a ``torch.dtype``; ArgumentError naming ``what`` for the rest
    (complex, float8, quantized)."""
    name = str(torch_dtype).removeprefix("torch.")
    if name not in _NAMES:
        raise ArgumentError(
            f"{what}: torch dtype {torch_dtype} has no Thork equivalent (Thork has "
            f"{', '.join(_NAMES)})")
    return getattr(dt, _NAMES[name])  # type: ignore[no-any-return]


def to_torch(d: Any) -> Any:
    """The ``torch.dtype`` of a Thork dtype (a DType, its name, or a NumPy dtype)."""
    import torch

    if isinstance(d, torch.dtype):
        return d
    from thork_core import dtype_of

    return getattr(torch, dtype_of(d).name)


def torch_dtypes() -> list[Any]:
    """The torch dtypes that have a Thork dtype (those this torch has: older versions lack
    the wide unsigned ones)."""
    import torch

    found = (getattr(torch, name, None) for name in _NAMES)
    return [d for d in found if isinstance(d, torch.dtype)]
