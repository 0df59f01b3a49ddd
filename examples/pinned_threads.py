"""Pinned host arrays and launches from several threads, checked against NumPy.

Each of 4 worker threads owns a pair of pinned host arrays (``tk.pinned_empty``: launches
on the GPU copy them straight to and from the device, without a staging copy) and runs
the same kernel on its own frames, with its own gain; the kernel object and its first
compilation are shared. Runs on the GPU when one is visible, else on the CPU target
(where ``tk.pinned_empty`` gives ordinary NumPy arrays).
Usage: python examples/pinned_threads.py
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import thork as tk


@tk.jit
def gain_offset(
    out: tk.DevicePointer[tk.dt.float32],
    frame: tk.DevicePointer[tk.dt.uint8],
    gain: tk.dt.float32,
    offset: tk.dt.float32,
    n: tk.dt.int32,
    bid: tk.Uint[tk.BlockIdx],
    tid: tk.Uint[tk.ThreadIdx],
    bdm: tk.Uint[tk.BlockDim],
):
    i = bid * bdm + tid
    with tk.if_(i < n):
        out[i] = tk.cast(frame[i], tk.dt.float32) * gain + offset


SHAPE = (479, 641)  # odd sizes: the last block is partial
N = SHAPE[0] * SHAPE[1]


def worker(seed: int) -> bool:
    """Process 5 frames in pinned buffers owned by this thread; True when all match."""
    rng = np.random.default_rng(seed)
    frame = tk.pinned_empty(SHAPE, "uint8")
    out = tk.pinned_empty(SHAPE, "float32")
    gain = float(np.float32(1.0 + seed / 8))
    ok = True
    for _ in range(5):
        frame[...] = rng.integers(0, 256, SHAPE, dtype=np.uint8)
        out[...] = np.nan  # poisoned: every element must be written
        gain_offset[(N + 255) // 256, 256](out, frame, gain, -0.5, N)
        ok &= bool(np.allclose(out, frame.astype(np.float32) * np.float32(gain) - 0.5,
                               rtol=1e-6))
    return ok


if __name__ == "__main__":
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(worker, range(4)))
    info = gain_offset.compile_info
    ok = all(results)
    print(f"gain_offset {SHAPE} from 4 threads on {info.target} ({info.compiler}): "
          f"{'matches NumPy' if ok else 'MISMATCH'}")
    raise SystemExit(0 if ok else 1)
