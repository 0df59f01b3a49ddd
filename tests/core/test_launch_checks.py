"""Checked before launch (docs/guarantees.md): launch geometry, dynamic shared memory,
scalar ranges and byte order get an ArgumentError naming the kernel, the parameter, what
was expected and what came — on every target, before anything runs (outputs untouched)."""

import numpy as np
import pytest
import thork as tk
from helpers import poisoned, random_array
from thork_core import ArgumentError
from thork_core.launch import MAX_SHARED_PER_BLOCK

f32, f16, i32 = tk.dt.float32, tk.dt.float16, tk.dt.int32


@tk.jit
def scaled(out: tk.DevicePointer[f32], a: tk.DevicePointer[f32], s: f32, n: i32):
    i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    with tk.if_(i < n):
        out[i] = a[i] * s


@tk.jit
def with_static_shared(out: tk.DevicePointer[f32], n: i32):
    buf = tk.shared_array(f32, 1024)  # 4 KiB of static shared memory
    t = tk.thread_idx().x
    buf[t] = tk.cast(t, f32)
    tk.syncthreads()
    with tk.if_(t < n):
        out[t] = buf[t] * 2.0


@pytest.mark.parametrize("grid,block,fragment", [
    (1, 2048, r"block.x = 2048 exceeds the CUDA limit of 1024"),
    (1, (64, 32), r"block \(64, 32, 1\) has 2048 threads; at most 1024"),
    (1, (1, 1, 65), r"block.z = 65 exceeds the CUDA limit of 64"),
    ((1, 65536), 32, r"grid.y = 65536 exceeds the CUDA limit of 65535"),
    (2**31, 32, r"grid.x = 2147483648 exceeds the CUDA limit of 2147483647"),
    (0, 32, r"grid.x must be a positive int, got 0"),
    (1, (32, 0), r"block.y must be a positive int, got 0"),
    (1.0, 32, r"grid must be an int or a tuple"),
])
def test_geometry_is_checked_and_names_the_kernel(target, rng, grid, block, fragment):
    a = random_array(rng, 33, np.float32)
    out = poisoned(33, np.float32)
    with pytest.raises(ArgumentError, match=r"scaled\[grid, block\]: .*" + fragment):
        scaled[grid, block](out, a, 2.0, 33, target=target)
    assert np.isnan(out).all()


@pytest.mark.parametrize("plain,config,fragment", [
    ((1, 32), (1.0, 32), r"grid must be an int or a tuple"),
    ((1, 32), (True, 32), r"grid must be an int or a tuple"),
    ((1, 32), (1, 32.0), r"block must be an int or a tuple"),
    ((1, 32, 1), (1, 32, True), r"shared_bytes must be a non-negative int, got True"),
    (((1,), 32), ((1.0,), 32), r"grid.x must be a positive int"),
])
def test_a_launch_seen_before_does_not_admit_equal_floats_or_bools(target, rng, plain, config,
                                                                   fragment):
    # kernel[grid, block] is memoized by its key; 1.0 and True hash like 1, so a memo
    # that trusted equality would hand them the launch checked for the plain ints.
    a = random_array(rng, 33, np.float32)
    out = poisoned(33, np.float32)
    scaled[plain](out, a, 2.0, 33, target=target)  # the plain-int launch: memoized
    np.testing.assert_array_equal(out[:32], a[:32] * np.float32(2.0))
    out = poisoned(33, np.float32)
    with pytest.raises(ArgumentError, match=fragment):
        scaled[config](out, a, 2.0, 33, target=target)
    assert np.isnan(out).all()


def test_the_launch_memo_from_many_threads_keeps_its_checks(target, rng):
    # plain configurations (memoized) and equal floats / bools (always checked) at once
    import threading

    from helpers import run_threads

    n = 45
    a = random_array(rng, n, np.float32)
    start = threading.Barrier(8)

    def work(i: int) -> None:
        start.wait()
        for k in range(25):
            out = poisoned(n, np.float32)
            if (i + k) % 3:
                scaled[(2, 32) if k % 2 else ((2,), (32,))](out, a, 2.0, n, target=target)
                np.testing.assert_array_equal(out, a * np.float32(2.0))
            else:
                with pytest.raises(ArgumentError, match="must be an int or a tuple|positive"):
                    scaled[(2.0, 32) if k % 2 else (True, (32,))](out, a, 2.0, n,
                                                                   target=target)
                assert np.isnan(out).all()

    run_threads(work, 8, join_seconds=120)


