"""Memory operations: the reads that start a chain and the writes that end it.

Index arithmetic is int32 (arrays of 2**31 elements or more are rejected with a clear
error): it keeps the address computation cheap on the GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from thork.tracing import Pointer, Value
from thork_core import ArgumentError, ArrayView, DType, dt

from ._ops import Op
from ._pixel import Geom, Pixel, PixType, RawPlane, Stage, as_dtype, per_channel

__all__ = [
    "ReadOp", "WriteOp", "Layout", "Run", "Stream", "vector_width", "packed_strides",
    "planar_strides", "c_strides", "check_span", "TensorRead", "TensorPack",
    "TensorTPack", "TupleRead", "DualRead", "MAX_SOURCES",
    "ReadSet", "TensorWrite", "TensorSplit", "TensorTSplit", "SplitWrite", "MidWrite",
]


class Layout:
    """Which axes the chain's arrays carry besides (H, W): a batch axis, a channel axis.
    ``flat``: the input was 1-D (N,), read as a 1×N image and written back as (N,)."""

    __slots__ = ("batch", "channel_axis", "flat")

    def __init__(self, batch: bool, channel_axis: bool, flat: bool = False) -> None:
        self.batch = batch
        self.channel_axis = channel_axis
        self.flat = flat


class ReadOp(Op):
    """Base of the ops that start a chain. ``inputs`` is how many arrays it reads."""

    kind: ClassVar[str] = "read"
    #: How many arrays the read takes (a tuple read sets it per instance).
    inputs: int = 1
    #: The read accepts an input with strides, read in place: its host_type checks them
    #: and puts them in ``Geom.strides``.
    pitched: ClassVar[bool] = False
    #: A strided input needs the ``"pitched"`` kernel form: the read's scalars are
    #: followed by :attr:`stride_count` int32 scalars, the strides in elements that
    #: host_type put in ``Geom.strides``, and :meth:`stage` gets them after its own
    #: scalars (reads that always take a pitch, as ReadYUV: False).
    pitch_variant: ClassVar[bool] = False
    #: How many stride scalars the pitched form takes (TensorRead: row, plane, pixel; a
    #: tuple read sets it per instance: three per source).
    stride_count: int = 3

    # For the memory ops, ``channel_uniform()`` (:meth:`Op.channel_uniform`) means: the op
    # reads (writes) an image of N pixels x C channels as one packed run of N * C elements
    # in pixel order, so run as a 1-channel op over N * C pixels it touches exactly the
    # same elements in the same places. TensorRead, DualRead, TensorWrite and MidWrite
    # are; planar layouts and per-channel constants are not.

    def host_type(self, views: list[ArrayView]) -> tuple[PixType, Geom, Layout]:
        """Pixel type, geometry and layout from the input arrays (host side)."""
        raise NotImplementedError

    def input_dtypes(self, t: PixType) -> list[DType]:
        return [t.dtype] * self.inputs

    def scalar_types(self, t: PixType) -> list[DType]:
        return [dt.int32, dt.int32]

    def values(self, t: PixType, g: Geom) -> list[Any]:
        return [g.w, g.h]

    def stage(self, ptrs: list[Pointer], p: list[Value], t: PixType) -> Stage:
        raise NotImplementedError

    def flat_streams(self, t: PixType) -> list[Stream] | None:
        """The runs a pixel group reads (see :class:`Run`), or None when this read has no
        flat form (the chain then uses the 2-D kernel)."""
        return None

    def flat_read(self, ptrs: list[Pointer], p: list[Value], t: PixType,
                  run: Run) -> list[Any]:
        """The ``run.count`` pixels of ``run``, in order."""
        raise NotImplementedError


def _packed(views: list[ArrayView], name: str, batch: bool | None,
            vector: bool = False) -> tuple[PixType, Geom, Layout]:
    v = views[0]
    shape = v.shape
    if vector and (batch or v.ndim > 2):
        raise ArgumentError(
            f"{name} vector=True: reads a vector of pixels, (N,) or (N, C), got shape "
            f"{shape}{' with batch=True' if batch else ''}")
    if v.ndim == 1:  # a plain vector, as in seed 004's example: one row of pixels
        (w,), h, c, b, lay = shape, 1, 1, 1, Layout(False, False, flat=True)
    elif v.ndim == 2 and vector:  # FKL's 1-D read of vector pixels: (N, C)
        (w, c), h, b, lay = shape, 1, 1, Layout(False, True, flat=True)
    elif v.ndim == 2:
        (h, w), c, b, lay = shape, 1, 1, Layout(False, False)
    elif v.ndim == 3 and (batch or shape[2] > 4):
        (b, h, w), c, lay = shape, 1, Layout(True, False)
    elif v.ndim == 3:
        (h, w, c), b, lay = shape, 1, Layout(False, True)
    elif v.ndim == 4:
        (b, h, w, c), lay = shape, Layout(True, True)
    else:
        raise ArgumentError(
            f"{name}: expected a vector (N,), an image (H, W), (H, W, C) or a batch "
            f"(B, H, W[, C]), got "
            f"shape {shape}")
    if not 1 <= c <= 4:
        raise ArgumentError(f"{name}: a pixel has 1 to 4 channels, got shape {shape} "
                            f"({c} channels)")
    if h < 1 or w < 1 or b < 1:
        raise ArgumentError(f"{name}: empty input of shape {shape}")
    strides = packed_strides(v, name, c, lay) if not v.contiguous else ()
    return PixType(v.dtype, c), Geom(w, h, b, strides=strides), lay


def packed_strides(v: ArrayView, name: str, c: int, lay: Layout) -> tuple[int, int, int]:
    """The row, plane and pixel strides (in elements) of a strided packed input: its
    channels must be adjacent; pixels, rows and planes may be further apart (a crop view,
    a slice, every other column, RGB of an RGBA array, a padded allocation)."""
    isz, shape = v.dtype.itemsize, v.shape
    strides = v.strides if v.strides is not None else c_strides(shape, isz)
    names = (["B"] if lay.batch else []) + ["H", "W"] + (["C"] if lay.channel_axis else [])
    if lay.flat or len(names) != len(shape):
        raise ArgumentError(f"{name}: a 1-D input must be contiguous, got strides {strides}")
    n = dict(zip(names, shape, strict=True))
    st = {k: (s if n[k] > 1 else None) for k, s in zip(names, strides, strict=True)}
    step = st["W"] if st["W"] is not None else c * isz
    row = st["H"] if st["H"] is not None else step * n["W"]
    plane = st.get("B") or row * n["H"]
    if st.get("C") not in (None, isz) or any(s % isz or s <= 0 for s in (step, row, plane)):
        raise ArgumentError(
            f"{name}: a strided input is read in place when its channels are adjacent and "
            f"its pixels, rows and planes are whole, positive numbers of elements apart; "
            f"got shape {shape} with strides {strides} (use numpy.ascontiguousarray / "
            ".contiguous())")
    row, plane, step = row // isz, plane // isz, step // isz
    check_span((n.get("B", 1) - 1) * plane + (n["H"] - 1) * row + n["W"] * step, name)
    return row, plane, step


def planar_strides(v: ArrayView, name: str, order: str) -> tuple[int, int, int, int]:
    """The (row, plane, pixel, channel) strides in elements of a planar array whose axes
    are ``order`` (``"CHW"``, ``"BCHW"`` or ``"CBHW"``): every plane may be a view of a
    larger one (a crop, a padded pitch, planes apart); strides must be positive whole
    numbers of elements (an axis of size 1 may have any stride)."""
    isz, shape = v.dtype.itemsize, v.shape
    strides = v.strides if v.strides is not None else c_strides(shape, isz)
    st: dict[str, int] = {}
    for axis, n, s in zip(order, shape, strides, strict=True):
        if n > 1 and (s <= 0 or s % isz):
            raise ArgumentError(
                f"{name}: a strided planar array is read or written in place when its "
                f"strides are whole, positive numbers of elements; got shape {shape} with "
                f"strides {strides} (use numpy.ascontiguousarray / .contiguous())")
        st[axis] = s // isz if n > 1 else 0  # a size-1 axis is only ever indexed at 0
    size = dict(zip(order, shape, strict=True))
    check_span(sum((size[a] - 1) * st[a] for a in order) + 1, name)
    return st["H"], st.get("B", 0), st["W"], st["C"]


def c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Byte strides of a C-contiguous array of ``shape``."""
    out, acc = [], itemsize
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))


