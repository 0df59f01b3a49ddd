"""Tiled float32 matrix multiply with shared memory, on sizes that are not multiples of
the tile; checks against NumPy (float64) and compiles the kernel for sm_90.

    python examples/lang_matmul.py
"""

from __future__ import annotations

import numpy as np
import thork as tk

f32, i32 = tk.dt.float32, tk.dt.int32


@tk.jit
def matmul(c: tk.DevicePointer[f32], a: tk.DevicePointer[f32], b: tk.DevicePointer[f32],
           M: i32, N: i32, K: i32, TILE: tk.Constexpr[int] = 16):
    """``c[M, N] = a[M, K] @ b[K, N]``; one TILE x TILE block of threads per output tile."""
    sa = tk.shared_array(f32, (TILE, TILE))
    sb = tk.shared_array(f32, (TILE, TILE))
    tx, ty = tk.thread_idx().x, tk.thread_idx().y
    row = tk.block_idx().y * TILE + ty
    col = tk.block_idx().x * TILE + tx
    acc = tk.var(0.0)  # a mutable local: updated in the device loop below
    for k0 in tk.range(0, K, TILE):
        with tk.if_((row < M) & (k0 + tx < K)):
            sa[ty, tx] = a[row * K + k0 + tx]
        with tk.else_():
            sa[ty, tx] = 0.0
        with tk.if_((k0 + ty < K) & (col < N)):
            sb[ty, tx] = b[(k0 + ty) * N + col]
        with tk.else_():
            sb[ty, tx] = 0.0
        tk.syncthreads()
        for k in range(TILE):  # unrolled at trace time
            acc.set(tk.fma(sa[ty, k], sb[k, tx], acc))
        tk.syncthreads()
    with tk.if_((row < M) & (col < N)):
        c[row * N + col] = acc


def main() -> None:
    rng = np.random.default_rng()
    M, N, K = 131, 97, 77
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c = np.full((M, N), np.nan, np.float32)
    T = 16
    matmul[((N + T - 1) // T, (M + T - 1) // T), (T, T)](c, a, b, M, N, K, T)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    rel = np.abs(c - ref).max() / np.abs(ref).max()
    print(f"max relative error vs float64: {rel:.2e}")
    assert rel <= 1e-5
    try:
        cubin = matmul.specialize(TILE=T).artifact("sm_90")
    except tk.PluginError as exc:  # no CUDA compiler plugin installed
        print(f"sm_90 cubin: not built ({exc})")
    else:
        print(f"sm_90 cubin: {len(cubin.data)} bytes")


if __name__ == "__main__":
    main()
