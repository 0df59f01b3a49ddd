"""Control flow, mutable locals, device functions, compile-time constants and trace-time
errors of the thork-trace language."""

import numpy as np
import pytest
import thork as tk
from helpers import compiles_for_gpu, poisoned, random_array
from thork_core import TraceError

f32, i32 = tk.dt.float32, tk.dt.int32


def gpu_ok(kernel):
    compiles_for_gpu(kernel)


def gid():
    return tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x


@tk.jit
def loops(out: tk.DevicePointer[i32], a: tk.DevicePointer[i32], n: i32, m: i32):
    i = gid()
    with tk.if_(i >= n):
        tk.return_()
    acc = tk.var(0)
    for k in tk.range(m):            # device loop on a traced bound
        with tk.if_(k % 3 == 1):
            tk.continue_()
        with tk.if_(acc > 5000):
            tk.break_()
        acc += a[i] * k
    down = tk.var(0)
    for k in tk.range(m, -1, -2):    # counting down past zero
        down += k
    j = tk.var(a[i] % 7)
    with tk.while_(lambda: j < 40):
        j += 9
    cls = tk.var(0)
    with tk.if_(a[i] < -300):
        cls.set(1)
    with tk.elif_(a[i] < 0):
        cls.set(2)
    with tk.elif_(a[i] == 0):
        cls.set(3)
    with tk.else_():
        cls.set(4)
    out[i * 4] = acc
    out[i * 4 + 1] = down
    out[i * 4 + 2] = j
    out[i * 4 + 3] = cls


