"""The floating-point mode of the thread that loads a host library, kept as it was.

A shared library linked with ``-ffast-math`` (GCC links ``crtfastmath.o`` into it) sets
flush-to-zero and denormals-are-zero in the loading thread's control register when it is
loaded: from then on every subnormal result in that thread, NumPy's included, becomes 0,
and threads it starts later inherit the mode. A CPU-target kernel built by a compiler the
user configured that way (a ``CXX`` wrapper adding ``-ffast-math``) would change the whole
process's arithmetic by being loaded. :func:`loading` notes the mode before a load and,
where the load changed it, restores the saved environment (C's ``fegetenv``/``fesetenv``)
and warns once per library. The kernel itself does not need the mode: ``-ffast-math``
code is correct without it.
"""

from __future__ import annotations

import ctypes
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["FloatingPointModeWarning", "fp_mode", "loading"]

# Module globals, read at run time: constants in one expression would be folded by the
# compiler, and the probe must run on this thread's current mode.
_DBL_MIN = 2.2250738585072014e-308  # the smallest normal double
_DBL_SUB = 5e-324  # the smallest subnormal double
_HALF = 0.5
_ONE = 1.0

_lock = threading.Lock()
_libc: Any = None  # the C library with fegetenv/fesetenv (False: not available)


class FloatingPointModeWarning(RuntimeWarning):
    """Loading a host library changed the thread's floating-point mode; Thork restored it."""


def fp_mode() -> tuple[bool, bool, int]:
    """This thread's floating-point mode as (flush-to-zero: a subnormal result becomes 0,
    denormals-are-zero: a subnormal input counts as 0, the rounding mode from
    ``fegetround``, -1 where it cannot be read), probed with double arithmetic."""
    ftz = _DBL_MIN * _HALF == 0.0
    daz = _DBL_SUB * _ONE == 0.0
    libc = _c_library()
    return ftz, daz, int(libc.fegetround()) if libc else -1


@contextmanager
def loading(what: str) -> Iterator[None]:
    """Around a library load: where the load changed :func:`fp_mode`, the environment
    from before is restored and a :class:`FloatingPointModeWarning` names ``what``."""
    libc = _c_library()
    saved = ctypes.create_string_buffer(256)  # larger than any libc's fenv_t
    if libc and libc.fegetenv(saved) != 0:
        libc = None
    before = fp_mode()
    yield
    after = fp_mode()
    if after == before:
        return
    if libc and libc.fesetenv(saved) == 0 and fp_mode() == before:
        done = "Thork restored the previous mode"
    else:
        done = "Thork could not restore it"
    warnings.warn(
        f"loading {what} changed this thread's floating-point mode (flush-to-zero "
        f"{before[0]} -> {after[0]}, denormals-are-zero {before[1]} -> {after[1]}, rounding "
        f"{before[2]} -> {after[2]}), as a library linked with -ffast-math does; {done}. "
        "Build host libraries without -ffast-math (its code does not need the mode).",
        FloatingPointModeWarning, stacklevel=3)


def _c_library() -> Any:
    """The C library's ``fegetenv``/``fesetenv``/``fegetround`` (None where absent)."""
    global _libc
    if _libc is None:
        with _lock:
            if _libc is None:
                _libc = _find_fenv() or False
    return _libc or None


def _find_fenv() -> Any:
    for name in (None, "libm.so.6", "libSystem.dylib"):
        try:
            lib = ctypes.CDLL(name)
            for fn in ("fegetenv", "fesetenv", "fegetround"):
                getattr(lib, fn).restype = ctypes.c_int
        except (OSError, AttributeError):
            continue
        return lib
    return None
