"""The sanitizing compilers: the CPU target's host compiler with different flags.

Only public API: :class:`thork_cpu.HostCompiler` (the CPU target's compiler, which finds
``$CXX``/g++/clang++ and compiles the rendered C++ into a host library) and
:mod:`thork_core.plugin`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import ClassVar

from thork_cpu import HostCompiler

__all__ = ["AsanCompiler", "SanitizingCompiler", "UbsanCompiler", "asan_preload"]


class SanitizingCompiler(HostCompiler):
    """The host compiler with ``-fsanitize=`` each of :attr:`sanitizers`, debug info and
    frame pointers (reports then name the generated source's lines, which carry the
    kernel's Python lines as ``#line`` directives)."""

    sanitizers: ClassVar[tuple[str, ...]] = ()
    # Low priority: a plugin never becomes the default by priority anyway (Thork ranks
    # third-party compilers after its own unless the user opts in), and a debugging
    # compiler should not be the default even then.
    priority = -100
    package = "thork-sanitize"

    def flags(self, kind: str, arch: str) -> list[str]:
        # -O1: sanitizer reports stay readable and the kernels are not much slower.
        base = [f for f in super().flags(kind, arch) if not f.startswith("-O")]
        return [*base, "-O1", "-g", "-fno-omit-frame-pointer",
                f"-fsanitize={','.join(self.sanitizers)}"]


class UbsanCompiler(SanitizingCompiler):
    """UndefinedBehaviorSanitizer: reports each kind of undefined behaviour once per
    source location on stderr and lets the kernel go on."""

    name = "cxx-ubsan"
    sanitizers = ("undefined",)


class AsanCompiler(SanitizingCompiler):
    """AddressSanitizer (with UBSan): the first invalid access stops the process with a
    report. Available only in a process started with the ASan runtime preloaded."""

    name = "cxx-asan"
    sanitizers = ("address", "undefined")

    def available(self) -> tuple[bool, str]:
        ok, why = super().available()
        if not ok:
            return ok, why
        if not _asan_loaded():
            return False, ("AddressSanitizer's runtime must be loaded first: run Python with "
                           f"LD_PRELOAD={asan_preload() or '<path of libasan.so>'} "
                           "ASAN_OPTIONS=detect_leaks=0")
        return True, ""


def _asan_loaded() -> bool:
    """Whether the ASan runtime is mapped into this process (Linux)."""
    try:
        with open("/proc/self/maps") as f:
            return "libasan" in f.read()
    except OSError:
        return False


def asan_preload() -> str | None:
    """The ASan runtime library the host compiler links against, for ``LD_PRELOAD``."""
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        return None
    try:
        out = subprocess.run([cxx, "-print-file-name=libasan.so"], capture_output=True,
                             text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out if os.path.isabs(out) and os.path.exists(out) else None
