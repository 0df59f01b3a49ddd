"""Debug mode's cost (docs/debug-mode.md): the same kernels built plain and with
``debug=True`` (a bounds check on every access, the error record read after each launch),
timed per launch on every available target.

Rows: a memory-bound axpy (2 loads, 1 store per element) and a 5-point stencil through a
shared-memory tile (9 checked accesses per element, a barrier). Each launch is followed by
a synchronization for both builds (a debug launch synchronizes to read its record), so
the numbers compare like with like. Usage: python bench/bench_debug.py [--out DIR] [--n N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import thork as tk

F32 = tk.DevicePointer[tk.dt.float32]
Bid, Tid, Bdm = tk.Uint[tk.BlockIdx], tk.Uint[tk.ThreadIdx], tk.Uint[tk.BlockDim]


def kernels(debug: bool) -> tuple[tk.Kernel, tk.Kernel]:
    @tk.jit(debug=debug)
    def axpy(out: F32, x: F32, y: F32, a: tk.dt.float32, n: tk.dt.int32, bid: Bid, tid: Tid,
             bdm: Bdm):
        i = bid * bdm + tid
        with tk.if_(i < n):
            out[i] = a * x[i] + y[i]

    @tk.jit(debug=debug)
    def stencil(out: F32, x: F32, n: tk.dt.int32, bid: Bid, tid: Tid, bdm: Bdm):
        s = tk.shared_array(tk.dt.float32, 258)
        i = tk.cast(bid * bdm + tid, tk.dt.int32)
        t = tk.cast(tid, tk.dt.int32) + 1
        s[t] = tk.where(i < n, x[tk.where(i < n, i, 0)], 0.0)
        with tk.if_(t == 1):
            s[0] = tk.where(i > 0, x[tk.where(i > 0, i - 1, 0)], 0.0)
        with tk.if_(t == 256):
            s[257] = tk.where(i + 1 < n, x[tk.where(i + 1 < n, i + 1, 0)], 0.0)
        tk.syncthreads()
        with tk.if_(i < n):
            out[i] = 0.25 * s[t - 1] + 0.5 * s[t] + 0.25 * s[t + 1]

    return axpy, stencil


def sync(target: str) -> None:
    if target == "gpu":
        from thork_core.runtime import driver

        driver().cuCtxSynchronize()


def time_kernel(launch: Any, target: str, reps: int) -> float:
    launch()
    sync(target)
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        launch()
        sync(target)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e6


def run(target: str, n: int, reps: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(1)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    if target == "gpu":
        from thork_core import DeviceArray

        xs, ys, out = DeviceArray.from_host(x), DeviceArray.from_host(y), DeviceArray((n,))
    else:
        xs, ys, out = x, y, np.empty_like(x)
    grid = (n + 255) // 256
    rows = []
    for name in ("axpy", "stencil"):
        times = {}
        results = {}
        for debug in (False, True):
            axpy, stencil = kernels(debug)
            if name == "axpy":
                def launch(k: Any = axpy) -> None:
                    k[grid, 256](out, xs, ys, 2.0, n, target=target)
            else:
                def launch(k: Any = stencil) -> None:
                    k[grid, 256](out, xs, n, target=target)
            times[debug] = time_kernel(launch, target, reps)
            results[debug] = out.to_host() if target == "gpu" else out.copy()
        assert np.array_equal(results[False], results[True]), name
        rows.append({"target": target, "kernel": name, "n": n, "plain_us": times[False],
                     "debug_us": times[True], "ratio": times[True] / times[False]})
        print(f"{target:4} {name:8} n={n}: plain {times[False]:10.1f} us   debug "
              f"{times[True]:10.1f} us   x{times[True] / times[False]:.2f}", flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--n", type=int, default=0)
    ap.add_argument("--reps", type=int, default=0)
    args = ap.parse_args()
    from thork_core import plugins

    rows = []
    for t in plugins().targets():
        if t.name not in ("gpu", "cpu") or not t.available()[0]:
            continue
        n = args.n or (1 << 24 if t.name == "gpu" else 1 << 20)
        reps = args.reps or (50 if t.name == "gpu" else 5)
        rows += run(t.name, n, reps)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bench_debug.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
