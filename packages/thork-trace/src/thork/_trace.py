"""Tracing: run a Python function on symbolic values and record what it does as IR.

A :class:`Trace` is the recording in progress: the statement list being appended to,
fresh temporary names, and which parameters were loaded and stored. Traced values
(:class:`Value`, :class:`Pointer`, :class:`Dim3`) turn Python operators into IR.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import Any

from thork_core import DType, Loc, PointerType, TraceError, dt, literal_dtype, promote
from thork_core.ir import (
    Binary,
    Cast,
    Const,
    Expr,
    Field,
    Let,
    Load,
    Offset,
    Param,
    Select,
    Special,
    Stmt,
    Store,
    Var,
    VecLoad,
    VecStore,
    VectorType,
    stmt_exprs,
    walk_exprs,
)

from ._hints import cache_op

__all__ = [
    "TraceWarning", "warn", "Trace", "Value", "Memory", "Pointer", "Dim3", "current",
    "current_or_none", "where", "cast", "as_value", "View", "view",
]


def _package_dir(name: str) -> str:
    """The folder of the imported package ``name`` (its modules' frames are Thork's)."""
    file = sys.modules[name].__file__
    if file is None:  # a namespace package: Thork's packages are regular ones
        raise ImportError(f"{name} has no __init__ file")
    return os.path.dirname(os.path.abspath(file))


_PACKAGE_DIRS = tuple(_package_dir(n) for n in (__name__.rsplit(".", 1)[0], "thork_core"))


# contextlib's frames sit between a ``with tk.if_(...)`` line and the tracer.
_SKIP_FILES = frozenset({os.path.abspath(contextlib.__file__)})


def user_loc() -> Loc | None:
    """The first stack frame outside Thork's own packages: where the user's code is."""
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(_PACKAGE_DIRS) and fn not in _SKIP_FILES:
            return Loc(os.path.abspath(fn), f.f_lineno)
        f = f.f_back  # type: ignore[assignment]
    return None


def _user_frame() -> Any:
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(_PACKAGE_DIRS) and fn not in _SKIP_FILES:
            return f
        f = f.f_back  # type: ignore[assignment]
    return None


def user_frames(tb: Any) -> Any:
    """The traceback ``tb`` without Thork's own frames (and contextlib's): what is left
    leads from the user's call to the user's line that the error is about."""
    import types

    keep = []
    while tb is not None:
        fn = tb.tb_frame.f_code.co_filename
        if not fn.startswith(_PACKAGE_DIRS) and fn not in _SKIP_FILES:
            keep.append(tb)
        tb = tb.tb_next
    out = None
    for t in reversed(keep):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out


def user_line() -> str:
    """The stripped text of the user's source line being traced ('' if unknown)."""
    import linecache

    f = _user_frame()
    if f is None:
        return ""
    return linecache.getline(f.f_code.co_filename, f.f_lineno).strip()


def describe(v: Any) -> str:
    """How error messages name a traced value: the user's variable name when a frame of
    the user's code holds it (``'acc'``), else "a traced <dtype> value"."""
    expr = getattr(v, "expr", None)
    f = _user_frame()
    while f is not None and expr is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(_PACKAGE_DIRS) and fn not in _SKIP_FILES:
            for name, obj in f.f_locals.items():
                if getattr(obj, "expr", None) is expr and not name.startswith("."):
                    return f"traced value '{name}'"
        f = f.f_back
    t = getattr(getattr(v, "expr", None), "type", None)
    return f"a traced {getattr(t, 'name', '')} value".replace("  ", " ")


_NUMPY_TO_TK = {"absolute": "abs", "fabs": "abs", "power": "pow", "float_power": "pow",
                "arctan2": "atan2", "arcsin": "asin", "arccos": "acos", "arctan": "atan",
                "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh",
                "minimum": "min", "maximum": "max", "fmin": "fmin", "fmax": "fmax",
                "around": "round"}
_OPERATORS = {"add": "+", "subtract": "-", "multiply": "*", "true_divide": "/",
              "floor_divide": "//", "remainder": "%", "less": "<", "greater": ">",
              "equal": "==", "not_equal": "!=", "less_equal": "<=", "greater_equal": ">=",
              "negative": "unary -", "bitwise_and": "&", "bitwise_or": "|",
              "bitwise_xor": "^", "left_shift": "<<", "right_shift": ">>"}


