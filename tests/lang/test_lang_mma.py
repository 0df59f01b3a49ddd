"""Tensor cores: tk.mma (m16n8k16, float16/bfloat16 -> float32), tk.ldmatrix and tk.cp_async.

The fragment layouts are pinned per lane against the PTX ISA's tables ("Matrix Fragments
for mma.m16n8k16 with floating point type"; ldmatrix), written out independently below;
results are checked against NumPy within K 2^-22 sum|a_i b_i| per element (the bound the
GPU meets), and the CPU model bit-exactly against float32 accumulation in k order.
"""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import thork as tk
from helpers import compiles_for_gpu, has_plugin, poisoned
from helpers.compiler_suite import require_compiler

f32, u32, i32 = tk.dt.float32, tk.dt.uint32, tk.dt.int32
f16, bf16 = tk.dt.float16, tk.dt.bfloat16

pytest.importorskip("ml_dtypes")  # NumPy's bfloat16
BF16 = np.dtype("bfloat16")
NP = {"float16": np.float16, "bfloat16": BF16}


# -- the PTX tables, written out (groupID = lane >> 2, threadID_in_group = lane % 4) -------
def a_coord(lane, i):
    """(row, col) of element a_i (i = 0..7) of the 16x16 A fragment of ``lane``."""
    g, t = lane >> 2, lane % 4
    row = g if (i < 2 or 4 <= i < 6) else g + 8
    col = t * 2 + (i & 1) + (8 if i >= 4 else 0)
    return row, col


def b_coord(lane, i):
    """(row, col) of element b_i (i = 0..3) of the 16x8 B fragment."""
    g, t = lane >> 2, lane % 4
    return t * 2 + (i & 1) + (8 if i >= 2 else 0), g


def c_coord(lane, i):
    """(row, col) of element c_i (i = 0..3) of the 16x8 C/D fragment."""
    g, t = lane >> 2, lane % 4
    return g + (8 if i >= 2 else 0), t * 2 + (i & 1)


def pack(values):
    """uint32 registers of 16-bit elements, the lower-numbered element in the low half."""
    bits = np.asarray(values).view(np.uint16).astype(np.uint32)
    return bits[..., 0::2] | (bits[..., 1::2] << 16)


def fragments(a, b, c):
    """Per-lane registers (32 x 4, 32 x 2, 32 x 4) of A (16x16), B (16x8), C (16x8)."""
    ar = pack(np.array([[a[a_coord(ln, i)] for i in range(8)] for ln in range(32)]))
    br = pack(np.array([[b[b_coord(ln, i)] for i in range(4)] for ln in range(32)]))
    cr = np.array([[c[c_coord(ln, i)] for i in range(4)] for ln in range(32)], np.float32)
    return ar, br, cr


def unfragment(d):
    out = np.empty((16, 8), np.float32)
    for lane in range(32):
        for i in range(4):
            out[c_coord(lane, i)] = d[lane, i]
    return out


def mma_kernel(dtype):
    @tk.jit
    def mma_tile(ar: tk.DevicePointer[u32], br: tk.DevicePointer[u32],
                 cr: tk.DevicePointer[f32], dr: tk.DevicePointer[f32]):
        """Every lane's registers in, D's registers out, 16 tiles (one warp each)."""
        w, lane = tk.block_idx().x, tk.lane_id()
        a = [ar[(w * 32 + lane) * 4 + i] for i in range(4)]
        b = [br[(w * 32 + lane) * 2 + i] for i in range(2)]
        c = [cr[(w * 32 + lane) * 4 + i] for i in range(4)]
        d = tk.mma(a, b, c, dtype=dtype)
        for i in range(4):
            dr[(w * 32 + lane) * 4 + i] = d[i]
    return mma_tile


MMA = {"float16": mma_kernel(f16), "bfloat16": mma_kernel(bf16)}


