"""The seed example (seeds/000), as written, verified against NumPy.

Runs on the GPU when one is visible, else on the CPU target (with a one-line notice).
Usage: python examples/matrix_add.py
"""

import numpy as np
import thork as tk

# --- the seed's code, verbatim -----------------------------------------------------------
shape = (1024, 1024)
A = np.random.randn(*shape).astype(np.float32)
B = np.random.randn(*shape).astype(np.float32)
out = A + B


@tk.jit
def matrix_add(
    out : tk.DevicePointer[tk.dt.float32],
    A   : tk.DevicePointer[tk.dt.float32],
    B   : tk.DevicePointer[tk.dt.float32],
    bid : tk.Uint[tk.BlockIdx],
    tid : tk.Uint[tk.ThreadIdx],
    bdm : tk.Uint[tk.BlockDim],
):
    i = bid * bdm + tid
    out[i] = A[i] + B[i]


C = np.full(shape, np.nan, dtype=np.float32)  # poisoned: every element must be written

matrix_add[
    (int(np.prod(shape)) // 128, 1, 1),
    (128, 1, 1),
](
    C,
    A,
    B,
)
# ------------------------------------------------------------------------------------------

if __name__ == "__main__":
    info = matrix_add.compile_info
    ok = np.array_equal(C, out)
    print(f"matrix_add {shape} on {info.target} ({info.compiler}, {info.arch}, "
          f"cache {info.cache}): {'matches NumPy' if ok else 'MISMATCH'}")
    raise SystemExit(0 if ok else 1)