# ufunc → (method when the traced value is on the left, when it is on the right).
_UFUNC_DUNDERS = {
    "add": ("__add__", "__radd__"), "subtract": ("__sub__", "__rsub__"),
    "multiply": ("__mul__", "__rmul__"), "true_divide": ("__truediv__", "__rtruediv__"),
    "floor_divide": ("__floordiv__", "__rfloordiv__"), "remainder": ("__mod__", "__rmod__"),
    "bitwise_and": ("__and__", "__rand__"), "bitwise_or": ("__or__", "__ror__"),
    "bitwise_xor": ("__xor__", "__rxor__"), "left_shift": ("__lshift__", "__rlshift__"),
    "right_shift": ("__rshift__", "__rrshift__"), "less": ("__lt__", "__gt__"),
    "greater": ("__gt__", "__lt__"), "less_equal": ("__le__", "__ge__"),
    "greater_equal": ("__ge__", "__le__"), "equal": ("__eq__", "__eq__"),
    "not_equal": ("__ne__", "__ne__"),
}


def _tk_name(name: str) -> str | None:
    import importlib

    tk = importlib.import_module(__name__.rsplit(".", 1)[0])
    name = _NUMPY_TO_TK.get(name, name)
    return f"tk.{name}" if name in getattr(tk, "__all__", ()) else None


def _numpy_message(v: Any, name: str) -> str:
    if name in _OPERATORS:
        return (f"NumPy's {name} on {describe(v)} runs at trace time on Python data; write "
                f"the operator ({_OPERATORS[name]}) on the traced value directly")
    tk_name = _tk_name(name)
    use = f"use {tk_name}(...)" if tk_name else "see docs/language-math.md for tk's functions"
    return (f"NumPy's {name}() was called on {describe(v)}; NumPy runs at trace time on "
            f"Python data, not in the kernel: {use}")


def _python_math_message(v: Any, kind: str) -> str:
    import re

    line = user_line()
    m = re.search(r"\bmath\.(\w+)\s*\(", line)
    if m:
        tk_name = _tk_name(m.group(1))
        use = f"use {tk_name}(...)" if tk_name else \
            "see docs/language-math.md for tk's functions"
        return (f"math.{m.group(1)}() was called on {describe(v)}; Python's math module "
                f"runs at trace time on Python numbers, not in the kernel: {use}")
    return (f"{describe(v)} cannot become a Python {kind}: it is only known when the "
            f"kernel runs; convert on the device with tk.cast(x, tk.dt...) and use tk's "
            "math functions (tk.exp, tk.sqrt...) instead of Python's math module")


class TraceWarning(UserWarning):
    """Something a kernel does that is legal but almost certainly not what was meant
    (like C compilers' ``-Wtype-limits``): reported once per Python line at trace time."""


def warn(message: str) -> None:
    """Warn with :class:`TraceWarning`, attributed to the user's line being traced."""
    import warnings

    loc = user_loc()
    if loc is None:
        warnings.warn(message, TraceWarning, stacklevel=2)
    else:
        warnings.warn_explicit(message, TraceWarning, loc.file, loc.line)


