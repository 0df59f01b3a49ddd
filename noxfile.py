"""nox sessions: the test suite over plugin combinations, and the benchmarks.

`nox -s tests` runs every combination; `nox -s "tests(plugins='core+trace')"` one of them.
Each session installs only the packages of its combination; the tests adapt to what is
installed (tests needing a missing plugin or target are skipped with the reason).
"""

from __future__ import annotations

import os
import sys

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True

PACKAGES = {
    "core": "packages/thork-core",
    "trace": "packages/thork-trace",
    "nvrtc": "packages/backend-nvrtc",
    "cpu": "packages/target-cpu",
    "nvcc": "packages/backend-nvcc",
    "clang": "packages/backend-clang",
    "compose": "packages/fkl-compose",
    "torch": "packages/interop-torch",  # the plugin; torch itself only in the torch session
}
COMBINATIONS = {
    "core+trace": ["core", "trace"],
    "core+trace+nvrtc": ["core", "trace", "nvrtc"],
    "core+trace+cpu": ["core", "trace", "cpu"],
    "all": list(PACKAGES),
}
TEST_DEPS = ["pytest>=8", "hypothesis>=6", "ml_dtypes>=0.4", "opencv-python-headless>=4.8"]


@nox.session
@nox.parametrize("plugins", list(COMBINATIONS))
def tests(session: nox.Session, plugins: str) -> None:
    """The test suite with only the given plugins installed."""
    session.install(*TEST_DEPS)
    session.install(*[PACKAGES[p] for p in COMBINATIONS[plugins]])
    session.run("python", "-m", "pytest", "-q", *session.posargs,
                success_codes=[0, 5])


@nox.session
def torch(session: nox.Session) -> None:
    """The torch interop tests (tests/interop) with torch installed. Not part of CI's
    main run: `pip install torch` took 5 min on the 2-core dev machine (a 554 MB wheel;
    CPU torch.compile adds ~1 min), too much for CI's 20-minute budget; there the torch
    tests skip (torch not importable)."""
    session.install(*TEST_DEPS)
    session.install(*[PACKAGES[p] for p in PACKAGES if p != "torch"],
                    f"{PACKAGES['torch']}[torch]")
    session.run("python", "-m", "pytest", "-q", "tests/interop", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """The core benchmarks (GPU numbers need a GPU; CPU-only numbers otherwise)."""
    session.install(*[PACKAGES[p] for p in PACKAGES])
    session.run("python", "bench/bench_core.py", *session.posargs)


# The compiler-toolchain matrix lives beside this file (nox's console script does not put
# this folder on sys.path).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from noxfile_toolchains import *  # noqa: E402,F401,F403