def check_span(elements: int, name: str) -> None:
    """Raise when a strided array spans too many elements for int32 indexing."""
    if elements >= 2**31:
        raise ArgumentError(f"{name}: the strided array spans {elements} elements; fkl "
                            "kernels index with int32, so it must span fewer than 2**31")


def _index(*terms: tuple[Any, Any]) -> Value:
    """Horner evaluation of a row-major index: ``((a0 * n1 + a1) * n2 + a2)...``."""
    idx = terms[0][0]
    for a, n in terms[1:]:
        idx = idx * n + a
    return idx


# -- the flat (vector) path ---------------------------------------------------------------
#: One contiguous run an op touches per pixel group: (elements per pixel, element dtype).
Stream = tuple[int, DType]


def vector_width(dtype: DType, elems: int) -> int:
    """Elements per access for a run of ``elems`` consecutive ``dtype`` elements: the
    widest of 8, 4, 2 that fits 16 bytes and divides ``elems`` (1: scalar accesses)."""
    for n in (8, 4, 2):
        if n * dtype.itemsize <= 16 and elems % n == 0:
            return n
    return 1


@dataclass
class Run:
    """``count`` consecutive pixels handled by one thread of the flat kernel.

    The image is seen as ``planes`` segments of ``npl`` pixels; the run starts at pixel
    ``q`` of segment ``z``. ``z`` is None when the whole (batched) image is one segment,
    which every packed array allows; planar writes need one segment per plane. With
    ``vector`` the run's accesses are 2/4/8-wide (the host checked the alignment).
    """

    q: Value
    count: int
    vector: bool
    npl: Value
    z: Value | None
    nb: Value | None

    def packed_start(self) -> Value:
        """Pixel index of the run's first pixel in a packed (B, H, W) image."""
        return self.q if self.z is None else self.z * self.npl + self.q

    def load(self, ptr: Pointer, start: Value, elems: int) -> list[Value]:
        """``ptr[start .. start + elems - 1]``, in vector accesses when allowed."""
        n = vector_width(ptr.dtype, elems) if self.vector else 1
        out: list[Value] = []
        for j in range(0, elems, n):
            at = start + j if j else start
            out += ptr.vload(at, n) if n > 1 else [ptr[at]]
        return out

    def store(self, ptr: Pointer, start: Value, values: list[Any]) -> None:
        """``ptr[start ..] = values``, in vector accesses when allowed."""
        n = vector_width(ptr.dtype, len(values)) if self.vector else 1
        for j in range(0, len(values), n):
            at = start + j if j else start
            if n > 1:
                ptr.vstore(at, values[j:j + n])
            else:
                ptr[at] = values[j]