class Trace:
    """The IR being recorded for one kernel (or one device function, with ``parent``).

    Statements go to ``_block``, the innermost open block. Blocks are opened with
    :meth:`push` and closed with :meth:`pop`; a temporary defined in a closed block is
    out of scope in C++, so using it afterwards is a trace-time error here (with the
    Python line) instead of a C++ compile error later.
    """

    def __init__(self, name: str, params: list[Param], parent: Trace | None = None) -> None:
        self.name = name
        self.params = params
        self.body: list[Stmt] = []
        self._block = self.body
        self._counter = 0
        self.parent = parent
        #: The kernel's trace: owns device functions and the shared-memory budget.
        self.root: Trace = parent.root if parent is not None else self
        #: Names of mutable locals (``tk.var``), rendered without ``const``.
        self.mutable: set[str] = set()
        #: Device functions traced so far (callees before callers); root only.
        self.functions: list[Any] = []
        self.function_cache: dict[Any, Any] = {}
        #: Module-level arrays (tk.const_array, tk.device_array) used so far (root only).
        self.globals: list[Any] = []
        #: Signatures of device functions being traced now, outermost first (root only).
        self.functions_open: list[Any] = []
        #: Bytes of static shared memory declared so far (kernel-wide).
        self.static_shared = 0
        #: (max_threads, min_blocks) of tk.launch_bounds (root only), or None.
        self.launch_bounds: tuple[int, int] | None = None
        #: (x, y, z) of tk.cluster_dims (root only), or None.
        self.cluster_dims: tuple[int, int, int] | None = None
        self.is_function = parent is not None
        self._stack: list[list[Stmt]] = []
        self._closed: set[int] = set()
        self._defined: dict[str, int] = {}
        self.loops = 0
        #: Errors noticed where raising is impossible (a generator being closed);
        #: reported when the trace ends.
        self.deferred: list[str] = []

    # -- blocks ---------------------------------------------------------------------------
    def push(self, block: list[Stmt]) -> None:
        """Make ``block`` (a nested statement list) the one being appended to."""
        self._stack.append(self._block)
        self._block = block

    def pop(self) -> None:
        """Close the innermost block and return to its parent."""
        self._closed.add(id(self._block))
        self._block = self._stack.pop()

    def fresh(self, hint: str = "t") -> str:
        """A new temporary name."""
        name = f"_{hint}{self._counter}"
        self._counter += 1
        return name

    def define(self, name: str, block: list[Stmt] | None = None) -> None:
        """Record that ``name`` is declared in ``block`` (default: the current one)."""
        self._defined[name] = id(self._block if block is None else block)

    # -- statements -----------------------------------------------------------------------
    def emit(self, stmt: Stmt) -> None:
        if stmt.loc is None:
            stmt.loc = user_loc()
        self._check_scope(stmt)
        if isinstance(stmt, Let):
            self._defined[stmt.var.name] = id(self._block)
        self._block.append(stmt)

    def temp(self, expr: Expr, hint: str = "t") -> Var:
        """Bind ``expr`` to a fresh immutable temporary and return it."""
        var = Var(expr.type, self.fresh(hint))
        self.emit(Let(var, expr))
        return var

    def _check_scope(self, stmt: Stmt) -> None:
        for top in stmt_exprs(stmt):
            for e in walk_exprs(top):
                if not isinstance(e, Var):
                    continue
                block = self._defined.get(e.name)
                if block is not None:
                    if block in self._closed:
                        raise TraceError(
                            f"{_scope_name(e)} was computed inside a tk.if_/tk.range/tk.while_ "
                            "block that has ended, and is used after it (at "
                            f"{stmt.loc}). To carry a value out of a block, declare "
                            "x = tk.var(initial) before it and x.set(...) (or x += ...) "
                            "inside")
                    continue
                outer = self.parent
                while outer is not None:
                    if e.name in outer._defined:
                        raise TraceError(
                            f"a device function uses {_scope_name(e)} of its caller "
                            f"(at {stmt.loc}); pass it as an argument instead")
                    outer = outer.parent


def _scope_name(var: Var) -> str:
    named = describe(Value(var))
    return named if "'" in named else f"a traced value ({var.name} in the generated code)"


_local = threading.local()


def current_or_none() -> Trace | None:
    """The trace being recorded on this thread, if any."""
    return getattr(_local, "trace", None)


def current() -> Trace:
    trace = getattr(_local, "trace", None)
    if trace is None:
        raise TraceError(
            "traced values can only be used while a @tk.jit kernel is being traced")
    return trace


def set_current(trace: Trace | None) -> Trace | None:
    prev = getattr(_local, "trace", None)
    _local.trace = trace
    return prev


# -- values -------------------------------------------------------------------------------
def as_value(x: Any, like: DType | None = None) -> Value:
    """Wrap a Python number as a constant; Python floats take ``like``'s float type."""
    if isinstance(x, Value):
        return x
    if isinstance(x, (Memory, Dim3)):
        raise TraceError(f"cannot use {type(x).__name__} {x!r} as a number in a kernel")
    try:
        import numpy as np

        if isinstance(x, np.generic):
            from thork_core import dtype_of

            return Value(Const(dtype_of(x.dtype), x.item()))
    except ImportError:  # pragma: no cover
        pass
    t = literal_dtype(x)
    if isinstance(x, float) and like is not None and like.is_float:
        t = like  # float literals are 'weak': 2.0 * half stays half, 2.0 * double is double
    return Value(Const(t, x))


def _bin(op: str, a: Any, b: Any, *, reverse: bool = False) -> Value:
    if reverse:
        a, b = b, a
    va = as_value(a, b.dtype if isinstance(b, Value) else None)
    vb = as_value(b, va.dtype)
    ta, tb = va.dtype, vb.dtype
    if op in ("land", "lor"):
        return Value(current().temp(Binary(dt.bool, op, _to(va, dt.bool), _to(vb, dt.bool))))
    if op in ("shl", "shr"):
        if not (ta.is_int or ta == dt.bool) or not (tb.is_int or tb == dt.bool):
            raise TraceError(f"shift needs integer operands, got {ta.name} and {tb.name}")
        rt = promote(ta, ta)
        return Value(current().temp(Binary(rt, op, _to(va, rt), _to(vb, promote(tb, tb)))))
    if op == "div" and not ta.is_float and not tb.is_float:
        # '/' is true division (as in Python and Triton); '//' is C++ integer division.
        ct: DType = dt.float32
    else:
        ct = promote(ta, tb)
    if op in ("and", "or", "xor") and ct.is_float:
        raise TraceError(f"bitwise operator on {ta.name} and {tb.name}; needs integers or bool")
    if op in ("and", "or", "xor") and ta == dt.bool and tb == dt.bool:
        ct = dt.bool
    if op in ("floordiv", "mod") and ct.is_float:
        raise TraceError(
            f"'{'//' if op == 'floordiv' else '%'}' on {ct.name} is not supported; "
            "use integer operands (C++ truncating division/remainder)")
    rt = dt.bool if op in _CMP else ct
    if op in _CMP and ct.kind == "u":
        _check_unsigned_compare(op, va, vb, ct)
    return Value(current().temp(Binary(rt, op, _to(va, ct), _to(vb, ct))))


