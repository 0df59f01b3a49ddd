"""``PitchedArray``: a :class:`~thork_core.DeviceArray` whose rows are padded to a pitch.

``DeviceArray(shape, dtype, pitch=...)`` makes one (the constructor picks this class),
as ``cudaMallocPitch`` does for 2-D allocations: the index along ``pitch_axis`` steps
``pitch`` bytes, the axes after it are packed, and each axis before it steps whole padded
planes. Video decoders and image libraries hand frames over in this layout. The strides
travel in ``__cuda_array_interface__`` and DLPack, so fkl, CuPy, torch and Numba use the
memory in place; kernels that need C-contiguous arrays (Thork's own) reject it by its
strides.
"""

from __future__ import annotations

import math
from typing import Any

from ._device_array import DeviceArray
from ._dtype import DType
from ._errors import ArgumentError

__all__ = ["PitchedArray", "PITCH_ALIGN", "pitch_strides"]

#: Row alignment in bytes of ``pitch=True`` (what cudaMallocPitch gives on recent GPUs:
#: the texture pitch alignment).
PITCH_ALIGN = 512


def pitch_strides(shape: tuple[int, ...], dtype: DType, pitch: Any,
                  pitch_axis: int | None, what: str = "DeviceArray") -> tuple[
                      int, int, tuple[int, ...], int]:
    """``(pitch, axis, byte strides, allocation bytes)`` of a pitched array of ``shape``;
    ``pitch`` is bytes, or True for the row's bytes rounded up to :data:`PITCH_ALIGN`.
    ArgumentError (naming ``what``) for a pitch shorter than a row, not a whole number
    of elements, or an axis without a row after it."""
    nd, itemsize = len(shape), dtype.itemsize
    axis = 0 if pitch_axis is None else pitch_axis
    if nd < 2:
        raise ArgumentError(f"{what} pitch: a pitched array has rows, so at least 2 axes; "
                            f"got shape {shape}")
    if isinstance(axis, bool) or not isinstance(axis, int) or not -nd <= axis < nd - 1:
        raise ArgumentError(
            f"{what} pitch_axis: expected an axis with at least one axis after it (the "
            f"row), from {-nd} to {nd - 2} for shape {shape}, got {pitch_axis!r}")
    axis %= nd
    row = itemsize * math.prod(shape[axis + 1:])
    if pitch is True:
        pitch = max(-(-row // PITCH_ALIGN), 1) * PITCH_ALIGN
    elif isinstance(pitch, bool) or not isinstance(pitch, int) or pitch < row \
            or pitch <= 0 or pitch % itemsize:
        raise ArgumentError(
            f"{what} pitch: expected True or the bytes between rows, a whole number of "
            f"{dtype.name} elements ({itemsize} bytes) and at least the row's {row} bytes "
            f"(shape {shape}, pitch_axis {axis}), got {pitch!r}")
    strides = [0] * nd
    step = itemsize
    for i in range(nd - 1, axis, -1):  # the row: packed
        strides[i] = step
        step *= shape[i]
    step = pitch
    for i in range(axis, -1, -1):  # the pitched axis, then whole padded planes
        strides[i] = step
        step *= shape[i]
    return pitch, axis, tuple(strides), math.prod(shape[:axis + 1]) * pitch


class PitchedArray(DeviceArray):
    """A device array with padded rows (module docstring); made by
    ``DeviceArray(shape, dtype, pitch=..., pitch_axis=0)``, ``DeviceArray.from_host(a,
    pitch=...)`` or ``DeviceArray.wrap(ptr, shape, dtype, pitch=bytes)``.

    ``pitch`` is the bytes between rows, ``pitch_axis`` the axis it steps, ``strides``
    the byte strides, ``nbytes`` the bytes of the elements and ``alloc_bytes`` those of
    the allocation (padding included)."""

    __slots__ = ("pitch", "pitch_axis", "_strides", "alloc_bytes")

    def _set_pitch(self, pitch: Any, pitch_axis: int | None) -> int:
        if pitch is None:
            raise ArgumentError("PitchedArray: give pitch= (bytes, or True)")
        self.pitch, self.pitch_axis, self._strides, self.alloc_bytes = pitch_strides(
            self.shape, self.dtype, pitch, pitch_axis)
        return self.alloc_bytes

    @property
    def strides(self) -> tuple[int, ...]:
        """Byte strides (the pitched axis steps ``pitch``)."""
        return self._strides

    def __repr__(self) -> str:
        return (f"DeviceArray(shape={self.shape}, dtype={self.dtype.name}, "
                f"pitch={self.pitch}, pitch_axis={self.pitch_axis}, "
                f"device=cuda:{self.device})")

    def reshape(self, *shape: Any) -> DeviceArray:
        raise ArgumentError(f"DeviceArray.reshape: a pitched array ({self.shape}, pitch "
                            f"{self.pitch}) has no reshaped view; copy it to a contiguous "
                            "array first")

    def _host_view(self, span: Any) -> Any:
        """The elements of the allocation's bytes ``span`` (a NumPy uint8 array)."""
        import numpy as np

        return np.lib.stride_tricks.as_strided(span.view(self.dtype.numpy), self.shape,
                                               self._strides)

    def copy_from_host(self, array: Any) -> None:
        """Copy NumPy ``array`` (this shape) into the rows; the padding is written with
        zeros. Synchronous."""
        import numpy as np

        host = np.asarray(array)
        if host.shape != self.shape:
            raise ArgumentError(f"DeviceArray.copy_from_host: expected shape {self.shape} "
                                f"(a pitched array), got {host.shape}")
        span = np.zeros(self.alloc_bytes, np.uint8)
        self._host_view(span)[...] = host
        self._copy_bytes(span, self.alloc_bytes, upload=True)

    def to_host(self, out: Any = None) -> Any:
        """A C-contiguous NumPy copy of the elements (``out``: one of this shape and
        dtype to fill), after the work queued on its stream; synchronous."""
        import numpy as np

        if out is not None and (out.shape != self.shape or out.dtype != self.dtype.numpy):
            raise ArgumentError(f"DeviceArray.to_host out: expected shape {self.shape} and "
                                f"dtype {self.dtype.name}, got {out.shape} {out.dtype}")
        span = np.empty(self.alloc_bytes, np.uint8)
        self._copy_bytes(span, self.alloc_bytes, upload=False)
        if out is None:
            return np.ascontiguousarray(self._host_view(span))
        out[...] = self._host_view(span)
        return out

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        cai = dict(super().__cuda_array_interface__)
        cai["strides"] = self._strides
        return cai

    def _dl_strides(self) -> tuple[int, ...] | None:
        isz = self.dtype.itemsize
        return tuple(s // isz for s in self._strides)
