"""A prepared launch: one kernel, fixed geometry and scalar values, pointers per call.

Front-ends that validated their arguments once (fkl-compose's hot path, replay loops)
prepare a :class:`PreparedLaunch` and then call it with nothing but array addresses and
a stream. Each one owns its :class:`~thork_core.ArgumentPack`, so two prepared launches of
the same executable with different scalar values never overwrite each other's slots.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._target import ArgumentPack, Dim3

if TYPE_CHECKING:
    from ._target import Executable

__all__ = ["ArrayGuard", "PreparedLaunch", "guarded_call_base"]

#: What a guard's ``specs`` holds per array: (shape, dtype, device ordinal).
ArraySpec = tuple[tuple[int, ...], Any, int]


class PreparedLaunch:
    """``launch(pointers, stream)``: write the pointer arguments and launch; no checks.

    ``values`` holds one entry per kernel parameter: a
    :func:`~thork_core._binding.scalar_value` result for each scalar (written once, here)
    and anything for each pointer (replaced on every call). ``pointers`` are device (or, on
    the CPU target, host) addresses in parameter order; ``stream`` a raw CUDA stream
    handle (0: the legacy default stream; ignored by the CPU target).
    """

    __slots__ = ("exe", "grid", "block", "shared_mem", "pack", "_pointer_slots", "call")

    def __init__(self, exe: Executable, grid: Dim3, block: Dim3, values: Sequence[Any],
                 shared_mem: int = 0) -> None:
        params = exe.kernel.params
        if len(values) != len(params):
            raise ValueError(f"{exe.kernel.name}: {len(params)} values expected for a "
                             f"prepared launch, got {len(values)}")
        self.exe = exe
        self.grid = grid
        self.block = block
        self.shared_mem = shared_mem
        self.pack = ArgumentPack(params)
        for slot, is_pointer, value in zip(self.pack.slots, self.pack.pointer, values):
            slot.value = 0 if is_pointer else value
        self._pointer_slots = [s for s, p in zip(self.pack.slots, self.pack.pointer) if p]
        #: The fastest callable with :meth:`__call__`'s contract (a C function where the
        #: target has one): hot loops call this.
        self.call: Callable[[Sequence[int], int], None] = self.__call__

    def __call__(self, pointers: Sequence[int], stream: int = 0) -> None:
        for slot, ptr in zip(self._pointer_slots, pointers):
            slot.value = ptr
        self.exe._run(self.grid, self.block, stream, self.shared_mem, self.pack.address)

    @property
    def pointer_count(self) -> int:
        """How many pointer parameters a call supplies."""
        return len(self._pointer_slots)

    def guard(self, array_type: type, specs: Sequence[ArraySpec], order: Sequence[int],
              align_mask: int = 0, to_handle: Callable[[Any], int] | None = None,
              ) -> Callable[..., bool]:
        """A checked launch for device arrays: ``guard(*arrays, stream) -> bool``.

        True when every array is exactly ``array_type`` (objects with ``ptr``, ``shape``,
        ``dtype``, ``device`` and ``stream`` attributes, as :class:`~thork_core.DeviceArray`)
        with its spec's shape, dtype (the same object) and the first spec's device; was
        produced on the launch stream or the legacy stream (``.stream`` 0 or None); and no
        address has a bit of ``align_mask``: the kernel was then launched, pointer slot
        ``k`` taking ``arrays[order[k]]``. False otherwise, with nothing launched: the
        caller takes its general path (which waits on producers, converts, raises).
        ``stream``: None (the legacy stream), an int handle, or what ``to_handle`` (default
        :func:`thork_core._cuda.stream_handle`) turns into one.
        """
        if len(order) != self.pointer_count or any(not 0 <= j < len(specs) for j in order):
            raise ValueError(f"{self.exe.kernel.name}: order must name one of the "
                             f"{len(specs)} arrays for each of the {self.pointer_count} "
                             f"pointer parameters, got {list(order)}")
        if to_handle is None:
            from ._cuda import stream_handle as to_handle
        return self._guard(array_type, [tuple(s) for s in specs], list(order), align_mask,
                           to_handle)

    def _guard(self, array_type: type, specs: list[Any], order: list[int], align_mask: int,
               to_handle: Callable[[Any], int]) -> Callable[..., bool]:
        return ArrayGuard(self, array_type, specs, order, align_mask, to_handle)


class ArrayGuard:
    """:meth:`PreparedLaunch.guard` in Python (the native module's ``Guard`` does the same
    in C; tests hold the two to one behaviour)."""

    __slots__ = ("launch", "array_type", "specs", "order", "mask", "to_handle", "device")

    def __init__(self, launch: PreparedLaunch, array_type: type, specs: list[Any],
                 order: list[int], mask: int, to_handle: Callable[[Any], int]) -> None:
        self.launch = launch
        self.array_type = array_type
        self.specs = specs
        self.order = order
        self.mask = mask
        self.to_handle = to_handle
        self.device = specs[0][2]

    def __call__(self, *args: Any) -> bool:
        if len(args) != len(self.specs) + 1:
            raise TypeError(f"guard: {len(self.specs)} arrays and a stream expected")
        stream = args[-1]
        handle = 0 if stream is None else stream if type(stream) is int \
            else self.to_handle(stream)
        ptrs = []
        bits = 0
        for a, (shape, dtype, _) in zip(args, self.specs):
            if type(a) is not self.array_type or a.shape != shape or a.dtype is not dtype \
                    or a.device != self.device:
                return False
            produced = a.stream
            if produced and produced != handle:
                return False
            p = a.ptr
            bits |= p
            ptrs.append(p)
        if bits & self.mask:
            return False
        self.launch.call([ptrs[j] for j in self.order], handle)
        return True


def guarded_call_base() -> type | None:
    """The native module's ``GuardedCall`` base type; None where that module is not
    available (:func:`~thork_core._native.native_status` says why; builds it on first use).

    A Python class that lists it first among its bases and does not define ``__call__``
    has the call ``obj(x, out=y)`` / ``obj(x, out=y, stream=s)`` decided in C: the guard in
    ``obj._hot_guard`` (a :meth:`PreparedLaunch.guard` over one input and one output) is
    tried and ``y`` returned when it launched; every other call, and a miss, goes to
    ``obj._miss(*args, **kwargs)``. On Python 3.12+ such a call is a vectorcall: no
    argument tuple, keyword dict or Python frame (0.3 us less per call than a Python
    ``__call__`` on the dev machine, 0.5 us on the H200's host: ``python
    bench/bench_call_entry.py``, docs/targets.md)."""
    from ._native import native_module

    mod = native_module()
    return None if mod is None else mod.GuardedCall  # type: ignore[no-any-return]
