"""Device functions: ``@tk.func`` helpers emitted once as ``__device__`` functions.

Calling a ``tk.func`` while a kernel is traced records a call. The helper is traced once
per *signature*: the dtypes of its traced arguments, the element types of its array
arguments and the values of its Python arguments (which are compile-time constants
inside it — two calls with different constants give two specializations). Called
outside a trace, it is an ordinary Python function.
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Callable
from typing import Any

from thork_core import DType, Loc, PointerType, TraceError
from thork_core.ir import (
    CallFunc,
    Eval,
    Expr,
    Field,
    Function,
    Pack,
    Param,
    Return,
    StructType,
    Var,
)

from ._aggregate import flatten
from ._shaped import ShapedPointer
from ._shared import SharedArray
from ._trace import Memory, Pointer, Trace, Value, _to, as_value, current_or_none, set_current

__all__ = ["DeviceFunction", "func"]


class DeviceFunction:
    """A traced helper; see the module docstring."""

    def __init__(self, fn: Callable[..., Any], inline: bool = False) -> None:
        self.fn = fn
        self.inline = inline
        self.__name__ = getattr(fn, "__name__", "func")
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        self._sig = inspect.signature(fn)

    def __repr__(self) -> str:
        return f"<tk.func {self.__name__}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        trace = current_or_none()
        if trace is None or self.inline:
            return self.fn(*args, **kwargs)
        try:
            bound = self._sig.bind(*args, **kwargs)
        except TypeError as exc:
            raise TraceError(f"{self.__name__}(): {exc}") from None
        bound.apply_defaults()
        items = list(bound.arguments.items())
        key = (self, tuple(_signature(name, a, self.__name__) for name, a in items))
        root = trace.root
        spec = root.function_cache.get(key)
        if spec is None:
            if key in root.functions_open:
                chain = " -> ".join(k[0].__name__ for k in root.functions_open[
                    root.functions_open.index(key):]) + f" -> {self.__name__}"
                raise TraceError(
                    f"{self.__name__}(): tk.func recursion ({chain}) with the same argument "
                    "types is not supported: device code cannot recurse. Write it as a "
                    "loop (tk.while_ or tk.range with tk.var state), or recurse on a Python "
                    "value (a compile-time constant) so that tracing unrolls it")
            root.functions_open.append(key)
            try:
                spec = self._specialize(trace, items)
            finally:
                root.functions_open.pop()
            root.function_cache[key] = spec
        function, kinds, rebuild = spec
        call_args = []
        for (_, a), kind, params in zip(items, kinds, _traced_params(function, kinds)):
            if kind == "value":
                call_args.append(_to(a, _scalar_type(params[0])))
            elif kind.startswith("aggregate"):
                lanes, _ = flatten(a)
                call_args += [_to(v, _scalar_type(p)) for v, p in zip(lanes, params)]
            elif kind == "memory":
                param = params[0]
                declare = getattr(a, "_declare", None)
                if declare is not None:
                    declare()  # a module-level array: the kernel's module defines it
                if param.reads:
                    a.mark_read()
                if param.writes:
                    a.mark_written()
                call_args.append(a.expr)
        # Hidden extents/strides of shaped-array parameters: the caller's own values.
        by_param = {f"p_{name}": a for name, a in items}
        for param in function.params:
            if param.derived is not None:
                src, kind, axis = param.derived
                call_args.append(by_param[src].derived(kind, axis).expr)
        call = CallFunc(function.result, function.name, tuple(call_args))
        if function.result is None:
            trace.emit(Eval(call))
            return None
        if isinstance(function.result, StructType):  # several results: one struct
            packed = trace.temp(call, "r")
            return rebuild([Value(trace.temp(Field(t, packed, k)))
                            for k, t in enumerate(function.result.fields)])
        return Value(trace.temp(call))

    def _specialize(self, caller: Trace, items: list[tuple[str, Any]]
                    ) -> tuple[Function, list[Any], Any]:
        root = caller.root
        cname = re.sub(r"\W", "_", self.__name__)
        # Specializations started so far (finished + open): unique even when nested.
        name = f"thork_f{len(root.functions) + len(root.functions_open) - 1}_{cname}"
        child = Trace(name, [], parent=caller)
        params: list[Param] = []
        kinds: list[str] = []
        inner: list[Any] = []
        for pname, a in items:
            pn = f"p_{pname}"
            if isinstance(a, Value):
                param = Param(pn, a.dtype)
                params.append(param)
                kinds.append("value")
                inner.append(Value(Var(a.dtype, pn)))
            elif isinstance(a, Memory):
                param = Param(pn, PointerType(a.dtype, a.space))
                params.append(param)
                kinds.append("memory")
                if isinstance(a, SharedArray):
                    # Keep the shape (and its bounds checks) inside the helper.
                    view = SharedArray(Var(param.type, pn), a.shape, pname)
                    view_param = param

                    def _r(p: Param = view_param) -> None:
                        p.reads = True

                    def _w(p: Param = view_param) -> None:
                        p.writes = True

                    inner.append(_Tracked(view, _r, _w))
                elif isinstance(a, ShapedPointer):
                    param.ndim = a.ndim
                    inner.append(ShapedPointer(param, a.ndim, params))
                else:
                    inner.append(Pointer(param))
            elif _is_aggregate(a):
                lanes, rebuild_arg = flatten(a)
                lane_vars = [Var(v.dtype, f"{pn}_{k}") for k, v in enumerate(lanes)]
                params += [Param(v.name, v.type) for v in lane_vars]
                kinds.append(f"aggregate:{len(lanes)}")
                inner.append(rebuild_arg([Value(v) for v in lane_vars]))
            else:
                kinds.append("const")
                inner.append(a)
        child.params = params
        src = inspect.getsourcefile(self.fn) or "<unknown>"
        loc = Loc(os.path.abspath(src), self.fn.__code__.co_firstlineno)
        prev = set_current(child)
        try:
            result = self.fn(*inner)
            if child.deferred:
                raise TraceError(child.deferred[0])
            rexpr: Expr | None = None
            rtype: Any = None
            rebuild = None
            if isinstance(result, (tuple, list)) or _is_aggregate(result):
                # Several values (a tuple, a vector, a struct): returned as one C++ struct.
                lanes, rebuild = flatten(result)
                rtype = StructType(f"{name}_ret", tuple(v.dtype for v in lanes))
                rexpr = Pack(rtype, tuple(v.expr for v in lanes))
                child.emit(Return(rexpr))
            elif result is not None:
                rv = as_value(result)
                rexpr = rv.expr
                rtype = rv.dtype
                child.emit(Return(rexpr))
        finally:
            set_current(prev)
        function = Function(name, params, rtype if rexpr is not None else None, child.body,
                            loc, child.mutable)
        root.functions.append(function)
        return function, kinds, rebuild


class _Tracked(SharedArray):
    """A shared array parameter view that records reads/writes on the helper's Param."""

    __slots__ = ("_r", "_w")

    def __init__(self, view: SharedArray, r: Callable[[], None], w: Callable[[], None]) -> None:
        super().__init__(view.expr, view.shape, view.name)
        self._r, self._w = r, w

    def mark_read(self) -> None:
        self._r()

    def mark_written(self) -> None:
        self._w()