def sequential_fp32(a, b, c):
    """D = C + sum_k a_k b_k with float32 rounding after every addition, k in order."""
    d = c.astype(np.float32).copy()
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    for k in range(a.shape[1]):
        d = (d + a32[:, k:k + 1] * b32[k:k + 1, :]).astype(np.float32)
    return d


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_mma_fragments_and_values(target, rng, dtype):
    tiles = 5
    a = rng.standard_normal((tiles, 16, 16)).astype(NP[dtype])
    b = rng.standard_normal((tiles, 16, 8)).astype(NP[dtype])
    c = rng.standard_normal((tiles, 16, 8)).astype(np.float32)
    regs = [fragments(a[w], b[w], c[w]) for w in range(tiles)]
    ar = np.stack([r[0] for r in regs]).astype(np.uint32)
    br = np.stack([r[1] for r in regs]).astype(np.uint32)
    cr = np.stack([r[2] for r in regs])
    dr = poisoned((tiles, 32, 4), np.float32)
    MMA[dtype][tiles, 32](ar, br, cr, dr, target=target)
    for w in range(tiles):
        d = unfragment(dr[w])
        a64, b64 = a[w].astype(np.float64), b[w].astype(np.float64)
        ref = a64 @ b64 + c[w]
        bound = 16 * 2.0**-22 * (np.abs(a64) @ np.abs(b64) + np.abs(c[w]))
        assert (np.abs(d - ref) <= bound).all(), (w, np.abs(d - ref).max())
        if target == "cpu":  # the documented model: exact products, float32 in k order
            np.testing.assert_array_equal(d, sequential_fp32(a[w], b[w], c[w]))
    compiles_for_gpu(MMA[dtype], ("sm_80", "sm_90"))


@pytest.mark.plugin("cpu")
def test_mma_k_order_matters_on_cpu():
    """A case where the order of float32 additions shows: 1 + 2^-24 ... loses the small
    terms added one at a time after the big one, keeps them added first."""
    a = np.zeros((16, 16), np.float16)
    b = np.zeros((16, 8), np.float16)
    a[:, 0] = 1.0
    a[:, 1:] = np.float16(2.0**-12)
    b[0, :] = 1.0
    b[1:, :] = np.float16(2.0**-12)   # products 2^-24: each lost after adding 1 first
    c = np.zeros((16, 8), np.float32)
    ar, br, cr = fragments(a, b, c)
    dr = poisoned((1, 32, 4), np.float32)
    MMA["float16"][1, 32](ar.astype(np.uint32), br.astype(np.uint32), cr, dr, target="cpu")
    d = unfragment(dr[0])
    assert (d == 1.0).all()                       # k order: 1 first, then 15 x 2^-24 (lost)
    assert (sequential_fp32(a, b, c) == d).all()
    assert float(np.float32(15 * 2.0**-24) + np.float32(1.0)) != 1.0  # other orders differ


