"""The ``gpu-hostlib`` target: launch kernels through nvcc's host library and ctypes.

This is seed 004's path: the compiled ``.so`` carries the kernel and a C entry
``thork_launch`` that calls ``cudaLaunchKernel``; Python dlopens it, and core's launcher
calls that entry. Argument binding, NumPy staging and stream handling are the GPU
target's (both are :class:`~thork_core._gpu.CudaExecutable`); only the entry differs.

It is an alternative to the ``gpu`` target, never chosen by default (lower priority):
ask for it with ``target="gpu-hostlib"`` or ``THORK_TARGET=gpu-hostlib``.
"""

from __future__ import annotations

import ctypes

from thork_core import (
    Artifact,
    Dim3,
    Executable,
    KernelIR,
    LaunchError,
)
from thork_core.launch import CONV_HOST_STREAM, make_launcher
from thork_core.plugin import CudaExecutable, GpuTarget, visible_device
from thork_core.plugin import library_file as _library_file

from ._compiler import HOST_ENTRY

__all__ = ["HostlibTarget", "HostlibExecutable", "library_path"]


def library_path(artifact: Artifact) -> str:
    """The library's content-addressed file under the cache folder (the one the disk
    cache compared when the artifact came from there: core's ``library_file``)."""
    return _library_file(artifact)


class HostlibExecutable(CudaExecutable):
    """A kernel in an nvcc host library, launched by core's launcher through the library's
    C entry (which calls ``cudaLaunchKernel``); binding, staging and stream handling are
    :class:`~thork_core._gpu.CudaExecutable`'s, as for the ``gpu`` target."""

    def __init__(self, artifact: Artifact, kernel: KernelIR, ordinal: int = 0) -> None:
        from thork_core.runtime import function_address, make_current

        # The runtime inside the library adopts the context current on the launching
        # thread: the launcher makes the primary context (the one the pool and staging
        # use) current on every thread that launches.
        ctx = make_current(ordinal)
        self._lib = ctypes.CDLL(library_path(artifact))
        try:
            fn = getattr(self._lib, artifact.info.get("host_entry", HOST_ENTRY))
        except AttributeError:
            raise LaunchError(
                f"{kernel.name}: the host library has no {HOST_ENTRY!r} entry (was it built "
                "by thork-backend-nvcc?)") from None
        self._errstr = self._lib.thork_error_string
        self._errstr.argtypes = [ctypes.c_int]
        self._errstr.restype = ctypes.c_char_p
        launcher = make_launcher(
            CONV_HOST_STREAM, int(ctypes.cast(fn, ctypes.c_void_p).value or 0), 0,
            kernel.params, self._failed, ctx=int(ctx),
            ctx_get=function_address("cuCtxGetCurrent"),
            ctx_set=function_address("cuCtxSetCurrent"))
        self._setup(kernel, ordinal, launcher)
        self.attributes = self._read_attributes()
        # CUDA's 48 KiB default cap counts static and dynamic shared memory together.
        self._dynamic_limit -= self.attributes.get("shared_bytes", 0)

    def _read_attributes(self) -> dict[str, int]:
        out = (ctypes.c_int * 4)()
        fn = self._lib.thork_attributes
        fn.argtypes = [ctypes.c_void_p]
        fn.restype = ctypes.c_int
        if fn(out) != 0:
            return {}
        return {"registers": out[0], "shared_bytes": out[1], "local_bytes": out[2],
                "max_threads_per_block": out[3]}

    def _failed(self, rc: int, grid: Dim3, block: Dim3) -> None:
        text = (self._errstr(rc) or b"?").decode(errors="replace")
        raise LaunchError(
            f"launching {self.kernel.name} through its nvcc host library (grid="
            f"{tuple(grid)}, block={tuple(block)}) failed: cudaError {rc}: {text}")


class HostlibTarget(GpuTarget):
    """NVIDIA GPUs, launching through an nvcc-built host library (``hostlib``, CUDA).

    The GPU target in all but how a kernel is loaded and launched.
    """

    name = "gpu-hostlib"
    consumes = ("hostlib",)
    # Language "cuda" (inherited) keeps it apart from the CPU target's host-C++ 'hostlib'.
    # Below the gpu target (100) and above cpu (10): only used when asked for.
    priority = 50

    def load(self, artifact: Artifact, kernel: KernelIR) -> Executable:
        return self.load_on(artifact, kernel, 0)

    def load_on(self, artifact: Artifact, kernel: KernelIR, device: int) -> Executable:
        if artifact.kind != "hostlib":
            raise LaunchError(
                f"the gpu-hostlib target loads 'hostlib' artifacts, got {artifact.kind!r}")
        return HostlibExecutable(artifact, kernel, visible_device(kernel.name, device))

    def describe(self) -> str:
        ok, why = self.available()
        return ("gpu-hostlib: nvcc host library + ctypes launch" if ok
                else f"gpu-hostlib: unavailable ({why})")
