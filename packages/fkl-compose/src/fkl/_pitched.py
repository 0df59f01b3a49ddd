"""Pitched device buffers: images whose rows are further apart than their width, as
``cudaMallocPitch`` and video decoders (NVDEC) allocate them.

:class:`PitchedBuffer` is device memory (a core DeviceArray of bytes underneath) exposed
as a strided ``__cuda_array_interface__``: fkl's strided reads and writes
(:class:`fkl.TensorRead`, :class:`fkl.TensorWrite`, :class:`fkl.ReadYUV`) use it in place,
and CuPy, torch or Numba can view it without a copy.
"""

from __future__ import annotations

import math
from typing import Any

from thork_core import ArgumentError, DType, dtype_of

__all__ = ["PitchedBuffer", "PITCH_ALIGN"]

#: Default row alignment in bytes (what cudaMallocPitch typically gives on recent GPUs).
PITCH_ALIGN = 512


class PitchedBuffer:
    """``PitchedBuffer(shape, dtype, pitch=None, device=0, stream=None)``: an (H, W),
    (H, W, C) or (B, H, W[, C]) image in device memory whose rows start ``pitch`` bytes
    apart (default: the row's bytes rounded up to :data:`PITCH_ALIGN`); batch planes are
    ``H * pitch`` bytes apart. ``ptr`` is the first element's address, ``base`` the
    DeviceArray that owns the memory."""

    __slots__ = ("base", "ptr", "shape", "dtype", "pitch", "device", "_plane", "__weakref__")

    def __init__(self, shape: Any, dtype: Any = "uint8", *, pitch: int | None = None,
                 device: int = 0, stream: Any = None) -> None:
        from thork_core.runtime import DeviceArray

        self.shape, self.dtype = _shape(shape), _dtype(dtype)
        self.pitch = _pitch(self.shape, self.dtype, pitch)
        rows = math.prod(self.shape[:-2] if self._channels else self.shape[:-1])
        self.base = DeviceArray((max(rows, 1) * self.pitch,), "uint8", device=device,
                                stream=stream)
        self.ptr, self.device = self.base.ptr, device
        self._plane = self.shape_hw[0] * self.pitch

    @classmethod
    def from_host(cls, array: Any, *, pitch: int | None = None, device: int = 0,
                  stream: Any = None) -> PitchedBuffer:
        """Upload NumPy ``array`` into a new pitched buffer (synchronous)."""
        import numpy as np

        host = np.asarray(array)
        out = cls(host.shape, host.dtype, pitch=pitch, device=device, stream=stream)
        padded = np.zeros(out.base.shape, np.uint8)
        out._host_view(padded)[...] = host
        out.base.copy_from_host(padded)
        return out

    @property
    def _channels(self) -> bool:
        """Whether the last axis is channels: a 3-D shape whose last axis is 1..4, or 4-D."""
        n = len(self.shape)
        return n == 4 or (n == 3 and self.shape[2] <= 4)

    @property
    def shape_hw(self) -> tuple[int, int]:
        """(H, W) of one plane."""
        return (self.shape[-3], self.shape[-2]) if self._channels else \
            (self.shape[-2], self.shape[-1])

    @property
    def strides(self) -> tuple[int, ...]:
        """Byte strides: planes ``H * pitch``, rows ``pitch``, pixels and channels packed."""
        isz = self.dtype.itemsize
        if self._channels:
            c = self.shape[-1]
            tail: tuple[int, ...] = (self.pitch, c * isz, isz)
        else:
            tail = (self.pitch, isz)
        return (self._plane, *tail) if len(self.shape) == len(tail) + 1 else tail

    @property
    def nbytes(self) -> int:
        """Bytes of the elements (the padding not counted)."""
        return math.prod(self.shape) * self.dtype.itemsize

    def __repr__(self) -> str:
        return (f"PitchedBuffer(shape={self.shape}, dtype={self.dtype.name}, "
                f"pitch={self.pitch}, device=cuda:{self.device})")

    def _host_view(self, padded: Any) -> Any:
        import numpy as np

        return np.lib.stride_tricks.as_strided(padded.view(self.dtype.numpy), self.shape,
                                               self.strides)

    def to_host(self) -> Any:
        """A contiguous NumPy copy of the image, after the work queued on its stream."""
        import numpy as np

        return np.ascontiguousarray(self._host_view(self.base.to_host()))

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        from thork_core.runtime import typestr

        return {"shape": self.shape, "typestr": typestr(self.dtype),
                "data": (self.ptr, False), "version": 3, "strides": self.strides,
                "stream": self.base.stream or 1}


def _shape(shape: Any) -> tuple[int, ...]:
    try:
        out = tuple(int(s) for s in shape)
    except TypeError:
        out = ()
    if len(out) not in (2, 3, 4) or min(out) < 1:
        raise ArgumentError(f"fkl.PitchedBuffer shape: expected (H, W), (H, W, C) or "
                            f"(B, H, W[, C]) with positive sizes, got {shape!r}")
    return out


def _dtype(d: Any) -> DType:
    try:
        return dtype_of(d)
    except (TypeError, KeyError, ValueError):
        raise ArgumentError(f"fkl.PitchedBuffer dtype: expected a dtype such as 'uint8', got "
                            f"{d!r}") from None


def _pitch(shape: tuple[int, ...], d: DType, pitch: int | None) -> int:
    n = len(shape)
    channels = n == 4 or (n == 3 and shape[2] <= 4)
    row = shape[-2] * shape[-1] * d.itemsize if channels else shape[-1] * d.itemsize
    if pitch is None:
        return -(-row // PITCH_ALIGN) * PITCH_ALIGN
    if isinstance(pitch, bool) or not isinstance(pitch, int) or pitch < row \
            or pitch % d.itemsize:
        raise ArgumentError(f"fkl.PitchedBuffer pitch: expected a whole number of "
                            f"{d.name} elements, at least the row's {row} bytes, got "
                            f"{pitch!r}")
    return pitch
