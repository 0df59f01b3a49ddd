"""tk.fast: the approximate float32 functions, on every target, against NumPy (float64
references of the float32 inputs) within the bounds docs/language-math.md states ("Fast
approximate math": NVIDIA's CUDA programming guide and PTX ISA), their flush of subnormal
inputs and results to signed zero, the float32-only error, and the instructions each
compiler emits (no GPU needed)."""

import math

import ml_dtypes
import numpy as np
import pytest
import thork as tk
from helpers import compiles_for_gpu, has_plugin, poisoned

f32 = tk.dt.float32
FLT_MIN = float(np.finfo(np.float32).tiny)  # the smallest normal float32, 2^-126


def _ulp(ref):
    """The spacing of float32 at |ref| (in float64)."""
    r = np.abs(ref).astype(np.float32)
    return np.spacing(np.maximum(r, np.float32(FLT_MIN))).astype(np.float64)


def _in_half_two(x):
    return (x >= 0.5) & (x <= 2.0)


def _log_bound(abs_err, ulps):
    # CUDA programming guide, intrinsic functions: absolute error abs_err for x in [0.5, 2],
    # else ulps (from the correctly rounded result: + 0.5 against the exact value)
    return lambda x, y, ref: np.where(_in_half_two(x), abs_err, (ulps + 0.5) * _ulp(ref))


def _tan_bound(x, y, ref):
    # __tanf: the fast sine (abs 2^-21.41 on [-pi, pi]) over the fast cosine (2^-21.19),
    # a fast division (2 ulps): first-order propagation of the three errors.
    s, c = np.abs(np.sin(x)), np.abs(np.cos(x))
    return 2.0**-21.41 / c + s * 2.0**-21.19 / c**2 + 2.5 * _ulp(ref)


def _pow_bound(x, y, ref):
    # __powf: exp2(y * log2 x) with lg2.approx (abs 2^-22 on (0.5, 2), else relative
    # 2^-22), the product rounded (2^-24 relative), ex2.approx (2 ulps); an error e in the
    # exponent is a relative error ln2 * e of the result (+ 1 % for second-order terms).
    l2 = np.log2(x)
    e_l = 2.0**-22 * np.maximum(1.0, np.abs(l2))
    e_t = np.abs(y) * e_l + np.abs(y * l2) * 2.0**-24
    return 1.01 * math.log(2) * e_t * np.abs(ref) + 2.5 * _ulp(ref)


# name: (NumPy reference, x domain, y domain or None, bound(x, y, ref) -> max |got - ref|)
CASES = {
    "exp2": (np.exp2, (-20, 20), None, lambda x, y, r: 2.5 * _ulp(r)),
    "exp": (np.exp, (-10, 10), None,
            lambda x, y, r: (2 + np.floor(np.abs(1.173 * x)) + 0.5) * _ulp(r)),
    "exp10": (lambda x: 10.0**x, (-4, 4), None,
              lambda x, y, r: (2 + np.floor(np.abs(2.97 * x)) + 0.5) * _ulp(r)),
    "log2": (np.log2, (0.01, 100), None, _log_bound(2.0**-22, 2)),
    "log": (np.log, (0.01, 100), None, _log_bound(2.0**-21.41, 3)),
    "log10": (np.log10, (0.01, 100), None, _log_bound(2.0**-24, 3)),
    "sin": (np.sin, (-math.pi, math.pi), None, lambda x, y, r: np.full_like(r, 2.0**-21.41)),
    "cos": (np.cos, (-math.pi, math.pi), None, lambda x, y, r: np.full_like(r, 2.0**-21.19)),
    "tan": (np.tan, (-1.2, 1.2), None, _tan_bound),
    "tanh": (np.tanh, (-6, 6), None, lambda x, y, r: 2.0**-11 * np.abs(r)),
    "pow": (np.power, (0.1, 10), (-3, 3), _pow_bound),
    "div": (np.divide, (-100, 100), (0.01, 100), lambda x, y, r: 2.5 * _ulp(r)),
    "rcp": (lambda x: 1 / x, (0.001, 1000), None, lambda x, y, r: 1.5 * _ulp(r)),
    "sqrt": (np.sqrt, (0, 1000), None, lambda x, y, r: 2.0**-23 * np.abs(r) + 0.5 * _ulp(r)),
    "rsqrt": (lambda x: 1 / np.sqrt(x), (0.001, 1000), None,
              lambda x, y, r: 2.0**-22.9 * np.abs(r) + 0.5 * _ulp(r)),
}
NAMES = list(CASES)


