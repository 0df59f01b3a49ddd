"""Batches: per-item runtime values and the traced plane index that selects them.

The one rule that tells per-item values from per-channel ones: a value wrapped in
:class:`PerItem` holds one entry per batch item (each a number or one number per channel);
anything else — a number, a sequence — applies to every item alike (a sequence being one
number per channel, as always). Per-item values are runtime kernel parameters: changing
them never recompiles, changing their count compiles one more kernel. They reach the kernel
as value tables (:meth:`fkl.Op.table_types`): a thread loads its plane's entries.
"""

from __future__ import annotations

from typing import Any

from thork.tracing import Value, cast
from thork_core import ArgumentError, dt

__all__ = ["PerItem", "check_items", "plane"]


class PerItem:
    """``PerItem([v0, v1, ...])``: value ``v_k`` for batch item (output plane) ``k``.

    Accepted by the value of the binary compute ops (``fkl.Mul(fkl.PerItem([0.5, 2.0]))``,
    each item a number or a per-channel sequence) and by ``fkl.Warping``'s matrix (one
    matrix per item). A list of rects given to ``fkl.Crop`` is per item by itself."""

    __slots__ = ("items",)

    def __init__(self, items: Any) -> None:
        try:
            self.items = list(items)
        except TypeError:
            raise ArgumentError(f"fkl.PerItem: expected a sequence with one value per batch "
                                f"item, got {items!r}") from None
        if not self.items:
            raise ArgumentError("fkl.PerItem: expected one value per batch item, got none")
        if len(self.items) > 65535:
            raise ArgumentError(f"fkl.PerItem: {len(self.items)} items exceed the CUDA grid "
                                "limit of 65535 planes")

    def __len__(self) -> int:
        return len(self.items)

    def __repr__(self) -> str:
        return f"fkl.PerItem({self.items!r})"


def plane() -> Value:
    """The thread's plane index in the 2-D kernel (``blockIdx.z``) as int32."""
    from thork_core.ir import Special

    return cast(Value(Special(dt.uint32, "blockIdx.z")), dt.int32)


def check_items(n: int, batch: int, what: str) -> None:
    """Per-item values must match the output's batch."""
    if n != batch:
        raise ArgumentError(f"{what}: {n} per-item values for a batch of {batch} item(s); "
                            "give one per item")
