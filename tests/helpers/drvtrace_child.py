"""Running a test's script in a child process with ``bench/drvtrace.c`` standing in for
the CUDA driver (tests/core/test_pinned_trace.py, test_alias_trace.py): the skips when it
cannot be built, and the child's run returning the JSON its last line prints."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

__all__ = ["BENCH", "TESTS", "require_drvtrace", "run_child"]

TESTS = Path(__file__).resolve().parents[1]
BENCH = TESTS.parent / "bench"


def require_drvtrace() -> None:
    """Skip the calling test module where the stand-in cannot be built or used: no
    ``bench/drvtrace.c`` beside the tests, no C compiler, no cuda-bindings or NVRTC."""
    if not (BENCH / "drvtrace.c").exists():
        pytest.skip("bench/drvtrace.c is not beside the tests", allow_module_level=True)
    if not (shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")):
        pytest.skip("no C compiler for bench/drvtrace.c", allow_module_level=True)
    pytest.importorskip("cuda.bindings")
    pytest.importorskip("thork_nvrtc")


def run_child(folder: Path, script: str, *args: object, timeout: float = 300) -> Any:
    """Write ``script`` into ``folder`` and run it with ``args``; its exit status must
    be 0 (else the test fails with its stderr); returns the JSON of its last line."""
    path = folder / "child.py"
    path.write_text(script)
    proc = subprocess.run([sys.executable, str(path), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