def _apply(name, a, b):
    fn = getattr(tk.fast, name)
    return fn(a, b) if CASES[name][2] is not None else fn(a)


@tk.jit(name="fast_math_all")
def fast_all(out: tk.DevicePointer[f32], x: tk.DevicePointer[f32], y: tk.DevicePointer[f32],
             n: tk.dt.int32):
    i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    with tk.if_(i < n):
        for f, name in enumerate(NAMES):  # unrolled: one group of statements per function
            out[f * n + i] = _apply(name, x[f * n + i], y[f * n + i])


def _signed(rng, lo, hi, n):
    """Uniform magnitudes in [lo, hi] with random signs (div's divisor)."""
    return rng.uniform(lo, hi, n) * rng.choice([-1.0, 1.0], n)


def test_every_fast_function_within_documented_bounds(target, rng):
    n = int(rng.integers(300, 700)) | 1
    x = np.empty((len(NAMES), n))
    y = np.zeros((len(NAMES), n))
    for f, name in enumerate(NAMES):
        _, (lo, hi), ydom, _ = CASES[name]
        x[f] = rng.uniform(lo, hi, n)
        if ydom is not None:
            y[f] = _signed(rng, *ydom, n) if name == "div" else rng.uniform(*ydom, n)
    xs, ys = x.astype(np.float32), y.astype(np.float32)
    out = poisoned((len(NAMES), n), np.float32)
    fast_all[(n + 127) // 128, 128](out, xs, ys, n, target=target)
    xd, yd = xs.astype(np.float64), ys.astype(np.float64)
    for f, name in enumerate(NAMES):
        ref_fn, _, ydom, bound = CASES[name]
        ref = ref_fn(xd[f], yd[f]) if ydom is not None else ref_fn(xd[f])
        got = out[f].astype(np.float64)
        assert np.isfinite(got).all(), (name, "unwritten or non-finite", got[~np.isfinite(got)])
        err, lim = np.abs(got - ref), bound(xd[f], yd[f], ref)
        worst = int(np.argmax(err / lim))
        assert (err <= lim).all(), (name, float(xd[f][worst]), float(yd[f][worst]),
                                    float(got[worst]), float(ref[worst]), float(lim[worst]))
    compiles_for_gpu(fast_all)


@tk.jit(name="fast_math_trig_wide")
def fast_trig(out: tk.DevicePointer[f32], x: tk.DevicePointer[f32], n: tk.dt.int32):
    i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    with tk.if_(i < n):
        out[i] = tk.fast.sin(x[i])
        out[n + i] = tk.fast.cos(x[i])


def test_fast_sin_cos_over_a_hundred_periods(target, rng):
    """PTX ISA: sin.approx/cos.approx are within 2^-14.7 (absolute) on [-100 pi, 100 pi]."""
    n = int(rng.integers(300, 700)) | 1
    x = rng.uniform(-100 * math.pi, 100 * math.pi, n).astype(np.float32)
    out = poisoned(2 * n, np.float32)
    fast_trig[(n + 63) // 64, 64](out, x, n, target=target)
    xd = x.astype(np.float64)
    np.testing.assert_allclose(out[:n], np.sin(xd), rtol=0, atol=2.0**-14.7)
    np.testing.assert_allclose(out[n:], np.cos(xd), rtol=0, atol=2.0**-14.7)


TINY = 1e-40  # subnormal float32
HUGE = 2.0**127
INF, NAN = math.inf, math.nan
# (function, x, y, expected result): exact, on the GPU (the .ftz instructions; PTX ISA's
# special-case tables) and on the CPU target (the accurate function with the same flushes)
SPECIAL = [
    ("exp2", TINY, 0, 1.0), ("exp2", -130.0, 0, 0.0), ("exp2", -INF, 0, 0.0),
    ("exp", -90.0, 0, 0.0),            # e^-90 = 8.2e-40: a subnormal result, flushed
    ("exp10", -39.0, 0, 0.0),          # 1e-39: flushed
    ("log2", TINY, 0, -INF),           # the input flushes to +0 (accurate: -132.9)
    ("log2", -TINY, 0, -INF),          # to -0: log2(-0) = -inf
    ("log", TINY, 0, -INF), ("log10", TINY, 0, -INF),
    ("sin", TINY, 0, 0.0), ("sin", -TINY, 0, -0.0), ("cos", TINY, 0, 1.0),
    ("tan", -TINY, 0, -0.0),
    ("tanh", TINY, 0, TINY), ("tanh", -TINY, 0, -TINY),  # tanh.approx keeps subnormals
    ("pow", TINY, 2.0, 0.0),           # 2^(2 * log2(+0)) = 2^-inf
    ("pow", -2.0, 2.0, NAN),           # x < 0: log2 is NaN (CUDA's __powf)
    ("div", TINY, 1.0, 0.0), ("div", -TINY, 1.0, -0.0),
    ("div", 1.0, 1e-38, INF),          # the divisor flushes (accurate: 1e38)
    ("div", HUGE, HUGE, 0.0),          # |b| > 2^126: 1/b flushes, the documented zero
    ("div", INF, HUGE, NAN),           # ... and inf * 0
    ("rcp", 1e-38, 0, INF), ("rcp", -1e-38, 0, -INF),
    ("rcp", HUGE, 0, 0.0), ("rcp", -HUGE, 0, -0.0),   # 5.9e-39: flushed
    ("sqrt", TINY, 0, 0.0), ("sqrt", -TINY, 0, -0.0),
    ("rsqrt", TINY, 0, INF), ("rsqrt", -TINY, 0, -INF),
]
SPECIAL_NAMES = sorted({s[0] for s in SPECIAL})


@tk.jit(name="fast_math_special")
def fast_special(out: tk.DevicePointer[f32], x: tk.DevicePointer[f32],
                 y: tk.DevicePointer[f32], which: tk.DevicePointer[tk.dt.int32],
                 n: tk.dt.int32):
    i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    with tk.if_(i < n):
        a, b, w = x[i], y[i], which[i]
        for k, name in enumerate(SPECIAL_NAMES):  # one branch per function
            with tk.if_(w == k):
                out[i] = _apply(name, a, b)


def test_fast_functions_flush_subnormals_to_signed_zero(target):
    xs = np.array([s[1] for s in SPECIAL], np.float32)
    ys = np.array([s[2] for s in SPECIAL], np.float32)
    which = np.array([SPECIAL_NAMES.index(s[0]) for s in SPECIAL], np.int32)
    assert xs[0] != 0 and abs(xs[0]) < FLT_MIN  # the input really is subnormal
    out = poisoned(len(SPECIAL), np.float32)
    fast_special[1, 64](out, xs, ys, which, len(SPECIAL), target=target)
    for (name, a, b, want), got in zip(SPECIAL, out):
        case = (name, a, b, want, float(got))
        if math.isnan(want):
            assert np.isnan(got), case
        else:
            assert got == np.float32(want), case
            assert bool(np.signbit(got)) == (math.copysign(1.0, want) < 0), case


@tk.func
def _inv_norm(a, b):
    return tk.fast.rsqrt(tk.fma(a, a, b * b))


@tk.jit(name="fast_math_in_func")
def fast_in_func(out: tk.DevicePointer[f32], x: tk.DevicePointer[f32],
                 y: tk.DevicePointer[f32], n: tk.dt.int32):
    i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    with tk.if_(i < n):
        out[i] = tk.fast.div(x[i], 3) * _inv_norm(x[i], y[i]) + tk.fast.exp2(2.5)


def test_fast_functions_in_device_functions_and_with_python_numbers(target, rng):
    n = int(rng.integers(100, 300)) | 1
    x = rng.uniform(0.5, 4, n).astype(np.float32)
    y = rng.uniform(0.5, 4, n).astype(np.float32)
    out = poisoned(n, np.float32)
    fast_in_func[(n + 63) // 64, 64](out, x, y, n, target=target)
    xd, yd = x.astype(np.float64), y.astype(np.float64)
    ref = xd / 3 / np.sqrt(xd * xd + yd * yd) + 2**2.5
    np.testing.assert_allclose(out, ref, rtol=2e-6)
    src = fast_in_func.source
    for helper in ("thork_fast_div", "thork_fast_rsqrt", "thork_fast_exp2"):
        assert src.count(f"float {helper}(") == 1, helper  # defined once, where used
    assert "thork_fast_exp10" not in src and "thork_fast_" not in fast_trig_free().source


def fast_trig_free():
    @tk.jit(name="no_fast_math")
    def k(out: tk.DevicePointer[f32], x: tk.DevicePointer[f32]):
        out[0] = tk.exp2(x[0]) + 1.0 / x[0]

    return k


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64", "int32"])
def test_fast_functions_are_float32_only(dtype):
    t = getattr(tk.dt, dtype)

    @tk.jit(name=f"fast_bad_{dtype}")
    def bad(out: tk.DevicePointer[f32], x: tk.DevicePointer[t]):
        out[0] = tk.fast.exp2(x[0])

    with pytest.raises(tk.TraceError, match=rf"tk\.fast\.exp2\(\): parameter 'x' must be "
                                            rf"float32, got {dtype}"):
        bad.ir  # noqa: B018 - tracing raises

    @tk.jit(name=f"fast_bad_div_{dtype}")
    def bad_div(out: tk.DevicePointer[f32], x: tk.DevicePointer[t]):
        out[0] = tk.fast.div(1.0, x[0])

    with pytest.raises(tk.TraceError, match=rf"tk\.fast\.div\(\): parameter 'b' must be "
                                            rf"float32, got {dtype}"):
        bad_div.ir  # noqa: B018


@pytest.mark.parametrize("arg, got", [(True, "bool"), ("1.0", "str"),
                                      (np.float64(1.0), "float64"),
                                      (ml_dtypes.bfloat16(1.0), "bfloat16")])
def test_fast_functions_reject_other_python_values(arg, got):
    @tk.jit(name=f"fast_bad_value_{got}")
    def bad(out: tk.DevicePointer[f32]):
        out[0] = tk.fast.rcp(arg)

    with pytest.raises(tk.TraceError, match=rf"tk\.fast\.rcp\(\): parameter 'x' must be "
                                            rf"float32 .*got {got}"):
        bad.ir  # noqa: B018


def test_fast_function_arity_is_checked():
    @tk.jit(name="fast_bad_arity")
    def bad(out: tk.DevicePointer[f32], x: tk.DevicePointer[f32]):
        out[0] = tk.fast.div(x[0])

    with pytest.raises(tk.TraceError, match=r"tk\.fast\.div\(\) takes 2 arguments \(a, b\)"):
        bad.ir  # noqa: B018


# The PTX each function must become (all .ftz but tanh; exp2 without a subnormal fix-up)
PTX = {"exp2": ["ex2.approx.ftz.f32"], "exp": ["ex2.approx.ftz.f32"],
       "exp10": ["ex2.approx.ftz.f32"], "log2": ["lg2.approx.ftz.f32"],
       "log": ["lg2.approx.ftz.f32"], "log10": ["lg2.approx.ftz.f32"],
       "sin": ["sin.approx.ftz.f32"], "cos": ["cos.approx.ftz.f32"],
       "tan": ["sin.approx.ftz.f32", "cos.approx.ftz.f32", "div.approx.ftz.f32"],
       "tanh": ["tanh.approx.f32"], "pow": ["lg2.approx.ftz.f32", "ex2.approx.ftz.f32"],
       "div": ["div.approx.ftz.f32"], "rcp": ["rcp.approx.ftz.f32"],
       "sqrt": ["sqrt.approx.ftz.f32"], "rsqrt": ["rsqrt.approx.ftz.f32"]}


def _compiler_missing(compiler):
    if not has_plugin(compiler):
        return f"plugin {compiler!r} not installed"
    if compiler == "nvcc":
        from thork_nvcc import find_toolkit

        tk_, why = find_toolkit()
        return None if tk_ is not None else f"nvcc: {why}"
    if compiler == "clang":
        from thork_clang import find_clang

        cl, why = find_clang()
        return None if cl is not None else f"clang: {why}"
    return None


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc", "clang"])
def test_fast_functions_compile_to_their_ptx_instructions(compiler):
    why = _compiler_missing(compiler)
    if why:
        pytest.skip(why)
    assert set(PTX) == set(NAMES) == set(tk.fast.FUNCTIONS)
    for arch in ("sm_75", "sm_90"):
        ptx = fast_all.artifact(arch, compiler=compiler, kind="ptx").data.decode()
        lines = [ln.split("//")[0].strip() for ln in ptx.splitlines()]
        for want in sorted({p for ps in PTX.values() for p in ps}):
            assert any(ln.startswith(want + " ") for ln in lines), (compiler, arch, want)
        # no accurate sequences, no non-ftz approximations: every transcendental is .ftz
        ops = {ln.split()[0] for ln in lines if ln and not ln.startswith((".", "{", "}", "$"))}
        assert not {o for o in ops if o.startswith(("ex2", "lg2", "sin", "cos", "rcp", "div",
                                                    "sqrt", "rsqrt"))
                    and ".ftz" not in o}, (compiler, arch, sorted(ops))
        art = fast_all.artifact(arch, compiler=compiler)
        assert art.kind == "cubin" and art.data[:4] == b"\x7fELF", (compiler, arch)
