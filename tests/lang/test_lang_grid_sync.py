"""Grid-wide synchronization (tk.grid_sync / tk.this_grid().sync()) with cooperative
launches, on every target: a Jacobi/Laplace solver in one launch, co-residency errors, and
the CPU target's report of a block that cannot reach the barrier."""

import numpy as np
import pytest
import thork as tk
from helpers import compiles_for_gpu, poisoned, random_array

f32, i32 = tk.dt.float32, tk.dt.int32


@tk.jit
def jacobi(u: tk.DevicePointer[f32, 2], v: tk.DevicePointer[f32, 2], iters: i32):
    """``iters`` Jacobi sweeps of the Laplace equation (borders fixed), ping-ponging
    between u and v, in one launch: a grid barrier between sweeps. Grid-stride loops let
    a grid of any resident size cover the array."""
    h, w = u.shape
    nthreads = tk.cast(tk.grid_dim().x * tk.block_dim().x, i32)
    first = tk.cast(tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x, i32)
    for it in tk.range(iters):
        src = tk.where(it % 2 == 0, u, v)
        dst = tk.where(it % 2 == 0, v, u)
        for k in tk.range(first, h * w, nthreads):
            y, x = k // w, k % w
            with tk.if_((y > 0) & (y < h - 1) & (x > 0) & (x < w - 1)):
                dst[k] = 0.25 * (src[k - w] + src[k + w] + src[k - 1] + src[k + 1])
            with tk.else_():
                dst[k] = src[k]
        tk.this_grid().sync()


def _jacobi_ref(u, iters):
    a = u.astype(np.float64)
    for _ in range(iters):
        b = a.copy()
        b[1:-1, 1:-1] = 0.25 * (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:])
        a = b
    return a


@pytest.mark.parametrize("iters", [1, 6, 25])
def test_jacobi_in_one_launch(target, rng, iters):
    h, w = 23, 37
    u = random_array(rng, (h, w), np.float32)
    u0 = u.copy()
    v = poisoned((h, w), np.float32)
    jacobi[4, 64](u, v, iters, target=target)
    out = v if iters % 2 else u
    np.testing.assert_allclose(out, _jacobi_ref(u0, iters), rtol=1e-5, atol=1e-5)
    assert jacobi.ir.cooperative
    compiles_for_gpu(jacobi)


@tk.jit
def rotate_sum(x: tk.DevicePointer[i32], out: tk.DevicePointer[i32]):
    """Each thread reads its right neighbour's value after a grid barrier, across blocks."""
    n = tk.cast(tk.grid_dim().x * tk.block_dim().x, i32)
    i = tk.cast(tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x, i32)
    x[i] = x[i] * 2
    tk.grid_sync()
    out[i] = x[(i + 1) % n]


def test_grid_sync_orders_writes_across_blocks(target, rng):
    blocks, threads = 8, 32
    x = rng.integers(-1000, 1000, blocks * threads).astype(np.int32)
    x0 = x.copy()
    out = poisoned(blocks * threads, np.int32)
    rotate_sum[blocks, threads](x, out, target=target)
    np.testing.assert_array_equal(out, np.roll(x0 * 2, -1))


def test_too_many_blocks_is_a_clear_error(target):
    x = np.zeros(100000 * 32, np.int32)
    with pytest.raises(tk.LaunchError, match=r"resident at once.*launch at most \d+ blocks"):
        rotate_sum[100000, 32](x, x.copy(), target=target)


def test_block_that_returns_early_is_reported():
    """CPU only: on the GPU such a kernel would wait forever (as with cooperative groups)."""
    @tk.jit
    def bad(x: tk.DevicePointer[i32], b: tk.Uint[tk.BlockIdx]):
        with tk.if_(b == 1):
            tk.return_()
        tk.grid_sync()
        x[b] = 1

    from helpers import TARGETS

    if "cpu" not in TARGETS:
        pytest.skip("no CPU target")
    with pytest.raises(tk.LaunchError, match="grid barrier"):
        bad[3, 4](np.zeros(3, np.int32), target="cpu")
