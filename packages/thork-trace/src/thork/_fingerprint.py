"""A kernel's fingerprint: a digest of everything its trace can depend on, so that a fresh
process's first launch can take the kernel's IR and artifact from the cache without
tracing or rendering (``thork_core._build.traced_build``; docs/cache.md "The traced
record").

What goes in: the kernel's name, debug flag, target, compiler and compile-time constant
values; its signature (the evaluated parameter annotations, defaults); its function's
code (bytecode, constants, names, line table, file and first line), defaults, closure
cells and every global the code names (values, found through ``__globals__`` or the
builtins, or their absence); and, recursively, the same for every Python function and
``@tk.func`` those reach, and the attributes of user modules that the code names. Values
are taken as they are now: ``None``, numbers, strings, bytes, tuples, lists, dicts and
sets of them, dtypes, NumPy scalars and arrays, modules, functions. Anything else (an
instance of a user class, a class, a struct...) makes the kernel *unfingerprintable*:
:func:`fingerprint` returns None and every launch takes the full path (trace, render,
key), as do kernels whose fingerprint is not in the cache. Library objects (of Thork,
NumPy, the standard library) are named by module and qualified name: their code is
covered by the installed files' stamps that the cached record is checked against.
"""

from __future__ import annotations

import builtins
import hashlib
import os
import sys
import types
from typing import Any

from ._types import _EMPTY, BuiltinSpec, ConstexprSpec, PointerSpec, ScalarSpec

__all__ = ["fingerprint"]

#: Specs whose repr names every field (dtypes, ints, bools, an accepted type).
_SPECS = frozenset({BuiltinSpec, ConstexprSpec, PointerSpec, ScalarSpec})

#: Top-level packages whose objects are named, not read: their code is the installed
#: files' (checked by stamps where the record is used).
_LIBRARY = frozenset({
    "thork", "thork_core", "fkl", "numpy", "math", "cmath", "builtins", "operator",
    "functools", "itertools", "typing", "enum", "dataclasses", "collections", "abc",
    "_operator", "_functools", "numbers", "decimal", "fractions", "struct", "types"})
#: Builtins of library modules whose result or effect is not a function of their arguments.
_IMPURE = frozenset({"id", "hash", "print", "input", "open", "exec", "eval", "compile",
                     "globals", "locals", "vars", "dir", "__import__", "breakpoint",
                     "getattr", "setattr", "delattr", "hasattr"})
#: Values whose repr is exact and names their type.
_PLAIN = frozenset({bool, int, float, complex, str, bytes})
#: Bumped when what goes into a fingerprint changes.
_FORMAT = b"thork-fingerprint-1"


class _Unfit(Exception):
    """A value the fingerprint cannot stand for: the kernel takes the full path."""


def _library(module: Any) -> bool:
    return isinstance(module, str) and module.partition(".")[0] in _LIBRARY


