"""Shaped arrays: tk.DevicePointer[dtype, ndim] indexed a[y, x], with .shape, .strides,
.size and tk.len taken from the argument at launch (one compile for every size)."""

import numpy as np
import pytest
import thork as tk
from helpers import compiles_for_gpu, poisoned, random_array
from thork_core import ArgumentError, TraceError

f32, i32 = tk.dt.float32, tk.dt.int32


@tk.jit
def stencil(a: tk.DevicePointer[f32, 2], out: tk.DevicePointer[f32, 2]):
    """5-point Laplacian on the interior; the border copies the input."""
    x = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    y = tk.block_idx().y * tk.block_dim().y + tk.thread_idx().y
    h, w = a.shape
    with tk.if_((y < h) & (x < w)):
        with tk.if_((y > 0) & (y < h - 1) & (x > 0) & (x < w - 1)):
            out[y, x] = a[y - 1, x] + a[y + 1, x] + a[y, x - 1] + a[y, x + 1] - 4.0 * a[y, x]
        with tk.else_():
            out[y, x] = a[y, x]


def _stencil_ref(a):
    ref = a.copy()
    ref[1:-1, 1:-1] = (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:]
                       - 4.0 * a[1:-1, 1:-1])
    return ref


def test_stencil_many_sizes_one_compile(target, rng):
    infos = set()
    for h, w in [(37, 53), (5, 130), (64, 3)]:
        a = random_array(rng, (h, w), np.float32)
        out = poisoned((h, w), np.float32)
        stencil[((w + 15) // 16, (h + 15) // 16), (16, 16)](a, out, target=target)
        np.testing.assert_allclose(out, _stencil_ref(a), rtol=1e-5, atol=1e-5)
        infos.add(stencil.compile_info.key)
    assert len(infos) == 1  # extents are run-time arguments: no recompile per size
    # The extents are hidden int32 parameters after the caller's.
    names = [p.name for p in stencil.params]
    assert names[:2] == ["a", "out"] and all(n.startswith("thork_") for n in names[2:])
    compiles_for_gpu(stencil)


@tk.jit
def volume(v: tk.DevicePointer[tk.dt.int64, 3], out: tk.DevicePointer[tk.dt.int64, 3],
           info: tk.DevicePointer[i32]):
    """out[z, y, x] = v[z, y, x] * 1000 + z*100 + y*10 + x, each thread one (y, x) column;
    thread 0 of block 0 writes shape, strides, size, tk.len."""
    x = tk.thread_idx().x
    y = tk.block_idx().x
    d, h, w = v.shape
    with tk.if_(x < w):
        for z in tk.range(d):
            out[z, y, x] = v[z, y, x] * 1000 + z * 100 + y * 10 + x
    with tk.if_((x == 0) & (y == 0)):
        for k in range(3):
            info[k] = v.shape[k]
            info[3 + k] = v.strides[k]
        info[6] = v.size
        info[7] = tk.len(v)
        info[8] = out[0, 0, 0]  # constant indices fold


def test_three_d_shape_strides_size(target, rng):
    d, h, w = 4, 7, 9
    v = random_array(rng, (d, h, w), np.int64)
    out = poisoned((d, h, w), np.int64)
    info = poisoned(9, np.int32)
    volume[h, 32](v, out, info, target=target)
    z, y, x = np.meshgrid(np.arange(d), np.arange(h), np.arange(w), indexing="ij")
    ref = v * 1000 + z * 100 + y * 10 + x
    np.testing.assert_array_equal(out, ref)
    # info[8] read out[0,0,0] racing with thread (0,0)'s own earlier write: same thread.
    np.testing.assert_array_equal(
        info, [d, h, w, h * w, w, 1, d * h * w, d, ref[0, 0, 0]])


@tk.func
def row_sum(m, r):
    acc = tk.var(0.0, f32)
    for j in tk.range(m.shape[1]):
        acc += m[r, j]
    return acc


@tk.jit
def row_sums(m: tk.DevicePointer[f32, 2], out: tk.DevicePointer[f32]):
    r = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    with tk.if_(r < tk.len(m)):
        out[r] = row_sum(m, r)


def test_shaped_array_through_device_function(target, rng):
    m = random_array(rng, (23, 41), np.float32)
    out = poisoned(23, np.float32)
    row_sums[1, 32](m, out, target=target)
    np.testing.assert_allclose(out, m.sum(axis=1), rtol=1e-4, atol=1e-4)
    assert "row_sum" in row_sums.source


@tk.jit
def flat_copy(a: tk.DevicePointer[f32, 2], out: tk.DevicePointer[f32, 2]):
    i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    with tk.if_(i < a.size):
        out[i] = a[i] * 2.0  # one index: the flat, row-major meaning


def test_single_index_is_flat(target, rng):
    a = random_array(rng, (13, 17), np.float32)
    out = poisoned((13, 17), np.float32)
    flat_copy[(13 * 17 + 63) // 64, 64](a, out, target=target)
    np.testing.assert_array_equal(out, a * 2.0)


def test_launch_errors_name_the_parameter(target):
    a = np.zeros((4, 4), np.float32)
    with pytest.raises(ArgumentError, match=r"'a' expects a 2-D array, got 1-D"):
        stencil[1, 1](np.zeros(16, np.float32), a, target=target)
    with pytest.raises(ArgumentError, match=r"takes 2 argument\(s\) \(a, out\), got 3"):
        stencil[1, 1](a, a, a, target=target)
    with pytest.raises(ArgumentError, match=r"'a' expects an array"):
        stencil[1, 1](3.0, a, target=target)


def test_trace_errors():
    @tk.jit
    def wrong_rank(a: tk.DevicePointer[f32, 2]):
        a[1, 2, 3] = 0.0

    with pytest.raises(TraceError, match=r"'a' is a 2-D array: index it with 2 integers"):
        wrong_rank.ir  # noqa: B018

    @tk.jit
    def uses_len(a: tk.DevicePointer[f32, 2]):
        a[0] = len(a)

    with pytest.raises(TraceError, match=r"tk.len\(a\) or a.shape\[0\]"):
        uses_len.ir  # noqa: B018

    @tk.jit
    def negative(a: tk.DevicePointer[f32, 2]):
        a[-1, 0] = 0.0

    with pytest.raises(TraceError, match="do not wrap"):
        negative.ir  # noqa: B018

    @tk.jit
    def flat_len(a: tk.DevicePointer[f32]):
        a[0] = tk.len(a)

    with pytest.raises(TraceError, match=r"DevicePointer\[dtype, ndim\]"):
        flat_len.ir  # noqa: B018
