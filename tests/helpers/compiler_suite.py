"""The compiler test-kernel suite: kernels covering every dtype, half and bfloat16, float32
and float64 math, control flow and 3-D grids, each with inputs, a NumPy reference and its
launch geometry (``SUITE``), and the helpers that pin a kernel to a compiler or skip where
one is unusable. ``tests/compilers/test_compilers_suite.py`` compiles and runs every entry;
other compiler tests, the toolchain nox sessions and ``bench/bench_compilers.py`` use
``SUITE`` from here. ``THORK_TEST_COMPILERS`` (comma separated) restricts the compilers,
so a toolchain session tests exactly the toolchain it installed.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import thork as tk
from thork_core import dt, plugins

from helpers import poisoned, random_array

__all__ = ["ARCHS", "CUDA_COMPILERS", "SUITE", "Case", "kernel_for", "require_compiler",
           "wanted_compilers"]

ARCHS = ("sm_75", "sm_80", "sm_90")
CUDA_COMPILERS = ("nvrtc", "nvcc", "clang")

F32 = tk.DevicePointer[tk.dt.float32]
F64 = tk.DevicePointer[tk.dt.float64]
BID, TID, BDM = tk.Uint[tk.BlockIdx], tk.Uint[tk.ThreadIdx], tk.Uint[tk.BlockDim]


# -- the kernels (plain functions: each test decorates them with the compiler it wants) --
def saxpy(out: F32, x: F32, y: F32, a: tk.dt.float32, n: tk.dt.int32,
          bid: BID, tid: TID, bdm: BDM):
    i = bid * bdm + tid
    with tk.if_(i < n):
        out[i] = a * x[i] + y[i]


ALL = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
       "float16", "bfloat16", "float32", "float64")


def _all_dtypes_fn() -> Callable[..., None]:
    """One kernel converting every dtype through float32 and back (x * 0.5)."""
    ns: dict[str, Any] = {"tk": tk}
    params = ", ".join(f"o_{d}: tk.DevicePointer[tk.dt.{d}], i_{d}: tk.DevicePointer[tk.dt.{d}]"
                       for d in ALL)
    body = "\n".join(
        f"    o_{d}[i] = tk.cast(tk.cast(i_{d}[i], tk.dt.float32) * 0.5, tk.dt.{d})"
        for d in ALL)
    code = (f"def all_dtypes({params}, n: tk.dt.int32, bid: tk.Uint[tk.BlockIdx], "
            f"tid: tk.Uint[tk.ThreadIdx], bdm: tk.Uint[tk.BlockDim]):\n"
            f"    i = bid * bdm + tid\n"
            f"    with tk.if_(i >= n):\n        tk.return_()\n{body}\n")
    exec(compile(code, __file__, "exec"), ns)  # a generated signature over all 13 dtypes
    return ns["all_dtypes"]


all_dtypes = _all_dtypes_fn()


def half_math(oh: tk.DevicePointer[tk.dt.float16], ob: tk.DevicePointer[tk.dt.bfloat16],
              h: tk.DevicePointer[tk.dt.float16], b: tk.DevicePointer[tk.dt.bfloat16],
              n: tk.dt.int32, bid: BID, tid: TID, bdm: BDM):
    i = bid * bdm + tid
    with tk.if_(i < n):
        oh[i] = h[i] * h[i] + h[i]
        ob[i] = tk.max(b[i], b[i] * 2.0) - b[i]


def math32(o: F32, x: F32, y: F32, n: tk.dt.int32, bid: BID, tid: TID, bdm: BDM):
    i = bid * bdm + tid
    with tk.if_(i < n):
        a = tk.abs(x[i]) + 0.5
        b = y[i]
        o[i * 8 + 0] = tk.sqrt(a) + tk.rsqrt(a)
        o[i * 8 + 1] = tk.exp(b) + tk.log(a) + tk.exp2(b) + tk.log2(a) + tk.log10(a)
        o[i * 8 + 2] = tk.sin(b) + tk.cos(b) + tk.tanh(b) + tk.atan2(b, a)
        o[i * 8 + 3] = tk.pow(a, b) + tk.fma(a, b, 1.0) + tk.hypot(a, b)
        o[i * 8 + 4] = tk.floor(b) + tk.ceil(b) + tk.round(b) + tk.trunc(b) + tk.rint(b)
        o[i * 8 + 5] = tk.erf(b) + tk.expm1(b) + tk.log1p(a) + tk.cbrt(b)
        o[i * 8 + 6] = tk.min(a, b) + tk.max(a, b) + tk.copysign(a, b) + tk.fmod(b, a)
        o[i * 8 + 7] = tk.sinh(b) + tk.cosh(b) + tk.atan(b) + tk.asin(b * 0.25)


def math64(o: F64, x: F64, n: tk.dt.int32, bid: BID, tid: TID, bdm: BDM):
    i = bid * bdm + tid
    with tk.if_(i < n):
        v = x[i]
        a = tk.abs(v) + 0.5
        o[i * 4 + 0] = tk.sqrt(a) + tk.exp(v) + tk.log(a)
        o[i * 4 + 1] = tk.sin(v) + tk.cos(v) + tk.tan(v * 0.25)
        o[i * 4 + 2] = tk.pow(a, v) + tk.fma(a, v, 1.0) + tk.acos(v * 0.25)
        o[i * 4 + 3] = tk.where(tk.isnan(v), 0.0, tk.floor(v) + tk.erf(v))


def control(o: tk.DevicePointer[tk.dt.int32], x: tk.DevicePointer[tk.dt.int32],
            n: tk.dt.int32, bid: BID, tid: TID, bdm: BDM):
    i = bid * bdm + tid
    with tk.if_(i >= n):
        tk.return_()
    v = x[i]
    with tk.if_(v < 0):
        o[i] = -v
    with tk.else_():
        with tk.if_(v % 3 == 0):
            o[i] = 3
            tk.return_()
        o[i] = v * 2


def grid3d(o: tk.DevicePointer[tk.dt.uint32], bid: tk.Uint3[tk.BlockIdx],
           tid: tk.Uint3[tk.ThreadIdx], bdm: tk.Uint3[tk.BlockDim],
           gdm: tk.Uint3[tk.GridDim]):
    x = bid.x * bdm.x + tid.x
    y = bid.y * bdm.y + tid.y
    z = bid.z * bdm.z + tid.z
    o[(z * gdm.y * bdm.y + y) * gdm.x * bdm.x + x] = x + 100 * y + 10000 * z


# -- how each kernel is run and checked ---------------------------------------------------
@dataclass
class Case:
    """A suite kernel with inputs, a NumPy reference and the launch geometry.

    ``make(rng)`` returns the argument list; ``check(args, before)`` asserts the outputs.
    ``exact`` says whether every CUDA compiler must give bit-identical results (math
    functions may differ in the last ulp between libdevice builds and FMA contraction).
    """

    fn: Callable[..., None]
    make: Callable[[np.random.Generator], list[Any]]
    check: Callable[[list[Any], list[Any]], None]
    grid: Any
    block: Any
    exact: bool = True

    @property
    def name(self) -> str:
        return self.fn.__name__


N = 1000


def _saxpy_make(rng):
    x, y = (rng.standard_normal(N).astype(np.float32) for _ in range(2))
    return [poisoned(N, np.float32), x, y, 1.5, N]


def _saxpy_check(a, _):
    # GPU compilers contract a*x + y into one FMA (CUDA's default): within one rounding of
    # the product of the NumPy result.
    ax = np.float32(1.5) * a[1]
    bound = np.float32(2.0**-23) * (np.abs(ax) + np.abs(a[2]))
    assert np.all(np.abs(a[0] - (ax + a[2])) <= bound)


def _host(name):
    return getattr(dt, name).numpy


def _dtypes_make(rng):
    args = []
    for d in ALL:
        if d == "bfloat16":
            src = rng.standard_normal(N).astype(np.float32).astype(_host(d))
            out = np.full(N, np.nan, np.float32).astype(_host(d))
        else:
            src, out = random_array(rng, N, _host(d)), poisoned(N, _host(d))
        args += [out, src]
    return args + [N]


def _dtypes_check(a, _):
    for k, d in enumerate(ALL):
        out, src = a[2 * k], a[2 * k + 1]
        ref = (src.astype(np.float32) * np.float32(0.5)).astype(_host(d))
        assert out.view(np.uint8).tobytes() == ref.view(np.uint8).tobytes(), d


def _half_make(rng):
    h = rng.standard_normal(N).astype(np.float16)
    b = rng.standard_normal(N).astype(np.float32).astype(_host("bfloat16"))
    return [poisoned(N, np.float16), np.zeros(N, _host("bfloat16")), h, b, N]


def _half_check(a, _):
    oh, ob, h, b = a[0], a[1], a[2], a[3]
    h32 = h.astype(np.float32)
    ref_h = ((h32 * h32).astype(np.float16).astype(np.float32) + h32).astype(np.float16)
    np.testing.assert_array_equal(oh, ref_h)
    b32 = b.astype(np.float32)
    twice = (b32 * 2).astype(_host("bfloat16")).astype(np.float32)
    ref_b = (np.maximum(b32, twice) - b32).astype(_host("bfloat16"))
    np.testing.assert_array_equal(ob.astype(np.float32), ref_b.astype(np.float32))


def _math32_make(rng):
    x = rng.standard_normal(N).astype(np.float32)
    y = rng.uniform(-3, 3, N).astype(np.float32)
    return [poisoned(N * 8, np.float32), x, y, N]


def _math32_check(args, _):
    o, x, y = (np.asarray(v, np.float64) for v in args[:3])
    a, b = np.abs(x) + 0.5, y
    ref = np.stack([
        np.sqrt(a) + 1 / np.sqrt(a),
        np.exp(b) + np.log(a) + np.exp2(b) + np.log2(a) + np.log10(a),
        np.sin(b) + np.cos(b) + np.tanh(b) + np.arctan2(b, a),
        a ** b + (a * b + 1) + np.hypot(a, b),
        np.floor(b) + np.ceil(b) + np.where(b >= 0, np.floor(b + 0.5), np.ceil(b - 0.5))
        + np.trunc(b) + np.rint(b),
        _erf(b) + np.expm1(b) + np.log1p(a) + np.cbrt(b),
        np.minimum(a, b) + np.maximum(a, b) + np.copysign(a, b) + np.fmod(b, a),
        np.sinh(b) + np.cosh(b) + np.arctan(b) + np.arcsin(b * 0.25),
    ], axis=1).ravel()
    np.testing.assert_allclose(o, ref, rtol=2e-5, atol=2e-5)


def _erf(v):
    import math

    return np.vectorize(math.erf)(v)


def _math64_make(rng):
    x = rng.uniform(-3, 3, N)
    x[::97] = np.nan
    return [poisoned(N * 4, np.float64), x, N]


def _math64_check(args, _):
    o, v = args[0], args[1]
    a = np.abs(v) + 0.5
    ref = np.stack([
        np.sqrt(a) + np.exp(v) + np.log(a),
        np.sin(v) + np.cos(v) + np.tan(v * 0.25),
        a ** v + (a * v + 1) + np.arccos(v * 0.25),
        np.where(np.isnan(v), 0.0, np.floor(v) + _erf(v)),
    ], axis=1).ravel()
    np.testing.assert_allclose(o, ref, rtol=1e-12, atol=1e-12)


def _control_make(rng):
    return [poisoned(N, np.int32), rng.integers(-50, 50, N).astype(np.int32), N - 7]


def _control_check(a, _):
    o, x, n = a[0], a[1], a[2]
    ref = np.where(x < 0, -x, np.where(x % 3 == 0, 3, x * 2)).astype(np.int32)
    np.testing.assert_array_equal(o[:n], ref[:n])
    assert (o[n:] == np.iinfo(np.int32).max).all(), "threads past n must not write"


def _grid_make(rng):
    return [poisoned((2 * 3, 3 * 2, 4 * 2), np.uint32)]


def _grid_check(a, _):
    z, y, x = np.meshgrid(np.arange(6), np.arange(6), np.arange(8), indexing="ij")
    np.testing.assert_array_equal(a[0], (x + 100 * y + 10000 * z).astype(np.uint32))


SUITE: dict[str, Case] = {c.name: c for c in (
    Case(saxpy, _saxpy_make, _saxpy_check, (N + 127) // 128, 128),
    Case(all_dtypes, _dtypes_make, _dtypes_check, (N + 255) // 256, 256),
    Case(half_math, _half_make, _half_check, (N + 127) // 128, 128),
    Case(math32, _math32_make, _math32_check, (N + 127) // 128, 128, exact=False),
    Case(math64, _math64_make, _math64_check, (N + 127) // 128, 128, exact=False),
    Case(control, _control_make, _control_check, (N + 63) // 64, 64),
    Case(grid3d, _grid_make, _grid_check, (4, 3, 2), (2, 2, 3)),
)}


def kernel_for(name: str, compiler: str | None = None) -> tk.Kernel:
    """A fresh ``tk.jit`` kernel of suite entry ``name`` pinned to ``compiler``."""
    return tk.jit(SUITE[name].fn, compiler=compiler)


def wanted_compilers() -> list[str]:
    """CUDA compilers under test: ``THORK_TEST_COMPILERS`` or all three."""
    env = os.environ.get("THORK_TEST_COMPILERS")
    return [c for c in env.split(",") if c] if env else list(CUDA_COMPILERS)


def require_compiler(name: str) -> None:
    """Skip (with the reason) when ``name`` is not installed or not usable here."""
    for c in plugins().compilers():
        if c.name == name:
            ok, why = c.available()
            if not ok:
                pytest.skip(f"compiler {name} is not usable here: {why}")
            return
    pytest.skip(f"compiler {name} is not installed")
