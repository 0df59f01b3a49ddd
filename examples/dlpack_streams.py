"""DLPack both ways with the stream handshake, and CuPy arrays on CuPy's stream.

On a GPU: a Thork DeviceArray written on one stream is imported by CuPy (when installed)
or read back, and a foreign array comes in through ``DeviceArray.from_dlpack(obj,
stream=...)``: the producer orders the consumer's stream after its work, so nothing reads
early. Without a GPU, a host array that only speaks DLPack goes into a kernel on the CPU
target. Usage: python examples/dlpack_streams.py
"""

import numpy as np
import thork as tk
from thork_core.runtime import DeviceArray, check, driver, gpu_status, make_current


@tk.jit
def square(x: tk.DevicePointer[tk.dt.float32], n: tk.dt.int32,
           out: tk.DevicePointer[tk.dt.float32], bid: tk.Uint[tk.BlockIdx],
           tid: tk.Uint[tk.ThreadIdx], bdm: tk.Uint[tk.BlockDim]):
    i = bid * bdm + tid
    with tk.if_(i < n):
        out[i] = x[i] * x[i]


class OnlyDLPack:
    """An array Thork sees only through DLPack (as a JAX array)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def main() -> int:
    n = 65_537
    x = np.random.default_rng().standard_normal(n).astype(np.float32)
    grid = (n + 255) // 256
    if not gpu_status()[0]:
        out = np.full(n, np.nan, np.float32)
        square[grid, 256](OnlyDLPack(x), n, out, target="cpu")
        ok = np.allclose(out, x * x)
        print(f"DLPack on the CPU target: {'ok' if ok else 'MISMATCH'}")
        return 0 if ok else 1
    make_current(0)
    drv = driver()
    stream = int(check(drv.cuStreamCreate(1),
                       "cuStreamCreate"))
    dx = DeviceArray.from_host(x)
    dy = DeviceArray((n,), "float32", stream=stream)
    square[grid, 256](dx, n, dy, stream=stream)  # queued on `stream`
    ok = True
    try:
        import cupy as cp
    except ImportError:
        cp = None
    if cp is not None:
        y = cp.from_dlpack(dy)  # CuPy's current stream waits for `stream` (handshake)
        ok &= bool(cp.allclose(y, cp.asarray(x) ** 2))
        with cp.cuda.Stream(non_blocking=True):
            z = cp.asarray(x) + 1  # produced on CuPy's current stream
            back = DeviceArray.from_dlpack(z, stream=stream)  # `stream` waits for it
            out = DeviceArray((n,), "float32", stream=stream)
            square[grid, 256](back, n, out, stream=stream)
        ok &= np.allclose(out.to_host(), (x + 1) ** 2, rtol=1e-5)
    else:
        back = DeviceArray.from_dlpack(dy, stream=stream)  # a Thork array, re-imported
        ok &= back.ptr == dy.ptr and back.device == dy.device
        ok &= np.allclose(back.to_host(), x * x)
    print(f"DLPack on the GPU: {'ok' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
