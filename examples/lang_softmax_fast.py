"""Row softmax, a warp per row, with accurate math and with ``tk.fast`` (approximate,
flush-to-zero special-function instructions: CUDA's ``__expf`` family).

Runs on the GPU when one is visible, else on the CPU target; checks both kernels against
NumPy, each within its documented error (docs/language-math.md, "Fast approximate math").

    python examples/lang_softmax_fast.py
"""

from __future__ import annotations

import numpy as np
import thork as tk

f32 = tk.dt.float32
LOG2E = 1.4426950408889634
WARPS = 4  # rows per block of 128 threads


@tk.jit
def softmax_rows(out: tk.DevicePointer[f32], x: tk.DevicePointer[f32], rows: tk.dt.int32,
                 n: tk.dt.int32, FAST: tk.Constexpr[bool] = False):
    """``out[r, :] = softmax(x[r, :])`` for ``rows`` rows of ``n`` float32 each; warp ``w``
    of block ``b`` takes row ``b * WARPS + w``, its lanes stride over the row."""
    lane = tk.cast(tk.thread_idx().x % 32, tk.dt.int32)
    row = tk.cast(tk.block_idx().x * WARPS + tk.thread_idx().x // 32, tk.dt.int32)
    exp2 = tk.fast.exp2 if FAST else tk.exp2  # chosen while tracing: one kernel each
    with tk.if_(row < rows):  # the same for every lane of a warp: the shuffles stay whole
        base = row * n
        m = tk.var(float("-inf"))
        for j in tk.range(lane, n, 32):
            m.set(tk.max(m, x[base + j]))
        top = tk.warp_max(m)
        s = tk.var(0.0)
        for j in tk.range(lane, n, 32):
            s += exp2((x[base + j] - top) * LOG2E)
        total = tk.warp_sum(s)
        # total >= 1 (the maximum's own term): well inside rcp's range
        inv = tk.fast.rcp(total) if FAST else 1.0 / total
        for j in tk.range(lane, n, 32):
            out[base + j] = exp2((x[base + j] - top) * LOG2E) * inv


def main() -> None:
    rng = np.random.default_rng()
    rows, n = 1001, 333  # odd sizes: a partial last block, rows not a multiple of 32
    x = (3 * rng.standard_normal((rows, n))).astype(np.float32)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    ref = e / e.sum(1, keepdims=True)
    grid = (rows + WARPS - 1) // WARPS
    for fast, rtol in ((False, 1e-5), (True, 2e-5)):
        y = np.full_like(x, np.nan)  # poisoned: every element must be written
        softmax_rows[grid, 32 * WARPS](y, x, rows, n, FAST=fast)
        err = float(np.max(np.abs(y - ref) / ref))
        ok = bool(np.all(np.isfinite(y))) and err <= rtol
        print(f"{'tk.fast' if fast else 'accurate'}: max relative error {err:.2e} "
              f"(bound {rtol:.0e}) {'ok' if ok else 'MISMATCH'}")
        assert ok, "softmax differs from NumPy beyond its bound"
    print("rows sum to 1:", bool(np.allclose(y.sum(1), 1.0, atol=1e-5)))


if __name__ == "__main__":
    main()
