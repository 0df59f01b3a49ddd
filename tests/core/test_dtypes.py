"""Every dtype through a copy kernel; scalar parameters of every dtype; promotion rules."""

import numpy as np
import pytest
import thork as tk
from helpers import poisoned, random_array
from thork_core import ALL_DTYPES, dt, promote

DTYPES = [d.name for d in ALL_DTYPES]
_KERNELS = {}


def copy_kernel(name):
    """One copy kernel per dtype (dtype is a compile-time type, so one kernel each)."""
    if name not in _KERNELS:
        d = getattr(tk.dt, name)

        def copy(
            out: tk.DevicePointer[d],
            inp: tk.DevicePointer[d],
            n: tk.dt.int32,
            bid: tk.Uint[tk.BlockIdx],
            tid: tk.Uint[tk.ThreadIdx],
            bdm: tk.Uint[tk.BlockDim],
        ):
            i = bid * bdm + tid
            with tk.if_(i < n):
                out[i] = inp[i]

        copy.__name__ = f"copy_{name}"
        _KERNELS[name] = tk.jit(copy)
    return _KERNELS[name]


def host_dtype(name):
    return getattr(dt, name).numpy


@pytest.mark.parametrize("name", DTYPES)
def test_copy_every_dtype(target, rng, name):
    n = int(rng.integers(300, 3000)) | 1
    src = random_array(rng, n, host_dtype(name)) if name != "bfloat16" else \
        rng.standard_normal(n).astype(np.float32).astype(host_dtype(name))
    out = poisoned(n, host_dtype(name)) if name != "bfloat16" else \
        np.full(n, np.nan, np.float32).astype(host_dtype(name))
    before = src.copy()
    copy_kernel(name)[(n + 127) // 128, 128](out, src, n, target=target)
    assert out.view(np.uint8).tobytes() == src.view(np.uint8).tobytes()
    np.testing.assert_array_equal(src, before)  # inputs untouched


@pytest.mark.parametrize("name", ["int8", "uint16", "int64", "uint64", "float16", "bfloat16",
                                  "float64", "bool"])
def test_scalar_parameter_every_dtype(target, rng, name):
    d = getattr(tk.dt, name)

    @tk.jit
    def fill(out: tk.DevicePointer[d], value: d, tid: tk.Uint[tk.ThreadIdx]):
        out[tid] = value

    hd = host_dtype(name)
    value = {"bool": True, "int8": -7, "uint16": 65000, "int64": -(2**40) - 3,
             "uint64": 2**63 + 5, "float16": 1.5, "bfloat16": -2.5, "float64": np.pi}[name]
    out = np.zeros(33, hd)
    fill[1, 33](out, value, target=target)
    np.testing.assert_array_equal(out, np.full(33, value, hd))


def test_promotion_follows_cpp():
    assert promote(dt.uint8, dt.uint8) == dt.int32
    assert promote(dt.int8, dt.uint16) == dt.int32
    assert promote(dt.uint32, dt.int32) == dt.uint32
    assert promote(dt.int64, dt.uint32) == dt.int64
    assert promote(dt.uint64, dt.int64) == dt.uint64
    assert promote(dt.float16, dt.bfloat16) == dt.float32
    assert promote(dt.float16, dt.int64) == dt.float16
    assert promote(dt.float32, dt.float64) == dt.float64
    assert promote(dt.bool, dt.bool) == dt.int32


def test_mixed_arithmetic_matches_numpy_under_cpp_rules(target, rng):
    @tk.jit
    def mix(out: tk.DevicePointer[tk.dt.int32], a: tk.DevicePointer[tk.dt.uint8],
            b: tk.DevicePointer[tk.dt.int16], tid: tk.Uint[tk.ThreadIdx]):
        out[tid] = a[tid] * b[tid] - a[tid]  # uint8*int16 -> int (C++), no wrap at 8 bits

    a = rng.integers(0, 256, 201).astype(np.uint8)
    b = rng.integers(-3000, 3000, 201).astype(np.int16)
    out = poisoned(201, np.int32)
    mix[1, 201](out, a, b, target=target)
    np.testing.assert_array_equal(out, a.astype(np.int32) * b.astype(np.int32) - a)