_CMP = frozenset({"lt", "le", "gt", "ge", "eq", "ne"})
_SYMBOL = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
# ``x op 0`` on an unsigned x that is decided whatever x is: op → the constant result.
_AGAINST_ZERO = {"ge": True, "lt": False}
_SWAPPED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}


def _check_unsigned_compare(op: str, va: Value, vb: Value, ct: DType) -> None:
    """Warn about comparisons in an unsigned type whose result does not depend on the
    traced operand: ``x >= 0`` (always true), ``x < 0`` (always false), or a negative
    constant, which C++ converts to a huge unsigned number."""
    if isinstance(va.expr, Const) and not isinstance(vb.expr, Const):
        va, vb, op = vb, va, _SWAPPED[op]  # now: traced op constant
    if isinstance(va.expr, Const) or not isinstance(vb.expr, Const):
        return
    c = vb.expr.value
    if isinstance(c, bool) or not isinstance(c, int):
        return
    why = (f"its operands are {ct.name} (an unsigned value such as tk.thread_idx().x or "
           "an expression containing one makes the whole comparison unsigned)")
    fix = ("for signed index math use signed built-ins (tk.Int[tk.BlockIdx], "
           "tk.thread_idx(signed=True)) or convert first: tk.cast(x, tk.dt.int32)")
    if c < 0:
        warn(f"comparison '({ct.name} value) {_SYMBOL[op]} {c}' is done in {ct.name}, so "
             f"{c} becomes {c % (1 << ct.bits)}: {why}; {fix}")
    elif c == 0 and op in _AGAINST_ZERO:
        warn(f"comparison '({ct.name} value) {_SYMBOL[op]} 0' is always "
             f"{_AGAINST_ZERO[op]}: {why}; {fix}")


def _to(v: Value, t: DType) -> Expr:
    """``v`` converted to ``t`` (constants fold, other values get a Cast)."""
    if v.dtype == t:
        return v.expr
    if isinstance(v.expr, Const):
        return Const(t, _convert_const(v.expr.value, t))
    return Cast(t, v.expr)


def _convert_const(value: Any, t: DType) -> Any:
    if t == dt.bool:
        return bool(value)
    if t.is_float:
        return float(value)
    iv = int(value)
    if t.kind == "u":
        return iv % (1 << t.bits)
    half = 1 << (t.bits - 1)
    return (iv + half) % (1 << t.bits) - half


