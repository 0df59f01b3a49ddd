"""Tensor cores on the GPU: the ``mma.sync`` ceiling and the Thork GEMM (examples/gemm_mma.py).

1. A register-only microbenchmark: every warp issues ``tk.mma`` (m16n8k16, fp32 accumulate)
   on 8 independent accumulator chains in a loop, nothing else; TFLOP/s of the whole GPU is
   the ceiling of that instruction here.
2. The Thork GEMM (examples/gemm_mma.py: 128 x 256 (or 256 x 128) block tiles of warps of
   64 x 64, ldmatrix, mma, grouped tile order, float32 output; the tiles reach shared
   memory by a 3- or 4-stage cp.async pipeline (CONFIGS) or, on Hopper, by TMA from a
   producer warpgroup, persistent blocks (``tma`` rows, TMA_CONFIGS); the best of the
   configurations, or with --sweep of SWEEP and TMA_SWEEP, is reported, each listed and
   the best named) at 4096^3 and 8192^3, fp16
   and bf16, in TFLOP/s, as a fraction of the ceiling, of ``torch.matmul`` (cuBLAS,
   fp16/bf16 output) and of Triton's matmul tutorial kernel (re-typed below, one fixed
   configuration of the tutorial's autotune list, fp16/bf16 output). Each result is
   checked against torch first.

Medians of ``triton.testing.do_bench`` (CUDA events, warm-up; torch events without
Triton). torch and Triton are optional: their columns are left empty without them.

3. The Hopper GEMM (examples/gemm_wgmma.py: persistent blocks of a TMA producer warpgroup
   and two wgmma consumer warpgroups, 4 mbarrier-handed stages; sm_90a; output in the
   input type, as torch.matmul's) at the same sizes and dtypes, best of WGMMA_CONFIGS
   (``wgmma`` rows). Its torch.matmul and Triton columns are timed again next to it, in
   WGMMA_ROUNDS rounds of alternating order (the GPU's clock falls as it warms: whatever
   runs later would lose), each a median; the rows give the medians over rounds.

    python bench/bench_mma.py --out DIR [--quick] [--sweep] [--no-wgmma]
    python bench/bench_mma.py --check     # no GPU: build the kernels for sm_90(a) only
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import thork as tk

ROOT = Path(__file__).resolve().parents[1]
f32, u32, i32 = tk.dt.float32, tk.dt.uint32, tk.dt.int32
CHAINS = 8  # independent accumulators per warp: enough to cover the mma latency
#: Dense fp16/bf16 tensor-core peak of an H200 SXM, TFLOP/s: NVIDIA's H200 datasheet gives
#: 1,979 TFLOPS "with sparsity"; dense is half. Only for the H200 (the device name says).
H200_DENSE_PEAK = 989.5
#: cp.async GEMM tilings tried (BM, BN, BK, WM, WN, STAGES, GROUP_M, SWIZZLE): session
#: 9's best padded tiling and its two swizzled ones (the fastest of session 9's run B).
CONFIGS = ((128, 256, 64, 64, 64, 4, 8, 0), (128, 256, 64, 64, 64, 4, 8, 1),
           (256, 128, 64, 64, 64, 3, 8, 1))
#: With --sweep: CONFIGS and more (k depth, stages, tile order).
SWEEP = CONFIGS
#: TMA-fed (warp-specialised, Hopper) GEMM tilings (BM, BN, WM, WN, STAGES, GROUP_M,
#: blocks per SM): examples/gemm_mma.prepare_tma's keywords; timed beside the cp.async
#: ones (``tma`` rows).
TMA_CONFIGS = ((128, 256, 64, 64, 4, 8, 1), (256, 128, 64, 64, 4, 8, 1),
               (128, 128, 64, 64, 3, 8, 2))
#: With --sweep: TMA_CONFIGS and more (stages, tile order).
TMA_SWEEP = TMA_CONFIGS + ((128, 256, 64, 64, 3, 8, 1), (128, 256, 64, 64, 4, 16, 1))


def _label(cfg: tuple[int, ...]) -> str:
    bm, bn, bk, _, _, st, g, sw = cfg
    return f"{bm}x{bn}x{bk}/{st}" + (f" g{g}" if g != 8 else "") + (" swz" if sw else "")


def _tma_label(cfg: tuple[int, ...]) -> str:
    bm, bn, _, _, st, g, ctas = cfg
    return f"tma {bm}x{bn}x64/{st}" + (f" g{g}" if g != 8 else "") \
        + (f" {ctas} blocks/SM" if ctas > 1 else "")


def precompile(mod: Any, configs: Any, tma_configs: Any = ()) -> None:
    """Build every (dtype, configuration) kernel for this GPU, several at a time (threads;
    the compilers run outside the GIL), so that the timed loop finds them in the cache."""
    from concurrent.futures import ThreadPoolExecutor

    kernels = [mod.gemm_kernel(name).specialize(BM=bm, BN=bn, BK=bk, WM=wm, WN=wn, STAGES=st,
                                                 ALIGNED=True, GROUP_M=g, SWIZZLE=bool(sw))
               for name in ("float16", "bfloat16") for bm, bn, bk, wm, wn, st, g, sw in configs]
    kernels += [mod.gemm_tma_kernel(name).specialize(BM=bm, BN=bn, WM=wm, WN=wn, STAGES=st,
                                                      GROUP_M=g, PAIRS=True, CTAS=ctas)
                for name in ("float16", "bfloat16")
                for bm, bn, wm, wn, st, g, ctas in tma_configs]
    try:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda k: k.precompile("gpu"), kernels))
    except Exception as exc:  # noqa: BLE001 - the launches compile what is missing
        print(f"precompile: {type(exc).__name__}: {exc}"[:300])


#: Hopper GEMM configurations tried: examples/gemm_wgmma.prepare's keywords by name (the
#: best of bench/sweep_wgmma.py's sweeps, sessions 9 and 10); "tuned" gives none: the
#: example's default for the shape and dtype (its TUNED table, from session 10's sweep).
WGMMA_CONFIGS: dict[str, dict[str, Any]] = {
    "tuned": {},
    "128x256/4 staged": dict(BN=256, WM=64, CONSUMERS=2, STAGES=4, epilogue="staged"),
    "128x256/4 tma cluster2 128 blocks": dict(BN=256, WM=64, CONSUMERS=2, STAGES=4,
                                              epilogue="tma", cluster=2, blocks=128),
    "256x192/3 tma cluster2": dict(BN=192, WM=128, CONSUMERS=2, STAGES=3, epilogue="tma",
                                   cluster=2),
}
WGMMA_ROUNDS = 3


def _example(name: str = "gemm_mma") -> Any:
    spec = importlib.util.spec_from_file_location(f"{name}_example",
                                                  ROOT / "examples" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[f"{name}_example"] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def ceiling_kernel(dtype: Any, random: bool = False) -> tk.Kernel:
    """The register-only ceiling kernel. ``random``: every chain multiplies its own
    operands, random 16-bit numbers of magnitude 0.5 to 2 with random signs and mantissas
    (a hash of the thread, chain and register), so that consecutive ``mma`` switch about
    half their operand bits as a GEMM's do on random data; else (bench_mma's ceiling)
    every chain multiplies the same numbers near 1 (few bits switch)."""
    half = 0x3800 if dtype == tk.dt.float16 else 0x3F00     # exponent of 0.5
    keep = 0x87FF if dtype == tk.dt.float16 else 0x80FF     # sign, exponent lsb, mantissa

    def mix(h: Any) -> Any:
        """A 32-bit integer hash (murmur3's finalizer)."""
        h = h ^ (h >> 16)
        h = h * tk.cast(0x85EBCA6B, u32)
        h = h ^ (h >> 13)
        h = h * tk.cast(0xC2B2AE35, u32)
        return h ^ (h >> 16)

    @tk.jit
    def mma_peak(out: tk.DevicePointer[f32], iters: i32):
        """Register-only mma.sync: CHAINS independent D += A B chains per warp."""
        tid = tk.thread_idx().x
        gid = tk.cast(tk.block_idx().x * tk.block_dim().x + tid, u32)
        seed = tk.cast(tid & 7, u32)  # small: the pairs stay finite numbers near 1
        if random:
            ops = []
            for ch in range(CHAINS):
                regs = [mix(gid * tk.cast(0x9E3779B1, u32)
                            + tk.cast((ch * 8 + k) * 0x632BE5AB % 2**32, u32))
                        for k in range(6)]
                regs = [r & tk.cast(keep * 0x10001, u32) | tk.cast(half * 0x10001, u32)
                        for r in regs]
                ops.append((regs[:4], regs[4:]))
        else:
            a = [tk.cast(seed ^ (0x3C003C00 + k), u32) for k in range(4)]
            b = [tk.cast(seed ^ (0x3C003800 + k), u32) for k in range(2)]
            ops = [(a, b)] * CHAINS
        # Distinct starting values: identical chains could be merged by the compiler
        # (mma is a pure asm statement), which would overstate the ceiling.
        acc = [[tk.var(float(ch * 4 + i)) for i in range(4)] for ch in range(CHAINS)]
        for _ in tk.range(iters):
            for ch in range(CHAINS):
                d = tk.mma(ops[ch][0], ops[ch][1], acc[ch], dtype=dtype)
                for v, x in zip(acc[ch], d):
                    v.set(x)
        total = tk.var(0.0)
        for ch in range(CHAINS):
            for v in acc[ch]:
                total += v
        out[tk.block_idx().x * tk.block_dim().x + tid] = total
    return mma_peak


def operand_kernel(dtype: Any) -> tk.Kernel:
    """The GEMM's inner loop with no global memory: 8 warps of 64 x 64 read one 128 x 64
    tile of a and one 64 x 256 tile of b from shared memory (the GEMM's padded layout)
    through ldmatrix into fragments and multiply them, ``iters`` times: the ceiling of the
    ldmatrix + mma operand path at the GEMM's occupancy (one block of 8 warps per SM)."""
    BM, BK = 128, 64
    LA, LB = BK + 8, 256 + 8                  # rows skewed by 16 bytes, as in the GEMM

    @tk.jit
    def mma_smem(out: tk.DevicePointer[f32], iters: i32):
        """Every warp: iters x (BK / 16) k-steps of 4 x ldmatrix.x4 (a), 4 x
        ldmatrix.x4.trans (b) and 32 mma."""
        sa = tk.dynamic_shared(dtype)
        sb = tk.dynamic_shared(dtype, BM * LA * 2)
        tid = tk.thread_idx().x
        for i in range((BM * LA + BK * LB) // 256 + 1):   # small values, no zeros
            at = tid + i * 256
            x = tk.cast(at % 7, f32) * 0.125 - 0.375
            with tk.if_(at < BM * LA):
                sa[at] = x
            with tk.if_((at >= BM * LA) & (at < BM * LA + BK * LB)):
                sb[at - BM * LA] = x
        tk.syncthreads()
        lane, warp = tid % 32, tid // 32
        wm0, wn0 = warp // 4 * 64, warp % 4 * 64
        mat, row = lane // 8, lane % 8
        a_lane = (wm0 + row + 8 * (mat % 2)) * LA + 8 * (mat // 2)
        b_lane = (row + 8 * (mat % 2)) * LB + wn0 + 8 * (mat // 2)
        acc = [[[tk.var(0.0) for _ in range(4)] for _ in range(8)] for _ in range(4)]
        for _ in tk.range(iters):
            for kk in range(0, BK, 16):
                af = [tk.ldmatrix(sa, a_lane + kk + mt * 16 * LA) for mt in range(4)]
                bf = []
                for nt in range(0, 8, 2):
                    regs = tk.ldmatrix(sb, b_lane + kk * LB + nt * 8, 4, trans=True)
                    bf += [(regs[0], regs[1]), (regs[2], regs[3])]
                for mt in range(4):
                    for nt in range(8):
                        d = tk.mma(af[mt], bf[nt], acc[mt][nt], dtype=dtype)
                        for v, x in zip(acc[mt][nt], d):
                            v.set(x)
        total = tk.var(0.0)
        for m in acc:
            for n in m:
                for v in n:
                    total += v
        out[tk.block_idx().x * 256 + tid] = total
    return mma_smem


# -- Triton's matmul tutorial kernel (re-typed; grouped tile order, fixed configuration) --
def _triton_matmul() -> Any:
    import triton
    import triton.language as tl

    @triton.jit
    def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk,
                      stride_bn, stride_cm, stride_cn, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
        pid = tl.program_id(axis=0)
        num_pid_m = tl.cdiv(M, BLOCK_M)
        num_pid_n = tl.cdiv(N, BLOCK_N)
        num_pid_in_group = GROUP_M * num_pid_n
        group_id = pid // num_pid_in_group
        first_pid_m = group_id * GROUP_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
        pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
        pid_n = (pid % num_pid_in_group) // group_size_m
        offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
        offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
        b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
        c = acc.to(c_ptr.dtype.element_ty)
        offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
        tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))

    def run(a: Any, b: Any, c: Any) -> None:
        M, K = a.shape
        N = b.shape[1]
        grid = (triton.cdiv(M, 128) * triton.cdiv(N, 256),)
        matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0),
                            b.stride(1), c.stride(0), c.stride(1), BLOCK_M=128, BLOCK_N=256,
                            BLOCK_K=64, GROUP_M=8, num_stages=3, num_warps=8)
    return run


