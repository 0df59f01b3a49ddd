"""Lowering: a typed chain of ops → one thork-core kernel, traced with thork's tracer.

The chain ``read, op1, ..., opN, write`` becomes

    x, y = global thread coordinates; z = blockIdx.z (the plane)
    if x >= W or y >= H: return
    pixel = stage(x, y, z)        # read + everything up to the last ReadBack, fused
    pixel = later compute ops      # MidWrites store here
    write(pixel)

where ``stage`` is built by folding the ops up to (and including) the *last* ReadBack into
the read (FKL's BackFuser rule): compute ops there run on every source sample. Every op's
values are kernel scalar parameters, so the generated code depends only on types.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from thork.tracing import Pointer, Trace, Value, cast, else_, if_, return_, set_current
from thork.tracing import math as tkm
from thork_core import ArgumentError, DType, KernelIR, Param, PointerType, dt
from thork_core.ir import Special, Var

from ._batch import check_items
from ._ops import Op
from ._pixel import Geom, PixType, Stage
from ._tensor import Layout, ReadOp, WriteOp

__all__ = ["Chain", "Lowered", "Params", "lower", "type_chain", "write_dtypes", "BLOCK",
           "write_block",
           "host_plan", "host_tables", "final_type"]

#: Threads per block: 32 wide for coalesced rows, 8 rows deep.
BLOCK = (32, 8, 1)

#: A benchmark knob: a one-tap kernel with several pixels per thread loads them all
#: before the first store (:func:`lower`); False keeps each pixel's loads next to its
#: store. Read when a kernel is traced (clear the kernel cache after changing it).
LOADS_FIRST = True


@dataclass(frozen=True)
class Chain:
    """The ops of a pipe split by role: one read, the middle ops, one final write."""

    read: ReadOp
    middle: tuple[Op, ...]
    write: WriteOp

    @property
    def last_readback(self) -> int:
        """Index in ``middle`` of the last ReadBack, or -1."""
        idx = -1
        for i, op in enumerate(self.middle):
            if op.kind == "readback":
                idx = i
        return idx

    def key(self) -> tuple[Any, ...]:
        return (self.read.cache_key(), tuple(op.cache_key() for op in self.middle),
                self.write.cache_key())


@dataclass
class Lowered:
    """A traced chain. ``slots`` says what fills each kernel parameter: ``("in", i)``,
    ``("out", j)`` or ``("scalar", k)`` (index into the flat runtime values); ``block``
    is the thread-block shape the kernel's indexing assumes.

    ``variant`` is ``"grid"`` or ``"flat"``; a flat kernel traced as a 1-channel chain
    over the image's N * C elements (channel folding, :mod:`fkl._flat`) has ``fold`` = C,
    else ``fold`` is 0; ``vectors`` is the pixel groups each flat thread handles."""

    ir: KernelIR
    slots: list[tuple[str, int]]
    scalar_types: list[DType]
    block: tuple[int, int, int] = BLOCK
    variant: str = "grid"
    fold: int = 0
    vectors: int = 1
    #: Output rows each thread of a grid kernel stores (a tiled separable filter's
    #: threads compute several vertically adjacent pixels): the grid's y extent divides
    #: by ``block[1] * rows``.
    rows: int = 1
    #: Output pixels each thread of an untiled grid kernel stores along its row,
    #: ``block[0]`` columns apart (:func:`lower` ``columns``): the grid's x extent
    #: divides by ``block[0] * cols``.
    cols: int = 1
    #: Bytes every array address must be a multiple of (0: any): a grid kernel with
    #: whole-word accesses (a tiled filter's, :func:`lower` ``words``) needs 4; a call
    #: with other addresses runs the ``"scalar"`` variant instead (the plan's fallback).
    align: int = 0

    @property
    def folded(self) -> bool:
        """Whether this is a channel-folded flat kernel."""
        return self.fold > 0


def type_chain(chain: Chain, t: PixType) -> list[PixType]:
    """The pixel type entering each middle op and the write (validates every op)."""
    types = []
    for op in chain.middle:
        types.append(t)
        t = op.out_type(t)
    types.append(chain.write.out_type(t))
    return types


def host_plan(chain: Chain, t: PixType, g: Geom, lay: Layout) -> tuple[
        list[Any], Geom, list[tuple[tuple[int, ...], DType]]]:
    """Per-call host work: every runtime value in parameter order, the output geometry
    (the grid) and the shape/dtype of every output array (MidWrites first)."""
    values = list(chain.read.values(t, g))
    outs: list[tuple[tuple[int, ...], DType]] = []
    for op in chain.middle:
        values += op.values(t, g)
        if op.kind == "readback":
            if g.ragged and not getattr(op, "takes_ragged", False):
                raise ArgumentError(
                    f"{op.name}: the planes below it have different sizes (a batch of "
                    "crops of different sizes); only fkl.Resize or fkl.Warping may follow "
                    "them")
            g = op.out_geom(g, t)
            if op.batches():  # type: ignore[attr-defined]
                lay = Layout(True, lay.channel_axis)
        elif op.kind == "midwrite":
            assert isinstance(op, WriteOp)
            outs += op.out_specs(t, g, lay)
        t = op.out_type(t)
    for op in chain.middle:
        if op.items():
            check_items(op.items(), g.batch, f"{op.name} PerItem")
    if g.ragged:
        raise ArgumentError(
            "fkl.Crop rects: crops of different sizes "
            f"({', '.join(f'{r[2]}x{r[3]}' for r in _crop_rects(chain))}) give planes of "
            "different sizes, which one output array cannot hold; add a fkl.Resize after "
            "the crop (or crop equal sizes)")
    outs += chain.write.out_specs(t, g, lay)
    return values, g, outs


def whole_steps(chain: Chain, t: PixType, g: Geom) -> bool:
    """Whether the chain's last geometry op samples every destination pixel exactly on
    a source pixel with FKL's ``linear`` weights (1, 0), for input pixels ``t`` and
    geometry ``g``: :meth:`fkl.Resize.whole_steps` of the op, given what reaches it.
    The 2-D kernel then reads one tap per pixel instead of four (:func:`lower`
    ``one_tap``; the same values)."""
    last = chain.last_readback
    if last < 0:
        return False
    for op in chain.middle[:last]:
        if op.kind == "readback":
            g = op.out_geom(g, t)
        t = op.out_type(t)
    steps = getattr(chain.middle[last], "whole_steps", None)
    return bool(steps is not None and steps(g, t))


def _crop_rects(chain: Chain) -> list[tuple[int, int, int, int]]:
    for op in chain.middle:
        rects = getattr(op, "rects", None)
        if rects is not None and len(rects) > 1:
            return list(rects)
    return []


def host_tables(chain: Chain, t: PixType, g: Geom) -> list[tuple[DType, list[Any]]]:
    """Every value table of the chain's ops, in declaration order: (dtype, values)."""
    tables: list[tuple[DType, list[Any]]] = []
    for op in chain.middle:
        tables += op.tables(t, g)
        if op.kind == "readback":
            g = op.out_geom(g, t)
        t = op.out_type(t)
    return tables


