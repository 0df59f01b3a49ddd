"""Where the hot ``kernel[grid, block](...)`` call's time over the C floor goes (session 17).

    python bench/diag_hot_floor.py [--rounds 9] [--calls 10000] [--counters]

Interleaved rounds, in one process, on one function (seed 000's ``matrix_add``, grid 8 x
block 128, the legacy stream), each row the median over the rounds of microseconds per
call, with its ratio to the first row:

- C loops (``bench/burst_loop.c``): ``cuLaunchKernel`` with kernelParams (the floor), with
  the parameters packed through ``extra``, with ``cuCtxGetCurrent`` before each launch,
  and with a sweep of 16 KiB .. 1 MiB of other memory between launches (and the sweep
  alone): what an interpreter's working set between two launches costs the driver.
- Python loops: a native launch with every value fixed (``Prepared.run(())``: no argument
  to read, only the call, the context check and the launch), the same without the
  context check, a C no-op called as the launch is (the CPython call floor), and
  ``launch(out, a, b)`` with DeviceArrays and with CuPy arrays.
- (session 18) The ideal launcher (``bench/ideal_launcher.c``): a C function called as the
  launch is, launching with fixed addresses (nothing read), and with CuPy arrays read as
  little as any launcher that re-checks each call can (CuPy's stream through its C
  function, per array its type, contiguity, dtype and data object through the C getters,
  the pointer re-read only for a new array or data object). The bound of the CuPy row.

``--counters`` then runs each row once more between hardware counters of this thread
(``bench/perf_counters.c``: cycles, instructions, branch misses, L1d read misses, L1i
misses; where perf_event_open is allowed), per call.

Needs a GPU, CuPy and a C compiler. Diagnostic only: no verdict is printed.
"""

from __future__ import annotations