def check_build() -> int:
    """No GPU: the kernels build for sm_90."""
    mod = _example()
    for name, dt in (("float16", tk.dt.float16), ("bfloat16", tk.dt.bfloat16)):
        art = ceiling_kernel(dt).artifact("sm_90")
        print(f"mma ceiling {name}: sm_90 cubin {len(art.data)} bytes")
        for cfg in CONFIGS:
            bm, bn, bk, wm, wn, st, g, sw = cfg
            k = mod.gemm_kernel(name).specialize(BM=bm, BN=bn, BK=bk, WM=wm, WN=wn, STAGES=st,
                                                 ALIGNED=True, GROUP_M=g, SWIZZLE=bool(sw))
            print(f"gemm {name} {_label(cfg)}: sm_90 cubin "
                  f"{len(k.artifact('sm_90').data)} bytes")
        for cfg in TMA_CONFIGS:
            bm, bn, wm, wn, st, g, ctas = cfg
            k = mod.gemm_tma_kernel(name).specialize(BM=bm, BN=bn, WM=wm, WN=wn, STAGES=st,
                                                     GROUP_M=g, PAIRS=True, CTAS=ctas)
            art = k.artifact("sm_90")
            print(f"gemm {name} {_tma_label(cfg)}: {art.arch} cubin {len(art.data)} bytes")
    hopper = _example("gemm_wgmma")
    for name in ("float16", "bfloat16"):
        for label, given in WGMMA_CONFIGS.items():
            for n in (4096, 8192) if not given else (0,):
                cfg = dict(hopper.DEFAULTS, **given) if given else \
                    hopper.tuned(n, n, n, name, name)
                art = hopper.gemm_kernel(name, name).specialize(
                    BN=cfg["BN"], WM=cfg["WM"], CONSUMERS=cfg["CONSUMERS"],
                    STAGES=cfg["STAGES"], GROUP_M=cfg["GROUP_M"], PAIRS=True,
                    EPILOGUE=hopper.EPILOGUES[cfg["epilogue"]],
                    CLUSTER=cfg["cluster"]).artifact("sm_90")
                print(f"wgmma gemm {name} {label}{f' {n}^3' if n else ''}: {art.arch} "
                      f"cubin {len(art.data)} bytes")
    return 0


