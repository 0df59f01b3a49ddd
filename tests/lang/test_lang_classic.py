"""The classic-kernel suite: the kernels every CUDA course shows, written in thork-trace,
checked against NumPy on fresh random odd-sized inputs with poisoned outputs, on every
available target, and compiled to cubin for sm_75 and sm_90."""


import ml_dtypes
import numpy as np
import pytest
import thork as tk
from helpers import compiles_for_gpu, poisoned, random_array

f32, f16, bf16, i32, u32 = tk.dt.float32, tk.dt.float16, tk.dt.bfloat16, tk.dt.int32, tk.dt.uint32
ARCHS = ("sm_75", "sm_90")


def cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


# -- block sum reduction in shared memory -----------------------------------------------
@tk.jit
def block_sum(partial: tk.DevicePointer[f32], a: tk.DevicePointer[f32], n: i32,
              BLOCK: tk.Constexpr[int] = 256):
    s = tk.shared_array(f32, BLOCK)
    t = tk.thread_idx().x
    i = tk.block_idx().x * BLOCK + t
    s[t] = tk.where(i < n, a[tk.where(i < n, i, 0)], 0.0)
    tk.syncthreads()
    step = BLOCK // 2
    while step > 0:  # a Python loop: unrolled at trace time
        with tk.if_(t < step):
            s[t] = s[t] + s[t + step]
        tk.syncthreads()
        step //= 2
    with tk.if_(t == 0):
        partial[tk.block_idx().x] = s[0]


@pytest.mark.parametrize("block", [64, 256])
def test_block_sum_reduction(target, rng, block):
    n = int(rng.integers(3000, 9000)) | 1
    a = random_array(rng, n, np.float32)
    nb = cdiv(n, block)
    partial = poisoned(nb, np.float32)
    block_sum[nb, block](partial, a, n, block, target=target)
    ref = np.pad(a.astype(np.float64), (0, nb * block - n)).reshape(nb, block).sum(1)
    np.testing.assert_allclose(partial, ref, rtol=1e-5, atol=1e-4)
    compiles_for_gpu(block_sum.specialize(BLOCK=block))


# -- warp-shuffle reduction ---------------------------------------------------------------
@tk.jit
def warp_reduce_sum(out: tk.DevicePointer[f32], a: tk.DevicePointer[f32], n: i32):
    warps = tk.shared_array(f32, 32)
    t = tk.thread_idx().x
    i = tk.block_idx().x * tk.block_dim().x + t
    v = tk.where(i < n, a[tk.min(i, n - 1)], 0.0)
    for delta in (16, 8, 4, 2, 1):  # unrolled shfl_down tree
        v = v + tk.shfl_down(v, delta)
    lane, warp = tk.lane_id(), tk.warp_id()
    with tk.if_(lane == 0):
        warps[warp] = v
    tk.syncthreads()
    with tk.if_(warp == 0):
        nwarps = (tk.block_dim().x + 31) // 32
        w = tk.where(lane < nwarps, warps[lane], 0.0)
        w = tk.warp_sum(w)  # butterfly with shfl_xor
        with tk.if_(lane == 0):
            tk.atomic_add(out, 0, w)


def test_warp_shuffle_reduction(target, rng):
    n = int(rng.integers(5000, 20000)) | 1
    a = random_array(rng, n, np.float32)
    out = np.zeros(1, np.float32)
    warp_reduce_sum[cdiv(n, 160), 160](out, a, n, target=target)
    np.testing.assert_allclose(out[0], a.astype(np.float64).sum(), rtol=1e-4, atol=1e-3)
    compiles_for_gpu(warp_reduce_sum)


