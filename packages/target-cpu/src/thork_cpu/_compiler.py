"""The host C++ compiler (g++ or clang++) producing a shared library for the CPU target."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

from thork_core import Artifact, CompileError, Compiler

__all__ = ["HostCompiler"]


def _find_cxx() -> str | None:
    """``$CXX`` resolved on ``PATH``, else g++, clang++ or c++ (re-resolved when either
    changes: switching ``CXX`` in a process switches compilers)."""
    return _find_cxx_in(os.environ.get("CXX"), os.environ.get("PATH", os.defpath))


@functools.cache
def _find_cxx_in(env: str | None, path: str) -> str | None:
    if env:
        return _which(env) or (env if os.path.exists(env) else None)
    for name in ("g++", "clang++", "c++"):
        found = _which(name)
        if found:
            return found
    return None


def _which(name: str) -> str | None:
    """``shutil.which`` without importing shutil (and bz2, lzma...) on the hit path."""
    if os.sep in name:
        return name if os.access(name, os.X_OK) and not os.path.isdir(name) else None
    for d in os.environ.get("PATH", os.defpath).split(os.pathsep):
        p = os.path.join(d or ".", name)
        if os.access(p, os.X_OK) and not os.path.isdir(p):
            return p
    return None


@functools.cache
def _version(cxx: str) -> str:
    import subprocess

    out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30)
    return out.stdout.splitlines()[0].strip() if out.stdout else "unknown"


@functools.cache
def _content_hash(path: str) -> str:
    """SHA-256 of the file at ``path`` (memoized on disk with the key parts, under the
    file's modification time and size: see ``key_fingerprint``)."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@functools.cache
def _openmp_works(cxx: str) -> bool:
    """Whether ``-fopenmp`` links here (libgomp or libomp present)."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "t.cpp")
        with open(src, "w") as f:
            f.write('extern "C" int f(){int s=0;\n#pragma omp parallel for reduction(+:s)\n'
                    "for(int i=0;i<4;++i)s+=i;return s;}\n")
        r = subprocess.run([cxx, "-fopenmp", "-shared", "-fPIC", src, "-o",
                            os.path.join(d, "t.so")], capture_output=True, timeout=60)
        return r.returncode == 0


#: Sanitizers ``THORK_CPU_SANITIZE`` may name (GCC's and Clang's ``-fsanitize=`` values).
SANITIZERS = ("address", "undefined", "thread", "leak")


def sanitize_request() -> list[str]:
    """The sanitizers ``THORK_CPU_SANITIZE`` asks for (``address,undefined``...), in a
    canonical order; an unknown name raises :class:`~thork_core.CompileError`."""
    raw = os.environ.get("THORK_CPU_SANITIZE", "")
    names = {n.strip().lower() for n in raw.split(",") if n.strip()}
    unknown = sorted(names - set(SANITIZERS))
    if unknown:
        raise CompileError(f"THORK_CPU_SANITIZE={raw!r}: unknown sanitizer(s) "
                           f"{', '.join(unknown)}; expected a comma-separated subset of "
                           f"{', '.join(SANITIZERS)}")
    return [n for n in SANITIZERS if n in names]


class HostCompiler(Compiler):
    """``$CXX``, else g++, else clang++: C++17, ``-O2``, OpenMP when it links."""

    name = "host-cxx"
    priority = 100
    produces = ("hostlib",)
    language = "c++"
    package = "thork-target-cpu"

    def _cxx(self) -> str:
        cxx = _find_cxx()
        if cxx is None:
            raise CompileError("no host C++ compiler found (set CXX, or install g++ or clang++)")
        return cxx

    def version(self) -> str:
        return _version(self._cxx())

    def identity(self) -> str:
        """Name, version, the executable's resolved path and a hash of its content: two
        wrappers with the same ``--version`` (one adding ``-ffast-math``) differ here, so
        they never share cache entries."""
        cxx = self._cxx()
        real = os.path.realpath(cxx)
        return f"{self.name}-{_version(cxx)} {real} sha256:{_content_hash(real)[:16]}"

    def key_fingerprint(self) -> list[object] | None:
        cxx = _find_cxx()
        if cxx is None:
            return None
        real = os.path.realpath(cxx)
        st = os.stat(real)
        return [os.environ.get("CXX", ""), cxx, real, st.st_mtime_ns, st.st_size,
                os.environ.get("THORK_CPU_SANITIZE", "")]

    def available(self) -> tuple[bool, str]:
        cxx = _find_cxx()
        if cxx is None:
            return False, "no host C++ compiler (set CXX, or install g++ or clang++)"
        return True, ""

    def flags(self, kind: str, arch: str) -> list[str]:
        # No FMA contraction: CPU results equal NumPy's for + - * / (docs/language-math.md).
        flags = ["-O2", "-std=c++17", "-shared", "-fPIC", "-fno-strict-aliasing", "-w",
                 "-ffp-contract=off"]
        if _openmp_works(self._cxx()):
            flags.append("-fopenmp")
        sanitizers = sanitize_request()
        if sanitizers:  # part of the flags, hence of every cache key
            flags[0] = "-O1"
            flags += [f"-fsanitize={','.join(sanitizers)}", "-fno-omit-frame-pointer", "-g"]
            if "undefined" in sanitizers:
                flags.append("-fno-sanitize-recover=undefined")  # report as an error
        return flags

    def compile(
        self, source: str, *, entry: str, kind: str, arch: str, options: Sequence[str] = ()
    ) -> Artifact:
        if kind != "hostlib":
            raise CompileError(f"the host compiler produces 'hostlib' artifacts, not {kind!r}")
        import subprocess
        import tempfile

        cxx = self._cxx()
        with tempfile.TemporaryDirectory(prefix="thork-cpu-") as d:
            src = os.path.join(d, f"{entry}.cpp")
            out = os.path.join(d, f"{entry}.so")
            with open(src, "w") as f:
                f.write(source)
            cmd = [cxx, *self.flags(kind, arch), *options, src, "-o", out]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if r.returncode != 0:
                raise CompileError(f"{os.path.basename(cxx)} failed to compile kernel {entry!r}",
                                   log=r.stderr, source=source)
            with open(out, "rb") as f:
                data = f.read()
        return Artifact(kind="hostlib", data=data, entry=entry, compiler=self.identity(),
                        arch=arch, log=r.stderr, info={"openmp": "-fopenmp" in cmd})


def host_arch() -> str:
    u = os.uname()  # not platform.*: importing platform costs milliseconds per process
    return f"{u.sysname.lower()}-{u.machine}"
