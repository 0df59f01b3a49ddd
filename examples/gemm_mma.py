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

f32, i32 = tk.dt.float32, tk.dt.int32

#: Skew (elements) added to each shared row so that the 8 rows one ldmatrix reads fall in
#: different banks: 16 bytes, keeping rows 16-byte aligned for cp.async.
PAD = 8


@functools.cache
def gemm_kernel(dtype: str) -> tk.Kernel:
    """The GEMM kernel for ``dtype`` (``"float16"`` or ``"bfloat16"``) inputs."""
    T = tk.dt.float16 if dtype == "float16" else tk.dt.bfloat16

    @tk.jit
    def gemm_mma(c: tk.DevicePointer[f32], a: tk.DevicePointer[T], b: tk.DevicePointer[T],
                 M: i32, N: i32, K: i32, BM: tk.Constexpr[int] = 128,
                 BN: tk.Constexpr[int] = 128, BK: tk.Constexpr[int] = 32,
                 WM: tk.Constexpr[int] = 64, WN: tk.Constexpr[int] = 64,
                 STAGES: tk.Constexpr[int] = 3, ALIGNED: tk.Constexpr[bool] = True):
        """``c[M, N] = a[M, K] @ b[K, N]``: a BM x BN tile per block of
        (BM / WM) * (BN / WN) warps, each warp a WM x WN tile of 16 x 8 mma tiles; STAGES
        tiles of a and b in flight (dynamic shared memory, :func:`shared_bytes`)."""
        LA, LB = BK + PAD, BN + PAD
        # STAGES x BM x LA elements of a, then STAGES x BK x LB of b (flat, row-major).
        sa = tk.dynamic_shared(T)
        sb = tk.dynamic_shared(T, STAGES * BM * LA * 2)
        nthreads = (BM // WM) * (BN // WN) * 32
        tid = tk.thread_idx().x
        lane, warp = tid % 32, tid // 32
        wm0 = (warp // (BN // WN)) * WM        # the warp's tile inside the block tile
        wn0 = (warp % (BN // WN)) * WN
        m0 = tk.block_idx().y * BM
        n0 = tk.block_idx().x * BN

        def load_part(dst, src, rows, cols, ld, stage, r0, c0, R, C):
            """Start copying src[r0:r0+rows, c0:c0+cols] (src is R x C, row-major) into
            ``stage`` of dst (rows of ``ld`` elements): chunks of 8 elements (16 bytes),
            zeros past the matrix's edges."""
            for i in range(rows * cols // 8 // nthreads):
                chunk = tid + i * nthreads
                r, col = chunk // (cols // 8), (chunk % (cols // 8)) * 8
                at = (stage * rows + r) * ld + col
                src_at = (r0 + r) * C + c0 + col
                if ALIGNED:
                    ok = (r0 + r < R) & (c0 + col < C)
                    tk.cp_async(dst, at, src, tk.where(ok, src_at, 0), 16, tk.where(ok, 16, 0))
                else:
                    for e in range(8):
                        inb = (r0 + r < R) & (c0 + col + e < C)
                        dst[at + e] = tk.cond(inb, lambda s=src_at, e=e: src[s + e], 0.0)

        def load_tile(stage, k0):
            """Tile k0 of a (BM x BK at row m0) and of b (BK x BN at column n0)."""
            load_part(sa, a, BM, BK, LA, stage, m0, k0, M, K)
            load_part(sb, b, BK, BN, LB, stage, k0, n0, K, N)

        MT, NT = WM // 16, WN // 8             # mma tiles per warp
        acc = [[[tk.var(0.0) for _ in range(4)] for _ in range(NT)] for _ in range(MT)]
        nk = (K + BK - 1) // BK
        for s in range(STAGES - 1):            # prologue: tiles 0 .. STAGES-2 in flight
            with tk.if_(s < nk):
                load_tile(s, s * BK)
            tk.cp_async_commit()
        # ldmatrix row addresses: lane l gives row l % 8 of matrix l // 8.
        mat, row = lane // 8, lane % 8
        for kt in tk.range(nk):
            tk.cp_async_wait(STAGES - 2)       # this thread's copies of tile kt are done
            tk.syncthreads()                   # ... every thread's; and all are done with
            nxt = kt + STAGES - 1              # tile kt-1, whose stage is refilled now
            with tk.if_(nxt < nk):
                load_tile(nxt % STAGES, nxt * BK)
            tk.cp_async_commit()
            stage = kt % STAGES
            for kk in range(0, BK, 16):
                afrag = []
                for mt in range(MT):           # x4: rows 0-7/8-15 x cols 0-7/8-15
                    r = wm0 + mt * 16 + row + 8 * (mat % 2)
                    afrag.append(tk.ldmatrix(sa, (stage * BM + r) * LA + kk + 8 * (mat // 2)))
                bfrag = []
                for nt in range(0, NT, 2):     # x4.trans: two 8-column tiles, k 0-7/8-15
                    kr = kk + row + 8 * (mat % 2)
                    regs = tk.ldmatrix(sb, (stage * BK + kr) * LB + wn0 + nt * 8
                                       + 8 * (mat // 2), 4, trans=True)
                    bfrag += [(regs[0], regs[1]), (regs[2], regs[3])]
                for mt in range(MT):
                    for nt in range(NT):
                        d = tk.mma(afrag[mt], bfrag[nt], acc[mt][nt], dtype=T)
                        for v, x in zip(acc[mt][nt], d):
                            v.set(x)
        g, t4 = lane // 4, lane % 4
        for mt in range(MT):
            for nt in range(NT):
                for i in range(4):             # accumulator i: row g (+8), column 2 t4 (+1)
                    r = m0 + wm0 + mt * 16 + g + 8 * (i // 2)
                    col = n0 + wn0 + nt * 8 + 2 * t4 + i % 2
                    with tk.if_((r < M) & (col < N)):
                        c[r * N + col] = acc[mt][nt][i]

    return gemm_mma


def shared_bytes(BM: int, BN: int, BK: int, STAGES: int) -> int:
    """Dynamic shared memory of one block: STAGES tiles of a and b, rows skewed by PAD."""
    return STAGES * (BM * (BK + PAD) + BK * (BN + PAD)) * 2


def gemm(c: object, a: object, b: object, M: int, N: int, K: int, dtype: str = "float16",
         BM: int = 128, BN: int = 128, BK: int = 32, WM: int = 64, WN: int = 64,
         STAGES: int = 3, **launch: object) -> None:
    """Launch the kernel for ``c[M, N] = a[M, K] @ b[K, N]`` (NumPy or device arrays);
    ``launch`` goes to the launch (``target=``...)."""
    threads = (BM // WM) * (BN // WN) * 32
    if BM * BK % (8 * threads) or BK * BN % (8 * threads) or BK % 16 or WM % 16 \
            or WN % 16 or STAGES < 2:
        raise ValueError(f"tile {BM}x{BN}x{BK} / warp {WM}x{WN} / {STAGES} stages: the "
                         "16-byte chunks of a tile must spread evenly over the threads")
    aligned = K % 8 == 0 and N % 8 == 0
    grid = ((N + BN - 1) // BN, (M + BM - 1) // BM)
    gemm_kernel(dtype)[grid, threads, shared_bytes(BM, BN, BK, STAGES)](
        c, a, b, M, N, K, BM, BN, BK, WM, WN, STAGES, aligned, **launch)


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