class Value:
    """A traced scalar. Python operators record IR; ``bool()`` is an error."""

    __slots__ = ("expr",)
    __hash__ = object.__hash__

    def __init__(self, expr: Expr) -> None:
        self.expr = expr

    @property
    def dtype(self) -> DType:
        t = self.expr.type
        assert isinstance(t, DType)
        return t

    def __repr__(self) -> str:
        name = self.expr.name if isinstance(self.expr, Var) else type(self.expr).__name__
        return f"<traced {self.dtype.name} {name}>"

    def __bool__(self) -> bool:
        line = user_line()
        what = f"{describe(self)} has no Python truth value: its value is only known " \
            "when the kernel runs"
        head = line.split(None, 1)[0] if line else ""
        if head == "while":
            hint = ("a Python 'while' on it cannot loop on the device; use "
                    "'with tk.while_(lambda: cond):' (or 'for i in tk.range(...)')")
        elif head in ("if", "elif", "else"):
            hint = ("a Python 'if' on it cannot branch on the device; use "
                    "'with tk.if_(cond):' for a branch, or tk.where(cond, a, b) / "
                    "tk.cond(cond, lambda: a, lambda: b) to select a value")
        elif head == "assert":
            hint = "an assert cannot test it at trace time"
        elif " and " in line or " or " in line or line.startswith("not ") or " not " in line:
            hint = ("Python's 'and'/'or'/'not' need truth values; use '&', '|', '~' on "
                    "traced conditions (with parentheses: (a < b) & (c < d))")
        else:
            hint = ("use tk.where(cond, a, b) to select a value, tk.if_(cond) for a branch, "
                    "tk.while_ for a loop")
        raise TraceError(f"{what}; {hint}")

    def __str__(self) -> str:
        # print(x) and f"{x}" run at trace time: they can only show the symbol.
        warn(f"print()/str() of {describe(self)} runs at trace time and shows the symbol, "
             "not what a thread computes; use tk.print(...) to print from the device")
        return repr(self)

    def __index__(self) -> int:
        raise TraceError(f"{describe(self)} cannot be used as a Python int (e.g. in range() "
                         "or as a list index); use tk.range() for loops over traced bounds")

    def __float__(self) -> float:
        raise TraceError(_python_math_message(self, "float"))

    def __int__(self) -> int:
        raise TraceError(_python_math_message(self, "int"))

    def __complex__(self) -> complex:
        raise TraceError(_python_math_message(self, "complex"))

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        name = getattr(ufunc, "__name__", str(ufunc))
        ops = _UFUNC_DUNDERS.get(name)
        if ops is not None and method == "__call__" and len(inputs) == 2 and not kwargs:
            # A NumPy scalar operand (np.float32(2) * x): the operator on the traced value.
            # NumPy hands scalars over as 0-d arrays: back to NumPy scalars (typed).
            a, b = (x[()] if getattr(x, "ndim", None) == 0 else x for x in inputs)
            return getattr(a, ops[0])(b) if isinstance(a, Value) else getattr(b, ops[1])(a)
        # NumPy functions run at trace time on Python data; name the device function.
        raise TraceError(_numpy_message(self, name))

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        raise TraceError(_numpy_message(self, getattr(func, "__name__", str(func))))

    def to(self, dtype: Any, *, nan: str = "keep") -> Value:
        """This value converted to ``dtype`` (C++ ``static_cast``; ``nan`` as
        :func:`cast`'s)."""
        return cast(self, dtype, nan=nan)

    astype = to

    # arithmetic
    def __add__(self, o: Any) -> Value: return _bin("add", self, o)
    def __radd__(self, o: Any) -> Value: return _bin("add", self, o, reverse=True)
    def __sub__(self, o: Any) -> Value: return _bin("sub", self, o)
    def __rsub__(self, o: Any) -> Value: return _bin("sub", self, o, reverse=True)
    def __mul__(self, o: Any) -> Value: return _bin("mul", self, o)
    def __rmul__(self, o: Any) -> Value: return _bin("mul", self, o, reverse=True)
    def __truediv__(self, o: Any) -> Value: return _bin("div", self, o)
    def __rtruediv__(self, o: Any) -> Value: return _bin("div", self, o, reverse=True)
    def __floordiv__(self, o: Any) -> Value: return _bin("floordiv", self, o)
    def __rfloordiv__(self, o: Any) -> Value: return _bin("floordiv", self, o, reverse=True)
    def __mod__(self, o: Any) -> Value: return _bin("mod", self, o)
    def __rmod__(self, o: Any) -> Value: return _bin("mod", self, o, reverse=True)
    # bitwise
    def __and__(self, o: Any) -> Value: return _bin("and", self, o)
    def __rand__(self, o: Any) -> Value: return _bin("and", self, o, reverse=True)
    def __or__(self, o: Any) -> Value: return _bin("or", self, o)
    def __ror__(self, o: Any) -> Value: return _bin("or", self, o, reverse=True)
    def __xor__(self, o: Any) -> Value: return _bin("xor", self, o)
    def __rxor__(self, o: Any) -> Value: return _bin("xor", self, o, reverse=True)
    def __lshift__(self, o: Any) -> Value: return _bin("shl", self, o)
    def __rlshift__(self, o: Any) -> Value: return _bin("shl", self, o, reverse=True)
    def __rshift__(self, o: Any) -> Value: return _bin("shr", self, o)
    def __rrshift__(self, o: Any) -> Value: return _bin("shr", self, o, reverse=True)
    # comparisons
    def __lt__(self, o: Any) -> Value: return _bin("lt", self, o)  # type: ignore[override]
    def __le__(self, o: Any) -> Value: return _bin("le", self, o)  # type: ignore[override]
    def __gt__(self, o: Any) -> Value: return _bin("gt", self, o)  # type: ignore[override]
    def __ge__(self, o: Any) -> Value: return _bin("ge", self, o)  # type: ignore[override]
    def __eq__(self, o: Any) -> Value: return _bin("eq", self, o)  # type: ignore[override]
    def __ne__(self, o: Any) -> Value: return _bin("ne", self, o)  # type: ignore[override]

    def __neg__(self) -> Value:
        from thork_core.ir import Unary

        t = promote(self.dtype, self.dtype)
        return Value(current().temp(Unary(t, "neg", _to(self, t))))

    def __pos__(self) -> Value:
        return self

    def __invert__(self) -> Value:
        from thork_core.ir import Unary

        if self.dtype == dt.bool:
            return Value(current().temp(Unary(dt.bool, "not", self.expr)))
        if not self.dtype.is_int:
            raise TraceError(f"'~' needs an integer or bool, got {self.dtype.name}")
        t = promote(self.dtype, self.dtype)
        return Value(current().temp(Unary(t, "invert", _to(self, t))))


