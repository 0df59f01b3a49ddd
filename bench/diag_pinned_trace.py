"""Every driver call of issue 11's pinned round trip and the host time between them
(session 13): ``matrix_add[(n // 128, 1, 1), (128, 1, 1)](C, A, B)`` on 1024^2 float32
``tk.pinned_empty`` arrays, traced by ``bench/drvtrace.c``.

    python bench/diag_pinned_trace.py [--fake] [--reps 50] [--untouched] [--json]

On a GPU (default) the driver calls go to the real driver through the tracer, so the
times are the host side of real round trips: how long after the call the first copy was
queued (the DMA chain cannot start before it), the gaps between the queued copies, the
launch and the copy out, how long ``cuStreamSynchronize`` blocked, what ran after it.
``--fake``: no GPU, the driver stood in for on the host, for the order of the calls and
Thork's own host time (the 3 warm-up calls copy with memmove and add with NumPy, checked;
the timed ones only record the calls). Before each call A and
B get fresh random values and C NaN (as bench_core's row), unless ``--untouched``.
Prints the calls of the last repetition (offset from the call's start, time inside, µs)
and the median of each step; ``--json`` prints one JSON object instead.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import drvtrace  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fake", action="store_true", help="no GPU: the driver stood in for")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--n", type=int, default=1024 * 1024, help="elements per array")
    ap.add_argument("--untouched", action="store_true", help="no host writes between calls")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.n % 128:
        ap.error(f"--n expects a multiple of 128, got {args.n}")
    tracer = drvtrace.install("fake" if args.fake else "forward")
    if args.fake:
        drvtrace.add_hook(tracer)
    import thork as tk
    from _floor import floor_kernel

    matrix_add = floor_kernel()
    n = args.n
    rng = np.random.default_rng()
    A, B, C = (tk.pinned_empty(n, "float32") for _ in range(3))
    launch = matrix_add[(n // 128, 1, 1), (128, 1, 1)]  # type: ignore[index]
    per_step: dict[str, list[float]] = {}
    wall: list[float] = []
    last: list[drvtrace.Call] = []
    sequences: set[tuple[str, ...]] = set()
    for rep in range(args.reps + 3):
        if rep < 3 or not args.untouched:
            A[...] = rng.standard_normal(n, dtype=np.float32)
            B[...] = rng.standard_normal(n, dtype=np.float32)
            C[...] = np.nan
        if args.fake:  # values checked on the warm-up calls, then Thork's host path alone
            tracer.fake_work(rep < 3)
        tracer.start()
        t0 = time.perf_counter()
        tracer.mark(1)
        launch(C, A, B)
        tracer.mark(2)
        t1 = time.perf_counter()
        calls = tracer.stop()
        if (rep < 3 or not args.fake) and not np.array_equal(C, A + B):
            raise SystemExit("the round trip wrote wrong values")
        if rep < 3:
            continue
        wall.append((t1 - t0) * 1e6)
        inner = [c for c in calls if c.name != "mark"]
        sequences.add(tuple(c.name for c in inner if c.name != "ctx_set"))
        for k, v in drvtrace.steps(calls).items():
            per_step.setdefault(k, []).append(v)
        last = calls
    med = {k: statistics.median(v) for k, v in per_step.items()}
    t0 = next(c.enter for c in last if c.name == "mark" and c.a == 1)
    listing = [(c.name, (c.enter - t0) / 1e3, (c.leave - c.enter) / 1e3, c.b) for c in last
               if c.name != "mark"]
    if args.json:
        print(json.dumps({"mode": "fake" if args.fake else "forward",
                          "sequences": sorted(sequences), "median_us": med,
                          "wall_us": statistics.median(wall), "last": listing}))
        return
    print(f"pinned round trip, {n} float32 per array, {'fake driver' if args.fake else 'GPU'}"
          f", median of {args.reps}; the call around the trace {statistics.median(wall):.1f} µs")
    print("driver calls of the last repetition (µs from the call's start, µs inside):")
    for name, at, inside, nbytes in listing:
        size = f"{nbytes / 2**20:.2f} MiB" if name in ("htod", "dtoh") else ""
        print(f"  {at:9.1f}  {inside:8.1f}  {name:<14} {size}")
    if len(sequences) > 1:
        print(f"  (the sequence varied across repetitions: {len(sequences)} forms)")
    print("steps (median µs):")
    for k, v in med.items():
        print(f"  {k:<30} {v:9.1f}")


if __name__ == "__main__":
    main()