def kernel_name(key: Any) -> str:
    return "fkl_" + hashlib.sha256(repr(key).encode()).hexdigest()[:12]


class Params:
    """The kernel's parameter list under construction, and what fills each slot.

    Both lowerings (2-D and flat) declare parameters in the same order — inputs, the
    read's scalars, each op's scalars, extra scalars, then the outputs in chain order —
    so the host side fills them the same way.
    """

    def __init__(self) -> None:
        self.params: list[Param] = []
        self.slots: list[tuple[str, int]] = []
        self.scalar_types: list[DType] = []
        self._count = {"in": 0, "out": 0}

    def inputs(self, dtypes: list[DType]) -> list[Pointer]:
        return self._pointers("in", dtypes)

    def scalars(self, types: list[DType]) -> list[Value]:
        out = []
        for ty in types:
            pname = f"s{len(self.scalar_types)}"
            self.params.append(Param(pname, ty))
            self.slots.append(("scalar", len(self.scalar_types)))
            self.scalar_types.append(ty)
            out.append(Value(Var(ty, pname)))
        return out

    def outputs(self, dtypes: list[DType]) -> list[Pointer]:
        return self._pointers("out", dtypes)

    def _pointers(self, role: str, dtypes: list[DType]) -> list[Pointer]:
        """Pointer parameters ``in0, in1...`` or ``out0, out1...``, numbered per role."""
        ptrs = []
        for ty in dtypes:
            k = self._count[role]
            param = Param(f"{role}{k}", PointerType(ty))
            self.params.append(param)
            self.slots.append((role, k))
            self._count[role] = k + 1
            ptrs.append(Pointer(param))
        return ptrs

    def op_scalars(self, chain: Chain, t: PixType) -> list[list[Any]]:
        """Each middle op's parameters, declared in chain order: its scalars, then a
        pointer to each of its value tables (:meth:`fkl.Op.table_types`; they are extra
        input arrays, numbered after the read's)."""
        out = []
        for op in chain.middle:
            out.append([*self.scalars(op.scalar_types(t)), *self.inputs(op.table_types(t))])
            t = op.out_type(t)
        return out

    def finish(self, name: str, trace: Trace, block: tuple[int, int, int]) -> Lowered:
        """The traced kernel (raises the tracer's deferred error, if any)."""
        if getattr(trace, "deferred", None):
            raise ArgumentError(f"fkl: tracing the chain failed: {trace.deferred[0]}")
        ir = KernelIR(name, self.params, trace.body, mutable=set(getattr(trace, "mutable",
                                                                        set())),
                      functions=list(getattr(trace, "functions", [])))
        return Lowered(ir, self.slots, self.scalar_types, block)


