"""A Hopper GEMM in plain Thork: ``c = a @ b`` (float16 or bfloat16 in, float32 out) with a
producer warpgroup issuing TMA tile loads and consumer warpgroups issuing warpgroup MMA
(``tk.wgmma``), ``STAGES`` shared-memory buffers handed back and forth through mbarriers.

    python examples/gemm_wgmma.py            # checks itself against NumPy

``b`` is taken as ``bt = b.T`` (N x K, row-major: both operands "K-major", the layout
``wgmma`` reads without transposing). Rows must be 16-byte aligned for TMA (``K`` a
multiple of 8); ``M`` and ``N`` are free (TMA fills the tiles past the edges with zeros,
the epilogue stores only inside). GPU: sm_90a (H100/H200) — elsewhere it runs on the
CPU target, where the same kernel runs under Thork's model (docs/language-wgmma.md).
"""

from __future__ import annotations

import functools

import numpy as np
import thork as tk

f32, i32, u64 = tk.dt.float32, tk.dt.int32, tk.dt.uint64
P = tk.DevicePointer

#: K elements per tile: one 128-byte swizzled row of 16-bit elements.
BK = 64


@functools.cache
def gemm_kernel(dtype: str) -> tk.Kernel:
    """The kernel for ``"float16"`` or ``"bfloat16"`` inputs."""
    T = tk.dt.float16 if dtype == "float16" else tk.dt.bfloat16

    @tk.jit
    def gemm_wgmma(c: P[f32], ta: P[u64], tb: P[u64], M: i32, N: i32, K: i32,
                   BN: tk.Constexpr[int] = 128, CONSUMERS: tk.Constexpr[int] = 2,
                   STAGES: tk.Constexpr[int] = 4):
        """``c[M, N] = a[M, K] @ bt[N, K].T`` for a (64 CONSUMERS) x BN tile per block of
        1 + CONSUMERS warpgroups. ``ta``/``tb``: tensor maps of a (box 64 CONSUMERS x 64)
        and bt (box BN x 64), 128-byte swizzle."""
        BM = 64 * CONSUMERS
        A_TILE, B_TILE = BM * BK, BN * BK            # elements per stage
        sa = tk.dynamic_shared(T)                    # STAGES x A_TILE, 1024-byte aligned
        sb = tk.dynamic_shared(T, STAGES * A_TILE * 2)
        full = tk.shared_array(u64, (STAGES,))       # TMA landed: count 1 + bytes
        empty = tk.shared_array(u64, (STAGES,))      # consumers done: one per warpgroup
        tid = tk.thread_idx().x
        wg = tid // 128
        m0, n0 = tk.block_idx().y * BM, tk.block_idx().x * BN
        nk = (K + BK - 1) // BK
        with tk.if_(tid == 0):
            for s in range(STAGES):
                tk.mbarrier_init(full, s, 1)
                tk.mbarrier_init(empty, s, CONSUMERS)
        tk.syncthreads()

        with tk.if_(tid == 0):                       # the producer: one thread of warpgroup 0
            for kt in tk.range(nk):
                s, phase = kt % STAGES, (kt // STAGES) % 2
                tk.mbarrier_wait(empty, s, phase ^ 1)     # round 0 passes at once
                tk.mbarrier_expect_tx(full, s, (A_TILE + B_TILE) * 2)
                tk.tma_load(sa, s * A_TILE, ta, kt * BK, m0, full, s)
                tk.tma_load(sb, s * B_TILE, tb, kt * BK, n0, full, s)

        with tk.if_(wg > 0):                         # the consumers
            row0 = (wg - 1) * 64                     # this warpgroup's 64 rows of the tile
            acc = [tk.var(0.0) for _ in range(BN // 2)]
            for kt in tk.range(nk):
                s, phase = kt % STAGES, (kt // STAGES) % 2
                tk.mbarrier_wait(full, s, phase)
                tk.wgmma_fence()
                cur = tuple(acc)
                for ks in range(BK // 16):           # 4 k16 steps: +32 bytes in the row
                    # swizzled K-major: 8-row groups 1024 bytes apart (SBO); LBO unused.
                    da = tk.wgmma_descriptor(
                        tk.smem_address(sa, s * A_TILE + row0 * BK + ks * 16), 16, 1024, 128)
                    db = tk.wgmma_descriptor(
                        tk.smem_address(sb, s * B_TILE + ks * 16), 16, 1024, 128)
                    cur = tk.wgmma(da, db, cur, BN, dtype=T)
                tk.wgmma_commit()
                tk.wgmma_wait(0)                     # this stage's reads are done
                for i in range(BN // 2):
                    acc[i].set(cur[i])
                with tk.if_(tid % 128 == 0):
                    tk.mbarrier_arrive(empty, s)     # hand the buffer back
            w, lane = (tid // 32) % 4, tid % 32
            g, t = lane // 4, lane % 4
            for i in range(BN // 2):                 # the D fragment -> c, inside only
                r = m0 + row0 + 16 * w + g + 8 * ((i >> 1) & 1)
                col = n0 + 8 * (i >> 2) + 2 * t + (i & 1)
                with tk.if_((r < M) & (col < N)):
                    c[r * N + col] = acc[i]

    return gemm_wgmma


def shared_bytes(BN: int = 128, CONSUMERS: int = 2, STAGES: int = 4) -> int:
    """Dynamic shared memory of one block: STAGES tiles of a and bt."""
    return STAGES * (64 * CONSUMERS + BN) * BK * 2


def gemm(c: object, a: object, bt: object, M: int, N: int, K: int, dtype: str = "float16",
         BN: int = 128, CONSUMERS: int = 2, STAGES: int = 4, **launch: object) -> None:
    """Launch ``c[M, N] = a[M, K] @ bt[N, K].T``: NumPy arrays on the CPU target, GPU
    arrays (DeviceArray, CUDA tensors) on the GPU — the tensor maps follow the arrays."""
    if K % 8 or BN not in (64, 128, 256) or CONSUMERS not in (1, 2) or STAGES < 2:
        raise ValueError(f"K={K} (a multiple of 8), BN={BN} (64, 128, 256), "
                         f"CONSUMERS={CONSUMERS} (1, 2), STAGES={STAGES} (>= 2)")
    ta = tk.tensor_map(a, (64 * CONSUMERS, BK), swizzle=128)
    tb = tk.tensor_map(bt, (BN, BK), swizzle=128)
    grid = ((N + BN - 1) // BN, (M + 64 * CONSUMERS - 1) // (64 * CONSUMERS))
    gemm_kernel(dtype)[grid, 128 * (1 + CONSUMERS), shared_bytes(BN, CONSUMERS, STAGES)](
        c, ta, tb, M, N, K, BN, CONSUMERS, STAGES, **launch)


def hopper_gpu() -> bool:
    """Whether the default target is a GPU that runs sm_90a code."""
    from thork_core import gpu_arch, plugins

    t = plugins().targets()[0]
    return t.name == "gpu" and bool(t.available()[0]) and gpu_arch().startswith("sm_90")


def check(M: int, N: int, K: int, dtype: str, rng: np.random.Generator, **tile: int) -> float:
    """Run once on fresh inputs; the worst error relative to the bound K 2^-22 sum|a b|."""
    import ml_dtypes  # noqa: F401  (NumPy's bfloat16)

    np_t = np.float16 if dtype == "float16" else np.dtype("bfloat16")
    a = rng.standard_normal((M, K)).astype(np_t)
    b = rng.standard_normal((K, N)).astype(np_t)
    bt = np.ascontiguousarray(b.T)
    if hopper_gpu():
        from thork_core import DeviceArray

        da, dbt = DeviceArray.from_host(a), DeviceArray.from_host(bt)
        dc = DeviceArray.from_host(np.full((M, N), np.nan, np.float32))
        gemm(dc, da, dbt, M, N, K, dtype, **tile)
        c = dc.to_host()
    else:
        c = np.full((M, N), np.nan, np.float32)
        gemm(c, a, bt, M, N, K, dtype, target="cpu", **tile)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    bound = K * 2.0**-22 * (np.abs(a64) @ np.abs(b64)) + 1e-30
    return float(np.max(np.abs(c - a64 @ b64) / bound))


def main() -> None:
    rng = np.random.default_rng()
    where = "gpu" if hopper_gpu() else "cpu (the model)"
    for M, N, K in ((77, 45, 136), (130, 70, 200)):  # edges in M, N and K
        for dtype in ("float16", "bfloat16"):
            worst = check(M, N, K, dtype, rng)
            status = "ok" if worst <= 1.0 else "MISMATCH"
            print(f"{dtype} {M}x{N}x{K} on {where}: error / bound = {worst:.3f} {status}")
            assert worst <= 1.0
    try:
        cubin = gemm_kernel("float16").artifact("sm_90")
    except tk.PluginError as exc:  # no CUDA compiler plugin installed
        print(f"sm_90a cubin: not built ({exc})")
    else:
        print(f"{cubin.arch} cubin: {len(cubin.data)} bytes")


if __name__ == "__main__":
    main()
