"""Which memory layout wins on this GPU for fkl's two bandwidth-bound chains: hand-written
CUDA variants (through CuPy) next to the kernels fkl generates, at 1080p and 8K, against
a device-to-device copy of the same bytes. Fresh (rotated) inputs, CUDA events, medians.
Usage: python bench/diag_layouts.py   (needs a GPU, CuPy)"""

# ruff: noqa: E501  (the CUDA source reads better unwrapped)
from __future__ import annotations

import statistics

import cupy as cp
import fkl
import numpy as np

SRC = r"""
extern "C" __global__ void six_px(const float* x, float* y, long n) {  // 1 float/thread
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) { float v = x[i] * 1.5f + 0.25f; v = v * 2.0f - 0.5f; y[i] = fminf(fmaxf(v, -1.f), 4.f); }
}
__device__ float f6(float v) { v = v * 1.5f + 0.25f; v = v * 2.0f - 0.5f; return fminf(fmaxf(v, -1.f), 4.f); }
extern "C" __global__ void six_v4(const float4* x, float4* y, long n4) {  // 1 float4/thread
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n4) { float4 v = x[i]; y[i] = make_float4(f6(v.x), f6(v.y), f6(v.z), f6(v.w)); }
}
extern "C" __global__ void six_v4x4(const float4* x, float4* y, long n4) {  // 4 float4, block-strided
  long base = blockIdx.x * (long)blockDim.x * 4 + threadIdx.x;
  float4 v[4];
  #pragma unroll
  for (int k = 0; k < 4; k++) { long i = base + k * blockDim.x; if (i < n4) v[k] = x[i]; }
  #pragma unroll
  for (int k = 0; k < 4; k++) { long i = base + k * blockDim.x;
    if (i < n4) y[i] = make_float4(f6(v[k].x), f6(v[k].y), f6(v[k].z), f6(v[k].w)); }
}
__device__ float nz(unsigned b, float m, float s) { return ((float)b * (1.f / 255.f) - m) / s; }
extern "C" __global__ void chw_px(const unsigned char* x, float* y, long n) {  // 1 px/thread
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) { const unsigned char* p = x + 3 * i;
    y[i] = nz(p[2], .485f, .229f); y[n + i] = nz(p[1], .456f, .224f); y[2 * n + i] = nz(p[0], .406f, .225f); }
}
extern "C" __global__ void chw_4px(const unsigned* x, float4* y, long n4) {  // 4 px: 3 u32 in, 1 float4 per plane
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i >= n4) return;
  unsigned a = x[3 * i], b = x[3 * i + 1], c = x[3 * i + 2];
  unsigned char px[12];
  #pragma unroll
  for (int k = 0; k < 4; k++) { px[k] = a >> (8 * k); px[4 + k] = b >> (8 * k); px[8 + k] = c >> (8 * k); }
  y[i] = make_float4(nz(px[2], .485f, .229f), nz(px[5], .485f, .229f), nz(px[8], .485f, .229f), nz(px[11], .485f, .229f));
  y[n4 + i] = make_float4(nz(px[1], .456f, .224f), nz(px[4], .456f, .224f), nz(px[7], .456f, .224f), nz(px[10], .456f, .224f));
  y[2 * n4 + i] = make_float4(nz(px[0], .406f, .225f), nz(px[3], .406f, .225f), nz(px[6], .406f, .225f), nz(px[9], .406f, .225f));
}
"""

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
SIX = (fkl.Mul(1.5), fkl.Add(0.25), fkl.Mul(2.0), fkl.Sub(0.5), fkl.Max(-1.0), fkl.Min(4.0))


class Rotation:
    """Four fresh input sets, one per timed repetition in turn (defeats the 60 MB L2)."""

    def __init__(self, arrays: list) -> None:
        self.arrays, self.k = arrays, 0

    def next(self) -> None:
        self.k = (self.k + 1) % len(self.arrays)

    @property
    def cur(self):
        return self.arrays[self.k]


def time_us(fn, rot: Rotation, reps: int = 50, flush=None) -> float:
    """Median event time in microseconds, the next input set before each repetition.
    ``flush`` (a large CuPy array) is filled before each start event, as
    ``triton.testing.do_bench`` does: the GPU is then busy when the start event runs and
    the host's launch latency is not in the number (device time only)."""
    a, b = cp.cuda.Event(), cp.cuda.Event()
    for _ in range(5):
        fn()
    ts = []
    for i in range(reps):
        rot.next()
        if flush is not None:
            flush.fill(i & 0xFF)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(cp.cuda.get_elapsed_time(a, b) * 1e3)
    return statistics.median(ts)