# -- tiled matrix multiply ----------------------------------------------------------------
@tk.jit
def matmul(c: tk.DevicePointer[f32], a: tk.DevicePointer[f32], b: tk.DevicePointer[f32],
           M: i32, N: i32, K: i32, TILE: tk.Constexpr[int] = 16):
    sa = tk.shared_array(f32, (TILE, TILE))
    sb = tk.shared_array(f32, (TILE, TILE))
    tx, ty = tk.thread_idx().x, tk.thread_idx().y
    row = tk.block_idx().y * TILE + ty
    col = tk.block_idx().x * TILE + tx
    acc = tk.var(0.0)
    for k0 in tk.range(0, K, TILE):
        ak, bk = k0 + tx, k0 + ty
        sa[ty, tx] = tk.where((row < M) & (ak < K), a[tk.min(row, M - 1) * K + tk.min(ak, K - 1)],
                              0.0)
        sb[ty, tx] = tk.where((bk < K) & (col < N), b[tk.min(bk, K - 1) * N + tk.min(col, N - 1)],
                              0.0)
        tk.syncthreads()
        for k in range(TILE):  # unrolled inner product over the tile
            acc.set(tk.fma(sa[ty, k], sb[k, tx], acc))
        tk.syncthreads()
    with tk.if_((row < M) & (col < N)):
        c[row * N + col] = acc


@pytest.mark.parametrize("tile", [8, 16])
def test_tiled_matmul(target, rng, tile):
    M, N, K = (int(x) | 1 for x in rng.integers(20, 90, size=3))
    a = random_array(rng, (M, K), np.float32)
    b = random_array(rng, (K, N), np.float32)
    c = poisoned((M, N), np.float32)
    matmul[(cdiv(N, tile), cdiv(M, tile)), (tile, tile)](c, a, b, M, N, K, TILE=tile,
                                                         target=target)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    rel = np.abs(c - ref).max() / np.abs(ref).max()
    assert rel <= 1e-5, rel
    compiles_for_gpu(matmul.specialize(TILE=tile))


# -- histogram with shared and global atomics --------------------------------------------
@tk.jit
def histogram(hist: tk.DevicePointer[u32], data: tk.DevicePointer[tk.dt.uint8], n: i32,
              BINS: tk.Constexpr[int] = 256):
    local = tk.shared_array(u32, BINS)
    t = tk.thread_idx().x
    for b in tk.range(t, BINS, tk.block_dim().x):
        local[b] = 0
    tk.syncthreads()
    stride = tk.grid_dim().x * tk.block_dim().x
    for i in tk.range(tk.block_idx().x * tk.block_dim().x + t, n, stride):
        tk.atomic_add(local, data[i] % BINS, 1)
    tk.syncthreads()
    for b in tk.range(t, BINS, tk.block_dim().x):
        count = local[b]
        with tk.if_(count > 0):
            tk.atomic_add(hist, b, count)


@pytest.mark.parametrize("bins", [256, 37])
def test_histogram_shared_and_global_atomics(target, rng, bins):
    n = int(rng.integers(10000, 40000)) | 1
    data = rng.integers(0, 256, size=n).astype(np.uint8)
    hist = np.zeros(bins, np.uint32)
    histogram[7, 96](hist, data, n, bins, target=target)
    np.testing.assert_array_equal(hist, np.bincount(data.astype(np.int64) % bins, minlength=bins))
    compiles_for_gpu(histogram.specialize(BINS=bins))


# -- inclusive prefix scan across blocks --------------------------------------------------
@tk.jit
def scan_blocks(out: tk.DevicePointer[i32], sums: tk.DevicePointer[i32],
                a: tk.DevicePointer[i32], n: i32, BLOCK: tk.Constexpr[int] = 128):
    """Hillis–Steele scan of each block's chunk; the chunk totals go to ``sums``."""
    s = tk.shared_array(i32, BLOCK)
    t = tk.thread_idx().x
    i = tk.block_idx().x * BLOCK + t
    s[t] = tk.where(i < n, a[tk.min(i, n - 1)], 0)
    tk.syncthreads()
    off = 1
    while off < BLOCK:
        prev = tk.where(t >= off, s[tk.where(t >= off, t - off, 0)], 0)
        tk.syncthreads()
        s[t] = s[t] + prev
        tk.syncthreads()
        off *= 2
    with tk.if_(i < n):
        out[i] = s[t]
    with tk.if_(t == BLOCK - 1):
        sums[tk.block_idx().x] = s[t]


