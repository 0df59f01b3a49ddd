"""clang++ in CUDA mode: device-only to PTX without CUDA headers, ptxas to cubin, and a
silent fallback to nvcc wherever that path fails."""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from collections.abc import Sequence

from thork_core import Artifact, CompileError, Compiler
from thork_core.plugin import env_flag
from thork_nvcc import NvccCompiler, Toolkit, find_toolkit

from ._install import ClangInstall, find_clang
from ._preamble import PREAMBLE, preamble

__all__ = ["ClangCompiler", "min_ptx"]

# The oldest PTX ISA that has each arch (PTX ISA release notes). Clang may pick an older
# default when it does not recognize the installed CUDA, so the minimum is asked for.
_MIN_PTX = {
    "sm_75": 63, "sm_80": 70, "sm_86": 71, "sm_87": 74, "sm_88": 90, "sm_89": 78,
    "sm_90": 78, "sm_90a": 80, "sm_100": 86, "sm_100a": 86, "sm_101": 86, "sm_103": 88,
    "sm_110": 90, "sm_120": 87, "sm_120a": 87, "sm_121": 88,
}




def min_ptx(arch: str) -> int | None:
    """The oldest PTX ISA version (e.g. 78 for 7.8) that supports ``arch``, if known."""
    return _MIN_PTX.get(arch)


# Changes to the preamble or to the PTX floor table change what clang emits.
_PREAMBLE_TAG = "p" + hashlib.sha256(
    (PREAMBLE + repr(sorted(_MIN_PTX.items()))).encode()).hexdigest()[:10]


