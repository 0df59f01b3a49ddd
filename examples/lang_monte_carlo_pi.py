"""Monte Carlo estimate of pi with counter-based random numbers: every thread draws
points from Philox4x32-10 keyed by a seed (no generator state), converts them with the
documented ``(u >> 8) * 2**-24`` formula, and counts hits with an atomic. The kernel's
draws are recomputed in NumPy from the same formula, so the hit count must match exactly.

    python examples/lang_monte_carlo_pi.py
"""

from __future__ import annotations

import numpy as np
import thork as tk

u32 = tk.dt.uint32
PER_THREAD = 4  # one Philox block: four uint32 words = two (x, y) points


@tk.jit
def count_hits(hits: tk.DevicePointer[u32], seed: u32, n_threads: tk.dt.int32):
    t = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    with tk.if_(t < n_threads):
        words = tk.philox4x32((t, 0, 0, 0), (seed, 0x5EED))
        p = tk.float4(*[tk.uniform_float(w) for w in words]).to(tk.dt.float64)
        # In float64 the squares and sums of 24-bit fractions are exact: the same result
        # with or without the GPU's fused multiply-add, and in NumPy.
        inside = tk.cast((p.x * p.x + p.y * p.y) < 1.0, u32) \
            + tk.cast((p.z * p.z + p.w * p.w) < 1.0, u32)
        tk.atomic_add(hits, 0, inside)


def philox4x32_np(t: np.ndarray, k0: int, k1: int) -> np.ndarray:
    """The published Philox4x32-10 round function, vectorized over counters t."""
    c = [t.astype(np.uint64), np.zeros_like(t, np.uint64), np.zeros_like(t, np.uint64),
         np.zeros_like(t, np.uint64)]
    k = [np.uint64(k0), np.uint64(k1)]
    m0, m1, mask = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57), np.uint64(0xFFFFFFFF)
    for r in range(10):
        if r:
            k = [(k[0] + np.uint64(0x9E3779B9)) & mask, (k[1] + np.uint64(0xBB67AE85)) & mask]
        p0, p1 = c[0] * m0, c[2] * m1
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k[0], p1 & mask, (p0 >> np.uint64(32)) ^ c[3] ^ k[1],
             p0 & mask]
    return np.stack(c, 1).astype(np.uint32)


def main() -> None:
    n_threads, seed = 20000, 2024
    hits = np.zeros(1, np.uint32)
    count_hits[(n_threads + 255) // 256, 256](hits, seed, n_threads)
    w = philox4x32_np(np.arange(n_threads), seed, 0x5EED)
    f = ((w >> np.uint32(8)).astype(np.float32) * np.float32(2.0**-24)).astype(np.float64)
    ref = int(((f[:, 0] ** 2 + f[:, 1] ** 2) < 1).sum() + ((f[:, 2] ** 2 + f[:, 3] ** 2) < 1).sum())
    estimate = 4.0 * int(hits[0]) / (2 * n_threads)
    print(f"pi ~ {estimate:.4f} from {2 * n_threads} points; hits {hits[0]} (NumPy: {ref})")
    if int(hits[0]) != ref or abs(estimate - np.pi) > 0.05:
        print("MISMATCH")
        raise SystemExit(1)


if __name__ == "__main__":
    main()
