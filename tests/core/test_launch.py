"""Launch semantics: 3-D geometry, what is copied back, device arrays, and bad input."""

import numpy as np
import pytest
import thork as tk
from helpers import TARGETS, poisoned
from thork_core import ArgumentError, TraceError


@tk.jit
def index3d(
    out: tk.DevicePointer[tk.dt.uint32],
    bid: tk.Uint3[tk.BlockIdx],
    tid: tk.Uint3[tk.ThreadIdx],
    bdm: tk.Uint3[tk.BlockDim],
    gdm: tk.Uint3[tk.GridDim],
):
    x = bid.x * bdm.x + tid.x
    y = bid.y * bdm.y + tid.y
    z = bid.z * bdm.z + tid.z
    w = gdm.x * bdm.x
    h = gdm.y * bdm.y
    i = (z * h + y) * w + x
    out[i] = x + 1000 * y + 1000000 * z


@pytest.mark.parametrize("grid,block", [((3, 2, 5), (4, 3, 2)), ((7, 1, 1), (5, 1, 1)),
                                        ((1, 4, 3), (2, 8, 4)), (5, (3, 2))])
def test_uint3_covers_3d_grids_and_blocks(target, grid, block):
    g = grid if isinstance(grid, tuple) else (grid, 1, 1)
    b = tuple(block) + (1,) * (3 - len(block))
    W, H, D = g[0] * b[0], g[1] * b[1], g[2] * b[2]
    out = poisoned((D, H, W), np.uint32)
    index3d[grid, block](out, target=target)
    z, y, x = np.meshgrid(np.arange(D), np.arange(H), np.arange(W), indexing="ij")
    np.testing.assert_array_equal(out, (x + 1000 * y + 1000000 * z).astype(np.uint32))


