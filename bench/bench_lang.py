"""thork-trace kernels against the same algorithms hand-written in CUDA C++ (nvcc).

For the tiled matmul, the shared-memory block reduction and the padded tiled transpose,
times the Thork kernel and a hand-written CUDA C++ twin (compiled with nvcc at run time,
loaded and launched through the cuda-python driver API) in the same process, with CUDA
events, medians after warm-up. A grid-stride copy kernel gives the bandwidth ceiling.
Prints a table of ratios last (goal: thork/cuda <= 1.05).

    python bench/bench_lang.py --out DIR [--quick]
    python bench/bench_lang.py --check     # no GPU: build both sides for sm_90 only
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import thork as tk

f32, i32 = tk.dt.float32, tk.dt.int32
TILE, BLOCK, TT, TR = 16, 256, 32, 8


# -- the Thork kernels ------------------------------------------------------------------------
@tk.jit
def matmul(c: tk.DevicePointer[f32], a: tk.DevicePointer[f32], b: tk.DevicePointer[f32],
           M: i32, N: i32, K: i32):
    sa = tk.shared_array(f32, (TILE, TILE))
    sb = tk.shared_array(f32, (TILE, TILE))
    tx, ty = tk.cast(tk.thread_idx().x, i32), tk.cast(tk.thread_idx().y, i32)
    row = tk.cast(tk.block_idx().y, i32) * TILE + ty
    col = tk.cast(tk.block_idx().x, i32) * TILE + tx
    acc = tk.var(0.0)
    for k0 in tk.range(0, K, TILE):
        with tk.if_((row < M) & (k0 + tx < K)):
            sa[ty, tx] = a[row * K + k0 + tx]
        with tk.else_():
            sa[ty, tx] = 0.0
        with tk.if_((k0 + ty < K) & (col < N)):
            sb[ty, tx] = b[(k0 + ty) * N + col]
        with tk.else_():
            sb[ty, tx] = 0.0
        tk.syncthreads()
        for k in range(TILE):
            acc += sa[ty, k] * sb[k, tx]
        tk.syncthreads()
    with tk.if_((row < M) & (col < N)):
        c[row * N + col] = acc


@tk.jit
def reduce_sum(out: tk.DevicePointer[f32], a: tk.DevicePointer[f32], n: i32):
    s = tk.shared_array(f32, BLOCK)
    t = tk.cast(tk.thread_idx().x, i32)
    acc = tk.var(0.0)
    start = tk.cast(tk.block_idx().x, i32) * BLOCK + t
    for i in tk.range(start, n, tk.cast(tk.grid_dim().x, i32) * BLOCK):
        acc += a[i]
    s[t] = acc
    tk.syncthreads()
    step = BLOCK // 2
    while step > 0:
        with tk.if_(t < step):
            s[t] = s[t] + s[t + step]
        tk.syncthreads()
        step //= 2
    with tk.if_(t == 0):
        tk.atomic_add(out, 0, s[0])


@tk.jit
def transpose(out: tk.DevicePointer[f32], a: tk.DevicePointer[f32], rows: i32, cols: i32):
    tile = tk.shared_array(f32, (TT, TT + 1))
    tx, ty = tk.cast(tk.thread_idx().x, i32), tk.cast(tk.thread_idx().y, i32)
    x = tk.cast(tk.block_idx().x, i32) * TT + tx
    y0 = tk.cast(tk.block_idx().y, i32) * TT
    for r in range(0, TT, TR):
        with tk.if_((x < cols) & (y0 + ty + r < rows)):
            tile[ty + r, tx] = a[(y0 + ty + r) * cols + x]
    tk.syncthreads()
    ox = y0 + tx
    oy0 = tk.cast(tk.block_idx().x, i32) * TT
    for r in range(0, TT, TR):
        with tk.if_((ox < rows) & (oy0 + ty + r < cols)):
            out[(oy0 + ty + r) * rows + ox] = tile[tx, ty + r]


@tk.jit
def copy(out: tk.DevicePointer[f32], a: tk.DevicePointer[f32], n: i32):
    start = tk.cast(tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x, i32)
    for i in tk.range(start, n, tk.cast(tk.grid_dim().x * tk.block_dim().x, i32)):
        out[i] = a[i]


# -- the same algorithms, hand-written --------------------------------------------------------
CUDA = r"""
#define TILE 16
#define BLOCK 256
#define TT 32
#define TR 8
extern "C" __global__ void matmul(float* c, const float* a, const float* b, int M, int N, int K) {
  __shared__ float sa[TILE][TILE], sb[TILE][TILE];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    sa[ty][tx] = (row < M && k0 + tx < K) ? a[row * K + k0 + tx] : 0.f;
    sb[ty][tx] = (k0 + ty < K && col < N) ? b[(k0 + ty) * N + col] : 0.f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += sa[ty][k] * sb[k][tx];
    __syncthreads();
  }
  if (row < M && col < N) c[row * N + col] = acc;
}
extern "C" __global__ void reduce_sum(float* out, const float* a, int n) {
  __shared__ float s[BLOCK];
  int t = threadIdx.x;
  float acc = 0.f;
  for (int i = blockIdx.x * BLOCK + t; i < n; i += gridDim.x * BLOCK) acc += a[i];
  s[t] = acc;
  __syncthreads();
#pragma unroll
  for (int step = BLOCK / 2; step > 0; step >>= 1) {
    if (t < step) s[t] += s[t + step];
    __syncthreads();
  }
  if (t == 0) atomicAdd(out, s[0]);
}
extern "C" __global__ void transpose(float* out, const float* a, int rows, int cols) {
  __shared__ float tile[TT][TT + 1];
  int tx = threadIdx.x, ty = threadIdx.y;
  int x = blockIdx.x * TT + tx, y0 = blockIdx.y * TT;
#pragma unroll
  for (int r = 0; r < TT; r += TR)
    if (x < cols && y0 + ty + r < rows) tile[ty + r][tx] = a[(y0 + ty + r) * cols + x];
  __syncthreads();
  int ox = y0 + tx, oy0 = blockIdx.x * TT;
#pragma unroll
  for (int r = 0; r < TT; r += TR)
    if (ox < rows && oy0 + ty + r < cols) out[(oy0 + ty + r) * rows + ox] = tile[tx][ty + r];
}
extern "C" __global__ void copy(float* out, const float* a, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    out[i] = a[i];
}
"""


def compile_cuda(arch: str, work: Path) -> tuple[bytes, str]:
    """The hand-written kernels as a cubin: nvcc -O3 if present, else NVRTC (noted)."""
    src = work / "handwritten.cu"
    src.write_text(CUDA)
    nvcc = shutil.which("nvcc") or next(
        (p for p in ("/usr/local/cuda/bin/nvcc",) if os.path.exists(p)), None)
    if nvcc:
        out = work / "handwritten.cubin"
        r = subprocess.run([nvcc, "-cubin", f"-arch={arch}", "-O3", "-o", str(out), str(src)],
                           capture_output=True, text=True)
        if r.returncode == 0:
            return out.read_bytes(), f"nvcc ({nvcc})"
        print(f"nvcc failed, falling back to NVRTC:\n{r.stderr}", file=sys.stderr)
    from cuda.bindings import nvrtc

    err, prog = nvrtc.nvrtcCreateProgram(CUDA.encode(), b"handwritten.cu", 0, [], [])
    opts = [f"--gpu-architecture={arch}".encode(), b"-std=c++17"]
    (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    if int(err) != 0:
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise RuntimeError(f"NVRTC failed on the hand-written kernels:\n{log.decode()}")
    _, size = nvrtc.nvrtcGetCUBINSize(prog)
    buf = b" " * size
    nvrtc.nvrtcGetCUBIN(prog, buf)
    return buf, "NVRTC (nvcc not found)"


class Handwritten:
    """A cubin loaded with cuModuleLoadData; launches pre-packed like Thork's GPU target."""

    def __init__(self, cubin: bytes) -> None:
        from cuda.bindings import driver as drv

        self.drv = drv
        drv.cuInit(0)
        err, self.module = drv.cuModuleLoadData(cubin)
        if int(err) != 0:
            raise RuntimeError(f"cuModuleLoadData: {err}")
        self._keep: list[Any] = []

    def launcher(self, name: str, grid: tuple[int, int, int], block: tuple[int, int, int],
                 args: list[Any]) -> Any:
        drv = self.drv
        err, fn = drv.cuModuleGetFunction(self.module, name.encode())
        if int(err) != 0:
            raise RuntimeError(f"cuModuleGetFunction({name}): {err}")
        slots = [ctypes.c_void_p(int(a.data.ptr)) if hasattr(a, "data") else ctypes.c_int(a)
                 for a in args]
        argv = (ctypes.c_void_p * len(slots))(*[ctypes.addressof(s) for s in slots])
        self._keep += [slots, argv]
        addr = ctypes.addressof(argv)

        def launch() -> None:
            (e,) = drv.cuLaunchKernel(fn, *grid, *block, 0, 0, addr, 0)
            if int(e) != 0:
                raise RuntimeError(f"cuLaunchKernel({name}): {e}")
        return launch