#: ``tk.cast``'s ``nan`` choices.
NAN_MODES = ("keep", "canonical")


def cast(x: Any, dtype: Any, *, nan: str = "keep") -> Value:
    """Convert ``x`` to ``dtype`` with C++ ``static_cast`` semantics.

    ``nan`` matters only for floating-point values going to ``bfloat16``: ``"keep"`` (the
    default) keeps a NaN's sign and the top bits of its payload (quieted), in software on
    every target (about 7 instructions an element on a GPU); ``"canonical"`` rounds
    ``float32`` (or ``float16``/``bfloat16``) values the same way, to nearest even, but
    turns every NaN into the canonical NaN ``0x7FFF`` — what the GPU's ``cvt.rn.bf16.f32``
    gives, so on sm_80 and later it is that one instruction, and two conversions stored
    side by side become one ``cvt.rn.bf16x2.f32``. The CPU target computes the same bits."""
    from thork_core import dtype_of

    t = dtype_of(dtype)
    if nan not in NAN_MODES:
        raise TraceError(f"tk.cast(): nan must be one of {', '.join(map(repr, NAN_MODES))}, "
                         f"got {nan!r}")
    v = as_value(x)
    if nan == "canonical":
        return _cast_bf16_canonical(v, t)
    if v.dtype == t:
        # A mutable local (tk.var) is snapshotted: the result must not change with it.
        return v if type(v) is Value else Value(current().temp(v.expr))
    if isinstance(v.expr, Const):
        return Value(Const(t, _convert_const(v.expr.value, t)))
    return Value(current().temp(Cast(t, v.expr)))


def _cast_bf16_canonical(v: Value, t: DType) -> Value:
    """``tk.cast(v, bfloat16, nan="canonical")``: a ``Call`` of ``bf16_rn`` on the float32
    value (float16 and bfloat16 widen to float32 exactly)."""
    from thork_core.ir import Call

    if t != dt.bfloat16:
        raise TraceError(f"tk.cast(): nan='canonical' converts to bfloat16 only, got dtype "
                         f"{t.name}")
    if v.dtype not in (dt.float32, dt.float16, dt.bfloat16):
        raise TraceError(f"tk.cast(): nan='canonical' needs x of float32, float16 or "
                         f"bfloat16 (one rounding from float32), got {v.dtype.name}; cast "
                         f"it to float32 first if a second rounding is acceptable")
    return Value(current().temp(Call(dt.bfloat16, "bf16_rn", (_to(v, dt.float32),))))


def where(cond: Any, if_true: Any, if_false: Any) -> Any:
    """``cond ? if_true : if_false`` evaluated per thread (both sides are computed).

    With two arrays (of one dtype and memory space) the result is a view of the chosen
    one: which array a thread reads or writes can be decided at run time."""
    if isinstance(if_true, Memory) or isinstance(if_false, Memory):
        return _choose_array(cond, if_true, if_false)
    c = as_value(cond)
    a = as_value(if_true, if_false.dtype if isinstance(if_false, Value) else None)
    b = as_value(if_false, a.dtype)
    t = promote(a.dtype, b.dtype) if a.dtype != b.dtype else a.dtype
    return Value(current().temp(Select(t, _to(c, dt.bool), _to(a, t), _to(b, t))))


def _vector_width(array: Memory, n: Any, what: str) -> None:
    """Check a vector access's element count ``n`` (2, 4 or 8; at most 16 bytes)."""
    if not isinstance(n, int) or n not in (2, 4, 8):
        raise TraceError(f"tk.{what}(): n must be 2, 4 or 8, got {n!r}")
    nbytes = n * array.dtype.itemsize
    if nbytes > 16:
        raise TraceError(f"tk.{what}(): {n} x {array.dtype.name} is {nbytes} bytes; a vector "
                         "access moves at most 16 bytes")


