"""Where the pinned round trip's time goes (issue 11): ``matrix_add`` on 1024^2 f32
``tk.pinned_empty`` arrays against the same copies made by hand, in one process.

    python bench/diag_pinned.py [--reps 30]

Rows (median ms): the Thork call; the driver calls it makes, by hand through
cuda.bindings on the same arrays (3 HtoD async, launch, 1 DtoH async, one sync);
synchronous cuMemcpy of the same bytes from Thork's pinned arrays and from CuPy's pinned
memory; and what the driver says the arrays' memory is (host-registered or not).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    reps = ap.parse_args().reps
    import cupy as cp
    import thork as tk
    from _floor import KERNEL_SOURCE
    from cuda.bindings import driver as drv
    from thork_core._memory import device_pool

    ns: dict = {}
    exec(compile(KERNEL_SOURCE, "seedkernel", "exec"), ns)
    matrix_add = ns["matrix_add"]
    shape = (1024, 1024)
    A, B, C = (tk.pinned_empty(shape, "float32") for _ in range(3))
    A[...] = 1.0
    B[...] = 2.0
    n = A.nbytes

    def med(fn) -> float:
        ts = []
        for _ in range(reps + 3):
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(ts[3:])

    launch = matrix_add[(A.size // 128, 1, 1), (128, 1, 1)]
    rows = [("thork call, pinned arrays", med(lambda: launch(C, A, B)))]
    assert np.array_equal(C, A + B)
    pool = device_pool(0)
    d = [pool.alloc(n, 0) for _ in range(3)]

    def by_hand() -> None:
        for p, h in zip(d, (C, A, B)):
            drv.cuMemcpyHtoDAsync(p, h.ctypes.data, n, 0)
        drv.cuMemcpyDtoHAsync(C.ctypes.data, d[0], n, 0)
        drv.cuStreamSynchronize(0)

    rows.append(("by hand: 3 HtoD + 1 DtoH async, one sync (no kernel)", med(by_hand)))

    def sync_copies(ptr: int) -> None:
        for p in d:
            drv.cuMemcpyHtoD(p, ptr, n)
        drv.cuMemcpyDtoH(ptr, d[0], n)

    rows.append(("cuMemcpy sync x4 from thork pinned", med(lambda: sync_copies(A.ctypes.data))))
    cpin = cp.cuda.alloc_pinned_memory(n)
    rows.append(("cuMemcpy sync x4 from cupy pinned", med(lambda: sync_copies(cpin.ptr))))
    plain = np.ones(shape, np.float32)
    rows.append(("cuMemcpy sync x4 from pageable", med(lambda: sync_copies(plain.ctypes.data))))
    for label, ptr in (("thork pinned", A.ctypes.data), ("cupy pinned", cpin.ptr)):
        err, flags = drv.cuMemHostGetFlags(ptr)
        print(f"  {label}: cuMemHostGetFlags -> {err}, flags {flags}")
    for what, ms in rows:
        print(f"{what:<60} {ms:8.3f} ms")


if __name__ == "__main__":
    main()
