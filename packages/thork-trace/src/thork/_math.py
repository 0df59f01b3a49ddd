"""The CUDA math library on traced values: ``tk.sqrt(x)``, ``tk.min(a, b)``...

Float functions keep the argument's float type (float16/bfloat16 compute in float32 and
round back); integer arguments are converted to float32 first. ``abs``, ``min`` and
``max`` also work on integers. ``isnan``/``isinf`` return bool.
"""

from __future__ import annotations

from typing import Any

from thork_core import DType, dt, promote
from thork_core.ir import Call, Const

from ._trace import Value, _convert_const, _to, as_value, current

__all__ = [
    "sqrt", "rsqrt", "exp", "exp2", "log", "log2", "log10", "sin", "cos", "tan", "tanh",
    "asin", "acos", "atan", "sinh", "cosh", "erf", "expm1", "log1p", "cbrt", "floor", "ceil",
    "round", "rint", "trunc", "abs", "min", "max", "pow", "fma", "copysign", "atan2", "fmod",
    "hypot", "isnan", "isinf", "asinh", "acosh", "atanh", "erfc", "exp10", "fmin", "fmax",
    "isfinite", "signbit",
]


def _float_type(t: DType) -> DType:
    return t if t.is_float else dt.float32


def _call(func: str, result: DType, args: list[Value], arg_t: DType) -> Value:
    exprs = tuple(_to(a, arg_t) for a in args)
    return Value(current().temp(Call(result, func, exprs)))


def _unary_float(func: str) -> Any:
    def fn(x: Any) -> Value:
        v = as_value(x)
        t = _float_type(v.dtype)
        return _call(func, t, [v], t)

    fn.__name__ = func
    fn.__doc__ = f"``{func}(x)`` elementwise (CUDA ``{func}f`` for float32)."
    return fn


def _binary_float(func: str) -> Any:
    def fn(a: Any, b: Any) -> Value:
        va = as_value(a, b.dtype if isinstance(b, Value) else None)
        vb = as_value(b, va.dtype)
        t = _float_type(promote(va.dtype, vb.dtype))
        return _call(func, t, [va, vb], t)

    fn.__name__ = func
    fn.__doc__ = f"``{func}(a, b)`` with both arguments converted to their common float type."
    return fn


sqrt = _unary_float("sqrt")
rsqrt = _unary_float("rsqrt")
exp = _unary_float("exp")
exp2 = _unary_float("exp2")
log = _unary_float("log")
log2 = _unary_float("log2")
log10 = _unary_float("log10")
sin = _unary_float("sin")
cos = _unary_float("cos")
tan = _unary_float("tan")
tanh = _unary_float("tanh")
asin = _unary_float("asin")
acos = _unary_float("acos")
atan = _unary_float("atan")
sinh = _unary_float("sinh")
cosh = _unary_float("cosh")
erf = _unary_float("erf")
expm1 = _unary_float("expm1")
log1p = _unary_float("log1p")
cbrt = _unary_float("cbrt")
asinh = _unary_float("asinh")
acosh = _unary_float("acosh")
atanh = _unary_float("atanh")
erfc = _unary_float("erfc")
exp10 = _unary_float("exp10")
floor = _unary_float("floor")
ceil = _unary_float("ceil")
round = _unary_float("round")  # noqa: A001 - half away from zero, as C's round
rint = _unary_float("rint")
trunc = _unary_float("trunc")
pow = _binary_float("pow")  # noqa: A001
copysign = _binary_float("copysign")
atan2 = _binary_float("atan2")
fmod = _binary_float("fmod")
hypot = _binary_float("hypot")
fmin = _binary_float("fmin")
fmin.__doc__ = "C ``fmin``: the smaller value, ignoring a NaN operand (unlike ``tk.min``)."
fmax = _binary_float("fmax")
fmax.__doc__ = "C ``fmax``: the larger value, ignoring a NaN operand (unlike ``tk.max``)."


def fma(a: Any, b: Any, c: Any) -> Value:
    """``a * b + c`` with one rounding, in the common float type."""
    vs = [as_value(x) for x in (a, b, c)]
    t = _float_type(promote(promote(vs[0].dtype, vs[1].dtype), vs[2].dtype))
    return _call("fma", t, vs, t)


def abs(x: Any) -> Value:  # noqa: A001
    """Absolute value; integers stay integers (after C++ promotion)."""
    v = as_value(x)
    t = v.dtype if v.dtype.is_float else promote(v.dtype, v.dtype)
    return _call("abs", t, [v], t)


def _minmax(func: str, a: Any, b: Any) -> Value:
    va = as_value(a, b.dtype if isinstance(b, Value) else None)
    vb = as_value(b, va.dtype)
    t = promote(va.dtype, vb.dtype)
    if isinstance(va.expr, Const) and isinstance(vb.expr, Const):
        # Fold in the common type (-1 and uint32 0 compare as 4294967295 and 0).
        x, y = _convert_const(va.expr.value, t), _convert_const(vb.expr.value, t)
        pick = (y if y < x else x) if func == "min" else (y if x < y else x)
        return Value(Const(t, pick))
    return _call(func, t, [va, vb], t)


def min(a: Any, b: Any) -> Value:  # noqa: A001
    """The smaller of ``a`` and ``b`` in their common type."""
    return _minmax("min", a, b)


def max(a: Any, b: Any) -> Value:  # noqa: A001
    """The larger of ``a`` and ``b`` in their common type."""
    return _minmax("max", a, b)


def isnan(x: Any) -> Value:
    v = as_value(x)
    return _call("isnan", dt.bool, [v], v.dtype)


def isinf(x: Any) -> Value:
    v = as_value(x)
    t = _float_type(v.dtype)
    return _call("isinf", dt.bool, [v], t)


def isfinite(x: Any) -> Value:
    """Neither infinite nor NaN (bool); always true for integers."""
    v = as_value(x)
    return _call("isfinite", dt.bool, [v], v.dtype)


def signbit(x: Any) -> Value:
    """Whether the sign bit is set (bool): true for -0.0 and negative NaNs."""
    v = as_value(x)
    t = _float_type(v.dtype)
    return _call("signbit", dt.bool, [v], t)