def test_loops_locals_break_continue_while_elif(target, rng):
    n, m = int(rng.integers(200, 600)) | 1, int(rng.integers(5, 30)) | 1
    a = random_array(rng, n, np.int32)
    out = poisoned((n, 4), np.int32)
    loops[(n + 63) // 64, 64](out, a, n, m, target=target)
    acc = np.zeros(n, np.int64)
    alive = np.ones(n, bool)
    for k in range(m):
        if k % 3 == 1:
            continue
        alive &= ~(acc > 5000)
        acc = np.where(alive, acc + a.astype(np.int64) * k, acc)
    j = np.fmod(a, 7).astype(np.int64)  # C++ % truncates toward zero
    j = np.where(j < 40, j + 9 * np.ceil((40 - j) / 9).astype(np.int64), j)
    cls = np.select([a < -300, a < 0, a == 0], [1, 2, 3], 4)
    np.testing.assert_array_equal(out[:, 0], acc.astype(np.int32))
    np.testing.assert_array_equal(out[:, 1], sum(range(m, -1, -2)))
    np.testing.assert_array_equal(out[:, 2], j)
    np.testing.assert_array_equal(out[:, 3], cls)
    gpu_ok(loops)


@tk.jit
def strided(out: tk.DevicePointer[i32], starts: tk.DevicePointer[i32],
            stops: tk.DevicePointer[i32], steps: tk.DevicePointer[i32], n: i32):
    """tk.range with a run-time step (rendered as a counted loop): trips, the index sum
    (wrapping) and the last index; a continue every third trip and bounds (tk.vars) that
    the body changes, which must not change the loop (read once, as Python's range)."""
    i = gid()
    with tk.if_(i < n):
        stop, step = tk.var(stops[i]), tk.var(steps[i])
        trips, total, last = tk.var(0), tk.var(0), tk.var(-7)
        for k in tk.range(starts[i], stop, step):
            stop.set(stop - step)
            step.set(step * 2 + 1)
            trips += 1
            last.set(k)
            with tk.if_(trips % 3 == 0):
                tk.continue_()
            total += k
        out[i * 3] = trips
        out[i * 3 + 1] = total
        out[i * 3 + 2] = last


def test_range_with_run_time_step_matches_python_range(target, rng):
    """Positive, negative and zero steps, empty ranges and bounds at the int32 extremes
    (where i += step past the end would overflow a naive trip count)."""
    lo, hi = -(2**31), 2**31 - 1
    cases = [(0, 10, 3), (10, 0, -3), (0, 10, 0), (5, 5, 1), (5, 5, -1), (7, 3, 2),
             (3, 7, -2), (lo, hi, 2**30), (hi, lo, -(2**30)), (hi - 5, hi, 2),
             (lo + 5, lo, -2), (0, hi, hi), (-1, lo, lo), (lo, hi, hi), (0, 1, hi)]
    m = int(rng.integers(200, 400))
    for _ in range(m):
        a, b = (int(x) for x in rng.integers(-300, 300, size=2))
        cases.append((a, b, int(rng.choice([-1, 1]) * rng.integers(1, 40))))
    starts, stops, steps = (np.array(c, np.int32) for c in zip(*cases))
    n = len(cases)
    out = poisoned((n, 3), np.int32)
    strided[(n + 63) // 64, 64](out, starts, stops, steps, n, target=target)
    for row, (a, b, s) in zip(out, cases):
        ks = list(range(a, b, s)) if s else []
        total = sum(k for j, k in enumerate(ks) if (j + 1) % 3)
        total = (total + 2**31) % 2**32 - 2**31  # int32 wraps
        assert list(row) == [len(ks), total, ks[-1] if ks else -7], (a, b, s)
    gpu_ok(strided)


@tk.jit
def strided64(out: tk.DevicePointer[tk.dt.int64], starts: tk.DevicePointer[tk.dt.int64],
              stops: tk.DevicePointer[tk.dt.int64], steps: tk.DevicePointer[tk.dt.int64],
              n: i32):
    i = gid()
    with tk.if_(i < n):
        trips, last = tk.var(0, tk.dt.int64), tk.var(-7, tk.dt.int64)
        for k in tk.range(starts[i], stops[i], steps[i]):  # int64 index and trip count
            trips += 1
            last.set(k)
        out[i * 2] = trips
        out[i * 2 + 1] = last


def test_range_with_64_bit_run_time_step(target):
    """Trip counts past 2**32 in the arithmetic (an int64 loop counts in 64 bits)."""
    big = 2**62
    cases = [(0, 3 * 2**33, 2**33), (2**40, -(2**40), -(2**39)), (5, big, big // 2),
             (-big, big, big), (big, -big, -(2**61)), (0, 2**40, 0), (7, 7, 3)]
    starts, stops, steps = (np.array(c, np.int64) for c in zip(*cases))
    out = poisoned((len(cases), 2), np.int64)
    strided64[1, 32](out, starts, stops, steps, len(cases), target=target)
    for row, (a, b, s) in zip(out, cases):
        ks = list(range(a, b, s)) if s else []
        assert list(row) == [len(ks), ks[-1] if ks else -7], (a, b, s)
    gpu_ok(strided64)


@tk.jit
def search(out: tk.DevicePointer[i32], sorted_: tk.DevicePointer[f32], q: tk.DevicePointer[f32],
           n: i32, nq: i32):
    """Binary search: a while loop with two mutable bounds (lower_bound)."""
    i = gid()
    with tk.if_(i < nq):
        lo, hi = tk.var(0), tk.var(n)
        x = q[i]
        with tk.while_(lambda: lo < hi):
            mid = (lo + hi) // 2
            with tk.if_(sorted_[mid] < x):
                lo.set(mid + 1)
            with tk.else_():
                hi.set(mid)
        out[i] = lo


def test_while_binary_search(target, rng):
    n, nq = int(rng.integers(100, 1000)) | 1, 301
    s = np.sort(random_array(rng, n, np.float32))
    q = random_array(rng, nq, np.float32)
    out = poisoned(nq, np.int32)
    search[5, 64](out, s, q, n, nq, target=target)
    np.testing.assert_array_equal(out, np.searchsorted(s, q, side="left"))
    gpu_ok(search)


@tk.func
def smoothstep(x, lo, hi):
    t = tk.min(tk.max((x - lo) / (hi - lo), 0.0), 1.0)
    return t * t * (3.0 - 2.0 * t)


@tk.func
def scale_into(out, i, v, FACTOR):
    out[i] = v * FACTOR  # FACTOR is a Python value: a compile-time constant here


@tk.jit
def uses_funcs(out: tk.DevicePointer[f32], a: tk.DevicePointer[f32], n: i32):
    i = gid()
    with tk.if_(i < n):
        s = smoothstep(a[i], -1.0, 1.0)
        scale_into(out, i * 3, s, 2)
        scale_into(out, i * 3 + 1, s, 3)     # another specialization
        scale_into(out, i * 3 + 2, smoothstep(a[i], 0.0, 2.0), 2)


def test_device_functions_emitted_once_and_specialized(target, rng):
    n = 333
    a = random_array(rng, n, np.float32)
    out = poisoned((n, 3), np.float32)
    uses_funcs[6, 64](out, a, n, target=target)

    def ss(x, lo, hi):
        t = np.clip((x - lo) / (hi - lo), 0, 1)
        return t * t * (3 - 2 * t)

    ref = np.stack([2 * ss(a, -1, 1), 3 * ss(a, -1, 1), 2 * ss(a, 0, 2)], 1)
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)
    src = uses_funcs.source
    # smoothstep: two specializations (different constant bounds), one call each;
    # scale_into: two specializations (FACTOR 2 and 3), three calls.
    assert src.count("static __device__ float thork_f") == 2
    assert src.count("static __device__ void thork_f") == 2
    assert src.count("smoothstep(") == 4
    assert src.count("_scale_into(") == 5
    gpu_ok(uses_funcs)


@tk.jit
def halve(out: tk.DevicePointer[f32], n: i32, C: tk.Constexpr):
    i = gid()
    with tk.if_(i < n):
        out[i] = tk.cast(C / 2 if isinstance(C, float) else C // 2, f32)


@tk.jit
def as_float(out: tk.DevicePointer[f32], n: i32, C: tk.Constexpr[int]):
    i = gid()
    with tk.if_(i < n):
        out[i] = tk.cast(C, f32)


def test_constexpr_values_that_compare_equal_keep_their_own_specialization(target):
    # 3, 3.0 and True == 1 compare (and hash) equal; each traces as its own type, so the
    # specialization memo must not hand one's kernel to another.
    n = 37
    for value, want in ((3, 1.0), (3.0, 1.5), (1, 0.0), (True, 0.0), (1.0, 0.5)):
        out = poisoned(n, np.float32)
        halve[1, 64](out, n, value, target=target)
        np.testing.assert_array_equal(out, np.full(n, want, np.float32), err_msg=repr(value))
    out = poisoned(n, np.float32)
    as_float[1, 64](out, n, 1, target=target)  # the int specialization, memoized
    np.testing.assert_array_equal(out, np.ones(n, np.float32))
    out = poisoned(n, np.float32)
    with pytest.raises(TraceError, match="expects int, got bool True"):
        as_float[1, 64](out, n, True, target=target)
    with pytest.raises(TraceError, match="expects int, got bool True"):
        as_float.specialize(C=True)
    assert np.isnan(out).all()


@tk.jit
def tiled_sum(out: tk.DevicePointer[f32], a: tk.DevicePointer[f32], n: i32,
              WIDTH: tk.Constexpr[int], SCALE: tk.Constexpr[float] = 1.0):
    i = gid()
    with tk.if_(i < n):
        acc = tk.var(0.0)
        for k in range(WIDTH):  # unrolled WIDTH times at trace time
            acc += a[i * WIDTH + k]
        out[i] = acc * SCALE


def test_constexpr_specializes_and_keys_the_cache(target, rng):
    n = 101
    a = random_array(rng, n * 5, np.float32)
    for width, scale in ((3, 1.0), (5, 2.0), (3, 0.5)):
        out = poisoned(n, np.float32)
        tiled_sum[2, 64](out, a, n, width, scale, target=target)
        ref = a[: n * width].reshape(n, width).sum(1) * scale
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    out = poisoned(n, np.float32)
    tiled_sum[2, 64](out, a, n, WIDTH=5, target=target)  # keyword, default SCALE
    np.testing.assert_allclose(out, a[: n * 5].reshape(n, 5).sum(1), rtol=1e-5, atol=1e-5)
    assert len(tiled_sum._specializations) >= 3
    k3 = tiled_sum.specialize(WIDTH=3)
    assert k3 is tiled_sum.specialize(WIDTH=3, SCALE=1.0)
    assert "* 3 +" in k3.source or "(_t" in k3.source
    assert tiled_sum.specialize(WIDTH=3).source != tiled_sum.specialize(WIDTH=4).source
    with pytest.raises(TraceError, match="WIDTH"):
        tiled_sum.source  # no default for WIDTH
    with pytest.raises(TraceError, match="expects int"):
        tiled_sum.specialize(WIDTH=2.5)
    gpu_ok(k3)


# -- trace-time errors ---------------------------------------------------------------------
def trace(fn):
    return tk.jit(fn).ir


def test_bool_of_traced_value_names_the_construct():
    def k(a: tk.DevicePointer[f32]):
        if a[0] > 0:
            a[0] = 1.0
    with pytest.raises(TraceError, match="tk.if_"):
        trace(k)


def test_python_range_on_traced_bound_points_to_tk_range():
    def k(a: tk.DevicePointer[f32], n: i32):
        for i in range(n):
            a[i] = 1.0
    with pytest.raises(TraceError, match="tk.range"):
        trace(k)


def test_value_escaping_its_block_is_a_trace_error():
    def k(a: tk.DevicePointer[f32], n: i32):
        for i in tk.range(n):
            last = a[i] * 2.0
        a[0] = last
    with pytest.raises(TraceError, match="tk.var"):
        trace(k)


def test_python_break_in_device_loop_is_reported():
    def k(a: tk.DevicePointer[f32], n: i32):
        for i in tk.range(n):
            a[i] = 1.0
            break
    with pytest.raises(TraceError, match="tk.break_"):
        trace(k)


def test_break_outside_loop_and_else_without_if():
    def k1(a: tk.DevicePointer[f32]):
        tk.break_()

    def k2(a: tk.DevicePointer[f32]):
        with tk.else_():
            a[0] = 1.0
    with pytest.raises(TraceError, match="inside a tk.range"):
        trace(k1)
    with pytest.raises(TraceError, match="must directly follow"):
        trace(k2)


def test_while_with_plain_value_condition_is_rejected():
    def k(a: tk.DevicePointer[f32]):
        with tk.while_(a[0] > 0):
            a[0] = 0.0
    with pytest.raises(TraceError, match="callable"):
        trace(k)


def test_shared_index_out_of_bounds_is_a_trace_error():
    def k1(a: tk.DevicePointer[f32]):
        s = tk.shared_array(f32, (8, 9))
        s[tk.thread_idx().x, 9] = 1.0

    def k2(a: tk.DevicePointer[f32]):
        s = tk.shared_array(f32, 16)
        a[0] = s[16]
    with pytest.raises(TraceError, match=r"out of bounds for axis 1 .* shape \(8, 9\)"):
        trace(k1)
    with pytest.raises(TraceError, match="out of bounds"):
        trace(k2)


def test_static_shared_limit():
    def k(a: tk.DevicePointer[f32]):
        tk.shared_array(f32, 8192)
        tk.shared_array(f32, 8192)
    with pytest.raises(TraceError, match="49152-byte limit"):
        trace(k)


def test_func_capturing_caller_value_and_return_in_func():
    def k1(a: tk.DevicePointer[f32]):
        x = a[0]

        @tk.func
        def bad(y):
            return y + x
        a[1] = bad(a[2])

    @tk.func
    def early(y):
        tk.return_()

    def k2(a: tk.DevicePointer[f32]):
        early(a[0])
    with pytest.raises(TraceError, match="pass it as an argument"):
        trace(k1)
    with pytest.raises(TraceError, match="only allowed in the kernel body"):
        trace(k2)


def test_statements_carry_python_lines_and_line_directives():
    def k(a: tk.DevicePointer[f32], n: i32):
        acc = tk.var(0.0)
        for i in tk.range(n):
            acc += a[i]
        a[0] = acc
    kern = tk.jit(k)
    import inspect
    import os
    first = inspect.getsourcelines(k)[1]
    src = kern.source
    assert f'#line {first + 3} "{os.path.abspath(__file__)}"' in src
    from thork_core._ir import walk_stmts
    assert all(s.loc is not None for s in walk_stmts(kern.ir.body))
