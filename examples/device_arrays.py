"""Device-resident arrays: zero-copy, asynchronous launches on a stream.

On a GPU: ``thork_core.DeviceArray`` (and CuPy/PyTorch arrays, through
``__cuda_array_interface__`` or DLPack) are passed without copies, and the launch is
queued on the stream you give. Without a GPU the same kernel runs on the CPU target with
NumPy arrays. Usage: python examples/device_arrays.py
"""

import numpy as np
import thork as tk
from thork_core import DeviceArray, plugins


@tk.jit
def axpy(out: tk.DevicePointer[tk.dt.float32], x: tk.DevicePointer[tk.dt.float32],
         y: tk.DevicePointer[tk.dt.float32], a: tk.dt.float32, n: tk.dt.int32,
         bid: tk.Uint[tk.BlockIdx], tid: tk.Uint[tk.ThreadIdx], bdm: tk.Uint[tk.BlockDim]):
    i = bid * bdm + tid
    with tk.if_(i < n):
        out[i] = a * x[i] + y[i]


def main() -> int:
    n = 1_000_003
    rng = np.random.default_rng()
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    grid = (n + 255) // 256
    gpu = plugins().targets()[0].name == "gpu" and plugins().targets()[0].available()[0]
    if gpu:
        dx, dy = DeviceArray.from_host(x), DeviceArray.from_host(y)
        dout = DeviceArray((n,), "float32")
        for _ in range(10):  # queued back to back: no copies, no synchronization
            axpy[grid, 256](dout, dx, dy, 2.0, n)
        out = dout.to_host()  # synchronizes
        where = "gpu (DeviceArray, zero-copy)"
    else:
        out = np.empty_like(x)
        axpy[grid, 256](out, x, y, 2.0, n, target="cpu")
        where = "cpu (NumPy)"
    ref = np.float32(2.0) * x + y
    # The GPU may fuse a*x + y into one FMA: compare within one rounding of the product.
    ok = bool(np.all(np.abs(out - ref) <= 2.0**-23 * (np.abs(2 * x) + np.abs(y))))
    print(f"axpy over {n} elements on {where}: {'matches NumPy' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
