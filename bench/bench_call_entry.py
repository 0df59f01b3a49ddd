"""What the Python side of a hot call costs, without a GPU: core's native Prepared, Guard,
GuardedCall entry, Binder and LaunchCall entry over a launch function that does nothing (a
C no-op compiled here with ``cc``), against the same guard or binder called from a Python
``__call__`` (what a pipe's or a kernel[grid, block] call cost before the C entries, and
still costs where the native module is unavailable).

    python bench/bench_call_entry.py [--calls N] [--out DIR]

Prints the best of five loops of N calls (default 10**6), in microseconds per call. Run
it under each Python of interest: the entry is a vectorcall from 3.12 on, tp_call on 3.11.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from thork_core import DeviceArray, dt, guarded_call_base
from thork_core._launch import CONV_CU
from thork_core._native import native_module, native_status


def noop_launch_address(folder: str) -> tuple[int, Any]:
    """Address of ``int noop(void) { return 0; }`` built with cc (it stands in for
    cuLaunchKernel: the extra arguments are ignored by the x86-64 and AArch64 ABIs)."""
    so = os.path.join(folder, "noop.so")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-x", "c", "-", "-o", so],
                   input=b"int noop(void) { return 0; }\n", check=True)
    lib = ctypes.CDLL(so)
    return ctypes.cast(lib.noop, ctypes.c_void_p).value or 0, lib


def best_us(fn: Callable[[], None], n: int) -> float:
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e6 / n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=10**6)
    ap.add_argument("--out", help="folder for bench_call_entry.json")
    args = ap.parse_args()
    n = args.calls
    native = native_module()
    base = guarded_call_base()
    if native is None or base is None:
        print(f"native module {native_status()}: nothing to measure")
        return 1
    with tempfile.TemporaryDirectory() as folder:
        fn, lib = noop_launch_address(folder)
        launcher = native.Launcher(CONV_CU, fn, 1, "PP", print)
        launch = launcher.prepare((1, 1, 1), (1, 1, 1), 0, [0, 0])
        shape = (7, 33, 3)
        guard = launch.guard(DeviceArray, [(shape, dt.float32, 0), (shape, dt.float32, 0)],
                             [0, 1], 15, int)
        x = DeviceArray.wrap(0x1000, shape, dt.float32, device=0, stream=0)
        y = DeviceArray.wrap(0x2000, shape, dt.float32, device=0, stream=0)

        class Entry(base):  # type: ignore[misc, valid-type]
            def _miss(self, *args: Any, **kwargs: Any) -> Any:
                raise AssertionError("the guard should have launched")

        class PythonCall:
            """fkl.Pipe.__call__'s hot branch."""

            def __call__(self, *inputs: Any, out: Any = None, stream: Any = None) -> Any:
                if len(inputs) == 1:
                    g = self._hot_guard
                    if g is not None and g(inputs[0], out, stream):
                        return out
                raise AssertionError("the guard should have launched")

        entry, pycall = Entry(), PythonCall()
        entry._hot_guard = pycall._hot_guard = guard  # type: ignore[attr-defined]
        ptrs = [0x1000, 0x2000]
        # kernel[grid, block](y, x): the Binder, armed in a LaunchCall, against the
        # Python call that hands the same binder its arguments (Launch.__call__ ->
        # CudaExecutable.launch's first lines).
        binder = native.Binder(launcher, DeviceArray, 0,
                               [(dt.float32, "<f4", -1, True), (dt.float32, "<f4", -1, False)],
                               True)

        class KernelLaunch(native.LaunchCall):  # type: ignore[misc, name-defined]
            def _miss(self, *args: Any, **kwargs: Any) -> Any:
                raise AssertionError("the binder should have launched")

        class PythonLaunch:
            def __call__(self, *args: Any, stream: Any = None) -> None:
                if not binder((1, 1, 1), (1, 1, 1), 0, stream, args):
                    raise AssertionError("the binder should have launched")

        klaunch, pylaunch = KernelLaunch(), PythonLaunch()
        klaunch._arm(binder, (1, 1, 1), (1, 1, 1), 0, None)

        def run_launch() -> None:
            for _ in range(n):
                launch.run(ptrs, 0)

        def run_guard() -> None:
            for _ in range(n):
                guard(x, y, None)

        def run_entry() -> None:
            for _ in range(n):
                entry(x, out=y)

        def run_python() -> None:
            for _ in range(n):
                pycall(x, out=y)

        def run_kernel_entry() -> None:
            for _ in range(n):
                klaunch(y, x)

        def run_kernel_python() -> None:
            for _ in range(n):
                pylaunch(y, x)

        rows = [("Prepared.run (addresses only)", best_us(run_launch, n)),
                ("Guard (checks + launch)", best_us(run_guard, n)),
                ("GuardedCall entry: obj(x, out=y)", best_us(run_entry, n)),
                ("Python __call__ -> same guard", best_us(run_python, n)),
                ("LaunchCall entry: launch(y, x)", best_us(run_kernel_entry, n)),
                ("Python __call__ -> same binder", best_us(run_kernel_python, n))]
        del lib
    print(f"Python {sys.version.split()[0]}, no-op launch function, best of 5 x {n} calls")
    for name, us in rows:
        print(f"  {name:<36} {us:6.3f} us")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "bench_call_entry.json"), "w") as f:
            json.dump({"python": sys.version.split()[0], "calls": n,
                       "rows": [{"name": k, "us": v} for k, v in rows]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
