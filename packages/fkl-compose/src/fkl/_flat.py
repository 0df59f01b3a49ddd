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

Channel folding. When every op between the read and the writes is channel-uniform (one
element-wise function for every channel, no per-channel values: ``Op.channel_uniform()``)
and the read and writes are packed element for element (TensorRead, DualRead, a ReadSet of
one value, TensorWrite, MidWrite), an image of N pixels x C channels is exactly a 1-channel
image of N * C pixels. The chain is then traced for 1-channel pixels over ``N * C``
elements: for float32 P = 4, one float4 per thread, thread i moving float4 number i, so a
warp's accesses are one contiguous 512-byte run instead of three 16-byte accesses at a
48-byte stride. The decision is type-level (op keys, pixel type), so it is part of the
kernel identity; values stay runtime parameters (one per op instead of one per channel).

Results are bit-identical to the 2-D kernel: each element goes through the same traced
ops, only the addressing differs.

Groups per thread (``FlatSpec.vectors``, V): with V > 1 block b's threads take the V*256
groups from ``b * V * 256``, thread t groups ``t, t + 256, ...`` of them (block-strided, so
each warp instruction still covers one contiguous run), and load all of them before any
op or store so the V loads are in flight together. The default is V = 1 for every kernel
(:data:`FOLD_VECTORS`); V = 2 is there to be measured (``pipe.vectors = 2``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import gcd

from thork.tracing import Pointer, Trace, Value, cast, if_, return_, set_current
from thork.tracing import math as tkm
from thork_core import ArgumentError, DType, dt
from thork_core.ir import Special

from ._lowering import Chain, Lowered, Params, type_chain, write_dtypes
from ._pixel import Geom, Pixel, PixType
from ._tensor import Run, Stream, WriteOp, vector_width

__all__ = ["FlatSpec", "flat_spec", "fold_channels", "lower_flat", "FLAT_BLOCK",
           "FOLD_VECTORS"]

#: Threads per block of the flat kernel (1-D).
FLAT_BLOCK = (256, 1, 1)

#: Pixel groups (P elements each: one float4 for float32) each thread of a folded kernel
#: handles. 1: one float4 per thread for float32, the layout of a plain vectorized copy.
#: On the H200, 2 was within noise of 1 (19.4 against 19.8 us, 1080p 6-op chain; see
#: docs/fkl-fusion.md); type-level, so it is part of the kernel identity.
FOLD_VECTORS = 1

#: Most pixels one thread handles: bounds the code (the chain is traced P + 1 times).
_MAX_PIXELS = 16


def _group_lanes(dtype: DType) -> int:
    """The vector (in elements) a group's share of a ``dtype`` stream must fill: the
    widest access, except 4 lanes (one 32-bit word) for 1-byte types. So packed uint8 x3
    pixels group by 4 (three 32-bit loads: 12 bytes, and one float4 per plane of a
    planar float output) rather than by 8, which doubled every other stream's share."""
    return 4 if dtype.itemsize == 1 else _widest(dtype)


def _widest(dtype: DType) -> int:
    """The widest vector access (in elements) the tracer offers for ``dtype``."""
    for n in (8, 4, 2):
        if n * dtype.itemsize <= 16:
            return n
    return 1


@dataclass(frozen=True)
class FlatSpec:
    """How a chain runs as a flat kernel (a type-level decision).

    ``pixels``: P, pixels per group (of the traced pixel type); ``align``: the byte
    alignment every array's base address needs for the vector accesses; ``planar``: one
    segment per batch plane (planar writes); ``streams``: every contiguous run a group
    reads or writes, of which ``planar_streams`` are the channel planes of planar writes.
    ``fold``: C when the chain is channel-folded (traced as a 1-channel chain over the
    image's N * C elements, see the module's documentation), 0 when not; ``vectors``:
    groups per thread.
    """

    pixels: int
    align: int
    planar: bool
    streams: tuple[Stream, ...]
    planar_streams: tuple[Stream, ...] = ()
    fold: int = 0
    vectors: int = 1

    @property
    def folded(self) -> bool:
        """Whether the kernel runs the chain on 1-channel pixels over N * C elements."""
        return self.fold > 0

    @property
    def coalesced(self) -> bool:
        """Whether every stream's share of a group fits one 16-byte window, so that
        consecutive threads touch consecutive windows (a warp's accesses are one
        contiguous run). False when a group spans several vectors of one stream, e.g.
        unfolded float32 x3 (three float4 at a 48-byte stride per thread): the H200 ran
        that slower than the 2-D kernel (docs/fkl-fusion.md)."""
        return all(self.pixels * e * d.itemsize <= 16 for e, d in self.streams)

    def traced(self, t: PixType) -> PixType:
        """The pixel type the kernel is traced for, for input pixels ``t``."""
        return t.with_(channels=1) if self.fold else t

    def host_geom(self, g: Geom) -> Geom:
        """The geometry the traced chain sees for an image of geometry ``g`` (each row
        C times wider when folded): what its runtime values are computed for."""
        return Geom(g.w * self.fold, g.h, g.batch, g.unbounded) if self.fold > 1 else g

    def segments(self, g: Geom) -> tuple[int, int]:
        """(traced pixels per segment, segments) for an image of geometry ``g``."""
        g = self.host_geom(g)
        return (g.w * g.h, g.batch) if self.planar else (g.w * g.h * g.batch, 1)

    def fits(self, g: Geom) -> bool:
        """Whether the flat kernel can run on ``g``: every segment of every array starts
        on a vector boundary (the channel planes of planar writes always, packed arrays
        when there are several segments; a single segment starts at the array's base),
        and the thread indices stay within int32."""
        npl, planes = self.segments(g)
        if npl * planes + FLAT_BLOCK[0] * self.vectors * self.pixels >= 2**31:
            return False  # a group or tail index would pass int32's range
        check = self.streams if planes > 1 else self.planar_streams
        return all((npl * e) % vector_width(d, self.pixels * e) == 0 for e, d in check)

    def grid(self, g: Geom) -> tuple[int, int, int]:
        """Blocks of the flat kernel for ``g``: threads for the groups (whole blocks of
        them when a thread takes several), then one per tail pixel."""
        npl, planes = self.segments(g)
        groups, tail = divmod(npl, self.pixels)
        if self.vectors == 1:
            threads = groups + tail
        else:
            span = FLAT_BLOCK[0] * self.vectors
            threads = -(-groups // span) * FLAT_BLOCK[0] + tail
        return (-(-threads // FLAT_BLOCK[0]), planes, 1)


def fold_channels(chain: Chain, t: PixType) -> int:
    """C (the channels of ``t``) when ``chain`` on ``t`` pixels can run channel-folded,
    as a 1-channel chain over N * C elements; 0 when it cannot.

    It can when there is no geometry op and the read, every middle op and the write are
    channel-uniform (:meth:`fkl.Op.channel_uniform`: a type-level property of each op).
    As a check on those declarations, the chain must also type at 1 channel, step by
    step the same dtypes with the channel count kept.
    """
    if chain.last_readback >= 0:
        return 0
    if not all(op.channel_uniform() for op in (chain.read, *chain.middle, chain.write)):
        return 0
    wide = type_chain(chain, t)
    try:
        narrow = type_chain(chain, t.with_(channels=1))
    except ArgumentError:
        return 0
    if any(w.channels != t.channels or n != w.with_(channels=1)
           for w, n in zip(wide, narrow, strict=True)):
        return 0
    return t.channels


def flat_spec(chain: Chain, t: PixType, fold: bool = True,
              vectors: int | None = None) -> FlatSpec | None:
    """The flat form of ``chain`` for input pixels ``t``, or None when it needs the 2-D
    kernel (a geometry op, or a read/write without a flat form such as TensorPack).

    With ``fold`` a chain that allows it is channel-folded (:func:`fold_channels`).
    ``vectors``: groups per thread, a power of two up to 8 (None: :data:`FOLD_VECTORS`
    for a folded kernel, 1 otherwise).
    """
    if vectors is not None and (not isinstance(vectors, int) or isinstance(vectors, bool)
                                or vectors not in (1, 2, 4, 8)):
        raise ArgumentError(f"fkl pipe vectors: expected 1, 2, 4 or 8 groups per thread, "
                            f"got {vectors!r}")
    c = fold_channels(chain, t) if fold else 0
    spec = _spec(chain, t.with_(channels=1) if c else t)
    if spec is None:
        return None
    if vectors is None:
        vectors = FOLD_VECTORS if c else 1
    return replace(spec, fold=c, vectors=vectors)


def _spec(chain: Chain, t: PixType) -> FlatSpec | None:
    """:func:`flat_spec` for the traced pixel type ``t`` (fold and vectors left out)."""
    if chain.last_readback >= 0 or any(op.items() for op in chain.middle):
        return None  # geometry, or values picked by the plane: the 2-D kernel
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
        n = _group_lanes(d)
        p = max(p, n // gcd(e, n))
    # Tiny pixels (one uint8...) also get a few accesses' worth of work per thread, so a
    # thread keeps enough bytes in flight.
    widest_px = max(e * d.itemsize for e, d in streams)
    while p * widest_px < 16 and p < _MAX_PIXELS:
        p *= 2
    align = max(vector_width(d, p * e) * d.itemsize for e, d in streams)
    return FlatSpec(p, align, bool(planar_streams), tuple(streams), tuple(planar_streams))


def lower_flat(chain: Chain, t: PixType, name: str, spec: FlatSpec) -> Lowered:
    """Trace ``chain`` into the flat kernel described by ``spec`` (for input pixels
    ``t``; a folded spec traces 1-channel pixels). Parameters are those of
    :func:`~fkl._lowering.lower` for the traced pixel type plus one int32 scalar after
    the ops' scalars: the traced pixels per segment."""
    t = spec.traced(t)
    b = Params()
    trace = Trace(name, b.params)
    prev = set_current(trace)
    try:
        ins = b.inputs(chain.read.input_dtypes(t))
        read_p = b.scalars(chain.read.scalar_types(t))
        op_params = b.op_scalars(chain, t)
        (npl,) = b.scalars([dt.int32])
        outs: list[list[Pointer]] = []
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

        def run(q: Value, count: int, vector: bool) -> Run:
            return Run(q, count, vector, npl, z, nb)

        def store(op: WriteOp, ptrs: list[Pointer], pixels: list[Pixel], ty: PixType,
                  runs: list[Run], guards: list[Value] | None) -> None:
            at = 0
            for k, r in enumerate(runs):
                part, at = pixels[at:at + r.count], at + r.count
                if guards is None:
                    op.flat_store(ptrs, part, ty, r)
                else:
                    with if_(guards[k]):
                        op.flat_store(ptrs, part, ty, r)

        def body(runs: list[Run], guards: list[Value] | None = None) -> None:
            """The chain on the pixels of ``runs``: every load first (so several groups'
            loads are in flight together), the ops on all pixels, then each run's stores
            (under ``guards[k]`` when given)."""
            pixels = [px for r in runs for px in chain.read.flat_read(ins, read_p, t, r)]
            k, ty = 0, t
            for op, p in zip(chain.middle, op_params, strict=True):
                if op.kind == "midwrite":
                    assert isinstance(op, WriteOp)
                    store(op, outs[k], pixels, ty, runs, guards)
                    k += 1
                else:
                    pixels = op.apply_many(pixels, p, ty)
                ty = op.out_type(ty)
            store(chain.write, outs[k], pixels, ty, runs, guards)

        P, V = spec.pixels, spec.vectors
        shift = P.bit_length() - 1  # P is a power of two: shifts, no divisions

        def first_pixel(g: Value) -> Value:
            return g << shift if shift else g

        groups = npl >> shift if shift else npl
        if V > 1:
            # Block-strided: block b takes the groups from b * V * 256, thread t the groups
            # t, t + 256, ... of them. Loads of groups past the end are clamped to the last
            # group (in bounds, results unused); their stores are skipped.
            span = FLAT_BLOCK[0] * V
            lspan = span.bit_length() - 1
            lblock = FLAT_BLOCK[0].bit_length() - 1
            threads = ((groups + (span - 1)) >> lspan) << lblock
            with if_(i < threads):
                base = cast(bx, dt.int32) * span + cast(tx, dt.int32)
                qs = [base + k * FLAT_BLOCK[0] if k else base for k in range(V)]
                last = groups - 1
                body([run(first_pixel(tkm.min(q, last)), P, True) for q in qs],
                     [q < groups for q in qs])
                return_()
            # Threads past the group blocks take the npl % P last pixels, one each.
            q = i - threads + first_pixel(groups)
            with if_(q >= npl):
                return_()
            body([run(q, 1, False)])
        elif P == 1:  # every pixel is a whole number of vectors: no tail
            with if_(i >= npl):
                return_()
            body([run(i, 1, True)])
        else:
            with if_(i < groups):
                body([run(i << shift, P, True)])
                return_()
            # Threads past the groups take the npl % P last pixels, one each.
            q = i + groups * (P - 1)
            with if_(q >= npl):
                return_()
            body([run(q, 1, False)])
    finally:
        set_current(prev)
    lowered = b.finish(name, trace, FLAT_BLOCK)
    lowered.variant, lowered.fold, lowered.vectors = "flat", spec.fold, spec.vectors
    return lowered