class TensorRead(ReadOp):
    """Read packed pixels: ``t[z, y, x, :]`` of an (H, W), (H, W, C) or (B, H, W[, C])
    array. A 3-D array whose last axis is 1..4 is (H, W, C) unless ``batch=True``.
    A vector (N,) is one row of N pixels; with ``vector=True`` an (N, C) array is N
    pixels of C channels (FKL's 1-D per-thread read), else it is an (H, W) image."""

    elementwise = True
    pitched = True
    pitch_variant = True

    def __init__(self, batch: bool | None = None, vector: bool = False) -> None:
        if not isinstance(vector, bool):
            raise ArgumentError(f"{self.name} vector: expected True or False, got {vector!r}")
        self.batch = batch
        self.vector = vector

    def host_type(self, views: list[ArrayView]) -> tuple[PixType, Geom, Layout]:
        return _packed(views, self.name, self.batch, self.vector)

    def stage(self, ptrs: list[Pointer], p: list[Value], t: PixType) -> Stage:
        src, w, h, c = ptrs[0], p[0], p[1], t.channels
        if len(p) > 2:  # the pitched form: row, plane and pixel strides in elements
            row, plane, step = p[2], p[3], p[4]

            def pitched(x: Value, y: Value, z: Value) -> Pixel:
                base = z * plane + y * row + x * step
                return [src[base + k] if k else src[base] for k in range(c)]

            return Stage(pitched, w, h, t)

        def index(x: Value, y: Value, z: Value) -> Value:
            base = _index((z, None), (y, h), (x, w))
            return base * c if c > 1 else base

        def read(x: Value, y: Value, z: Value) -> Pixel:
            base = index(x, y, z)
            return [src[base + k] if k else src[base] for k in range(c)]

        return Stage(read, w, h, t, raw=RawPlane(src, index, w * c if c > 1 else w, c))

    def flat_streams(self, t: PixType) -> list[Stream] | None:
        return [(t.channels, t.dtype)] * self.inputs

    def flat_read(self, ptrs: list[Pointer], p: list[Value], t: PixType,
                  run: Run) -> list[Any]:
        c = t.channels
        start = run.packed_start()
        if c > 1:
            start = start * c
        vals = run.load(ptrs[0], start, run.count * c)
        return [vals[i * c:(i + 1) * c] for i in range(run.count)]


