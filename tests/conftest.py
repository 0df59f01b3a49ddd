"""Shared fixtures: the targets to run on, fresh random inputs, poisoned outputs, and a
record of every kernel the suite launched (compiled to cubin at the end of the run)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


# Test files of plugins that are not installed (nox sessions install subsets) are not
# collected at all; the session's summary shows what ran.
collect_ignore_glob = [
    pattern for pattern, module in (
        ("test_fkl_*.py", "fkl"), ("test_nvcc*.py", "thork_nvcc"),
        ("test_clang*.py", "thork_clang"), ("test_lang_*.py", "thork"),
        ("test_compilers_*.py", "thork"),
    ) if not _importable(module)
]

# Tests never write to the user's cache: one private cache per session.
os.environ.setdefault("THORK_CACHE_DIR", tempfile.mkdtemp(prefix="thork-test-cache-"))


def _installed_targets() -> list[str]:
    try:
        from thork_core import plugins
    except ImportError:
        return []
    out = []
    for t in plugins().targets():
        ok, _ = t.available()
        if ok:
            out.append(t.name)
    return out


def _compilers() -> list[str]:
    from thork_core import plugins

    return [c.name for c in plugins().compilers() if c.language == "cuda" and c.available()[0]]


def _has_plugin(name: str) -> bool:
    from thork_core import plugins

    return name in plugins().info


# The targets every numeric test runs on: the GPU and the CPU by default (others, such as
# nvcc's gpu-hostlib, have their own tests); THORK_TEST_TARGETS=a,b overrides.
TARGETS = [t for t in _installed_targets() if t in ("gpu", "cpu")] \
    if os.environ.get("THORK_TEST_TARGETS") is None else [
    t for t in os.environ["THORK_TEST_TARGETS"].split(",") if t]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "plugin(name): needs the named thork plugin installed")
    config.addinivalue_line("markers", "gpu: needs a visible GPU")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for mark in item.iter_markers("plugin"):
            for name in mark.args:
                if not _has_plugin(name):
                    item.add_marker(pytest.mark.skip(reason=f"plugin {name!r} not installed"))
        if item.get_closest_marker("gpu") and "gpu" not in TARGETS:
            item.add_marker(pytest.mark.skip(reason="no GPU visible"))


def pytest_report_header(config: pytest.Config) -> str:
    try:
        from thork_core import plugins

        names = ", ".join(f"{k} {v.version}" for k, v in plugins().info.items())
    except ImportError:
        names = "thork-core not installed"
    return f"thork plugins: {names}; targets: {', '.join(TARGETS) or 'none'}"


@pytest.fixture(params=TARGETS or [pytest.param("none", marks=pytest.mark.skip(
    reason="no target installed"))])
def target(request: pytest.FixtureRequest) -> str:
    """Each available target in turn ("cpu", "gpu")."""
    return request.param


@pytest.fixture
def rng() -> np.random.Generator:
    """A fresh generator per test; the seed is in the test's output on failure."""
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"rng seed: {seed}")
    return np.random.default_rng(seed)


def poisoned(shape: Any, dtype: Any) -> np.ndarray:
    """An output array full of a value no correct kernel writes (NaN, or the max int)."""
    d = np.dtype(dtype)
    if d.kind == "f" or d.name == "bfloat16":
        return np.full(shape, np.nan, dtype=d)
    if d.kind == "b":
        return np.ones(shape, dtype=d)
    return np.full(shape, np.iinfo(d).max, dtype=d)


def random_array(rng: np.random.Generator, shape: Any, dtype: Any) -> np.ndarray:
    """Random values that fit ``dtype`` (integers over a range, floats normal)."""
    d = np.dtype(dtype)
    if d.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if d.kind in "iu":
        info = np.iinfo(d)
        lo, hi = max(int(info.min), -1000), min(int(info.max), 1000)
        return rng.integers(lo, hi, size=shape, endpoint=True).astype(d)
    return rng.standard_normal(size=shape).astype(d)


def compiles_for_gpu(kernel: Any, archs: tuple[str, ...] = ("sm_75", "sm_90")) -> None:
    """Assert ``kernel`` builds to cubin for each arch with NVRTC (no GPU needed).

    Sessions without the NVRTC plugin (nox's core+trace+cpu) have no CUDA compiler: there
    the check does not apply, and ``test_zz_cubin`` covers it where NVRTC is installed.
    """
    if not _has_plugin("nvrtc"):
        return
    for arch in archs:
        art = kernel.artifact(arch, compiler="nvrtc")
        assert art.kind == "cubin" and art.data[:4] == b"\x7fELF", (kernel, arch)


# -- every kernel launched by the suite, for the closing cubin compile test ---------------
LAUNCHED: dict[str, Any] = {}


@pytest.fixture(autouse=True, scope="session")
def _record_kernels() -> Iterator[None]:
    try:
        from thork import _kernel
    except ImportError:
        yield
        return
    original = _kernel.Kernel._executable

    def recording(self: Any, *args: Any, **kwargs: Any) -> Any:
        LAUNCHED.setdefault(f"{self.name}@{id(self)}", self)
        return original(self, *args, **kwargs)

    _kernel.Kernel._executable = recording  # type: ignore[method-assign]
    yield
    _kernel.Kernel._executable = original  # type: ignore[method-assign]