import argparse
import ctypes
import sys
import time
from collections.abc import Callable
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--calls", type=int, default=10000)
    ap.add_argument("--counters", action="store_true")
    args = ap.parse_args()

    import cupy as cp
    from _floor import (
        _BURST_SOURCE,
        _build,
        declare_burst,
        floor_kernel,
        ideal_launcher,
        launch_burst,
    )
    from thork_core import DeviceArray, _cuda
    from thork_core._launch import CONV_CU
    from thork_core._native import native_module

    matrix_add: Any = floor_kernel()
    n = 1024
    a = cp.random.standard_normal(n, dtype=cp.float32)
    b = cp.random.standard_normal(n, dtype=cp.float32)
    out = cp.full(n, cp.nan, dtype=cp.float32)
    launch = matrix_add[n // 128, 128]
    launch(out, a, b)
    cp.cuda.runtime.deviceSynchronize()
    assert cp.array_equal(out, a + b), "CuPy launch wrote wrong values"
    da, db = DeviceArray.from_host(cp.asnumpy(a)), DeviceArray.from_host(cp.asnumpy(b))
    dout = DeviceArray(n, "float32")
    launch(dout, da, db)
    cp.cuda.runtime.deviceSynchronize()
    assert np.array_equal(dout.to_host(), cp.asnumpy(a + b)), "DeviceArray launch wrong"

    exe = next(e for e, _ in matrix_add._exes.values() if hasattr(e, "_function"))
    function = int(exe._function)
    fn = _cuda.function_address("cuLaunchKernel")
    get = _cuda.function_address("cuCtxGetCurrent")
    put = _cuda.function_address("cuCtxSetCurrent")
    ctx = int(_cuda.make_current(0))
    ptrs = (dout.ptr, da.ptr, db.ptr)
    gx, bx = n // 128, 128

    lib = declare_burst(ctypes.CDLL(str(_build(_BURST_SOURCE, shared=True))))
    buf = np.random.default_rng(0).integers(0, 255, 1 << 20, dtype=np.uint8)
    addr = buf.ctypes.data

    def checked(us: float, what: str) -> float:
        if us < 0:
            raise RuntimeError(f"{what}: driver code {-us:.0f}")
        return us

    c_rows: dict[str, Callable[[int], float]] = {
        "C cuLaunchKernel (the floor)": launch_burst(launch, ptrs),
        "C launch, params through extra": lambda k: checked(
            lib.launch_burst_extra(fn, function, gx, bx, None, *ptrs, k), "extra"),
        "C cuCtxGetCurrent + launch": lambda k: checked(
            lib.launch_burst_ctx(fn, function, gx, bx, None, *ptrs, get, k), "ctx"),
    }
    for kib in (16, 64, 256, 1024):
        c_rows[f"C launch + sweep {kib} KiB"] = (
            lambda k, nb=kib << 10: checked(lib.launch_burst_sweep(
                fn, function, gx, bx, None, *ptrs, addr, nb, k), "sweep"))
        c_rows[f"C sweep {kib} KiB alone"] = (
            lambda k, nb=kib << 10: lib.sweep_burst(addr, nb, k))

    native = native_module()
    if native is None:
        raise SystemExit("the native launch module is not available here")

    def failed(code: int, grid: Any, block: Any) -> None:
        raise RuntimeError(f"fixed launch failed: driver code {code}")

    fixed = native.Launcher(CONV_CU, fn, function, "QQQ", failed, ctx, get, put).prepare(
        (gx, 1, 1), (bx, 1, 1), 0, list(ptrs))
    fixed_bare = native.Launcher(CONV_CU, fn, function, "QQQ", failed, 0, 0, 0).prepare(
        (gx, 1, 1), (bx, 1, 1), 0, list(ptrs))
    noop = native.noop
    empty: tuple[()] = ()
    # (session 18) the least a launcher callable from Python does: bench/ideal_launcher.c
    ideal = ideal_launcher(launch, (out, a, b), ptrs)
    ideal_fixed, ideal_arrays = ideal.fixed, ideal.arrays
    out.fill(cp.nan)
    ideal_arrays(out, a, b)
    cp.cuda.runtime.deviceSynchronize()
    assert cp.array_equal(out, a + b), "the ideal launcher wrote wrong values"
    py_rows: dict[str, Callable[[], Any]] = {
        "Py fixed launch (Prepared.run(()))": lambda: fixed.run(empty),
        "Py fixed launch, no context check": lambda: fixed_bare.run(empty),
        "Py noop(a, b, c) (CPython call floor)": lambda: noop(dout, da, db),
        "Py launch(out, a, b) DeviceArrays": lambda: launch(dout, da, db),
        "Py launch(out, a, b) CuPy arrays": lambda: launch(out, a, b),
        "Py ideal launcher, nothing read": lambda: ideal_fixed(dout, da, db),
        "Py ideal launcher, CuPy arrays": lambda: ideal_arrays(out, a, b),
    }
    dout_host = dout.to_host()
    got: dict[str, list[float]] = {k: [] for k in [*c_rows, *py_rows]}
    sync = cp.cuda.runtime.deviceSynchronize
    for _ in range(args.rounds):
        for name, burst in c_rows.items():
            burst(300)
            sync()
            got[name].append(burst(args.calls))
            sync()
        for name, call in py_rows.items():
            for _ in range(300):
                call()
            sync()
            t0 = time.perf_counter()
            for _ in range(args.calls):
                call()
            got[name].append((time.perf_counter() - t0) / args.calls * 1e6)
            sync()
    assert np.array_equal(dout.to_host(), dout_host), "a diag launch wrote wrong values"
    assert cp.array_equal(out, a + b), "a diag launch wrote wrong values"
    floor = median(got["C cuLaunchKernel (the floor)"])
    print(f"{'row':48s} {'median us':>10s} {'x floor':>8s} {'min':>8s} {'max':>8s}")
    for name, ts in got.items():
        print(f"{name:48s} {median(ts):10.3f} {median(ts) / floor:8.3f} {min(ts):8.3f} "
              f"{max(ts):8.3f}")
    if args.counters:
        counters(c_rows, py_rows, args.calls, sync)


def counters(c_rows: dict[str, Callable[[int], float]], py_rows: dict[str, Callable[[], Any]],
             calls: int, sync: Callable[[], Any]) -> None:
    """Each row once more between this thread's hardware counters; per call."""
    from _floor import _build

    pc = ctypes.CDLL(str(_build(Path(__file__).resolve().with_name("perf_counters.c"),
                                shared=True)))
    mask = pc.pc_open()
    if mask < 0:
        print(f"counters: perf_event_open failed (errno {-mask})")
        return
    out = (ctypes.c_ulonglong * 5)()
    names = ("cycles", "instr", "br-miss", "L1d-miss", "L1i-miss")
    print(f"counters opened: {[n for i, n in enumerate(names) if mask >> i & 1]}")
    print(f"{'row':48s} " + " ".join(f"{n:>9s}" for n in names) + f" {'IPC':>6s}")
    rows: dict[str, Callable[[], Any]] = {
        name: (lambda b=burst: b(calls)) for name, burst in c_rows.items()}
    for name, call in py_rows.items():
        def loop(c: Callable[[], Any] = call) -> None:
            for _ in range(calls):
                c()
        rows[name] = loop
    for name, run in rows.items():
        run()
        sync()
        pc.pc_start()
        run()
        pc.pc_stop(out)
        sync()
        per = [v / calls if v != 2**64 - 1 else float("nan") for v in out]
        ipc = per[1] / per[0] if per[0] else float("nan")
        print(f"{name:48s} " + " ".join(f"{v:9.1f}" for v in per) + f" {ipc:6.2f}")


if __name__ == "__main__":
    main()