#: The most sources a tuple read takes (each is one kernel pointer parameter).
MAX_SOURCES = 16


class TupleRead(TensorRead):
    """Read ``n`` same-shape packed arrays (FKL's tuple forms): the chain carries a tuple
    of ``n`` pixels, which a value-less two-input op (``fkl.Add()``, ``fkl.Max()``, ...)
    combines as a left fold ``op(... op(op(s0, s1), s2) ..., s_{n-1})``."""

    # The pitched form takes each source's (row, plane, pixel) strides: any source may
    # be a view (the others' are then their contiguous strides).

    def __init__(self, n: int, batch: bool | None = None, vector: bool = False) -> None:
        if not isinstance(n, int) or isinstance(n, bool) or not 2 <= n <= MAX_SOURCES:
            raise ArgumentError(f"{self.name} n: expected the number of sources, an int "
                                f"from 2 to {MAX_SOURCES}, got {n!r}")
        super().__init__(batch, vector)
        self.inputs = n
        self.stride_count = 3 * n

    def key(self) -> tuple[Any, ...]:
        return (type(self).__name__, self.inputs)

    def host_type(self, views: list[ArrayView]) -> tuple[PixType, Geom, Layout]:
        first = views[0]
        for i, v in enumerate(views[1:], 1):
            if v.shape != first.shape or v.dtype != first.dtype:
                raise ArgumentError(
                    f"{self.name}: every source needs the shape and dtype of source 0, "
                    f"{first.shape} {first.dtype.name}; source {i} is {v.shape} "
                    f"{v.dtype.name}")
        t, g, lay = _packed(views[:1], self.name, self.batch, self.vector)
        t = t.with_(sources=self.inputs)
        if all(v.contiguous for v in views):
            return t, g, lay
        # The strided sources first: their layout is what an error must name.
        one = t.channels
        got = {i: packed_strides(views[i], f"{self.name} input {i}", one, lay)
               for i in sorted(range(len(views)), key=lambda i: views[i].contiguous)}
        strides = tuple(x for i in range(len(views)) for x in got[i])
        return t, Geom(g.w, g.h, g.batch, strides=strides), lay

    def stage(self, ptrs: list[Pointer], p: list[Value], t: PixType) -> Stage:
        one = PixType(t.dtype, t.channels)
        # Own scalars (w, h), then in the pitched form three strides per source.
        ps = [p if len(p) == 2 else [*p[:2], *p[2 + 3 * i:5 + 3 * i]]
              for i in range(len(ptrs))]
        srcs = [TensorRead.stage(self, [ptr], q, one) for ptr, q in zip(ptrs, ps)]

        def read(x: Value, y: Value, z: Value) -> Any:
            return tuple(s.read(x, y, z) for s in srcs)

        return Stage(read, srcs[0].w, srcs[0].h, t)

    def flat_read(self, ptrs: list[Pointer], p: list[Value], t: PixType,
                  run: Run) -> list[Any]:
        one = PixType(t.dtype, t.channels)
        runs = [TensorRead.flat_read(self, [ptr], p, one, run) for ptr in ptrs]
        return list(zip(*runs, strict=True))

    def __repr__(self) -> str:
        return f"{self.name}({self.inputs})"


