"""Host time of one GPU launch with NumPy arguments, through ``bench/drvtrace.c``'s fake
driver (no GPU; copies and the kernel only recorded: Thork's own binding, aliasing check
and round-trip bookkeeping), for the aliasing check's cost (session 13, h13-alias).

    python bench/diag_alias_cost.py [--reps 3000] [--json]

Rows: ``matrix_add(C, A, B)`` with three page-locked arrays, three pageable ones (128 x 8
floats each), and the aliased ``matrix_add(A, A, B)`` both ways. Prints the median and
the 10th percentile in microseconds per call. Compare two checkouts by running it with
each one's ``packages/*/src`` on ``PYTHONPATH``, alternating the runs.
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
    ap.add_argument("--reps", type=int, default=3000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    tracer = drvtrace.install("fake")
    tracer.fake_work(False)
    import thork as tk
    from _floor import floor_kernel

    k = floor_kernel()
    n = 128 * 8

    def pinned() -> np.ndarray:
        a = tk.pinned_empty(n, "float32")
        a[...] = 1.0
        return a

    rows = {
        "pinned C, A, B": (pinned(), pinned(), pinned()),
        "pageable C, A, B": tuple(np.ones(n, np.float32) for _ in range(3)),
    }
    pa, pb = pinned(), pinned()
    rows["pinned A, A, B (aliased)"] = (pa, pa, pb)
    qa = np.ones(n, np.float32)
    rows["pageable A, A, B (aliased)"] = (qa, qa, np.ones(n, np.float32))
    launch = k[8, 128]
    times: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(20):  # warm-up: compile, arm the fast path, fill the pool
        for a in rows.values():
            launch(*a)
    clock = time.perf_counter_ns
    for _ in range(args.reps):  # rows interleaved
        for name, a in rows.items():
            t0 = clock()
            launch(*a)
            times[name].append((clock() - t0) / 1e3)
    out = {name: {"median_us": round(statistics.median(v), 2),
                  "p10_us": round(sorted(v)[len(v) // 10], 2)} for name, v in times.items()}
    if args.json:
        print(json.dumps(out))
    else:
        for name, v in out.items():
            print(f"{name:30s} median {v['median_us']:7.2f} us   p10 {v['p10_us']:7.2f} us")


if __name__ == "__main__":
    main()