def _traced_params(function: Function, kinds: list[str]) -> list[list[Param]]:
    """The helper's parameters of each argument: none for a constant, one per lane of an
    aggregate (``"aggregate:n"``), else one."""
    it = iter(function.params)
    out = []
    for k in kinds:
        n = 0 if k == "const" else int(k.split(":")[1]) if k.startswith("aggregate") else 1
        out.append([next(it) for _ in range(n)])
    return out


def _scalar_type(param: Param) -> DType:
    """The type of a helper's value (or aggregate lane) parameter: the scalar dtype
    :meth:`DeviceFunction._specialize` gave it."""
    t = param.type
    if not isinstance(t, DType):
        raise TypeError(f"helper parameter {param.name} is not a scalar: {t}")
    return t


def _is_aggregate(a: Any) -> bool:
    return hasattr(a, "_thork_flatten") and not isinstance(a, type)


def _signature(name: str, a: Any, fname: str) -> Any:
    if isinstance(a, Value):
        return ("v", a.dtype)
    if _is_aggregate(a):
        lanes, _ = flatten(a)
        return ("a", type(a), tuple(v.dtype for v in lanes))
    if isinstance(a, Memory):
        shape = a.shape if isinstance(a, SharedArray) else \
            ("ndim", a.ndim) if isinstance(a, ShapedPointer) else None
        return ("m", a.dtype, a.space, shape)
    try:
        hash(a)
    except TypeError:
        raise TraceError(
            f"{fname}(): argument '{name}' is a {type(a).__name__}; tk.func arguments are "
            "traced values, arrays, or hashable Python values (compile-time constants)"
        ) from None
    return ("c", type(a), a)


def func(fn: Callable[..., Any] | None = None, *, inline: bool = False) -> Any:
    """Decorate a helper as a device function (``@tk.func`` or ``@tk.func(inline=True)``).

    ``inline=True`` pastes the helper's body into each caller instead (plain tracing).
    """
    if fn is None:
        return lambda f: DeviceFunction(f, inline)
    return DeviceFunction(fn, inline)


