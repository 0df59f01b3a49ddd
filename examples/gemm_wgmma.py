"""A Hopper GEMM in plain Thork: ``c = a @ b`` (float16 or bfloat16 in; float32 out, or
the input type as ``torch.matmul`` gives) — a persistent, warp-specialized kernel: one
producer warpgroup issues TMA tile loads, consumer warpgroups issue warpgroup MMA
(``tk.wgmma``), ``STAGES`` shared-memory buffers handed back and forth through mbarriers.

    python examples/gemm_wgmma.py            # checks itself against NumPy

``b`` is taken as ``bt = b.T`` (N x K, row-major: both operands "K-major", the layout
``wgmma`` reads without transposing). Rows must be 16-byte aligned for TMA (``K`` a
multiple of 8); ``M`` and ``N`` are free (TMA fills the tiles past the edges with zeros,
the epilogue stores only inside). GPU: sm_90a (H100/H200) — elsewhere it runs on the
CPU target, where the same kernel runs under Thork's model (docs/language-wgmma.md).

What makes it fast (docs/language-wgmma.md, "The pipelining pattern"):

* block tiles of ``(WM x CONSUMERS) x BN`` (default 128 x 256), each consumer warpgroup
  ``WM x BN`` (64 x 256: 128 float32 accumulators per thread);
* one wgmma group in flight (``tk.wgmma_wait(1)``): a stage goes back to the producer
  only once the group that read it retired, while the next group already runs;
* ``tk.setmaxnreg_dec``/``_inc``: the producer gives registers to the consumers
  (40 / 232 per thread with two consumers) under ``tk.launch_bounds``;
* persistent blocks (one per multiprocessor) walking the tiles in groups of ``GROUP_M``
  tile rows (consecutive tiles share B tiles in L2), so the producer loads the next
  tile's stages while the consumers store the last one;
* the epilogue passes each warp's rows through shared memory and stores 16 bytes per
  thread, whole 128-byte rows per warp instruction (``epilogue="staged"``, the default;
  ``"direct"`` stores the fragment's pairs, ``"tma"`` uses TMA stores);
* optionally (``cluster=2``) clusters of two blocks on vertically adjacent tiles, each
  loading half of the B tile they share and multicasting it to both;
* a bfloat16 output rounded by the hardware (``tk.cast(..., nan="canonical")``: one
  ``cvt.rn.bf16x2.f32`` per pair instead of ~14 integer instructions);
* per-shape defaults (``TUNED``): at 4096^3 and up, 128 persistent blocks (whole waves
  of tiles at 4096^3 and 8192^3).

On the H200 (session 10, docs/benchmarks.md): 0.99-1.03 of torch.matmul and 1.04-1.08
of Triton's tutorial kernel at 4096^3 and 8192^3, fp16 and bf16.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import thork as tk

f32, i32, u64 = tk.dt.float32, tk.dt.int32, tk.dt.uint64
P = tk.DevicePointer

#: K elements per tile: one 128-byte swizzled row of 16-bit elements.
BK = 64
#: Registers per thread (producer, consumer) by number of consumer warpgroups: what
#: ``setmaxnreg`` sets; None: no change. The totals stay within the 65536 registers of a
#: multiprocessor and within what the launch bounds give at entry (384 x 168 for two).
REGISTERS = {1: None, 2: (40, 232), 3: (24, 160)}


@functools.cache
def gemm_kernel(dtype: str, out: str = "float32") -> tk.Kernel:
    """The kernel for ``"float16"`` or ``"bfloat16"`` inputs and an ``out`` array of
    ``"float32"`` or the input type."""
    T = tk.dt.float16 if dtype == "float16" else tk.dt.bfloat16
    OUT = f32 if out == "float32" else T

    @tk.jit
    def gemm_wgmma(c: P[OUT], ta: P[u64], tb: P[u64], tc: P[u64], M: i32, N: i32, K: i32,
                   BN: tk.Constexpr[int] = 256, WM: tk.Constexpr[int] = 64,
                   CONSUMERS: tk.Constexpr[int] = 2, STAGES: tk.Constexpr[int] = 4,
                   GROUP_M: tk.Constexpr[int] = 8, PAIRS: tk.Constexpr[bool] = True,
                   EPILOGUE: tk.Constexpr[int] = 0, CLUSTER: tk.Constexpr[int] = 1,
                   CANONICAL: tk.Constexpr[bool] = True):
        """``c[M, N] = a[M, K] @ bt[N, K].T``: (WM CONSUMERS) x BN tiles, each block (1 +
        CONSUMERS warpgroups) taking tiles blockIdx.x, + gridDim.x, ... ``ta``/``tb``:
        tensor maps of a (box WM CONSUMERS x 64) and bt (box BN x 64), 128-byte swizzle.
        EPILOGUE: how the accumulators reach c — 0 (DIRECT): each thread stores its
        fragment, two elements at a time if PAIRS (N even); 1 (STAGED): each warp passes
        its 16 rows through shared memory, 128 bytes of a row at a time, and stores 16
        bytes per thread (rows of c whole 16-byte units); 2 (TMA): each warp writes 16 x
        128 bytes to one of two shared buffers and one lane stores it with a TMA store
        through ``tc``, the map of c (box 16 x 128 bytes, 128-byte swizzle). CLUSTER:
        blocks per thread-block cluster (1 or 2): the blocks of a cluster take vertically
        adjacent tiles, each loads its own A tile and 1/CLUSTER of the B tile they share,
        multicast to all of them (then ``tb``'s box is BN / CLUSTER x 64). CANONICAL: a
        bfloat16 c is rounded by ``tk.cast(..., nan="canonical")`` (the hardware's
        conversion, a NaN becomes 0x7FFF), else by the default cast (in software, a NaN
        keeps its sign and payload bits)."""
        BM, MW = WM * CONSUMERS, WM // 64            # MW: m64 wgmma rows per consumer
        tk.launch_bounds(128 * (1 + CONSUMERS), 1)
        if CLUSTER > 1:
            tk.cluster_dims(CLUSTER)
        BH = BN // CLUSTER                           # B rows this block loads (multicast)
        A_TILE, B_TILE = BM * BK, BN * BK            # elements per stage
        sa = tk.dynamic_shared(T)                    # STAGES x A_TILE, 1024-byte aligned
        sb = tk.dynamic_shared(T, STAGES * A_TILE * 2)
        # Epilogue buffers after the stages, per consumer warp: STAGED 16 rows of one
        # 128-byte chunk, padded to 144 bytes (the fragment's 4-byte stores and the 16-byte
        # loads hit distinct banks); TMA two 16 x 128-byte boxes, 128-byte swizzled.
        VEC = 16 // OUT.itemsize                     # elements per 16 bytes
        CW = 8 * VEC                                 # elements per 128-byte chunk
        PITCH = CW + VEC                             # elements per staged row
        so = tk.dynamic_shared(OUT, STAGES * (A_TILE + B_TILE) * 2)
        full = tk.shared_array(u64, (STAGES,))       # TMA landed: count 1 + bytes
        empty = tk.shared_array(u64, (STAGES,))      # consumers done: one per warpgroup
                                                     # of each block of the cluster
        tid = tk.thread_idx().x
        wg = tid // 128

        def rounded(v):
            """An accumulator in c's type: bfloat16 by the hardware's rounding (a NaN
            becomes the canonical 0x7FFF; two side by side are one cvt.rn.bf16x2.f32),
            float16 and float32 by the store's conversion."""
            return tk.cast(v, OUT, nan="canonical") if OUT == tk.dt.bfloat16 and CANONICAL \
                else v
        # Clusters walk cluster tiles (CLUSTER BM x BN); block 'rank' takes rows rank BM.
        first = tk.block_idx(signed=True).x // CLUSTER
        step = tk.grid_dim(signed=True).x // CLUSTER
        rank = tk.cluster_ctarank() if CLUSTER > 1 else 0
        ntm, ntn = (M + CLUSTER * BM - 1) // (CLUSTER * BM), (N + BN - 1) // BN
        ntiles, nk = ntm * ntn, (K + BK - 1) // BK

        def tile_origin(tile):
            """The block's tile's first row and column: tiles go down GROUP_M tile rows,
            then right (the group's A rows and one B tile column stay in L2 together)."""
            width = GROUP_M * ntn
            group = tile // width
            top = group * GROUP_M
            rows = tk.min(ntm - top, GROUP_M)
            within = tile - group * width
            return ((top + within % rows) * CLUSTER + rank) * BM, (within // rows) * BN

        with tk.if_(tid == 0):
            for s in range(STAGES):
                tk.mbarrier_init(full, s, 1)
                tk.mbarrier_init(empty, s, CONSUMERS * CLUSTER)
            if CLUSTER > 1:
                tk.fence_mbarrier_init()
        if CLUSTER > 1:
            tk.cluster_sync()                        # the peers' barriers are ready
        else:
            tk.syncthreads()

        with tk.if_(wg == 0):                        # the producer warpgroup
            if REGISTERS[CONSUMERS]:
                tk.setmaxnreg_dec(REGISTERS[CONSUMERS][0])
            with tk.if_(tid == 0):                   # one thread issues every copy
                stage, phase = tk.var(0), tk.var(0)
                for tile in tk.range(first, ntiles, step):
                    m0, n0 = tile_origin(tile)
                    for kt in tk.range(nk):
                        tk.mbarrier_wait(empty, stage, phase ^ 1)  # round 0 passes at once
                        tk.mbarrier_expect_tx(full, stage, (A_TILE + B_TILE) * 2)
                        tk.tma_load(sa, stage * A_TILE, ta, kt * BK, m0, full, stage)
                        if CLUSTER > 1:              # my share of B, to every block
                            tk.tma_load(sb, stage * B_TILE + rank * BH * BK, tb, kt * BK,
                                        n0 + rank * BH, full, stage,
                                        multicast=(1 << CLUSTER) - 1)
                        else:
                            tk.tma_load(sb, stage * B_TILE, tb, kt * BK, n0, full, stage)
                        stage.set(stage + 1)
                        with tk.if_(stage == STAGES):
                            stage.set(0)
                            phase.set(phase ^ 1)
        with tk.else_():                             # the consumers
            if REGISTERS[CONSUMERS]:
                tk.setmaxnreg_inc(REGISTERS[CONSUMERS][1])
            row0 = (wg - 1) * WM                     # this warpgroup's rows of the tile

            def release(s):
                """Stage s is free here: tell every block of the cluster (their producers
                multicast into it)."""
                if CLUSTER > 1:
                    for r in range(CLUSTER):
                        tk.mbarrier_arrive(empty, s, cta=r)
                else:
                    tk.mbarrier_arrive(empty, s)

            lead = tid % 128 == 0                    # arrives for the warpgroup
            # Descriptors of stage 0 (swizzled K-major: 8-row groups 1024 bytes apart);
            # stage s, m64 block mw and k16 step ks lie (s A_TILE + 64 mw BK + 16 ks) x 2
            # bytes further, added to the address field (bytes >> 4).
            da0 = tk.wgmma_descriptor(tk.smem_address(sa, row0 * BK), 16, 1024, 128)
            db0 = tk.wgmma_descriptor(tk.smem_address(sb, 0), 16, 1024, 128)
            acc = [[tk.var(0.0) for _ in range(BN // 2)] for _ in range(MW)]
            stage, phase = tk.var(0), tk.var(0)
            box = tk.var(0)                          # EPILOGUE 2: the warp's next buffer
            for tile in tk.range(first, ntiles, step):
                m0, n0 = tile_origin(tile)
                prev = tk.var(0)                     # the stage read by the last group
                for kt in tk.range(nk):
                    tk.mbarrier_wait(full, stage, phase)
                    tk.wgmma_fence()
                    su = tk.cast(stage, u64)
                    da, db = da0 + su * (A_TILE // 8), db0 + su * (B_TILE // 8)
                    cur = [tuple(a) for a in acc]
                    for ks in range(BK // 16):
                        for mw in range(MW):         # a tile's first step zeroes acc
                            cur[mw] = tk.wgmma(da + (64 * mw * BK + 16 * ks) // 8,
                                               db + ks * 2, cur[mw], BN, dtype=T,
                                               scale_d=(kt > 0) if ks == 0 else 1)
                    tk.wgmma_commit()
                    tk.wgmma_wait(1)                 # the previous group retired:
                    for mw in range(MW):
                        for i in range(BN // 2):
                            acc[mw][i].set(cur[mw][i])
                    with tk.if_(lead & (kt > 0)):
                        release(prev)                # its stage goes back
                    prev.set(stage)
                    stage.set(stage + 1)
                    with tk.if_(stage == STAGES):
                        stage.set(0)
                        phase.set(phase ^ 1)
                tk.wgmma_wait(0)
                with tk.if_(lead):
                    release(prev)
                # The D fragment -> c, inside only: warp w, lane (g, t) holds rows
                # 16 w + g (+ 8) and columns 8 j + 2 t, + 1 of each m64 block.
                w, lane = (tid // 32) % 4, tid % 32
                g, t = lane // 4, lane % 4
                for mw in range(MW):
                    top = m0 + row0 + 64 * mw + 16 * w   # the warp's 16 rows
                    if EPILOGUE == 1:
                        mine = (tid // 32 - 4) * 16 * PITCH  # this warp's staging rows
                        for q in range(BN // CW):            # 128-byte column chunks
                            for h in range(2):
                                for j in range(VEC):
                                    jj = q * VEC + j
                                    so.vstore(mine + (g + 8 * h) * PITCH + 8 * j + 2 * t,
                                              (rounded(acc[mw][4 * jj + 2 * h]),
                                               rounded(acc[mw][4 * jj + 2 * h + 1])))
                            tk.syncwarp()
                            for it in range(4):              # 4 rows x 8 lanes per pass
                                row = 4 * it + lane // 8
                                vals = so.vload(mine + row * PITCH + (lane % 8) * VEC, VEC)
                                col = n0 + q * CW + (lane % 8) * VEC
                                with tk.if_((top + row < M) & (col < N)):
                                    c.vstore((top + row) * N + col, vals)
                            tk.syncwarp()
                    elif EPILOGUE == 2:
                        for q in range(BN // CW):            # 128-byte column chunks
                            buf = (tid // 32 - 4) * 2 * 16 * CW + box * (16 * CW)
                            with tk.if_(lane == 0):          # its store 2 boxes ago is
                                tk.tma_store_wait(1)         # done with the buffer
                            tk.syncwarp()
                            for h in range(2):
                                for j in range(VEC):
                                    # (row, 16-byte unit) of the pair in the swizzled box
                                    row, unit = g + 8 * h, (8 * j + 2 * t) // VEC
                                    at = row * CW + (unit ^ g) * VEC + (2 * t) % VEC
                                    jj = q * VEC + j
                                    so.vstore(buf + at,
                                              (rounded(acc[mw][4 * jj + 2 * h]),
                                               rounded(acc[mw][4 * jj + 2 * h + 1])))
                            tk.fence_proxy_async()           # visible to the TMA unit
                            tk.syncwarp()
                            with tk.if_(lane == 0):
                                tk.tma_store(tc, n0 + q * CW, top, so, buf)
                                tk.tma_store_commit()
                            box.set(box ^ 1)
                    else:
                        for h in range(2):
                            r = top + g + 8 * h
                            for j in range(BN // 8):
                                col = n0 + 8 * j + 2 * t
                                pair = (rounded(acc[mw][4 * j + 2 * h]),
                                        rounded(acc[mw][4 * j + 2 * h + 1]))
                                if PAIRS:
                                    with tk.if_((r < M) & (col < N)):
                                        c.vstore(r * N + col, pair)
                                else:
                                    for e in range(2):
                                        with tk.if_((r < M) & (col + e < N)):
                                            c[r * N + col + e] = pair[e]
            if EPILOGUE == 2:
                with tk.if_(tid % 32 == 0):
                    tk.tma_store_wait(0)             # the buffers are read before exit
        if CLUSTER > 1:
            tk.cluster_sync()                        # no block leaves while peers arrive

    return gemm_wgmma


#: The epilogues (the kernel's EPILOGUE) and the shared bytes each needs per consumer warp.
EPILOGUES = {"direct": 0, "staged": 1, "tma": 2}
_EPILOGUE_BYTES = {0: 0, 1: 16 * 144, 2: 2 * 16 * 128}


def shared_bytes(BN: int = 256, WM: int = 64, CONSUMERS: int = 2, STAGES: int = 4,
                 epilogue: str = "direct") -> int:
    """Dynamic shared memory of one block: STAGES tiles of a and bt, and the epilogue's
    buffers (16 rows of 144 bytes per consumer warp staged, two 16 x 128-byte boxes with
    TMA stores)."""
    return (STAGES * (WM * CONSUMERS + BN) * BK * 2
            + CONSUMERS * 4 * _EPILOGUE_BYTES[EPILOGUES[epilogue]])


def sm_count() -> int:
    """Multiprocessors of CUDA device 0 (cuda-python's driver API)."""
    from cuda.bindings import driver as cu

    cu.cuInit(0)
    _, dev = cu.cuDeviceGet(0)
    attr = cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
    return int(cu.cuDeviceGetAttribute(attr, dev)[1])


def check_tiles(K: int, BN: int, WM: int, CONSUMERS: int, STAGES: int,
                GROUP_M: int) -> None:
    """ValueError naming the first parameter out of range."""
    for name, ok, want in (
            ("K", K % 8 == 0 and K > 0, "a positive multiple of 8"),
            ("BN", BN % 16 == 0 and 16 <= BN <= 256, "a multiple of 16 from 16 to 256"),
            ("WM", WM in (64, 128), "64 or 128"),
            ("CONSUMERS", CONSUMERS in REGISTERS, "1, 2 or 3"),
            ("STAGES", STAGES >= 2, ">= 2"),
            ("GROUP_M", GROUP_M >= 1, ">= 1")):
        if not ok:
            given = dict(K=K, BN=BN, WM=WM, CONSUMERS=CONSUMERS, STAGES=STAGES,
                         GROUP_M=GROUP_M)[name]
            raise ValueError(f"{name} must be {want}, got {given!r}")
    if WM * CONSUMERS > 256:
        raise ValueError(f"WM x CONSUMERS must be at most 256 (a TMA box), got {WM * CONSUMERS}")
    if WM // 64 * BN // 2 > (REGISTERS[CONSUMERS] or (0, 232))[1] - 32:
        raise ValueError(f"WM={WM} x BN={BN} needs {WM // 64 * BN // 2} accumulators per "
                         f"thread: too many for {CONSUMERS} consumer warpgroup(s)")


#: prepare()'s tile keywords when none is given, and the configuration it starts from
#: when some are.
DEFAULTS: dict[str, Any] = dict(BN=256, WM=64, CONSUMERS=2, STAGES=4, GROUP_M=8,
                                blocks=None, epilogue="staged", cluster=1)
#: The configurations measured fastest on the H200 (bench/sweep_wgmma.py, session 10:
#: docs/benchmarks.md), by input type and problem size (M, N and K each at least that
#: size, the largest listed that fits), for an output in the input type on the GPU: the
#: staged epilogue with 128 persistent blocks (of 132 multiprocessors: 512 and 2048
#: tiles of 128 x 256 at 4096^3 and 8192^3 are then whole waves of 4 and 16 tiles a
#: block) won all four rows, by 0-4 % over 132 blocks and 2-8 % over TMA stores.
TUNED: dict[tuple[str, int], dict[str, Any]] = {
    (dtype, size): dict(epilogue="staged", blocks=128)
    for dtype in ("float16", "bfloat16") for size in (4096, 8192)
}


def tuned(M: int, N: int, K: int, dtype: str, out: str) -> dict[str, Any]:
    """The tile keywords :func:`prepare` uses for this problem when given none: TUNED's
    entry for the largest size that M, N and K all reach (output in the input type),
    else DEFAULTS."""
    sizes = [n for (d, n) in TUNED if d == dtype and min(M, N, K) >= n and out == dtype]
    return dict(DEFAULTS, **TUNED[dtype, max(sizes)]) if sizes else dict(DEFAULTS)


def prepare(c: object, a: object, bt: object, M: int, N: int, K: int,
            dtype: str = "float16", BN: int | None = None, WM: int | None = None,
            CONSUMERS: int | None = None, STAGES: int | None = None,
            GROUP_M: int | None = None, blocks: int | None = None,
            epilogue: str | None = None, cluster: int | None = None,
            bf16_nan: str = "canonical", **launch: object) -> Callable[[], None]:
    """Check the arguments and build the tensor maps once (on the GPU they are copied to
    device memory once); returns the launch of ``c[M, N] = a[M, K] @ bt[N, K].T``.

    NumPy arrays run on the CPU target, GPU arrays (DeviceArray, CUDA tensors) on the GPU.
    ``c`` holds float32 or the input type. The tile keywords (``BN`` ... ``cluster``):
    with none given, on the GPU, the configuration :func:`tuned` gives for the shape;
    otherwise those given over DEFAULTS (128 x 256 tiles, 4 stages, staged epilogue).
    ``blocks``: persistent blocks (default one per multiprocessor on the GPU, 3 on the CPU
    target). ``epilogue``: ``"direct"`` stores from the accumulators, ``"staged"``
    through shared memory with 16-byte stores, ``"tma"`` through shared memory with TMA
    stores (both where rows of ``c`` are whole 16-byte units and BN whole 128-byte
    chunks; else direct). ``cluster``: blocks per thread-block cluster (1 or 2;
    ``blocks`` is then rounded down to a multiple). ``bf16_nan``: how a bfloat16 ``c`` is
    rounded, ``tk.cast``'s ``nan``: ``"canonical"`` (the hardware's conversion, a NaN
    becomes 0x7FFF) or ``"keep"`` (software, a NaN keeps its sign and payload bits)."""
    # c's element type by name: torch says "torch.float16", NumPy and Thork's DeviceArray
    # (a tk.dt type) have .name.
    d = getattr(c, "dtype", "float32")
    out = str(d).removeprefix("torch.") if hasattr(c, "element_size") \
        else str(getattr(d, "name", d))
    if out not in ("float32", dtype):
        raise ValueError(f"c must hold float32 or {dtype}, got {out}")
    on_cpu = isinstance(a, np.ndarray) or launch.get("target") == "cpu"
    given = {k: v for k, v in dict(BN=BN, WM=WM, CONSUMERS=CONSUMERS, STAGES=STAGES,
                                   GROUP_M=GROUP_M, blocks=blocks, epilogue=epilogue,
                                   cluster=cluster).items() if v is not None}
    cfg = dict(DEFAULTS, **given) if given or on_cpu else tuned(M, N, K, dtype, out)
    BN, WM, CONSUMERS, STAGES, GROUP_M = (cfg["BN"], cfg["WM"], cfg["CONSUMERS"],
                                          cfg["STAGES"], cfg["GROUP_M"])
    blocks, epilogue, cluster = cfg["blocks"], cfg["epilogue"], cfg["cluster"]
    check_tiles(K, BN, WM, CONSUMERS, STAGES, GROUP_M)
    if cluster not in (1, 2):
        raise ValueError(f"cluster must be 1 or 2, got {cluster!r}")
    if epilogue not in EPILOGUES:
        raise ValueError(f"epilogue must be one of {', '.join(EPILOGUES)}, got {epilogue!r}")
    if bf16_nan not in ("canonical", "keep"):
        raise ValueError(f"bf16_nan must be 'canonical' or 'keep', got {bf16_nan!r}")
    if M * N >= 2**31:
        raise ValueError(f"M x N must be below 2**31 (int32 indices), got {M * N}")
    bm = WM * CONSUMERS
    ta = tk.tensor_map(a, (bm, BK), swizzle=128)
    tb = tk.tensor_map(bt, (BN // cluster, BK), swizzle=128)
    if not on_cpu:
        from thork_core import DeviceArray

        ta, tb = DeviceArray.from_host(ta), DeviceArray.from_host(tb)
    tiles = -(-M // (bm * cluster)) * -(-N // BN) * cluster
    if blocks is None:
        blocks = 3 if on_cpu else sm_count()
    blocks = max(min(blocks, tiles) // cluster * cluster, cluster)
    size = 4 if out == "float32" else 2
    if N * size % 16 or BN % (128 // size):
        epilogue = "direct"
    tc = ta                                          # (unused but for TMA stores)
    if epilogue == "tma":
        tc = tk.tensor_map(c, (16, 128 // size), swizzle=128)
        if not on_cpu:
            tc = DeviceArray.from_host(tc)
    kernel = gemm_kernel(dtype, out)[blocks, 128 * (1 + CONSUMERS),
                                     shared_bytes(BN, WM, CONSUMERS, STAGES, epilogue)]
    args = (c, ta, tb, tc, M, N, K, BN, WM, CONSUMERS, STAGES, GROUP_M, N % 2 == 0,
            EPILOGUES[epilogue], cluster, bf16_nan == "canonical")
    return lambda: kernel(*args, **launch)


def gemm(c: object, a: object, bt: object, M: int, N: int, K: int, dtype: str = "float16",
         **tile: Any) -> None:
    """``c[M, N] = a[M, K] @ bt[N, K].T`` once (:func:`prepare`'s arguments)."""
    prepare(c, a, bt, M, N, K, dtype, **tile)()


def hopper_gpu() -> bool:
    """Whether the default target is a GPU that runs sm_90a code."""
    from thork_core import gpu_arch, plugins

    t = plugins().targets()[0]
    return t.name == "gpu" and bool(t.available()[0]) and gpu_arch().startswith("sm_90")


def check(M: int, N: int, K: int, dtype: str, rng: np.random.Generator, out: str = "float32",
          **tile: int) -> float:
    """Run once on fresh inputs; the worst error relative to the bound K 2^-22 sum|a b|
    (plus the output's rounding, 2^-8 |c| for bfloat16, 2^-11 for float16)."""
    import ml_dtypes  # noqa: F401  (NumPy's bfloat16)

    np_t = np.float16 if dtype == "float16" else np.dtype("bfloat16")
    np_out = np.float32 if out == "float32" else np_t
    a = rng.standard_normal((M, K)).astype(np_t)
    b = rng.standard_normal((K, N)).astype(np_t)
    bt = np.ascontiguousarray(b.T)
    c0 = np.full((M, N), np.nan, np.float32).astype(np_out)
    if hopper_gpu():
        from thork_core import DeviceArray

        da, dbt, dc = DeviceArray.from_host(a), DeviceArray.from_host(bt), \
            DeviceArray.from_host(c0)
        gemm(dc, da, dbt, M, N, K, dtype, **tile)
        c = dc.to_host()
    else:
        c = c0
        gemm(c, a, bt, M, N, K, dtype, target="cpu", **tile)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = a64 @ b64
    rounding = 0.0 if out == "float32" else 2.0**-8 if dtype == "bfloat16" else 2.0**-11
    accumulation = K * 2.0**-22 * (np.abs(a64) @ np.abs(b64))
    bound = (1 + rounding) * accumulation + rounding * np.abs(ref) + 1e-30
    return float(np.max(np.abs(c.astype(np.float64) - ref) / bound))


def main() -> None:
    rng = np.random.default_rng()
    where = "gpu" if hopper_gpu() else "cpu (the model)"
    for M, N, K, tile in ((77, 45, 136, {}),                      # edges in M, N and K
                          (130, 70, 200, dict(BN=64, STAGES=3)),  # 3 x 2 tiles, 3 blocks
                          (200, 96, 72, dict(BN=32, WM=128, CONSUMERS=1, STAGES=2)),
                          (136, 200, 64, dict(BN=128, epilogue="staged")),
                          (200, 136, 128, dict(BN=128, epilogue="tma", cluster=2))):
        for dtype in ("float16", "bfloat16"):
            for out in ("float32", dtype):
                worst = check(M, N, K, dtype, rng, out, **tile)
                status = "ok" if worst <= 1.0 else "MISMATCH"
                print(f"{dtype} -> {out} {M}x{N}x{K} on {where}: error / bound = "
                      f"{worst:.3f} {status}")
                assert worst <= 1.0
    try:
        cubin = gemm_kernel("float16").artifact("sm_90")
    except tk.PluginError as exc:  # no CUDA compiler plugin installed
        print(f"sm_90a cubin: not built ({exc})")
    else:
        print(f"{cubin.arch} cubin: {len(cubin.data)} bytes")


if __name__ == "__main__":
    main()