def six(k: dict, label: str, h: int, w: int, rows: list) -> None:
    n = h * w * 3
    rot = Rotation([cp.random.standard_normal(n, dtype=cp.float32) for _ in range(4)])
    y = cp.full(n, cp.nan, cp.float32)
    ref = cp.minimum(cp.maximum((rot.cur * 1.5 + 0.25) * 2.0 - 0.5, -1.0), 4.0)
    t = time_us(lambda: y.data.copy_from_device(rot.cur.data, 4 * n), rot)
    rows.append((label, "6-op f32x3", "cuMemcpyDtoD", t, 8 * n / t / 1e3))
    for name, per_block in (("six_px", 256), ("six_v4", 1024), ("six_v4x4", 4096)):
        count = n if name == "six_px" else n // 4

        def launch(name=name, per_block=per_block, count=count) -> None:
            k[name]((-(-n // per_block),), (256,), (rot.cur, y, np.int64(count)))

        y.fill(cp.nan)
        rot.k = 0
        launch()
        assert bool(cp.allclose(y, ref, rtol=1e-5, atol=1e-5)), name
        t = time_us(launch, rot)
        rows.append((label, "6-op f32x3", name, t, 8 * n / t / 1e3))
    ys = y.reshape(h, w, 3)
    for flat, fold in ((True, True), (True, False), (False, None)):
        pipe = fkl.compose(fkl.TensorRead(), *SIX, fkl.TensorWrite(), target="gpu")
        pipe.flat, pipe.fold = flat, fold
        y.fill(cp.nan)
        rot.k = 0
        pipe(rot.cur.reshape(h, w, 3), out=ys)
        assert bool(cp.allclose(y, ref, rtol=1e-5, atol=1e-5)), (flat, fold)
        t = time_us(lambda pipe=pipe: pipe(rot.cur.reshape(h, w, 3), out=ys), rot)
        rows.append((label, "6-op f32x3", f"fkl flat={flat} fold={fold}", t, 8 * n / t / 1e3))


def chw(k: dict, label: str, h: int, w: int, rows: list) -> None:
    npx = h * w
    rot = Rotation([cp.random.randint(0, 256, npx * 3, dtype=cp.uint8) for _ in range(4)])
    o = cp.full(npx * 3, cp.nan, cp.float32)
    nbytes = npx * 3 * 5  # 3 bytes read, 12 written per pixel
    src, dst = cp.empty(nbytes // 2, cp.uint8), cp.empty(nbytes // 2, cp.uint8)
    t = time_us(lambda: dst.data.copy_from_device(src.data, nbytes // 2), rot)
    rows.append((label, "u8->CHW", "cuMemcpyDtoD", t, nbytes / t / 1e3))
    for name, per_block, count in (("chw_px", 256, npx), ("chw_4px", 1024, npx // 4)):
        def launch(name=name, per_block=per_block, count=count) -> None:
            k[name]((-(-npx // per_block),), (256,), (rot.cur, o, np.int64(count)))

        t = time_us(launch, rot)
        rows.append((label, "u8->CHW", name, t, nbytes / t / 1e3))
    oc = o.reshape(3, h, w)
    for flat in (True, False):
        pipe = fkl.compose(fkl.TensorRead(), fkl.ColorConversion("BGR2RGB"),
                           fkl.Mul(1 / 255.0), fkl.Sub(MEAN), fkl.Div(STD),
                           fkl.TensorSplit(), target="gpu")
        pipe.flat = flat
        pipe(rot.cur.reshape(h, w, 3), out=oc)
        t = time_us(lambda pipe=pipe: pipe(rot.cur.reshape(h, w, 3), out=oc), rot)
        rows.append((label, "u8->CHW", f"fkl flat={flat}", t, nbytes / t / 1e3))
    rot.k = 0
    o.fill(cp.nan)
    pipe(rot.cur.reshape(h, w, 3), out=oc)
    want = o.copy()
    for name, per_block, count in (("chw_px", 256, npx), ("chw_4px", 1024, npx // 4)):
        o.fill(cp.nan)
        k[name]((-(-npx // per_block),), (256,), (rot.cur, o, np.int64(count)))
        assert bool(cp.allclose(o, want, rtol=1e-5, atol=1e-5)), name


def main() -> None:
    mod = cp.RawModule(code=SRC, options=("-arch=sm_90",))
    k = {name: mod.get_function(name) for name in
         ("six_px", "six_v4", "six_v4x4", "chw_px", "chw_4px")}
    rows: list = []
    for label, (h, w) in (("1080p", (1080, 1920)), ("8K", (4320, 7680))):
        six(k, label, h, w, rows)
        cp.get_default_memory_pool().free_all_blocks()
        chw(k, label, h, w, rows)
        cp.get_default_memory_pool().free_all_blocks()
    print(f"{'size':<6} {'chain':<11} {'kernel':<24} {'us':>9} {'GB/s':>8}")
    for label, chain, name, t, bw in rows:
        print(f"{label:<6} {chain:<11} {name:<24} {t:9.2f} {bw:8.0f}")


if __name__ == "__main__":
    main()
