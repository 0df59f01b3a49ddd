"""THORK_CPU_SANITIZE (docs/debug-mode.md): the CPU target builds kernels with GCC's or
Clang's sanitizers; an out-of-bounds write in a kernel built WITHOUT debug mode is then
reported by AddressSanitizer. The sanitized kernel runs in a child process (ASan's runtime
must be preloaded into the interpreter), so the report cannot take this process down."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import TARGETS

pytestmark = pytest.mark.skipif("cpu" not in TARGETS, reason="needs the CPU target")

def _runtime(cxx: str, name: str) -> str | None:
    r = subprocess.run([cxx, f"-print-file-name={name}"], capture_output=True, text=True)
    path = r.stdout.strip()
    return path if r.returncode == 0 and os.path.isabs(path) and os.path.exists(path) else None


_CHILD_HEAP = r"""
import numpy as np
import thork as tk

@tk.jit(target="cpu")
def overrun(out: tk.DevicePointer[tk.dt.int32], n: tk.dt.int32,
            tid: tk.Uint[tk.ThreadIdx]):
    with tk.if_(tid == 0):
        out[n] = 7

out = np.zeros(%(size)d, np.int32)
overrun[1, 32](out, %(index)d)
print("DONE")
"""


@pytest.mark.parametrize("index, reported", [(16383, False), (16384 + 64, True)])
def test_asan_heap_overflow_in_a_child(index: int, reported: bool) -> None:
    from thork_cpu._compiler import _find_cxx

    cxx = _find_cxx()
    assert cxx is not None
    asan = _runtime(cxx, "libasan.so")
    if asan is None:
        pytest.skip(f"{cxx} has no AddressSanitizer runtime")
    env = {**os.environ, "THORK_CPU_SANITIZE": "address,undefined", "LD_PRELOAD": asan,
           "ASAN_OPTIONS": "detect_leaks=0:exitcode=23"}
    code = _CHILD_HEAP % {"size": 16384, "index": index}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)
    if reported:
        assert r.returncode == 23, (r.returncode, r.stderr[-3000:])
        assert "ERROR: AddressSanitizer: heap-buffer-overflow" in r.stderr
        assert "WRITE of size 4" in r.stderr
        assert "DONE" not in r.stdout
    else:
        assert r.returncode == 0 and "DONE" in r.stdout, r.stderr[-3000:]


def test_sanitize_changes_the_flags_and_rejects_unknown(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    from thork_core import CompileError
    from thork_cpu._compiler import HostCompiler

    monkeypatch.delenv("THORK_CPU_SANITIZE", raising=False)
    plain = HostCompiler().flags("hostlib", "x")
    assert not any(f.startswith("-fsanitize") for f in plain)
    monkeypatch.setenv("THORK_CPU_SANITIZE", "undefined, address")
    flags = HostCompiler().flags("hostlib", "x")
    assert "-fsanitize=address,undefined" in flags and flags != plain
    monkeypatch.setenv("THORK_CPU_SANITIZE", "adress")
    with pytest.raises(CompileError, match="adress"):
        HostCompiler().flags("hostlib", "x")
