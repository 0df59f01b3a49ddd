"""NVRTC through cuda-python: CUDA C++ → cubin (or PTX) in-process, no GPU needed."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import Any

from thork_core import Artifact, CompileError, Compiler

__all__ = ["NvrtcCompiler"]


@functools.cache
def _nvrtc() -> Any:
    from cuda.bindings import nvrtc

    return nvrtc


def _check(result: Any, what: str) -> Any:
    err = result[0]
    if int(err) != 0:
        _, msg = _nvrtc().nvrtcGetErrorString(err)
        text = msg.decode() if isinstance(msg, bytes) else msg
        raise CompileError(f"NVRTC {what} failed: {text}")
    return result[1] if len(result) == 2 else None


def _query_version() -> str:
    err, major, minor = _nvrtc().nvrtcVersion()
    if int(err) != 0:
        raise CompileError(f"nvrtcVersion failed: {err}")
    return f"{major}.{minor}"


#: The environment variables that steer which NVRTC library cuda.bindings loads.
_VARIABLES = ("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH")


def _environment() -> list[str]:
    from thork_core.plugin import installed_fingerprint

    return [installed_fingerprint(), *(os.environ.get(v, "") for v in _VARIABLES)]


def _loaded_path() -> str:
    """The NVRTC library file this process loaded (loading it): from the process's
    memory map ("" where that cannot be read)."""
    _nvrtc().nvrtcVersion()  # cuda.bindings opens the library on its first call
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and os.path.basename(parts[5].strip()).startswith(
                        "libnvrtc.so"):
                    return parts[5].strip()
    except OSError:
        pass
    return ""


def _library(base: list[str]) -> str:
    """The NVRTC library file, memoized against ``base`` (:func:`_environment`): a disk-
    cache hit learns it without loading NVRTC."""
    from thork_core.plugin import memo

    return str(memo("nvrtc_library", base, _loaded_path))


class NvrtcCompiler(Compiler):
    """The default compiler: fast, in-process, cubin for the exact arch."""

    name = "nvrtc"
    priority = 100
    produces = ("cubin", "ptx")
    language = "cuda"
    package = "thork-backend-nvrtc"

    @functools.cache  # noqa: B019 - one instance per process
    def version(self) -> str:
        # Loading NVRTC costs ~40 ms; a disk-cache hit should not pay it. The version is
        # memoized against the installed distributions (a wheel upgrade changes their
        # metadata folders; a script folder gaining files does not), the variables that
        # steer where a system NVRTC is found, and the size and modification time of the
        # library file that answered (a toolkit upgraded in place changes them).
        from thork_core.plugin import memo, path_fingerprint

        base = _environment()
        fp = [*base, path_fingerprint([_library(base)])]
        return str(memo("nvrtc_version", fp, _query_version))

    def key_inputs(self) -> tuple[list[str], list[str]] | None:
        """The variables steering where NVRTC is found and the library file that is
        loaded (see :meth:`Compiler.key_inputs`)."""
        return list(_VARIABLES), [_library(_environment())]

    def available(self) -> tuple[bool, str]:
        # The version comes from cuda.bindings' NVRTC (asked, or memoized against the
        # installed distributions: removing cuda-bindings changes them), so a version
        # says the bindings import; looking for them again would cost a disk-cache hit
        # ~0.3 ms (a search of every sys.path folder for the ``cuda`` namespace).
        try:
            self.version()
        except Exception as exc:
            return False, f"NVRTC cannot be loaded ({type(exc).__name__}: {exc})"
        return True, ""

    @functools.cache  # noqa: B019
    def supported_archs(self) -> tuple[str, ...]:
        nv = _nvrtc()
        archs = _check(nv.nvrtcGetSupportedArchs(), "nvrtcGetSupportedArchs")
        return tuple(f"sm_{a}" for a in archs)

    def flags(self, kind: str, arch: str) -> list[str]:
        """``-minimal`` (NVRTC 12.4+) leaves out what Thork's self-contained source never
        uses (texture and surface functions, the device runtime's ``cuda*`` functions and
        types, launches from device code): NVRTC's own time drops by ~20% for a small
        kernel (session 13: 56.4 -> 44.9 ms on the dev machine) and the cubin is the same,
        byte for byte (every module-level kernel of the tests, examples and benches)."""
        virtual = arch.replace("sm_", "compute_")
        gpu = arch if kind == "cubin" else virtual
        out = [f"--gpu-architecture={gpu}", "-std=c++17", "-lineinfo"]
        if self._minimal():
            out.append("-minimal")
        return out

    @functools.cache  # noqa: B019 - one instance per process
    def _minimal(self) -> bool:
        """Whether this NVRTC takes ``-minimal`` (added in CUDA 12.4)."""
        try:
            major, minor = (int(x) for x in self.version().split(".")[:2])
        except Exception:  # noqa: BLE001 - an unknown version: the plain flags
            return False
        return (major, minor) >= (12, 4)

    def compile(
        self, source: str, *, entry: str, kind: str, arch: str, options: Sequence[str] = ()
    ) -> Artifact:
        if kind not in self.produces:
            raise CompileError(f"NVRTC cannot produce {kind!r} artifacts (only cubin, ptx)")
        base = arch.rstrip("af")
        if base not in self.supported_archs():
            raise CompileError(
                f"NVRTC {self.version()} cannot compile for {arch}; it supports "
                f"{', '.join(self.supported_archs())}")
        nv = _nvrtc()
        opts = [o.encode() for o in (*self.flags(kind, arch), *options)]
        prog = _check(nv.nvrtcCreateProgram(source.encode(), f"{entry}.cu".encode(), 0, [], []),
                      "nvrtcCreateProgram")
        try:
            (err,) = nv.nvrtcCompileProgram(prog, len(opts), opts)
            size = _check(nv.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
            buf = b" " * size
            nv.nvrtcGetProgramLog(prog, buf)
            log = buf.rstrip(b"\0 ").decode(errors="replace")
            if int(err) != 0:
                raise CompileError(f"NVRTC failed to compile kernel {entry!r} for {arch}",
                                   log=log, source=source)
            if kind == "cubin":
                n = _check(nv.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
                data = b" " * n
                _check(nv.nvrtcGetCUBIN(prog, data), "nvrtcGetCUBIN")
            else:
                n = _check(nv.nvrtcGetPTXSize(prog), "nvrtcGetPTXSize")
                data = b" " * n
                _check(nv.nvrtcGetPTX(prog, data), "nvrtcGetPTX")
                data = data.rstrip(b"\0")
        finally:
            nv.nvrtcDestroyProgram(prog)
        return Artifact(kind=kind, data=bytes(data), entry=entry, compiler=self.identity(),
                        arch=arch, log=log)
