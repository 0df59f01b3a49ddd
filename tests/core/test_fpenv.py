"""A host library linked with -ffast-math (GCC's crtfastmath.o) sets flush-to-zero and
denormals-are-zero when it is loaded; Thork's library loads (``load_library``: the CPU
target, gpu-hostlib) restore the mode and warn, so loading a kernel never changes the
process's arithmetic. Each case runs in a child process: a failure must not leave this
test process flushing subnormals."""

from __future__ import annotations

import json
import shutil
import textwrap

import pytest
from helpers import run_python

CC = shutil.which("cc") or shutil.which("gcc")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler to build the libraries")

CHILD = textwrap.dedent('''
    import ctypes, json, subprocess, sys, tempfile, warnings
    import numpy as np
    from pathlib import Path
    from thork_core._fpenv import FloatingPointModeWarning, fp_mode, loading

    cc, guarded = sys.argv[1], sys.argv[2] == "1"
    work = Path(tempfile.mkdtemp())
    out = {}
    for name, flags in (("plain", []), ("fast", ["-ffast-math"])):
        src = work / f"{name}.c"
        src.write_text("float thork_half(float x) { return x * 0.5f; }\\n")
        so = work / f"lib{name}.so"
        subprocess.run([cc, "-O2", "-shared", "-fPIC", *flags, "-o", str(so), str(src)],
                       check=True)
        before = fp_mode()
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            if guarded:
                with loading(f"the test library {so.name}"):
                    lib = ctypes.CDLL(str(so))
            else:
                lib = ctypes.CDLL(str(so))
        lib.thork_half.restype = ctypes.c_float
        lib.thork_half.argtypes = [ctypes.c_float]
        tiny = np.float32(3e-39)  # subnormal float32
        out[name] = {
            "before": before, "after": fp_mode(),
            "numpy_subnormal": float(np.float32(1e-38) * np.float32(0.25)),
            "warnings": [str(w.message) for w in seen
                         if issubclass(w.category, FloatingPointModeWarning)],
            "kernel": float(lib.thork_half(float(tiny))),
        }
    print(json.dumps(out))
''')


def _child(guarded: bool) -> dict:
    out = run_python(CHILD, CC or "cc", "1" if guarded else "0")
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def unguarded() -> dict:
    got = _child(False)
    if got["fast"]["after"] == got["fast"]["before"]:
        pytest.skip("this C compiler does not link crtfastmath.o into shared libraries")
    return got


def test_a_fast_math_library_flushes_subnormals_when_loaded_plainly(unguarded):
    # The hazard itself (the reason for the guard): after a plain load NumPy's subnormal
    # result is 0 in the loading thread.
    fast = unguarded["fast"]
    assert fast["after"][:2] == [True, True] and fast["before"][:2] == [False, False]
    assert fast["numpy_subnormal"] == 0.0
    assert unguarded["plain"]["after"] == unguarded["plain"]["before"]


def test_loading_restores_the_mode_and_names_the_library(unguarded):
    got = _child(True)
    fast, plain = got["fast"], got["plain"]
    assert fast["after"] == fast["before"] == plain["before"]
    assert fast["numpy_subnormal"] == pytest.approx(2.5e-39, rel=1e-6)  # not flushed
    assert fast["kernel"] == pytest.approx(1.5e-39, rel=1e-6)  # the library still works
    assert len(fast["warnings"]) == 1
    msg = fast["warnings"][0]
    assert "libfast.so" in msg and "flush-to-zero False -> True" in msg
    assert "-ffast-math" in msg and "restored" in msg
    assert plain["warnings"] == []  # an ordinary library: no warning


def test_cpu_target_kernel_built_with_fast_math_leaves_numpy_alone(tmp_path, unguarded):
    """Through Thork's own load path: a CXX wrapper adding -ffast-math builds the CPU
    target's library; after the launch, subnormal arithmetic in the process still works."""
    pytest.importorskip("thork_cpu")
    script = textwrap.dedent('''
        import os, sys, warnings
        import numpy as np
        import thork as tk
        from thork_core._fpenv import FloatingPointModeWarning, fp_mode
        from thork_cpu._compiler import _find_cxx_in

        real = _find_cxx_in(None, os.environ.get("PATH", os.defpath))
        w = os.path.join(sys.argv[1], "cxx")
        with open(w, "w") as f:
            f.write(f'#!/bin/sh\\nexec {real} -ffast-math "$@"\\n')
        os.chmod(w, 0o755)
        os.environ["CXX"] = w
        os.environ["THORK_CACHE_DIR"] = os.path.join(sys.argv[1], "cache")

        @tk.jit
        def halve(out: tk.DevicePointer[tk.dt.float32], a: tk.DevicePointer[tk.dt.float32],
                  tid: tk.Uint[tk.ThreadIdx]):
            out[tid] = a[tid] / 2.0

        a = np.random.default_rng().standard_normal(37).astype(np.float32)
        out = np.full(37, np.nan, np.float32)
        before = fp_mode()
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            halve[1, 37](out, a, target="cpu")
        assert np.array_equal(out, a / np.float32(2)), "wrong values"
        assert fp_mode() == before, (before, fp_mode())
        assert float(np.float32(1e-38) * np.float32(0.25)) != 0.0, "subnormals flushed"
        print("warned", sum(issubclass(x.category, FloatingPointModeWarning) for x in seen))
    ''')
    assert run_python(script, str(tmp_path), timeout=300).strip().splitlines()[-1] == \
        "warned 1"
