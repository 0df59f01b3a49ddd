"""Pitched device images for fkl: the image shorthand of core's pitched DeviceArray.

``fkl.PitchedBuffer(shape, dtype, pitch=None)`` is ``fkl.DeviceBuffer(shape, dtype,
pitch=pitch or True, pitch_axis=...)`` with the pitched axis picked as fkl reads images:
the rows of an (H, W) or (H, W, C) image (axis 0), of each plane of a batch (B, H, W[, C])
(axis 1). The result is core's :class:`~thork_core._pitched_array.PitchedArray` — one
pitched allocation for both names — which fkl's strided reads and writes use in place.
"""

from __future__ import annotations

from typing import Any

from thork_core import ArgumentError

__all__ = ["PitchedBuffer", "PITCH_ALIGN", "image_pitch_axis"]

#: Default row alignment in bytes (core's, what cudaMallocPitch typically gives).
PITCH_ALIGN = 512


def image_pitch_axis(shape: Any) -> int:
    """The axis whose index is the image row: 0 for (H, W) and (H, W, C) with C of 1 to
    4, 1 for a batch (B, H, W) (last axis over 4) or (B, H, W, C)."""
    try:
        dims = tuple(int(s) for s in shape)
    except TypeError:
        dims = ()
    if len(dims) not in (2, 3, 4) or min(dims) < 1:
        raise ArgumentError(f"fkl.PitchedBuffer shape: expected (H, W), (H, W, C) or "
                            f"(B, H, W[, C]) with positive sizes, got {shape!r}")
    return 1 if len(dims) == 4 or (len(dims) == 3 and dims[2] > 4) else 0


class PitchedBuffer:
    """``PitchedBuffer(shape, dtype="uint8", pitch=None, device=0, stream=None)``: a new
    device image whose rows start ``pitch`` bytes apart (default: the row's bytes rounded
    up to :data:`PITCH_ALIGN`); batch planes are ``H * pitch`` bytes apart. Returns a
    pitched ``fkl.DeviceBuffer`` (module docstring)."""

    def __new__(cls, shape: Any, dtype: Any = "uint8", *, pitch: int | None = None,
                device: int = 0, stream: Any = None) -> Any:
        from thork_core.runtime import DeviceArray

        return DeviceArray(shape, dtype, pitch=True if pitch is None else pitch,
                           pitch_axis=image_pitch_axis(shape), device=device, stream=stream)

    @staticmethod
    def from_host(array: Any, *, pitch: int | None = None, device: int = 0,
                  stream: Any = None) -> Any:
        """Upload NumPy ``array`` into a new pitched buffer (synchronous)."""
        import numpy as np
        from thork_core.runtime import DeviceArray

        host = np.asarray(array)
        return DeviceArray.from_host(host, pitch=True if pitch is None else pitch,
                                     pitch_axis=image_pitch_axis(host.shape), device=device,
                                     stream=stream)
