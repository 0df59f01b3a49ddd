"""Fixtures and hooks for the whole suite. Shared plain helpers (``poisoned``,
``random_array``, ``TARGETS`` …) live in the ``helpers`` package next to this file."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from helpers import LAUNCHED, TARGETS, has_plugin, importable

# Test folders of plugins that are not installed (nox sessions install subsets) are not
# collected at all; the session's summary shows what ran.
collect_ignore_glob = [
    pattern for pattern, module in (
        ("compose/*", "fkl"), ("compilers/test_nvcc*.py", "thork_nvcc"),
        ("compilers/test_clang*.py", "thork_clang"), ("lang/*", "thork"),
        ("compilers/*", "thork"),
    ) if not importable(module)
]

# Tests never write to the user's cache: one private cache per session.
os.environ.setdefault("THORK_CACHE_DIR", tempfile.mkdtemp(prefix="thork-test-cache-"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "plugin(name): needs the named thork plugin installed")
    config.addinivalue_line("markers", "gpu: needs a visible GPU")
    config.addinivalue_line(
        "markers", "run_last: runs after every other test (it checks what they recorded)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for mark in item.iter_markers("plugin"):
            for name in mark.args:
                if not has_plugin(name):
                    item.add_marker(pytest.mark.skip(reason=f"plugin {name!r} not installed"))
        if item.get_closest_marker("gpu") and "gpu" not in TARGETS:
            item.add_marker(pytest.mark.skip(reason="no GPU visible"))
    # Explicit order, not file names: tests that check what the others recorded go last.
    items.sort(key=lambda it: it.get_closest_marker("run_last") is not None)


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