def _first_error(log: str) -> str:
    """The line of a compiler log that best says why it failed (for the fallback note)."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    for ln in lines:
        if "error" in ln.lower() or "fatal" in ln.lower():
            return ln[:240]
    return (lines[0][:240] if lines else "no diagnostics")


class _ClangFailed(Exception):
    """clang or ptxas did not produce the artifact; ``log`` says why."""

    def __init__(self, reason: str, log: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.log = log


class ClangCompiler(Compiler):
    """clang's CUDA front-end and NVPTX back-end; the cubin comes from the toolkit's ptxas.

    When clang cannot compile (its CUDA support lags the toolkit, an arch it does not
    know, a ptxas that rejects its PTX...), nvcc compiles instead — silently, as seed 004
    promises. ``Artifact.info["fallback"]`` records ``"nvcc: <why>"``; ``thork info`` and
    ``kernel.compile_info.fallback`` show it. ``THORK_CLANG_FALLBACK=0`` turns it off.
    """

    name = "clang"
    # Below NVRTC (100) and nvcc (50): clang is used when asked for.
    priority = 40
    produces = ("cubin", "ptx")
    language = "cuda"
    package = "thork-backend-clang"

    # -- discovery ------------------------------------------------------------------------
    def clang(self) -> ClangInstall:
        found, why = find_clang()
        if found is None:
            raise CompileError(f"clang is not usable: {why}")
        return found

    def version(self) -> str:
        # The toolkit is part of the identity: it provides ptxas, libdevice and the
        # fallback, so upgrading either side changes the cache key.
        tk, _ = find_toolkit()
        cuda = f"cuda{tk.version}" if tk is not None else "nocuda"
        return f"{self.clang().version}+{cuda}"

    def identity(self) -> str:
        # The preamble is compiled with every kernel but is not in the source core hashes:
        # its digest (and the PTX floors) keeps a changed preamble from being
        # served stale artifacts.
        return f"{self.name}-{self.version()}-{_PREAMBLE_TAG}"

    def available(self) -> tuple[bool, str]:
        found, why = find_clang()
        if found is None:
            return False, why
        return True, ""

    def describe(self) -> str:
        """One line for ``thork info``: which clang, which toolkit, and whether clang
        itself compiles for this machine's arch or falls back to nvcc."""
        found, why = find_clang()
        if found is None:
            return f"clang: not found ({why})"
        tk, _ = find_toolkit()
        from thork_core import gpu_arch

        arch = gpu_arch(0)
        try:
            self._clang_compile(_PROBE, entry="thork_probe", kind="cubin", arch=arch)
            status = f"clang compiles for {arch} itself"
        except _ClangFailed as exc:
            status = f"{arch}: falls back to nvcc ({exc.reason})"
        toolkit = tk.describe() if tk is not None else "no CUDA toolkit (no ptxas, libdevice)"
        return f"clang: {found.path} {found.version}; {toolkit}; {status}"

    # -- compiling ------------------------------------------------------------------------
    def _toolkit(self) -> Toolkit | None:
        return find_toolkit()[0]

    def flags(self, kind: str, arch: str) -> list[str]:
        # -fno-builtin: calls to rintf, powf... must reach the preamble's wrappers (and so
        # libdevice), not LLVM's own lowering of the C library functions; on the H200's
        # Ubuntu clang 16 that lowering gave round-half-away rint (seen) and is the
        # suspected cause of pow's extra ulps there (not confirmed).
        flags = ["-x", "cuda", "--cuda-device-only", "-nocudainc", "-nocudalib",
                 f"--cuda-gpu-arch={arch}", "-O3", "-std=c++17", "-S", "-fno-builtin",
                 "-Wno-unknown-cuda-version",
                 # Contract a*b+c into FMA where the source allows it (as nvcc and NVRTC
                 # do), but only through IR flags: plain "fast" makes the backend fuse
                 # everything, libdevice's carefully ordered code included (pow lost
                 # 1 ulp on the H200). cc1 spelling: clang 16's driver refuses it for CUDA.
                 "-Xclang", "-ffp-contract=fast-honor-pragmas"]
        ptx = min_ptx(arch)
        if ptx is not None:
            flags += ["-Xclang", "-target-feature", "-Xclang", f"+ptx{ptx}"]
        return flags

    def _ptxas_flags(self, arch: str) -> list[str]:
        return [f"-arch={arch}", "-O3"]

    def compile(
        self, source: str, *, entry: str, kind: str, arch: str, options: Sequence[str] = ()
    ) -> Artifact:
        if kind not in self.produces:
            raise CompileError(f"clang produces {', '.join(self.produces)} artifacts, "
                               f"not {kind!r}")
        try:
            return self._clang_compile(source, entry=entry, kind=kind, arch=arch,
                                       options=options)
        except _ClangFailed as failed:
            return self._fallback(failed, source, entry=entry, kind=kind, arch=arch)

    def _clang_compile(
        self, source: str, *, entry: str, kind: str, arch: str, options: Sequence[str] = ()
    ) -> Artifact:
        found, why = find_clang()
        if found is None:
            raise _ClangFailed(why, "")
        tk = self._toolkit()
        libdevice = tk.libdevice if tk is not None else None
        if libdevice is None:
            raise _ClangFailed("no CUDA toolkit with libdevice (the math library) found", "")
        if kind == "cubin" and (tk is None or tk.ptxas is None):
            raise _ClangFailed("no ptxas found to turn clang's PTX into a cubin", "")
        with tempfile.TemporaryDirectory(prefix="thork-clang-") as d:
            src = os.path.join(d, f"{entry}.cu")
            ptx = os.path.join(d, f"{entry}.ptx")
            with open(src, "w") as f:
                f.write(preamble(f"{entry}.cu") + source)
            cmd = [found.path, *self.flags(kind, arch), f"--cuda-path={tk.root}",  # type: ignore[union-attr]
                   "-Xclang", "-mlink-builtin-bitcode", "-Xclang", str(libdevice),
                   *options, src, "-o", ptx]
            r = _run(cmd, d)
            log = (r.stdout + r.stderr).strip()
            if r.returncode != 0 or not os.path.exists(ptx):
                raise _ClangFailed(f"clang {found.version}: {_first_error(log)}", log)
            if kind == "ptx":
                with open(ptx, "rb") as f:
                    data = f.read()
            else:
                cubin = os.path.join(d, f"{entry}.cubin")
                assert tk is not None and tk.ptxas is not None
                r2 = _run([str(tk.ptxas), *self._ptxas_flags(arch), ptx, "-o", cubin], d)
                log2 = (r2.stdout + r2.stderr).strip()
                if r2.returncode != 0 or not os.path.exists(cubin):
                    raise _ClangFailed(
                        f"ptxas {tk.version} rejected clang {found.version}'s PTX: "
                        f"{_first_error(log2)}", log + "\n" + log2)
                log = "\n".join(x for x in (log, log2) if x)
                with open(cubin, "rb") as f:
                    data = f.read()
        return Artifact(kind=kind, data=data, entry=entry, compiler=self.identity(),
                        arch=arch, log=log, info={"clang": found.path})

    def _fallback(
        self, failed: _ClangFailed, source: str, *, entry: str, kind: str, arch: str
    ) -> Artifact:
        """nvcc instead of clang; recorded on the artifact, never printed."""
        off = not env_flag("THORK_CLANG_FALLBACK", True)
        nvcc = NvccCompiler()
        ok, why = nvcc.available()
        if off or not ok:
            extra = ("the nvcc fallback is off (THORK_CLANG_FALLBACK=0)" if off
                     else f"and there is no nvcc to fall back to ({why})")
            raise CompileError(
                f"clang failed to compile kernel {entry!r} for {arch} ({failed.reason}); "
                f"{extra}", log=failed.log, source=source)
        try:
            art = nvcc.compile(source, entry=entry, kind=kind, arch=arch)
        except CompileError as exc:
            raise CompileError(
                f"clang failed to compile kernel {entry!r} for {arch} ({failed.reason}), "
                "and so did the nvcc fallback",
                log=f"{failed.log}\n--- nvcc ---\n{exc.log or exc}", source=source) from None
        info = dict(art.info)
        info["fallback"] = f"nvcc: {failed.reason}"
        info["requested"] = "clang"
        return Artifact(kind=art.kind, data=art.data, entry=art.entry, compiler=art.compiler,
                        arch=art.arch, log=art.log, info=info)


def _run(cmd: list[str], cwd: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise _ClangFailed(f"{os.path.basename(cmd[0])} could not be run ({exc})", "") from None


# A tiny kernel for describe(): proves the whole clang → ptxas path for one arch.
_PROBE = r"""
extern "C" __attribute__((global)) void thork_probe(float* p) {
  p[threadIdx.x] = sqrtf(p[threadIdx.x]) + expf(1.0f);
}
"""
