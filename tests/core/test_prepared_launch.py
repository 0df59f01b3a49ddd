"""Core's PreparedLaunch: fixed geometry and scalars, pointers per call, on every target."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import poisoned, random_array

tk = pytest.importorskip("thork")


@tk.jit
def axpb(
    out: tk.DevicePointer[tk.dt.float32],
    x: tk.DevicePointer[tk.dt.float32],
    a: tk.dt.float32,
    b: tk.dt.float32,
    n: tk.dt.int32,
    bid: tk.Uint[tk.BlockIdx],
    tid: tk.Uint[tk.ThreadIdx],
    bdm: tk.Uint[tk.BlockDim],
):
    i = bid * bdm + tid
    with tk.if_(i < n):
        out[i] = x[i] * a + b


def _arrays(target: str, rng: np.random.Generator, n: int):
    """Input and poisoned output on the target, with their addresses and host readers."""
    x = random_array(rng, n, np.float32)
    outs = [poisoned(n, np.float32) for _ in range(2)]
    if target == "cpu":
        return x, outs, x.ctypes.data, [o.ctypes.data for o in outs], lambda o: o
    from thork_core import DeviceArray

    dx = DeviceArray.from_host(x)
    douts = [DeviceArray.from_host(o) for o in outs]
    return dx, douts, dx.ptr, [o.ptr for o in douts], lambda o: o.to_host()


def test_two_prepared_launches_keep_their_own_scalars(target, rng):
    n = 1000 + int(rng.integers(1, 97))  # odd sizes: the tail block is partial
    exe = axpb._executable(target)[0]
    x, outs, px, pouts, host = _arrays(target, rng, n)
    block = (128, 1, 1)
    grid = (-(-n // 128), 1, 1)
    first = exe.prepare(grid, block, [0, 0, 2.0, 0.5, n])
    second = exe.prepare(grid, block, [0, 0, -3.0, 1.25, n])
    # Interleaved: each call must use its own a and b, never the other's.
    second([pouts[1], px])
    first([pouts[0], px])
    if target == "gpu":
        from thork_core import _cuda

        _cuda.check(_cuda.driver().cuCtxSynchronize(), "sync")
    xs = host(x)
    f32 = np.float32
    np.testing.assert_allclose(host(outs[0]), xs * f32(2.0) + f32(0.5), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(host(outs[1]), xs * f32(-3.0) + f32(1.25), rtol=1e-6,
                               atol=1e-6)


def test_prepared_launch_checks_the_value_count(target):
    exe = axpb._executable(target)[0]
    with pytest.raises(ValueError, match="5 values expected"):
        exe.prepare((1, 1, 1), (32, 1, 1), [0, 0, 1.0])


@pytest.mark.gpu
@pytest.mark.parametrize("launcher", ["native", "python"])
def test_every_gpu_launcher_runs_the_prepared_launch(launcher, rng, monkeypatch):
    """The native module (default) and the Python launcher (ctypes): same results, and
    the native one really is the native module where it can be built."""
    from thork_core import DeviceArray, _cuda, gpu_arch
    from thork_core._native import native_module

    monkeypatch.setenv("THORK_LAUNCHER", launcher)
    n = 3000 + int(rng.integers(1, 97))
    gpu_exe = axpb._executable("gpu")[0]
    exe = type(gpu_exe)(axpb.artifact(gpu_arch(0)), gpu_exe.kernel)  # this launcher's
    x = random_array(rng, n, np.float32)
    dx, dout = DeviceArray.from_host(x), DeviceArray.from_host(poisoned(n, np.float32))
    prepared = exe.prepare((-(-n // 128), 1, 1), (128, 1, 1), [0, 0, 0.75, -2.0, n])
    assert prepared.native is (launcher == "native" and native_module() is not None)
    assert prepared.call == prepared.prepared.run
    prepared.call([dout.ptr, dx.ptr], 0)
    _cuda.check(_cuda.driver().cuCtxSynchronize(), "sync")
    f32 = np.float32
    np.testing.assert_allclose(dout.to_host(), x * f32(0.75) + f32(-2.0), rtol=1e-6,
                               atol=1e-6)


@pytest.mark.gpu
def test_a_failed_native_launch_raises_launch_error(rng):
    """A driver error inside the C call surfaces as core's LaunchError naming the kernel
    and the geometry (here: a block larger than the device allows)."""
    from thork_core import DeviceArray, LaunchError

    exe = axpb._executable("gpu")[0]
    prepared = exe.prepare((1, 1, 1), (2048, 1, 1), [0, 0, 1.0, 0.0, 16])
    dx, dout = DeviceArray((16,), "float32"), DeviceArray((16,), "float32")
    with pytest.raises(LaunchError, match="axpb"):
        prepared.call([dout.ptr, dx.ptr], 0)


@pytest.mark.gpu
def test_a_kernel_with_more_pointers_than_the_c_guard_takes(rng, tmp_path):
    """34 pointer parameters (the C guard takes 32, the C launcher 1024 parameters): the
    prepared launch still runs in the native launcher and gives the right sums."""
    import importlib.util

    from thork_core import DeviceArray, _cuda

    k = 33
    params = ", ".join(f"a{i}: tk.DevicePointer[tk.dt.float32]" for i in range(k))
    total = " + ".join(f"a{i}[t]" for i in range(k))
    path = tmp_path / "many_pointers.py"
    path.write_text("import thork as tk\n\n\n@tk.jit\n"
                    f"def many(out: tk.DevicePointer[tk.dt.float32], {params}, "
                    f"t: tk.Uint[tk.ThreadIdx]):\n    out[t] = {total}\n")
    spec = importlib.util.spec_from_file_location("many_pointers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    exe = module.many._executable("gpu")[0]
    n = 61
    xs = [random_array(rng, n, np.float32) for _ in range(k)]
    dxs = [DeviceArray.from_host(x) for x in xs]
    out = DeviceArray.from_host(poisoned(n, np.float32))
    prepared = exe.prepare((1, 1, 1), (n, 1, 1), [0] * (k + 1))
    from thork_core._native import native_module

    assert prepared.native is (native_module() is not None)
    prepared.call([out.ptr, *(d.ptr for d in dxs)], 0)
    _cuda.check(_cuda.driver().cuCtxSynchronize(), "sync")
    np.testing.assert_allclose(out.to_host(), np.sum(xs, axis=0, dtype=np.float32),
                               rtol=1e-5, atol=1e-5)
