"""tk.print (printf on the GPU, block-ordered on the CPU) and the Python-print warning;
atomic_inc/atomic_dec with CUDA's wrapping semantics; shuffles with a run-time width."""

import warnings

import numpy as np
import pytest
import thork as tk
from helpers import compiles_for_gpu, poisoned, random_array

f32, i32, u32 = tk.dt.float32, tk.dt.int32, tk.dt.uint32


@tk.jit
def say(out: tk.DevicePointer[i32], x: tk.DevicePointer[f32], big: tk.dt.int64,
        tid: tk.Uint[tk.ThreadIdx], bid: tk.Uint[tk.BlockIdx]):
    with tk.if_(tid < 3):
        tk.print("block", bid, "thread", tid, "x=", x[tid], "ok", tid == 1, "100%", big,
                 -tk.cast(tid, i32), sep=" ", end=";\n")
    out[bid * 4 + tid] = 1


def test_print_from_device(target, capfd):
    x = np.array([0.5, -2.25, 1e-3, 7.0], np.float32)
    out = poisoned(8, np.int32)
    big = 2**40 + 3
    say[2, 4](out, x, big, target=target)
    assert (out == 1).all()
    lines = [ln for ln in capfd.readouterr().out.splitlines() if ln.startswith("block")]
    expected = [f"block {b} thread {t} x= {x[t]:g} ok {t == 1} 100% {big} {-t};"
                for b in range(2) for t in range(3)]
    if target == "cpu":
        assert lines == expected  # block order, then thread order
    else:
        assert sorted(lines) == sorted(expected)
    compiles_for_gpu(say)


def test_print_of_array_is_an_error():
    @tk.jit
    def k(a: tk.DevicePointer[f32]):
        tk.print(a)

    with pytest.raises(tk.TraceError, match=r"'a' is an array"):
        k.ir  # noqa: B018


def test_python_print_of_traced_value_warns(capsys):
    @tk.jit
    def k(a: tk.DevicePointer[f32], tid: tk.Uint[tk.ThreadIdx]):
        v = a[tid]
        print(v)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        k.ir  # noqa: B018
    msgs = [str(w.message) for w in caught if issubclass(w.category, tk.TraceWarning)]
    assert len(msgs) == 1 and "tk.print" in msgs[0] and "'v'" in msgs[0]
    assert "<traced float32" in capsys.readouterr().out


@tk.jit
def counters(ring: tk.DevicePointer[u32], olds: tk.DevicePointer[u32], n: i32, limit: u32):
    i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    with tk.if_(i < n):
        olds[i] = tk.atomic_inc(ring, 0, limit)
        olds[n + i] = tk.atomic_dec(ring, 1, limit)


def _wrap_model(start, limit, n, op):
    """The set of old values n wrapping increments (decrements) see, in any order."""
    v, seen = start, []
    for _ in range(n):
        seen.append(v)
        if op == "inc":
            v = 0 if v >= limit else v + 1
        else:
            v = limit if (v == 0 or v > limit) else v - 1
    return sorted(seen), v


@pytest.mark.parametrize("limit,start", [(6, 4), (1000, 999), (4, 9)])
def test_atomic_inc_dec_wrap(target, limit, start):
    n = 77
    ring = np.array([start, start], np.uint32)
    olds = poisoned(2 * n, np.uint32)
    counters[(n + 31) // 32, 32](ring, olds, n, limit, target=target)
    inc_seen, inc_final = _wrap_model(start, limit, n, "inc")
    dec_seen, dec_final = _wrap_model(start, limit, n, "dec")
    # Each op's sequence of old values is the model's whatever the order of the threads.
    assert sorted(olds[:n]) == inc_seen and ring[0] == inc_final
    assert sorted(olds[n:]) == dec_seen and ring[1] == dec_final
    compiles_for_gpu(counters)


def test_atomic_inc_needs_uint32():
    @tk.jit
    def k(a: tk.DevicePointer[i32]):
        tk.atomic_inc(a, 0, 5)

    with pytest.raises(tk.TraceError, match=r"needs uint32 elements"):
        k.ir  # noqa: B018


@tk.jit
def runtime_width(out: tk.DevicePointer[f32], a: tk.DevicePointer[f32], width: i32):
    t = tk.thread_idx().x
    v = a[t]
    # Sum over each group of `width` lanes with xor shuffles of a run-time width.
    s = tk.var(v)
    step = tk.var(width // 2)
    with tk.while_(lambda: step > 0):
        s += tk.shfl_xor(s, step, width)
        step.set(step // 2)
    out[t] = s + 1000.0 * tk.shfl_down(v, 1, width)


@pytest.mark.parametrize("width", [4, 8, 32])
def test_shuffle_width_at_run_time(target, rng, width):
    a = random_array(rng, 64, np.float32)
    out = poisoned(64, np.float32)
    runtime_width[1, 64](out, a, width, target=target)
    groups = a.reshape(-1, width)
    sums = np.repeat(groups.sum(axis=1), width)
    lane = np.arange(64)
    down = np.where((lane % width) + 1 < width, np.roll(a, -1), a)
    np.testing.assert_allclose(out, sums + 1000.0 * down, rtol=1e-5, atol=1e-3)
    assert runtime_width.compile_info.key == runtime_width._exes[(target, None)][1].key
    compiles_for_gpu(runtime_width)


def test_shuffle_width_checks():
    @tk.jit
    def k(a: tk.DevicePointer[f32], tid: tk.Uint[tk.ThreadIdx]):
        a[tid] = tk.shfl_xor(a[tid], 1, 12)

    with pytest.raises(tk.TraceError, match="power of two"):
        k.ir  # noqa: B018