@tk.jit
def scan_sums(sums: tk.DevicePointer[i32], nb: i32):
    """Inclusive scan of the block totals by one thread (there are few)."""
    with tk.if_(tk.thread_idx().x == 0):
        run = tk.var(0)
        for b in tk.range(nb):
            run += sums[b]
            sums[b] = run


@tk.jit
def scan_add(out: tk.DevicePointer[i32], sums: tk.DevicePointer[i32], n: i32,
             BLOCK: tk.Constexpr[int] = 128):
    bid = tk.block_idx().x
    i = bid * BLOCK + tk.thread_idx().x
    with tk.if_((bid > 0) & (i < n)):
        out[i] = out[i] + sums[bid - 1]


def test_inclusive_prefix_scan_across_blocks(target, rng):
    n = int(rng.integers(3000, 9000)) | 1
    a = rng.integers(-1000, 1000, size=n).astype(np.int32)
    B = 128
    nb = cdiv(n, B)
    out = poisoned(n, np.int32)
    sums = poisoned(nb, np.int32)
    scan_blocks[nb, B](out, sums, a, n, target=target)
    scan_sums[1, 32](sums, nb, target=target)
    scan_add[nb, B](out, sums, n, target=target)
    np.testing.assert_array_equal(out, np.cumsum(a, dtype=np.int64).astype(np.int32))
    for k in (scan_blocks.specialize(), scan_sums, scan_add.specialize()):
        compiles_for_gpu(k)


# -- row softmax with warp shuffles -------------------------------------------------------
@tk.jit
def softmax_rows(out: tk.DevicePointer[f32], x: tk.DevicePointer[f32], rows: i32, cols: i32):
    """One warp per row: max and sum over the row with warp shuffles."""
    row = tk.block_idx().x * tk.block_dim().y + tk.thread_idx().y
    lane = tk.thread_idx().x
    with tk.if_(row >= rows):
        tk.return_()  # the whole warp leaves together
    base = row * cols
    m = tk.var(-float("inf"))
    for j in tk.range(lane, cols, 32):
        m.set(tk.max(m, x[base + j]))
    mx = tk.warp_max(m)
    s = tk.var(0.0)
    for j in tk.range(lane, cols, 32):
        s += tk.exp(x[base + j] - mx)
    total = tk.warp_sum(s)
    for j in tk.range(lane, cols, 32):
        out[base + j] = tk.exp(x[base + j] - mx) / total


def test_row_softmax_with_warp_shuffles(target, rng):
    rows, cols = int(rng.integers(20, 60)) | 1, int(rng.integers(40, 300)) | 1
    x = (random_array(rng, (rows, cols), np.float32) * 4).astype(np.float32)
    out = poisoned((rows, cols), np.float32)
    softmax_rows[cdiv(rows, 4), (32, 4)](out, x, rows, cols, target=target)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(1, keepdims=True), rtol=2e-5, atol=1e-7)
    compiles_for_gpu(softmax_rows)


# -- tiled transpose with padded shared memory --------------------------------------------
@tk.jit
def transpose(out: tk.DevicePointer[f32], a: tk.DevicePointer[f32], rows: i32, cols: i32,
              TILE: tk.Constexpr[int] = 32, ROWS: tk.Constexpr[int] = 8):
    tile = tk.shared_array(f32, (TILE, TILE + 1))  # +1 column: no bank conflicts
    tx, ty = tk.thread_idx().x, tk.thread_idx().y
    x = tk.block_idx().x * TILE + tx
    y0 = tk.block_idx().y * TILE
    for r in range(0, TILE, ROWS):
        y = y0 + ty + r
        with tk.if_((x < cols) & (y < rows)):
            tile[ty + r, tx] = a[y * cols + x]
    tk.syncthreads()
    ox = y0 + tx  # transposed block
    oy0 = tk.block_idx().x * TILE
    for r in range(0, TILE, ROWS):
        oy = oy0 + ty + r
        with tk.if_((ox < rows) & (oy < cols)):
            out[oy * rows + ox] = tile[tx, ty + r]


