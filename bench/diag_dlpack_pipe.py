"""Where a DLPack-only ``pipe(x, out=y)`` spends its time beyond the DeviceArray call
(issue 11's DLPack row; session 14: Thork's part read +1.43 µs on the H200 against
+0.37-0.69 µs on the dev machine with drvtrace's fake driver).

    python bench/diag_dlpack_pipe.py            # per-call times, interleaved rounds
    python bench/diag_dlpack_pipe.py --trace    # the driver calls of one call of each kind

The times: the DeviceArray pipe, the DLPack-only pipe, the producer's two calls made from
Python as the guard makes them, the same pipe with the garbage collector off, and the
DLPack-only pipe whose producer has ``__slots__`` (no instance dict). ``--trace`` puts
``bench/drvtrace.c`` under Thork forwarding to the real driver (a GPU) and prints the
calls each pipe call makes.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def slots_producer(base: type) -> type:
    """``base`` (diag_producers.DLPackOnly) with ``__slots__``: no instance dict."""
    names = ("__init__", "__dlpack__", "__dlpack_device__")
    return type("SlotsDLPackOnly", (), {"__slots__": ("a",),
                                        **{n: base.__dict__[n] for n in names}})


def per_call(fn: Callable[[], Any], n: int) -> float:
    """Host µs per call over ``n`` back-to-back calls."""
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", action="store_true", help="list the driver calls (a GPU)")
    ap.add_argument("--fake", action="store_true", help="drvtrace's fake driver (no GPU)")
    ap.add_argument("--calls", type=int, default=20000, help="calls per measurement")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    tracer = None
    if args.trace or args.fake:
        import drvtrace

        tracer = drvtrace.install("fake" if args.fake else "forward")
    import fkl
    import numpy as np
    from diag_producers import DLPackOnly
    from thork_core import DeviceArray

    x = DeviceArray((1, 16), "float32")
    y = DeviceArray((1, 16), "float32")
    hot = fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.Add(1.0), fkl.Mul(3.0),
                      fkl.TensorWrite(), target="gpu")
    dx, dy = DLPackOnly(x), DLPackOnly(y)
    slots = slots_producer(DLPackOnly)
    sx, sy = slots(x), slots(y)
    for _ in range(3):
        hot(x, out=y)
        hot(dx, out=dy)
        hot(sx, out=sy)
    if not args.fake:
        from thork_core import _cuda

        _cuda.check(_cuda.driver().cuCtxSynchronize(), "cuCtxSynchronize")
        assert np.allclose(y.to_host(), (x.to_host() * 2 + 1) * 3)
    if tracer is not None and args.trace:
        for name, fn in (("DeviceArrays", lambda: hot(x, out=y)),
                         ("DLPack-only", lambda: hot(dx, out=dy))):
            tracer.start()
            fn()
            calls = tracer.stop()
            print(f"{name}: {[c.name for c in calls if c.name != 'mark']}")
        return
    rows: dict[str, Callable[[], Any]] = {
        "pipe DeviceArrays": lambda: hot(x, out=y),
        "pipe DLPack-only": lambda: hot(dx, out=dy),
        "pipe DLPack-only, __slots__ producer": lambda: hot(sx, out=sy),
        "producer __dlpack__(stream=1)": lambda: dx.__dlpack__(stream=1, max_version=(1, 0)),
        "producer __dlpack_device__": dx.__dlpack_device__,
        "DeviceArray.__dlpack__(stream=1)": lambda: x.__dlpack__(stream=1,
                                                                max_version=(1, 0)),
    }
    got: dict[str, list[float]] = {k: [] for k in rows}
    got["pipe DLPack-only, gc off"] = []
    for _ in range(args.rounds):
        for k, fn in rows.items():
            got[k].append(per_call(fn, args.calls))
        gc.disable()
        got["pipe DLPack-only, gc off"].append(per_call(rows["pipe DLPack-only"], args.calls))
        gc.enable()
    med = {k: statistics.median(v) for k, v in got.items()}
    print(f"per call, host µs, median of {args.rounds} interleaved rounds of {args.calls}:")
    for k, v in med.items():
        print(f"  {k:<40} {v:7.3f}   (min {min(got[k]):.3f}, max {max(got[k]):.3f})")
    part = med["pipe DLPack-only"] - med["pipe DeviceArrays"] - 2 * (
        med["producer __dlpack__(stream=1)"] + med["producer __dlpack_device__"])
    print(f"  Thork's DLPack part (DLPack pipe - DeviceArray pipe - 2 x the producer's "
          f"calls): {part:+.3f}")


if __name__ == "__main__":
    main()
