"""Sum an array with a block reduction in shared memory, then warp shuffles.

Runs on the GPU when one is visible, else on the CPU target; checks against NumPy.

    python examples/lang_reduction.py
"""

from __future__ import annotations

import numpy as np
import thork as tk

f32 = tk.dt.float32


@tk.jit
def block_sum(out: tk.DevicePointer[f32], a: tk.DevicePointer[f32], n: tk.dt.int32,
              BLOCK: tk.Constexpr[int] = 256):
    """Each block adds a grid-stride slice into shared memory, reduces it to 32 values,
    finishes with warp shuffles and adds its total to ``out[0]`` atomically."""
    s = tk.shared_array(f32, BLOCK)
    t = tk.thread_idx().x
    acc = tk.var(0.0)
    for i in tk.range(tk.block_idx().x * BLOCK + t, n, tk.grid_dim().x * BLOCK):
        acc += a[i]
    s[t] = acc
    tk.syncthreads()
    step = BLOCK // 2
    while step >= 32:  # Python loop: unrolled while tracing
        with tk.if_(t < step):
            s[t] = s[t] + s[t + step]
        tk.syncthreads()
        step //= 2
    with tk.if_(t < 32):
        total = tk.warp_sum(s[t])
        with tk.if_(t == 0):
            tk.atomic_add(out, 0, total)


def main() -> None:
    rng = np.random.default_rng()
    n = 1_000_003
    a = rng.standard_normal(n).astype(np.float32)
    out = np.zeros(1, np.float32)
    block_sum[64, 256](out, a, n)
    ref = a.astype(np.float64).sum()
    print(f"thork: {out[0]:.4f}   numpy: {ref:.4f}")
    assert abs(out[0] - ref) <= 1e-3 * max(1.0, abs(ref)) + 0.1
    listing = block_sum.specialize().source.splitlines()
    print("generated CUDA (kernel first):\n" + "\n".join(listing[:12]))


if __name__ == "__main__":
    main()
