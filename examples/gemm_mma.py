"""A tiled GEMM on the tensor cores in plain Thork: ``c = a @ b`` with float16 or bfloat16
inputs and float32 accumulation (``tk.mma``), shared-memory tiles filled by ``tk.cp_async``
(a multi-stage pipeline: the next tiles load while the current one is multiplied) and read
into fragments by ``tk.ldmatrix``. Checks itself against NumPy at sizes that are not multiples of
the tile (edge tiles), on the CPU target when there is no GPU.

    python examples/gemm_mma.py

Rows of ``a`` and ``b`` must be 16-byte aligned for ``cp.async`` (``K`` and ``N`` multiples
of 8); other sizes take a path that loads the tiles with ordinary bounds-checked loads.
"""

from __future__ import annotations

import functools

import numpy as np
import thork as tk

f32, i32, u32 = tk.dt.float32, tk.dt.int32, tk.dt.uint32

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
                 GROUP_M: tk.Constexpr[int] = 8, SWIZZLE: tk.Constexpr[bool] = False):
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
        a_var = [[tk.var(0, u32) for _ in range(4)] for _ in range(MT)]
        b_var = [[tk.var(0, u32) for _ in range(2)] for _ in range(NT)]

        def keep(fr):
            for vs, xs in zip(a_var + b_var, fr[0] + fr[1]):
                for v, x in zip(vs, xs):
                    v.set(x)

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
            cur0 = ([tuple(v) for v in a_var], [tuple(v) for v in b_var])

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


def shared_bytes(BM: int, BN: int, BK: int, STAGES: int, SWIZZLE: bool = False) -> int:
    """Dynamic shared memory of one block, bytes: STAGES tiles of a and b (16-bit), rows
    padded by PAD unless swizzled."""
    pad = 0 if SWIZZLE else PAD
    return STAGES * (BM * (BK + pad) + BK * (BN + pad)) * 2


def gemm(c: object, a: object, b: object, M: int, N: int, K: int, dtype: str = "float16",
         BM: int = 128, BN: int = 256, BK: int = 64, WM: int = 64, WN: int = 64,
         STAGES: int = 4, GROUP_M: int = 8, SWIZZLE: bool = False,
         **launch: object) -> None:
    """Launch the kernel for ``c[M, N] = a[M, K] @ b[K, N]`` (NumPy or device arrays);
    ``launch`` goes to the launch (``target=``...). The default tile (128 x 256 x 64, 8 warps
    of 64 x 64, 4 stages: 204 KiB of shared memory) is among the fastest measured on an
    H200 (docs/benchmarks.md); small sizes on the CPU target run faster with smaller tiles.
    ``SWIZZLE``: XOR-swizzled shared rows instead of padded ones (:func:`swizzle_key`)."""
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


def check(M: int, N: int, K: int, dtype: str, rng: np.random.Generator, **tile: int) -> float:
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
    for M, N, K in ((45, 40, 72), (37, 29, 45)):         # aligned / unaligned rows
        for dtype in ("float16", "bfloat16"):
            worst = check(M, N, K, dtype, rng, **small)
            status = "ok" if worst <= 1.0 else "MISMATCH"
            print(f"{dtype} {M}x{N}x{K}: error / bound = {worst:.3f} {status}")
            assert worst <= 1.0
    try:
        cubin = gemm_kernel("float16").specialize(STAGES=3, ALIGNED=True).artifact("sm_90")
    except tk.PluginError as exc:  # no CUDA compiler plugin installed
        print(f"sm_90 cubin: not built ({exc})")
    else:
        print(f"sm_90 cubin: {len(cubin.data)} bytes")


if __name__ == "__main__":
    main()
