"""nox sessions: the compiler toolchain matrix (compiler plugin × toolchain version).

Imported by ``noxfile.py`` (``from noxfile_toolchains import *``). Each session installs
core, the tracer, the CPU target and ONE compiler plugin with ONE toolchain, then runs the
compiler tests restricted to that compiler (``THORK_TEST_COMPILERS``): the whole
test-kernel suite compiled to cubin for sm_75, sm_80 and sm_90, and run on the CPU
target. A session whose toolchain is missing here is skipped with the reason; the
toolchain actually loaded is checked, so a wrong one fails instead of passing.

    nox -s toolchains_ci                      # what CI runs: NVRTC 13, nvcc, one clang
    nox -s "toolchain_clang(version='19')"    # one cell
    nox -k toolchain                          # the whole matrix

See docs/toolchains.md.
"""

from __future__ import annotations

import os
import shutil

import nox

from noxfile_wheelhouse import install

__all__ = ["toolchain_nvrtc", "toolchain_nvcc", "toolchain_clang", "toolchains_ci"]

_BASE = ["thork-core", "thork-trace", "thork-target-cpu"]
_TEST_DEPS = ["pytest>=8", "ml_dtypes>=0.4", "numpy"]
_COMMON_TESTS = [
    "tests/compilers/test_compilers_suite.py", "tests/compilers/test_compilers_selection.py",
    "tests/compilers/test_compilers_cache.py", "tests/compilers/test_compilers_errors.py",
]
#: Debian 12 ships clang 13, 14, 15, 16 and 19 (apt-get install clang-N).
CLANG_VERSIONS = ["14", "15", "16", "19"]
#: NVRTC per CUDA major: the NVRTC wheel, and the cuda-bindings line that loads it.
_NVRTC = {
    "12": ["nvidia-cuda-nvrtc-cu12>=12.8,<13", "cuda-bindings>=12.8,<13"],
    "13": ["nvidia-cuda-nvrtc>=13.0,<14", "cuda-bindings>=13.0,<14"],
}
_NVCC_WHEEL = "thork-backend-nvcc[wheel]"


def _base(session: nox.Session) -> None:
    install(session, *_TEST_DEPS, *_BASE)


def _pytest(session: nox.Session, compiler: str, extra: list[str], env: dict[str, str]) -> None:
    """The compiler tests for ``compiler`` only; posargs replace the file list."""
    files = session.posargs or [*_COMMON_TESTS, *extra]
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", *files,
                env={"THORK_TEST_COMPILERS": compiler, **env})


def _check(session: nox.Session, code: str, env: dict[str, str] | None = None) -> str:
    """Run a Python check in the session; return what it printed."""
    out = session.run("python", "-c", code, env=env or {}, silent=True)
    text = (out or "").strip() if isinstance(out, str) else ""
    session.log(text)
    return text


@nox.session(requires=["wheels"])
@nox.parametrize("cuda", list(_NVRTC))
def toolchain_nvrtc(session: nox.Session, cuda: str) -> None:
    """NVRTC from the CUDA ``cuda`` wheels (nvidia-cuda-nvrtc[-cu12] + cuda-bindings)."""
    _base(session)
    session.install(*_NVRTC[cuda])
    # --no-deps: the plugin's own pin names the CUDA 13 wheel; this session picks the line.
    install(session, "--no-deps", "thork-backend-nvrtc")
    version = _check(session, (
        "from thork_nvrtc import NvrtcCompiler as C; c = C(); ok, why = c.available();\n"
        "print(c.version() if ok else 'UNAVAILABLE ' + why)"))
    if version.startswith("UNAVAILABLE"):
        session.skip(f"NVRTC {cuda} cannot be loaded here: {version}")
    if not version.startswith(f"{cuda}."):
        session.error(f"expected NVRTC {cuda}.x from the wheels, loaded {version}")
    _pytest(session, "nvrtc", [], {})


def _system_nvcc() -> str | None:
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if root and os.path.isfile(os.path.join(root, "bin", "nvcc")):
            return os.path.join(root, "bin", "nvcc")
    found = shutil.which("nvcc")
    if found:
        return found
    default = "/usr/local/cuda/bin/nvcc"
    return default if os.path.isfile(default) else None


def _wheel_nvcc(session: nox.Session) -> str:
    """Install the nvcc wheels; return the path of the nvcc they put in the venv."""
    install(session, _NVCC_WHEEL)
    path = _check(session, "import thork_nvcc; print(thork_nvcc.wheel_nvcc() or '')")
    if not path:
        session.error("pip installed the nvidia-cuda-nvcc wheel but no nvcc was found in it")
    return path


@nox.session(requires=["wheels"])
@nox.parametrize("source", ["system", "wheel"])
def toolchain_nvcc(session: nox.Session, source: str) -> None:
    """nvcc from the system CUDA toolkit, or from the nvidia-cuda-nvcc wheel."""
    _base(session)
    if source == "system":
        nvcc = _system_nvcc()
        if nvcc is None:
            session.skip("no system nvcc (CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda)")
        install(session, "thork-backend-nvcc")
    else:
        nvcc = _wheel_nvcc(session)
    env = {"THORK_NVCC": nvcc}  # pinned: the session tests exactly this toolkit
    _check(session, "from thork_nvcc import NvccCompiler as C; print(C().describe())", env)
    _pytest(session, "nvcc", ["tests/compilers/test_nvcc.py"], env)


@nox.session(requires=["wheels"])
@nox.parametrize("version", CLANG_VERSIONS)
def toolchain_clang(session: nox.Session, version: str) -> None:
    """clang-N from Debian (apt), with ptxas and libdevice from the nvcc wheels (so no
    system CUDA is needed); nvcc from the same wheels is the fallback."""
    clang = shutil.which(f"clang++-{version}")
    if clang is None:
        session.skip(f"clang++-{version} is not installed (apt-get install clang-{version})")
    _base(session)
    nvcc = _wheel_nvcc(session)
    install(session, "thork-backend-clang")
    env = {"THORK_CLANG": clang, "THORK_NVCC": nvcc}
    text = _check(session, "from thork_clang import ClangCompiler as C; print(C().describe())",
                  env)
    if f" {version}." not in text:
        session.error(f"expected clang {version}, got: {text}")
    _pytest(session, "clang", ["tests/compilers/test_clang_fallback.py"], env)


@nox.session
def toolchains_ci(session: nox.Session) -> None:
    """The CI subset: NVRTC 13, nvcc (wheel) and clang 16, one after the other."""
    session.notify("toolchain_nvrtc(cuda='13')")
    session.notify("toolchain_nvcc(source='wheel')")
    session.notify("toolchain_clang(version='16')")
