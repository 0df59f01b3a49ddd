"""The flat (vectorized) kernel: the fast path for chains without geometry ops.

Without a ReadBack every output pixel depends only on the input pixel at the same
position, and packed arrays of the same (B, H, W) geometry are one contiguous run of
pixels. So the image is treated as a 1-D array of ``N = B * H * W`` pixels, and each
thread of a 1-D grid handles a *group* of ``P`` consecutive pixels ("thread fusion"):

    i = blockIdx.x * 256 + threadIdx.x
    if i < N / P:        P pixels from pixel i * P, 2/4/8-wide vector loads and stores
    else:                one pixel (the N % P remaining ones), scalar accesses

``P`` is the smallest power of two for which every array's share of a group is a whole
number of 16-byte vectors (8-byte for 1-byte elements: the tracer's widest is 8 lanes),
e.g. 4 pixels = three float4 for float32 x3, 1 pixel = one float4 for float32 x4. Each
group then starts on a vector boundary *relative to the array's base*, so the only runtime
condition is the base addresses' alignment, which the pipe checks on every call (and uses
the 2-D kernel for misaligned arrays).

Planar writes (TensorSplit, TensorTSplit) write each channel plane contiguously: the grid
gets one row of blocks per batch plane (``blockIdx.y``), ``N`` becomes ``H * W``, and the
plane starts must be aligned too (a host check on ``H * W``).

Results are bit-identical to the 2-D kernel: each pixel goes through the same traced ops,
only the addressing differs.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd
from typing import Any

from thork._control import if_, return_
from thork._trace import Trace, Value, cast, set_current
from thork_core import DType, dt
from thork_core._ir import Special

from ._lowering import Chain, Lowered, Params, write_dtypes
from ._pixel import Geom, PixType
from ._tensor import Run, Stream, WriteOp, vector_width

__all__ = ["FlatSpec", "flat_spec", "lower_flat", "FLAT_BLOCK"]

#: Threads per block of the flat kernel (1-D).
FLAT_BLOCK = (256, 1, 1)

#: Most pixels one thread handles: bounds the code (the chain is traced P + 1 times).
_MAX_PIXELS = 16


def _widest(dtype: DType) -> int:
    """The widest vector access (in elements) the tracer offers for ``dtype``."""
    for n in (8, 4, 2):
        if n * dtype.itemsize <= 16:
            return n
    return 1


@dataclass(frozen=True)
class FlatSpec:
    """How a chain runs as a flat kernel (a type-level decision).

    ``pixels``: P, pixels per thread; ``align``: the byte alignment every array's base
    address needs for the vector accesses; ``planar``: one segment per batch plane
    (planar writes); ``streams``: every contiguous run a group reads or writes, of which
    ``planar_streams`` are the channel planes of planar writes.
    """

    pixels: int
    align: int
    planar: bool
    streams: tuple[Stream, ...]
    planar_streams: tuple[Stream, ...] = ()

    def segments(self, g: Geom) -> tuple[int, int]:
        """(pixels per segment, segments) for an image of geometry ``g``."""
        return (g.w * g.h, g.batch) if self.planar else (g.w * g.h * g.batch, 1)

    def fits(self, g: Geom) -> bool:
        """Whether the flat kernel can run on ``g``: every segment of every array starts
        on a vector boundary (the channel planes of planar writes always, packed arrays
        when there are several segments; a single segment starts at the array's base),
        and the thread indices stay within int32."""
        npl, planes = self.segments(g)
        if npl * planes + FLAT_BLOCK[0] + self.pixels >= 2**31:
            return False  # the tail index would pass int32's range
        check = self.streams if planes > 1 else self.planar_streams
        return all((npl * e) % vector_width(d, self.pixels * e) == 0 for e, d in check)

    def grid(self, g: Geom) -> tuple[int, int, int]:
        """Blocks of the flat kernel for ``g``: one thread per group, one per tail pixel."""
        npl, planes = self.segments(g)
        threads = npl // self.pixels + npl % self.pixels
        return (-(-threads // FLAT_BLOCK[0]), planes, 1)


def flat_spec(chain: Chain, t: PixType) -> FlatSpec | None:
    """The flat form of ``chain`` for input pixels ``t``, or None when it needs the 2-D
    kernel (a geometry op, or a read/write without a flat form such as TensorPack)."""
    if chain.last_readback >= 0:
        return None
    read = chain.read.flat_streams(t)
    if read is None:
        return None
    streams = list(read)
    planar_streams: list[Stream] = []
    ty = t
    for op in chain.middle:
        if op.kind == "midwrite":
            assert isinstance(op, WriteOp)
            got = op.flat_streams(ty)
            if got is None:
                return None
            streams += got
            if op.flat_planar:
                planar_streams += got
        ty = op.out_type(ty)
    got = chain.write.flat_streams(ty)
    if got is None:
        return None
    streams += got
    if chain.write.flat_planar:
        planar_streams += got
    # The smallest P that makes every array's share of a group whole vectors: all widths
    # are powers of two, so the lcm is the max.
    p = 1
    for e, d in streams:
        n = _widest(d)
        p = max(p, n // gcd(e, n))
    # Tiny pixels (one uint8...) also get a few accesses' worth of work per thread, so a
    # thread keeps enough bytes in flight.
    widest_px = max(e * d.itemsize for e, d in streams)
    while p * widest_px < 16 and p < _MAX_PIXELS:
        p *= 2
    align = max(vector_width(d, p * e) * d.itemsize for e, d in streams)
    return FlatSpec(p, align, bool(planar_streams), tuple(streams), tuple(planar_streams))


def lower_flat(chain: Chain, t: PixType, name: str, spec: FlatSpec) -> Lowered:
    """Trace ``chain`` into the flat kernel described by ``spec``. Parameters are those
    of :func:`~fkl._lowering.lower` plus one int32 scalar after the ops' scalars: the
    pixels per segment."""
    b = Params()
    trace = Trace(name, b.params)
    prev = set_current(trace)
    try:
        ins = b.inputs(chain.read.input_dtypes(t))
        read_p = b.scalars(chain.read.scalar_types(t))
        op_params = b.op_scalars(chain, t)
        (npl,) = b.scalars([dt.int32])
        outs: list[list[Any]] = []
        ty = t
        for op in chain.middle:
            if op.kind == "midwrite":
                assert isinstance(op, WriteOp)
                outs.append(b.outputs(write_dtypes(op, ty)))
            ty = op.out_type(ty)
        outs.append(b.outputs(write_dtypes(chain.write, ty)))

        bx, tx = (Value(Special(dt.uint32, f"{v}.x")) for v in ("blockIdx", "threadIdx"))
        i = cast(bx * FLAT_BLOCK[0] + tx, dt.int32)
        z = nb = None
        if spec.planar:
            z = cast(Value(Special(dt.uint32, "blockIdx.y")), dt.int32)
            nb = cast(Value(Special(dt.uint32, "gridDim.y")), dt.int32)

        def group(q: Value, count: int, vector: bool) -> None:
            run = Run(q, count, vector, npl, z, nb)
            pixels = chain.read.flat_read(ins, read_p, t, run)
            k, ty = 0, t
            for op, p in zip(chain.middle, op_params, strict=True):
                if op.kind == "midwrite":
                    assert isinstance(op, WriteOp)
                    op.flat_store(outs[k], pixels, ty, run)
                    k += 1
                else:
                    pixels = op.apply_many(pixels, p, ty)
                ty = op.out_type(ty)
            chain.write.flat_store(outs[k], pixels, ty, run)

        P = spec.pixels
        if P == 1:  # every pixel is a whole number of vectors: no tail
            with if_(i >= npl):
                return_()
            group(i, 1, True)
        else:
            shift = P.bit_length() - 1  # P is a power of two: shifts, no divisions
            groups = npl >> shift
            with if_(i < groups):
                group(i << shift, P, True)
                return_()
            # Threads past the groups take the npl % P last pixels, one each.
            q = i + groups * (P - 1)
            with if_(q >= npl):
                return_()
            group(q, 1, False)
    finally:
        set_current(prev)
    return b.finish(name, trace, FLAT_BLOCK)