@tk.jit
def ldm(src: tk.DevicePointer[tk.dt.uint16], out: tk.DevicePointer[u32],
        NUM: tk.Constexpr[int] = 4, TRANS: tk.Constexpr[bool] = False):
    """Four 8x8 matrices in a shared 32 x 8 array (+8 skew); lane l points at row l."""
    s = tk.shared_array(tk.dt.uint16, (32, 16))
    lane = tk.lane_id()
    for j in range(16):
        s[lane, j] = src[lane * 16 + j]
    tk.syncwarp()
    regs = tk.ldmatrix(s, (lane, 8 * (lane % 2)), NUM, trans=TRANS)
    for m in range(NUM):
        out[lane * NUM + m] = regs[m]


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_layout(target, rng, num, trans):
    src = rng.integers(0, 2**16, (32, 16), dtype=np.uint16)
    out = poisoned((32, num), np.uint32)
    ldm[1, 32](src, out, num, trans, target=target)
    # Matrix m: rows given by lanes 8m..8m+7, each row 8 elements from column 8 (lane % 2).
    mats = [np.array([src[8 * m + r, 8 * ((8 * m + r) % 2):8 * ((8 * m + r) % 2) + 8]
                      for r in range(8)]) for m in range(num)]
    for lane in range(32):
        for m in range(num):
            mat = mats[m].T if trans else mats[m]
            lo, hi = mat[lane // 4, 2 * (lane % 4)], mat[lane // 4, 2 * (lane % 4) + 1]
            assert out[lane, m] == (int(lo) | (int(hi) << 16)), (lane, m)
    compiles_for_gpu(ldm.specialize(NUM=num, TRANS=trans), ("sm_75", "sm_90"))


@tk.jit
def ldmatrix_mma(a: tk.DevicePointer[f16], b: tk.DevicePointer[f16], d: tk.DevicePointer[f32]):
    """A (16x16, row-major) and B (16x8, row-major) through shared memory, ldmatrix (B with
    .trans) and one mma: the path a GEMM takes."""
    sa = tk.shared_array(f16, (16, 24))
    sb = tk.shared_array(f16, (16, 16))
    lane = tk.lane_id()
    for j in range(8):
        sa[lane // 2, (lane % 2) * 8 + j] = a[(lane // 2) * 16 + (lane % 2) * 8 + j]
    for j in range(4):
        sb[lane // 2, (lane % 2) * 4 + j] = b[(lane // 2) * 8 + (lane % 2) * 4 + j]
    tk.syncwarp()
    mat, row = lane // 8, lane % 8
    af = tk.ldmatrix(sa, (row + 8 * (mat % 2), 8 * (mat // 2)), 4)
    bf = tk.ldmatrix(sb, (row + 8 * (mat % 2), 0), 2, trans=True)
    r = tk.mma(af, bf, (0.0, 0.0, 0.0, 0.0))
    g, t = lane // 4, lane % 4
    for i in range(4):
        d[(g + 8 * (i // 2)) * 8 + 2 * t + i % 2] = r[i]


def test_ldmatrix_feeds_mma(target, rng):
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 8)).astype(np.float16)
    d = poisoned((16, 8), np.float32)
    ldmatrix_mma[1, 32](a, b, d, target=target)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    bound = 16 * 2.0**-22 * (np.abs(a64) @ np.abs(b64))
    assert (np.abs(d - a64 @ b64) <= bound).all()
    compiles_for_gpu(ldmatrix_mma, ("sm_80", "sm_90"))


@tk.jit
def copies(src: tk.DevicePointer[i32], out: tk.DevicePointer[i32], n: i32):
    """Two committed groups of cp.async copies (16, 8 and 4 bytes; partial src_bytes zero
    fill the rest), waited for one after the other; then the shared tile is written out."""
    s = tk.shared_array(i32, 256)
    tid = tk.thread_idx().x
    for j in range(8):  # poison shared memory first
        s[tid * 8 + j] = -1
    tk.syncthreads()
    # group 1: 16 bytes per thread at s[0:128], only the first n % 5 ints of each read
    tk.cp_async(s, tid * 4, src, tid * 4, 16, src_bytes=4 * (n % 5))
    tk.cp_async_commit()
    # group 2: 8 + 4 + 4 bytes per thread at s[128:256]
    tk.cp_async(s, 128 + tid * 4, src, 128 + tid * 4, 8)
    tk.cp_async(s, 128 + tid * 4 + 2, src, 128 + tid * 4 + 2, 4)
    tk.cp_async(s, 128 + tid * 4 + 3, src, 128 + tid * 4 + 3, 4, src_bytes=0)
    tk.cp_async_commit()
    tk.cp_async_wait(1)              # group 1 is complete
    tk.syncthreads()
    for j in range(4):
        out[tid * 4 + j] = s[tid * 4 + j]
    tk.cp_async_wait(0)              # and group 2
    tk.syncthreads()
    for j in range(4):
        out[128 + tid * 4 + j] = s[128 + tid * 4 + j]


@pytest.mark.parametrize("n", [3, 4])
def test_cp_async_groups_and_zero_fill(target, rng, n):
    src = rng.integers(-1000, 1000, 256).astype(np.int32)
    out = poisoned(256, np.int32)
    copies[1, 32](src, out, n, target=target)
    ref = src.copy()
    k = n % 5
    for t in range(32):
        ref[t * 4 + k:t * 4 + 4] = 0          # beyond src_bytes: zeros
        ref[128 + t * 4 + 3] = 0              # src_bytes=0
    np.testing.assert_array_equal(out, ref)
    compiles_for_gpu(copies, ("sm_80", "sm_90"))


@tk.jit
def early_read(src: tk.DevicePointer[i32], out: tk.DevicePointer[i32]):
    s = tk.shared_array(i32, 32)
    tid = tk.thread_idx().x
    s[tid] = -7
    tk.cp_async(s, tid, src, tid, 4)
    tk.cp_async_commit()
    out[tid] = s[tid]                # read before waiting: not yet copied on the CPU model
    tk.cp_async_wait(0)
    out[32 + tid] = s[tid]


@pytest.mark.plugin("cpu")
def test_cp_async_cpu_model_completes_at_wait():
    """The CPU model carries a copy out at the wait that covers it (the latest moment PTX
    allows), so a kernel reading too early sees stale data there, not the copy."""
    src = np.arange(32, dtype=np.int32) + 100
    out = poisoned(64, np.int32)
    early_read[1, 32](src, out, target="cpu")
    assert (out[:32] == -7).all() and (out[32:] == src).all()


def _example():
    path = Path(__file__).resolve().parents[2] / "examples" / "gemm_mma.py"
    spec = importlib.util.spec_from_file_location("gemm_mma_example", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gemm_mma_example"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("dtype,stages,size", [
    ("bfloat16", 4, (77, 131, 112)), ("float16", 2, (65, 37, 29))], ids=["aligned", "unaligned"])
def test_gemm_example_default_tiles(target, rng, dtype, stages, size):
    """The example's GEMM with the tiles the bench found fastest (128 x 256 x 64, 8 warps of
    64 x 64) and 4 or 2 pipeline stages: edge tiles in M, N (and K when unaligned).
    (Compiling these fully unrolled kernels dominates; the example itself covers both
    dtypes and paths.)"""
    mod = _example()
    M, N, K = size
    a = rng.standard_normal((M, K)).astype(NP[dtype])
    b = rng.standard_normal((K, N)).astype(NP[dtype])
    c = poisoned((M, N), np.float32)
    mod.gemm(c, a, b, M, N, K, dtype, STAGES=stages, target=target)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    bound = K * 2.0**-22 * (np.abs(a64) @ np.abs(b64))
    assert (np.abs(c - a64 @ b64) <= bound).all()
    aligned = K % 8 == 0 and N % 8 == 0
    kern = mod.gemm_kernel(dtype).specialize(BM=128, BN=256, BK=64, WM=64, WN=64,
                                             STAGES=stages, ALIGNED=aligned)
    compiles_for_gpu(kern, ("sm_90",))


@pytest.mark.parametrize("dtype,size,tile", [
    ("float16", (163, 104, 200), dict(STAGES=3, GROUP_M=4)),
    ("bfloat16", (70, 97, 83), dict(STAGES=2, GROUP_M=0)),
    ("float16", (40, 72, 48), dict(STAGES=4, GROUP_M=3, BK=64)),
    ("bfloat16", (163, 104, 200), dict(STAGES=3, GROUP_M=4, SWIZZLE=True)),
    ("float16", (70, 97, 83), dict(STAGES=2, GROUP_M=0, SWIZZLE=True, BN=64, WN=32))],
    ids=["grouped", "row-order-unaligned", "short-k", "swizzled", "swizzled-unaligned"])
def test_gemm_example_many_tiles(target, rng, dtype, size, tile):
    """Small tiles (32 x 32 x 32, 4 warps of 16 x 16), so that the grid has many blocks:
    the grouped tile order with a last group of fewer rows (6 tile rows, groups of 4), the
    plain order, a pipeline deeper than the k tiles with BK = 64 (4 k-steps), the swizzled
    shared layout (rows of 4 and 8 chunks); every element written once (poisoned output)
    and within the bound."""
    mod = _example()
    M, N, K = size
    a = rng.standard_normal((M, K)).astype(NP[dtype])
    b = rng.standard_normal((K, N)).astype(NP[dtype])
    c = poisoned((M, N), np.float32)
    kw = dict(BM=32, BN=32, BK=32, WM=16, WN=16) | tile
    mod.gemm(c, a, b, M, N, K, dtype, target=target, **kw)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    bound = K * 2.0**-22 * (np.abs(a64) @ np.abs(b64))
    assert (np.abs(c - a64 @ b64) <= bound).all()


@pytest.fixture
def hopper(target):
    """The ``target`` fixture, skipping GPUs other than sm_90 (TMA, setmaxnreg: sm_90a)."""
    if target == "gpu":
        from thork_core import gpu_arch

        if not gpu_arch().startswith("sm_90"):
            pytest.skip(f"the GPU is {gpu_arch()}, not a Hopper (sm_90)")
    return target


@pytest.mark.parametrize("dtype,size,tile", [
    ("float16", (100, 72, 136), dict(BM=64, BN=64, WM=32, WN=32, STAGES=3)),
    ("bfloat16", (77, 200, 200), dict(BM=64, BN=128, WM=32, WN=64, STAGES=2, GROUP_M=2)),
    ("float16", (131, 264, 72), dict(BM=128, BN=256, STAGES=4, blocks=2)),
    ("bfloat16", (40, 136, 24), dict(BM=32, BN=64, WM=16, WN=16, STAGES=2, GROUP_M=1)),
    ("float16", (130, 136, 136), dict(BM=64, BN=64, WM=32, WN=32, STAGES=3, ctas=2)),
    ("bfloat16", (100, 200, 136), dict(BM=96, BN=128, WM=48, WN=64, STAGES=3, rows=True,
                                       regs=240)),
    ("float16", (70, 200, 136), dict(BM=64, BN=192, WM=32, WN=96, STAGES=2, rows=True)),
    ("float16", (200, 264, 136), dict(BM=192, BN=256, WM=96, WN=64, STAGES=3, rows=True,
                                      regs=240, blocks=2)),
    ("bfloat16", (70, 264, 136), dict(BM=64, BN=256, WM=32, WN=128, STAGES=2, rows=True)),
    ("float16", (100, 200, 136), dict(BM=32, BN=128, WM=16, WN=64, STAGES=3, cluster=2,
                                      blocks=4)),
    ("bfloat16", (37, 264, 200), dict(BM=128, BN=256, STAGES=2, cluster=2, GROUP_M=1)),
    ("float16", (300, 136, 72), dict(BM=64, BN=128, WM=32, WN=64, STAGES=2, cluster=2,
                                     GROUP_M=2, blocks=5))],
    ids=["persistent-wraps", "grouped-2-stages", "default-tile-setmaxnreg", "short-k",
         "two-blocks-per-sm", "rows-odd-mma-rows", "rows-warp-n-96",
         "rows-96x64-setmaxnreg-240", "rows-warp-n-128", "cluster2-persistent",
         "cluster2-default-tile-peer-past-m", "cluster2-odd-blocks"])
def test_gemm_tma_example(hopper, rng, dtype, size, tile):
    """The TMA-fed kernel (a producer warpgroup, mma.sync consumer warps reading the
    128-byte-swizzled stages by ldmatrix, persistent blocks): edge tiles in M, N and K
    (TMA's zero fill), more tiles than blocks (the stage ring crossing tiles), a ring
    deeper than the k tiles, the default 128 x 256 tile with setmaxnreg, clusters of two
    blocks sharing b by multicast (a peer whose rows lie past M still copies and
    multicasts its share; an odd ``blocks`` rounded down to whole clusters); every element
    written once (poisoned output) and within the bound."""
    mod = _example()
    M, N, K = size
    a = rng.standard_normal((M, K)).astype(NP[dtype])
    b = rng.standard_normal((K, N)).astype(NP[dtype])
    c = poisoned((M, N), np.float32)
    blocks = tile.pop("blocks", None)
    if hopper == "gpu":
        from thork_core import DeviceArray

        da, db, dc = (DeviceArray.from_host(x) for x in (a, b, c))
        mod.prepare_tma(dc, da, db, M, N, K, dtype, blocks=blocks, target="gpu", **tile)()
        c = dc.to_host()
    else:
        mod.prepare_tma(c, a, b, M, N, K, dtype, blocks=blocks, target="cpu", **tile)()
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    bound = K * 2.0**-22 * (np.abs(a64) @ np.abs(b64))
    assert (np.abs(c - a64 @ b64) <= bound).all()


@pytest.mark.parametrize("warps,ctas,regs", [(8, 1, 0), (4, 2, 0), (8, 1, 232),
                                              (8, 1, 240), (4, 1, 240), (8, 1, 176)])
def test_tma_registers_fit_the_block(warps, ctas, regs):
    """setmaxnreg's split: the consumers' raise never exceeds what the producer's release
    puts in the block's pool (a block starts with launch_registers a thread; a larger
    raise waits forever: session 11's hang of 96 x 64 warps), counts multiples of 8 from
    24 to 256, the producer's at most the launch count."""
    mod = _example()
    split = mod.tma_registers(warps, ctas, regs)
    threads = 32 * (warps + 4)
    start = mod.launch_registers(threads, ctas)
    assert start == 65536 // (ctas * threads) // 8 * 8
    if regs and regs <= start:
        assert split is None
        return
    producer, consumer = split
    assert consumer == (regs or consumer) and consumer > start
    assert producer % 8 == 0 and consumer % 8 == 0 and 24 <= producer <= start
    assert 128 * (start - producer) >= warps * 32 * (consumer - start)
    if (warps, ctas, regs) == (8, 1, 240):
        assert split == (24, 240)


def test_gemm_feed_auto_and_tma_from_numpy(target, rng):
    """gemm(): feed="tma" with NumPy arrays (copied to the GPU and back on a Hopper), and
    "auto", which takes TMA only on a Hopper GPU and where sizes and tile allow."""
    mod = _example()
    M, N, K = 70, 64, 80
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    bound = K * 2.0**-22 * (np.abs(a64) @ np.abs(b64))
    for feed in ("tma", "auto"):
        if feed == "tma" and target == "gpu" and not mod.hopper_gpu("gpu"):
            continue
        c = poisoned((M, N), np.float32)
        mod.gemm(c, a, b, M, N, K, "float16", BM=64, BN=64, WM=32, WN=32, STAGES=2,
                 feed=feed, target=target)
        assert (np.abs(c - a64 @ b64) <= bound).all(), feed


def test_gemm_tma_rejects_bad_arguments():
    mod = _example()
    a, b = np.zeros((64, 64), np.float16), np.zeros((64, 64), np.float16)
    c = np.zeros((64, 64), np.float32)
    for kw, msg in ((dict(K=60), "K must be a positive multiple of 8 .*got 60"),
                    (dict(N=36), "N must be a positive multiple of 8 .*got 36"),
                    (dict(BN=96), "BN must be a multiple of 64 and of WN, got 96"),
                    (dict(WN=24, BN=192), "WN must be a positive multiple of 16, got 24"),
                    (dict(BM=192, BN=256, WM=96, regs=236), "REGS must be a multiple of 8 "
                     r"from 24 to 256 .*\(8 consumer warps, 1 blocks .*got 236"),
                    (dict(BM=192, BN=256, WM=96, regs=248), "REGS .*got 248"),
                    (dict(BM=128, WM=32), "4 or 8 consumer warps .*got 16"),
                    (dict(STAGES=1), "STAGES must be >= 2, got 1"),
                    (dict(ctas=3), "ctas must be 1 or 2, got 3"),
                    (dict(cluster=4), r"cluster must be 1 or 2 \(dividing BN / 64\), got 4"),
                    (dict(BN=64, WN=32, BM=64, WM=32, cluster=2), "cluster .*got 2")):
        args = dict(M=64, N=64, K=64)
        args.update({k: v for k, v in kw.items() if k in args})
        tile = {k: v for k, v in kw.items() if k not in args}
        with pytest.raises(ValueError, match=msg):
            mod.prepare_tma(c, a, b, args["M"], args["N"], args["K"], target="cpu", **tile)
    with pytest.raises(ValueError, match="a, b: NumPy arrays run on the CPU target only"):
        mod.prepare_tma(c, a, b, 64, 64, 64, target="gpu")
    with pytest.raises(ValueError, match="feed must be 'auto', 'tma' or 'cp.async'"):
        mod.gemm(c, a, b, 64, 64, 64, feed="wgmma")


def test_gemm_tma_kernel_compiles_for_sm90a():
    """The default TMA-fed kernel builds for sm_90a (TMA, mbarriers, setmaxnreg) with the
    installed CUDA compilers."""
    mod = _example()
    kern = mod.gemm_tma_kernel("bfloat16").specialize(PAIRS=True)
    compiles_for_gpu(kern, ("sm_90",))
    big = mod.gemm_tma_kernel("float16").specialize(BM=192, WM=96, PAIRS=True, REGS=240,
                                                    ROWS=True)  # warps of 96 x 64
    compiles_for_gpu(big, ("sm_90",))
    clustered = mod.gemm_tma_kernel("bfloat16").specialize(PAIRS=True, CLUSTER=2)
    compiles_for_gpu(clustered, ("sm_90",))


def test_gemm_example_rejects_uneven_tiles():
    mod = _example()
    with pytest.raises(ValueError, match="spread evenly"):
        mod.gemm(None, None, None, 8, 8, 8, BM=32, BN=32, BK=16, WM=16, WN=16)
    with pytest.raises(ValueError, match="BK must be at least 32.*got 16"):
        mod.gemm(None, None, None, 8, 8, 8, BM=16, BN=16, BK=16, WM=16, WN=16)
    with pytest.raises(ValueError, match="SWIZZLE: BK and BN must be powers of two.*BK=48"):
        mod.gemm(None, None, None, 8, 8, 8, BM=32, BN=96, BK=48, WM=16, WN=32,
                 SWIZZLE=True)


def test_mma_arch_floor():
    if not has_plugin("nvrtc"):
        pytest.skip("no NVRTC")
    with pytest.raises(tk.CompileError, match="sm_80 or newer.*sm_75"):
        MMA["float16"].artifact("sm_75", compiler="nvrtc")
    src = MMA["bfloat16"].cuda_source
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in src


@pytest.mark.parametrize("compiler", ["nvcc", "clang"])
def test_mma_compiles_under_nvcc_and_clang(compiler):
    """(a compiler installed but not usable here, e.g. no clang++ on PATH, skips saying
    why: the README's test command runs before CI installs clang)"""
    require_compiler(compiler)
    for arch in ("sm_80", "sm_90"):
        for kern in (copies, ldmatrix_mma, MMA["bfloat16"]):
            art = kern.artifact(arch, compiler=compiler)
            assert art.kind == "cubin" and art.data[:4] == b"\x7fELF", (compiler, arch)


def test_mma_errors():
    def trace(fn):
        k = tk.jit(fn)
        with pytest.raises(tk.TraceError) as info:
            k.ir  # noqa: B018 - tracing raises
        return str(info.value)

    def bad_dtype(x: tk.DevicePointer[u32]):
        tk.mma((x[0],) * 4, (x[0],) * 2, (0.0,) * 4, dtype=f32)
    assert "float16 or bfloat16" in trace(bad_dtype)

    def short_a(x: tk.DevicePointer[u32]):
        tk.mma((x[0],) * 3, (x[0],) * 2, (0.0,) * 4)
    assert "a must be a tuple of 4" in trace(short_a)

    def float_regs(x: tk.DevicePointer[f32]):
        tk.mma((x[0],) * 4, (x[0],) * 2, (0.0,) * 4)
    assert "32-bit integers" in trace(float_regs)

    def global_ldmatrix(x: tk.DevicePointer[f16]):
        tk.ldmatrix(x, 0)
    assert "shared array" in trace(global_ldmatrix)

    def wide_ldmatrix(x: tk.DevicePointer[f16]):
        tk.ldmatrix(tk.shared_array(f32, 64), 0)
    assert "16-bit elements" in trace(wide_ldmatrix)

    def bad_nbytes(x: tk.DevicePointer[f16]):
        tk.cp_async(tk.shared_array(f16, 64), 0, x, 0, 12)
    assert "4, 8 or 16" in trace(bad_nbytes)

    def shared_source(x: tk.DevicePointer[f16]):
        s = tk.shared_array(f16, 64)
        tk.cp_async(s, 0, s, 8, 16)
    assert "global array" in trace(shared_source)

    def too_many_src_bytes(x: tk.DevicePointer[f16]):
        tk.cp_async(tk.shared_array(f16, 64), 0, x, 0, 8, src_bytes=9)
    assert "from 0 to 8" in trace(too_many_src_bytes)

    def bad_wait(x: tk.DevicePointer[f16]):
        tk.cp_async_wait(-1)
    assert "from 0 to 7" in trace(bad_wait)


@pytest.mark.plugin("cpu")
def test_cpu_mma_in_partial_warp_is_an_error():
    """48 threads: the second warp has 16 lanes; mma there is undefined on the GPU and a
    named LaunchError on the CPU target (not garbage from lanes that do not exist)."""
    a = np.zeros((2, 32, 4), np.uint32)
    b = np.zeros((2, 32, 2), np.uint32)
    c = np.zeros((2, 32, 4), np.float32)
    d = poisoned((2, 32, 4), np.float32)
    with pytest.raises(tk.LaunchError, match="warp missing lanes"):
        MMA["float16"][1, 48](a, b, c, d, target="cpu")
    MMA["float16"][2, 32](a, b, c, d, target="cpu")   # whole warps: fine
    assert (d == 0).all()
