"""The CPU target: loads host shared libraries and runs kernels on NumPy arrays."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence
from typing import Any

from thork_core import (
    ArgumentError,
    Artifact,
    Dim3,
    Executable,
    KernelIR,
    LaunchError,
    PointerType,
    Renderer,
    Target,
)
from thork_core.launch import CONV_HOST, make_launcher, param_kinds
from thork_core.plugin import (
    RecordingLauncher,
    array_view,
    check_array,
    load_library,
    scalar_value,
)

from ._compiler import host_arch
from ._renderer import (
    BAD_CLUSTER_RANK,
    BAD_TENSOR_MAP,
    CLUSTER_DEADLOCK,
    DEADLOCK,
    ENTRY,
    GRID_FAILED,
    NO_MEMORY,
    PARTIAL_WARP,
    PARTIAL_WARPGROUP,
    CppRenderer,
)

__all__ = ["CpuTarget", "CpuExecutable"]


def _weak_callback(method: Any) -> Any:
    """``method`` (bound) called through a weak reference to its object."""
    import weakref

    ref = weakref.WeakMethod(method)

    def call(*args: Any) -> Any:
        bound = ref()
        return None if bound is None else bound(*args)

    return call


class CpuExecutable(Executable):
    """A kernel in a host shared library; blocks run in parallel, threads in order (or as
    fibers switching at barriers); ``shared_mem`` bytes of dynamic shared memory per block.

    Launched through core's launcher (one call of the library's C entry, the GIL
    released); the entry keeps no state between calls, so threads may launch at once."""

    def __init__(self, artifact: Artifact, kernel: KernelIR) -> None:
        self.kernel = kernel
        self._lib = load_library(artifact)  # unloaded when this executable is gone
        entry = ctypes.cast(getattr(self._lib, ENTRY), ctypes.c_void_p).value
        # Wrapped so that a recording CPU Graph (thork_core.runtime.Graph) takes the
        # launches instead of running them. The error callback is weak: the launcher (a C
        # object outside the cycle collector) must not keep this executable, hence its
        # library, alive forever.
        self.launcher = RecordingLauncher(
            make_launcher(CONV_HOST, int(entry or 0), 0, kernel.params,
                          _weak_callback(self._failed)),
            param_kinds(kernel.params))
        self._pointer = [isinstance(p.type, PointerType) for p in kernel.params]
        self.attributes: dict[str, Any] = {"openmp": bool(artifact.info.get("openmp"))}

    def launch(
        self, grid: Dim3, block: Dim3, args: Sequence[Any], *, stream: Any = None,
        shared_mem: int = 0,
    ) -> None:
        kernel = self.kernel
        values = list(args)  # this call's own values: threads never share them
        keep = []
        for i, (p, arg) in enumerate(zip(kernel.params, args)):
            if not self._pointer[i]:
                values[i] = scalar_value(arg, p, kernel)
                continue
            view = array_view(arg, p, kernel, None)
            if view.device != "cpu":
                raise ArgumentError(
                    f"{kernel.name}(): parameter '{p.name}' is on cuda:{view.device_id} but "
                    "the CPU target needs host arrays (NumPy); copy it to the host first")
            check_array(view, p, kernel)
            keep.append(view)  # the views (and what they hold) outlive the launch
            values[i] = view.ptr
        self.launcher.run(grid, block, shared_mem, 0, values)

    # -- debug mode (h-debug): the error record of a debug build ---------------------------
    def debug_read(self, stream: Any = None) -> Any:
        """The library's error record (the launch has returned: nothing to wait for)."""
        from thork_core.plugin import DebugRecord

        record = DebugRecord.in_dll(self._lib, "thork_dbg_record")
        return DebugRecord.from_buffer_copy(record)

    def debug_clear(self) -> None:
        from thork_core.plugin import DebugRecord

        ctypes.memset(ctypes.addressof(DebugRecord.in_dll(self._lib, "thork_dbg_record")), 0,
                      ctypes.sizeof(DebugRecord))
    # -- end debug mode

    def _failed(self, rc: int, grid: Dim3, block: Dim3) -> None:
        """The launcher's ``on_error``: the entry's return code as a LaunchError."""
        kernel = self.kernel
        if rc == DEADLOCK:
            raise LaunchError(
                f"{kernel.name}: a barrier (tk.syncthreads, a warp primitive or "
                "tk.mbarrier_wait) could never "
                "complete on the CPU target: some threads of a block wait at a barrier that "
                "the others never reach (a barrier inside a branch that is not uniform per "
                "block, or a warp primitive whose mask names lanes that do not call it)")
        if rc == GRID_FAILED:
            raise LaunchError(
                f"{kernel.name}: a grid barrier (tk.grid_sync) could not include every thread: "
                "a block ended, or some of its threads returned, before reaching it (every "
                "thread of a cooperative launch must reach each grid barrier)")
        if rc == NO_MEMORY:
            raise LaunchError(f"{kernel.name}: the CPU target could not start a thread or "
                              "allocate memory for every block of the cooperative launch")
        if rc == PARTIAL_WARP:
            raise LaunchError(
                f"{kernel.name}: tk.mma / tk.ldmatrix ran in a warp missing lanes; every lane "
                "of the warp takes part (PTX .sync.aligned): launch whole warps (a block "
                "size that is a multiple of 32) and keep every lane running up to the call")
        if rc == PARTIAL_WARPGROUP:
            raise LaunchError(
                f"{kernel.name}: tk.wgmma ran in a warpgroup missing threads; all 128 threads "
                "of the warpgroup (4 whole warps) take part: launch a multiple of 128 threads "
                "and keep them all running up to the call")
        if rc == BAD_TENSOR_MAP:
            raise LaunchError(
                f"{kernel.name}: tk.tma_load was given an array that is not a CPU tensor map: "
                "build it with tk.tensor_map(numpy_array, box) for the CPU target")
        if rc == BAD_CLUSTER_RANK:
            raise LaunchError(
                f"{kernel.name}: a cluster operation (tk.mbarrier_arrive(cta=...), "
                "tk.tma_load(multicast=...)) named a rank outside the block's cluster, or the "
                "kernel declares no tk.cluster_dims")
        if rc == CLUSTER_DEADLOCK:
            raise LaunchError(
                f"{kernel.name}: tk.cluster_sync waited for a block of the cluster that had "
                "ended (every thread of every block of a cluster must reach each cluster "
                "barrier)")
        raise LaunchError(f"{kernel.name} failed on the CPU target (code {rc})")


class CpuTarget(Target):
    """Runs kernels as host C++; chosen when asked or when no GPU is visible."""

    name = "cpu"
    consumes = ("hostlib",)
    language = "c++"
    priority = 10

    def available(self) -> tuple[bool, str]:
        from ._compiler import _find_cxx

        if _find_cxx() is None:
            return False, "no host C++ compiler (set CXX, or install g++ or clang++)"
        return True, ""

    def renderer(self) -> Renderer:
        return CppRenderer()

    def arch(self) -> str:
        return host_arch()

    def load(self, artifact: Artifact, kernel: KernelIR) -> Executable:
        return CpuExecutable(artifact, kernel)

    def describe(self) -> str:
        ok, why = self.available()
        return f"cpu: {host_arch()}, {os.cpu_count()} cores" if ok else f"cpu: unavailable ({why})"
