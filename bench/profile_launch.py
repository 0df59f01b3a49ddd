"""Where does a hot launch spend its time? Times variants and profiles the launch path.

Usage: python bench/profile_launch.py   (needs a GPU and CuPy)
"""

from __future__ import annotations

import cProfile
import io
import pstats
import time

import cupy as cp
import numpy as np
import thork as tk
from thork_core import _cuda


@tk.jit
def add(out: tk.DevicePointer[tk.dt.float32], a: tk.DevicePointer[tk.dt.float32],
        b: tk.DevicePointer[tk.dt.float32], bid: tk.Uint[tk.BlockIdx],
        tid: tk.Uint[tk.ThreadIdx], bdm: tk.Uint[tk.BlockDim]):
    i = bid * bdm + tid
    out[i] = a[i] + b[i]


class Cai:
    """A minimal CAI object whose dict is built once."""

    def __init__(self, arr):
        self.__cuda_array_interface__ = dict(arr.__cuda_array_interface__)
        self.__cuda_array_interface__.pop("stream", None)
        self.keep = arr


def per_call(fn, n=20000):
    for _ in range(1000):
        fn()
    cp.cuda.runtime.deviceSynchronize()
    ts = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        ts.append((time.perf_counter() - t0) / n * 1e6)
        cp.cuda.runtime.deviceSynchronize()
    return sorted(ts)[2]


n = 1024
a, b = cp.ones(n, cp.float32), cp.ones(n, cp.float32)
out = cp.zeros(n, cp.float32)
launch = add[n // 128, 128]
launch(out, a, b)
exe = add._exes[(None, None)][0]
drv = _cuda.driver()
print("cai:", a.__cuda_array_interface__)
print("raw cuLaunchKernel prepacked:", per_call(lambda: drv.cuLaunchKernel(
    exe._function, 8, 1, 1, 128, 1, 1, 0, 0, exe._argv_addr, 0)))
print("exe._call:", per_call(lambda: exe._call((8, 1, 1), (128, 1, 1), 0, 0)))
print("CAI dict build (cupy):", per_call(lambda: a.__cuda_array_interface__))
ca, cb, co = Cai(a), Cai(b), Cai(out)
print("launch static CAI objects:", per_call(lambda: launch(co, ca, cb)))
print("launch cupy arrays:", per_call(lambda: launch(out, a, b)))
pr = cProfile.Profile()
pr.enable()
for _ in range(3000):
    launch(out, a, b)
pr.disable()
s = io.StringIO()
pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(14)
print(s.getvalue()[:4000])

# Round trip phases
A = np.random.randn(1024, 1024).astype(np.float32)
B = np.random.randn(1024, 1024).astype(np.float32)
C = np.empty_like(A)
for _ in range(3):
    add[(A.size // 128,), (128,)](C, A, B)
pr = cProfile.Profile()
pr.enable()
for _ in range(10):
    add[(A.size // 128,), (128,)](C, A, B)
pr.disable()
s = io.StringIO()
pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(12)
print(s.getvalue()[:3000])