@tk.jit
def write_first_half(
    out: tk.DevicePointer[tk.dt.float32],
    src: tk.DevicePointer[tk.dt.float32],
    n: tk.dt.int32,
    bid: tk.Uint[tk.BlockIdx],
    tid: tk.Uint[tk.ThreadIdx],
    bdm: tk.Uint[tk.BlockDim],
):
    i = bid * bdm + tid
    with tk.if_(i < n // 2):
        out[i] = src[i] * 2.0


def test_unwritten_elements_keep_host_values(target, rng):
    n = 1001
    src = rng.standard_normal(n).astype(np.float32)
    out = rng.standard_normal(n).astype(np.float32)
    before = out.copy()
    write_first_half[(n + 63) // 64, 64](out, src, n, target=target)
    np.testing.assert_array_equal(out[: n // 2], src[: n // 2] * 2)
    np.testing.assert_array_equal(out[n // 2:], before[n // 2:])


def test_read_only_arrays_are_not_copied_back(target, rng):
    n = 257
    src = rng.standard_normal(n).astype(np.float32)
    src.flags.writeable = False  # copying back into it would raise
    out = poisoned(n, np.float32)
    write_first_half[(n + 63) // 64, 64](out, src, n, target=target)
    np.testing.assert_array_equal(out[: n // 2], src[: n // 2] * 2)
    params = {p.name: p for p in write_first_half.params}
    assert params["src"].reads and not params["src"].writes
    assert params["out"].writes and not params["out"].reads


@pytest.mark.gpu
def test_gpu_copies_back_only_written_arrays(rng, monkeypatch):
    from thork_core import _staging

    calls = []
    real = _staging.round_trip

    def spy(copies, stage, stream, transfers, launch, **kw):
        calls.append([(t.nbytes, t.back) for t in transfers])
        return real(copies, stage, stream, transfers, launch, **kw)

    monkeypatch.setattr(_staging, "round_trip", spy)
    n = 999
    src = rng.standard_normal(n).astype(np.float32)
    out = poisoned(n, np.float32)
    write_first_half[(n + 63) // 64, 64](out, src, n, target="gpu")
    assert calls == [[(out.nbytes, True), (src.nbytes, False)]]
    np.testing.assert_array_equal(out[: n // 2], src[: n // 2] * 2)


def test_writing_a_read_only_array_is_an_error(target):
    out = np.zeros(10, np.float32)
    out.flags.writeable = False
    with pytest.raises(ArgumentError, match="'out' is written by the kernel but the array is read-only"):
        write_first_half[1, 10](out, np.zeros(10, np.float32), 10, target=target)


# -- bad input: each error names the parameter, what was expected and what came -----------
def test_wrong_dtype(target):
    with pytest.raises(ArgumentError, match=r"parameter 'src' expects dtype float32, got float64"):
        write_first_half[1, 8](np.zeros(8, np.float32), np.zeros(8), 8, target=target)


def test_wrong_ndim(target):
    @tk.jit
    def two_d(m: tk.DevicePointer[tk.dt.float32, 2], tid: tk.Uint[tk.ThreadIdx]):
        m[tid] = 1.0

    with pytest.raises(ArgumentError, match=r"parameter 'm' expects a 2-D array, got 1-D"):
        two_d[1, 4](np.zeros(4, np.float32), target=target)
    m = np.zeros((2, 2), np.float32)
    two_d[1, 4](m, target=target)
    np.testing.assert_array_equal(m, np.ones((2, 2), np.float32))


def test_scalar_given_an_array(target):
    with pytest.raises(ArgumentError, match=r"parameter 'n' is a scalar int32, got an array"):
        write_first_half[1, 8](np.zeros(8, np.float32), np.zeros(8, np.float32),
                               np.zeros(8, np.int32), target=target)


def test_scalar_out_of_range_and_wrong_type(target):
    o, s = np.zeros(8, np.float32), np.zeros(8, np.float32)
    with pytest.raises(ArgumentError, match=r"'n' value 4294967296 is out of range for int32"):
        write_first_half[1, 8](o, s, 2**32, target=target)
    with pytest.raises(ArgumentError, match=r"'n' expects an int for int32, got float 2.5"):
        write_first_half[1, 8](o, s, 2.5, target=target)


def test_non_contiguous(target):
    src = np.zeros(16, np.float32)[::2]
    with pytest.raises(ArgumentError, match=r"parameter 'src' needs a C-contiguous array"):
        write_first_half[1, 8](np.zeros(8, np.float32), src, 8, target=target)


def test_wrong_argument_count(target):
    with pytest.raises(ArgumentError, match=r"takes 3 argument\(s\) \(out, src, n\), got 2"):
        write_first_half[1, 8](np.zeros(8, np.float32), np.zeros(8, np.float32), target=target)


def test_not_an_array(target):
    with pytest.raises(ArgumentError, match=r"parameter 'src' expects an array of float32"):
        write_first_half[1, 8](np.zeros(8, np.float32), [1.0] * 8, 8, target=target)


@pytest.mark.parametrize("block,msg", [
    ((1025, 1, 1), r"block.x = 1025 exceeds the CUDA limit of 1024"),
    ((32, 32, 2), r"2048 threads; at most 1024"),
    ((1, 1, 65), r"block.z = 65 exceeds the CUDA limit of 64"),
    ((0, 1, 1), r"block.x must be a positive int, got 0"),
])
def test_bad_block(block, msg):
    with pytest.raises(ArgumentError, match=msg):
        write_first_half[1, block]


@pytest.mark.parametrize("grid,msg", [
    ((), r"grid must be an int or a tuple of 1 to 3 positive ints, got \(\)"),
    ((1, 2, 3, 4), r"grid must be an int or a tuple of 1 to 3 positive ints"),
    ((2.0, 1), r"grid.x must be a positive int, got 2.0"),
    ((-1,), r"grid.x must be a positive int, got -1"),
    ((1, 70000), r"grid.y = 70000 exceeds the CUDA limit of 65535"),
    ("8", r"grid must be an int or a tuple"),
])
def test_bad_grid(grid, msg):
    with pytest.raises(ArgumentError, match=msg):
        write_first_half[grid, 32]


def test_bool_of_traced_value_names_the_alternative():
    @tk.jit
    def bad(out: tk.DevicePointer[tk.dt.float32], tid: tk.Uint[tk.ThreadIdx]):
        if tid < 4:
            out[tid] = 1.0

    with pytest.raises(TraceError, match=r"tk.if_\(cond\).*tk.where\(cond, a, b\)"):
        bad.source


def test_missing_annotation_is_named():
    @tk.jit
    def bad(out, tid: tk.Uint[tk.ThreadIdx]):
        out[tid] = 1

    with pytest.raises(TraceError, match=r"parameter 'out' has no annotation"):
        bad.source


def test_unknown_target_is_named():
    from thork_core import NoTargetError

    with pytest.raises(NoTargetError, match=r"no target named 'tpu' is installed"):
        write_first_half[1, 8](np.zeros(8, np.float32), np.zeros(8, np.float32), 8, target="tpu")


@pytest.mark.skipif("gpu" in TARGETS, reason="checks the CPU fallback when no GPU is visible")
def test_device_target_unavailable_is_explained():
    from thork_core import NoTargetError

    with pytest.raises(NoTargetError, match=r"target 'gpu' is not available here"):
        write_first_half[1, 8](np.zeros(8, np.float32), np.zeros(8, np.float32), 8, target="gpu")