def bench_wgmma(hopper: Any, a: Any, b: Any, ref: Any, name: str, n: int,
                do_bench: Any, tri: Any = None) -> dict[str, Any]:
    """The Hopper GEMM's configurations on torch tensors a, b (n x n), output in their type:
    each checked against ``ref``, then timed with torch.matmul and Triton (``tri``) in
    WGMMA_ROUNDS rounds of alternating order; TFLOP/s (medians over rounds) of each.
    Tensor maps and bᵀ are made once, outside the timing."""
    import statistics

    import torch

    bt = b.t().contiguous()
    c = torch.empty(n, n, device="cuda", dtype=a.dtype)
    out: dict[str, Any] = {"configs": {}, "check": True}
    timed: dict[str, Any] = {"torch": lambda: torch.matmul(a, b)}
    if tri is not None:
        ct = torch.empty(n, n, device="cuda", dtype=a.dtype)
        timed["triton"] = lambda: tri(a, b, ct)
    for label, cfg in WGMMA_CONFIGS.items():
        c.fill_(float("nan"))
        try:
            fn = hopper.prepare(c, a, bt, n, n, n, name, target="gpu", **cfg)
            fn()
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - report, keep the other rows
            print(f"  {n}^3 {name} wgmma {label}: failed ({type(exc).__name__}: {exc})"[:400])
            out["check"] = False
            continue
        good = bool(torch.allclose(c.float(), ref, rtol=2e-2, atol=2e-2 * n ** 0.5))
        out["check"] = out["check"] and good
        if not good:
            print(f"  {n}^3 {name} wgmma {label}: MISMATCH")
        timed[label] = fn
    samples: dict[str, list[float]] = {k: [] for k in timed}
    for r in range(WGMMA_ROUNDS):
        for label in list(timed) if r % 2 == 0 else list(timed)[::-1]:
            ms = do_bench(timed[label], return_mode="median")
            samples[label].append(2.0 * n ** 3 / ms / 1e9)
    for label, tfs in samples.items():
        tf = statistics.median(tfs)
        if label in ("torch", "triton"):
            out[label] = tf
        else:
            out["configs"][label] = tf
        print(f"  {n}^3 {name} {'wgmma ' if label in WGMMA_CONFIGS else ''}{label}: "
              f"{tf:8.1f} TFLOP/s (rounds: {', '.join(f'{x:.1f}' for x in tfs)})")
    out["thork"] = max(out["configs"].values(), default=float("nan"))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="write bench_mma.json here")
    ap.add_argument("--quick", action="store_true", help="4096^3 only")
    ap.add_argument("--check", action="store_true", help="no GPU: build for sm_90 only")
    ap.add_argument("--sweep", action="store_true", help="time SWEEP, not only CONFIGS")
    ap.add_argument("--no-wgmma", action="store_true", help="leave out the Hopper GEMM")
    opts = ap.parse_args()
    if opts.check:
        return check_build()
    try:
        import torch
    except ImportError:
        print("torch is needed for device arrays and timing here; skipped")
        return 0
    try:
        from triton.testing import do_bench
        tri = _triton_matmul()
    except Exception as exc:  # noqa: BLE001 - Triton missing or broken: its column is empty
        print(f"triton: not available ({type(exc).__name__}: {exc})")
        tri = None

        def do_bench(fn: Any, return_mode: str = "median") -> float:
            for _ in range(3):
                fn()
            times = []
            for _ in range(20):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                fn()
                e.record()
                e.synchronize()
                times.append(s.elapsed_time(e))
            return sorted(times)[len(times) // 2]

    mod = _example()
    configs = SWEEP if opts.sweep else CONFIGS
    tma_configs = (TMA_SWEEP if opts.sweep else TMA_CONFIGS) \
        if torch.cuda.get_device_capability(0) == (9, 0) else ()
    hopper = _example("gemm_wgmma") if torch.cuda.get_device_capability(0) == (9, 0) \
        and not opts.no_wgmma else None
    precompile(mod, configs, tma_configs)
    info: dict[str, Any] = {"ceiling": {}, "gemm": [], "wgmma": []}
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    dev = torch.cuda.get_device_name(0)
    print(f"device: {dev}, {sms} SMs")
    for name, dt in (("float16", tk.dt.float16), ("bfloat16", tk.dt.bfloat16)):
        blocks, threads, iters = sms * 8, 128, 4096
        out = torch.empty(blocks * threads, device="cuda", dtype=torch.float32)
        kern = ceiling_kernel(dt)[blocks, threads]
        ms = do_bench(lambda kern=kern, out=out, it=iters: kern(out, it, target="gpu"),
                      return_mode="median")
        flops = 2.0 * 16 * 8 * 16 * CHAINS * iters * blocks * (threads // 32)
        info["ceiling"][name] = flops / ms / 1e9
        print(f"mma.sync m16n8k16 {name} ceiling: {info['ceiling'][name]:8.1f} TFLOP/s")
        # The same at the GEMM's occupancy (8 warps per SM), and fed from shared memory.
        blocks, threads = sms, 256
        out = torch.empty(blocks * threads, device="cuda", dtype=torch.float32)
        kern = ceiling_kernel(dt)[blocks, threads]
        ms = do_bench(lambda kern=kern, out=out, it=iters: kern(out, it, target="gpu"),
                      return_mode="median")
        flops = 2.0 * 16 * 8 * 16 * CHAINS * iters * blocks * (threads // 32)
        info.setdefault("ceiling_8warps", {})[name] = flops / ms / 1e9
        okern = operand_kernel(dt)[sms, 256, (128 * 72 + 64 * 264) * 2]
        oiters = 1024
        ms = do_bench(lambda k=okern, out=out, it=oiters: k(out, it, target="gpu"),
                      return_mode="median")
        flops = 2.0 * 128 * 256 * 64 * oiters * sms
        info.setdefault("operand_path", {})[name] = flops / ms / 1e9
        print(f"  at 8 warps/SM: {info['ceiling_8warps'][name]:8.1f} TFLOP/s; fed by ldmatrix "
              f"from shared memory (the GEMM's inner loop, no global memory): "
              f"{info['operand_path'][name]:8.1f} TFLOP/s")

    sizes = (4096,) if opts.quick else (4096, 8192)
    peak = H200_DENSE_PEAK if "H200" in dev else None
    info["dense_peak"] = peak
    print(f"\n{'GEMM':<18} {'thork TF/s':>10} {'/ceiling':>9} {'/peak':>6} {'torch':>8} "
          f"{'/torch':>7} {'triton':>8} {'/triton':>8}  check")
    for n in sizes:
        for name, tdt in (("float16", torch.float16), ("bfloat16", torch.bfloat16)):
            torch.manual_seed(0)
            a = torch.randn(n, n, device="cuda", dtype=tdt)
            b = torch.randn(n, n, device="cuda", dtype=tdt)
            c = torch.empty(n, n, device="cuda", dtype=torch.float32)
            ref = torch.matmul(a.float(), b.float())
            flops = 2.0 * n ** 3
            row: dict[str, Any] = {"n": n, "dtype": name, "configs": {}}
            ok = True
            for cfg in configs:
                bm, bn, bk, wm, wn, st, g, sw = cfg
                kern = mod.gemm_kernel(name)[(n // bn, n // bm), (bm // wm) * (bn // wn) * 32,
                                             mod.shared_bytes(bm, bn, bk, st, bool(sw))]

                def thork_fn(kern: Any = kern, c: Any = c, a: Any = a, b: Any = b,
                             n: int = n, cfg: Any = cfg) -> None:
                    kern(c, a, b, n, n, n, *cfg[:6], True, cfg[6], bool(cfg[7]), target="gpu")
                c.fill_(float("nan"))
                thork_fn()
                good = bool(torch.allclose(c, ref, rtol=1e-2, atol=1e-2 * n ** 0.5))
                ok = ok and good
                tf = flops / do_bench(thork_fn, return_mode="median") / 1e9
                label = _label(cfg)
                row["configs"][label] = tf
                print(f"  {n}^3 {name} thork {label}: {tf:8.1f} TFLOP/s "
                      f"{'ok' if good else 'MISMATCH'}")
            for tcfg in tma_configs:
                bm, bn, wm, wn, st, g, ctas = tcfg
                label = _tma_label(tcfg)
                c.fill_(float("nan"))
                try:
                    tfn = mod.prepare_tma(c, a, b, n, n, n, name, BM=bm, BN=bn, WM=wm, WN=wn,
                                          STAGES=st, GROUP_M=g, ctas=ctas, target="gpu")
                    tfn()
                    torch.cuda.synchronize()
                except Exception as exc:  # noqa: BLE001 - report, keep the other rows
                    print(f"  {n}^3 {name} thork {label}: failed ({type(exc).__name__}: "
                          f"{exc})"[:400])
                    ok = False
                    continue
                good = bool(torch.allclose(c, ref, rtol=1e-2, atol=1e-2 * n ** 0.5))
                ok = ok and good
                tf = flops / do_bench(tfn, return_mode="median") / 1e9
                row["configs"][label] = tf
                print(f"  {n}^3 {name} thork {label}: {tf:8.1f} TFLOP/s "
                      f"{'ok' if good else 'MISMATCH'}")
            row["check"] = ok
            row["thork"] = max(row["configs"].values())
            row["best"] = max(row["configs"], key=row["configs"].get)
            row["torch"] = flops / do_bench(lambda a=a, b=b: torch.matmul(a, b),
                                            return_mode="median") / 1e9
            if tri is not None:
                ct = torch.empty(n, n, device="cuda", dtype=tdt)
                try:
                    tri(a, b, ct)
                except Exception as exc:  # noqa: BLE001 - report, keep the other columns
                    print(f"triton {n}^3 {name}: failed ({type(exc).__name__}: {exc})"[:400])
                else:
                    row["triton_check"] = bool(torch.allclose(ct.float(), ref, rtol=2e-2,
                                                              atol=2e-2 * n ** 0.5))
                    row["triton"] = flops / do_bench(lambda a=a, b=b, ct=ct: tri(a, b, ct),
                                                     return_mode="median") / 1e9
            ceil = info["ceiling"][name]
            trit = row.get("triton")
            print(f"{n}^3 {name:<12} {row['thork']:>10.1f} {row['thork'] / ceil:>9.2f} "
                  f"{row['thork'] / peak if peak else float('nan'):>6.2f} "
                  f"{row['torch']:>8.1f} {row['thork'] / row['torch']:>7.2f} "
                  f"{trit if trit else float('nan'):>8.1f} "
                  f"{row['thork'] / trit if trit else float('nan'):>8.2f}  "
                  f"{'ok' if ok else 'MISMATCH'}  ({row['best']})")
            info["gemm"].append(row)
            if hopper is not None:
                wg = bench_wgmma(hopper, a, b, ref, name, n, do_bench, tri)
                wg.update(n=n, dtype=name)
                trit = wg.get("triton")
                print(f"{n}^3 {name:<12} wgmma {wg['thork']:>10.1f} TF/s "
                      f"/torch {wg['thork'] / wg['torch']:.2f} "
                      f"/triton {wg['thork'] / trit if trit else float('nan'):.2f}  "
                      f"{'ok' if wg['check'] else 'MISMATCH'}")
                info["wgmma"].append(wg)
            del a, b, c
            torch.cuda.empty_cache()
    if opts.out is not None:
        opts.out.mkdir(parents=True, exist_ok=True)
        (opts.out / "bench_mma.json").write_text(json.dumps(info, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
