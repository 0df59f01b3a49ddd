"""Thread safety of launches: one kernel, one prepared launch and one fkl pipe hammered from
16 threads on every target, with the first call made concurrently (cold: trace, compile
and load race) and after it (warm). Every thread has its own inputs and scalar values,
and every result is checked against NumPy: a launch that read another thread's argument
would give that thread's numbers.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import thork as tk
from helpers import poisoned, run_threads

THREADS = 16
ROUNDS = 12


def _hammer(work: Callable[[int, int], None], threads: int = THREADS,
            rounds: int = ROUNDS) -> None:
    """Run ``work(thread, round)`` for every round in each of ``threads`` threads, all
    starting at once (a barrier) and switching as often as the interpreter allows;
    re-raise the first failure."""
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def run(t: int) -> None:
        try:
            start.wait()
            for r in range(rounds):
                work(t, r)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        pool = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
        for th in pool:
            th.start()
        for th in pool:
            th.join()
    finally:
        sys.setswitchinterval(old)
    if errors:
        raise errors[0]


def _axpb(c: float) -> Any:
    """A fresh kernel (its own Kernel object, and source unique to ``c``, so the first call
    traces and compiles): out[i] = x[i] * a + b + c for i < n."""

    @tk.jit
    def axpb(out: tk.DevicePointer[tk.dt.float32], x: tk.DevicePointer[tk.dt.float32],
             a: tk.dt.float32, b: tk.dt.int32, n: tk.dt.int32,
             bid: tk.Uint[tk.BlockIdx], tid: tk.Uint[tk.ThreadIdx],
             bdm: tk.Uint[tk.BlockDim]):
        i = bid * bdm + tid
        with tk.if_(i < n):
            out[i] = x[i] * a + b + c

    return axpb


def _inputs(seed: int, t: int, r: int) -> tuple[np.ndarray, float, int, int]:
    """Thread ``t``'s round ``r``: an odd-sized input, a scale and an offset of its own."""
    g = np.random.default_rng([seed, t, r])
    n = int(g.integers(300, 2000)) | 1
    return (g.standard_normal(n).astype(np.float32), float(np.float32(g.uniform(0.5, 4))),
            int(g.integers(-1000, 1000)), n)


def _expect(x: np.ndarray, a: float, b: int, c: float) -> np.ndarray:
    return (x * np.float32(a) + np.float32(b) + np.float32(c)).astype(np.float32)


