"""Five CPU-target pipe calls (bench_interop's CPU rows, 270x480x3), timed before and after
torch's CPU thread pool and CUDA context ran in the same process: whether torch is what made
those calls take 60 ms inside ``bench_interop`` on the GPU machine (bench/GPU_PENDING.md 0b).

Run on a machine with torch and a GPU: ``python bench/diag_cpu_torch.py``.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import bench_interop as bi  # noqa: E402 - a sibling bench module


def main() -> None:
    pipes = bi.five_pipes("cpu")
    bufs = bi.frame_buffers(270, 480, lambda a: a.copy())

    def calls() -> None:
        for i, p in enumerate(pipes):
            p(bufs[i], out=bufs[i + 1])

    def median_ms() -> float:
        calls()
        times = []
        for _ in range(11):
            t0 = time.perf_counter()
            calls()
            times.append((time.perf_counter() - t0) * 1e3)
        return round(statistics.median(times), 3)

    print("before torch: 5 calls ms", median_ms(), flush=True)
    import torch

    x = torch.randn(512, 512)
    for _ in range(5):
        x = x @ x / 512
    print("after a torch CPU matmul: 5 calls ms", median_ms(), flush=True)
    if torch.cuda.is_available():
        torch.randn(1024, device="cuda")
        torch.cuda.synchronize()
        print("after torch CUDA too: 5 calls ms", median_ms(), flush=True)
    time.sleep(0.5)
    print("0.5 s later: 5 calls ms", median_ms(), flush=True)


if __name__ == "__main__":
    main()
