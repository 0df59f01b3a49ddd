"""A tiled GEMM on the tensor cores in plain Thork: ``c = a @ b`` with float16 or bfloat16
inputs and float32 accumulation (``tk.mma``), shared-memory tiles filled by ``tk.cp_async``
(a multi-stage pipeline: the next tiles load while the current one is multiplied) and read
into fragments by ``tk.ldmatrix``. Checks itself against NumPy at sizes that are not multiples of
the tile (edge tiles), on the CPU target when there is no GPU.

    python examples/gemm_mma.py

Rows of ``a`` and ``b`` must be 16-byte aligned for ``cp.async`` (``K`` and ``N`` multiples
of 8); other sizes take a path that loads the tiles with ordinary bounds-checked loads.

On Hopper (sm_90) :func:`gemm` takes a second kernel by default, :func:`gemm_tma_kernel`
(:func:`prepare_tma` builds its tensor maps): a producer warpgroup copies the tiles by TMA
(128-byte swizzle, mbarrier-handed stages) and the mma warps issue only ``ldmatrix`` and
``mma``; persistent blocks. 0.70-0.74 of the ``mma.sync`` ceiling on an H200 against
0.59-0.63 for the cp.async kernel (docs/benchmarks.md, session 10); on random inputs it
runs at the board's 700 W power cap (1560-1700 MHz), on all-zero inputs at 1980 MHz and
0.85 of the ceiling (session 12).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import thork as tk

f32, i32, u32 = tk.dt.float32, tk.dt.int32, tk.dt.uint32


class Carried:
    """A warp's A and B ``mma`` fragments (``mt`` A fragments of 4 registers, ``nt`` B
    fragments of 2) held in variables, so that fragments read one k-step ahead cross a
    loop's back edge."""

    def __init__(self, mt: int, nt: int) -> None:
        self.a = [[tk.var(0, u32) for _ in range(4)] for _ in range(mt)]
        self.b = [[tk.var(0, u32) for _ in range(2)] for _ in range(nt)]

    def keep(self, fr: tuple[list, list]) -> None:
        """Store fragments ``(a, b)`` (as ``ldmatrix`` gave them) in the variables."""
        for vs, xs in zip(self.a + self.b, fr[0] + fr[1]):
            for v, x in zip(vs, xs):
                v.set(x)

    def current(self) -> tuple[list, list]:
        """The fragments the variables hold now, in the form ``tk.mma`` takes."""
        return [tuple(v) for v in self.a], [tuple(v) for v in self.b]

#: Shared rows, padded layout: the skew (elements) added to each row so that the 8 rows one
#: ldmatrix reads fall in different banks: 16 bytes, keeping rows 16-byte aligned.
PAD = 8


def swizzle_key(r8: object, chunks: int) -> object:
    """Shared rows, swizzled layout: the XOR key of a row of ``chunks`` 16-byte chunks (a
    power of two, at least 4), from r8 = the row's index mod 8; logical chunk c of the row
    is stored at chunk c ^ key. Any 8 consecutive rows then hold one logical chunk in 8
    different bank groups (ldmatrix reads 8 rows at one column without conflicts), while
    each row stays whole and 128-byte aligned as cp.async writes it (a padded row straddles
    two 128-byte lines of banks)."""
    return r8 if chunks >= 8 else r8 // (8 // chunks) % chunks