class _Hasher:
    """Collects tagged values; their ``repr`` (one C call at the end: type-distinguishing,
    so ``1``, ``1.0``, ``True`` and ``"1"`` differ) is hashed."""

    def __init__(self) -> None:
        self.parts: list[Any] = [_FORMAT]
        self.seen: dict[int, int] = {}  # id -> order of functions already fed
        self.keep: list[Any] = []  # keeps the seen objects alive (ids stay unique)
        self.open: set[int] = set()  # user modules being fed (a module reaching itself)

    def put(self, *parts: Any) -> None:
        self.parts.append(parts)

    def digest(self) -> bytes:
        return hashlib.sha256(repr(self.parts).encode()).digest()

    def back(self, obj: Any) -> bool:
        """Whether ``obj`` was fed already (a back reference goes in instead)."""
        n = self.seen.get(id(obj))
        if n is not None:
            self.put("back", n)
            return True
        self.seen[id(obj)] = len(self.seen)
        self.keep.append(obj)
        return False

    # -- values ------------------------------------------------------------------------
    def value(self, v: Any, names: frozenset[str]) -> None:  # noqa: C901 - one dispatch
        t = type(v)
        if v is None or t in _PLAIN:
            self.put(v)  # (repr tells these types apart)
        elif t in (tuple, list):
            self.put(t.__name__, len(v))
            for x in v:
                self.value(x, names)
        elif t is dict:
            self.put("dict", len(v))
            for k, x in v.items():
                self.value(k, names)
                self.value(x, names)
        elif t in (set, frozenset):
            parts = []
            for x in v:
                sub = _Hasher()
                sub.value(x, names)
                parts.append(sub.digest())
            self.put(t.__name__, *sorted(parts))
        elif t is types.FunctionType:
            self.function(v)
        elif t is types.ModuleType:
            self.module(v, names)
        elif t is types.BuiltinFunctionType:
            owner = getattr(v, "__self__", None)
            module = getattr(v, "__module__", None)
            if owner is not None and type(owner) is not types.ModuleType:
                raise _Unfit(f"bound method {v!r}")
            if not _library(module) or v.__qualname__ in _IMPURE:
                # (time.time, os.urandom, id, hash, print...: a trace calling them may
                # differ from process to process, or does something: it runs every time)
                raise _Unfit(f"builtin {module}.{v.__qualname__}")
            self.put("builtin", module, v.__qualname__)
        elif t is types.MethodType:
            raise _Unfit(f"bound method {v!r}")
        elif isinstance(v, type):
            if not _library(v.__module__):
                raise _Unfit(f"class {v.__qualname__}")
            self.put("class", v.__module__, v.__qualname__)
        else:
            self.other(v, t, names)

    def other(self, v: Any, t: type, names: frozenset[str]) -> None:
        mod = t.__module__
        if mod.startswith("thork_core") and t.__name__ == "DType":
            self.put("dtype", v.name)
        elif mod == "thork._func" and t.__name__ == "DeviceFunction":
            if self.back(v):
                return
            self.put("tk.func", v.inline, v.__name__)
            self.value(v.fn, names)
        elif mod == "thork._types" and t.__name__ != "StructSpec":
            # specs and builtins: frozen records whose repr lists their fields (dtypes,
            # ints, bools, a Constexpr's accepted type); a struct's class is a user class
            self.put(repr(v))
        elif mod == "numpy" and hasattr(v, "dtype") and hasattr(v, "tobytes"):
            self.put("numpy", t.__name__, str(v.dtype), getattr(v, "shape", ()), v.tobytes())
        elif mod == "numpy" and t.__name__.endswith("DType"):
            self.put("numpy dtype", str(v))
        else:
            raise _Unfit(f"a {t.__module__}.{t.__qualname__} value")

    def module(self, m: types.ModuleType, names: frozenset[str]) -> None:
        name = m.__name__
        if _library(name):
            self.put("module", name)
            return
        # A user module: the attributes the code at hand may read (any name it uses; so
        # fed again for each function reaching it, with that function's names).
        if id(m) in self.open:
            self.put("module cycle", name)
            return
        self.open.add(id(m))
        self.put("user module", name)
        d = vars(m)
        for n in sorted(names):
            if n in d:
                self.put(n)
                self.value(d[n], names)
        self.open.discard(id(m))

    # -- functions ---------------------------------------------------------------------
    def function(self, fn: types.FunctionType, annotations: bool = True) -> None:
        if _library(getattr(fn, "__module__", None)):
            self.put("library function", fn.__module__, fn.__qualname__)
            return
        if self.back(fn):
            return
        code = fn.__code__
        names: set[str] = set()
        self.code(code, names)
        frozen = frozenset(names)
        self.put("defaults")
        self.value(fn.__defaults__, frozen)
        self.value(fn.__kwdefaults__, frozen)
        ann = getattr(fn, "__annotations__", None) if annotations else None
        if ann:  # (evaluated ones: their values; PEP 563 strings: the text)
            self.put("annotations")
            for k in ann:
                self.put(k)
                self.value(ann[k], frozen)
        self.put("closure")
        for cell in fn.__closure__ or ():
            try:
                contents = cell.cell_contents
            except ValueError:
                self.put("empty cell")
                continue
            self.value(contents, frozen)
        self.put("globals")
        g = fn.__globals__
        b = vars(builtins)
        for n in sorted(names):
            if n in g:
                self.put("g", n)
                self.value(g[n], frozen)
            elif n in b:
                self.put("b", n)
                self.value(b[n], frozen)
            else:
                self.put("absent", n)

    def code(self, code: types.CodeType, names: set[str]) -> None:
        names.update(code.co_names)
        if not code.co_filename.startswith("/"):  # the trace makes it absolute
            self.put("cwd", os.getcwd())
        self.put("code", code.co_name, getattr(code, "co_qualname", ""), code.co_filename,
                 code.co_firstlineno, code.co_argcount, code.co_posonlyargcount,
                 code.co_kwonlyargcount, code.co_flags, code.co_names, code.co_varnames,
                 code.co_freevars, code.co_cellvars, code.co_code,
                 getattr(code, "co_linetable", b""), getattr(code, "co_exceptiontable", b""))
        for c in code.co_consts:
            if type(c) is types.CodeType:
                self.code(c, names)
            else:
                self.value(c, frozenset())


def fingerprint(kernel: Any) -> bytes | None:
    """The digest of what ``kernel``'s trace depends on (see the module docstring), or
    None where something it reaches cannot be fingerprinted. ``kernel`` is the resolved
    kernel a launch builds (its compile-time constants bound)."""
    h = _Hasher()
    try:
        mods = sys.modules
        h.put("thork", mods["thork"].__version__, mods["thork_core"].__version__,
              sys.version, kernel.name, kernel.debug, kernel.target, kernel.compiler)
        bound = kernel._bound
        h.put("bound")
        if bound:
            for k, v in bound.items():
                h.put(k)
                h.value(v, frozenset())
        nones = kernel._nones
        h.put("nones", sorted(nones) if nones is not None else None)
        h.put("signature")  # the kernel's annotations, evaluated (PEP 563 strings too)
        for pname, spec, default in kernel._analyze():
            h.put(pname, repr(spec) if type(spec) in _SPECS else None)
            if type(spec) not in _SPECS:
                h.value(spec, frozenset())
            h.put(default is _EMPTY)
            if default is not _EMPTY:
                h.value(default, frozenset())
        fn = kernel.fn
        if type(fn) is not types.FunctionType:
            raise _Unfit(f"a kernel of a {type(fn).__qualname__}")
        h.function(fn, annotations=False)
    except Exception:  # noqa: BLE001 - unfit, or an error the full path will report
        return None
    return h.digest()
