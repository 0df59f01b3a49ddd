"""Fixtures shared by core's tests: ``native``, core's native launch module (built here,
or the test skipped with the reason where no C compiler and Python headers are found)."""

from __future__ import annotations

import os
import shutil
import sysconfig
from typing import Any

import pytest


def _can_build() -> bool:
    include = sysconfig.get_paths().get("include", "")
    return bool(shutil.which("cc")) and os.path.exists(os.path.join(include, "Python.h"))


@pytest.fixture(scope="module")
def native() -> Any:
    """Core's native module. Where a compiler and headers exist (CI, the GPU machine) it
    must build; elsewhere it must say why it is unavailable, and the test is skipped."""
    from thork_core._native import native_module, native_status

    mod = native_module()
    if _can_build():  # CI and the GPU machine have a compiler and headers: it must build
        assert mod is not None, native_status()
    else:
        assert mod is None and native_status().startswith("unavailable: ")
        pytest.skip(native_status())
    return mod