def test_tiled_transpose_padded(target, rng):
    rows, cols = (int(x) | 1 for x in rng.integers(30, 140, size=2))
    a = random_array(rng, (rows, cols), np.float32)
    out = poisoned((cols, rows), np.float32)
    transpose[(cdiv(cols, 32), cdiv(rows, 32)), (32, 8)](out, a, rows, cols, target=target)
    np.testing.assert_array_equal(out, a.T)
    compiles_for_gpu(transpose.specialize())


# -- grid-stride SAXPY --------------------------------------------------------------------
@tk.jit
def saxpy(y: tk.DevicePointer[f32], x: tk.DevicePointer[f32], alpha: f32, n: i32):
    start = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    for i in tk.range(start, n, tk.grid_dim().x * tk.block_dim().x):
        y[i] = alpha * x[i] + y[i]


def test_grid_stride_saxpy(target, rng):
    n = int(rng.integers(10000, 50000)) | 1
    x, y = random_array(rng, n, np.float32), random_array(rng, n, np.float32)
    alpha = np.float32(rng.standard_normal())
    ref = alpha * x.astype(np.float64) + y
    saxpy[5, 64](y, x, alpha, n, target=target)  # far fewer threads than elements
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-6)
    compiles_for_gpu(saxpy)


# -- float16 / bfloat16 elementwise with float accumulation --------------------------------
def _half_kernel(dtype):
    @tk.jit(name=f"axpby_rowsum_{dtype.name}")
    def k(out: tk.DevicePointer[dtype], rowsum: tk.DevicePointer[f32],
          a: tk.DevicePointer[dtype], b: tk.DevicePointer[dtype], rows: i32, cols: i32):
        r = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
        with tk.if_(r < rows):
            acc = tk.var(0.0, f32)  # storage is 16-bit, arithmetic in float32
            for j in tk.range(cols):
                i = r * cols + j
                v = a[i].to(f32) * 1.5 + b[i].to(f32)
                out[i] = v  # rounded to the 16-bit type on store
                acc += v
            rowsum[r] = acc
    return k


HALF_KERNELS = {"float16": _half_kernel(f16), "bfloat16": _half_kernel(bf16)}


@pytest.mark.parametrize("name,np_dtype,ulp", [
    ("float16", np.float16, 2.0**-10), ("bfloat16", ml_dtypes.bfloat16, 2.0**-7)])
def test_half_elementwise_float_accumulation(target, rng, name, np_dtype, ulp):
    rows, cols = int(rng.integers(30, 90)) | 1, int(rng.integers(20, 70)) | 1
    a = rng.standard_normal((rows, cols)).astype(np_dtype)
    b = rng.standard_normal((rows, cols)).astype(np_dtype)
    out = poisoned((rows, cols), np_dtype)
    rowsum = poisoned(rows, np.float32)
    k = HALF_KERNELS[name]
    k[cdiv(rows, 32), 32](out, rowsum, a, b, rows, cols, target=target)
    v = a.astype(np.float32) * np.float32(1.5) + b.astype(np.float32)
    got = out.astype(np.float64)
    # One rounding to the 16-bit type (FMA contraction may move a tie by one unit).
    np.testing.assert_allclose(got, v.astype(np_dtype).astype(np.float64),
                               rtol=ulp, atol=ulp * 2.0**-14)
    np.testing.assert_allclose(rowsum, v.astype(np.float64).sum(1), rtol=1e-5, atol=1e-4)
    compiles_for_gpu(k)
