"""Fused vs unfused: the same 6-op chain as one fkl kernel and as six separate kernels
(six fkl pipes, each reading and writing the whole image). Verifies both against NumPy and
prints the times (CUDA events on the GPU; wall clock on the CPU target)."""

from __future__ import annotations

import statistics
import time

import fkl
import numpy as np
from thork_core import plugins

target = plugins().target(None).name
rng = np.random.default_rng()
h, w = (1080, 1920) if target == "gpu" else (541, 961)
host = rng.standard_normal((h, w, 3)).astype(np.float32)
ops = [fkl.Mul(1.5), fkl.Add(0.25), fkl.Mul(2.0), fkl.Sub(0.5), fkl.Max(-1.0), fkl.Min(4.0)]
fused = fkl.compose(fkl.TensorRead(), *ops, fkl.TensorWrite(), target=target)
single = [fkl.compose(fkl.TensorRead(), op, fkl.TensorWrite(), target=target) for op in ops]

if target == "gpu":
    x = fkl.DeviceBuffer.from_host(host)
    a, b = fkl.DeviceBuffer(host.shape, "float32"), fkl.DeviceBuffer(host.shape, "float32")
else:
    x, a, b = host, np.empty_like(host), np.empty_like(host)


def run_fused() -> None:
    fused(x, out=a)


def run_unfused() -> None:
    src, dst = x, b
    for p in single:
        p(src, out=dst)
        src, dst = dst, (a if dst is b else b)


def result(arr):
    return arr.to_host() if target == "gpu" else arr


ref = np.minimum(np.maximum((host * np.float32(1.5) + np.float32(0.25)) * 2 - np.float32(0.5),
                            -1), 4)
run_fused()
np.testing.assert_allclose(result(a), ref, rtol=1e-5, atol=1e-5)
run_unfused()
np.testing.assert_allclose(result(a if len(single) % 2 == 0 else b), ref, rtol=1e-5, atol=1e-5)


def timed(fn) -> float:
    fn()
    if target == "gpu":
        from thork_core import _cuda

        drv = _cuda.driver()
        e0, e1 = (_cuda.check(drv.cuEventCreate(0), "event") for _ in range(2))
        ts = []
        for _ in range(50):
            drv.cuEventRecord(e0, 0)
            fn()
            drv.cuEventRecord(e1, 0)
            drv.cuEventSynchronize(e1)
            ts.append(_cuda.check(drv.cuEventElapsedTime(e0, e1), "elapsed") * 1e3)
        return statistics.median(ts)
    ts = []
    for _ in range(5):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(ts)


tf, tu = timed(run_fused), timed(run_unfused)
print(f"{target}, {h}x{w}x3 float32: fused {tf:.0f} us, unfused (6 kernels) {tu:.0f} us, "
      f"speedup {tu / tf:.1f}x")