def time_ms(fn: Any, cp: Any, batch: int, samples: int) -> float:
    """Median milliseconds per launch: ``samples`` CUDA-event timings of ``batch`` launches
    each on the legacy default stream, after warm-up."""
    for _ in range(3):
        fn()
    cp.cuda.Device().synchronize()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(samples):
        start.record()
        for _ in range(batch):
            fn()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) / batch)
    return statistics.median(times)


def check_only() -> int:
    """No GPU: build every Thork kernel and the hand-written file for sm_90."""
    for k in (matmul, reduce_sum, transpose, copy):
        k.artifact("sm_90")
    with tempfile.TemporaryDirectory() as d:
        _, how = compile_cuda("sm_90", Path(d))
    print(f"check: thork kernels and hand-written CUDA ({how}) build for sm_90")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=None, help="write bench_lang.json here")
    ap.add_argument("--quick", action="store_true", help="smaller sizes")
    ap.add_argument("--check", action="store_true", help="build only (no GPU needed)")
    opts = ap.parse_args()
    if opts.check:
        return check_only()
    import cupy as cp

    dev = cp.cuda.Device()
    arch = f"sm_{dev.compute_capability}"
    sms = dev.attributes["MultiProcessorCount"]
    q = opts.quick
    mm = 1024 if q else 2048
    nred = (1 << 22) if q else (1 << 26)
    tr = 2048 if q else 8192
    work = Path(tempfile.mkdtemp(prefix="thork-bench-lang-"))
    cubin, how = compile_cuda(arch, work)
    hand = Handwritten(cubin)
    rng = np.random.default_rng(0)
    rows: list[dict[str, Any]] = []

    def row(what: str, t_tk: float, t_cu: float, nbytes: float = 0, flops: float = 0,
            ok: bool = True) -> None:
        rows.append({"what": what, "thork_ms": t_tk, "cuda_ms": t_cu, "ratio": t_tk / t_cu,
                     "thork_GBps": nbytes / t_tk / 1e6 if nbytes else None,
                     "cuda_GBps": nbytes / t_cu / 1e6 if nbytes else None,
                     "thork_GFLOPs": flops / t_tk / 1e6 if flops else None, "correct": ok})

    # copy: the bandwidth ceiling
    a = cp.asarray(rng.standard_normal(nred, dtype=np.float32))
    o1, o2 = cp.empty_like(a), cp.empty_like(a)
    grid = (sms * 8, 1, 1)
    tk_copy = copy[grid, 256]
    t_tk = time_ms(lambda: tk_copy(o1, a, nred, target="gpu"), cp, 10, 15)
    t_cu = time_ms(hand.launcher("copy", grid, (256, 1, 1), [o2, a, nred]), cp, 10, 15)
    row(f"copy {nred} float32", t_tk, t_cu, nbytes=8.0 * nred,
        ok=bool(cp.array_equal(o1, a) and cp.array_equal(o2, a)))
    copy_gbps = 8.0 * nred / t_cu / 1e6

    # reduction
    s1, s2 = cp.zeros(1, cp.float32), cp.zeros(1, cp.float32)
    tk_red = reduce_sum[grid, BLOCK]
    cu_red = hand.launcher("reduce_sum", grid, (BLOCK, 1, 1), [s2, a, nred])
    tk_red(s1, a, nred, target="gpu")
    cu_red()
    ref = float(cp.sum(a.astype(cp.float64)))
    ok = abs(float(s1[0]) - ref) <= 1e-3 * max(1.0, abs(ref)) + 1.0 and \
        abs(float(s2[0]) - ref) <= 1e-3 * max(1.0, abs(ref)) + 1.0
    t_tk = time_ms(lambda: tk_red(s1, a, nred, target="gpu"), cp, 10, 15)
    t_cu = time_ms(cu_red, cp, 10, 15)
    row(f"block reduction {nred} float32", t_tk, t_cu, nbytes=4.0 * nred, ok=ok)

    # transpose
    r_, c_ = tr + 3, tr - 5  # not multiples of the tile
    x = cp.asarray(rng.standard_normal((r_, c_), dtype=np.float32))
    t1, t2 = cp.empty((c_, r_), cp.float32), cp.empty((c_, r_), cp.float32)
    tgrid = ((c_ + TT - 1) // TT, (r_ + TT - 1) // TT, 1)
    tk_tr = transpose[tgrid, (TT, TR)]
    cu_tr = hand.launcher("transpose", tgrid, (TT, TR, 1), [t2, x, r_, c_])
    t_tk = time_ms(lambda: tk_tr(t1, x, r_, c_, target="gpu"), cp, 10, 15)
    t_cu = time_ms(cu_tr, cp, 10, 15)
    ok = bool(cp.array_equal(t1, x.T) and cp.array_equal(t2, x.T))
    row(f"transpose {r_}x{c_} float32", t_tk, t_cu, nbytes=8.0 * r_ * c_, ok=ok)

    # tiled matmul
    M, N, K = mm + 1, mm - 3, mm + 5
    A = cp.asarray(rng.standard_normal((M, K), dtype=np.float32))
    B = cp.asarray(rng.standard_normal((K, N), dtype=np.float32))
    C1, C2 = cp.empty((M, N), cp.float32), cp.empty((M, N), cp.float32)
    mgrid = ((N + TILE - 1) // TILE, (M + TILE - 1) // TILE, 1)
    tk_mm = matmul[mgrid, (TILE, TILE)]
    cu_mm = hand.launcher("matmul", mgrid, (TILE, TILE, 1), [C2, A, B, M, N, K])
    t_tk = time_ms(lambda: tk_mm(C1, A, B, M, N, K, target="gpu"), cp, 3, 9)
    t_cu = time_ms(cu_mm, cp, 3, 9)
    ref = A.astype(cp.float64) @ B.astype(cp.float64)
    scale = float(cp.abs(ref).max())
    ok = float(cp.abs(C1 - ref).max()) / scale <= 1e-5 and \
        float(cp.abs(C2 - ref).max()) / scale <= 1e-5
    row(f"tiled matmul {M}x{N}x{K} float32", t_tk, t_cu, flops=2.0 * M * N * K, ok=ok)

    info = {"gpu": cp.cuda.runtime.getDeviceProperties(dev.id)["name"].decode(),
            "arch": arch, "handwritten_compiler": how, "copy_GBps": copy_gbps, "rows": rows,
            "thork_compile": {k.name: (k.compile_info.compiler if k.compile_info else None)
                              for k in (matmul, reduce_sum, transpose, copy)}}
    if opts.out:
        opts.out.mkdir(parents=True, exist_ok=True)
        (opts.out / "bench_lang.json").write_text(json.dumps(info, indent=2))
    print(f"GPU {info['gpu']} ({arch}); hand-written CUDA compiled with {how}; "
          f"copy ceiling {copy_gbps:.0f} GB/s")
    print(f"{'kernel':<40} {'thork ms':>9} {'cuda ms':>9} {'ratio':>6} {'thork':>12} "
          f"{'% copy':>7} ok   goal: ratio <= 1.05")
    for r in rows:
        perf = (f"{r['thork_GBps']:.0f} GB/s" if r["thork_GBps"] else
                f"{r['thork_GFLOPs']:.0f} GF/s")
        pct = f"{100 * r['thork_GBps'] / copy_gbps:.0f}%" if r["thork_GBps"] else "-"
        print(f"{r['what']:<40} {r['thork_ms']:>9.4f} {r['cuda_ms']:>9.4f} "
              f"{r['ratio']:>6.3f} {perf:>12} {pct:>7} {'yes' if r['correct'] else 'NO'}")
    return 0 if all(r["correct"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
