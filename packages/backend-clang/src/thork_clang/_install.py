"""Finding clang: ``THORK_CLANG``, else ``clang++-N``/``clang-N`` on PATH (newest N first),
else plain ``clang++``/``clang``."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

__all__ = ["ClangInstall", "find_clang", "clang_version"]

# Debian ships clang-N side by side; search a generous range, newest first.
_VERSIONS = range(40, 9, -1)


@dataclass(frozen=True)
class ClangInstall:
    """One clang driver: its path, full version (``16.0.6``) and how it was found."""

    path: str
    version: str
    origin: str

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])


@functools.lru_cache(maxsize=32)
def clang_version(path: str) -> str:
    """``16.0.6`` from ``clang --version`` (raises OSError when it is not clang)."""
    r = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    m = re.search(r"clang version (\d+\.\d+(?:\.\d+)?)", r.stdout)
    if r.returncode != 0 or not m:
        raise OSError(f"{path} --version did not report a clang version "
                      f"(exit {r.returncode}): {(r.stdout + r.stderr).strip()[:200]}")
    return m.group(1)


@functools.lru_cache(maxsize=8)
def _find(explicit: str | None, path_env: str | None) -> tuple[ClangInstall | None, str]:
    if explicit:
        # An explicit choice is never replaced by another clang.
        path = shutil.which(explicit) or (explicit if os.path.isfile(explicit) else None)
        if path is None:
            return None, f"THORK_CLANG={explicit!r} is not an executable on PATH or a file"
        try:
            return ClangInstall(path, clang_version(path), "THORK_CLANG"), ""
        except (OSError, subprocess.SubprocessError) as exc:
            return None, f"THORK_CLANG={explicit!r} does not run as clang ({exc})"
    names = [f"{stem}-{n}" for n in _VERSIONS for stem in ("clang++", "clang")]
    names += ["clang++", "clang"]
    problems = []
    for name in names:
        path = shutil.which(name)
        if path is None:
            continue
        try:
            return ClangInstall(path, clang_version(path), "PATH"), ""
        except (OSError, subprocess.SubprocessError) as exc:
            problems.append(f"{name}: {exc}")
    hint = "no clang++-N or clang on PATH (apt-get install clang-16, or set THORK_CLANG)"
    return None, "; ".join([hint, *problems])


def find_clang() -> tuple[ClangInstall | None, str]:
    """The clang to use, or None and why none was found (cached per environment)."""
    return _find(os.environ.get("THORK_CLANG") or None, os.environ.get("PATH"))