def write_dtypes(op: WriteOp, t: PixType) -> list[DType]:
    """The element dtype of each array ``op`` writes for pixels ``t``."""
    return [s[1] for s in op.out_specs(t, Geom(*write_block(op)), Layout(False, False))]


def final_type(chain: Chain, t: PixType) -> PixType:
    """The pixel type the final write stores."""
    for op in chain.middle:
        t = op.out_type(t)
    return t


def _tiles(op: Any, cuda: bool) -> bool:
    """Whether filter ``op`` stages its window in shared memory: its ``tiled``, or where
    that is None (the default), on CUDA targets only (on the CPU target the tile's barriers
    cost more than the reads they save: box 3x3 on 1080p 37 ms untiled, 1.4 s tiled)."""
    tiled = getattr(op, "tiled", False)
    return cuda if tiled is None else bool(tiled)


def lower(chain: Chain, t: PixType, name: str, active: bool = False,
          pitched: bool = False, pitched_out: bool = False, cuda: bool = False,
          words: bool = True, columns: int = 1, rows: int = 1,
          one_tap: bool = False) -> Lowered:
    """Trace ``chain`` for input pixels of type ``t`` into one 2-D kernel (any chain).

    ``pitched``: the read takes its input's strides
    (:attr:`fkl._tensor.ReadOp.pitch_variant`, ``stride_count`` int32 scalars after its
    own); ``pitched_out``: the final write takes its output's (``stride_count`` more
    int32 scalars after the ops', :meth:`WriteOp.store_strided`).

    ``active``: the kernel takes two more scalar groups after the ops' — the active batch
    ``k`` (int32) and a default pixel (the written type, one value per channel) — and
    planes ``z >= k`` store the default and read nothing (FKL's conditional planes).

    ``cuda``: the kernel is for a CUDA target (a filter's ``tiled=None`` tiles there).

    ``words``: a tiled filter may load its tile and store its output rows in whole
    32-bit words where they apply (docs/fkl-filters.md, "Whole-word loads and stores";
    never with ``active`` or strides); the kernel then needs word-aligned arrays
    (``Lowered.align``).

    ``columns``: each thread of an untiled kernel computes that many pixels of its row,
    ``block[0]`` columns apart (``Lowered.cols``; the grid's x extent divides by it): a
    warp's stores of each of them stay one coalesced row, and what a thread computes
    once (a crop's rect, a plane's scale) serves every one of them; ``rows``: and that
    many vertically adjacent rows (``Lowered.rows``).

    ``one_tap``: the last geometry op is a Resize whose host check
    (:func:`whole_steps`) found whole factors: it samples with one tap per pixel
    (``Resize.sample`` ``one_tap``)."""
    b = Params()
    trace = Trace(name, b.params)
    prev = set_current(trace)
    try:
        # Parameters in a fixed order: inputs, read scalars, then each op's scalars.
        in_ptrs = b.inputs(chain.read.input_dtypes(t))
        # ``pitched``: the read's input has strides (int32 scalars: row, plane, pixel...).
        pitch = [dt.int32] * chain.read.stride_count if pitched else []
        stage: Stage = chain.read.stage(
            in_ptrs, b.scalars([*chain.read.scalar_types(t), *pitch]), t)
        op_params = b.op_scalars(chain, t)
        out_strides = b.scalars([dt.int32] * chain.write.stride_count) if pitched_out \
            else None
        if active:
            if any(op.kind == "midwrite" for op in chain.middle):
                raise ArgumentError("fkl pipe active_batch: a chain with a MidWrite has no "
                                    "default for its middle output; run it without "
                                    "active_batch")
            ft = final_type(chain, t)
            act = b.scalars([dt.int32])[0]
            default = b.scalars([ft.dtype] * ft.channels)

        last = chain.last_readback
        bw, bh = write_block(chain.write)
        # A tiled filter as the last ReadBack reads its tile below, at the block level
        # (its output is read once per thread at the thread's pixel: what a tile needs).
        tiled = last >= 0 and (bw, bh) == (1, 1) and _tiles(chain.middle[last], cuda)
        words = words and tiled and not (active or pitched or pitched_out)
        align = 0
        ty = t
        below = stage
        for i, op in enumerate(chain.middle[: last + 1]):
            p = op_params[i]
            if op.kind == "readback" and tiled and i == last:
                below = stage  # the filter's source; its own geometry keeps the size
            elif op.kind == "readback" and one_tap and i == last:
                stage = op.sample(stage, p, one_tap=True)  # type: ignore[call-arg]
            elif op.kind == "readback":
                stage = op.sample(stage, p)
            elif op.kind == "compute":
                stage = _fused(stage, op, p, ty)
            else:
                raise ArgumentError(
                    f"{op.name} sits before the chain's last geometry op, whose reads are "
                    "fused backwards; move it after the last Crop/Resize/Warping/...")
            ty = op.out_type(ty)

        bx, by, bz = (Value(Special(dt.uint32, f"blockIdx.{a}")) for a in "xyz")
        tx, ty_ = (Value(Special(dt.uint32, f"threadIdx.{a}")) for a in "xy")
        dx, dy = (Value(Special(dt.uint32, f"blockDim.{a}")) for a in "xy")
        x = cast(bx * dx + tx, dt.int32)
        y = cast(by * dy + ty_, dt.int32)
        z = cast(bz, dt.int32)
        nb = cast(Value(Special(dt.uint32, "gridDim.z")), dt.int32)
        if (bw, bh) != (1, 1):  # a write that stores a block per thread (YUV chroma)
            _block_write(b, chain, stage, op_params, x, y, z, nb, ty, (bw, bh), active,
                         out_strides)
            return b.finish(name, trace, BLOCK)
        want_rows = rows if not tiled and not active else 1
        rows, block = 1, BLOCK
        if want_rows > 1:  # the thread's first row of the block's block[1] * rows
            rows = want_rows
            y = cast(by * (block[1] * rows) + ty_ * rows, dt.int32)
        if tiled:
            op = chain.middle[last]
            tb = getattr(op, "tile_block", None)
            if tb is not None:  # a benchmark knob: another block shape
                block = (int(tb[0]), int(tb[1]), 1)
            rows = op.rows_per_thread(below.type, block[:2])  # type: ignore[attr-defined]
            if rows > 1:  # the thread's first row of the block's block[1] * rows
                y = cast(by * (block[1] * rows) + ty_ * rows, dt.int32)
        ys = [y + r if r else y for r in range(rows)]
        cols = columns if columns > 1 and not tiled and not active else 1
        if cols > 1:  # the thread's first column of the block's block[0] * cols
            x = cast(bx * (block[0] * cols) + tx, dt.int32)
        xs = [x + block[0] * k if k else x for k in range(cols)]
        outside = (x >= stage.w) | (y >= stage.h)
        if not tiled:
            with if_(outside):
                return_()
        if active:
            out_ptrs = b.outputs(write_dtypes(chain.write, ft))
            with if_(z >= act):  # an inactive plane: the default, no reads
                # (z is the block's plane: a tiled kernel's whole block returns here)
                for yr in ys:
                    if tiled:
                        with if_((x < stage.w) & (yr < stage.h)):
                            chain.write.store(out_ptrs, list(default), x, yr, z, stage.w,
                                              stage.h, nb, ft)
                    else:
                        chain.write.store(out_ptrs, list(default), x, yr, z, stage.w,
                                          stage.h, nb, ft)
                return_()
        if tiled:
            # Every thread of the block loads its part of the tile and meets the barrier;
            # only then do the threads outside the plane leave.
            outputs = chain.middle[last].tile(  # type: ignore[attr-defined]
                below, op_params[last], block[:2], bx, by, tx, ty_, z, words)
            if words and chain.middle[last].word_loads(  # type: ignore[attr-defined]
                    below, block[:2]):
                align = 4
            with if_(outside):
                return_()
            pixels = outputs()
            # Rows past the first may fall off the plane (the first was checked).
            places: list[tuple[Value, Value, Callable[[], Any], Any]] = [
                (x, yr, partial(_same, px), yr < stage.h if r else None)
                for r, (px, yr) in enumerate(zip(pixels, ys))]
        else:
            # Pixels past the first may fall off the plane; each reads only inside.
            places = []
            # One-tap reads are cheap: every pixel's loads are issued first, at
            # coordinates clamped into the plane (a place outside reads a pixel of it
            # and stores nothing), so the thread has all of them in flight at once; the
            # stores between would keep them apart (the compiler may not move a load
            # above a store to another array it cannot prove distinct).
            early = one_tap and len(xs) * len(ys) > 1 and LOADS_FIRST
            for r, yr in enumerate(ys):
                for k, xk in enumerate(xs):
                    inside = None if not (r or k) else xk < stage.w if not r else \
                        yr < stage.h if not k else (xk < stage.w) & (yr < stage.h)
                    if early:
                        px = stage.read(tkm.min(xk, stage.w - 1) if k else xk,
                                        tkm.min(yr, stage.h - 1) if r else yr, z)
                        places.append((xk, yr, partial(_same, px), inside))
                    else:
                        places.append((xk, yr, partial(stage.read, xk, yr, z), inside))
        ty0 = ty
        outs: dict[int, list[Pointer]] = {}

        def store_rows() -> None:
            for xc, yr, get, inside in places:
                with if_(inside) if inside is not None else _nothing():
                    px = get()
                    ty = ty0
                    for i, op in enumerate(chain.middle[last + 1:], start=last + 1):
                        p = op_params[i]
                        if op.kind == "midwrite":
                            assert isinstance(op, WriteOp)
                            if i not in outs:
                                outs[i] = b.outputs(write_dtypes(op, ty))
                            op.store(outs[i], px, xc, yr, z, stage.w, stage.h, nb, ty)
                        else:
                            px = op.apply(px, p, ty)
                        ty = op.out_type(ty)
                    w = chain.write
                    if -1 not in outs:
                        outs[-1] = out_ptrs if active else b.outputs(write_dtypes(w, ty))
                    if out_strides is not None:
                        w.store_strided(outs[-1], px, xc, yr, z, out_strides, ty)
                    else:
                        w.store(outs[-1], px, xc, yr, z, stage.w, stage.h, nb, ty)

        if words and _word_rows(chain, ty0, block, active, out_strides is not None):
            align = 4
            # Whole-word stores of the block's output rows where its 32 columns lie in
            # the plane and rows start word-aligned (block-uniform); else pixel stores.
            c = ty0.channels
            outs[-1] = b.outputs(write_dtypes(chain.write, ty0))
            x0 = cast(bx, dt.int32) * block[0]
            full = (x0 + block[0] <= stage.w) & (((stage.w * c) & 3) == 0)
            with if_(full):
                for r, (px, yr) in enumerate(zip(pixels, ys)):
                    with if_(yr < stage.h) if r else _nothing():
                        _store_row_words(outs[-1][0], px, x0, yr, z, stage.w, stage.h,
                                         cast(tx, dt.int32))
            with else_():
                store_rows()
        else:
            store_rows()
    finally:
        set_current(prev)
    lowered = b.finish(name, trace, block)
    lowered.rows = rows
    lowered.cols = cols
    lowered.align = align
    return lowered


