"""thork-sanitize, tested as its author would: installed, through Thork's public API only.

Sanitizer reports go to the process's stderr (from C, not Python), and AddressSanitizer
stops the process, so the kernels with bugs run in child processes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import thork as tk
import thork_core
from thork_sanitize import asan_preload

F32 = tk.dt.float32


def child(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "THORK_TARGET": "cpu", **env}
    full.pop("THORK_COMPILER", None)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=full, timeout=600)


def test_registered_through_the_entry_point_and_never_the_default():
    reg = thork_core.plugins()
    assert reg.info["sanitize"].registered == {"compilers": ["cxx-ubsan", "cxx-asan"]}
    cpu = reg.target("cpu")
    assert reg.compiler(None, cpu).name == "host-cxx"
    assert reg.compiler("cxx-ubsan", cpu).name == "cxx-ubsan"


def test_ubsan_kernels_give_numpy_results():
    @tk.jit(target="cpu", compiler="cxx-ubsan")
    def axpy(out: tk.DevicePointer[F32], x: tk.DevicePointer[F32], y: tk.DevicePointer[F32],
             a: F32, n: tk.dt.int32):
        i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
        with tk.if_(i < n):
            out[i] = a * x[i] + y[i]

    rng = np.random.default_rng()
    n = 1237
    x, y = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
    out = np.full(n, np.nan, np.float32)
    a = np.float32(rng.uniform(-3, 3))
    axpy[(n + 255) // 256, 256](out, x, y, a, n)
    np.testing.assert_allclose(out, a * x + y, rtol=1e-6, atol=1e-6)
    info = axpy.compile_info
    assert info.compiler.startswith("cxx-ubsan") and "-fsanitize=undefined" in info.flags


def test_ubsan_reports_undefined_behaviour_and_the_kernel_goes_on():
    """``tk.abs`` of INT32_MIN negates it, which overflows (undefined in C++; Thork defines
    shifts and division, not this): UBSan reports it, and the kernel goes on."""
    r = child("""
        import numpy as np, thork as tk
        I32 = tk.dt.int32

        @tk.jit(compiler="cxx-ubsan")
        def absolute(out: tk.DevicePointer[I32], x: tk.DevicePointer[I32], n: I32):
            i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
            with tk.if_(i < n):
                out[i] = tk.abs(x[i])

        x = np.arange(-4, 4, dtype=np.int32)
        out = np.zeros(8, np.int32)
        absolute[1, 8](out, x, 8)
        assert (out == np.abs(x)).all(), out
        x[0] = np.iinfo(np.int32).min
        absolute[1, 8](out, x, 8)
        print("still running")
    """)
    assert r.returncode == 0, r.stderr
    assert "still running" in r.stdout
    assert "runtime error: negation of -2147483648" in r.stderr, r.stderr


def test_asan_is_unavailable_without_its_runtime_and_says_how():
    cpu = thork_core.plugins().target("cpu")
    with pytest.raises(thork_core.PluginError, match="LD_PRELOAD=.*libasan"):
        thork_core.plugins().compiler("cxx-asan", cpu)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="LD_PRELOAD is Linux's")
def test_asan_stops_an_out_of_bounds_write():
    preload = asan_preload()
    if preload is None:
        pytest.skip("the host compiler has no AddressSanitizer runtime")
    code = """
        import numpy as np, thork as tk
        F32 = tk.dt.float32

        @tk.jit(compiler="cxx-asan")
        def fill(out: tk.DevicePointer[F32], v: F32, n: tk.dt.int32):
            i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
            with tk.if_(i < n):
                out[i] = v

        out = np.zeros(1000, np.float32)
        fill[4, 256](out, 2.5, 1000)
        assert (out == 2.5).all()
        print("in bounds ok", flush=True)
        fill[5, 256](out, 1.0, 1100)   # 100 elements past the end
        print("not reached", flush=True)
    """
    r = child(code, LD_PRELOAD=preload, ASAN_OPTIONS="detect_leaks=0")
    assert "in bounds ok" in r.stdout, r.stderr
    assert "not reached" not in r.stdout
    assert r.returncode != 0
    assert "AddressSanitizer: heap-buffer-overflow" in r.stderr, r.stderr[-3000:]