class DualRead(TupleRead):
    """Read two same-shape packed arrays: the chain carries a pair of pixels, which a
    two-input op (``fkl.Add()``, ``fkl.Sub()``, ... ``fkl.Equal()``) combines.
    ``TupleRead(2)``."""

    def __init__(self, batch: bool | None = None, vector: bool = False) -> None:
        super().__init__(2, batch, vector)

    def key(self) -> tuple[Any, ...]:
        return (type(self).__name__,)

    def __repr__(self) -> str:
        return f"{self.name}()"


class TensorPack(ReadOp):
    """Read planar pixels: channel ``c`` of pixel (z, y, x) is ``t[z, c, y, x]`` of a
    (C, H, W) or (B, C, H, W) array (the inverse of TensorSplit)."""

    transposed: ClassVar[bool] = False
    pitched = True
    pitch_variant = True
    #: The pitched form's strides: row, batch plane, pixel and channel plane.
    stride_count = 4

    def host_type(self, views: list[ArrayView]) -> tuple[PixType, Geom, Layout]:
        v = views[0]
        if v.ndim == 3:
            (c, h, w), b, lay, order = v.shape, 1, Layout(False, True), "CHW"
        elif v.ndim == 4:
            if self.transposed:
                c, b, h, w = v.shape
                order = "CBHW"
            else:
                b, c, h, w = v.shape
                order = "BCHW"
            lay = Layout(True, True)
        else:
            axes = "(C, B, H, W)" if self.transposed else "(B, C, H, W)"
            raise ArgumentError(f"{self.name}: expected a planar (C, H, W) or {axes} array, "
                                f"got shape {v.shape}")
        if not 1 <= c <= 4:
            raise ArgumentError(f"{self.name}: a pixel has 1 to 4 channels, got {c} planes "
                                f"in shape {v.shape}")
        strides = planar_strides(v, self.name, order) if not v.contiguous else ()
        return PixType(v.dtype, c), Geom(w, h, b, strides=strides), lay

    def scalar_types(self, t: PixType) -> list[DType]:
        return [dt.int32, dt.int32, dt.int32]

    def values(self, t: PixType, g: Geom) -> list[Any]:
        return [g.w, g.h, g.batch]

    def stage(self, ptrs: list[Pointer], p: list[Value], t: PixType) -> Stage:
        src, w, h, nb, c = ptrs[0], p[0], p[1], p[2], t.channels
        if len(p) > 3:  # the pitched form: row, batch plane, pixel, channel strides
            row, plane, step, chan = p[3], p[4], p[5], p[6]

            def pitched(x: Value, y: Value, z: Value) -> Pixel:
                base = z * plane + y * row + x * step
                return [src[base + chan * k] if k else src[base] for k in range(c)]

            return Stage(pitched, w, h, t)

        def read(x: Value, y: Value, z: Value) -> Pixel:
            out = []
            for k in range(c):
                plane = k * nb + z if self.transposed else z * c + k
                out.append(src[_index((plane, None), (y, h), (x, w))])
            return out

        return Stage(read, w, h, t)


class TensorTPack(TensorPack):
    """Read planar pixels from a (C, B, H, W) array (the inverse of TensorTSplit)."""

    transposed = True


