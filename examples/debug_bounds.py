"""Debug mode: a stencil with an off-by-one caught as a BoundsError, then fixed.

``@tk.jit(debug=True)`` (or ``THORK_DEBUG=1``) bounds-checks every array access; the
first out-of-bounds access of a launch is raised after the launch with the kernel, the
array, the index, the bound and the Python line (docs/debug-mode.md). Runs on the GPU when
there is one, else on the CPU target. Usage: python examples/debug_bounds.py
"""

import numpy as np
import thork as tk
from thork_core import BoundsError

F32 = tk.DevicePointer[tk.dt.float32]
Bid, Tid, Bdm = tk.Uint[tk.BlockIdx], tk.Uint[tk.ThreadIdx], tk.Uint[tk.BlockDim]


def smooth_kernel(last: int):
    """A 3-point average for i in [1, n - last): last = 0 is the bug, 1 the fix."""

    @tk.jit(debug=True)
    def smooth(out: F32, x: F32, n: tk.dt.int32, bid: Bid, tid: Tid, bdm: Bdm):
        i = tk.cast(bid * bdm + tid, tk.dt.int32)
        with tk.if_((i >= 1) & (i < n - last)):
            out[i] = (x[i - 1] + x[i] + x[i + 1]) / 3.0

    return smooth


def main() -> int:
    n = 10_007
    x = np.random.default_rng().standard_normal(n).astype(np.float32)
    out = np.zeros_like(x)
    grid = (n + 255) // 256
    try:
        smooth_kernel(0)[grid, 256](out, x, n)
        print("the bug was not caught")
        return 1
    except BoundsError as e:
        print(f"caught: {e}")
        caught = e.array == "x" and e.index == n and e.hi == n
    out[:] = 0  # the failed launch wrote garbage where its load went out of bounds
    smooth_kernel(1)[grid, 256](out, x, n)
    ref = np.zeros_like(x)
    ref[1:-1] = (x[:-2] + x[1:-1] + x[2:]) / np.float32(3.0)
    ok = caught and bool(np.allclose(out, ref, rtol=1e-6, atol=1e-6))
    print(f"fixed stencil over {n} elements: {'matches NumPy' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
