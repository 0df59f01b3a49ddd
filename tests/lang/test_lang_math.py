"""Every math function, for float32, float64, float16 and bfloat16, against NumPy (float64
references) within the ulp tolerances documented in docs/language-math.md."""

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
import thork as tk
from helpers import compiles_for_gpu

# name: (reference, domain low, high, float32/float64 tolerance in ulps)
UNARY = {
    "sqrt": (np.sqrt, 0.0, 100.0, 1), "rsqrt": (lambda x: 1 / np.sqrt(x), 0.01, 100.0, 2),
    "exp": (np.exp, -10, 10, 2), "exp2": (np.exp2, -10, 10, 2),
    "exp10": (lambda x: 10.0 ** x, -4, 4, 2), "expm1": (np.expm1, -3, 3, 2),
    "log": (np.log, 0.01, 100, 2), "log2": (np.log2, 0.01, 100, 2),
    "log10": (np.log10, 0.01, 100, 2), "log1p": (np.log1p, -0.9, 10, 2),
    "sin": (np.sin, -3, 3, 2), "cos": (np.cos, -3, 3, 2), "tan": (np.tan, -1.2, 1.2, 4),
    "tanh": (np.tanh, -5, 5, 2), "sinh": (np.sinh, -5, 5, 3), "cosh": (np.cosh, -5, 5, 2),
    "asin": (np.arcsin, -0.99, 0.99, 2), "acos": (np.arccos, -0.99, 0.99, 2),
    "atan": (np.arctan, -5, 5, 2), "asinh": (np.arcsinh, -5, 5, 3),
    "acosh": (np.arccosh, 1.01, 50, 4), "atanh": (np.arctanh, -0.95, 0.95, 3),
    "erf": (np.vectorize(math.erf), -3, 3, 2), "erfc": (np.vectorize(math.erfc), -2, 3, 5),
    "cbrt": (np.cbrt, -50, 50, 2),
    "floor": (np.floor, -50, 50, 0), "ceil": (np.ceil, -50, 50, 0),
    "trunc": (np.trunc, -50, 50, 0), "rint": (np.rint, -50, 50, 0),
    "round": (lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5), -50, 50, 0),
    "abs": (np.abs, -50, 50, 0),
}
BINARY = {
    "pow": (np.power, (0.1, 10), (-3, 3), 4), "atan2": (np.arctan2, (-5, 5), (-5, 5), 3),
    "fmod": (np.fmod, (-50, 50), (0.5, 7), 0), "hypot": (np.hypot, (-50, 50), (-50, 50), 3),
    "copysign": (np.copysign, (-5, 5), (-5, 5), 0), "fmin": (np.fmin, (-5, 5), (-5, 5), 0),
    "fmax": (np.fmax, (-5, 5), (-5, 5), 0), "min": (np.minimum, (-5, 5), (-5, 5), 0),
    "max": (np.maximum, (-5, 5), (-5, 5), 0),
}
FUNCS = list(UNARY) + list(BINARY) + ["fma"]
PRED = ["isnan", "isinf", "isfinite", "signbit"]
SPECIALS = np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, 1e30, -1e-30])

DTYPES = {
    "float32": (np.float32, None), "float64": (np.float64, None),
    "float16": (np.float16, 2.0**-10), "bfloat16": (ml_dtypes.bfloat16, 2.0**-7),
}


def _math_kernel(dtype):
    @tk.jit(name=f"all_math_{dtype.name}")
    def k(out: tk.DevicePointer[dtype], flags: tk.DevicePointer[tk.dt.uint8],
          x: tk.DevicePointer[dtype], y: tk.DevicePointer[dtype],
          specials: tk.DevicePointer[dtype], n: tk.dt.int32):
        i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
        with tk.if_(i < n):
            for f, name in enumerate(FUNCS):  # unrolled: one statement group per function
                a = x[f * n + i]
                if name in UNARY:
                    r = getattr(tk, name)(a)
                elif name == "fma":
                    r = tk.fma(a, y[f * n + i], a)
                else:
                    r = getattr(tk, name)(a, y[f * n + i])
                out[f * n + i] = r
        with tk.if_(i < len(SPECIALS)):
            s = specials[i]
            for p, name in enumerate(PRED):
                flags[p * len(SPECIALS) + i] = tk.cast(getattr(tk, name)(s), tk.dt.uint8)
    return k


