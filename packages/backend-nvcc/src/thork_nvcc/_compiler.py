"""nvcc: CUDA C++ → cubin, PTX, or a host shared library that launches the kernel."""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
import tempfile
from collections.abc import Sequence

from thork_core import Artifact, CompileError, Compiler

from ._toolkit import Toolkit, find_toolkit

__all__ = ["NvccCompiler", "HOST_ENTRY", "host_wrapper", "supported_archs"]

#: The C-ABI symbol of a ``hostlib`` artifact built by nvcc:
#: ``int thork_launch(void** args, const unsigned* grid, const unsigned* block,
#: unsigned shared_bytes, void* stream)``, returning a ``cudaError_t``.
HOST_ENTRY = "thork_launch"

# Appended to the generated kernel for ``hostlib``: nvcc compiles host and device code in
# one step, so the launch goes through the CUDA runtime's own cudaLaunchKernel. The
# runtime is linked statically (nvcc's default), so the library needs only the driver.
_WRAPPER = r"""
// --- Thork host launch entry (nvcc hostlib) -------------------------------------------
extern "C" int thork_launch(void** args, const unsigned int* grid, const unsigned int* block,
                            unsigned int shared_bytes, void* stream) {
  return (int)cudaLaunchKernel((const void*)&%(entry)s, dim3(grid[0], grid[1], grid[2]),
                               dim3(block[0], block[1], block[2]), args, (size_t)shared_bytes,
                               (cudaStream_t)stream);
}
extern "C" const char* thork_error_string(int code) {
  return cudaGetErrorString((cudaError_t)code);
}
extern "C" int thork_attributes(int* out) {
  cudaFuncAttributes a;
  cudaError_t err = cudaFuncGetAttributes(&a, (const void*)&%(entry)s);
  if (err != cudaSuccess) return (int)err;
  out[0] = a.numRegs; out[1] = (int)a.sharedSizeBytes; out[2] = (int)a.localSizeBytes;
  out[3] = a.maxThreadsPerBlock;
  return 0;
}
"""

# Unreferenced helper functions in the self-contained prelude are expected: silence
# nvcc's warning #177 so that logs only carry what matters.
_QUIET = ["-diag-suppress=177"]


_WRAPPER_TAG = "w" + hashlib.sha256(_WRAPPER.encode()).hexdigest()[:10]


def host_wrapper(entry: str) -> str:
    """The host-side launch code appended to a kernel called ``entry``."""
    return _WRAPPER % {"entry": entry}


@functools.lru_cache(maxsize=8)
def _list(nvcc: str, what: str) -> tuple[str, ...]:
    r = subprocess.run([nvcc, what], capture_output=True, text=True, timeout=60)
    return tuple(r.stdout.split()) if r.returncode == 0 else ()


def supported_archs(tk: Toolkit) -> tuple[str, ...]:
    """The real architectures (``sm_XX``) this nvcc can build cubins for."""
    return _list(str(tk.nvcc), "--list-gpu-code")


def _arch_flags(kind: str, arch: str) -> list[str]:
    virtual = "compute_" + arch[3:]
    if kind == "cubin":
        return ["-cubin", f"--gpu-architecture={arch}"]
    if kind == "ptx":
        return ["-ptx", f"--gpu-architecture={virtual}"]
    # hostlib: the cubin for the exact arch is embedded; the driver needs nothing else.
    return ["--shared", "-Xcompiler", "-fPIC", f"-gencode=arch={virtual},code={arch}"]


class NvccCompiler(Compiler):
    """The CUDA toolkit's nvcc. Slower than NVRTC (a process per compile) but the only
    compiler that also builds a host library with a ``thork_launch`` C entry."""

    name = "nvcc"
    # Below NVRTC (100): used when asked for, or when NVRTC is not installed.
    priority = 50
    produces = ("cubin", "ptx", "hostlib")
    language = "cuda"
    package = "thork-backend-nvcc"

    def toolkit(self) -> Toolkit:
        """The toolkit in use (raises CompileError naming what was searched)."""
        tk, tried = find_toolkit()
        if tk is None:
            raise CompileError(
                "nvcc was not found; set CUDA_HOME or THORK_NVCC, put nvcc on PATH, or "
                "pip install --find-links wheelhouse 'thork-backend-nvcc[wheel]' (in a Thork "
                f"checkout after nox -s wheels) (searched: {tried})")
        return tk

    def version(self) -> str:
        return self.toolkit().version

    def identity(self) -> str:
        # The host wrapper is compiled into every hostlib but is not in the source core
        # hashes: its digest keeps a changed wrapper from being served stale libraries.
        return f"{self.name}-{self.version()}-{_WRAPPER_TAG}"

    def available(self) -> tuple[bool, str]:
        tk, tried = find_toolkit()
        if tk is None:
            return False, f"no nvcc found ({tried})"
        return True, ""

    def describe(self) -> str:
        """One line for ``thork info``: where nvcc is and which archs it builds."""
        tk, tried = find_toolkit()
        if tk is None:
            return f"nvcc: not found ({tried})"
        archs = sorted(supported_archs(tk), key=lambda a: int("".join(filter(str.isdigit, a))))
        span = f"{archs[0]}..{archs[-1]}" if archs else "unknown archs"
        return f"nvcc: {tk.describe()}; cubin/ptx/hostlib for {span}"

    def flags(self, kind: str, arch: str) -> list[str]:
        return [*_arch_flags(kind, arch), "-std=c++17", "-O3", "-lineinfo", *_QUIET]

    def compile(
        self, source: str, *, entry: str, kind: str, arch: str, options: Sequence[str] = ()
    ) -> Artifact:
        if kind not in self.produces:
            raise CompileError(
                f"nvcc produces {', '.join(self.produces)} artifacts, not {kind!r}")
        tk = self.toolkit()
        archs = supported_archs(tk)
        # --list-gpu-code names the base archs; sm_90a/sm_100f build wherever sm_90/sm_100 do.
        if archs and arch not in archs and arch.rstrip("af") not in archs:
            raise CompileError(
                f"nvcc {tk.version} cannot compile for {arch}; it supports {', '.join(archs)}")
        if kind == "hostlib":
            source = source + host_wrapper(entry)
        suffix = {"cubin": ".cubin", "ptx": ".ptx", "hostlib": ".so"}[kind]
        with tempfile.TemporaryDirectory(prefix="thork-nvcc-") as d:
            src = os.path.join(d, f"{entry}.cu")
            out = os.path.join(d, entry + suffix)
            with open(src, "w") as f:
                f.write(source)
            cmd = [str(tk.nvcc), *self.flags(kind, arch), *options, src, "-o", out]
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=d)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise CompileError(f"nvcc could not be run ({exc})", source=source) from None
            log = (r.stdout + r.stderr).strip()
            if r.returncode != 0 or not os.path.exists(out):
                raise CompileError(
                    f"nvcc {tk.version} failed to compile kernel {entry!r} for {arch} ({kind})",
                    log=log, source=source)
            with open(out, "rb") as f:
                data = f.read()
        info = {"toolkit": str(tk.root)}
        if kind == "hostlib":
            info["host_entry"] = HOST_ENTRY
        return Artifact(kind=kind, data=data, entry=entry, compiler=self.identity(),
                        arch=arch, log=log, info=info)
