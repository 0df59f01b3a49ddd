"""Variant choice: which kernel form runs a chain for one input pixel type.

A chain has up to two kernel *variants* (part of the kernel identity): ``"flat"``, the
vectorized 1-D kernel of :mod:`fkl._flat` for chains without geometry ops, and ``"grid"``,
the general 2-D kernel. A flat kernel is *channel-folded* when the chain allows it (every
op channel-uniform, packed reads and writes): it then runs as a 1-channel chain over the
N * C elements — also part of the identity.

Which is faster was measured: on the CPU target the flat kernel, unfolded (1080p 6-op
chain: grid 8.2, flat 4.3, flat folded 5.3 ms on 2 cores), on the H200 the 2-D kernel for
the unfolded 3-channel layout (22.2 vs 28.9 us, bench/bench_fkl.py: three float4 per
thread at a 48-byte stride). A channel-folded or coalesced flat kernel has a copy's access
pattern, so the GPU uses it by default there (H200: 1080p 6-op chain 20.0 us, 94% of a
copy; uint8 HWC -> float CHW at 8K 91% of copy bandwidth, grid 72%); other chains keep the
2-D kernel there unless ``thread_fusion=True`` asks for the flat one, as in FKL.
docs/fkl-fusion.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from thork_core import ArgumentError

from ._flat import FlatSpec, flat_spec
from ._lowering import Chain, type_chain
from ._pixel import PixType

__all__ = ["Variants"]


class Variants:
    """The variant policy of one pipe's chain and the settings that steer it.

    ``target_name()`` gives the pipe's target name (resolving it); every method taking
    ``target`` (``"gpu"`` or ``"cpu"``) uses that instead, without looking for a target.
    """

    __slots__ = ("chain", "thread_fusion", "flat", "fold", "vectors", "columns", "rows",
                 "_target_name", "_specs")

    def __init__(self, chain: Chain, thread_fusion: bool,
                 target_name: Callable[[], str]) -> None:
        self.chain = chain
        self.thread_fusion = thread_fusion
        #: Force the flat (True) or the 2-D (False) kernel where the chain allows the
        #: flat one; None chooses by target (module docstring).
        self.flat: bool | None = None
        #: Channel-fold flat kernels whose chain allows it (True), never (False), or
        #: None: by target (the GPU folds, the CPU does not).
        self.fold: bool | None = None
        #: Pixel groups per thread of the flat kernel (1, 2, 4 or 8); None: the default.
        self.vectors: int | None = None
        #: Output pixels per thread of the 2-D kernel along x (1 to 8; each thread's
        #: pixels 32 columns apart: every warp store stays one coalesced row); None:
        #: :meth:`grid_columns` chooses per output size.
        self.columns: int | None = None
        #: Output rows per thread of the untiled 2-D kernel (1 to 8; each thread's
        #: pixels vertically adjacent); None: :meth:`grid_shape` chooses.
        self.rows: int | None = None
        self._target_name = target_name
        self._specs: dict[tuple[Any, ...], FlatSpec | None] = {}

    def name(self, target: str | None) -> str:
        return target if target is not None else self._target_name()

    def folds(self, target: str | None = None) -> bool:
        """Whether flat kernels are channel-folded where the chain allows it."""
        if self.fold is not None:
            return bool(self.fold)
        return self.name(target) != "cpu"

    def flat_spec(self, t: PixType, target: str | None = None) -> FlatSpec | None:
        """How the chain runs as the flat kernel for pixels ``t`` (None: it cannot)."""
        return self._spec(t, self.folds(target))

    def _spec(self, t: PixType, fold: bool) -> FlatSpec | None:
        key = (t, fold, self.vectors)
        if key not in self._specs:
            type_chain(self.chain, t)
            self._specs[key] = flat_spec(self.chain, t, fold=fold, vectors=self.vectors)
        return self._specs[key]

    def has_flat(self, t: PixType) -> bool:
        """Whether the chain has a flat kernel for ``t`` (folded or not: a chain that
        folds has one either way), without looking for a target."""
        return self._spec(t, False) is not None

    def choose(self, t: PixType, target: str | None = None) -> str:
        """The preferred variant for ``t``: ``flat`` forces either; else the flat kernel
        where the chain has one on the CPU and with ``thread_fusion``, and on the GPU
        where it is channel-folded or its accesses are coalesced."""
        flat = self.flat
        if flat is None:
            if self.thread_fusion or self.name(target) == "cpu":
                flat = True
            else:  # the GPU: the flat kernel when warps access contiguous runs
                spec = self.flat_spec(t, target)
                flat = spec is not None and (spec.folded or spec.coalesced)
        return "flat" if flat and self.has_flat(t) else "grid"

    def grid_columns(self, t: PixType, out_pixels: int, target: str | None = None) -> int:
        """Output pixels per thread of the 2-D kernel for an output of ``out_pixels``
        pixels (batch included): :attr:`columns` when set, else 4 on GPU targets where
        the chain's last geometry op resamples (``Resize``, ``Warping``: each thread's
        own setup, as a batch of crops' rect and scale, is then shared by 4 pixels) and
        the output has at least 2**21 pixels (at 4 per thread, still several waves of
        threads on a large GPU), else 1. Measured on the H200 (docs/fkl-resize.md):
        64 crops 448 -> 224 (3.2 M pixels)."""
        if self.columns is not None:
            n = self.columns
            if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 8:
                raise ArgumentError(f"fkl pipe columns: expected an int from 1 to 8, got "
                                    f"{n!r}")
            return n
        from ._geometry import Resize, Warping

        last = self.chain.last_readback
        if self.name(None) == "cpu" if target is None else target == "cpu":
            return 1
        if last < 0 or not isinstance(self.chain.middle[last], (Resize, Warping)):
            return 1
        return 4 if out_pixels >= 1 << 21 else 1

    def grid_shape(self, t: PixType, out_pixels: int, target: str | None = None
                   ) -> tuple[int, int]:
        """``(columns, rows)``: the output pixels per thread of the untiled 2-D kernel
        along x (:meth:`grid_columns`) and y (:attr:`rows` when set, else 1)."""
        rows = 1 if self.rows is None else self.rows
        if isinstance(rows, bool) or not isinstance(rows, int) or not 1 <= rows <= 8:
            raise ArgumentError(f"fkl pipe rows: expected an int from 1 to 8, got {rows!r}")
        return self.grid_columns(t, out_pixels, target), rows

    def check(self, t: PixType, variant: str | None, who: str,
              target: str | None = None) -> str:
        """``variant`` checked for ``t`` (None: :meth:`choose`); ``who`` names the pipe."""
        if variant is None:
            return self.choose(t, target)
        if variant in ("grid", "pitched", "pitched-out", "pitched-both", "scalar") or (
                variant == "flat" and self.has_flat(t)) or _columns_form(variant):
            return variant
        if variant == "flat":
            raise ArgumentError(
                f"fkl pipe: {who} has no flat kernel for {t} pixels (a geometry op, or "
                "a read/write without a flat form); use variant='grid'")
        raise ArgumentError(f"fkl pipe variant: expected 'flat', 'grid', 'scalar', "
                            f"'grid:N' or 'scalar:N' (N from 1 to 8) or None, got "
                            f"{variant!r}")

    def form(self, t: PixType, variant: str, target: str | None = None) -> Any:
        """The kernel's shape within (chain, pixel type): ``"grid"``, ``"active"`` (the
        2-D kernel with an active batch, :func:`fkl._lowering.lower`), ``"scalar"`` (the
        2-D kernel without whole-word accesses: misaligned arrays), ``"grid:N"`` /
        ``"scalar:N"`` (those with N output pixels per thread, :meth:`grid_columns`;
        ``"grid:NxM"``: and M rows; a ``/1tap`` suffix, :data:`ONE_TAP`: the last
        Resize reads one tap per pixel, chosen by the plan from the input geometry),
        ``"pitched"``,
        ``"pitched-out"``, ``"pitched-both"`` (the 2-D kernel reading a strided input,
        writing a strided output, or both), or ``("flat",
        fold, vectors)`` (see :class:`~fkl._flat.FlatSpec`)."""
        if variant in ("active", "pitched", "pitched-out", "pitched-both", "scalar") \
                or _columns_form(variant):
            return variant
        if variant == "flat":
            spec = self.flat_spec(t, target)
            assert spec is not None
            return ("flat", spec.fold, spec.vectors)
        return "grid"


#: The suffix of a ``grid``/``scalar`` variant whose last geometry op is FKL's
#: ``linear`` Resize by whole factors on integer pixels, traced with one tap per pixel
#: instead of four (:meth:`fkl.Resize.whole_steps`; chosen by the plan, never by name).
ONE_TAP = "/1tap"


def _columns_form(variant: Any) -> bool:
    """Whether ``variant`` is ``"grid:N"`` / ``"scalar:N"`` (N pixels per thread along
    x) or ``"grid:NxM"`` / ``"scalar:NxM"`` (and M rows), N and M from 1 to 8, or one of
    those or plain ``"grid"`` / ``"scalar"`` with the one-tap suffix :data:`ONE_TAP`."""
    if not isinstance(variant, str):
        return False
    tapped = variant.endswith(ONE_TAP)
    if tapped:
        variant = variant[:-len(ONE_TAP)]
    form, colon, shape = variant.partition(":")
    if tapped and not colon:
        return form in ("grid", "scalar")
    n, _, m = shape.partition("x")
    return form in ("grid", "scalar") and all(
        v.isdigit() and 1 <= int(v) <= 8 for v in ((n, m) if m else (n,)))


def one_tap(variant: str) -> bool:
    """Whether ``variant`` carries the one-tap suffix :data:`ONE_TAP`."""
    return variant.endswith(ONE_TAP)


def with_one_tap(variant: str) -> str:
    """``variant`` with the one-tap suffix (``"grid:4"`` → ``"grid:4/1tap"``)."""
    return variant if one_tap(variant) else variant + ONE_TAP


def thread_shape(variant: str) -> tuple[str, int, int]:
    """``(form, columns, rows)`` of a variant name (``"grid:4x2"`` → ``("grid", 4, 2)``;
    no suffix: 1, 1; the one-tap suffix is ignored)."""
    if one_tap(variant):
        variant = variant[:-len(ONE_TAP)]
    form, _, shape = variant.partition(":")
    n, _, m = shape.partition("x")
    return form, int(n) if n else 1, int(m) if m else 1