@functools.cache
def gemm_kernel(dtype: str) -> tk.Kernel:
    """The GEMM kernel for ``dtype`` (``"float16"`` or ``"bfloat16"``) inputs."""
    T = tk.dt.float16 if dtype == "float16" else tk.dt.bfloat16

    @tk.jit
    def gemm_mma(c: tk.DevicePointer[f32], a: tk.DevicePointer[T], b: tk.DevicePointer[T],
                 M: i32, N: i32, K: i32, BM: tk.Constexpr[int] = 128,
                 BN: tk.Constexpr[int] = 256, BK: tk.Constexpr[int] = 64,
                 WM: tk.Constexpr[int] = 64, WN: tk.Constexpr[int] = 64,
                 STAGES: tk.Constexpr[int] = 4, ALIGNED: tk.Constexpr[bool] = True,
                 GROUP_M: tk.Constexpr[int] = 8, SWIZZLE: tk.Constexpr[bool] = True):
        """``c[M, N] = a[M, K] @ b[K, N]``: a BM x BN tile per block of
        (BM / WM) * (BN / WN) warps, each warp a WM x WN tile of 16 x 8 mma tiles; STAGES
        tiles of a and b in flight (dynamic shared memory, :func:`shared_bytes`). Blocks
        take the tiles GROUP_M tile rows at a time (0: row by row), so that what one wave
        of blocks reads stays in L2. Shared rows padded by PAD, or (SWIZZLE) unpadded with
        their 16-byte chunks permuted by :func:`swizzle_key`."""
        CA, CB = BK // 8, BN // 8              # 16-byte chunks per row of a / b tile
        LA, LB = (BK, BN) if SWIZZLE else (BK + PAD, BN + PAD)     # elements per row
        # STAGES x BM x LA elements of a, then STAGES x BK x LB of b (flat, row-major).
        sa = tk.dynamic_shared(T)
        sb = tk.dynamic_shared(T, STAGES * BM * LA * 2)

        def chunk_at(r8, ch, chunks):
            """Element offset, inside its row, of logical chunk ch of a row r (r8 = r % 8)."""
            return (ch ^ swizzle_key(r8, chunks)) * 8 if SWIZZLE else ch * 8
        nthreads = (BM // WM) * (BN // WN) * 32
        tid = tk.thread_idx().x
        lane, warp = tid % 32, tid // 32
        wm0 = (warp // (BN // WN)) * WM        # the warp's tile inside the block tile
        wn0 = (warp % (BN // WN)) * WN
        bx, by = tk.block_idx().x, tk.block_idx().y
        if GROUP_M > 1:                        # block (bx, by) -> tile (tn, tm), grouped
            gx, gy = tk.grid_dim().x, tk.grid_dim().y
            pid = by * gx + bx
            first = pid // (GROUP_M * gx) * GROUP_M
            rows = tk.where(gy - first < GROUP_M, gy - first, GROUP_M)
            by, bx = first + pid % (GROUP_M * gx) % rows, pid % (GROUP_M * gx) // rows
        m0, n0 = by * BM, bx * BN

        # Copies global -> shared in 16-byte chunks (8 elements): thread tid copies chunk
        # column tid % (cols / 8) of rows tid // (cols / 8) + i P (P = nthreads / (cols / 8),
        # i = 0, 1 ...), so each thread's chunks of a tile lie a constant apart.
        NA, NB = BM * BK // 8 // nthreads, BK * BN // 8 // nthreads
        PA, PB = nthreads // (BK // 8), nthreads // (BN // 8)
        ra, ca = tid // (BK // 8), tid % (BK // 8) * 8
        rb, cb = tid // (BN // 8), tid % (BN // 8) * 8
        a_src, b_src = (m0 + ra) * K + ca, rb * N + n0 + cb  # chunk 0 of the tile at k 0
        a_dst, b_dst = ra * LA + ca, rb * LB + cb          # chunk 0 in a (padded) stage
        a_step, b_step = PA * K, PB * N                    # from chunk i to i + 1

        def load_chunk(which, stage, k0, k0n, check=True):
            """Start chunk ``which`` = ("a" | "b", i) of the tile at column (a) / row (b)
            k0 (k0n = k0 N) into ``stage``: zeros past the matrix's edges (``check=False``:
            the tile is known to lie inside both matrices)."""
            kind, i = which
            if kind == "a":                    # a[m0 + ra + i PA, k0 + ca ...]
                dst, src = sa, a
                if SWIZZLE:
                    r8 = (ra + i * PA % 8) % 8
                    at = stage * (BM * LA) + (ra + i * PA) * LA + chunk_at(r8, ca // 8, CA)
                else:
                    at = stage * (BM * LA) + a_dst + i * PA * LA
                src_at = a_src + k0 + a_step * i
                ok = (m0 + ra + i * PA < M) & (k0 + ca < K)
                last = (k0 + ca, K)            # the row's end, for the unaligned path
            else:                              # b[k0 + rb + i PB, n0 + cb ...]
                dst, src = sb, b
                if SWIZZLE:
                    r8 = (rb + i * PB % 8) % 8
                    at = stage * (BK * LB) + (rb + i * PB) * LB + chunk_at(r8, cb // 8, CB)
                else:
                    at = stage * (BK * LB) + b_dst + i * PB * LB
                src_at = b_src + k0n + b_step * i
                ok = (k0 + rb + i * PB < K) & (n0 + cb < N)
                last = (n0 + cb, N)
            if not check:
                tk.cp_async(dst, at, src, src_at, 16)
            elif ALIGNED:
                tk.cp_async(dst, at, src, tk.where(ok, src_at, 0), 16, tk.where(ok, 16, 0))
            else:
                for e in range(8):
                    inb = ok & (last[0] + e < last[1])
                    dst[at + e] = tk.cond(inb, lambda s=src_at, e=e: src[s + e], 0.0)

        work = [("a", i) for i in range(NA)] + [("b", i) for i in range(NB)]
        KS = BK // 16                          # mma k-steps per tile
        # One tile's chunks spread over the KS k-steps (part kk issued in step kk).
        parts = [work[len(work) * kk // KS:len(work) * (kk + 1) // KS] for kk in range(KS)]
        MT, NT = WM // 16, WN // 8             # mma tiles per warp
        acc = [[[tk.var(0.0) for _ in range(4)] for _ in range(NT)] for _ in range(MT)]
        nk = (K + BK - 1) // BK
        for s in range(STAGES - 1):            # prologue: tiles 0 .. STAGES-2 in flight
            with tk.if_(s < nk):
                for w in work:
                    load_chunk(w, s, s * BK, s * BK * N)
            tk.cp_async_commit()
        # ldmatrix rows: lane l gives row l % 8 of matrix l // 8, for a (x4) rows 0-7 /
        # 8-15 x columns 0-7 / 8-15 of a 16 x 16 tile, for b (x4.trans) k rows 0-7 / 8-15
        # of two 8-column tiles. Every row a lane reads is row (mod 8) of its 8-row block:
        mat, row = lane // 8, lane % 8
        a_row = (wm0 + row + 8 * (mat % 2)) * LA     # + 16 mt rows
        b_row = (row + 8 * (mat % 2)) * LB           # + kk rows
        a_lane = a_row + 8 * (mat // 2)              # padded: the lane's element offsets
        b_lane = b_row + wn0 + 8 * (mat // 2)

        def fragments(stage, kk):
            """The a and b fragments of the k-step at column kk of ``stage``'s tile."""
            if SWIZZLE:
                ac = stage * (BM * LA) + a_row + chunk_at(row, kk // 8 + mat // 2, CA)
                bcs = [stage * (BK * LB) + b_row + kk * LB
                       + chunk_at(row, (wn0 + nt * 8) // 8 + mat // 2, CB)
                       for nt in range(0, NT, 2)]
            else:
                ac = a_lane + stage * (BM * LA) + kk
                bcs = [b_lane + stage * (BK * LB) + kk * LB + nt * 8 for nt in range(0, NT, 2)]
            af = [tk.ldmatrix(sa, ac + mt * 16 * LA) for mt in range(MT)]
            bf = []
            for bc in bcs:
                regs = tk.ldmatrix(sb, bc, 4, trans=True)
                bf += [(regs[0], regs[1]), (regs[2], regs[3])]
            return af, bf

        # The fragments of a k-step are read from shared memory one step ahead of the
        # mma that use them; step 0 of tile kt + 1 during step KS - 1 of tile kt, so they
        # cross the loop's back edge in variables.
        carried = Carried(MT, NT)
        keep = carried.keep

        tk.cp_async_wait(STAGES - 2)           # tile 0 has landed
        tk.syncthreads()
        keep(fragments(0, 0))
        stage = tk.var(0, u32)                 # tile kt's stage: kt % STAGES
        inside = (m0 + BM <= M) & (n0 + BN <= N)   # the block's tiles need no checks in M, N
        for kt in tk.range(nk):
            nxt = kt + STAGES - 1              # refills the stage that tile kt - 1 used
            refill = tk.where(stage == 0, STAGES - 1, stage - 1)
            after = tk.where(stage == STAGES - 1, 0, stage + 1)
            k0 = nxt * BK
            k0n = k0 * N
            cur0 = carried.current()

            def steps(check, cur=cur0, k0=k0, k0n=k0n, nxt=nxt, refill=refill, after=after):
                """The KS k-steps of tile kt, with part kk of tile nxt's copies in step kk:
                straight-line code (no branch), so that the compiler interleaves the copies
                and ldmatrix with the mma; ``check``: bounds-checked copies (edge tiles)."""
                for kk in range(KS):
                    if kk < KS - 1:            # read ahead first, then start copies
                        nfr = fragments(stage, (kk + 1) * 16)
                    if check:
                        with tk.if_(nxt < nk):
                            for w in parts[kk]:
                                load_chunk(w, refill, k0, k0n)
                    else:
                        for w in parts[kk]:
                            load_chunk(w, refill, k0, k0n, check=False)
                    if kk == KS - 1:
                        tk.cp_async_commit()
                        tk.cp_async_wait(STAGES - 2)   # tile kt + 1 has landed, and every
                        tk.syncthreads()               # warp is done with tile kt - 1
                        nfr = fragments(after, 0)
                        keep(nfr)              # (step 0 read the variables before this)
                    for mt in range(MT):       # serpentine: b fragments reused at the turn
                        for nt in (range(NT) if mt % 2 == 0 else range(NT - 1, -1, -1)):
                            d = tk.mma(cur[0][mt], cur[1][nt], acc[mt][nt], dtype=T)
                            for v, x in zip(acc[mt][nt], d):
                                v.set(x)
                    cur = nfr

            if ALIGNED:                        # the whole tile nxt inside a and b (so also
                with tk.if_(inside & (k0 + BK <= K)):  # nxt < nk): a block-uniform branch
                    steps(False)
                with tk.else_():
                    steps(True)
            else:
                steps(True)
            stage.set(after)
        g, t4 = lane // 4, lane % 4
        for mt in range(MT):
            for nt in range(NT):
                for h in range(2):             # accumulators 2h, 2h + 1: row g + 8h,
                    r = m0 + wm0 + mt * 16 + g + 8 * h     # columns 2 t4, 2 t4 + 1
                    col = n0 + wn0 + nt * 8 + 2 * t4
                    x0, x1 = acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]
                    if ALIGNED:                # N even: both columns in, or both out
                        with tk.if_((r < M) & (col < N)):
                            c.vstore(r * N + col, (x0, x1))
                    else:
                        for e, x in enumerate((x0, x1)):
                            with tk.if_((r < M) & (col + e < N)):
                                c[r * N + col + e] = x

    return gemm_mma


#: K elements per stage of the TMA-fed kernel: one 128-byte swizzled row of 16-bit elements.
TMA_BK = 64
#: Registers per thread (producer, consumers) of the TMA-fed kernel by consumer
#: warpgroups (``setmaxnreg``): the register file is split between the four schedulers,
#: so a block of 3 warpgroups gets 168 a thread at entry; the producer needs few.
#: Keyed by (consumer warpgroups, blocks per multiprocessor).
TMA_REGISTERS = {(2, 1): (40, 232), (1, 2): (40, 216)}


def tma_registers(warps: int, ctas: int, regs: int = 0) -> tuple[int, int] | None:
    """The (producer, consumer) registers per thread that ``setmaxnreg`` gives a block of
    ``warps`` consumer warps and one producer warpgroup, ``ctas`` blocks per
    multiprocessor: ``regs`` = 0 takes TMA_REGISTERS (None: no split); else the consumers
    get ``regs`` and the producer what the block's registers at launch leave, at most 40
    (multiples of 8; ValueError when less than 24 are left), or None when the launch
    bounds give every thread ``regs`` already (``setmaxnreg.inc`` may only raise the
    count).

    The pool ``setmaxnreg.inc`` draws from holds only what ``setmaxnreg.dec`` released: a
    block starts with :func:`launch_registers` a thread (not the multiprocessor's 64 Ki
    shared out), so the consumers' raise must not exceed the producer's release, or
    ``setmaxnreg.inc`` waits forever (session 11's hang of 96 x 64 warps: 240 for the
    consumers and 32 for the producer need 1024 registers more than 384 threads x 168)."""
    threads = 32 * (warps + 4)
    start = launch_registers(threads, ctas)
    if not regs:
        split = TMA_REGISTERS.get((warps // 4, ctas))
    elif regs <= start:
        return None
    else:
        left = (threads * start - warps * 32 * regs) // 128 // 8 * 8
        if regs % 8 or not 24 <= regs <= 256 or left < 24:
            raise ValueError(f"REGS must be a multiple of 8 from 24 to 256 that leaves the "
                             f"producer warpgroup 24 registers a thread ({warps} consumer "
                             f"warps, {ctas} blocks per multiprocessor: {start} a thread "
                             f"at launch), got {regs}")
        split = (min(left, 40), regs)
    if split is not None:                      # what the raise takes, the release gives
        assert 128 * (start - split[0]) >= warps * 32 * (split[1] - start), split
    return split


def launch_registers(threads: int, ctas: int) -> int:
    """Registers per thread a kernel of ``threads`` threads a block and launch bounds
    (``threads``, ``ctas``) has at launch: 64 Ki shared by ``ctas`` blocks, in whole
    multiples of 8 (ptxas's cap; the register file is allocated in warps of 256)."""
    return 65536 // (ctas * threads) // 8 * 8


@functools.cache
def gemm_tma_kernel(dtype: str) -> tk.Kernel:
    """The TMA-fed GEMM kernel (Hopper, sm_90a) for ``dtype`` (``"float16"`` or
    ``"bfloat16"``) inputs: warp-specialised, the mma.sync warps issue only ldmatrix and
    mma."""
    T = tk.dt.float16 if dtype == "float16" else tk.dt.bfloat16
    u64 = tk.dt.uint64
    BK = TMA_BK

    @tk.jit
    def gemm_mma_tma(c: tk.DevicePointer[f32], ta: tk.DevicePointer[u64],
                     tb: tk.DevicePointer[u64], M: i32, N: i32, K: i32,
                     BM: tk.Constexpr[int] = 128, BN: tk.Constexpr[int] = 256,
                     WM: tk.Constexpr[int] = 64, WN: tk.Constexpr[int] = 64,
                     STAGES: tk.Constexpr[int] = 4, GROUP_M: tk.Constexpr[int] = 8,
                     PAIRS: tk.Constexpr[bool] = True, CTAS: tk.Constexpr[int] = 1,
                     REGS: tk.Constexpr[int] = 0, ROWS: tk.Constexpr[bool] = False,
                     CLUSTER: tk.Constexpr[int] = 1):
        """``c[M, N] = a[M, K] @ b[K, N]``, persistent blocks of one producer warpgroup
        and (BM / WM) (BN / WN) consumer warps (4 or 8), each block taking tiles
        blockIdx.x, + gridDim.x, ... The producer's thread 0 copies, per k step of 64, the
        BM x 64 tile of a (``ta``: box BM x 64) and the 64 x BN tile of b (``tb``: box
        64 x 64, BN / 64 copies) into one of STAGES shared stages by TMA, 128-byte
        swizzled; mbarriers hand the stages over (``full``: copy landed; ``empty``: every
        consumer warp done reading). The consumers read fragments with ldmatrix at
        swizzled addresses (computed once per lane) one k-step ahead of the mma.
        PAIRS: N even (the epilogue stores two float32 at a time). CTAS: blocks per
        multiprocessor the launch bounds and the setmaxnreg split are made for. REGS:
        registers per consumer thread (0: TMA_REGISTERS' split; else the producer gets
        what is left, :func:`tma_registers`). ROWS: fragments read ahead one mma row at
        a time (the A fragment of row mt for the next k-step as soon as row mt's mma are
        issued, the B fragments after the last row: room for warp tiles of 96 x 64),
        else a whole k-step ahead. CLUSTER: blocks per thread-block cluster (1 or 2): the blocks of
        a cluster take vertically adjacent tiles (a cluster tile of CLUSTER BM x BN), each
        copies its own a tile and BN / 64 / CLUSTER of the b boxes they share, multicast
        to every block of the cluster (L2 sends each b box once per cluster); each
        consumer warp releases a stage on every block's ``empty`` barrier."""
        WARPS = (BM // WM) * (BN // WN)        # consumer warps: WARPS / 4 warpgroups
        tk.launch_bounds(32 * (WARPS + 4), CTAS)
        if CLUSTER > 1:
            tk.cluster_dims(CLUSTER)
        A_TILE, B_TILE = BM * BK, BK * BN      # elements per stage
        sa = tk.dynamic_shared(T)              # STAGES x A_TILE, 1024-byte aligned
        sb = tk.dynamic_shared(T, STAGES * A_TILE * 2)
        full = tk.shared_array(u64, (STAGES,))
        empty = tk.shared_array(u64, (STAGES,))
        tid = tk.thread_idx().x
        lane, warp = tid % 32, tid // 32
        # Clusters walk cluster tiles (CLUSTER BM x BN); block 'rank' takes rows rank BM.
        first, step = tk.block_idx(signed=True).x, tk.grid_dim(signed=True).x
        rank = 0
        if CLUSTER > 1:
            first, step, rank = first // CLUSTER, step // CLUSTER, tk.cluster_ctarank()
        ntm, ntn = (M + CLUSTER * BM - 1) // (CLUSTER * BM), (N + BN - 1) // BN
        ntiles, nk = ntm * ntn, (K + BK - 1) // BK

        def tile_origin(tile):
            """The tile's first row and column: GROUP_M tile rows down, then right."""
            width = GROUP_M * ntn
            group = tile // width
            top = group * GROUP_M
            rows = tk.min(ntm - top, GROUP_M)
            within = tile - group * width
            tm = top + within % rows
            if CLUSTER > 1:
                tm = tm * CLUSTER + rank
            return tm * BM, (within // rows) * BN

        with tk.if_(tid == 0):
            for s in range(STAGES):
                tk.mbarrier_init(full, s, 1)
                tk.mbarrier_init(empty, s, WARPS * CLUSTER)
            if CLUSTER > 1:
                tk.fence_mbarrier_init()
        if CLUSTER > 1:
            tk.cluster_sync()                  # the peers' barriers are ready
        else:
            tk.syncthreads()
        BOXES = BN // 64 // CLUSTER            # b boxes (64 x 64) this block copies

        regs = tma_registers(WARPS, CTAS, REGS)
        with tk.if_(warp < 4):                 # the producer warpgroup: thread 0 copies
            if regs:
                tk.setmaxnreg_dec(regs[0])
            with tk.if_(tid == 0):
                stage, phase = tk.var(0), tk.var(0)
                for tile in tk.range(first, ntiles, step):
                    m0, n0 = tile_origin(tile)
                    for kt in tk.range(nk):
                        tk.mbarrier_wait(empty, stage, phase ^ 1)  # round 0 passes at once
                        tk.mbarrier_expect_tx(full, stage, (A_TILE + B_TILE) * 2)
                        tk.tma_load(sa, stage * A_TILE, ta, kt * BK, m0, full, stage)
                        for j in range(BOXES):
                            if CLUSTER > 1:    # my share of b, to every block
                                jj = rank * BOXES + j
                                tk.tma_load(sb, stage * B_TILE + jj * (BK * 64), tb,
                                            n0 + 64 * jj, kt * BK, full, stage,
                                            multicast=(1 << CLUSTER) - 1)
                            else:
                                tk.tma_load(sb, stage * B_TILE + j * (BK * 64), tb,
                                            n0 + 64 * j, kt * BK, full, stage)
                        stage.set(stage + 1)
                        with tk.if_(stage == STAGES):
                            stage.set(0)
                            phase.set(phase ^ 1)
        with tk.else_():                       # the consumer warps
            if regs:
                tk.setmaxnreg_inc(regs[1])
            warp = warp - 4
            wm0 = (warp // (BN // WN)) * WM    # the warp's tile inside the block tile
            wn0 = (warp % (BN // WN)) * WN
            MT, NT, KS = WM // 16, WN // 8, BK // 16
            # ldmatrix rows (lane l: row l % 8 of matrix l // 8). a stage of a: BM rows of
            # 64 elements, element (r, k) at r 64 + ((k // 8) ^ (r % 8)) 8 + k % 8; of b:
            # BN / 64 boxes of 64 k rows x 64 columns, (k, n) at (n // 64) 4096 + k 64 +
            # ((n % 64 // 8) ^ (k % 8)) 8 + n % 8. Every row a lane gives is row (mod 8)
            # of an 8-row block, so the XOR key is the lane's row: per lane, one offset
            # per k-step (a) and per pair of 8-column tiles (b), invariant in the loop.
            mat, row = lane // 8, lane % 8
            a_base = (wm0 + row + 8 * (mat % 2)) * BK
            a_off = [a_base + ((ks * 2 + mat // 2) ^ row) * 8 for ks in range(KS)]
            b_base = (row + 8 * (mat % 2)) * 64
            b_off = []
            for nt in range(0, NT, 2):
                nb = wn0 + nt * 8 + 8 * (mat // 2)
                b_off.append(b_base + nb // 64 * (BK * 64) + ((nb // 8 % 8) ^ row) * 8)

            def fragments(stage, ks):
                """The a and b fragments of k-step ks of ``stage``."""
                sa0, sb0 = stage * A_TILE, stage * B_TILE
                af = [tk.ldmatrix(sa, sa0 + a_off[ks] + mt * 16 * BK) for mt in range(MT)]
                bf = []
                for off in b_off:
                    regs = tk.ldmatrix(sb, sb0 + off + ks * 16 * 64, 4, trans=True)
                    bf += [(regs[0], regs[1]), (regs[2], regs[3])]
                return af, bf

            acc = [[[tk.var(0.0) for _ in range(4)] for _ in range(NT)] for _ in range(MT)]
            carried = Carried(MT, NT)
            keep = carried.keep

            # ROWS: the offsets of k-step ks and of pair j of 8-column tiles differ from
            # those of step 0 / pair 4 (j // 4) only in the XOR key's bits 1-2 (chunk
            # 2 ks + mat // 2 = (2 ks) ^ (mat // 2); for WN a multiple of 64, chunk
            # 2 (j % 4) + mat // 2 of a 64-column box likewise): one offset each, XORed
            # with 16 ks / 16 (j % 4), frees the registers of the others (the key's bits
            # lie below 64 elements, so the stage's base, a multiple of 64, may be added
            # first).
            b_xor = WN % 64 == 0

            def a_row_at(stage, ks, mt):
                """The ldmatrix address of a's row mt of k-step ks of ``stage`` (ROWS)."""
                return ((stage * A_TILE + a_off[0]) ^ (16 * ks)) + mt * 16 * BK

            def b_fragments(stage, ks):
                """The b fragments of k-step ks of ``stage``."""
                bf = []
                for j, off in enumerate(b_off):
                    if b_xor:
                        at = ((stage * B_TILE + b_off[j - j % 4]) ^ (16 * (j % 4))) + ks * 16 * 64
                    else:
                        at = stage * B_TILE + off + ks * 16 * 64
                    regs = tk.ldmatrix(sb, at, 4, trans=True)
                    bf += [(regs[0], regs[1]), (regs[2], regs[3])]
                return bf

            def release(s):
                """Stage s is read here: lane 0 arrives on its ``empty`` barrier in every
                block of the cluster (their producers multicast into it)."""
                tk.syncwarp()
                with tk.if_(lane == 0):
                    if CLUSTER > 1:
                        for r in range(CLUSTER):
                            tk.mbarrier_arrive(empty, s, cta=r)
                    else:
                        tk.mbarrier_arrive(empty, s)

            def mma_row(cur, mt):
                """The mma of row mt (serpentine: b fragments reused at the turn)."""
                for nt in (range(NT) if mt % 2 == 0 else range(NT - 1, -1, -1)):
                    d = tk.mma(cur[0][mt], cur[1][nt], acc[mt][nt], dtype=T)
                    for v, x in zip(acc[mt][nt], d):
                        v.set(x)

            def k_tile_rows(more, kt):
                """One k tile, fragments read ahead row by row (ROWS)."""
                cur = carried.current()
                nxt, nph = stage, phase
                for ks in range(KS):
                    at, nks = stage, ks + 1
                    if ks == KS - 1:           # step 0 of the next stage is read here
                        wrap = stage == STAGES - 1
                        nxt = tk.where(wrap, 0, stage + 1)
                        nph = tk.where(wrap, phase ^ 1, phase)
                        with tk.if_((kt + 1 < nk) | more):
                            tk.mbarrier_wait(full, nxt, nph)
                        at, nks = nxt, 0
                    na = []
                    for mt in range(MT):
                        mma_row(cur, mt)
                        na.append(tk.ldmatrix(sa, a_row_at(at, nks, mt)))
                    if ks == KS - 1:           # every fragment read from this stage has
                        release(stage)         # gone through an mma: release it (an
                                               # ldmatrix still in flight must not race
                                               # the next TMA write)
                    cur = (na, b_fragments(at, nks))
                keep(cur)
                stage.set(nxt)
                phase.set(nph)

            def k_tile_steps(more, kt):
                """One k tile, fragments read a whole k-step ahead."""
                cur = carried.current()
                for ks in range(KS):
                    if ks < KS - 1:            # read ahead first
                        nfr = fragments(stage, ks + 1)
                    if ks == KS - 2:           # the warp's last reads of this stage
                        release(stage)
                    for mt in range(MT):
                        mma_row(cur, mt)
                    if ks == KS - 1:
                        nfr = turn(more, kt)
                    cur = nfr

            def turn(more, kt):
                """The next stage (next k tile or tile): wait for it, read its first
                k-step's fragments into the carried variables, move stage and phase."""
                wrap = stage == STAGES - 1
                nxt = tk.where(wrap, 0, stage + 1)
                nph = tk.where(wrap, phase ^ 1, phase)
                with tk.if_((kt + 1 < nk) | more):
                    tk.mbarrier_wait(full, nxt, nph)
                nfr = fragments(nxt, 0)
                keep(nfr)
                stage.set(nxt)
                phase.set(nph)
                return nfr

            stage, phase = tk.var(0), tk.var(0)
            tk.mbarrier_wait(full, 0, 0)       # every block has a tile (grid <= tiles)
            keep(fragments(0, 0))
            g, t4 = lane // 4, lane % 4
            for tile in tk.range(first, ntiles, step):
                m0, n0 = tile_origin(tile)
                more = tile + step < ntiles
                for kt in tk.range(nk):
                    if ROWS:
                        k_tile_rows(more, kt)
                    else:
                        k_tile_steps(more, kt)
                for mt in range(MT):           # the tile's fragments -> c, then zeros
                    for nt in range(NT):
                        for h in range(2):     # accumulators 2h, 2h + 1: row g + 8h,
                            r = m0 + wm0 + mt * 16 + g + 8 * h     # columns 2 t4, + 1
                            col = n0 + wn0 + nt * 8 + 2 * t4
                            x0, x1 = acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]
                            if PAIRS:
                                with tk.if_((r < M) & (col < N)):
                                    c.vstore(r * N + col, (x0, x1))
                            else:
                                for e, x in enumerate((x0, x1)):
                                    with tk.if_((r < M) & (col + e < N)):
                                        c[r * N + col + e] = x
                        for v in acc[mt][nt]:
                            v.set(0.0)
        if CLUSTER > 1:
            tk.cluster_sync()                  # no block leaves while peers arrive on it

    return gemm_mma_tma


def tma_shared_bytes(BM: int = 128, BN: int = 256, STAGES: int = 4) -> int:
    """Dynamic shared memory of one block of the TMA-fed kernel, bytes: STAGES tiles of a
    (BM x 64) and b (64 x BN), 16-bit."""
    return STAGES * (BM + BN) * TMA_BK * 2


def sm_count() -> int:
    """Multiprocessors of CUDA device 0 (cuda-python's driver API)."""
    from cuda.bindings import driver as cu

    cu.cuInit(0)
    _, dev = cu.cuDeviceGet(0)
    attr = cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
    return int(cu.cuDeviceGetAttribute(attr, dev)[1])


def prepare_tma(c: object, a: object, b: object, M: int, N: int, K: int,
                dtype: str = "float16", BM: int = 128, BN: int = 256, WM: int = 64,
                WN: int = 64, STAGES: int = 4, GROUP_M: int = 8, blocks: int | None = None,
                ctas: int = 1, regs: int = 0, rows: bool = False, cluster: int = 1,
                **launch: object) -> Callable[[], None]:
    """Check the arguments and build the tensor maps of ``a`` and ``b`` once (copied to
    device memory once on the GPU); returns the launch of the TMA-fed kernel for
    ``c[M, N] = a[M, K] @ b[K, N]`` (2-D arrays: NumPy on the CPU target, GPU arrays on
    the GPU). ``blocks``: persistent blocks (default ``ctas`` per multiprocessor on the
    GPU, 3 on the CPU target); ``ctas``: blocks per multiprocessor the kernel's launch
    bounds and register split are made for (1, or 2 with 4 consumer warps: one block's
    epilogue then overlaps the other's main loop); ``regs``: registers per consumer
    thread (0: TMA_REGISTERS; 240 leaves the producer 24 and holds warp tiles of 96 x 64
    with ``rows``); ``rows``: fragments read ahead row by row (the kernel's ROWS);
    ``cluster``: blocks per thread-block cluster sharing b tiles by
    multicast (1 or 2; ``blocks`` is rounded down to a multiple)."""
    for name, ok, want in (
            ("K", K % 8 == 0 and K > 0, "a positive multiple of 8 (TMA: 16-byte rows)"),
            ("N", N % 8 == 0 and N > 0, "a positive multiple of 8 (TMA: 16-byte rows)"),
            ("M", M > 0, "positive"),
            ("BM", BM % WM == 0 and 16 <= BM <= 256, "a multiple of WM up to 256"),
            ("BN", BN % 64 == 0 and BN % WN == 0, "a multiple of 64 and of WN"),
            ("WM", WM % 16 == 0 and WM > 0, "a positive multiple of 16"),
            ("WN", WN % 16 == 0 and WN > 0, "a positive multiple of 16"),
            ("BM / WM x BN / WN", (BM // WM) * (BN // WN) in (4, 8),
             "4 or 8 consumer warps (whole warpgroups)"),
            ("STAGES", STAGES >= 2, ">= 2"),
            ("GROUP_M", GROUP_M >= 1, ">= 1"),
            ("ctas", ctas in (1, 2), "1 or 2"),
            ("cluster", cluster in (1, 2) and BN // 64 % cluster == 0,
             "1 or 2 (dividing BN / 64)")):
        if not ok:
            given = dict(K=K, N=N, M=M, BM=BM, BN=BN, WM=WM, WN=WN, STAGES=STAGES,
                         GROUP_M=GROUP_M, ctas=ctas,
                         cluster=cluster).get(name, (BM // WM) * (BN // WN))
            raise ValueError(f"{name} must be {want}, got {given!r}")
    tma_registers((BM // WM) * (BN // WN), ctas, regs)   # ValueError for a bad regs
    if M * N >= 2**31:
        raise ValueError(f"M x N must be below 2**31 (int32 indices), got {M * N}")
    on_cpu = isinstance(a, np.ndarray) or launch.get("target") == "cpu"
    if isinstance(a, np.ndarray):              # the maps describe host memory: CPU only
        if launch.setdefault("target", "cpu") != "cpu":
            raise ValueError(f"a, b: NumPy arrays run on the CPU target only (TMA maps of "
                             f"host memory), got target={launch['target']!r}; pass GPU "
                             f"arrays, or call gemm(), which copies them")
    ta = tk.tensor_map(a, (BM, TMA_BK), swizzle=128)
    tb = tk.tensor_map(b, (TMA_BK, 64), swizzle=128)
    if not on_cpu:
        from thork_core import DeviceArray

        ta, tb = DeviceArray.from_host(ta), DeviceArray.from_host(tb)
    tiles = -(-M // (BM * cluster)) * -(-N // BN) * cluster     # blocks' tiles
    if blocks is None:
        blocks = 3 if on_cpu else sm_count() * ctas
    blocks = max(min(blocks, tiles) // cluster * cluster, cluster)
    threads = ((BM // WM) * (BN // WN) + 4) * 32
    kernel = gemm_tma_kernel(dtype)[blocks, threads, tma_shared_bytes(BM, BN, STAGES)]
    args = (c, ta, tb, M, N, K, BM, BN, WM, WN, STAGES, GROUP_M, N % 2 == 0, ctas, regs,
            rows, cluster)
    return lambda: kernel(*args, **launch)


def shared_bytes(BM: int, BN: int, BK: int, STAGES: int, SWIZZLE: bool = False) -> int:
    """Dynamic shared memory of one block, bytes: STAGES tiles of a and b (16-bit), rows
    padded by PAD unless swizzled."""
    pad = 0 if SWIZZLE else PAD
    return STAGES * (BM * (BK + pad) + BK * (BN + pad)) * 2


def hopper_gpu(target: object = None) -> bool:
    """Whether ``target`` (None: the default target) is a GPU that runs sm_90a code."""
    from thork_core import gpu_arch, plugins

    if target == "cpu":
        return False
    found = [t for t in plugins().targets() if target is None or t.name == target]
    if not found or found[0].name != "gpu" or not found[0].available()[0]:
        return False
    return gpu_arch().startswith("sm_90")


def gemm(c: object, a: object, b: object, M: int, N: int, K: int, dtype: str = "float16",
         BM: int = 128, BN: int = 256, BK: int = 64, WM: int = 64, WN: int = 64,
         STAGES: int = 4, GROUP_M: int = 8, SWIZZLE: bool = True, feed: str = "auto",
         **launch: object) -> None:
    """Launch the kernel for ``c[M, N] = a[M, K] @ b[K, N]`` (NumPy or device arrays);
    ``launch`` goes to the launch (``target=``...). ``feed``: how the tiles reach shared
    memory — ``"cp.async"`` (every thread copies, :func:`gemm_kernel`), ``"tma"`` (a
    producer warpgroup, Hopper's TMA, persistent blocks: :func:`gemm_tma_kernel`, 2-D
    arrays, K and N multiples of 8; BK is 64 there, and NumPy arrays are copied to the GPU
    and back when the target is one), ``"auto"``: TMA on a Hopper GPU where the sizes
    allow, else cp.async. The default tile (128 x 256 x 64, 8 warps of 64 x 64, 4 stages:
    192 KiB of shared memory) is the fastest measured on an H200 (docs/benchmarks.md);
    small sizes on the CPU target run faster with smaller tiles. ``SWIZZLE`` (cp.async):
    XOR-swizzled shared rows (:func:`swizzle_key`), else rows padded by PAD."""
    if feed not in ("auto", "tma", "cp.async"):
        raise ValueError(f"feed must be 'auto', 'tma' or 'cp.async', got {feed!r}")
    if feed == "auto":
        fits = K % 8 == 0 and N % 8 == 0 and len(getattr(a, "shape", ())) == 2 \
            and BK == TMA_BK and BN % 64 == 0 and BM <= 256 and WN % 16 == 0 \
            and (BM // WM) * (BN // WN) in (4, 8)
        feed = "tma" if fits and hopper_gpu(launch.get("target")) else "cp.async"
    if feed == "tma":
        host = isinstance(a, np.ndarray) and launch.get("target", "gpu") != "cpu" \
            and hopper_gpu(launch.get("target"))
        if not host:
            prepare_tma(c, a, b, M, N, K, dtype, BM, BN, WM, WN, STAGES, max(GROUP_M, 1),
                        **launch)()
            return
        from thork_core import DeviceArray

        dc = DeviceArray.from_host(np.ascontiguousarray(c))
        da, db = DeviceArray.from_host(np.ascontiguousarray(a)), \
            DeviceArray.from_host(np.ascontiguousarray(b))
        prepare_tma(dc, da, db, M, N, K, dtype, BM, BN, WM, WN, STAGES, max(GROUP_M, 1),
                    **launch)()
        c[...] = dc.to_host().reshape(np.shape(c))  # type: ignore[index]
        return
    threads = (BM // WM) * (BN // WN) * 32
    if BM * BK % (8 * threads) or BK * BN % (8 * threads) or BK % 16 or WM % 16 \
            or WN % 16 or BM % WM or BN % WN or STAGES < 2:
        raise ValueError(f"tile {BM}x{BN}x{BK} / warp {WM}x{WN} / {STAGES} stages: the "
                         "16-byte chunks of a tile must spread evenly over the threads")
    if threads % (BK // 8) or threads % (BN // 8):
        raise ValueError(f"tile {BM}x{BN}x{BK} with {threads} threads: the threads must "
                         "cover whole rows of 16-byte chunks (BK / 8 and BN / 8 must divide "
                         "the thread count)")
    if BK < 32:
        raise ValueError(f"BK must be at least 32 (two mma k-steps of 16), got {BK}")
    if SWIZZLE and (BK & (BK - 1) or BN & (BN - 1) or BN < 32):
        raise ValueError(f"SWIZZLE: BK and BN must be powers of two, BN at least 32 (rows "
                         f"of 4, 8, 16... chunks), got BK={BK}, BN={BN}")
    aligned = K % 8 == 0 and N % 8 == 0
    grid = ((N + BN - 1) // BN, (M + BM - 1) // BM)
    gemm_kernel(dtype)[grid, threads, shared_bytes(BM, BN, BK, STAGES, SWIZZLE)](
        c, a, b, M, N, K, BM, BN, BK, WM, WN, STAGES, aligned, GROUP_M, SWIZZLE, **launch)


def check(M: int, N: int, K: int, dtype: str, rng: np.random.Generator,
          **tile: object) -> float:
    """Run once on fresh inputs; the worst error relative to the bound K 2^-22 sum|a b|."""
    import ml_dtypes  # noqa: F401  (NumPy's bfloat16)

    np_t = np.float16 if dtype == "float16" else np.dtype("bfloat16")
    a = rng.standard_normal((M, K)).astype(np_t)
    b = rng.standard_normal((K, N)).astype(np_t)
    c = np.full((M, N), np.nan, np.float32)
    gemm(c, a, b, M, N, K, dtype, **tile)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = a64 @ b64
    bound = K * 2.0**-22 * (np.abs(a64) @ np.abs(b64)) + 1e-30
    return float(np.max(np.abs(c - ref) / bound))


def main() -> None:
    rng = np.random.default_rng()
    small = dict(BM=32, BN=32, BK=32, WM=16, WN=16, STAGES=3)  # 4 warps: a quick CPU run
    # TMA-fed: 4 consumer warps, 2 x 2 tiles on 3 persistent blocks, 3 k tiles (one short)
    small_tma = dict(BM=64, BN=64, WM=32, WN=32, STAGES=3, feed="tma")
    where = "gpu" if hopper_gpu() else "cpu"
    for M, N, K, tile in ((45, 40, 72, small), (37, 29, 45, small),  # aligned / unaligned
                          (100, 72, 136, small_tma)):
        for dtype in ("float16", "bfloat16"):
            worst = check(M, N, K, dtype, rng, **tile)
            status = "ok" if worst <= 1.0 else "MISMATCH"
            feed = tile.get("feed", "cp.async")
            print(f"{dtype} {M}x{N}x{K} ({feed}, {where if feed == 'tma' else 'default'}"
                  f" target): error / bound = {worst:.3f} {status}")
            assert worst <= 1.0
    try:
        cubin = gemm_kernel("float16").specialize(STAGES=3, ALIGNED=True).artifact("sm_90")
    except tk.PluginError as exc:  # no CUDA compiler plugin installed
        print(f"sm_90 cubin: not built ({exc})")
    else:
        print(f"sm_90 cubin: {len(cubin.data)} bytes")


if __name__ == "__main__":
    main()