class ReadSet(ReadOp):
    """A constant generator: every pixel of a ``shape`` = (H, W[, C]) or (B, H, W, C)
    plane is ``value`` (scalar or per channel, a runtime parameter). Reads no memory."""

    inputs = 0

    def __init__(self, value: Any, shape: Any, dtype: Any = "float32") -> None:
        self.value = value
        self.shape = tuple(int(s) for s in shape)
        self.dtype = as_dtype(dtype, "fkl.ReadSet dtype")
        if len(self.shape) not in (2, 3, 4) or min(self.shape) < 1:
            raise ArgumentError(
                f"fkl.ReadSet shape: expected (H, W), (H, W, C) or (B, H, W, C) with positive "
                f"sizes, got {shape!r}")

    def key(self) -> tuple[Any, ...]:
        return ("ReadSet", self.dtype.name, self.channel_uniform())

    def channel_uniform(self) -> bool:
        # One value for every channel: N pixels of C equal channels are N * C elements.
        try:
            return len(per_channel(self.value, 1, "")) == 1
        except ArgumentError:
            return False

    def host_type(self, views: list[ArrayView]) -> tuple[PixType, Geom, Layout]:
        s = self.shape
        if len(s) == 2:
            (h, w), c, b, lay = s, 1, 1, Layout(False, False)
        elif len(s) == 3:
            (h, w, c), b, lay = s, 1, Layout(False, True)
        else:
            (b, h, w, c), lay = s, Layout(True, True)
        if not 1 <= c <= 4:
            raise ArgumentError(f"fkl.ReadSet shape: a pixel has 1 to 4 channels, got {c}")
        return PixType(self.dtype, c), Geom(w, h, b), lay

    def scalar_types(self, t: PixType) -> list[DType]:
        return [dt.int32, dt.int32] + [t.dtype] * t.channels

    def values(self, t: PixType, g: Geom) -> list[Any]:
        return [g.w, g.h] + per_channel(self.value, t.channels, "fkl.ReadSet value")

    def stage(self, ptrs: list[Pointer], p: list[Value], t: PixType) -> Stage:
        vals = p[2:]
        return Stage(lambda x, y, z: list(vals), p[0], p[1], t)

    def flat_streams(self, t: PixType) -> list[Stream] | None:
        return []

    def flat_read(self, ptrs: list[Pointer], p: list[Value], t: PixType,
                  run: Run) -> list[Any]:
        return [list(p[2:]) for _ in range(run.count)]


# -- writes -------------------------------------------------------------------------------
class WriteOp(Op):
    """Base of the ops that end a chain (and of MidWrite, which passes the pixel on)."""

    kind: ClassVar[str] = "write"

    def out_specs(self, t: PixType, g: Geom, lay: Layout) -> list[tuple[tuple[int, ...],
                                                                         DType]]:
        """Shape and dtype of each array this op writes."""
        raise NotImplementedError

    def store(self, ptrs: list[Pointer], px: Pixel, x: Value, y: Value, z: Value, w: Value,
              h: Value, nb: Value, t: PixType) -> None:
        raise NotImplementedError

    def out_type(self, t: PixType) -> PixType:
        self._no_pair(t)
        return t

    #: The final write can store into a strided ``out=`` in place
    #: (:meth:`out_strides`, :meth:`store_strided`).
    pitched: ClassVar[bool] = False
    #: How many int32 stride scalars the ``"pitched-out"`` kernel form takes.
    stride_count: ClassVar[int] = 3

    def out_strides(self, views: list[ArrayView], t: PixType) -> tuple[int, ...]:
        """The :attr:`stride_count` strides in elements of the ``out=`` views this write
        stores (of the shapes it makes, for pixels ``t``; one of them at least strided);
        ArgumentError when a view's layout cannot be written in place."""
        raise NotImplementedError

    def store_strided(self, ptrs: list[Pointer], px: Pixel, x: Value, y: Value, z: Value,
                      strides: list[Value], t: PixType) -> None:
        """Store into an output whose strides in elements (:meth:`out_strides`) are the
        traced ``strides``."""
        raise NotImplementedError

    #: Whether the flat kernel must see each plane as its own segment (planar outputs).
    flat_planar: ClassVar[bool] = False

    def flat_streams(self, t: PixType) -> list[Stream] | None:
        """The runs a pixel group writes (see :class:`Run`), or None when this write has
        no flat form (the chain then uses the 2-D kernel)."""
        return None

    def flat_store(self, ptrs: list[Pointer], pixels: list[Pixel], t: PixType,
                   run: Run) -> None:
        """Store the ``run.count`` pixels of ``run``."""
        raise NotImplementedError


def _one_row(g: Geom, lay: Layout) -> bool:
    """A 1-D chain (the read took a vector) whose output is still one row: it writes 1-D
    arrays (docs/fkl.md, "1-D and 3-D per-thread reads and writes")."""
    return lay.flat and g.h == 1 and not lay.batch


