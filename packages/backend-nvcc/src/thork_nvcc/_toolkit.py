"""Finding a CUDA toolkit: nvcc, ptxas and libdevice, and their version.

Search order (the first hit wins):

1. ``THORK_NVCC``: an explicit path to an ``nvcc`` binary (nox sessions pin one this way);
2. ``CUDA_HOME`` then ``CUDA_PATH``: ``<root>/bin/nvcc``;
3. ``nvcc`` on ``PATH``;
4. the ``nvidia-cuda-nvcc`` wheel (``site-packages/nvidia/cu13/bin/nvcc`` for CUDA 13,
   ``nvidia/cuda_nvcc/bin/nvcc`` for the CUDA 12 ``-cu12`` wheel);
5. ``/usr/local/cuda/bin/nvcc``, where installers put it without adding it to ``PATH``.

The clang plugin uses the same toolkit for ``ptxas``, libdevice and its nvcc fallback.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Toolkit", "find_toolkit", "wheel_nvcc", "toolkit_from_nvcc"]

_DEFAULT_ROOT = Path("/usr/local/cuda")


@dataclass(frozen=True)
class Toolkit:
    """One CUDA toolkit. ``origin`` says how it was found (``THORK_NVCC``, ``CUDA_HOME``,
    ``PATH``, ``wheel``, ``default``); ``version`` is nvcc's full release (``13.0.88``)."""

    root: Path
    nvcc: Path
    version: str
    origin: str

    @property
    def ptxas(self) -> Path | None:
        """The ptxas next to nvcc (None if this toolkit has none)."""
        p = self.nvcc.parent / "ptxas"
        return p if p.is_file() else None

    @property
    def libdevice(self) -> Path | None:
        """``nvvm/libdevice/libdevice*.bc``: the CUDA math library as LLVM bitcode."""
        folder = self.root / "nvvm" / "libdevice"
        found = sorted(folder.glob("libdevice*.bc")) if folder.is_dir() else []
        return found[-1] if found else None

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    def describe(self) -> str:
        return f"CUDA {self.version} at {self.root} (from {self.origin})"


def _candidates() -> list[tuple[Path, str]]:
    """Where nvcc may be, in search order, with the origin to report."""
    out: list[tuple[Path, str]] = []
    explicit = os.environ.get("THORK_NVCC")
    if explicit:
        # An explicit choice is final: never silently replaced by another toolkit.
        resolved = shutil.which(explicit) or explicit
        return [(Path(resolved), "THORK_NVCC")]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root:
            out.append((Path(root) / "bin" / "nvcc", var))
    on_path = shutil.which("nvcc")
    if on_path:
        out.append((Path(on_path), "PATH"))
    wheel = wheel_nvcc()
    if wheel is not None:
        out.append((wheel, "wheel"))
    out.append((_DEFAULT_ROOT / "bin" / "nvcc", "default"))
    return out


def wheel_nvcc() -> Path | None:
    """The nvcc of an installed ``nvidia-cuda-nvcc`` (or ``-cu12``) wheel, if any."""
    for base in sys.path:
        if not base:
            continue
        for rel in ("nvidia/cu13/bin/nvcc", "nvidia/cuda_nvcc/bin/nvcc"):
            p = Path(base) / rel
            if p.is_file():
                return p
    return None


@functools.lru_cache(maxsize=16)
def _nvcc_version(nvcc: str) -> str:
    """``13.0.88`` from ``nvcc --version`` (``V13.0.88`` on its last lines)."""
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    m = re.search(r"\bV(\d+\.\d+\.\d+)", out.stdout)
    if out.returncode != 0 or not m:
        m2 = re.search(r"release (\d+\.\d+)", out.stdout)
        if out.returncode != 0 or not m2:
            raise OSError(f"{nvcc} --version did not report a version "
                          f"(exit {out.returncode}): {(out.stdout + out.stderr).strip()[:200]}")
        return m2.group(1)
    return m.group(1)


@functools.lru_cache(maxsize=16)
def _nvcc_home(nvcc: str) -> Path:
    """The real ``bin`` folder of ``nvcc``: it may be a wrapper script or a symlink, so
    nvcc's own dry run (``_HERE_=``) says where the toolkit is; else the path's folder."""
    r = subprocess.run([nvcc, "-dryrun", "-E", "-x", "cu", os.devnull],
                       capture_output=True, text=True, timeout=60)
    m = re.search(r"^#\$ _HERE_=(.+)$", r.stdout + r.stderr, re.MULTILINE)
    if m and Path(m.group(1).strip()).is_dir():
        return Path(m.group(1).strip()).resolve()
    return Path(nvcc).resolve().parent


def toolkit_from_nvcc(nvcc: Path, origin: str) -> Toolkit:
    """Describe the toolkit around ``nvcc`` (raises OSError if it does not run)."""
    version = _nvcc_version(str(nvcc))
    home = _nvcc_home(str(nvcc))
    real = home / "nvcc" if (home / "nvcc").is_file() else nvcc.resolve()
    return Toolkit(root=home.parent, nvcc=real, version=version, origin=origin)


@functools.lru_cache(maxsize=8)
def _find(key: tuple[str | None, ...]) -> tuple[Toolkit | None, str]:
    tried = []
    for path, origin in _candidates():
        if not path.is_file():
            tried.append(f"{origin}: no {path}")
            continue
        try:
            return toolkit_from_nvcc(path, origin), ""
        except (OSError, subprocess.SubprocessError) as exc:
            tried.append(f"{origin}: {path} does not run ({exc})")
    return None, "; ".join(tried)


def find_toolkit() -> tuple[Toolkit | None, str]:
    """The CUDA toolkit to use, or None and what was tried.

    Cached per value of the environment variables that steer the search, so a test or a
    nox session that changes them gets a fresh answer.
    """
    key = tuple(os.environ.get(v) for v in ("THORK_NVCC", "CUDA_HOME", "CUDA_PATH", "PATH"))
    return _find(key + ("\0".join(sys.path),))
