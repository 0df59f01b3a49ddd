"""What every nox session that installs Thork shares: the distributions in this checkout,
the wheelhouse they are built into, and installing from it.

Imported by ``noxfile.py`` and ``noxfile_toolchains.py``; defines no session.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import nox

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["ROOT", "WHEELHOUSE", "DISTS", "project", "install"]

ROOT = Path(__file__).resolve().parent
WHEELHOUSE = ROOT / "wheelhouse"


def project(folder: Path) -> dict[str, Any]:
    """The ``[project]`` table of ``folder``'s pyproject.toml."""
    with open(folder / "pyproject.toml", "rb") as f:
        return dict(tomllib.load(f)["project"])


#: distribution name -> folder, for every package under packages/.
DISTS = {
    project(p.parent)["name"]: p.parent
    for p in sorted((ROOT / "packages").glob("*/pyproject.toml"))
}


def install(session: nox.Session, *requirements: str) -> None:
    """Install from the wheelhouse (Thork's distributions) and PyPI (everything else).
    Every build carries the same version number, so uv is told not to serve Thork's
    distributions from its cache."""
    args = ["--find-links", str(WHEELHOUSE)]
    if session.venv_backend == "uv":
        args += [arg for d in [*DISTS, "thork"] for arg in ("--refresh-package", d)]
    session.install(*args, *requirements)
