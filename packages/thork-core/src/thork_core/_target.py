"""The interface every target plugin implements, and the geometry checks they share."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._artifact import Artifact
from ._errors import ArgumentError
from ._ir import KernelIR
from ._renderer import Renderer

if TYPE_CHECKING:
    from ._launch import PreparedLaunch

__all__ = ["Target", "Executable", "Dim3", "normalize_dims"]

Dim3 = tuple[int, int, int]

# CUDA limits for every arch Thork targets (sm_75+).
_MAX_BLOCK = (1024, 1024, 64)
_MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_THREADS_PER_BLOCK = 1024


def normalize_dims(value: Any, what: str) -> Dim3:
    """Validate a grid or block given as an int or a 1–3 tuple of positive ints.

    ``what`` is ``"grid"`` or ``"block"``; errors name it and the offending value.
    """
    dims = (value,) if _is_int(value) else value  # NumPy ints too, as inside a tuple
    if not isinstance(dims, (tuple, list)) or not 1 <= len(dims) <= 3:
        raise ArgumentError(
            f"{what} must be an int or a tuple of 1 to 3 positive ints, got {value!r}"
        )
    out = []
    for axis, d in zip("xyz", dims):
        if not _is_int(d) or int(d) < 1:
            raise ArgumentError(
                f"{what}.{axis} must be a positive int, got {d!r} (in {what}={value!r})"
            )
        out.append(int(d))
    while len(out) < 3:
        out.append(1)
    limits = _MAX_BLOCK if what == "block" else _MAX_GRID
    for axis, d, lim in zip("xyz", out, limits):
        if d > lim:
            raise ArgumentError(f"{what}.{axis} = {d} exceeds the CUDA limit of {lim}")
    if what == "block" and out[0] * out[1] * out[2] > MAX_THREADS_PER_BLOCK:
        raise ArgumentError(
            f"block {tuple(out)} has {out[0] * out[1] * out[2]} threads; "
            f"at most {MAX_THREADS_PER_BLOCK} threads per block are allowed"
        )
    return out[0], out[1], out[2]


def _is_int(d: Any) -> bool:
    if isinstance(d, bool):
        return False
    try:
        import numpy as np

        if isinstance(d, np.integer):
            return True
    except ImportError:  # pragma: no cover
        pass
    return isinstance(d, int)


class Executable(abc.ABC):
    """A kernel loaded on a target, ready to launch.

    Subclasses set ``kernel`` and ``launcher`` (:func:`thork_core._launch.make_launcher`:
    the one launch mechanism) and implement :meth:`launch` (bind the caller's arguments,
    then ``launcher.run``); the base supplies :meth:`prepare`, the check-free path for
    front-ends that validated their arguments once (fkl-compose's hot path). Every method
    may be called from many threads at once.
    """

    #: How it was obtained: ``compiled``, ``disk`` (disk-cache hit).
    cache: str = "compiled"
    kernel: KernelIR
    #: The kernel's launcher: the native module's ``Launcher`` or a ``PyLauncher``.
    launcher: Any
    #: The CUDA device it is loaded on (0 for targets without devices).
    ordinal: int = 0
    #: Whether launches must find their device from their arrays first (a CUDA target
    #: with several visible devices): front-ends then route through
    #: :func:`thork_core.runtime.route` and load the kernel once per device.
    routes: bool = False

    def prepare(
        self, grid: Dim3, block: Dim3, values: Sequence[Any], *, shared_mem: int = 0,
    ) -> PreparedLaunch:
        """A :class:`~thork_core.PreparedLaunch` of this kernel with fixed geometry and scalar
        values (see there); nothing is checked, ``grid``/``block`` must be normalized."""
        from ._launch import PreparedLaunch

        return PreparedLaunch(self, grid, block, values, shared_mem)

    @abc.abstractmethod
    def launch(
        self, grid: Dim3, block: Dim3, args: Sequence[Any], *, stream: Any = None,
        shared_mem: int = 0,
    ) -> None:
        """Run the kernel. ``args`` are the caller's arguments, already count-checked."""


class Target(abc.ABC):
    """Where kernels run. Subclasses set ``name``, ``consumes`` and ``language``."""

    name: str = ""
    #: Artifact kinds it can load, in order of preference.
    consumes: tuple[str, ...] = ()
    #: ``"cuda"`` or ``"c++"``: which compilers can feed it.
    language: str = "cuda"
    #: Higher wins when the caller names no target and several are available (among
    #: Thork's own targets and opted-in plugins: see ``docs/plugins.md``).
    priority: int = 0
    #: The compiler this target builds with when neither the caller nor
    #: ``THORK_COMPILER`` names one, if it is installed and available; None: the
    #: highest-ranked fitting compiler.
    preferred_compiler: str | None = None

    @abc.abstractmethod
    def available(self) -> tuple[bool, str]:
        """Whether it can run kernels here, and why not when it cannot."""

    @abc.abstractmethod
    def renderer(self) -> Renderer:
        """A renderer producing source for this target."""

    @abc.abstractmethod
    def arch(self) -> str:
        """The architecture to compile for (``sm_90``, or the host's)."""

    @abc.abstractmethod
    def load(self, artifact: Artifact, kernel: KernelIR) -> Executable:
        """Make an :class:`Executable` from an artifact."""

    def arch_on(self, device: int) -> str:
        """The architecture to compile for to run on CUDA device ``device`` (targets
        without devices: :meth:`arch`)."""
        return self.arch()

    def load_on(self, artifact: Artifact, kernel: KernelIR, device: int) -> Executable:
        """:meth:`load` onto CUDA device ``device``. Targets without devices accept only
        device 0 (the host)."""
        if device:
            from ._errors import DeviceError

            raise DeviceError(f"{kernel.name}: the {self.name} target has no CUDA device "
                              f"{device} (device= applies to GPU targets)")
        return self.load(artifact, kernel)

    def describe(self) -> str:
        """One line for ``thork info``."""
        ok, why = self.available()
        return f"{self.name}: {'available' if ok else 'unavailable (' + why + ')'}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