KERNELS = {name: _math_kernel(getattr(tk.dt, name)) for name in DTYPES}


def _exact_fma(a, b, c):
    """a * b + c with one rounding to float64 (exact rational arithmetic)."""
    return np.array([float(Fraction(x) * Fraction(y) + Fraction(z)) for x, y, z in zip(a, b, c)])


def _ulps(got, ref, np_dtype):
    ref_t = ref.astype(np_dtype)
    spacing = np.spacing(np.abs(ref_t).astype(np_dtype)).astype(np.float64)
    return np.abs(got.astype(np.float64) - ref) / spacing


@pytest.mark.parametrize("name", list(DTYPES))
def test_every_math_function_within_documented_ulps(target, rng, name):
    np_dtype, half_ulp = DTYPES[name]
    n = int(rng.integers(200, 500)) | 1
    x = np.empty((len(FUNCS), n))
    y = np.empty((len(FUNCS), n))
    for f, fn in enumerate(FUNCS):
        if fn in UNARY:
            lo, hi = UNARY[fn][1:3]
            x[f] = rng.uniform(lo, hi, n)
            y[f] = 0
        elif fn == "fma":
            x[f], y[f] = rng.uniform(-5, 5, n), rng.uniform(-5, 5, n)
        else:
            (xl, xh), (yl, yh) = BINARY[fn][1:3]
            x[f], y[f] = rng.uniform(xl, xh, n), rng.uniform(yl, yh, n)
    xs, ys = x.astype(np_dtype), y.astype(np_dtype)
    out = np.full((len(FUNCS), n), np.nan, np_dtype)
    flags = np.full((len(PRED), len(SPECIALS)), 7, np.uint8)
    sp = SPECIALS.astype(np_dtype)
    KERNELS[name][(n + 63) // 64, 64](out, flags, xs, ys, sp, n, target=target)
    xd, yd = xs.astype(np.float64), ys.astype(np.float64)
    if half_ulp is not None:
        # 16-bit types compute in float32 and round once: float32 inputs to the reference.
        xd, yd = xd.astype(np.float32).astype(np.float64), yd.astype(np.float32).astype(
            np.float64)
    for f, fn in enumerate(FUNCS):
        if fn in UNARY:
            ref, tol = UNARY[fn][0](xd[f]), UNARY[fn][3]
        elif fn == "fma":
            ref, tol = _exact_fma(xd[f], yd[f], xd[f]), 0
        else:
            ref, tol = BINARY[fn][0](xd[f], yd[f]), BINARY[fn][3]
        got = out[f].astype(np.float64)
        if half_ulp is None:
            if fn == "fma" and name == "float32":
                ref = ref.astype(np.float32).astype(np.float64)  # one rounding
            err = _ulps(got, ref, np_dtype)
            # Results that round to zero compare absolutely (the spacing there is tiny).
            err = np.where(np.abs(ref) < 1e-30, np.abs(got - ref) / 1e-30, err)
            if name == "float64" and tol:
                tol += 1  # NumPy's float64 reference is itself within an ulp
            assert err.max() <= max(tol, 0.5) + 1e-9, (fn, float(err.max()), tol)
        else:
            # One rounding of a float32 result (itself within its ulps) to the 16-bit type.
            np.testing.assert_allclose(got, ref, rtol=half_ulp, atol=half_ulp * 1e-3,
                                       err_msg=fn)
    with np.errstate(invalid="ignore"):
        expect = np.stack([np.isnan(sp), np.isinf(sp), np.isfinite(sp), np.signbit(sp)])
    np.testing.assert_array_equal(flags, expect.astype(np.uint8))
    compiles_for_gpu(KERNELS[name])
