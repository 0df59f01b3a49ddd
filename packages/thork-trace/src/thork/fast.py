"""Fast approximate float32 math: ``tk.fast.exp2(x)``, ``tk.fast.div(a, b)``...

CUDA's fast intrinsics (``__expf``, ``__fdividef``, ``__sinf``...) and the PTX
instructions under them (``ex2.approx.ftz.f32``, ``rcp.approx.ftz.f32``,
``div.approx.ftz.f32``...), spelled the same for NVRTC, nvcc and clang (inline PTX: the
same instruction under every compiler, whatever its flags). Each is one or two hardware
instructions where the accurate function (``tk.exp2``, ``/``) is a sequence, at the cost
of a few ulps and of **subnormal inputs and results flushed to a zero of the same sign**
(``tanh`` excepted). The error bounds, from NVIDIA's CUDA programming guide and the PTX
ISA, are in docs/language-math.md ("Fast approximate math").

Only float32: a float16, bfloat16, float64 or integer traced value is a
:class:`~thork_core.TraceError` naming the function, the parameter and both types
(convert first: ``tk.fast.exp2(h.to(tk.dt.float32))``). Python numbers become float32
constants.

The CPU target computes the accurate float32 function and flushes subnormal inputs and
results to zero as the GPU form does (``div`` as ``a * (1 / b)``, ``pow`` as
``2^(y * log2 x)``, as on the GPU, so the special cases agree).
"""

from __future__ import annotations

from typing import Any

from thork_core import TraceError, dt
from thork_core.ir import Call, Const

from ._trace import Value, current

__all__ = ["FUNCTIONS", "cos", "div", "exp", "exp2", "exp10", "log", "log2", "log10", "pow",
           "rcp", "rsqrt", "sin", "sqrt", "tan", "tanh"]

#: name -> (parameters, what it computes and how the GPU does it). The IR call is
#: ``fast_<name>``; every renderer spells it ``thork_fast_<name>(...)``.
FUNCTIONS: dict[str, tuple[tuple[str, ...], str]] = {
    "exp2": (("x",), "2^x: ``ex2.approx.ftz.f32``"),
    "exp": (("x",), "e^x: ``ex2.approx.ftz.f32`` of ``x * log2(e)`` (CUDA's ``__expf``)"),
    "exp10": (("x",), "10^x: ``ex2.approx.ftz.f32`` of ``x * log2(10)`` (``__exp10f``)"),
    "log2": (("x",), "log2(x): ``lg2.approx.ftz.f32`` (``__log2f``)"),
    "log": (("x",), "ln(x): ``lg2.approx.ftz.f32`` times ln 2 (``__logf``)"),
    "log10": (("x",), "log10(x): ``lg2.approx.ftz.f32`` times log10(2) (``__log10f``)"),
    "sin": (("x",), "sin(x), x in radians: ``sin.approx.ftz.f32`` (``__sinf``)"),
    "cos": (("x",), "cos(x), x in radians: ``cos.approx.ftz.f32`` (``__cosf``)"),
    "tan": (("x",), "tan(x), x in radians: the fast sine over the fast cosine (``__tanf``)"),
    "tanh": (("x",), "tanh(x): ``tanh.approx.f32`` (``__tanhf``; subnormals kept)"),
    "pow": (("x", "y"), "x^y for x > 0: ``2^(y * log2 x)`` with the fast ``exp2`` and "
                        "``log2`` (``__powf``)"),
    "div": (("a", "b"), "a / b: ``div.approx.ftz.f32``, ``a * (1 / b)`` (``__fdividef``)"),
    "rcp": (("x",), "1 / x: ``rcp.approx.ftz.f32``"),
    "sqrt": (("x",), "sqrt(x): ``sqrt.approx.ftz.f32``"),
    "rsqrt": (("x",), "1 / sqrt(x): ``rsqrt.approx.ftz.f32``"),
}


def _operand(fn: str, param: str, x: Any) -> Value:
    """``x`` as a float32 value, or the error naming ``tk.fast.<fn>``'s ``param``."""
    if isinstance(x, Value):
        if x.dtype != dt.float32:
            raise TraceError(f"tk.fast.{fn}(): parameter '{param}' must be float32, got "
                             f"{x.dtype.name} (the fast functions are float32 only: "
                             f"convert with .to(tk.dt.float32))")
        return x
    typed = False
    try:
        import numpy as np

        typed = isinstance(x, np.generic)  # NumPy scalars keep their type, as elsewhere
    except ImportError:  # pragma: no cover
        pass
    if typed:
        if x.dtype == np.float32:
            return Value(Const(dt.float32, float(x)))
    elif isinstance(x, (int, float)) and not isinstance(x, bool):
        return Value(Const(dt.float32, float(x)))
    got = getattr(getattr(x, "dtype", None), "name", None) or type(x).__name__
    raise TraceError(f"tk.fast.{fn}(): parameter '{param}' must be float32 (a traced "
                     f"float32 value or a Python number), got {got}")


def _make(name: str) -> Any:
    params, what = FUNCTIONS[name]

    def fn(*args: Any) -> Value:
        if len(args) != len(params):
            raise TraceError(f"tk.fast.{name}() takes {len(params)} argument"
                             f"{'s' if len(params) > 1 else ''} "
                             f"({', '.join(params)}), got {len(args)}")
        exprs = tuple(_operand(name, p, a).expr for p, a in zip(params, args))
        return Value(current().temp(Call(dt.float32, f"fast_{name}", exprs)))

    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = __name__
    fn.__doc__ = (f"``tk.fast.{name}({', '.join(params)})``: {what}. float32 only; "
                  "subnormal inputs and results flush to zero"
                  + (" (not for tanh)" if name == "tanh" else "")
                  + ". Bounds: docs/language-math.md, \"Fast approximate math\".")
    return fn


exp2 = _make("exp2")
exp = _make("exp")
exp10 = _make("exp10")
log2 = _make("log2")
log = _make("log")
log10 = _make("log10")
sin = _make("sin")
cos = _make("cos")
tan = _make("tan")
tanh = _make("tanh")
pow = _make("pow")  # noqa: A001
div = _make("div")
rcp = _make("rcp")
sqrt = _make("sqrt")
rsqrt = _make("rsqrt")