@pytest.mark.parametrize("phase", ["cold", "warm"])
def test_one_kernel_from_16_threads_numpy_arrays(target, rng, phase):
    seed = int(rng.integers(2**31))
    c = float(np.float32(rng.uniform(-1, 1)))  # unique source: a real compile when cold
    kernel = _axpb(c)
    if phase == "warm":
        x, a, b, n = _inputs(seed, 99, 0)
        out = poisoned(n, np.float32)
        kernel[(n + 127) // 128, 128](out, x, a, b, n, target=target)
        np.testing.assert_allclose(out, _expect(x, a, b, c), rtol=1e-6, atol=1e-5)
    wrong = []

    def work(t: int, r: int) -> None:
        x, a, b, n = _inputs(seed, t, r)
        out = poisoned(n, np.float32)
        kernel[(n + 127) // 128, 128](out, x, a, b, n, target=target)
        if not np.allclose(out, _expect(x, a, b, c), rtol=1e-6, atol=1e-5):
            wrong.append((t, r))

    _hammer(work)
    assert wrong == []
    # One build for every thread's first call.
    assert len(kernel._exes) == 1


@pytest.mark.gpu
@pytest.mark.parametrize("phase", ["cold", "warm"])
def test_one_kernel_from_16_threads_device_arrays(rng, phase):
    from thork_core import DeviceArray, _cuda

    seed = int(rng.integers(2**31))
    c = float(np.float32(rng.uniform(-1, 1)))
    kernel = _axpb(c)
    if phase == "warm":
        x, a, b, n = _inputs(seed, 99, 0)
        out = DeviceArray.from_host(poisoned(n, np.float32))
        kernel[(n + 127) // 128, 128](out, DeviceArray.from_host(x), a, b, n)
        np.testing.assert_allclose(out.to_host(), _expect(x, a, b, c), rtol=1e-6, atol=1e-5)
    wrong = []

    def work(t: int, r: int) -> None:
        x, a, b, n = _inputs(seed, t, r)
        # Threads that never touched CUDA: the launch makes the context current itself.
        dx = DeviceArray.from_host(x)
        out = DeviceArray.from_host(poisoned(n, np.float32))
        kernel[(n + 127) // 128, 128](out, dx, a, b, n)
        _cuda.check(_cuda.driver().cuStreamSynchronize(0), "sync")
        if not np.allclose(out.to_host(), _expect(x, a, b, c), rtol=1e-6, atol=1e-5):
            wrong.append((t, r))

    _hammer(work)
    assert wrong == []


def test_one_prepared_launch_from_16_threads(target, rng):
    """A PreparedLaunch (fixed scalars, addresses per call) shared by every thread; on the
    GPU through device arrays, on the CPU through host addresses."""
    seed = int(rng.integers(2**31))
    c = float(np.float32(rng.uniform(-1, 1)))
    kernel = _axpb(c)
    n = 1537
    a, b = 1.75, -3
    exe, _ = kernel._executable(target)
    grid, block = ((n + 127) // 128, 1, 1), (128, 1, 1)
    prepared = exe.prepare(grid, block, [0, 0, a, b, n])
    wrong = []

    def work(t: int, r: int) -> None:
        x = np.random.default_rng([seed, t, r]).standard_normal(n).astype(np.float32)
        if target == "gpu":
            from thork_core import DeviceArray, _cuda

            dx, out = DeviceArray.from_host(x), DeviceArray.from_host(poisoned(n, np.float32))
            prepared([out.ptr, dx.ptr], 0)
            _cuda.check(_cuda.driver().cuStreamSynchronize(0), "sync")
            got = out.to_host()
        else:
            got = poisoned(n, np.float32)
            prepared([got.ctypes.data, x.ctypes.data], 0)
        if not np.allclose(got, _expect(x, a, b, c), rtol=1e-6, atol=1e-5):
            wrong.append((t, r))

    _hammer(work)
    assert wrong == []


@pytest.mark.plugin("compose")
@pytest.mark.parametrize("phase", ["cold", "warm"])
def test_one_fkl_pipe_from_16_threads(target, rng, phase):
    fkl = pytest.importorskip("fkl")
    seed = int(rng.integers(2**31))
    shift = float(np.float32(rng.uniform(-1, 1)))  # a new pipe (and kernel) per test

    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(1.5), fkl.Add(shift), fkl.TensorWrite(),
                       target=target)

    def ref(x: np.ndarray) -> np.ndarray:
        return x * np.float32(1.5) + np.float32(shift)

    if phase == "warm":
        x = np.random.default_rng([seed, 99]).standard_normal((17, 9, 3)).astype(np.float32)
        np.testing.assert_allclose(pipe(x), ref(x), rtol=1e-6, atol=1e-6)
    wrong = []

    def work(t: int, r: int) -> None:
        g = np.random.default_rng([seed, t, r])
        shape = (int(g.integers(5, 40)) | 1, int(g.integers(5, 40)) | 1, 3)
        x = g.standard_normal(shape).astype(np.float32)
        if target == "gpu" and r % 2:  # device arrays, out= given: fkl's hot path
            dx = fkl.DeviceBuffer.from_host(x)
            out = fkl.DeviceBuffer.from_host(poisoned(shape, np.float32))
            pipe(dx, out=out)
            got = out.to_host()
        else:
            got = pipe(x)
        if not np.allclose(got, ref(x), rtol=1e-6, atol=1e-6):
            wrong.append((t, r))

    _hammer(work)
    assert wrong == []


def test_the_python_launcher_is_thread_safe_too(monkeypatch, target, rng):
    """THORK_LAUNCHER=python: the fallback used where the C module cannot be built keeps
    per-thread argument buffers (same hammer, fresh kernel)."""
    from thork_core._launch import PyLauncher

    monkeypatch.setenv("THORK_LAUNCHER", "python")
    seed = int(rng.integers(2**31))
    c = float(np.float32(rng.uniform(-1, 1)))
    kernel = _axpb(c)
    wrong = []

    def work(t: int, r: int) -> None:
        x, a, b, n = _inputs(seed, t, r)
        out = poisoned(n, np.float32)
        kernel[(n + 127) // 128, 128](out, x, a, b, n, target=target)
        if not np.allclose(out, _expect(x, a, b, c), rtol=1e-6, atol=1e-5):
            wrong.append((t, r))

    _hammer(work, rounds=6)
    assert isinstance(kernel._executable(target)[0].launcher, PyLauncher)
    assert wrong == []


def test_run_threads_raises_what_a_thread_raised_and_names_stuck_threads():
    """The suite's thread runner (tests/helpers) must not swallow a worker's failure."""
    seen: list[int] = []
    run_threads(seen.append, 5)
    assert sorted(seen) == [0, 1, 2, 3, 4]

    def fails(i: int) -> None:
        assert i != 3, "worker 3 failed"

    with pytest.raises(AssertionError, match="worker 3 failed"):
        run_threads(fails, 6)
    release = threading.Event()
    with pytest.raises(AssertionError, match=r"threads \[1\] still running"):
        run_threads(lambda i: i == 1 and release.wait(5), 2, 0.2)
    release.set()