@pytest.mark.parametrize("config", [
    (np.int64(2), 32), (2, np.int32(32)), (np.uint8(2), (np.int16(32),)),
    ((np.int64(2), 1), 32, np.int64(0)),
])
def test_numpy_integers_are_launch_geometry_like_ints(target, rng, config):
    # A grid computed with NumPy (np.int64) means the same as the int, bare or in a tuple.
    n = 61
    a = random_array(rng, n, np.float32)
    for _ in range(2):  # the second call: whatever the launch memo kept
        out = poisoned(n, np.float32)
        scaled[config](out, a, 2.0, n, target=target)
        np.testing.assert_array_equal(out, a * np.float32(2.0))
    with pytest.raises(ArgumentError, match="grid must be an int or a tuple"):
        scaled[np.float64(2), 32](out, a, 2.0, n, target=target)
    with pytest.raises(ArgumentError, match="grid must be an int or a tuple"):
        scaled[np.bool_(True), 32](out, a, 2.0, n, target=target)


@pytest.mark.parametrize("shared", [2**40, 2**64, MAX_SHARED_PER_BLOCK + 1, -1, -(2**63),
                                    True, 1.5])
def test_dynamic_shared_memory_out_of_range_is_rejected(target, rng, shared):
    a = random_array(rng, 33, np.float32)
    out = poisoned(33, np.float32)
    with pytest.raises(ArgumentError, match=r"scaled\[grid, block, shared_bytes\]"):
        scaled[1, 64, shared](out, a, 2.0, 33, target=target)
    assert np.isnan(out).all()


def test_dynamic_plus_static_shared_memory_must_fit_one_block(target):
    out = poisoned(40, np.float32)
    fits = MAX_SHARED_PER_BLOCK - 4096
    if target == "cpu":  # the GPU's own opt-in limit may be lower (checked by the driver)
        with_static_shared[1, 64, fits](out, 40, target=target)
        np.testing.assert_array_equal(out, np.arange(40, dtype=np.float32) * 2)
    with pytest.raises(ArgumentError, match=r"beside the kernel's 4096 static bytes.*"
                                            rf"expected at most {fits}"):
        with_static_shared[1, 64, fits + 1](out, 40, target=target)


@pytest.mark.parametrize("value,fragment", [
    (1e39, r"parameter 's' is float32: expected a value of magnitude at most 3.40282e\+38"),
    (-3.5e38, r"parameter 's' is float32: .*got -3.5e\+38, which would become inf"),
    (2**1100, r"parameter 's' is float32: got an int of 1101 bits"),
])
def test_float_scalar_overflowing_float32_is_rejected(target, rng, value, fragment):
    a = random_array(rng, 33, np.float32)
    out = poisoned(33, np.float32)
    with pytest.raises(ArgumentError, match=r"scaled\(\): " + fragment):
        scaled[1, 64](out, a, value, 33, target=target)
    assert np.isnan(out).all()


def test_float_scalar_edges_that_stay_finite_or_are_asked_inf(target):
    a = np.ones(5, np.float32)
    out = poisoned(5, np.float32)
    big = float(np.finfo(np.float32).max)
    scaled[1, 32](out, a, big * (1 + 2**-25), 5, target=target)  # rounds down to max
    np.testing.assert_array_equal(out, np.full(5, big, np.float32))
    scaled[1, 32](out, a, float("-inf"), 5, target=target)
    np.testing.assert_array_equal(out, np.full(5, -np.inf, np.float32))


@tk.jit
def half_scaled(out: tk.DevicePointer[f32], s: f16):
    out[tk.thread_idx().x] = tk.cast(s, f32)


def test_float16_scalar_overflow_is_rejected(target):
    out = poisoned(4, np.float32)
    with pytest.raises(ArgumentError, match=r"half_scaled\(\): parameter 's' is float16.*65504"):
        half_scaled[1, 4](out, 70000.0, target=target)
    half_scaled[1, 4](out, 65519.0, target=target)  # below the rounding edge: 65504
    np.testing.assert_array_equal(out, np.full(4, 65504, np.float32))


@pytest.mark.parametrize("value", [2**31, -(2**31) - 1, 2**64])
def test_int_scalar_out_of_range_is_rejected(target, rng, value):
    a = random_array(rng, 33, np.float32)
    out = poisoned(33, np.float32)
    with pytest.raises(ArgumentError, match=rf"scaled\(\): parameter 'n' value {value} is out "
                                            r"of range for int32"):
        scaled[1, 64](out, a, 1.0, value, target=target)


@pytest.mark.parametrize("which", ["input", "output"])
def test_big_endian_arrays_are_rejected(target, rng, which):
    a = random_array(rng, 33, np.float32)
    out = poisoned(33, np.float32)
    if which == "input":
        args, name = (out, a.astype(">f4")), "a"
    else:
        args, name = (out.astype(">f4"), a), "out"
    with pytest.raises(ArgumentError, match=rf"scaled\(\): parameter '{name}': array of dtype "
                                            r"'>f4' has non-native byte order"):
        scaled[1, 64](*args, 2.0, 33, target=target)
    scaled[1, 64](out, a, 2.0, 33, target=target)
    np.testing.assert_array_equal(out, a * np.float32(2))
