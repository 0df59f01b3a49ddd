"""Errors a newcomer hits, each pointing at the construct to use instead, naming the
user's variable, with Thork's frames trimmed from the traceback."""

import math
import traceback

import numpy as np
import pytest
import thork as tk

f32, i32 = tk.dt.float32, tk.dt.int32


def _trace_error(fn):
    k = tk.jit(fn)
    with pytest.raises(tk.TraceError) as info:
        k.ir  # noqa: B018
    return info


def test_python_while_suggests_while_():
    def k(a: tk.DevicePointer[f32], n: i32):
        i = tk.var(0)
        while i < n:
            a[i] = 0.0

    msg = str(_trace_error(k).value)
    assert "tk.while_" in msg and "'while'" in msg


def test_python_if_and_boolean_operators():
    def k(a: tk.DevicePointer[f32], n: i32, tid: tk.Uint[tk.ThreadIdx]):
        if tid < n:
            a[tid] = 0.0

    assert "tk.if_" in str(_trace_error(k).value)

    def k2(a: tk.DevicePointer[f32], n: i32, tid: tk.Uint[tk.ThreadIdx]):
        a[tid] = tk.where(tid < n and tid > 2, 1.0, 0.0)

    assert "'&'" in str(_trace_error(k2).value)


def test_math_module_names_tk_function():
    def k(a: tk.DevicePointer[f32], tid: tk.Uint[tk.ThreadIdx]):
        x = a[tid]
        a[tid] = math.exp(x)

    msg = str(_trace_error(k).value)
    assert "math.exp()" in msg and "tk.exp(" in msg and "'x'" in msg


@pytest.mark.parametrize("fn,name", [(np.sqrt, "tk.sqrt"), (np.arctan2, "tk.atan2"),
                                     (np.maximum, "tk.max")])
def test_numpy_function_names_tk_function(fn, name):
    def k(a: tk.DevicePointer[f32], tid: tk.Uint[tk.ThreadIdx]):
        val = a[tid]
        a[tid] = fn(val, val) if fn is not np.sqrt else fn(val)

    msg = str(_trace_error(k).value)
    assert name + "(" in msg and "'val'" in msg


def test_numpy_scalar_operands_still_work(target, rng):
    @tk.jit
    def k(a: tk.DevicePointer[f32], out: tk.DevicePointer[f32], tid: tk.Uint[tk.ThreadIdx]):
        x = a[tid]
        out[tid] = np.float32(2.0) * x + x * np.float32(0.5) - (np.float32(1) < x)

    a = np.random.default_rng(1).standard_normal(40).astype(np.float32)
    out = np.full(40, np.nan, np.float32)
    k[1, 40](a, out, target=target)
    np.testing.assert_allclose(out, 2 * a + a * 0.5 - (1 < a), rtol=1e-6, atol=1e-6)


def test_recursive_func_is_a_short_clear_error():
    @tk.func
    def fact(n):
        return tk.where(n <= 1, 1, n * fact(n - 1))

    def k(a: tk.DevicePointer[i32], tid: tk.Uint[tk.ThreadIdx]):
        a[tid] = fact(a[tid])

    info = _trace_error(k)
    assert "recursion (fact -> fact)" in str(info.value) and "loop" in str(info.value)
    assert len(traceback.format_exception(info.value)) < 30


def test_recursion_on_python_values_unrolls(target):
    @tk.func
    def power(x, n):
        return 1.0 if n == 0 else x * power(x, n - 1)

    @tk.jit
    def k(a: tk.DevicePointer[f32], tid: tk.Uint[tk.ThreadIdx]):
        a[tid] = power(a[tid], 5)

    a = np.linspace(-2, 2, 9, dtype=np.float32)
    ref = a ** 5
    k[1, 9](a, target=target)
    np.testing.assert_allclose(a, ref, rtol=1e-6)


def test_scope_error_names_the_users_variable():
    def k(a: tk.DevicePointer[f32], n: i32, tid: tk.Uint[tk.ThreadIdx]):
        with tk.if_(tid < n):
            doubled = a[tid] * 2.0
        a[tid] = doubled

    msg = str(_trace_error(k).value)
    assert "traced value 'doubled'" in msg and "_t" not in msg.split("(at")[0]


def test_traceback_has_no_thork_frames_below_the_kernel():
    def k(a: tk.DevicePointer[f32], tid: tk.Uint[tk.ThreadIdx]):
        a[tid] = math.sqrt(a[tid])

    info = _trace_error(k)
    files = [f.filename for f in traceback.extract_tb(info.value.__traceback__)]
    kernel_at = files.index(__file__, 1)  # the kernel's own frame
    assert all(f == __file__ for f in files[kernel_at:])


def test_source_shows_the_kernel_first_and_cuda_source_compiles_order():
    @tk.jit
    def k(a: tk.DevicePointer[tk.dt.float16], tid: tk.Uint[tk.ThreadIdx]):
        a[tid] = a[tid] * 2.0

    src = k.source
    assert src.startswith('extern "C" __global__ void k(')
    assert src.index("thork_h2f(thork_half") > src.index('extern "C" __global__')
    full = k.cuda_source
    assert full.index("thork_h2f(thork_half") < full.index('extern "C" __global__')
    code = src.split("\n// ---- Thork's prelude")[0]
    assert code in full


def test_compile_info_with_constexpr_params(target):
    @tk.jit
    def scale(a: tk.DevicePointer[f32], FACTOR: tk.Constexpr[int],
              tid: tk.Uint[tk.ThreadIdx]):
        a[tid] = a[tid] * FACTOR

    assert scale.compile_info is None
    a = np.arange(8, dtype=np.float32)
    scale[1, 8](a, 3, target=target)
    info = scale.compile_info
    assert info is not None and info.target == target
    np.testing.assert_array_equal(a, np.arange(8) * 3)
    assert scale.specialize(FACTOR=3).compile_info is info
