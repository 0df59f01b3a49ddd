"""Where the pageable NumPy round trip's time goes, and which staging settings are best
(issue 11): ``matrix_add`` on fresh 1024^2 float32 pageable arrays, one process.

    python bench/diag_staging.py [--reps 12] [--out DIR]

Prints (median ms over ``reps``, each on fresh arrays, a CuPy round trip alternating
with every configuration so drift hits both):
- the round trip under each ``configure_staging(lanes=..., chunk_bytes=...)`` of a grid,
  its ratio to CuPy's ``(cp.asarray(A) + cp.asarray(B)).get()``;
- the pieces: host copies of 12 MB pageable -> pinned with 1..12 threads (ctypes.memmove,
  no GPU); pinned DMA of 12 MB in + 4 MB out, untouched and just written on the host;
  the driver's own pageable cuMemcpy of the same bytes.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import ctypes
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=12)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    reps = args.reps
    import cupy as cp
    import thork as tk
    from _floor import KERNEL_SOURCE
    from cuda.bindings import driver as drv
    from thork_core._memory import device_pool
    from thork_core.runtime import configure_staging

    ns: dict = {}
    exec(compile(KERNEL_SOURCE, "seedkernel", "exec"), ns)
    launch = ns["matrix_add"][(1024 * 1024 // 128, 1, 1), (128, 1, 1)]
    shape = (1024, 1024)
    rng = np.random.default_rng(1)
    pool_a = [rng.standard_normal(shape, dtype=np.float32) for _ in range(4)]
    results: dict = {"configs": [], "pieces": {}}

    def fresh() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        # new pageable arrays each time (as bench_core), filled by copies, not the RNG
        A = np.empty(shape, np.float32)
        B = np.empty(shape, np.float32)
        C = np.empty(shape, np.float32)
        A[...] = pool_a[int(rng.integers(4))]
        B[...] = pool_a[int(rng.integers(4))]
        C[...] = np.nan
        return A, B, C

    def one_thork() -> float:
        A, B, C = fresh()
        t0 = time.perf_counter()
        launch(C, A, B)
        t = (time.perf_counter() - t0) * 1e3
        assert np.array_equal(C, A + B)
        return t

    def one_cupy() -> float:
        A, B, _ = fresh()
        t0 = time.perf_counter()
        C = (cp.asarray(A) + cp.asarray(B)).get()
        t = (time.perf_counter() - t0) * 1e3
        assert np.array_equal(C, A + B)
        return t

    default = configure_staging()
    print(f"defaults: {default}; cpu_count {__import__('os').cpu_count()}")
    grid = [(lanes, chunk) for lanes in (1, 2, 4, 8, 12) for chunk in (256, 1024, 4096)]
    grid[:0] = [(default["lanes"], default["chunk_bytes"] >> 10), (6, 1024), (6, 2048),
                (8, 512), (8, 2048)]
    print(f"{'lanes':>5} {'chunk KiB':>9} {'thork ms':>9} {'cupy ms':>8} {'x cupy':>7}")
    for lanes, chunk_kib in grid:
        configure_staging(lanes=lanes, chunk_bytes=chunk_kib << 10, inline_bytes=0)
        th, cu = [], []
        for _ in range(reps + 2):
            th.append(one_thork())
            cu.append(one_cupy())
        t, c = statistics.median(th[2:]), statistics.median(cu[2:])
        results["configs"].append({"lanes": lanes, "chunk_kib": chunk_kib, "thork": t,
                                   "cupy": c, "thork_min": min(th[2:]), "cupy_min": min(cu[2:])})
        print(f"{lanes:>5} {chunk_kib:>9} {t:9.3f} {c:8.3f} {t / c:7.2f}")
    configure_staging(**default)

    # pieces
    n = 4 << 20
    stage = tk.pinned_empty(3 * n, "uint8")
    srcs = [np.ascontiguousarray(a) for a in pool_a[:3]]

    def host_copy(threads: int, chunk: int = 1 << 20) -> float:
        jobs = [(stage.ctypes.data + k * n + o, s.ctypes.data + o, min(chunk, n - o))
                for k, s in enumerate(srcs) for o in range(0, n, chunk)]
        ex = concurrent.futures.ThreadPoolExecutor(threads)
        ts = []
        for _ in range(reps + 2):
            for s in srcs:  # as fresh as the round trip's sources: written just before
                s[...] = pool_a[3]
            t0 = time.perf_counter()
            if threads == 1:
                for j in jobs:
                    ctypes.memmove(*j)
            else:
                list(ex.map(lambda j: ctypes.memmove(*j), jobs))
            ts.append((time.perf_counter() - t0) * 1e3)
        ex.shutdown()
        return statistics.median(ts[2:])

    for threads in (1, 2, 4, 8, 12):
        ms = host_copy(threads)
        results["pieces"][f"host_copy_12MB_{threads}t"] = ms
        print(f"host copy 12 MB pageable->pinned, {threads:2d} threads: {ms:7.3f} ms "
              f"({12 * 1.048576 / ms:6.1f} GB/s)")
    pool = device_pool(0)
    dev = [pool.alloc(n, 0) for _ in range(3)]
    pins = [tk.pinned_empty(n, "uint8") for _ in range(3)]

    def dma(written: bool) -> float:
        ts = []
        for _ in range(reps + 2):
            if written:
                for p in pins:
                    p[...] = 7
            t0 = time.perf_counter()
            for d, p in zip(dev, pins):
                drv.cuMemcpyHtoDAsync(d, p.ctypes.data, n, 0)
            drv.cuMemcpyDtoHAsync(pins[0].ctypes.data, dev[0], n, 0)
            drv.cuStreamSynchronize(0)
            ts.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(ts[2:])

    for written in (False, True):
        ms = dma(written)
        key = "dma_pinned_12in_4out_" + ("written" if written else "untouched")
        results["pieces"][key] = ms
        print(f"pinned DMA 12 MB in + 4 MB out, host {'just written' if written else 'untouched'}:"
              f" {ms:7.3f} ms ({16 * 1.048576 / ms:6.1f} GB/s)")
    plain = [np.empty(n, np.uint8) for _ in range(3)]
    ts = []
    for _ in range(reps + 2):
        for p in plain:
            p[...] = 5
        t0 = time.perf_counter()
        for d, p in zip(dev, plain):
            drv.cuMemcpyHtoD(d, p.ctypes.data, n)
        drv.cuMemcpyDtoH(plain[0].ctypes.data, dev[0], n)
        ts.append((time.perf_counter() - t0) * 1e3)
    results["pieces"]["driver_pageable_12in_4out"] = statistics.median(ts[2:])
    print(f"driver pageable cuMemcpy 12 MB in + 4 MB out: {statistics.median(ts[2:]):7.3f} ms")
    for d in dev:
        pool.free(d, 0)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "diag_staging.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