class Memory:
    """Something indexable in device memory: a global array parameter or a shared array.

    ``m[i]`` loads and ``m[i] = v`` stores (``v`` converted to the element type);
    ``m.vload(i, n)``/``m.vstore(i, values)`` move ``n`` elements in one access;
    ``m.load(i, cache=..., evict=...)``/``m.store(i, v, cache=..., evict=...)`` are ``m[i]``
    with a PTX cache operator and/or an L2 eviction priority (vload/vstore take both too:
    ``cache="cs"`` streams data used once). Atomics
    (``tk.atomic_add(m, i, v)``...) take a :class:`Memory` and an index.
    """

    __slots__ = ()
    expr: Expr

    @property
    def dtype(self) -> DType:
        t = self.expr.type
        assert isinstance(t, PointerType)
        return t.elem

    @property
    def space(self) -> str:
        """``"global"`` or ``"shared"``."""
        t = self.expr.type
        assert isinstance(t, PointerType)
        return t.space

    @property
    def label(self) -> str:
        """The name used in error messages."""
        return self.expr.name if isinstance(self.expr, Var) else "array"

    def index_expr(self, i: Any) -> Expr:
        """The flat element index of ``i`` as an integer expression."""
        if isinstance(i, tuple):
            raise TraceError(
                f"'{self.label}' is a flat pointer: index it with one integer "
                "(compute row * width + col), got a tuple")
        return _index_value(i, self.label).expr

    def mark_read(self) -> None:
        """Record a load (kernel parameters are then copied to the device)."""

    def mark_written(self) -> None:
        """Record a store (kernel parameters are then copied back)."""

    def __getitem__(self, i: Any) -> Value:
        idx = self.index_expr(i)
        self.mark_read()
        return Value(current().temp(Load(self.dtype, self.expr, idx)))

    def __setitem__(self, i: Any, value: Any) -> None:
        idx = self.index_expr(i)
        v = as_value(value, self.dtype)
        self.mark_written()
        current().emit(Store(self.expr, idx, _to(v, self.dtype)))

    def load(self, i: Any, *, cache: str | None = None, evict: str | None = None) -> Value:
        """``self[i]`` with a PTX load cache operator ``cache`` (``"cs"``: streaming, for
        data read once; ``"cg"``: L2 only...; None: a plain load) and/or the L2 eviction
        priority ``evict`` of the line it allocates (``"first"``, ``"last"``, ``"normal"``,
        ``"unchanged"``: sm_80+; see :func:`thork._hints.cache_op`). Global arrays only."""
        op = cache_op(self, cache, False, f"'{self.label}'.load()", evict)
        idx = self.index_expr(i)
        self.mark_read()
        return Value(current().temp(Load(self.dtype, self.expr, idx, op)))

    def store(self, i: Any, value: Any, *, cache: str | None = None,
              evict: str | None = None) -> None:
        """``self[i] = value`` with a PTX store cache operator ``cache`` (``"cs"``:
        streaming, for data written once; None: a plain store) and/or an L2 eviction
        priority ``evict`` (as :meth:`load`'s). Global arrays only."""
        op = cache_op(self, cache, True, f"'{self.label}'.store()", evict)
        idx = self.index_expr(i)
        v = as_value(value, self.dtype)
        self.mark_written()
        current().emit(Store(self.expr, idx, _to(v, self.dtype), op))

    def vload(self, i: Any, n: int, *, cache: str | None = None, evict: str | None = None
              ) -> tuple[Value, ...]:
        """Load elements ``i .. i+n-1`` in one aligned access (``i`` a multiple of ``n``);
        ``cache`` and ``evict`` as :meth:`load`'s (see :mod:`thork._vector`)."""
        _vector_width(self, n, "load_vec")
        op = cache_op(self, cache, False, "tk.load_vec()", evict)
        idx = self.index_expr(i)
        if isinstance(idx, Const) and int(idx.value) % n:
            raise TraceError(f"tk.load_vec(): index {idx.value} is not a multiple of {n}")
        self.mark_read()
        trace = current()
        vec = trace.temp(VecLoad(VectorType(self.dtype, n), self.expr, idx, op), "vec")
        return tuple(Value(trace.temp(Field(self.dtype, vec, k))) for k in range(n))

    def vstore(self, i: Any, values: Any, *, cache: str | None = None,
               evict: str | None = None) -> None:
        """Store ``values`` to elements ``i ..`` in one aligned access; ``cache`` and
        ``evict`` as :meth:`store`'s (see :mod:`thork._vector`)."""
        vals = tuple(values)
        _vector_width(self, len(vals), "store_vec")
        op = cache_op(self, cache, True, "tk.store_vec()", evict)
        idx = self.index_expr(i)
        if isinstance(idx, Const) and int(idx.value) % len(vals):
            raise TraceError(
                f"tk.store_vec(): index {idx.value} is not a multiple of {len(vals)}")
        t = self.dtype
        exprs = tuple(_to(as_value(v, t), t) for v in vals)
        self.mark_written()
        current().emit(VecStore(self.expr, idx, exprs, op))

    def __add__(self, offset: Any) -> Memory:
        """A view ``offset`` elements further: ``(a + k)[i]`` is ``a[k + i]``."""
        return view(self, offset)

    __radd__ = __add__

    def __bool__(self) -> bool:
        raise TraceError(f"array '{self.label}' has no truth value in a kernel")

    def __iter__(self) -> Any:
        raise TraceError(f"array '{self.label}' cannot be iterated in Python; loop over "
                         "indices with range() (unrolled) or tk.range() (a device loop)")


