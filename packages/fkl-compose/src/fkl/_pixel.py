"""What flows between operations: the pixel type, the plane geometry and the traced stage.

A pixel is a C-vector (C in 1..4) of one scalar dtype. While a chain is traced, each
channel is a separate traced scalar, so the generated code keeps every channel in a
register. A multi-source read produces a *tuple* of pixels (a pair for two) until a two-input
op combines it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from thork_core import ArgumentError, DType, dt, dtype_of

__all__ = [
    "PixType", "Geom", "Stage", "RawPlane", "Pixel", "Reader", "as_dtype", "per_channel",
    "value_dtype",
]

#: A traced pixel: one traced scalar per channel (``thork._trace.Value``).
Pixel = list[Any]
#: A traced read: ``(x, y, z) -> Pixel`` with int32 traced coordinates.
Reader = Callable[[Any, Any, Any], Any]


@dataclass(frozen=True)
class PixType:
    """The type of the pixels at one point of a chain: dtype, channel count, and how many
    pixels travel together (``sources``: 1, or n for the tuple of an n-source read)."""

    dtype: DType
    channels: int
    sources: int = 1

    def __post_init__(self) -> None:
        # ``sources`` was the bool ``pair`` once: a bool here would silently mean 1 or 0.
        if isinstance(self.sources, bool) or not isinstance(self.sources, int) \
                or self.sources < 1:
            raise TypeError(f"PixType sources: expected an int >= 1 (pixels in the tuple), "
                            f"got {self.sources!r}")

    @property
    def pair(self) -> bool:
        """A tuple of pixels from a multi-source read (two or more), not yet combined."""
        return self.sources > 1

    def __str__(self) -> str:
        core = f"{self.dtype.name}x{self.channels}"
        if self.sources == 1:
            return core
        return f"pair<{core}>" if self.sources == 2 else f"tuple{self.sources}<{core}>"

    def with_(self, dtype: DType | None = None, channels: int | None = None,
              sources: int | None = None) -> PixType:
        return PixType(dtype or self.dtype, self.channels if channels is None else channels,
                       self.sources if sources is None else sources)


@dataclass(frozen=True)
class Geom:
    """The host-side geometry of a plane: width and height in pixels, batch planes, and
    whether reads outside ``[0, w) x [0, h)`` are defined (a BorderReader sits below).

    ``ragged``: the planes differ in size (a batch of crops of different sizes); ``w`` and
    ``h`` are then the largest, and only a Resize may follow (it gives one size again).

    ``strides``: the strides in elements of a strided input a read accepts, in the order
    the read's pitched form takes them (:attr:`fkl._tensor.ReadOp.stride_count`; a
    frame read's row pitch); empty for contiguous input. Only the read uses them."""

    w: int
    h: int
    batch: int = 1
    unbounded: bool = False
    ragged: bool = False
    strides: tuple[int, ...] = ()


@dataclass
class Stage:
    """A traced source of pixels: ``read(x, y, z)`` and the traced size of the plane.

    ``per_plane``: ``w`` and ``h`` are the size of the thread's own plane (they depend on
    the plane index, as after a batch of crops), so a stage sampling this one computes
    its scale in the kernel rather than taking it from the host."""

    read: Reader
    w: Any
    h: Any
    type: PixType
    per_plane: bool = False
    #: A plain contiguous packed read (:class:`RawPlane`): the kernel may load the
    #: array's elements itself, several pixels at once (the tiled filters' vector
    #: loads). Only a read sets it; every op makes a new Stage without it.
    raw: RawPlane | None = None


@dataclass
class RawPlane:
    """Where a contiguous packed read's pixels are: ``ptr`` (the traced element array),
    ``index(x, y, z)`` the element index of pixel ``(x, y)``'s first channel in plane
    ``z`` (``read(x, y, z)`` loads ``ptr[index .. index + channels - 1]``), and ``row``
    the elements of one row (``w * channels``)."""

    ptr: Any
    index: Callable[[Any, Any, Any], Any]
    row: Any
    channels: int


def as_dtype(value: Any, what: str) -> DType:
    """``value`` as a :class:`DType`; the error names ``what`` (e.g. ``"fkl.Cast dtype"``)."""
    try:
        return dtype_of(value)
    except (TypeError, KeyError, ValueError):
        raise ArgumentError(
            f"{what}: expected a dtype such as 'float32' or numpy.uint8, got {value!r}"
        ) from None


def per_channel(values: Any, channels: int | None, what: str) -> list[Any]:
    """A scalar broadcast to ``channels`` values, or a sequence of exactly that many;
    ``channels=None`` (the pixel not known yet): the value's numbers as given."""
    if channels is None:  # (h-mut) one number or one per channel, whatever the count
        import numpy as np

        try:
            n = int(np.asarray(values, dtype=np.float64).size)
        except (TypeError, ValueError):
            raise ArgumentError(f"{what}: expected a number or one number per channel, "
                                f"got {values!r}") from None
        return per_channel(values, n, what)
    if isinstance(values, (int, float)) and not isinstance(values, bool):
        return [values] * channels
    try:
        import numpy as np

        if isinstance(values, np.generic):
            return [values.item()] * channels
        seq = list(np.asarray(values).reshape(-1).tolist()) \
            if not isinstance(values, Sequence) else list(values)
    except Exception:
        raise ArgumentError(f"{what}: expected a number or one number per channel, "
                            f"got {values!r}") from None
    if len(seq) == 1:
        return seq * channels
    if len(seq) != channels:
        raise ArgumentError(
            f"{what}: got {len(seq)} values but the pixel has {channels} channel(s); "
            f"give one number or {channels}")
    return seq


def value_dtype(pixel: DType, values: Sequence[Any]) -> DType:
    """The runtime-parameter dtype of an op's values on a ``pixel`` of that dtype.

    Float pixels take their own dtype. Integer pixels take int32 (or the pixel's type when
    it is 32/64-bit) for integer values, and float32 as soon as one value is a float; the
    op's result then follows C++ promotion.
    """
    if pixel.is_float:
        return pixel
    if all(_is_int_like(v) for v in values):
        return pixel if pixel.bits >= 32 else dt.int32
    return dt.float32


def _is_int_like(v: Any) -> bool:
    import numpy as np

    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)