def _packed_shape(t: PixType, g: Geom, lay: Layout) -> tuple[int, ...]:
    if _one_row(g, lay):
        return (g.w,) if t.channels == 1 else (g.w, t.channels)
    shape: tuple[int, ...] = (g.h, g.w)
    if lay.batch:
        shape = (g.batch, *shape)
    if t.channels > 1:
        shape = (*shape, t.channels)
    return shape


class TensorWrite(WriteOp):
    """Write packed pixels: (B,) H, W (, C) — the channel axis is dropped for one channel.
    ``out=`` may be a strided view (a crop of a larger image, a padded pitch): written in
    place."""

    elementwise = True
    pitched = True

    def out_strides(self, views: list[ArrayView], t: PixType) -> tuple[int, ...]:
        c = t.channels
        lay = Layout(len(views[0].shape) - (c > 1) == 3, c > 1)
        return packed_strides(views[0], "fkl pipe out", c, lay)

    def store_strided(self, ptrs: list[Pointer], px: Pixel, x: Value, y: Value, z: Value,
                      strides: list[Value], t: PixType) -> None:
        row, plane, step = strides
        base = z * plane + y * row + x * step
        for k in range(t.channels):
            ptrs[0][base + k if k else base] = px[k]

    def out_specs(self, t: PixType, g: Geom, lay: Layout) -> list[tuple[tuple[int, ...],
                                                                         DType]]:
        return [(_packed_shape(t, g, lay), t.dtype)]

    @staticmethod
    def index(x: Value, y: Value, z: Value, w: Value, h: Value, c: int) -> Value:
        """The element index of pixel ``(x, y)``'s first channel in plane ``z`` of the
        packed output (``w`` x ``h`` planes of ``c`` channels)."""
        base = _index((z, None), (y, h), (x, w))
        return base * c if c > 1 else base

    def store(self, ptrs: list[Pointer], px: Pixel, x: Value, y: Value, z: Value, w: Value,
              h: Value, nb: Value, t: PixType) -> None:
        out, c = ptrs[0], t.channels
        base = self.index(x, y, z, w, h, c)
        for k in range(c):
            out[base + k if k else base] = px[k]

    def flat_streams(self, t: PixType) -> list[Stream] | None:
        return [(t.channels, t.dtype)]

    def flat_store(self, ptrs: list[Pointer], pixels: list[Pixel], t: PixType,
                   run: Run) -> None:
        c = t.channels
        start = run.packed_start()
        run.store(ptrs[0], start * c if c > 1 else start, [v for px in pixels for v in px])


class MidWrite(TensorWrite):
    """Store the pixel (packed, like TensorWrite) and pass it on: one kernel, several
    outputs. It must come after the chain's last geometry op."""

    kind = "midwrite"
    pitched = False


class _Planar(WriteOp):
    """Shared flat form of the planar writes: channel ``k`` of a run goes to plane
    ``_plane(z, nb, k, c)`` of ``npl`` pixels, contiguously. A strided ``out=`` (planes
    that are crops of larger ones, padded rows) is written in place with its (row, batch
    plane, pixel, channel plane) strides."""

    flat_planar = True
    pitched = True
    stride_count = 4
    #: The axes of a batched output (an unbatched one is "CHW").
    order: ClassVar[str] = "BCHW"

    def out_strides(self, views: list[ArrayView], t: PixType) -> tuple[int, ...]:
        v = views[0]
        return planar_strides(v, "fkl pipe out", self.order if v.ndim == 4 else "CHW")

    def store_strided(self, ptrs: list[Pointer], px: Pixel, x: Value, y: Value, z: Value,
                      strides: list[Value], t: PixType) -> None:
        row, plane, step, chan = strides
        base = z * plane + y * row + x * step
        for k in range(t.channels):
            ptrs[0][base + chan * k if k else base] = px[k]

    def flat_streams(self, t: PixType) -> list[Stream] | None:
        return [(1, t.dtype)] * t.channels

    def flat_store(self, ptrs: list[Pointer], pixels: list[Pixel], t: PixType,
                   run: Run) -> None:
        assert run.z is not None and run.nb is not None
        for k in range(t.channels):
            run.store(ptrs[0], self._plane(run.z, run.nb, k, t.channels) * run.npl + run.q,
                      [px[k] for px in pixels])

    @staticmethod
    def _plane(z: Value, nb: Value, k: int, c: int) -> Value:
        """Index of the (H, W) plane that channel ``k`` of batch plane ``z`` goes to."""
        raise NotImplementedError


