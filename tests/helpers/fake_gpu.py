"""fkl's GPU call path without a GPU: stand-ins for a built kernel's executable and its
prepared launches that record each launch instead of calling the driver, and DeviceArrays
wrapping made-up addresses. ``tests/compose/conftest.py``'s ``fake_gpu`` fixture installs
them."""

from __future__ import annotations

from typing import Any

__all__ = ["FakeExecutable", "FakeGpuTarget", "RecordingLaunch", "wrap_device"]


class RecordingLaunch:
    """A prepared launch that appends ``(self, addresses)`` to ``log`` for each call."""

    def __init__(self, log: list[Any], grid: Any, block: Any, values: list[Any]) -> None:
        self.log, self.grid, self.block, self.values = log, grid, block, values

    def call(self, ptrs: list[int], stream: int) -> None:
        self.log.append((self, list(ptrs)))

    def guard(self, *args: Any, cai: bool = False, in_place: bool = False) -> Any:
        """None (the Python path records every launch), except for a guard over CAI
        arrays (fkl's guard for CuPy inputs): core's Python guard, launching through
        ``call``, so those calls are recorded the same way."""
        if not cai:
            return None
        from thork_core import _probe
        from thork_core._launch import ArrayGuard

        return ArrayGuard(self, *args, _probe.KINDS, in_place)


class FakeExecutable:
    """A built kernel's executable whose prepared launches record into ``log``."""

    launcher = True

    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def prepare(self, grid: Any, block: Any, values: list[Any]) -> RecordingLaunch:
        return RecordingLaunch(self.log, grid, block, values)


class FakeGpuTarget:
    """What fkl's kernel builder asks of the GPU target: its name and language."""

    name = "gpu"
    language = "cuda"


def wrap_device(addr: int, shape: tuple[int, ...], dtype: str,
                pitch: int | None = None) -> Any:
    """A DeviceArray over the made-up device address ``addr`` (nothing is allocated);
    ``pitch`` in bytes between rows, None for compact rows."""
    from thork_core.runtime import DeviceArray

    return DeviceArray.wrap(addr, shape, dtype, pitch=pitch)
