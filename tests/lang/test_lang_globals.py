"""Module-level arrays: constant memory filled from NumPy (tk.const_array) and __device__
variables that persist across launches (tk.device_array)."""

import numpy as np
import pytest
import thork as tk
from helpers import compiles_for_gpu, poisoned, random_array

f32, i32, u32 = tk.dt.float32, tk.dt.int32, tk.dt.uint32

TAPS = np.array([0.0625, 0.25, 0.375, 0.25, 0.0625], np.float32)
FILTER = tk.const_array(TAPS)
KERNEL2D = tk.const_array(np.arange(12, dtype=np.int32).reshape(3, 4) - 5)
HALF_TABLE = tk.const_array(np.array([0.5, -1.25, 3.0], np.float16))


@tk.func
def tap(k):
    return FILTER[k]  # used inside a helper: still the kernel's constant array


@tk.jit
def blur(x: tk.DevicePointer[f32], out: tk.DevicePointer[f32], n: i32):
    i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    with tk.if_(i < n):
        acc = tk.var(0.0)
        for k in range(5):
            j = tk.min(tk.max(tk.cast(i, i32) + (k - 2), 0), n - 1)   # clamp at the edges
            acc += tap(k) * x[j]
        out[i] = acc + KERNEL2D[2, 3] * 0.0 + HALF_TABLE[1].to(f32) * 0.0


def test_constant_array(target, rng):
    n = 333
    x = random_array(rng, n, np.float32)
    out = poisoned(n, np.float32)
    blur[3, 128](x, out, n, target=target)
    padded = np.concatenate([[x[0]] * 2, x, [x[-1]] * 2])
    ref = sum(TAPS[k] * padded[k:k + n] for k in range(5))
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)
    src = blur.source
    assert "__constant__ float thork_c" in src and "0.375f" in src
    compiles_for_gpu(blur)


@tk.jit
def table_read(out: tk.DevicePointer[f32], tid: tk.Uint[tk.ThreadIdx]):
    with tk.if_(tid < 12):
        out[tid] = tk.cast(KERNEL2D[tid // 4, tid % 4], f32)
    with tk.if_(tid < 3):
        out[12 + tid] = HALF_TABLE[tid].to(f32)


def test_constant_2d_and_half(target):
    out = poisoned(15, np.float32)
    table_read[1, 32](out, target=target)
    np.testing.assert_array_equal(out[:12], np.arange(12) - 5)
    np.testing.assert_array_equal(out[12:], [0.5, -1.25, 3.0])


TICKETS = tk.device_array(u32, 1)


@tk.jit
def last_block_sum(x: tk.DevicePointer[f32], partial: tk.DevicePointer[f32],
                   total: tk.DevicePointer[f32], n: i32):
    """cuda-samples' threadFenceReduction pattern: each block writes a partial sum; the
    block that takes the last ticket adds them and resets the counter for the next
    launch."""
    t = tk.thread_idx().x
    b = tk.block_idx().x
    s = tk.shared_array(f32, 64)
    i = b * 64 + t
    s[t] = tk.cond(i < n, lambda: x[i], 0.0)
    tk.syncthreads()
    with tk.if_(t == 0):
        acc = tk.var(0.0)
        for k in tk.range(64):
            acc += s[k]
        partial[b] = acc
        tk.threadfence()
        ticket = tk.atomic_inc(TICKETS, 0, tk.grid_dim().x - 1)   # wraps to 0: reset
        with tk.if_(ticket == tk.grid_dim().x - 1):
            tot = tk.var(0.0)
            for k in tk.range(tk.grid_dim().x):
                tot += partial[k]
            total[0] = tot


def test_device_array_persists_and_is_reset(target, rng):
    for n in (1000, 640, 77):  # three launches: the counter must be back to 0 each time
        x = random_array(rng, n, np.float32)
        blocks = (n + 63) // 64
        partial, total = poisoned(blocks, np.float32), poisoned(1, np.float32)
        last_block_sum[blocks, 64](x, partial, total, n, target=target)
        np.testing.assert_allclose(total[0], x.astype(np.float64).sum(), rtol=1e-4, atol=1e-4)
    assert "__device__ unsigned int thork_g" in last_block_sum.source
    compiles_for_gpu(last_block_sum)


COUNTS = tk.device_array(i32, 4, init=[10, 20, 30, 40])


def test_device_array_init_and_persistence(target):
    @tk.jit
    def bump(out: tk.DevicePointer[i32], tid: tk.Uint[tk.ThreadIdx]):
        out[tid] = tk.atomic_add(COUNTS, tid, 1)

    out = poisoned(4, np.int32)
    bump[1, 4](out, target=target)
    np.testing.assert_array_equal(out, [10, 20, 30, 40])
    bump[1, 4](out, target=target)  # the same loaded module: the values persisted
    np.testing.assert_array_equal(out, [11, 21, 31, 41])


def test_global_array_errors():
    @tk.jit
    def k(tid: tk.Uint[tk.ThreadIdx]):
        FILTER[tid] = 1.0

    with pytest.raises(tk.TraceError, match="read-only"):
        k.ir  # noqa: B018
    with pytest.raises(tk.TraceError, match="64 KiB|65536-byte"):
        tk.const_array(np.zeros(20000, np.float32))
    with pytest.raises(tk.TraceError, match="finite"):
        tk.const_array(np.array([1.0, np.inf], np.float32))
