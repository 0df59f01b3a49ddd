"""Small kernels more than one test file launches (or re-targets through ``.fn``)."""

from __future__ import annotations

import thork as tk

__all__ = ["scale_add"]


@tk.jit(target="gpu")
def scale_add(
    out: tk.DevicePointer[tk.dt.float32],
    x: tk.DevicePointer[tk.dt.float32],
    s: tk.dt.float32,
    n: tk.dt.int32,
    bid: tk.Uint[tk.BlockIdx],
    tid: tk.Uint[tk.ThreadIdx],
    bdm: tk.Uint[tk.BlockDim],
) -> None:
    """``out[i] = x[i] * s + 1`` for ``i < n``, one thread per element."""
    i = bid * bdm + tid
    with tk.if_(i < n):
        out[i] = x[i] * s + 1.0
