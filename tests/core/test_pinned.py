"""Pinned host arrays (``tk.pinned_empty``): NumPy arrays in page-locked memory that GPU
launches copy directly (no staging copy); on the CPU target ordinary NumPy arrays."""

from __future__ import annotations

import numpy as np
import pytest
import thork as tk
from helpers import poisoned


@tk.jit
def scale_add(out: tk.DevicePointer[tk.dt.float32], x: tk.DevicePointer[tk.dt.float32],
              a: tk.dt.float32, n: tk.dt.int32, bid: tk.Uint[tk.BlockIdx],
              tid: tk.Uint[tk.ThreadIdx], bdm: tk.Uint[tk.BlockDim]):
    i = bid * bdm + tid
    with tk.if_(i < n):
        out[i] = out[i] + x[i] * a


@pytest.mark.parametrize("shape,dtype", [((1001,), "float32"), ((7, 33, 3), np.uint8),
                                         (5, tk.dt.int64), ((0,), "float64")])
def test_pinned_empty_gives_the_asked_array(shape, dtype):
    a = tk.pinned_empty(shape, dtype)
    want = (shape,) if isinstance(shape, int) else shape
    assert isinstance(a, np.ndarray) and a.shape == want and a.flags.c_contiguous
    assert a.flags.writeable
    assert a.dtype == np.dtype(getattr(dtype, "name", dtype))
    a[...] = 3
    assert (a == 3).all()


def test_pinned_empty_rejects_bad_input():
    # The errors name pinned_empty, not the DeviceArray whose checks it shares.
    with pytest.raises(tk.ArgumentError, match=r"^pinned_empty shape: sizes must be >= 0"):
        tk.pinned_empty((3, -1), "float32")
    with pytest.raises(tk.ArgumentError, match=r"^pinned_empty shape: expected a tuple"):
        tk.pinned_empty("3x4", "float32")
    with pytest.raises(tk.ArgumentError, match=r"^pinned_empty dtype: unsupported dtype"):
        tk.pinned_empty(4, "complex64")


def test_pinned_arrays_launch_on_every_target(target, rng):
    """Read and written pinned arrays (the written one also read: its host values must go
    in) give NumPy's result; views of a pinned array work too."""
    n = 2001
    x = tk.pinned_empty(n, "float32")
    out = tk.pinned_empty(n + 6, "float32")[3:-3]  # a view of a pinned block
    x[:] = rng.standard_normal(n)
    start = rng.standard_normal(n).astype(np.float32)
    out[:] = start
    scale_add[(n + 127) // 128, 128](out, x, 2.5, n, target=target)
    np.testing.assert_allclose(out, start + x * np.float32(2.5), rtol=1e-6, atol=1e-6)


@pytest.mark.gpu
def test_pinned_arrays_skip_staging_on_the_gpu(rng, monkeypatch):
    """On the GPU a pinned array is copied straight to and from the device: the staging
    buffer is not asked for its bytes, and mixed pinned/pageable arguments both work."""
    from thork_core import _memory
    from thork_core._memory import PinnedBlock, pinned_base

    n = 4099
    x = tk.pinned_empty(n, "float32")
    assert isinstance(pinned_base(x), PinnedBlock) and pinned_base(x[5:]) is pinned_base(x)
    assert pinned_base(np.empty(3)) is None
    x[:] = rng.standard_normal(n)
    asked: list[int] = []
    real = _memory.staging

    def spy(nbytes: int):
        asked.append(nbytes)
        return real(nbytes)

    monkeypatch.setattr(_memory, "staging", spy)
    out = tk.pinned_empty(n, "float32")
    out[:] = 0
    scale_add[(n + 127) // 128, 128](out, x, -1.5, n)
    np.testing.assert_allclose(out, x * np.float32(-1.5), rtol=1e-6)
    assert asked == []  # nothing staged: no staging buffer asked for
    pageable = poisoned(n, np.float32)
    pageable[:] = 1.0
    scale_add[(n + 127) // 128, 128](pageable, x, 2.0, n)
    np.testing.assert_allclose(pageable, 1.0 + x * np.float32(2.0), rtol=1e-6)
    assert asked == [pageable.nbytes]  # only the pageable array went through staging


@pytest.mark.gpu
def test_pinned_written_only_output_is_poisoned_then_exact(rng):
    """Issue 11's call: ``matrix_add[(n // 128,), (128,)](C, A, B)`` on pinned arrays, C
    poisoned (NaN) before each call, A and B fresh; exact A + B, several sizes."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from _floor import floor_kernel

    matrix_add = floor_kernel()
    for blocks in (1, 37, 8191):
        n = 128 * blocks
        A, B, C = (tk.pinned_empty(n, "float32") for _ in range(3))
        for _ in range(3):
            A[:] = rng.standard_normal(n)
            B[:] = rng.standard_normal(n)
            C[:] = poisoned(n, np.float32)
            matrix_add[(blocks, 1, 1), (128, 1, 1)](C, A, B)
            np.testing.assert_array_equal(C, A + B)


@pytest.mark.gpu
def test_pinned_round_trip_after_a_failed_binding(rng):
    """Pinned arrays' copies in are queued as each is bound (session 13): an argument that
    fails to bind after two of them raises the binding's error, gives their device memory
    back (the pool's used bytes return to where they were) and leaves the next call
    exact against NumPy."""
    from thork_core._memory import device_pool

    n = 3001
    x = tk.pinned_empty(n, "float32")
    out = tk.pinned_empty(n, "float32")
    x[:] = rng.standard_normal(n)
    out[:] = 0
    scale_add[(n + 127) // 128, 128](out, x, 1.0, n)  # warm: the fast binding is armed
    pool = device_pool(0)
    used = pool.used_bytes()
    bad = tk.pinned_empty(n, "float64")
    with pytest.raises(tk.ArgumentError, match="'x'.*float64"):
        scale_add[(n + 127) // 128, 128](out, bad, 1.0, n)
    with pytest.raises(tk.ArgumentError, match="'n'"):
        scale_add[(n + 127) // 128, 128](out, x, 1.0, "not an int")
    assert pool.used_bytes() == used
    out[:] = rng.standard_normal(n).astype(np.float32)
    start = out.copy()
    scale_add[(n + 127) // 128, 128](out, x, -0.5, n)
    np.testing.assert_allclose(out, start + x * np.float32(-0.5), rtol=1e-6, atol=1e-6)
