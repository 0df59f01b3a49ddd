"""Pointer views (a + offset), choosing an array at run time, optional (None) array
arguments, and per-thread local arrays indexed at run time."""

import numpy as np
import pytest
import thork as tk
from helpers import compiles_for_gpu, poisoned, random_array

f32, i32 = tk.dt.float32, tk.dt.int32


@tk.jit
def row_scale(m: tk.DevicePointer[f32], out: tk.DevicePointer[f32], cols: i32,
              r: tk.Uint[tk.BlockIdx], c: tk.Uint[tk.ThreadIdx]):
    row = m + r * cols          # a view of row r
    dst = out + r * cols
    with tk.if_(c < cols):
        dst[c] = row[c] * (r + 1.0) + (row + 1)[0]   # views of views


def test_pointer_views(target, rng):
    rows, cols = 5, 37
    m = random_array(rng, (rows, cols), np.float32)
    out = poisoned((rows, cols), np.float32)
    row_scale[rows, 64](m, out, cols, target=target)
    ref = m * (np.arange(rows)[:, None] + 1.0) + m[:, 1:2]
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-5)  # GPU: fma
    assert [p.writes for p in row_scale.params] == [False, True, False]
    compiles_for_gpu(row_scale)


@tk.jit
def ping_pong(a: tk.DevicePointer[f32], b: tk.DevicePointer[f32], n: i32, flip: i32):
    i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    src = tk.where(flip == 0, a, b)     # chosen at run time
    dst = tk.select(flip == 0, b, a)
    with tk.if_(i < n):
        dst[i] = src[i] * 2.0 + 1.0


def test_choose_array_at_run_time(target, rng):
    n = 300
    a0 = random_array(rng, n, np.float32)
    a, b = a0.copy(), poisoned(n, np.float32)
    ping_pong[3, 128](a, b, n, 0, target=target)      # a -> b
    np.testing.assert_allclose(b, a0 * 2 + 1, rtol=1e-6, atol=1e-6)
    ping_pong[3, 128](a, b, n, 1, target=target)      # b -> a
    np.testing.assert_allclose(a, (a0 * 2 + 1) * 2 + 1, rtol=1e-6, atol=1e-5)
    assert all(p.writes and p.reads for p in ping_pong.params[:2])
    compiles_for_gpu(ping_pong)


@tk.jit
def axpb(out: tk.DevicePointer[f32], x: tk.DevicePointer[f32],
         bias: tk.DevicePointer[f32] | None, n: i32, SCALE: tk.Constexpr[float] = 1.0):
    i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    with tk.if_(i < n):
        v = x[i] * SCALE
        if bias is not None:            # decided at trace time, per specialization
            v = v + bias[i]
        out[i] = v


def test_optional_array_arguments(target, rng):
    n = 201
    x, bias = random_array(rng, n, np.float32), random_array(rng, n, np.float32)
    out = poisoned(n, np.float32)
    axpb[2, 128](out, x, bias, n, target=target)
    np.testing.assert_allclose(out, x + bias, rtol=1e-6, atol=1e-6)
    out = poisoned(n, np.float32)
    axpb[2, 128](out, x, None, n, target=target)
    np.testing.assert_allclose(out, x, rtol=1e-6)
    out = poisoned(n, np.float32)
    axpb[2, 128](out, x, None, n, 3.0, target=target)   # with a compile-time constant
    np.testing.assert_allclose(out, x * 3, rtol=1e-6, atol=1e-6)
    out = poisoned(n, np.float32)
    axpb[2, 128](out, x, bias, n, SCALE=2.0, target=target)
    np.testing.assert_allclose(out, x * 2 + bias, rtol=1e-6, atol=1e-6)


def test_none_for_a_required_array_is_refused(target):
    with pytest.raises(tk.ArgumentError, match="'x' expects an array"):
        axpb[1, 32](np.zeros(4, np.float32), None, None, 4, target=target)


@tk.jit
def sort_small(a: tk.DevicePointer[i32], out: tk.DevicePointer[i32], n: i32,
               tid: tk.Uint[tk.ThreadIdx]):
    """Each thread insertion-sorts its own K-element slice in a local array."""
    K = 9
    loc = tk.local_array(i32, K)
    base = tid * K
    with tk.if_(base < n):
        for k in range(K):
            loc[k] = a[base + k]
        for j in tk.range(1, K):                # run-time indices into the local array
            key = loc[j]
            m = tk.var(j - 1)
            with tk.while_(lambda: (m >= 0) & (loc[tk.max(m, 0)] > key)):  # noqa: B023 - traced once
                loc[m + 1] = loc[m]
                m -= 1
            loc[m + 1] = key
        for k in range(K):
            out[base + k] = loc[k]


def test_local_array_indexed_at_run_time(target, rng):
    threads, K = 13, 9
    a = rng.integers(-50, 50, threads * K).astype(np.int32)
    out = poisoned(threads * K, np.int32)
    sort_small[1, 16](a, out, threads * K, target=target)
    np.testing.assert_array_equal(out.reshape(threads, K), np.sort(a.reshape(threads, K), 1))
    compiles_for_gpu(sort_small)


def test_view_and_local_errors():
    @tk.jit
    def k1(a: tk.DevicePointer[f32], b: tk.DevicePointer[i32], tid: tk.Uint[tk.ThreadIdx]):
        c = tk.where(tid < 3, a, b)
        c[0] = 1

    with pytest.raises(tk.TraceError, match="one element type and memory space"):
        k1.ir  # noqa: B018

    @tk.jit
    def k2(a: tk.DevicePointer[f32]):
        loc = tk.local_array(f32, 8)
        tk.atomic_add(loc, 0, 1.0)

    with pytest.raises(tk.TraceError, match="local array"):
        k2.ir  # noqa: B018

    @tk.jit
    def k3(a: tk.DevicePointer[f32]):
        tk.local_array(f32, 5000)

    with pytest.raises(tk.TraceError, match="over the 16384-byte limit"):
        k3.ir  # noqa: B018

    with pytest.raises(tk.TraceError, match=r"only '\| None'"):
        tk.DevicePointer[f32] | int
