"""Kernels whose NumPy arguments share memory (the same array twice, overlapping views of
one buffer), their NumPy models, and the cases the aliasing tests launch on every target
(``tests/core/test_aliasing.py``) and through the fake driver
(``tests/core/test_alias_trace.py``).

Each kernel reads and writes every element through one thread only (element ``i + dx``
of ``x`` is element ``i + dy`` of ``y`` in every aliasing case), so its result is defined
when arguments alias, on any target: a write through one parameter is seen by a later read
through the other (``seen``), and elements written through different parameters all
survive. The models do the same with NumPy on the same memory: applied to the host views
they give the reference (what the CPU target computes, in-place memory); the fake driver
applies them to the device buffers Thork made, so separate device copies of one host
buffer give a different answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import thork as tk

__all__ = ["CASES", "Case", "build", "pair", "pair_model", "shifted", "shifted_model"]


@tk.jit
def shifted(y: tk.DevicePointer[tk.dt.float32], x: tk.DevicePointer[tk.dt.float32],
            seen: tk.DevicePointer[tk.dt.float32], dy: tk.dt.uint32, dx: tk.dt.uint32,
            n: tk.dt.uint32, bid: tk.Uint[tk.BlockIdx], tid: tk.Uint[tk.ThreadIdx],
            bdm: tk.Uint[tk.BlockDim]) -> None:
    """``y[i + dy] = x[i + dx] + 1``, then ``seen[i] = x[i + dx]`` (read after the write),
    for ``i < n``."""
    i = bid * bdm + tid
    with tk.if_(i < n):
        y[i + dy] = x[i + dx] + 1.0
        seen[i] = x[i + dx]


@tk.jit
def pair(y: tk.DevicePointer[tk.dt.float32], x: tk.DevicePointer[tk.dt.float32],
         seen: tk.DevicePointer[tk.dt.float32], dy: tk.dt.uint32, dx: tk.dt.uint32,
         n: tk.dt.uint32, bid: tk.Uint[tk.BlockIdx], tid: tk.Uint[tk.ThreadIdx],
         bdm: tk.Uint[tk.BlockDim]) -> None:
    """Both arrays written: even ``i``: ``y[i + dy] = x[i + dx] + 1``; odd ``i``:
    ``x[i + dx] = y[i + dy] * 3``; then ``seen[i] = x[i + dx]``, for ``i < n``."""
    i = bid * bdm + tid
    with tk.if_(i < n):
        with tk.if_(i % 2 == 0):
            y[i + dy] = x[i + dx] + 1.0
        with tk.else_():
            x[i + dx] = y[i + dy] * 3.0
        seen[i] = x[i + dx]


def shifted_model(y: np.ndarray, x: np.ndarray, seen: np.ndarray, dy: int, dx: int,
                  n: int) -> None:
    """:func:`shifted` on NumPy arrays (in place, on whatever memory they view)."""
    yv, xv = y[dy:dy + n], x[dx:dx + n]
    np.add(xv, np.float32(1), out=yv)
    seen[:n] = xv


def pair_model(y: np.ndarray, x: np.ndarray, seen: np.ndarray, dy: int, dx: int,
               n: int) -> None:
    """:func:`pair` on NumPy arrays."""
    yv, xv = y[dy:dy + n], x[dx:dx + n]
    yv[0::2] = xv[0::2] + np.float32(1)
    xv[1::2] = yv[1::2] * np.float32(3)
    seen[:n] = xv


MODELS: dict[str, Callable[..., None]] = {"shifted": shifted_model, "pair": pair_model}
KERNELS: dict[str, Any] = {"shifted": shifted, "pair": pair}


@dataclass(frozen=True)
class Case:
    """One launch: ``kernel`` (a name in :data:`KERNELS`); ``views(buf, seen)`` gives the
    two array arguments (views of one buffer ``buf`` of ``length`` floats) and ``dy``,
    ``dx``, ``n``; ``seen`` may be replaced by a view of ``buf`` (``seen_is_buf``)."""

    name: str
    kernel: str
    views: Callable[[np.ndarray, int, int], tuple[np.ndarray, np.ndarray, int, int, int]]
    seen_is_buf: bool = False


#: The cases, with ``d`` the shift (elements). Comments: what the GPU target must do.
CASES = [
    # the same array twice: one device buffer
    Case("same", "shifted", lambda b, L, d: (b, b, 0, 0, L)),
    # y = buf[d:] written, x = buf read: one copy of buf; only buf[d:] comes back
    Case("partial", "shifted", lambda b, L, d: (b[d:], b, 0, d, L - d)),
    # y = buf written, x = buf[d:] inside it (a queued page-locked copy of y is reused)
    Case("covering", "shifted", lambda b, L, d: (b, b[d:], d, 0, L - d)),
    # both written, shifted views: every element written through one or the other survives
    Case("pair", "pair", lambda b, L, d: (b[d:], b[:-1], 0, d, L - d - 1)),
    # adjacent halves: no byte shared, no aliasing (three separate copies)
    Case("adjacent", "shifted",
         lambda b, L, d: (b[:L // 2], b[L // 2:], 0, 0, L // 2)),
    # all three arguments the same array (seen[i] = x[i] after y[i] = x[i] + 1)
    Case("three", "shifted", lambda b, L, d: (b, b, 0, 0, L), seen_is_buf=True),
]


def build(case: Case, length: int, d: int, rng: np.random.Generator,
          make: Callable[[int], np.ndarray] | None = None
          ) -> tuple[np.ndarray, tuple[Any, ...], np.ndarray, np.ndarray]:
    """The launch of ``case`` on a fresh random buffer of ``length`` floats (``make(n)``
    allocates an array, e.g. ``tk.pinned_empty``; NumPy's by default) and a NaN-poisoned
    ``seen``: ``(buf, args, want_buf, want_seen)``, the expected values computed by the
    model on host copies that alias as the arguments do."""
    make = make or (lambda k: np.empty(k, np.float32))
    buf = make(length)
    buf[...] = rng.standard_normal(length, dtype=np.float32)
    y, x, dy, dx, n = case.views(buf, length, d)
    if case.seen_is_buf:
        seen = buf
    else:
        seen = make(n)
        seen[...] = np.nan
    # the reference: the model on a copy of buf, through the same views of the copy
    ref = buf.copy()
    ry, rx, _, _, _ = case.views(ref, length, d)
    rseen = ref if case.seen_is_buf else np.full(n, np.nan, np.float32)
    MODELS[case.kernel](ry, rx, rseen, dy, dx, n)
    return buf, (y, x, seen, dy, dx, n), ref, rseen
