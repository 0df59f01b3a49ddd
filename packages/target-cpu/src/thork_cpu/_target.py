"""The CPU target: loads host shared libraries and runs kernels on NumPy arrays."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence
from typing import Any

from thork_core import (
    ArgumentError,
    ArgumentPack,
    Artifact,
    Dim3,
    Executable,
    KernelIR,
    LaunchError,
    PointerType,
    Renderer,
    Target,
)
from thork_core.plugin import (
    array_view,
    check_array,
    graph_recorder,
    library_path,
    scalar_value,
)

from ._compiler import host_arch
from ._renderer import DEADLOCK, ENTRY, CppRenderer

__all__ = ["CpuTarget", "CpuExecutable"]


class CpuExecutable(Executable):
    """A kernel in a host shared library; blocks run in parallel, threads in order (or as
    fibers switching at barriers); ``shared_mem`` bytes of dynamic shared memory per block."""

    def __init__(self, artifact: Artifact, kernel: KernelIR) -> None:
        self.kernel = kernel
        self._lib = ctypes.CDLL(library_path(artifact.data, "cpu-so"))
        fn = getattr(self._lib, ENTRY)
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_ulonglong]
        fn.restype = ctypes.c_int
        self._fn = fn
        self.args = ArgumentPack(kernel.params)
        self._slots = self.args.slots
        self._grid = (ctypes.c_uint * 3)()
        self._block = (ctypes.c_uint * 3)()
        self.attributes: dict[str, Any] = {"openmp": bool(artifact.info.get("openmp"))}

    def launch(
        self, grid: Dim3, block: Dim3, args: Sequence[Any], *, stream: Any = None,
        shared_mem: int = 0,
    ) -> None:
        kernel = self.kernel
        keep = []
        for i, (p, arg) in enumerate(zip(kernel.params, args)):
            if not isinstance(p.type, PointerType):
                self._slots[i].value = scalar_value(arg, p, kernel)
                continue
            view = array_view(arg, p, kernel, None)
            if view.device != "cpu":
                raise ArgumentError(
                    f"{kernel.name}(): parameter '{p.name}' is on cuda:{view.device_id} but "
                    "the CPU target needs host arrays (NumPy); copy it to the host first")
            check_array(view, p, kernel)
            keep.append(view)
            self._slots[i].value = view.ptr
        self._run(grid, block, 0, shared_mem, self.args.address)

    def _run(self, grid: Dim3, block: Dim3, stream: int, shared_mem: int, argv: int) -> None:
        graph = graph_recorder()
        if graph is not None:  # inside a CPU Graph's recording: recorded, run on replay
            graph.record(self, grid, block, shared_mem, argv)
            return
        kernel = self.kernel
        self._grid[:] = grid
        self._block[:] = block
        rc = self._fn(argv, self._grid, self._block, shared_mem)
        if rc == DEADLOCK:
            raise LaunchError(
                f"{kernel.name}: a barrier (tk.syncthreads or a warp primitive) could never "
                "complete on the CPU target: some threads of a block wait at a barrier that "
                "the others never reach (a barrier inside a branch that is not uniform per "
                "block, or a warp primitive whose mask names lanes that do not call it)")
        if rc != 0:
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
