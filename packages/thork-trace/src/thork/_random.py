"""Counter-based random numbers on the device: Philox4x32-10 and Philox4x64-10.

A counter-based generator is a pure function of a 4-word *counter* and a 2-word *key*:
every thread computes its own numbers from (say) its global index as counter, with no
state to store or share. Philox (Salmon, Moraes, Dror, Shaw, "Parallel random numbers:
as easy as 1, 2, 3", SC11) is the family cuRAND's default generator and NumPy's
``numpy.random.Philox`` belong to:

* :func:`philox4x32` — Philox4x32-10 (cuRAND's ``curand_Philox4x32_10``), checked against
  the Random123 known-answer vectors;
* :func:`philox4x64` — Philox4x64-10, bit-identical to NumPy: the raw 64-bit stream of
  ``numpy.random.Philox(key=k, counter=c)`` is block ``j`` = ``philox4x64(c + j + 1, k)``
  (NumPy increments the 256-bit counter before each block), lanes in order; use
  :func:`counter_add` for the carry.

Conversions to floats (documented formulas, the same in NumPy):

* :func:`uniform_float`: ``(u32 >> 8) * 2**-24``, in [0, 1), exact in float32;
* :func:`uniform_double`: ``(u64 >> 11) * 2**-53``, in [0, 1), exact in float64;
* :func:`box_muller`: two standard normals from two uniforms by Box–Muller,
  ``r = sqrt(-2 log(1 - u1))``, ``(r cos(2 pi u2), r sin(2 pi u2))``, in the uniforms' type
  (``1 - u1`` is in (0, 1], so the log is finite).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from thork_core import TraceError, dt
from thork_core.ir import Call, Const

from ._math import cos, log, sin, sqrt
from ._trace import Value, as_value, cast, current, where

__all__ = ["philox4x32", "philox4x64", "mulhi", "counter_add", "uniform_float",
           "uniform_double", "box_muller"]

_M32 = (0xD2511F53, 0xCD9E8D57)
_W32 = (0x9E3779B9, 0xBB67AE85)
_M64 = (0xD2E7470EE14C6C93, 0xCA5A826395121157)
_W64 = (0x9E3779B97F4A7C15, 0xBB67AE8584CAA73B)


def mulhi(a: Any, b: Any) -> Value:
    """The high 32 (64) bits of the full product of two uint32 (uint64) values: CUDA's
    ``__umulhi``/``__umul64hi``. Both operands take the wider of their unsigned types."""
    va, vb = as_value(a), as_value(b)
    t = dt.uint64 if 64 in (va.dtype.bits, vb.dtype.bits) else dt.uint32
    return Value(current().temp(Call(t, "mulhi", (cast(va, t).expr, cast(vb, t).expr))))


def _words(values: Any, n: int, t: Any, what: str) -> list[Value]:
    vals = list(values) if isinstance(values, (tuple, list)) or hasattr(values, "lanes") \
        else None
    if vals is None or len(vals) != n:
        raise TraceError(f"{what}: {n} words expected (a tuple), got {values!r}")
    return [cast(as_value(v), t) for v in vals]


def _philox(counter: Any, key: Any, t: Any, m: tuple[int, int], w: tuple[int, int],
            what: str, rounds: int) -> tuple[Value, ...]:
    c = _words(counter, 4, t, f"{what}() counter")
    k = _words(key, 2, t, f"{what}() key")
    m0, m1, w0, w1 = (Value(Const(t, x)) for x in (*m, *w))
    for r in range(rounds):
        if r:
            k = [k[0] + w0, k[1] + w1]  # the Weyl key schedule (wraps in t)
        hi0, lo0 = mulhi(c[0], m0), c[0] * m0
        hi1, lo1 = mulhi(c[2], m1), c[2] * m1
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0]
    return tuple(c)


def philox4x32(counter: Sequence[Any], key: Sequence[Any], rounds: int = 10
               ) -> tuple[Value, ...]:
    """Philox4x32-``rounds`` of a 4-word counter and a 2-word key (uint32 each): four
    uint32 random words."""
    return _philox(counter, key, dt.uint32, _M32, _W32, "tk.philox4x32", rounds)


def philox4x64(counter: Sequence[Any], key: Sequence[Any], rounds: int = 10
               ) -> tuple[Value, ...]:
    """Philox4x64-``rounds`` of a 4-word counter and a 2-word key (uint64 each): four
    uint64 random words (NumPy's ``Philox`` block function)."""
    return _philox(counter, key, dt.uint64, _M64, _W64, "tk.philox4x64", rounds)


def counter_add(counter: Sequence[Any], n: Any) -> tuple[Value, ...]:
    """``counter + n`` with carries across the four words (each of the counter's type;
    uint64 unless the words are uint32)."""
    words = [as_value(v) for v in counter]
    if len(words) != 4:
        raise TraceError(f"tk.counter_add(): a 4-word counter expected, got {len(words)}")
    t = dt.uint32 if all(v.dtype == dt.uint32 for v in words) else dt.uint64
    words = [cast(v, t) for v in words]
    out = []
    carry = cast(as_value(n), t)
    for v in words:
        s = v + carry
        out.append(s)
        carry = cast(where(s < v, 1, 0), t)  # wrapped around: carry one
    return tuple(out)


def uniform_float(u: Any) -> Value:
    """A float32 in [0, 1) from a uint32: ``(u >> 8) * 2**-24`` (every value exact)."""
    return cast(cast(as_value(u), dt.uint32) >> 8, dt.float32) * math.ldexp(1.0, -24)


def uniform_double(u: Any) -> Value:
    """A float64 in [0, 1) from a uint64: ``(u >> 11) * 2**-53`` (every value exact)."""
    v = cast(cast(as_value(u), dt.uint64) >> 11, dt.float64)
    return v * as_value(math.ldexp(1.0, -53), dt.float64)


def box_muller(u1: Any, u2: Any) -> tuple[Value, Value]:
    """Two independent standard normals from two uniforms in [0, 1) (float32 or float64):
    ``r = sqrt(-2 log(1 - u1))``, ``(r cos(2 pi u2), r sin(2 pi u2))``."""
    a, b = as_value(u1), as_value(u2)
    if not (a.dtype.is_float and b.dtype.is_float):
        raise TraceError("tk.box_muller() takes two uniform floats (tk.uniform_float / "
                         "tk.uniform_double of random words)")
    r = sqrt(-2.0 * log(1.0 - a))
    theta = (2.0 * math.pi) * b
    return r * cos(theta), r * sin(theta)
