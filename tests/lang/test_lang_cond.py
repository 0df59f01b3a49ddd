"""tk.cond / tk.select: C's ?: that evaluates only the chosen side; tk.where is eager."""

import numpy as np
import pytest
import thork as tk
from helpers import compiles_for_gpu, poisoned, random_array
from thork_core.ir import PRELUDE_MARK

f32, i32 = tk.dt.float32, tk.dt.int32


def _code(kernel):
    """The kernel's own code in its source listing (the prelude follows it)."""
    return kernel.source.split(PRELUDE_MARK)[0]


@tk.jit
def shifted(a: tk.DevicePointer[f32], out: tk.DevicePointer[f32],
            count: tk.DevicePointer[i32], n: i32, shift: i32):
    """out[i] = a[i + shift] where that is in range, else 0; counts the loads made."""
    i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x

    def load():
        tk.atomic_add(count, 0, 1)  # a side effect shows whether the side ran
        return a[i + shift]

    with tk.if_(i < n):
        out[i] = tk.cond(i + shift < n, load, 0)


def test_cond_evaluates_only_the_chosen_side(target, rng):
    n, shift = 1000, 37
    a = random_array(rng, n, np.float32)
    out = poisoned(n, np.float32)
    count = np.zeros(1, np.int32)
    shifted[(n + 127) // 128, 128](a, out, count, n, shift, target=target)
    ref = np.zeros(n, np.float32)
    ref[:n - shift] = a[shift:]
    np.testing.assert_array_equal(out, ref)
    assert count[0] == n - shift  # the load side ran only where chosen
    compiles_for_gpu(shifted)


@tk.jit
def both_lazy(a: tk.DevicePointer[tk.dt.float16], b: tk.DevicePointer[f32],
              out: tk.DevicePointer[f32], n: i32):
    i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    with tk.if_(i < n):
        # float16 and float32 sides: the result is float32 (the common type).
        v = tk.select(a[i] > 0.0, lambda: a[i] * 2.0, lambda: b[i] - 1.0)
        out[i] = v + tk.cond(True, 0.5, lambda: a[n + 5])  # known at trace time: folded


def test_select_with_two_lazy_sides(target, rng):
    n = 301
    a = random_array(rng, n, np.float16)
    b = random_array(rng, n, np.float32)
    out = poisoned(n, np.float32)
    both_lazy[3, 128](a, b, out, n, target=target)
    ref = np.where(a > 0, (a * np.float16(2)).astype(np.float32), b - 1) + 0.5
    np.testing.assert_allclose(out, ref, rtol=1e-6)
    assert "(n + 5)" not in _code(both_lazy) and "if (" in _code(both_lazy)


def test_where_is_eager():
    @tk.jit
    def k(a: tk.DevicePointer[f32], out: tk.DevicePointer[f32], n: i32):
        i = tk.thread_idx().x
        out[i] = tk.where(i < n, a[i], 0.0)

    body = _code(k)
    assert "= a[" in body.split("?")[0] and " ? " in body  # the load precedes the select


def test_cond_with_plain_values_is_where():
    @tk.jit
    def k(out: tk.DevicePointer[f32], tid: tk.Uint[tk.ThreadIdx]):
        out[tid] = tk.cond(tid < 3, 1.0, 2.0)

    assert " ? " in _code(k) and "if (" not in _code(k)


def test_cond_side_value_used_outside_is_an_error():
    @tk.jit
    def k(a: tk.DevicePointer[f32], tid: tk.Uint[tk.ThreadIdx]):
        kept = []

        def side():
            kept.append(a[tid])
            return kept[0]

        a[0] = tk.cond(tid < 3, side, 0.0) + kept[0]

    with pytest.raises(tk.TraceError, match="block that has ended"):
        k.ir  # noqa: B018
