"""Signed built-ins (tk.Int[...], tk.Int3[...], tk.thread_idx(signed=True)) and the
trace-time warning for unsigned comparisons that are always true or false."""

import warnings

import numpy as np
import pytest
import thork as tk
from helpers import compiles_for_gpu, poisoned, random_array

f32, i32 = tk.dt.float32, tk.dt.int32


@tk.jit
def halo_load(src: tk.DevicePointer[f32], out: tk.DevicePointer[f32], n: i32,
              bid: tk.Int[tk.BlockIdx], tid: tk.Int[tk.ThreadIdx]):
    """Each block of 16 threads reads a window starting one tile *before* its own: the
    cuda-samples convolution pattern whose bounds check is useless with unsigned ints."""
    g = (bid * 8 - 1) * 16 + tid  # -16.. for block 0: must test negative
    i = bid * 16 + tid
    with tk.if_(i < n):
        out[i] = tk.cond((g >= 0) & (g < n), lambda: src[g], -1.0)  # lazy: no OOB load


def test_signed_builtins_make_negative_indices_testable(target, rng):
    n = 16 * 7 - 3
    src = random_array(rng, n, np.float32)
    out = poisoned(n, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", tk.TraceWarning)  # signed math: no warning
        halo_load[7, 16](src, out, n, target=target)
    i = np.arange(n)
    g = (i // 16 * 8 - 1) * 16 + i % 16
    ref = np.where((g >= 0) & (g < n), src[np.clip(g, 0, n - 1)], -1.0).astype(np.float32)
    np.testing.assert_array_equal(out, ref)
    assert "int bid = ((int)(blockIdx.x))" in halo_load.source.replace("const ", "")
    compiles_for_gpu(halo_load)


@tk.jit
def signed_dim3(out: tk.DevicePointer[i32], t: tk.Int3[tk.ThreadIdx]):
    # threadIdx.x - 5 is negative for the first five threads; // and % truncate (C).
    out[t.x] = (t.x - 5) // 2 + (tk.block_idx(signed=True).x - 1) * 100


def test_signed_dim3_and_functions(target):
    out = poisoned(11, np.int32)
    signed_dim3[1, 11](out, target=target)
    x = np.arange(11) - 5
    np.testing.assert_array_equal(out, np.trunc(x / 2).astype(np.int32) - 100)
    assert repr(tk.Int3) == "tk.Int3" and repr(tk.Uint) == "tk.Uint"


def _trace_warnings(fn):
    k = tk.jit(fn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        k.ir  # noqa: B018
    return [w for w in caught if issubclass(w.category, tk.TraceWarning)]


def test_warns_on_always_true_unsigned_compare():
    def k(out: tk.DevicePointer[f32], bid: tk.Uint[tk.BlockIdx], tid: tk.Uint[tk.ThreadIdx]):
        g = (bid * 8 - 1) * 16 + tid
        with tk.if_(g >= 0):  # always true: uint32
            out[g] = 1.0

    ws = _trace_warnings(k)
    assert len(ws) == 1
    msg = str(ws[0].message)
    assert "always True" in msg and "uint32" in msg and "tk.Int[tk.BlockIdx]" in msg
    assert ws[0].filename == __file__  # attributed to the kernel's line

    def k2(out: tk.DevicePointer[f32], tid: tk.Uint[tk.ThreadIdx]):
        out[0] = tk.where(tid < 0, 1.0, 0.0) + tk.where(0 > tid, 1.0, 0.0)
        out[1] = tk.where(tid > -1, 1.0, 0.0)  # -1 becomes 4294967295

    msgs = [str(w.message) for w in _trace_warnings(k2)]
    assert sum("always False" in m for m in msgs) == 2
    assert any("-1 becomes 4294967295" in m for m in msgs)


def test_no_warning_for_meaningful_compares():
    def k(out: tk.DevicePointer[f32], n: i32, tid: tk.Uint[tk.ThreadIdx]):
        s = tk.cast(tid, i32) - 3
        out[0] = tk.where((tid < n) & (tid > 0) & (s >= 0) & (tid != 0), 1.0, 0.0)

    assert _trace_warnings(k) == []


@pytest.mark.parametrize("bad", ["x", 3])
def test_int_factory_rejects_non_builtins(bad):
    with pytest.raises(tk.TraceError, match=r"tk.Int\[...\] takes tk.BlockIdx"):
        tk.Int[bad]
