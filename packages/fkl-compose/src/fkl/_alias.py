"""Outputs that share memory with inputs (docs/fkl.md, "out= and aliasing").

A pipe's kernel reads its inputs while it writes its outputs, thread by thread. Writing
over the memory being read is correct only where each thread reads exactly the pixel it
writes: a plain read, per-pixel ops and a plain write, with ``out`` being exactly an input
(same first byte and size): that is allowed and computes in place. Any other overlap
(Crop, Resize, Warping, layout changes, or a partial overlap) is rejected with an
:class:`~thork_core.ArgumentError` before the launch, from the arrays' address ranges.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from thork_core import ArgumentError
from thork_core.launch import DLPACK, byte_range, kind_of, memory_range

__all__ = ["Range", "check_out_aliasing", "in_place_safe", "known_ranges", "overlaps",
           "relative_spans", "view_range"]


def in_place_safe(chain: Any) -> bool:
    """Whether ``chain`` (a :class:`fkl._lowering.Chain`) reads, at each output pixel,
    only the same pixel of its inputs: then ``out`` may be exactly an input."""
    from ._tensor import DualRead, TensorRead, TensorWrite, TupleRead

    return (type(chain.read) in (TensorRead, DualRead, TupleRead)
            and all(op.elementwise for op in chain.middle)
            and isinstance(chain.write, TensorWrite))


_ND: list[Any] = []


def _ndarray() -> type:
    if not _ND:
        import numpy as np

        _ND.extend((np.ndarray, np.may_share_memory))
    return _ND[0]  # type: ignore[no-any-return]


def _may_share(a: Any, b: Any) -> bool:
    return bool(_ND[1](a, b))


Range = tuple[str, int, int]


def view_range(v: Any) -> Range:
    """``(device, first byte, one past the last)`` of an :class:`~thork_core.ArrayView`
    (its strides included): the range of an array that exposes no interface dict."""
    return (v.device, *byte_range(v.ptr, v.shape, v.strides, v.dtype.itemsize))


def _range(a: Any, known: dict[int, Range] | None) -> Range | None:
    """``a``'s bytes: its interface dict's, else ``known`` (what the caller read from it
    this call), else, for a DLPack-only producer, one more read of it (the general path:
    such an array exposes no range without one)."""
    r = memory_range(a)
    if r is None:
        if known is not None:
            r = known.get(id(a))
        if r is None and kind_of(type(a)) is DLPACK:
            from ._arrays import view

            r = view_range(view(a, "array", None, True))
    return r


def check_out_aliasing(inputs: Sequence[Any], outs: Sequence[Any], in_place: bool,
                       known: dict[int, Range] | None = None) -> None:
    """Raise unless every output is separate from every input, or (``in_place``) exactly
    one of them. ``known``: ranges by ``id()`` of arrays the caller has read this call
    (DLPack-only producers, whose range needs a read)."""
    nd = _ndarray()
    for j, o in enumerate(outs):
        ro = None
        for i, x in enumerate(inputs):
            if type(x) is nd and type(o) is nd and not _may_share(x, o):
                continue  # NumPy's bounds test in C: the common case costs ~0.3 us
            ro = _range(o, known) if ro is None else ro
            rx = _range(x, known)
            if ro is None:
                break
            if rx is None or rx[0] != ro[0] or not (rx[1] < ro[2] and ro[1] < rx[2]):
                continue
            if in_place and rx == ro:
                continue
            what = f"out[{j}]" if len(outs) > 1 else "out"
            why = ("the chain reads pixels other than the one each thread writes (a "
                   "geometric read, a layout change or a non-pixel op)" if rx == ro else
                   f"they overlap partially ({what} bytes [{ro[1]:#x}, {ro[2]:#x}), input "
                   f"bytes [{rx[1]:#x}, {rx[2]:#x}))")
            raise ArgumentError(
                f"fkl pipe {what}: expected an array separate from input {i}, got one that "
                f"shares its memory; {why}, so results would be wrong. Pass a separate "
                "output array (or none, to allocate one).")


def relative_spans(arrays: Sequence[Any], ptrs: Sequence[int],
                   views: Sequence[Any] = ()) -> list[tuple[int, int]] | None:
    """The bytes each of ``arrays`` covers, as ``(first, one past the last)`` offsets from
    its address in ``ptrs``; None when one exposes no range (``views``: the adapters'
    views of the first arrays, for those without an interface dict). A hot entry keys its
    arrays' shapes and strides, so these hold for every call it serves (h-pitch7)."""
    spans = []
    for k, (a, p) in enumerate(zip(arrays, ptrs, strict=True)):
        r = memory_range(a)
        if r is None and k < len(views):
            r = view_range(views[k])
        if r is None:
            return None
        spans.append((r[1] - p, r[2] - p))
    return spans


def known_ranges(arrays: Sequence[Any], ptrs: Sequence[int],
                 spans: Sequence[tuple[int, int]], device: str) -> dict[int, Range]:
    """The ranges of ``arrays`` at this call's addresses ``ptrs`` from a hot entry's
    :func:`relative_spans`, by ``id()``, for :func:`check_out_aliasing`."""
    return {id(a): (device, p + lo, p + hi)
            for a, p, (lo, hi) in zip(arrays, ptrs, spans, strict=False)}


def overlaps(ptrs: Sequence[int], spans: Sequence[tuple[int, int]], n: int) -> bool:
    """Whether the last array of ``ptrs`` (the output) may share bytes with one of the
    first ``n`` (the inputs), from their addresses and :func:`relative_spans`: the cheap
    test a hot call makes before :func:`check_out_aliasing` (which decides and reports)."""
    o = ptrs[-1]
    lo, hi = o + spans[-1][0], o + spans[-1][1]
    for i in range(n):
        p = ptrs[i]
        a, b = spans[i]
        if p + a < hi and lo < p + b:
            return True
    return False
