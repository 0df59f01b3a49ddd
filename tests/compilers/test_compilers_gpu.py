"""On a GPU: the three compilers' cubins give the same results for every suite kernel, and
the nvcc host library (``gpu-hostlib`` target) launches through ctypes correctly."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.compiler_suite import SUITE, kernel_for, require_compiler
from thork_core import plugins

pytestmark = pytest.mark.gpu


def _run(name, compiler, rng_seed, target="gpu"):
    case = SUITE[name]
    args = case.make(np.random.default_rng(rng_seed))
    before = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    k = kernel_for(name, compiler)
    k[case.grid, case.block](*args, target=target)
    case.check(args, before)  # each compiler is right on its own
    info = k.compile_info
    return [a for a in args if isinstance(a, np.ndarray)], info


@pytest.mark.parametrize("name", list(SUITE))
def test_three_compilers_agree_on_the_gpu(name):
    require_compiler("nvrtc")
    usable = [c.name for c in plugins().compilers()
              if c.name in ("nvcc", "clang") and c.available()[0]]
    if not usable:
        pytest.skip("neither nvcc nor clang is usable here: nothing to compare NVRTC with")
    seed = 1234
    results = {}
    for compiler in ("nvrtc", *usable):
        arrays, info = _run(name, compiler, seed)
        assert info is not None and info.kind == "cubin"
        results[compiler] = (arrays, info)
    ref = results["nvrtc"][0]
    for compiler in usable:
        for a, b in zip(ref, results[compiler][0], strict=True):
            if SUITE[name].exact:
                assert a.view(np.uint8).tobytes() == b.view(np.uint8).tobytes(), compiler
            else:
                # Math may differ in the last ulps (FMA contraction, libdevice build).
                np.testing.assert_allclose(b, a, rtol=1e-6 if a.dtype == np.float32 else 1e-14,
                                           atol=1e-6 if a.dtype == np.float32 else 1e-14)


@pytest.mark.parametrize("name", ["saxpy", "all_dtypes", "control", "grid3d"])
def test_hostlib_target_matches_cuLaunchKernel(name):
    require_compiler("nvcc")
    gpu, _ = _run(name, "nvrtc", 99, "gpu")
    lib, info = _run(name, None, 99, "gpu-hostlib")
    assert info.kind == "hostlib" and info.compiler.startswith("nvcc-")
    assert info.attributes.get("registers", 0) > 0
    for a, b in zip(gpu, lib, strict=True):
        assert a.view(np.uint8).tobytes() == b.view(np.uint8).tobytes()


def test_hostlib_with_device_arrays_and_a_stream():
    require_compiler("nvcc")
    cp = pytest.importorskip("cupy")
    n = 4096
    x = cp.arange(n, dtype=cp.float32)
    y = cp.ones(n, dtype=cp.float32)
    out = cp.full(n, cp.nan, dtype=cp.float32)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        kernel_for("saxpy")[(n + 127) // 128, 128](out, x, y, 2.0, n, target="gpu-hostlib",
                                                   stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(cp.asnumpy(out), 2.0 * np.arange(n, dtype=np.float32) + 1)
