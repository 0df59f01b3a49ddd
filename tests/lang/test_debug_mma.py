"""Debug mode (docs/debug-mode.md) on the tensor-core memory operations: ``tk.cp_async``
(global -> shared) and ``tk.ldmatrix`` (shared -> registers). In range, a checked kernel
gives NumPy's result; one element past an array is reported with the array, the index and
the bound. ``tk.mma`` itself reads only registers: nothing to check."""

from __future__ import annotations

import numpy as np
import pytest
import thork as tk
from helpers import compiles_for_gpu, poisoned
from thork_core import BoundsError

i32, u16, u32 = tk.dt.int32, tk.dt.uint16, tk.dt.uint32


@tk.jit(debug=True)
def copy_tile(src: tk.DevicePointer[i32], out: tk.DevicePointer[i32], k: i32, sb: i32):
    """Each of 32 threads copies 16 bytes (4 ints) from src[4t + k], reading ``sb`` bytes
    (a run-time value; the rest zero-filled), and 8 bytes with a fixed size."""
    s = tk.shared_array(i32, 192)
    tid = tk.thread_idx().x
    tk.cp_async(s, tid * 4, src, tid * 4 + k, 16, src_bytes=sb)
    tk.cp_async(s, 128 + tid * 2, src, tid * 2, 8)
    tk.cp_async_commit()
    tk.cp_async_wait(0)
    tk.syncthreads()
    for j in range(6):
        out[tid * 6 + j] = s[tid * 6 + j]


def _copy_reference(src: np.ndarray, k: int, sb: int) -> np.ndarray:
    s = np.zeros(192, np.int32)
    for t in range(32):
        n = sb // 4
        s[4 * t:4 * t + n] = src[4 * t + k:4 * t + k + n]
    s[128:192] = src[:64]
    return s


# k moves every thread's 16-byte source by k ints: a multiple of 4 keeps it 16-byte
# aligned, as cp.async requires (k = 1 and 3 read the aligned address below on the H200,
# 2026-12-01: misalignment is the caller's error, not modelled).
@pytest.mark.parametrize(("k", "sb"), [(0, 16), (4, 12), (8, 4), (5, 0)])
def test_debug_cp_async_in_range_matches_numpy(target, rng, k, sb):
    # src has 128 + k - (16 - sb) / 4 elements: exactly what the last thread reads
    # (sb == 0 reads nothing, so its source address may be past the end).
    n = 128 + k - (16 - sb) // 4 if sb else 100
    src = rng.integers(-1000, 1000, n).astype(np.int32)
    out = poisoned(192, np.int32)
    copy_tile[1, 32](src, out, k, sb, target=target)
    np.testing.assert_array_equal(out, _copy_reference(np.pad(src, (0, 64)), k, sb))


@pytest.mark.parametrize(("k", "sb", "size"), [(1, 16, 128), (0, 0, 63), (2, 12, 128)])
def test_debug_cp_async_reports_the_source_past_its_end(target, k, sb, size):
    src = np.arange(size, dtype=np.int32)
    with pytest.raises(BoundsError) as info:
        copy_tile[1, 32](src, poisoned(192, np.int32), k, sb, target=target)
    e = info.value
    # Only thread 31 reads past the end (so the report is the same on every target): the
    # run-time sized copy names its last element read, 4 * 31 + k + sb / 4 - 1; the fixed
    # 8-byte copy (the first reads nothing, sb == 0) its start, 62, 2 elements wide.
    assert e.thread == (31, 0, 0) and e.array == "src" and e.lo == 0
    if sb:
        assert (e.hi, e.index) == (128, 124 + k + sb // 4 - 1)
    else:
        assert (e.hi, e.index) == (63, 62) and "2 elements from there" in str(e)
    assert "cp.async load of parameter 'src'" in str(e)
    assert f"index {e.index}" in str(e) and e.line is not None


@tk.jit(debug=True)
def copy_into_short_tile(src: tk.DevicePointer[i32], out: tk.DevicePointer[i32]):
    s = tk.shared_array(i32, 126)  # two ints short of 32 x 4
    tid = tk.thread_idx().x
    tk.cp_async(s, tid * 4, src, tid * 4, 16)
    tk.cp_async_commit()
    tk.cp_async_wait(0)
    tk.syncthreads()  # s[0] is thread 0's copy (racecheck flagged the read without it)
    out[tid] = s[0]


def test_debug_cp_async_reports_the_shared_destination(target):
    src = np.arange(128, dtype=np.int32)
    with pytest.raises(BoundsError) as info:
        copy_into_short_tile[1, 32](src, poisoned(32, np.int32), target=target)
    e = info.value
    # 4 elements from 124 do not fit 126: with a fixed width the bound is shown whole.
    assert e.param_index is None and e.index == 124 and e.hi == 126 and e.lo == 0
    assert "cp.async store of shared array" in str(e) and "4 elements from there" in str(e)
    assert e.thread == (31, 0, 0)


@tk.jit(debug=True)
def ldm2(src: tk.DevicePointer[u16], out: tk.DevicePointer[u32], off: i32):
    """Rows 0..31 of 8 uint16 in shared memory; lane l points at row l + off; two 8x8
    matrices (lanes 0-15 give the rows; lanes 16-31's addresses are not read)."""
    s = tk.shared_array(u16, (32, 8))
    lane = tk.lane_id()
    for j in range(8):
        s[lane, j] = src[lane * 8 + j]
    tk.syncwarp()
    r = tk.ldmatrix(s, (tk.cast(lane, i32) + off, 0), 2)
    out[lane * 2] = r[0]
    out[lane * 2 + 1] = r[1]


@pytest.mark.parametrize("off", [0, 9, 16])
def test_debug_ldmatrix_in_range_matches_numpy(target, rng, off):
    # off=16: lanes 16-31 point past the tile, which ldmatrix.x2 does not read.
    src = rng.integers(0, 2**16, 256, dtype=np.uint16)
    out = poisoned(64, np.uint32)
    ldm2[1, 32](src, out, off, target=target)
    rows = src.reshape(32, 8)
    for lane in range(32):
        for m in range(2):  # PTX's fragment layout (docs/language-mma.md)
            mat = rows[8 * m + off:8 * m + off + 8]
            lo, hi = mat[lane // 4, 2 * (lane % 4)], mat[lane // 4, 2 * (lane % 4) + 1]
            assert out[2 * lane + m] == (int(lo) | (int(hi) << 16)), (lane, m)


def test_debug_ldmatrix_reports_a_row_past_the_tile(target):
    src = np.zeros(256, np.uint16)
    with pytest.raises(BoundsError) as info:
        ldm2[1, 32](src, poisoned(64, np.uint32), 17, target=target)
    e = info.value
    # Lane 15 gives row 32 of a 32-row tile: element 256 of 256, 8 elements wide.
    assert e.thread == (15, 0, 0) and e.param_index is None
    assert e.index - e.lo == 256 and e.hi - e.lo == 256
    assert "ldmatrix load of shared array" in str(e) and "8 elements from there" in str(e)


def test_debug_mma_kernels_compile_for_the_gpu():
    """The checked cp.async and ldmatrix build to cubin (NVRTC; no GPU needed)."""
    src = copy_tile.cuda_source
    assert "thork_ok(" in src and "thork_ok(" in ldm2.cuda_source
    for kernel in (copy_tile, copy_into_short_tile, ldm2):
        compiles_for_gpu(kernel, ("sm_80", "sm_90"))
