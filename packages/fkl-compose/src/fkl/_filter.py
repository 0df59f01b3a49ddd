"""Neighbourhood filters: ReadBack ops whose output pixel reads a kw x kh window of the
stage below it (backward vertical fusion, as the geometry ops), with a border mode for
the taps that fall outside that stage's plane. See ``docs/fkl-filters.md``.

Window sizes, border modes and the op kind are types (part of the kernel key);
coefficients, sigmas, scales and border constants are runtime scalar parameters, so a
new set of coefficients of the same size never recompiles.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar

from thork import shared_array, syncthreads
from thork.tracing import Value, cast, cond, else_, if_, where
from thork.tracing import math as tkm
from thork_core import ArgumentError, DType, dt
from thork_core.ir import int_range

from ._geometry import ReadBack
from ._ops import saturate_value
from ._pixel import Geom, Pixel, PixType, Stage, per_channel
from ._resampling import BorderMode, border_index

__all__ = ["LinearFilter", "BoxFilter", "GaussianBlur", "Sobel", "Erode", "Dilate",
           "MedianBlur", "MAX_KSIZE", "gaussian_kernel", "gaussian_kernel_q8"]

#: The largest window side: every tap is unrolled into the kernel, so the code grows with
#: kw * kh (15 x 15 = 225 taps per channel).
MAX_KSIZE = 15


def _ksize(ksize: Any, what: str, allow_zero: bool = False) -> tuple[int, int]:
    """``(kw, kh)`` from an int or a pair; odd sides in 1..MAX_KSIZE (0 when allowed)."""
    pair = (ksize, ksize) if isinstance(ksize, int) and not isinstance(ksize, bool) \
        else ksize
    try:
        kw, kh = (int(v) if _is_int(v) else None for v in pair)
    except (TypeError, ValueError):
        raise ArgumentError(f"{what}: expected an odd int or a (width, height) pair of odd "
                            f"ints, got {ksize!r}") from None
    for side in (kw, kh):
        if side is None:
            raise ArgumentError(f"{what}: expected an odd int or a (width, height) pair of "
                                f"odd ints, got {ksize!r}")
        if allow_zero and side == 0:
            continue
        if side < 1 or side % 2 == 0:
            raise ArgumentError(f"{what}: window sides must be odd and positive (the anchor "
                                f"is the centre), got {ksize!r}")
        if side > MAX_KSIZE:
            raise ArgumentError(f"{what}: window side {side} exceeds the limit of "
                                f"{MAX_KSIZE} (every tap is unrolled), got {ksize!r}")
    assert kw is not None and kh is not None
    return kw, kh


def _is_int(v: Any) -> bool:
    import numpy as np

    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _math_type(t: DType) -> DType:
    """The dtype the window arithmetic runs in: float64 stays, everything else float32."""
    return dt.float64 if t == dt.float64 else dt.float32


def _near_index(i: Value, n: Value, mode: str) -> Value:
    """``border_index(i, n, mode)`` for ``-n <= i < 2n`` (one reflection at most), without
    the integer modulo the general form needs: what every tap of a window no larger than
    the image uses."""
    if mode in (BorderMode.REPLICATE, BorderMode.CONSTANT):
        return tkm.min(tkm.max(i, 0), n - 1)
    if mode == BorderMode.WRAP:
        return where(i < 0, i + n, where(i >= n, i - n, i))
    if mode == BorderMode.REFLECT:
        a = where(i < 0, -1 - i, i)
        return where(a >= n, n * 2 - 1 - a, a)
    # REFLECT_101: (n-1) - |(n-1) - |i||, valid for -(n-1) <= i <= 2(n-1).
    m = n - 1
    return m - tkm.abs(m - tkm.abs(i))


def _tap_indices(coords: list[Value], n: Value, radius: int, mode: str) -> list[Value]:
    """Each window coordinate mapped into ``[0, n)``: when the plane is wider than the
    window's radius (every real image) the taps reflect at most once, so the cheap form
    runs; a tiny plane takes the general, periodic form. One uniform branch per axis."""
    if radius == 0 or mode in (BorderMode.REPLICATE, BorderMode.CONSTANT):
        return [_near_index(v, n, mode) for v in coords]
    out: list[Value] = []
    for v in coords:
        out.append(cond(n > radius, lambda v=v: _near_index(v, n, mode),
                        lambda v=v: border_index(v, n, mode)))
    return out


#: The most shared memory a tile may take (every arch accepts 48 KiB of static shared
#: memory per block).
TILE_BYTES = 48 * 1024


def _staged(v: Value, st: DType) -> Value:
    """Tap ``v`` in the staged dtype ``st`` (no conversion when it already is)."""
    return v if v.dtype == st else cast(v, st)


def _store(v: Value, to: DType, src: DType | None = None) -> Value:
    """An accumulated float converted to the output dtype (ints: round half to even and
    saturate, as OpenCV's ``saturate_cast``).

    ``src``: the filter's input dtype, given by filters whose weights are finite and
    non-negative with a sum of at most 1 (or a plain sum): an integer input then makes
    the value finite (the NaN check goes), and an unsigned one non-negative (the lower
    clamp goes). The same results as the full conversion, with fewer instructions."""
    if src is None or src.is_float or to.is_float or not v.dtype.is_float \
            or to.bits > 16 or v.dtype == dt.float64:
        return saturate_value(v, to)
    lo, hi = int_range(to)
    r = tkm.rint(v)
    if src.is_signed:
        r = tkm.max(r, float(lo))
    return cast(tkm.min(r, float(hi)), to)


class Filter(ReadBack):
    """Base of the neighbourhood filters: a ``kw`` x ``kh`` window centred on the output
    pixel, read through the stage below with ``border`` (a :class:`BorderMode`) for taps
    outside its plane; ``value`` is the constant of ``CONSTANT`` (scalar or per channel,
    a runtime value). ``tiled``: where the filter is the chain's last geometry op, the
    block stages its input neighbourhood in shared memory first (:meth:`tile`; the same
    results); None (the default) tiles on CUDA targets and not on the CPU target, where
    the tile's barriers cost more than they save (docs/fkl-filters.md)."""

    #: Whether the output is float32 whatever the input (Sobel), else the input dtype.
    float_out: ClassVar[bool] = False
    #: Whether the filter is a row pass then a column pass (:meth:`hsum`, :meth:`vsum`):
    #: the tiled form then computes several vertically adjacent outputs per thread and
    #: reuses each window row's result between them.
    separable: ClassVar[bool] = False
    #: Benchmark knobs (part of the kernel key; docs/fkl-filters.md, "Tiled form"):
    #: ``tile_rows`` forces the output rows per thread of the tiled form (None: chosen
    #: by :meth:`rows_per_thread`); ``tile_v1`` selects the earlier tiled kernel (one
    #: output per thread, every tile entry border-mapped, the tile in the input dtype).
    tile_rows: int | None = None
    tile_v1: bool = False
    #: Benchmark knob: the tiled form's block (width, height) in threads (None: the
    #: pipe's 32 x 8).
    tile_block: tuple[int, int] | None = None
    #: Whether the tile of a separable filter on uint8 pixels of 2 to 4 channels holds
    #: each pixel as one 32-bit word (its channel bytes) rather than one array per
    #: channel (None: :meth:`packs`).
    tile_packed: bool | None = None
    #: Benchmark knob: the tiled form's whole-word accesses (docs/fkl-filters.md,
    #: "Whole-word loads and stores"): "load" (the tile's words), "store" (the output
    #: rows' words), "both", or None / "none" (the default: measured on the H200, words
    #: gained nothing on loads and lost ~2 us on stores).
    tile_vec: str | None = None

    def __init__(self, ksize: tuple[int, int], border: str, value: Any,
                 tiled: bool | None = None) -> None:
        if border not in BorderMode.ALL:
            raise ArgumentError(f"{self.name} border: expected one of {BorderMode.ALL}, got "
                                f"{border!r}")
        if tiled is not None and not isinstance(tiled, bool):
            raise ArgumentError(f"{self.name} tiled: expected True, False or None, got "
                                f"{tiled!r}")
        self.ksize, self.border, self.value = ksize, border, value
        #: Stage the block's input neighbourhood in shared memory (:meth:`tile`); None:
        #: where the kernel runs on a CUDA target.
        self.tiled = tiled

    def key(self) -> tuple[Any, ...]:
        return (type(self).__name__, self.ksize, self.border, self.tiled, *self._tile_key())

    def _tile_key(self) -> tuple[Any, ...]:
        """The benchmark knobs of the tiled form, when set (else nothing: the default
        kernel keeps its key)."""
        knobs = (self.tile_rows, self.tile_v1, self.tile_block, self.tile_packed)
        if knobs == (None, False, None, None) and self.tile_vec is None:
            return ()
        return ("tile", *knobs) + ((self.tile_vec,) if self.tile_vec is not None else ())

    def vectors(self, which: str) -> bool:
        """Whether the tiled form may use whole-word ``which`` accesses (``"load"`` or
        ``"store"``) where they apply (:attr:`tile_vec`)."""
        v = "none" if self.tile_vec is None else self.tile_vec
        if v not in ("both", "load", "store", "none"):
            raise ArgumentError(f"{self.name} tile_vec: expected None, 'both', 'load', "
                                f"'store' or 'none', got {v!r}")
        return not self.tile_v1 and v in ("both", which)

    def packs(self, t: PixType) -> bool:
        """Whether the tiled form packs each pixel's channels into one 32-bit tile word:
        for separable filters on uint8 pixels of 2 to 4 channels (one shared-memory load
        per tap serves every channel), unless ``tile_packed`` says otherwise."""
        if self.tile_v1 or not self.separable or t.dtype != dt.uint8 \
                or not 2 <= t.channels <= 4:
            return False
        return self.pack_default if self.tile_packed is None else bool(self.tile_packed)

    #: :meth:`packs` where ``tile_packed`` is None.
    pack_default: ClassVar[bool] = False
    #: Whether a packed tile is summed in 16-bit lanes of the words (a plain window sum
    #: of uint8 values: :meth:`from_sum` takes each channel's total).
    lane_sums: ClassVar[bool] = False

    def from_sum(self, total: Value, c: list[Value], t: PixType) -> Value:
        """A lane-summing filter's output value from one channel's window sum (int32)."""
        raise NotImplementedError

    def lane_row(self, words: list[Value], c: list[Value]) -> Value:
        """The row pass of a lane-summing filter on one window row's masked words (two
        channels per uint32, in 16-bit lanes): a plain sum here (kw * kh * 255 < 2**16,
        so no carry crosses a lane)."""
        acc = words[0]
        for w in words[1:]:
            acc = acc + w
        return acc

    def lane_outputs(self, rs: list[tuple[Value, Value]], rows: int, kh: int,
                     c: list[Value], t: PixType) -> list[Pixel]:
        """The ``rows`` output pixels from the row results ``rs`` (``(even, odd)`` lane
        words of the ``rows + kh - 1`` tile rows under the thread): here each output's
        ``kh`` rows summed in the lanes, each channel's total to :meth:`from_sum`."""
        out = []
        for r in range(rows):
            even, odd = rs[r]
            for j in range(1, kh):
                even, odd = even + rs[r + j][0], odd + rs[r + j][1]
            sums = _lanes(even, odd)
            out.append([self.from_sum(cast(sums[k], dt.int32), c, t)
                        for k in range(t.channels)])
        return out

    def out_type(self, t: PixType) -> PixType:
        super().out_type(t)
        if self.border == BorderMode.CONSTANT:
            per_channel(self.value, t.channels, f"{self.name} value")
        return t.with_(dt.float32) if self.float_out else t

    def out_geom(self, g: Geom, t: PixType) -> Geom:
        return Geom(g.w, g.h, g.batch)

    def _constants(self, t: PixType) -> list[Any]:
        if self.border != BorderMode.CONSTANT:
            return []
        return per_channel(self.value, t.channels, f"{self.name} value")

    def scalar_types(self, t: PixType) -> list[DType]:
        return [t.dtype] * len(self._constants(t)) + self.coef_types(t)

    def values(self, t: PixType, g: Geom) -> list[Any]:
        return self._constants(t) + self.coefs(t)

    # -- what a filter defines -------------------------------------------------------------
    def window(self, t: PixType) -> tuple[int, int]:
        """``(kw, kh)`` for input pixels ``t``."""
        return self.ksize

    def coef_types(self, t: PixType) -> list[DType]:
        """Dtypes of the filter's own runtime values (after the border constants)."""
        return []

    def coefs(self, t: PixType) -> list[Any]:
        """The filter's own runtime values, in :meth:`coef_types` order."""
        return []

    def combine(self, win: list[list[Pixel]], c: list[Value], t: PixType) -> Pixel:
        """The output pixel from the window ``win[row][col]`` (input type ``t``) and the
        traced values ``c`` of :meth:`coefs`. A separable filter's is its row pass on
        each window row (the taps staged: :meth:`staged_type`), then its column pass."""
        if not self.separable:
            raise NotImplementedError
        st = self.staged_type(t)
        out = []
        for k in range(t.channels):
            hs = [self.hsum([_staged(px[k], st) for px in row], c, t) for row in win]
            out.append(self.vsum(hs, c, t))
        return out

    # -- separable filters ----------------------------------------------------------------
    def staged_type(self, t: PixType) -> DType:
        """The dtype a tap is converted to before the row pass (and that the tiled form's
        shared tile holds, so each source value is converted once per tile entry rather
        than once per tap): the input dtype unless a separable filter says otherwise.
        The conversion must be exact for the input dtype."""
        return t.dtype

    def hsum(self, v: list[Value], c: list[Value], t: PixType) -> Value:
        """Row pass of a separable filter: one channel of one window row (``kw`` staged
        taps, left to right) to one value."""
        raise NotImplementedError

    def vsum(self, h: list[Value], c: list[Value], t: PixType) -> Value:
        """Column pass of a separable filter: the ``kh`` row values (top to bottom) of one
        channel to the output value."""
        raise NotImplementedError

    def _split(self, p: list[Value], t: PixType) -> tuple[list[Value], list[Value]]:
        """The traced parameters as (border constants, the filter's own values)."""
        nconst = t.channels if self.border == BorderMode.CONSTANT else 0
        return p[:nconst], p[nconst:]

    def _tap(self, src: Stage, x: Value, y: Value, z: Value, inside: Value | None,
             consts: list[Value]) -> Pixel:
        """The tap at the border-mapped ``(x, y)``; with ``inside`` (CONSTANT), the
        border constant where it is false."""
        px = src.read(x, y, z)
        if inside is None:
            return list(px)
        return [where(inside, v, consts[k]) for k, v in enumerate(px)]

    def rows_per_thread(self, t: PixType, block: tuple[int, int]) -> int:
        """Output rows each thread of the tiled form computes (vertically adjacent): 4 for
        separable filters (each window row's :meth:`hsum` serves up to ``kh`` outputs),
        fewer where the tile would pass :data:`TILE_BYTES`; 1 for the others (whose
        windows share no partial result). ``tile_rows`` overrides (then clamped so the
        tile fits)."""
        if self.tile_v1:
            return 1
        kw, kh = self.window(t)
        size = self.staged_type(t).itemsize if self.separable else t.dtype.itemsize
        want = self.tile_rows if self.tile_rows is not None else \
            (4 if self.separable else 1)
        rows = max(1, int(want))
        while rows > 1 and t.channels * (block[0] + kw - 1) * (block[1] * rows + kh - 1) \
                * size > TILE_BYTES:
            rows //= 2
        return rows

    def word_loads(self, src: Stage, block: tuple[int, int]) -> bool:
        """Whether the tiled form (with ``words``) loads interior tiles of ``src`` in
        whole words: a packed uint8 tile read straight from a contiguous TensorRead,
        blocks a multiple of 4 wide, :attr:`tile_vec` allowing."""
        return self.packs(src.type) and src.raw is not None and block[0] % 4 == 0 \
            and self.vectors("load")

    def tile(self, src: Stage, p: list[Value], block: tuple[int, int], bx: Value,
             by: Value, tx: Value, ty: Value, z: Value,
             words: bool = True) -> Callable[[], list[Pixel]]:
        """The tiled form (``docs/fkl-filters.md``, "Tiled form"): emit the cooperative
        load of this block's tile of ``src`` into shared memory and the barrier, and
        return what computes the thread's output pixels from the tile: output rows
        ``ty * R + r`` for ``r < R`` = :meth:`rows_per_thread` of the block's
        ``block[1] * R`` rows, column ``tx``. Every thread of the block must run this (it
        holds a ``syncthreads``); ``block`` is the block's (width, height) in threads,
        ``bx, by`` its index, ``tx, ty`` the thread's; ``words``: tiles inside the
        plane may load in whole words (:meth:`word_loads`; the arrays are then
        word-aligned)."""
        t = src.type
        consts, coefs = self._split(p, t)
        kw, kh = self.window(t)
        rx, ry = kw // 2, kh // 2
        bw, bh = block
        rows = self.rows_per_thread(t, block)
        oh = bh * rows  # output rows of the block
        tw, th = bw + 2 * rx, oh + 2 * ry
        mode = self.border
        split = self.separable and not self.tile_v1
        st = self.staged_type(t) if split else t.dtype
        packed = self.packs(t)
        u32 = dt.uint32
        raw = src.raw
        # Whole-word tile loads (a packed uint8 tile read straight from a contiguous
        # TensorRead): groups of 4 pixels (``channels`` aligned 32-bit words) from column
        # ``ox - cpad``, a multiple of 4; the tile's rows are ``tws`` words apart (a
        # multiple of 4: each group goes to shared memory as one 16-byte store) and tile
        # column ``cpad + i`` holds the pixel ``i`` columns right of ``ox``.
        vec = words and self.word_loads(src, block)
        cpad = 4 * -(-rx // 4) - rx if vec else 0
        tws = 4 * -(-(cpad + tw) // 4) if vec else tw
        tiles = [shared_array(u32, (th, tws))] if packed else \
            [shared_array(st, (th, tw)) for _ in range(t.channels)]
        i32 = dt.int32
        ox, oy = cast(bx, i32) * bw - rx, cast(by, i32) * oh - ry
        lx0 = cast(tx, i32)
        ly0 = cast(ty, i32) * rows if rows > 1 else cast(ty, i32)
        tid = cast(ty, dt.uint32) * bw + cast(tx, dt.uint32)  # unsigned: cheap // and %
        threads, entries = bw * bh, tw * th

        def load(idx: Value, interior: bool) -> None:
            uy = idx // tw
            lx, ly = cast(idx - uy * tw, i32), cast(uy, i32)
            if interior:  # the whole tile lies in the plane: no border to map
                px = list(src.read(ox + lx, oy + ly, z))
            else:
                # Past w - 1 + rx (h - 1 + ry) no output pixel of the plane reads the
                # entry: clamp it there, so a block overhanging the plane reads nothing
                # outside.
                gx = tkm.min(ox + lx, src.w - 1 + rx)
                gy = tkm.min(oy + ly, src.h - 1 + ry)
                mx = _tap_indices([gx], src.w, rx, mode)[0]
                my = _tap_indices([gy], src.h, ry, mode)[0]
                inside = ((gx >= 0) & (gx < src.w) & (gy >= 0) & (gy < src.h)) \
                    if mode == BorderMode.CONSTANT else None
                px = self._tap(src, mx, my, z, inside, consts)
            if packed:  # channel k in bits 8k .. 8k + 7
                tiles[0][ly, lx + cpad if cpad else lx] = _pack(px)
                return
            for k in range(t.channels):
                tiles[k][ly, lx] = _staged(px[k], st)

        def fill(interior: bool) -> None:
            for r in range(-(-entries // threads)):
                idx = tid + r * threads if r else tid
                if (r + 1) * threads > entries:  # the last round: part of the block loads
                    with if_(idx < entries):
                        load(idx, interior)
                else:
                    load(idx, interior)

        def fill_words() -> None:
            # Job j: tile row j // ng, group j % ng (4 pixels: ``channels`` words).
            assert raw is not None
            ng, c = tws // 4, t.channels
            jobs = th * ng
            for r in range(-(-jobs // threads)):
                idx = tid + r * threads if r else tid

                def job(idx: Value = idx) -> None:
                    row = idx // ng
                    gx = cast(idx - row * ng, i32) * 4
                    ly = cast(row, i32)
                    base = raw.index(ox - cpad + gx, oy + ly, z)
                    b: list[Value] = []
                    for m in range(c):
                        b += raw.ptr.vload(base + 4 * m if m else base, 4)
                    tiles[0].vstore((ly, gx), [_pack(b[k * c:(k + 1) * c]) for k in range(4)])

                if (r + 1) * threads > jobs:
                    with if_(idx < jobs):
                        job()
                else:
                    job()

        if self.tile_v1:
            fill(False)
        else:
            # Block-uniform: a tile wholly inside the plane loads without border mapping
            # (the same values: every mapped coordinate there is the coordinate itself);
            # with ``vec``, in whole words where the rows are word-aligned too.
            interior = (ox >= 0) & (oy >= 0) & (ox + tw <= src.w) & (oy + th <= src.h)
            if vec:
                assert raw is not None
                words = (ox >= cpad) & (oy >= 0) & (ox - cpad + tws <= src.w) \
                    & (oy + th <= src.h) & ((raw.row & 3) == 0)
                with if_(words):
                    fill_words()
                with else_():
                    with if_(interior):
                        fill(True)
                    with else_():
                        fill(False)
            else:
                with if_(interior):
                    fill(True)
                with else_():
                    fill(False)
        syncthreads()

        word_at: dict[tuple[int, int], Value] = {}

        def at_word(j: int, i: int) -> Value:
            if (j, i) not in word_at:  # one load per tap, for every channel
                word_at[j, i] = tiles[0][ly0 + j if j else ly0,
                                         lx0 + (cpad + i) if cpad + i else lx0]
            return word_at[j, i]

        def at(k: int, j: int, i: int) -> Value:
            if not packed:
                return tiles[k][ly0 + j if j else ly0, lx0 + i if i else lx0]
            w = at_word(j, i)
            v = w >> (8 * k) if k else w
            return _staged(v if k == 3 else v & 0xFF, st)

        def outputs() -> list[Pixel]:
            if packed and self.lane_sums:
                return lanes()
            if split:
                # Row j of the thread's strip of tile rows feeds outputs j - kh + 1 .. j.
                hs = [[self.hsum([at(k, j, i) for i in range(kw)], coefs, t)
                       for k in range(t.channels)] for j in range(rows + kh - 1)]
                return [[self.vsum([hs[r + j][k] for j in range(kh)], coefs, t)
                         for k in range(t.channels)] for r in range(rows)]
            return [self.combine([[[at(k, r + j, i) for k in range(t.channels)]
                                   for i in range(kw)] for j in range(kh)], coefs, t)
                    for r in range(rows)]

        def lanes() -> list[Pixel]:
            # Integer row passes on the packed words: channels 0 and 2 in the 16-bit
            # lanes of ``even``, 1 and 3 in those of ``odd`` (:meth:`lane_row` keeps each
            # lane below 2**16); then :meth:`lane_outputs` does the column passes.
            mask = 0x00FF00FF
            rs = []
            for j in range(rows + kh - 1):
                ws = [at_word(j, i) for i in range(kw)]
                rs.append((self.lane_row([w & mask for w in ws], coefs),
                           self.lane_row([(w >> 8) & mask for w in ws], coefs)))
            return self.lane_outputs(rs, rows, kh, coefs, t)

        return outputs

    def sample(self, src: Stage, p: list[Value]) -> Stage:
        t = src.type
        consts, coefs = self._split(p, t)
        kw, kh = self.window(t)
        mode = self.border

        def read(x: Value, y: Value, z: Value) -> Pixel:
            # Border-map each column and row once; the taps are their cross product.
            xs = [x + (i - kw // 2) for i in range(kw)]
            ys = [y + (j - kh // 2) for j in range(kh)]
            mx = _tap_indices(xs, src.w, kw // 2, mode)
            my = _tap_indices(ys, src.h, kh // 2, mode)
            if mode == BorderMode.CONSTANT:
                inx = [(v >= 0) & (v < src.w) for v in xs]
                iny = [(v >= 0) & (v < src.h) for v in ys]
            win: list[list[Pixel]] = []
            for j in range(kh):
                row = []
                for i in range(kw):
                    inside = inx[i] & iny[j] if mode == BorderMode.CONSTANT else None
                    row.append(self._tap(src, mx[i], my[j], z, inside, consts))
                win.append(row)
            return self.combine(win, coefs, t)

        return Stage(read, src.w, src.h, self.out_type(t))


def _pack(px: list[Value]) -> Value:
    """The uint8 channels ``px`` as one uint32 word: channel ``k`` in bits
    ``8k .. 8k + 7``."""
    word = cast(px[0], dt.uint32)
    for k in range(1, len(px)):
        word = word | (cast(px[k], dt.uint32) << (8 * k))
    return word


def _dot(v: list[Value], w: list[Any]) -> Value:
    """``sum_i v[i] * w[i]`` left to right (weights traced or Python numbers; a Python 0
    is skipped: its term is not computed)."""
    acc: Any = None
    for x, wi in zip(v, w):
        if isinstance(wi, (int, float)) and wi == 0:
            continue
        term = x * wi
        acc = term if acc is None else acc + term
    return acc


# -- linear filters -----------------------------------------------------------------------
class LinearFilter(Filter):
    """``cv2.filter2D`` with the anchor at the centre (a correlation, as OpenCV's):
    ``out = sum_ij kernel[j, i] * src[y + j - kh//2, x + i - kw//2]``, in float32 (float64
    for float64 pixels), stored in the input dtype (integers round half to even and
    saturate). ``kernel`` is a (kh, kw) array, or a flat sequence with
    ``ksize=(kw, kh)``; odd sides up to :data:`MAX_KSIZE`. The coefficients are runtime
    values: another kernel of the same size reuses the compiled code."""

    def __init__(self, kernel: Any, ksize: Any = None, border: str = BorderMode.REFLECT_101,
                 value: Any = 0, tiled: bool | None = None) -> None:
        import numpy as np

        try:
            k = np.asarray(kernel, dtype=np.float64)
        except (TypeError, ValueError):
            raise ArgumentError(f"fkl.LinearFilter kernel: expected numbers, got "
                                f"{kernel!r}") from None
        if ksize is None:
            if k.ndim != 2:
                raise ArgumentError(f"fkl.LinearFilter kernel: expected a 2-D (kh, kw) "
                                    f"array, or flat coefficients with ksize=(kw, kh), got "
                                    f"shape {k.shape}")
            size = _ksize((k.shape[1], k.shape[0]), "fkl.LinearFilter kernel shape (kw, kh)")
        else:
            size = _ksize(ksize, "fkl.LinearFilter ksize")
            if k.size != size[0] * size[1]:
                raise ArgumentError(f"fkl.LinearFilter kernel: ksize {size} needs "
                                    f"{size[0] * size[1]} coefficients, got {k.size}")
        if not np.isfinite(k).all():
            raise ArgumentError("fkl.LinearFilter kernel: coefficients must be finite")
        super().__init__(size, border, value, tiled)
        self.kernel = k.reshape(size[1], size[0])

    def coef_types(self, t: PixType) -> list[DType]:
        return [_math_type(t.dtype)] * self.kernel.size

    def coefs(self, t: PixType) -> list[Any]:
        return [float(v) for v in self.kernel.reshape(-1)]

    def combine(self, win: list[list[Pixel]], c: list[Value], t: PixType) -> Pixel:
        ft, kw = _math_type(t.dtype), self.ksize[0]
        out = []
        for k in range(t.channels):
            acc: Any = None
            for j, row in enumerate(win):
                for i, px in enumerate(row):
                    term = cast(px[k], ft) * c[j * kw + i]
                    acc = term if acc is None else acc + term
            out.append(_store(acc, t.dtype))
        return out


class BoxFilter(Filter):
    """``cv2.blur`` (``normalize=True``: the window mean) or ``cv2.boxFilter(...,
    normalize=False)`` (the window sum), stored in the input dtype. The sum runs row by
    row (each row's taps left to right, then the row sums top to bottom): in int32 for
    integer pixels of up to 16 bits (exact), else in float32 (float64)."""

    separable = True
    lane_sums = True
    #: Measured on the H200 (1080p x 3 uint8, 3 x 3): 10.1 us packed against 11.7 us
    #: per-channel tiles (GaussianBlur: 11.5 both ways, so it stays per channel).
    pack_default = True

    def __init__(self, ksize: Any, border: str = BorderMode.REFLECT_101, value: Any = 0,
                 normalize: bool = True, tiled: bool | None = None) -> None:
        super().__init__(_ksize(ksize, "fkl.BoxFilter ksize"), border, value, tiled)
        self.normalize = bool(normalize)

    def coef_types(self, t: PixType) -> list[DType]:
        return [_math_type(t.dtype)]

    def coefs(self, t: PixType) -> list[Any]:
        return [1.0 / (self.ksize[0] * self.ksize[1]) if self.normalize else 1.0]

    def staged_type(self, t: PixType) -> DType:
        # Integers of 16 bits or fewer sum exactly in int32 (225 x 65535 < 2**24, so the
        # float32 sum the other dtypes use would be exact too: the same result), and
        # the sum converts to float once per output instead of once per tap.
        if not t.dtype.is_float and t.dtype.itemsize <= 2:
            return dt.int32
        return _math_type(t.dtype)

    def hsum(self, v: list[Value], c: list[Value], t: PixType) -> Value:
        acc = v[0]
        for x in v[1:]:
            acc = acc + x
        return acc

    def vsum(self, h: list[Value], c: list[Value], t: PixType) -> Value:
        acc = h[0]
        for x in h[1:]:
            acc = acc + x
        return self.from_sum(acc, c, t)

    def from_sum(self, total: Value, c: list[Value], t: PixType) -> Value:
        return _store(_staged(total, _math_type(t.dtype)) * c[0], t.dtype, t.dtype)


def gaussian_kernel(n: int, sigma: float) -> list[float]:
    """OpenCV's ``getGaussianKernel(n, sigma)``: for ``sigma <= 0`` and n in 1, 3, 5, 7 its
    fixed tables, else ``exp(-(i - (n-1)/2)**2 / (2 sigma**2))`` normalised, with
    ``sigma = 0.3 * ((n - 1) * 0.5 - 1) + 0.8`` when ``sigma <= 0``."""
    fixed = {1: [1.0], 3: [0.25, 0.5, 0.25], 5: [0.0625, 0.25, 0.375, 0.25, 0.0625],
             7: [0.03125, 0.109375, 0.21875, 0.28125, 0.21875, 0.109375, 0.03125]}
    if sigma <= 0 and n in fixed:
        return fixed[n]
    s = sigma if sigma > 0 else ((n - 1) * 0.5 - 1) * 0.3 + 0.8
    w = [math.exp(-0.5 * (i - (n - 1) * 0.5) ** 2 / (s * s)) for i in range(n)]
    total = sum(w)
    return [v / total for v in w]


def gaussian_kernel_q8(n: int, sigma: float) -> list[int]:
    """The integer coefficients (units of 1/256, summing to exactly 256) of OpenCV's
    bit-exact uint8 ``GaussianBlur``: ``getGaussianKernelBitExact`` (OpenCV's fixed
    tables for ``sigma <= 0`` and n in 1, 3, 5, 7; else ``exp(x**2 * -0.125 / s**2)``
    for ``x = 1 - n, 3 - n, ...`` with ``s = sigma``, or ``n * 0.15 + 0.35`` (one
    rounding) when ``sigma <= 0``, normalised by ``1 / sum``), turned into 8.8 fixed
    point by error diffusion from the outside in (``getGaussianKernelFixedPoint_ED``:
    each side coefficient ``cvRound(k * 256 + err)``, carrying the rounding error to the
    next; the centre takes ``256 - sum(sides)``). The model was checked against
    ``cv2.GaussianBlur`` (OpenCV 5.0) on random images for every odd side to 15 and
    random sigmas: equal everywhere."""
    from fractions import Fraction

    import numpy as np

    fixed = {1: [1.0], 3: [0.25, 0.5, 0.25], 5: [0.0625, 0.25, 0.375, 0.25, 0.0625],
             7: [0.03125, 0.109375, 0.21875, 0.28125, 0.21875, 0.109375, 0.03125]}
    if sigma <= 0 and n in fixed:
        k = fixed[n]
    else:
        # softdouble mulAdd(n, 0.15, 0.35): one rounding (exact rational arithmetic).
        s = float(sigma) if sigma > 0 else \
            float(Fraction(n) * Fraction(0.15) + Fraction(0.35))
        scale = -0.125 / (s * s)
        half = (n - 1) // 2
        side = [math.exp(float(x * x) * scale) for x in range(1 - n, 0, 2)][:half]
        total = 0.0
        for v in side:
            total += v
        total = total * 2.0 + 1.0
        mul = 1.0 / total
        k = [v * mul for v in side] + [mul] + [v * mul for v in reversed(side)]
    out = [0] * n
    err, acc = 0.0, 0
    for i in range(n // 2):
        adj = k[i] * 256.0 + err
        v = int(np.rint(adj))  # cvRound: half to even
        err = adj - float(v)
        out[i] = out[n - 1 - i] = v
        acc += v
    out[n // 2] = 256 - 2 * acc
    return out


def _sym_dot(v: list[Value], c: list[Value]) -> Value:
    """``sum_i v[i] * c[i]`` for symmetric integer weights (``c[i] == c[n - 1 - i]``,
    checked on the host): the mirrored taps are added first, so ``n // 2 + 1``
    multiplies. Exact in integers, whatever the order."""
    n = len(v)
    acc = v[n // 2] * c[n // 2]
    for i in range(n // 2):
        acc = acc + (v[i] + v[n - 1 - i]) * c[i]
    return acc


def _auto_side(sigma: float, u8: bool) -> int:
    """OpenCV's window side for ``ksize`` 0: ``cvRound(sigma * (3 if u8 else 4) * 2 + 1) | 1``."""
    return int(round(sigma * (3 if u8 else 4) * 2 + 1)) | 1


class GaussianBlur(Filter):
    """``cv2.GaussianBlur(src, ksize, sigma_x, sigma_y)``: a separable Gaussian (each row of
    the window weighted by the x kernel, the row sums by the y kernel) with OpenCV's rules:
    ``sigma_y = 0`` means ``sigma_x``; a side of 0 comes from its sigma
    (``round(sigma * (3 for uint8, else 4) * 2 + 1) | 1``); a sigma <= 0 comes from the side
    (``getGaussianKernel``). Stored in the input dtype. The sigmas are runtime values
    while the window size stays the same."""

    separable = True

    def __init__(self, ksize: Any, sigma_x: float, sigma_y: float = 0.0,
                 border: str = BorderMode.REFLECT_101, value: Any = 0,
                 tiled: bool | None = None) -> None:
        try:
            sx, sy = float(sigma_x), float(sigma_y)
        except (TypeError, ValueError):
            raise ArgumentError(f"fkl.GaussianBlur sigma: expected numbers, got "
                                f"{sigma_x!r}, {sigma_y!r}") from None
        if not (math.isfinite(sx) and math.isfinite(sy)):
            raise ArgumentError(f"fkl.GaussianBlur sigma: expected finite values, got {sx}, "
                                f"{sy}")
        sy = sy if sy > 0 else sx
        kw, kh = _ksize(ksize, "fkl.GaussianBlur ksize", allow_zero=True)
        if (kw == 0 and sx <= 0) or (kh == 0 and sy <= 0):
            raise ArgumentError(f"fkl.GaussianBlur: a window side of 0 needs a positive "
                                f"sigma to derive it from, got ksize={ksize!r}, "
                                f"sigma_x={sigma_x!r}, sigma_y={sigma_y!r}")
        self.sigma = (sx, sy)
        self._given = (kw, kh)
        # The side OpenCV derives from a sigma depends on the depth: one size per case,
        # checked against the limit when the pixel type is known (uint8's is smaller).
        self.sizes = {u8: self._side(u8) for u8 in (True, False)}
        if min(max(s) for s in self.sizes.values()) > MAX_KSIZE:
            _ksize(self.sizes[True], "fkl.GaussianBlur derived ksize")  # raises
        super().__init__(self.sizes[True], border, value, tiled)

    def _side(self, u8: bool) -> tuple[int, int]:
        kw, kh = self._given
        return (kw or _auto_side(self.sigma[0], u8), kh or _auto_side(self.sigma[1], u8))

    def key(self) -> tuple[Any, ...]:
        return ("GaussianBlur", self.sizes[True], self.sizes[False], self.border, self.tiled,
                *self._tile_key())

    def window(self, t: PixType) -> tuple[int, int]:
        return _ksize(self.sizes[t.dtype == dt.uint8],
                      f"fkl.GaussianBlur derived ksize for {t.dtype.name}")

    def out_type(self, t: PixType) -> PixType:
        self.window(t)
        return super().out_type(t)

    #: uint8 pixels of 2 to 4 channels: the packed tile, summed in 16-bit lanes
    #: (:meth:`lane_row`; other dtypes never pack).
    pack_default = True
    lane_sums = True

    @staticmethod
    def fixed(t: PixType) -> bool:
        """Whether pixels ``t`` take OpenCV's bit-exact fixed-point arithmetic (uint8):
        integer coefficients of :func:`gaussian_kernel_q8` (units of 1/256), exact
        integer sums, ``(sum + 2**15) >> 16``."""
        return t.dtype == dt.uint8

    def coef_types(self, t: PixType) -> list[DType]:
        kw, kh = self.window(t)
        return [dt.int32 if self.fixed(t) else _math_type(t.dtype)] * (kw + kh)

    def coefs(self, t: PixType) -> list[Any]:
        kw, kh = self.window(t)
        make = gaussian_kernel_q8 if self.fixed(t) else gaussian_kernel
        return make(kw, self.sigma[0]) + make(kh, self.sigma[1])  # type: ignore[operator]

    def staged_type(self, t: PixType) -> DType:
        return dt.int32 if self.fixed(t) else _math_type(t.dtype)

    def hsum(self, v: list[Value], c: list[Value], t: PixType) -> Value:
        if self.fixed(t):
            return _sym_dot(v, c[:len(v)])
        return _dot(v, c[:len(v)])

    def vsum(self, h: list[Value], c: list[Value], t: PixType) -> Value:
        if self.fixed(t):
            return _round_q16(_sym_dot(h, c[len(c) - len(h):]))
        return _store(_dot(h, c[len(c) - len(h):]), t.dtype, t.dtype)

    def lane_row(self, words: list[Value], c: list[Value]) -> Value:
        # Each lane (one channel) gets sum_i c_i * v_i <= 256 * 255 = 65280 < 2**16
        # (the coefficients are non-negative and sum to 256): no carry crosses a lane.
        return _sym_dot(words, [cast(v, dt.uint32) for v in c[:len(words)]])

    def lane_outputs(self, rs: list[tuple[Value, Value]], rows: int, kh: int,
                     c: list[Value], t: PixType) -> list[Pixel]:
        # Each row's lanes taken apart once (a row feeds up to kh outputs), then the
        # column pass per channel in int32 (up to 256 * 65280: past 16 bits).
        chans = [[cast(v, dt.int32) for v in _lanes(even, odd)[:t.channels]]
                 for even, odd in rs]
        cy = c[len(c) - kh:]
        return [[_round_q16(_sym_dot([chans[r + j][k] for j in range(kh)], cy))
                 for k in range(t.channels)] for r in range(rows)]


def _lanes(even: Value, odd: Value) -> list[Value]:
    """Channels 0..3 of a packed row result: channels 0 and 2 are the 16-bit lanes of
    ``even``, 1 and 3 those of ``odd``."""
    return [even & 0xFFFF, odd & 0xFFFF, even >> 16, odd >> 16]


def _round_q16(acc: Value) -> Value:
    """A fixed-point sum in units of 2**-16 (at most 255 * 2**16 for the Gaussian's
    weights, which sum to 2**16) rounded half up to uint8, as OpenCV's
    ``ufixedpoint32`` → ``uint8`` conversion: ``(acc + 2**15) >> 16``."""
    return cast((acc + 32768) >> 16, dt.uint8)


#: 3-tap derivative kernels of order 0, 1, 2 (OpenCV's ksize=3 Sobel factors).
_DERIV3 = {0: [1.0, 2.0, 1.0], 1: [-1.0, 0.0, 1.0], 2: [1.0, -2.0, 1.0]}


class Sobel(Filter):
    """``cv2.Sobel(src, cv2.CV_32F, dx, dy, ksize=3, scale=scale)``: the separable 3 x 3
    derivative of order ``dx`` in x and ``dy`` in y (0..2 each, at least one positive),
    times ``scale`` (a runtime value); output float32."""

    float_out = True
    separable = True

    def __init__(self, dx: int, dy: int, ksize: int = 3, scale: float = 1.0,
                 border: str = BorderMode.REFLECT_101, value: Any = 0,
                 tiled: bool | None = None) -> None:
        if ksize != 3:
            raise ArgumentError(f"fkl.Sobel ksize: only 3 is supported, got {ksize!r}")
        if not (_is_int(dx) and _is_int(dy) and 0 <= dx <= 2 and 0 <= dy <= 2
                and dx + dy >= 1):
            raise ArgumentError(f"fkl.Sobel dx, dy: expected derivative orders 0..2 with "
                                f"dx + dy >= 1, got dx={dx!r}, dy={dy!r}")
        super().__init__((3, 3), border, value, tiled)
        self.order = (int(dx), int(dy))
        self.scale = float(scale)

    def key(self) -> tuple[Any, ...]:
        return (*super().key(), self.order)

    def coef_types(self, t: PixType) -> list[DType]:
        return [dt.float32]

    def coefs(self, t: PixType) -> list[Any]:
        return [self.scale]

    def staged_type(self, t: PixType) -> DType:
        return dt.float32

    def hsum(self, v: list[Value], c: list[Value], t: PixType) -> Value:
        return _dot(v, _DERIV3[self.order[0]])

    def vsum(self, h: list[Value], c: list[Value], t: PixType) -> Value:
        return _dot(h, _DERIV3[self.order[1]]) * c[0]


# -- non-linear filters -------------------------------------------------------------------
class _Morphology(Filter):
    """Min (erode) or max (dilate) over a rectangular ``ksize`` window, exact in any dtype.
    For ``CONSTANT``, OpenCV's default border value (the dtype's max for erode, min for
    dilate: the border never wins) is used when ``value`` is None."""

    use_max: ClassVar[bool] = False

    def __init__(self, ksize: Any, border: str = BorderMode.CONSTANT,
                 value: Any = None, tiled: bool | None = None) -> None:
        super().__init__(_ksize(ksize, f"{self.name} ksize"), border, value, tiled)

    def _constants(self, t: PixType) -> list[Any]:
        if self.border != BorderMode.CONSTANT:
            return []
        if self.value is None:
            lim: Any
            if t.dtype.is_float:
                lim = -math.inf if self.use_max else math.inf
            else:
                lo, hi = int_range(t.dtype)
                lim = lo if self.use_max else hi
            return [lim] * t.channels
        return per_channel(self.value, t.channels, f"{self.name} value")

    def out_type(self, t: PixType) -> PixType:
        ReadBack.out_type(self, t)
        self._constants(t)
        return t

    def combine(self, win: list[list[Pixel]], c: list[Value], t: PixType) -> Pixel:
        pick = tkm.max if self.use_max else tkm.min
        out = []
        for k in range(t.channels):
            acc: Any = None
            for row in win:
                for px in row:
                    acc = px[k] if acc is None else pick(acc, px[k])
            out.append(acc)
        return out


class Erode(_Morphology):
    """``cv2.erode`` with a rectangular ``ksize`` element (anchor at the centre): the window
    minimum."""


class Dilate(_Morphology):
    """``cv2.dilate`` with a rectangular ``ksize`` element (anchor at the centre): the
    window maximum."""

    use_max = True


class MedianBlur(Filter):
    """``cv2.medianBlur(src, ksize)`` for ksize 3 or 5: the median of the window per
    channel, exact in any dtype. OpenCV always replicates the border; here any mode may be
    chosen (``REPLICATE`` by default, OpenCV's)."""

    def __init__(self, ksize: int, border: str = BorderMode.REPLICATE, value: Any = 0,
                 tiled: bool | None = None) -> None:
        if ksize not in (3, 5) or isinstance(ksize, bool):
            raise ArgumentError(f"fkl.MedianBlur ksize: expected 3 or 5, got {ksize!r}")
        super().__init__((ksize, ksize), border, value, tiled)

    def combine(self, win: list[list[Pixel]], c: list[Value], t: PixType) -> Pixel:
        out = []
        for k in range(t.channels):
            v = [px[k] for row in win for px in row]
            n = len(v)
            # Partial selection sort by compare-exchange: after pass i, v[i] is the
            # (i+1)-th smallest; the median is v[n // 2]. Branch-free min/max pairs.
            for i in range(n // 2 + 1):
                for j in range(i + 1, n):
                    lo, hi = tkm.min(v[i], v[j]), tkm.max(v[i], v[j])
                    v[i], v[j] = lo, hi
            out.append(v[n // 2])
        return out