class View(Memory):
    """A pointer computed from arrays: ``a + k`` or ``tk.where(c, a, b)``. Loads and stores
    through it count as loads and stores of every array it may point into."""

    __slots__ = ("expr", "bases", "_label")

    def __init__(self, expr: Expr, bases: tuple[Memory, ...], label: str) -> None:
        self.expr = expr
        self.bases = bases
        self._label = label

    @property
    def label(self) -> str:
        return self._label

    def mark_read(self) -> None:
        for b in self.bases:
            b.mark_read()

    def mark_written(self) -> None:
        for b in self.bases:
            b.mark_written()

    def __repr__(self) -> str:
        return f"<view {self.dtype.name}* {self._label}>"


def view(base: Memory, offset: Any) -> View:
    """``base + offset`` as a flat view (an n-d array's view indexes flat)."""
    if isinstance(offset, Memory):
        raise TraceError(f"cannot add arrays '{base.label}' and '{offset.label}'")
    v = _index_value(offset, base.label)
    if isinstance(v.expr, Const) and int(v.expr.value) < 0:
        raise TraceError(f"'{base.label} + {v.expr.value}': a view must not start before "
                         "the array")
    return View(Offset(base.expr.type, base.expr, v.expr), (base,), f"{base.label} + k")


def _choose_array(cond: Any, a: Any, b: Any) -> Memory:
    if not (isinstance(a, Memory) and isinstance(b, Memory)):
        raise TraceError("tk.where()/tk.cond() between an array and a value: both sides "
                         "must be arrays (a choice of pointer) or both values")
    if a.dtype != b.dtype or a.space != b.space:
        raise TraceError(f"tk.where() between arrays '{a.label}' ({a.space} {a.dtype.name}) "
                         f"and '{b.label}' ({b.space} {b.dtype.name}): they must have one "
                         "element type and memory space")
    c = as_value(cond)
    if isinstance(c.expr, Const):
        return a if c.expr.value else b
    expr = Select(PointerType(a.dtype, a.space), _to(c, dt.bool), a.expr, b.expr)
    return View(expr, (a, b), f"({a.label} or {b.label})")


def _index_value(i: Any, label: str) -> Value:
    v = as_value(i)
    if not (v.dtype.is_int or v.dtype == dt.bool):
        raise TraceError(f"index into '{label}' must be an integer, got {v.dtype.name}")
    return v


class Pointer(Memory):
    """A traced array parameter (of the kernel or of a device function)."""

    __slots__ = ("param", "expr")

    def __init__(self, param: Param) -> None:
        self.param = param
        self.expr = Var(param.type, param.name)

    @property
    def label(self) -> str:
        return self.param.name

    def mark_read(self) -> None:
        self.param.reads = True

    def mark_written(self) -> None:
        self.param.writes = True

    def __repr__(self) -> str:
        return f"<traced {self.dtype.name}* {self.param.name}>"


class Dim3:
    """A built-in 3-vector (``tk.Uint3[...]``, or int32 ``tk.Int3[...]``) with ``.x``,
    ``.y``, ``.z``."""

    __slots__ = ("x", "y", "z")
    x: Value
    y: Value
    z: Value

    def __init__(self, cuda_name: str, signed: bool = False) -> None:
        for axis in "xyz":
            reg: Expr = Special(dt.uint32, f"{cuda_name}.{axis}")
            object.__setattr__(self, axis, Value(Cast(dt.int32, reg) if signed else reg))

    def __repr__(self) -> str:
        e = self.x.expr
        reg = e.operand if isinstance(e, Cast) else e
        name = reg.name.split(".")[0] if isinstance(reg, Special) else "?"
        return f"<traced {'int3' if isinstance(e, Cast) else 'uint3'} {name}>"