class TensorSplit(_Planar):
    """Write planar: channel ``c`` of pixel (z, y, x) goes to ``out[z, c, y, x]`` of a
    (B, C, H, W) array ((C, H, W) without a batch)."""

    def out_specs(self, t: PixType, g: Geom, lay: Layout) -> list[tuple[tuple[int, ...],
                                                                         DType]]:
        if _one_row(g, lay):
            return [((t.channels, g.w), t.dtype)]
        shape: tuple[int, ...] = (t.channels, g.h, g.w)
        return [((g.batch, *shape) if lay.batch else shape, t.dtype)]

    def store(self, ptrs: list[Pointer], px: Pixel, x: Value, y: Value, z: Value, w: Value,
              h: Value, nb: Value, t: PixType) -> None:
        c = t.channels
        for k in range(c):
            ptrs[0][_index((z * c + k, None), (y, h), (x, w))] = px[k]

    @staticmethod
    def _plane(z: Value, nb: Value, k: int, c: int) -> Value:
        return z * c + k if k else z * c


class TensorTSplit(_Planar):
    """Write planar, channel-major: ``out[c, z, y, x]`` of a (C, B, H, W) array."""

    order = "CBHW"

    def out_specs(self, t: PixType, g: Geom, lay: Layout) -> list[tuple[tuple[int, ...],
                                                                         DType]]:
        if _one_row(g, lay):
            return [((t.channels, g.w), t.dtype)]
        if lay.batch:
            return [((t.channels, g.batch, g.h, g.w), t.dtype)]
        return [((t.channels, g.h, g.w), t.dtype)]

    def store(self, ptrs: list[Pointer], px: Pixel, x: Value, y: Value, z: Value, w: Value,
              h: Value, nb: Value, t: PixType) -> None:
        for k in range(t.channels):
            ptrs[0][_index((k * nb + z, None), (y, h), (x, w))] = px[k]

    @staticmethod
    def _plane(z: Value, nb: Value, k: int, c: int) -> Value:
        return nb * k + z if k else z


class SplitWrite(WriteOp):
    """Write one 2-D (or (B, H, W)) array per channel; the pipe returns a tuple. ``out=``
    may hold strided views (each its own strides), written in place."""

    pitched = True
    #: (row, plane, pixel) strides of each of up to 4 outputs (unused ones 0).
    stride_count = 12

    def out_strides(self, views: list[ArrayView], t: PixType) -> tuple[int, ...]:
        strides: list[int] = []
        for k, v in enumerate(views):
            lay = Layout(v.ndim == 3, False)
            strides += packed_strides(v, f"fkl pipe out[{k}]", 1, lay)
        return (*strides, *[0] * (self.stride_count - len(strides)))

    def store_strided(self, ptrs: list[Pointer], px: Pixel, x: Value, y: Value, z: Value,
                      strides: list[Value], t: PixType) -> None:
        for k in range(t.channels):
            row, plane, step = strides[3 * k:3 * k + 3]
            ptrs[k][z * plane + y * row + x * step] = px[k]

    def out_specs(self, t: PixType, g: Geom, lay: Layout) -> list[tuple[tuple[int, ...],
                                                                         DType]]:
        shape = (g.w,) if _one_row(g, lay) else \
            (g.batch, g.h, g.w) if lay.batch else (g.h, g.w)
        return [(shape, t.dtype)] * t.channels

    def store(self, ptrs: list[Pointer], px: Pixel, x: Value, y: Value, z: Value, w: Value,
              h: Value, nb: Value, t: PixType) -> None:
        base = _index((z, None), (y, h), (x, w))
        for k in range(t.channels):
            ptrs[k][base] = px[k]

    def flat_streams(self, t: PixType) -> list[Stream] | None:
        return [(1, t.dtype)] * t.channels

    def flat_store(self, ptrs: list[Pointer], pixels: list[Pixel], t: PixType,
                   run: Run) -> None:
        start = run.packed_start()
        for k in range(t.channels):
            run.store(ptrs[k], start, [px[k] for px in pixels])