def _word_rows(chain: Chain, t: PixType, block: tuple[int, int, int], active: bool,
               strided: bool) -> bool:
    """Whether a tiled filter's kernel may store whole words of its output rows
    (:func:`_store_row_words`): the filter (the last op) asks for it (its ``tile_vec``)
    and feeds a plain contiguous :class:`TensorWrite` of uint8 pixels of 3 or 4
    channels, each warp one row of 32 pixels."""
    from ._tensor import TensorWrite

    last = chain.last_readback
    if last != len(chain.middle) - 1 or active or strided or block[0] != 32 \
            or type(chain.write) is not TensorWrite:
        return False
    vectors = getattr(chain.middle[last], "vectors", None)
    return bool(vectors is not None and vectors("store") and t.dtype == dt.uint8
                and t.channels in (3, 4) and not t.pair)


def _store_row_words(out: Pointer, px: list[Any], x0: Value, y: Value, z: Value, w: Value,
                     h: Value, lane: Value) -> None:
    """One warp stores its row of 32 uint8 pixels (``px``: lane ``lane``'s, at column
    ``x0 + lane``) as aligned 32-bit words: 4 channels, each lane its own pixel; 3
    channels (96 bytes, 24 words), lane ``k < 24`` word ``k``, the bytes ``4k .. 4k + 3``
    of pixels ``a = 4k // 3`` and ``a + 1`` fetched by two shuffles. The row's first
    element index must be a multiple of 4 (the caller checks)."""
    from thork import shfl_idx
    from thork.tracing import math as tkm

    from ._tensor import TensorWrite

    c = len(px)
    base = TensorWrite.index(x0, y, z, w, h, c)
    if c == 4:
        out.vstore(base + lane * 4, px)
        return
    u32, u64 = dt.uint32, dt.uint64
    word = cast(px[0], u32) | (cast(px[1], u32) << 8) | (cast(px[2], u32) << 16)
    a = tkm.min((lane * 4) // 3, 30)  # lanes 24..31 store nothing: any valid lane
    lo, hi = shfl_idx(word, a), shfl_idx(word, a + 1)
    six = cast(lo | (hi << 24), u64) | (cast(hi >> 8, u64) << 32)  # 6 bytes from a
    got = cast(six >> cast((lane * 4 - a * 3) * 8, u32), u32)
    with if_(lane < 24):
        out.vstore(base + lane * 4, [cast(got >> (8 * j), dt.uint8) if j else
                                     cast(got, dt.uint8) for j in range(4)])


def _same(v: Any) -> Any:
    """``v`` (what a place whose pixel is already computed hands back)."""
    return v


@contextmanager
def _nothing() -> Iterator[None]:
    """A context that emits nothing (the first row of a thread needs no check)."""
    yield


def write_block(op: WriteOp) -> tuple[int, int]:
    """Pixels (x, y) one thread of the 2-D kernel writes: (1, 1) but for writes that
    store a block at once (:class:`fkl.WriteYUV` writes one chroma block per thread)."""
    return getattr(op, "block", (1, 1))


def _block_write(b: Params, chain: Chain, stage: Stage, op_params: list[list[Any]],
                 x: Value, y: Value, z: Value, nb: Value, t: PixType,
                 block: tuple[int, int], active: bool,
                 out_strides: list[Value] | None = None) -> None:
    """The kernel body for a block write: thread (x, y) runs the ops after the last
    ReadBack on each pixel of block (x, y) and hands the block to the write (with the
    output's strides for a strided ``out=``)."""
    last = chain.last_readback
    if active or any(op.kind == "midwrite" for op in chain.middle):
        raise ArgumentError(f"{chain.write.name} writes a block of pixels per thread; a "
                            "chain ending in it has no MidWrite and no active_batch")
    bw, bh = block
    with if_((x * bw >= stage.w) | (y * bh >= stage.h)):
        return_()
    rows = []
    ty = t
    for dy in range(bh):
        row = []
        for dx in range(bw):
            px = stage.read(x * bw + dx if dx else x * bw, y * bh + dy if dy else y * bh, z)
            ty = t
            for i, op in enumerate(chain.middle[last + 1:], start=last + 1):
                px = op.apply(px, op_params[i], ty)
                ty = op.out_type(ty)
            row.append(px)
        rows.append(row)
    w = chain.write
    w.store_block(b.outputs(write_dtypes(w, ty)), rows, x, y, z,  # type: ignore[attr-defined]
                  stage.w, stage.h, nb, ty, out_strides)


def _fused(stage: Stage, op: Op, p: list[Value], t: PixType) -> Stage:
    """``op`` applied to every pixel ``stage`` produces (fused into the read)."""

    def read(x: Value, y: Value, z: Value) -> Any:
        return op.apply(stage.read(x, y, z), p, t)

    return Stage(read, stage.w, stage.h, op.out_type(t))
