"""Where does a hot call with foreign arrays spend its host time? (issue 11, diagnostic)

For each producer kind (Thork DeviceArray, CuPy, torch, a DLPack-only wrapper) this prints
what reading one array costs through each protocol the library offers (the
``__cuda_array_interface__`` dict, plain attributes, the current stream, ``__dlpack__``),
the per-call host time of ``pipe(x, out=y)`` and ``kernel[grid, block](x, y)``, and a
cProfile of the pipe call (the functions with the most own time). Without the producer's
library installed its rows are skipped. Usage: python bench/diag_producers.py (needs a GPU)
"""

from __future__ import annotations

import cProfile
import io
import pstats
import time
from collections.abc import Callable
from typing import Any

import fkl
import numpy as np
import thork as tk
from thork_core import _cuda
from thork_core._device_array import DeviceArray


def per_call(fn: Callable[[], Any], n: int = 20000) -> float:
    """Host microseconds per call of ``fn`` (median of 5 rounds; synchronized outside)."""
    drv = _cuda.driver()
    for _ in range(200):
        fn()
    _cuda.check(drv.cuCtxSynchronize(), "sync")
    rounds = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n // 5):
            fn()
        rounds.append((time.perf_counter() - t0) / (n // 5) * 1e6)
        _cuda.check(drv.cuCtxSynchronize(), "sync")
    return sorted(rounds)[2]


def profile(fn: Callable[[], Any], n: int = 3000, top: int = 14) -> str:
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(n):
        fn()
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(top)
    return "\n".join(ln for ln in s.getvalue().splitlines() if ln.strip())


class DLPackOnly:
    """A producer that offers only DLPack (as bench_fkl's row)."""

    def __init__(self, a: Any) -> None:
        self.a = a

    def __dlpack__(self, **kw: Any) -> Any:
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self) -> Any:
        return self.a.__dlpack_device__()


@tk.jit
def triple(x: tk.DevicePointer[tk.dt.float32], y: tk.DevicePointer[tk.dt.float32],
           n: tk.dt.int32):
    i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    with tk.if_(i < n):
        y[i] = x[i] * 3.0


def main() -> None:
    _cuda.make_current(0)
    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.Add(1.0), fkl.Mul(3.0),
                       fkl.TensorWrite(), target="gpu")
    x = DeviceArray.from_host(np.arange(16, dtype=np.float32).reshape(1, 16))
    y = DeviceArray((1, 16), "float32")
    kinds: dict[str, tuple[Any, Any]] = {"DeviceArray": (x, y)}
    reads: dict[str, dict[str, Callable[[], Any]]] = {
        "DeviceArray": {"__dlpack__(stream=1)": lambda: x.__dlpack__(stream=1)}}
    try:
        import cupy as cp

        cx, cy = cp.asarray(x), cp.asarray(y)
        kinds["CuPy"] = (cx, cy)
        reads["CuPy"] = {
            "__cuda_array_interface__": lambda: cx.__cuda_array_interface__,
            "data.ptr": lambda: cx.data.ptr, "shape": lambda: cx.shape,
            "dtype": lambda: cx.dtype, "flags.c_contiguous": lambda: cx.flags.c_contiguous,
            "device.id": lambda: cx.device.id,
            "get_current_stream().ptr": lambda: cp.cuda.get_current_stream().ptr,
            "__dlpack_device__()": lambda: cx.__dlpack_device__(),
        }
    except ImportError:
        print("CuPy rows skipped: not importable")
    try:
        import torch

        if torch.cuda.is_available():
            from thork_torch._adapter import torch_stream

            tx, ty = torch.from_dlpack(x), torch.from_dlpack(y)
            kinds["torch"] = (tx, ty)
            reads["torch"] = {
                "is_cuda": lambda: tx.is_cuda, "is_contiguous()": lambda: tx.is_contiguous(),
                "dtype": lambda: tx.dtype, "get_device()": lambda: tx.get_device(),
                "data_ptr()": lambda: tx.data_ptr(), "shape": lambda: tx.shape,
                "thork torch_stream(0)": lambda: torch_stream(0),
                "torch.cuda.current_stream()": lambda: torch.cuda.current_stream(),
                "__cuda_array_interface__": lambda: tx.__cuda_array_interface__,
            }
    except ImportError:
        print("torch rows skipped: not importable")
    kinds["DLPack-only"] = (DLPackOnly(x), DLPackOnly(y))
    print("per-array reads (host us per call)")
    for kind, table in reads.items():
        for what, fn in table.items():
            print(f"  {kind:<12} {what:<28} {per_call(fn, 50000):8.3f}")
    print("hot calls (host us per call)")
    for kind, (a, b) in kinds.items():
        pipe(a, out=b)
        t_pipe = per_call(lambda a=a, b=b: pipe(a, out=b))
        try:
            triple[1, 32](a, b, 16)
            t_kernel = f"{per_call(lambda a=a, b=b: triple[1, 32](a, b, 16)):8.3f}"
        except Exception as exc:  # noqa: BLE001 - a diagnostic: say why and go on
            t_kernel = f"failed: {type(exc).__name__}: {exc}"[:80]
        print(f"  {kind:<12} pipe(x, out=y) {t_pipe:8.3f}   kernel[1, 32](x, y, n) {t_kernel}")
    for kind, (a, b) in kinds.items():
        print(f"--- cProfile: pipe(x, out=y), {kind}")
        print(profile(lambda a=a, b=b: pipe(a, out=b)))
        print(f"--- cProfile: kernel[1, 32](x, y, n), {kind}")
        print(profile(lambda a=a, b=b: triple[1, 32](a, b, 16)))


if __name__ == "__main__":
    main()
