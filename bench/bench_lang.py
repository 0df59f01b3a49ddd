"""thork-trace kernels against the same algorithms hand-written in CUDA C++ (nvcc).

For the tiled matmul, the shared-memory block reduction, the padded tiled transpose, a
shaped-array stencil (``DevicePointer[f32, 2]``, extents from the arguments), a
vector-typed n-body (``tk.float4`` loads, ``tk.float3`` arithmetic) and a grid-synchronised
Jacobi solver (``tk.this_grid().sync()``, one cooperative launch; cooperative groups on the
CUDA side),
times the Thork kernel and a hand-written CUDA C++ twin (compiled with nvcc at run time,
loaded and launched through the cuda-python driver API) in the same process, with CUDA
events, medians after warm-up. A grid-stride copy kernel gives the bandwidth ceiling.
Prints a table of ratios (goal: thork/cuda <= 1.05). Then softmax and layer norm (M = 4096
rows, N = 1024..16384, fp32 and fp16) against Triton row kernels written in the style of its
tutorials and torch, with ``triton.testing.do_bench`` medians, the median of 3 interleaved
rounds (each printed; every side writing one shared output) (goals: >= 1.0x Triton, >= 90 %
of a same-bytes device copy for N >= 4096); skipped without torch/Triton. In the same
rounds, the self-comparison anchors (session 12): Triton's kernel against an identical
second copy of itself and Thork's against its twin (``--no-twins`` leaves them out).

    python bench/bench_lang.py --out DIR [--quick] [--rows-only] [--no-torch] [--no-twins]
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
from typing import Any, NamedTuple

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


@tk.jit
def stencil2d(out: tk.DevicePointer[f32, 2], a: tk.DevicePointer[f32, 2]):
    """Shaped-array 5-point Laplacian on the interior (extents from the arguments)."""
    x = tk.block_idx(signed=True).x * tk.block_dim(signed=True).x + tk.thread_idx(signed=True).x
    y = tk.block_idx(signed=True).y * tk.block_dim(signed=True).y + tk.thread_idx(signed=True).y
    h, w = a.shape
    with tk.if_((y > 0) & (y < h - 1) & (x > 0) & (x < w - 1)):
        out[y, x] = a[y - 1, x] + a[y + 1, x] + a[y, x - 1] + a[y, x + 1] - 4.0 * a[y, x]


NBODY_EPS2 = 0.01


@tk.func
def _pull(pi: Any, pj: Any) -> Any:
    d = tk.float3(pj.x - pi.x, pj.y - pi.y, pj.z - pi.z)
    inv = tk.rsqrt(tk.dot(d, d) + NBODY_EPS2)
    return d * (pj.w * inv * inv * inv)


@tk.jit
def nbody(acc: tk.DevicePointer[f32], pos: tk.DevicePointer[f32], n: i32):
    """All-pairs softened gravity with float4 loads, float3 arithmetic, a helper
    returning a vector."""
    i = tk.cast(tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x, i32)
    with tk.if_(i < n):
        pi = tk.float4.load(pos, i)
        a = tk.float3.var(0.0)
        for j in tk.range(n):
            a += _pull(pi, tk.float4.load(pos, j))
        tk.float4.store(acc, i, tk.float4(a.x, a.y, a.z, 0.0))


def make_jacobi(unroll: int = 0) -> Any:
    """The grid-synchronised Jacobi solver; ``unroll`` asks the compiler to unroll the
    grid-stride loop (0: its own choice)."""

    @tk.jit(name=f"jacobi_u{unroll}" if unroll else "jacobi")
    def jacobi(u: tk.DevicePointer[f32, 2], v: tk.DevicePointer[f32, 2], iters: i32):
        """``iters`` Jacobi sweeps (Laplace, borders fixed) in one cooperative launch: a
        grid barrier between sweeps, grid-stride loops, ping-pong through a run-time
        choice."""
        h, w = u.shape
        stride = tk.cast(tk.grid_dim().x * tk.block_dim().x, i32)
        first = tk.cast(tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x, i32)
        for it in tk.range(iters):
            src = tk.where(it % 2 == 0, u, v)
            dst = tk.where(it % 2 == 0, v, u)
            for k in tk.range(first, h * w, stride, unroll=unroll):
                y, x = k // w, k % w
                with tk.if_((y > 0) & (y < h - 1) & (x > 0) & (x < w - 1)):
                    dst[k] = 0.25 * (src[k - w] + src[k + w] + src[k - 1] + src[k + 1])
                with tk.else_():
                    dst[k] = src[k]
            tk.this_grid().sync()

    return jacobi


jacobi = make_jacobi()


# -- row kernels (softmax, layer norm): the row held in registers --------------------------
LOG2E = 1.4426950408889634


class RowConfig(NamedTuple):
    """How a row kernel is laid out.

    * ``threads``: threads per row (a multiple of 32; a warp per row needs no shared
      memory), ``rows``: row groups of ``threads`` threads per block (block =
      ``threads * rows`` <= 1024; each group reduces its own row).
    * ``batch``: rows each group holds at once: the loads of all of them are issued before
      any reduction, and their reductions run interleaved (one barrier for all).
    * ``persist``: 0: one block per ``rows * batch`` rows; k > 0: a persistent grid of
      ``k`` blocks per SM looping over the rows, the next rows' loads issued (into
      registers) before the current rows' reductions and stores (software prefetch).
    * ``onepass``: one block-wide reduction (softmax's running max and sum, layer norm's
      mean and squared deviations merged pairwise) or two.
    * ``cache``: the cache operator of the row's loads and stores (``"cs"``: streaming,
      read and written once; None: plain).
    * ``early`` (layer norm): the weight and bias loads issued before the reductions (with
      ``persist``: once per block, before the loop) rather than after them.
    * ``load_evict`` / ``store_evict``: the L2 eviction priority (``evict=``: ``"first"``,
      ``"last"``, ``"normal"``, ``"unchanged"``; None: none) of the row's loads / stores
      (session 11, bench/diag_l2.py).
    * ``plain_stores``: the stores drop ``cache`` (the loads keep it).
    * ``min_blocks``: ``tk.launch_bounds(block, min_blocks)``, capping registers so that
      many blocks fit an SM (0: ``persist`` blocks for a persistent grid, 2 for other
      1024-thread blocks; else none).
    * ``stages`` (session 12, with ``persist``): 0: the next rows prefetched into
      registers (above); 1: a plain grid-stride loop (no prefetch: a grid that fills the
      machine exactly, no block launched after the first wave); k >= 2: a ring of ``k``
      row slots in shared memory filled by ``cp.async``, ``k - 1`` units ahead of the one
      being reduced (the loads in flight cost no registers: each thread copies, waits for
      and reads back only its own 16-byte pieces, so the ring needs no barrier).
    * ``fast`` (session 13): ``tk.fast`` math: softmax's exponentials as
      ``ex2.approx.ftz`` (no subnormal fix-up) and its ``1 / sum`` as ``rcp.approx.ftz``
      (no IEEE-division slow path), layer norm's ``rsqrt`` as ``rsqrt.approx.ftz``.
    """

    threads: int
    rows: int = 1
    onepass: bool = True
    cache: str | None = "cs"
    min_blocks: int = 0
    batch: int = 1
    persist: int = 0
    early: bool = False
    load_evict: str | None = None
    store_evict: str | None = None
    plain_stores: bool = False
    stages: int = 0
    fast: bool = False

    @property
    def store_cache(self) -> str | None:
        """The cache operator of the row's stores."""
        return None if self.plain_stores else self.cache

    @property
    def block(self) -> int:
        return self.threads * self.rows

    @property
    def rows_per_unit(self) -> int:
        """Rows one block handles at a time (``rows * batch``)."""
        return self.rows * self.batch

    def tag(self) -> str:
        return (f"t{self.threads}" + (f"r{self.rows}" if self.rows > 1 else "")
                + (f"b{self.batch}" if self.batch > 1 else "")
                + (f"p{self.persist}" if self.persist else "")
                + (f"s{self.stages}" if self.stages else "")
                + ("" if self.onepass else "_2p") + (f"_{self.cache}" if self.cache else "")
                + ("_e" if self.early else "")
                + ("_ps" if self.plain_stores else "")
                + (f"_l{self.load_evict[0]}" if self.load_evict else "")
                + (f"_s{self.store_evict[0]}" if self.store_evict else "")
                + (f"_lb{self.min_blocks}" if self.min_blocks else "")
                + ("_fast" if self.fast else ""))

    def bound(self) -> None:
        """Declare the launch bounds (inside the kernel)."""
        mb = self.min_blocks or self.persist or (2 if self.block == 1024 else 0)
        if mb:
            tk.launch_bounds(self.block, mb)

    def grid(self, m_rows: int, sms: int = 132) -> int:
        """Blocks to launch for ``m_rows`` rows (``sms``: the GPU's multiprocessors, for a
        persistent grid)."""
        unit = self.rows_per_unit
        if m_rows <= 0 or m_rows % unit:
            raise ValueError(f"m_rows: expected a positive multiple of rows * batch = {unit} "
                             f"for layout {self.tag()}, got {m_rows}")
        units = m_rows // unit
        return min(units, sms * self.persist) if self.persist else units

def row_threads(n: int, itemsize: int, row_bytes: int) -> int:
    """Threads per row block holding ``row_bytes`` of the row each (32 to 1024)."""
    return max(32, min(1024, n * itemsize // row_bytes))


def softmax_threads(n: int) -> int:
    """Softmax (session 9): 16 elements of the row per thread (fp16 and fp32 alike)."""
    return max(32, min(1024, n // 16))


def layer_norm_threads(n: int, itemsize: int) -> int:
    """Layer norm (session 9): 32 bytes of the row per thread (its weight and bias double
    the loads), at least 4 warps, and at most 512 threads where a thread holds more than 8
    elements (16 floats with their weight and bias take about 40 registers; a 1024-thread
    block of those fills an SM's registers alone)."""
    t = max(128, row_threads(n, itemsize, 32))
    return 512 if t > 512 and n // t > 8 else t


def _layout_file(op: str, dtype: Any, n: int) -> RowConfig | None:
    """The layout that ``$BENCH_LANG_LAYOUTS`` (a ``layouts.json`` written by
    bench/diag_lang.py) names for this op and size, to time a sweep's picks; else None."""
    path = os.environ.get("BENCH_LANG_LAYOUTS")
    if not path:
        return None
    got = json.loads(Path(path).read_text()).get(f"{op}/{dtype.name}/{n}")
    return RowConfig(**got) if got else None


# The layout of each case (M = 4096, H200; docs/benchmarks.md, "Language benches: softmax
# and layer norm"): h-lang's session-10 sweep, replaced where h-lang2's session-10 call
# (d99f289) had a new layout win both its sweep and bench_lang's confirmation: persistent
# grids prefetching the next rows (persist), two rows a group (batch), layer norm's weight
# and bias loaded first (early). Streaming ("cs") accesses only where the data is small
# (at N >= 4096 they cost about 5 %). Softmax fp16 2048 / 4096 / 8192: h-soft's session-10
# call (run 15, docs/benchmarks.md "Softmax fp16: the generated code against Triton's"):
# twice the row a thread (two rows a 256-thread block at 4096), the sweep's winners.
# Session 12 (h12-rows, bench/diag_rows.py, docs/benchmarks.md "Row kernels: persistent
# cp.async rings and the self-comparison anchor"): softmax fp32 2048 and layer norm fp32
# 1024 take a persistent grid fed by a cp.async ring (stages=2 / 3), the only new layouts
# ahead of their picks in every round; softmax fp16 8192 goes back to h-lang2's 512
# threads (4 runs each: 1.018 1.001 1.003 0.999 against 1.009 1.015 0.983 0.979).
# Session 13 (h13-rows, no GPU, bench/sass_rows.py; docs/benchmarks.md "Session 13, row
# kernels against Triton's SASS"): layer norm fp16 1024 and fp32 2048 take two rows a
# group (batch=2: the weight and bias loaded once for both, 2.00x the row read a row
# against Triton's 3.00x; twice Triton's rows resident an SM; fewer warp instructions a
# row), picked by instruction and byte counts, not yet timed (bench/GPU_PENDING.md; the
# session-12 picks t128_2p and t256_e are timed beside them by bench/diag_rows.py).
_PLAIN, _CS = None, "cs"
LAYOUTS: dict[tuple[str, str, int], RowConfig] = {
    ("softmax", "float16", 1024): RowConfig(32, cache=_CS),
    ("softmax", "float16", 2048): RowConfig(128, onepass=False, cache=_CS),
    ("softmax", "float16", 4096): RowConfig(128, rows=2, onepass=False, cache=_PLAIN),
    ("softmax", "float16", 8192): RowConfig(512, onepass=False, cache=_PLAIN),
    ("softmax", "float16", 16384): RowConfig(1024, cache=_PLAIN),
    ("softmax", "float32", 1024): RowConfig(64, onepass=False, cache=_CS, persist=16),
    ("softmax", "float32", 2048): RowConfig(128, onepass=False, cache=_PLAIN, persist=12,
                                            stages=2),
    ("softmax", "float32", 4096): RowConfig(256, onepass=False, cache=_PLAIN),
    ("softmax", "float32", 8192): RowConfig(512, onepass=False, cache=_PLAIN),
    ("softmax", "float32", 16384): RowConfig(1024, onepass=False, cache=_PLAIN),
    ("layer_norm", "float16", 1024): RowConfig(128, onepass=False, cache=_PLAIN, batch=2),
    ("layer_norm", "float16", 2048): RowConfig(128, cache=_PLAIN, persist=8),
    ("layer_norm", "float16", 4096): RowConfig(256, onepass=False, cache=_PLAIN),
    ("layer_norm", "float16", 8192): RowConfig(512, onepass=False, cache=_PLAIN),
    ("layer_norm", "float16", 16384): RowConfig(512, cache=_PLAIN),
    ("layer_norm", "float32", 1024): RowConfig(128, cache=_CS, persist=8, stages=3),
    ("layer_norm", "float32", 2048): RowConfig(128, onepass=False, cache=_PLAIN, batch=2,
                                               min_blocks=8),
    ("layer_norm", "float32", 4096): RowConfig(512, cache=_PLAIN, early=True),
    ("layer_norm", "float32", 8192): RowConfig(1024, onepass=False, cache=_PLAIN, early=True),
    ("layer_norm", "float32", 16384): RowConfig(512, cache=_PLAIN, early=True),
}

# Where h-lang2's sweep (d99f289) differs from LAYOUTS above: the session-10 (h-lang) pick
# that diag_lang's candidates vary, so that a re-sweep starts from the same kernels.
SWEEP_BASES: dict[tuple[str, str, int], RowConfig] = {
    ("softmax", "float16", 2048): RowConfig(128, cache=_CS),
    ("softmax", "float32", 1024): RowConfig(64, onepass=False, cache=_CS),
    ("softmax", "float32", 2048): RowConfig(128, onepass=False, cache=_PLAIN),
    ("layer_norm", "float16", 2048): RowConfig(128, cache=_PLAIN),
    ("layer_norm", "float32", 1024): RowConfig(128, cache=_CS),
    ("layer_norm", "float32", 2048): RowConfig(256, cache=_PLAIN),
    ("layer_norm", "float32", 4096): RowConfig(512, cache=_PLAIN),
    ("layer_norm", "float32", 8192): RowConfig(1024, onepass=False, cache=_PLAIN),
    ("layer_norm", "float32", 16384): RowConfig(512, cache=_PLAIN),
}


def softmax_config(dtype: Any, n: int) -> RowConfig:
    """The layout bench_lang times for softmax: :data:`LAYOUTS` (chosen by
    bench/diag_lang.py, session 10), else :func:`softmax_threads` plain."""
    return (_layout_file("softmax", dtype, n) or LAYOUTS.get(("softmax", dtype.name, n))
            or RowConfig(softmax_threads(n), cache=None))


def layer_norm_config(dtype: Any, n: int) -> RowConfig:
    """The layout bench_lang times for layer norm: :data:`LAYOUTS`, else
    :func:`layer_norm_threads` plain."""
    return (_layout_file("layer_norm", dtype, n)
            or LAYOUTS.get(("layer_norm", dtype.name, n))
            or RowConfig(layer_norm_threads(n, dtype.itemsize), cache=None))


def _lane_reduce(vals: tuple[Any, ...], combine: Any, width: int, step_arg: bool = False
                 ) -> tuple[Any, ...]:
    """Butterfly over ``width`` lanes of a tuple of values: ``combine(a, b[, lanes])``
    merges two partial results (``lanes``: how many lanes each side covers)."""
    step = width // 2
    k = 1
    while step >= 1:
        other = tuple(tk.shfl_xor(v, step, width) for v in vals)
        vals = combine(vals, other, k) if step_arg else combine(vals, other)
        step //= 2
        k *= 2
    return vals


def _batched(combine: Any, width: int, step_arg: bool) -> Any:
    """``combine`` (over tuples of ``width`` values) applied to each ``width``-long chunk
    of a longer tuple: the partial results of several rows reduced side by side."""
    def merged(a: tuple[Any, ...], b: tuple[Any, ...], *k: int) -> tuple[Any, ...]:
        out: tuple[Any, ...] = ()
        for i in range(0, len(a), width):
            out += tuple(combine(a[i:i + width], b[i:i + width], *k))
        return out
    return merged


def _block_reduce(vals: tuple[Any, ...], combine: Any, cfg: RowConfig, step_arg: bool = False,
                  parity: Any = None) -> tuple[Any, ...]:
    """``combine`` over the threads of a row group; every thread gets its group's result:
    warp butterflies, then (several warps per group) one value per warp through shared
    memory, one barrier, and a butterfly of width ``warps`` (lane l reads warp
    l % warps of its group: log2(warps) steps, not 5). ``parity`` (persistent loops: the
    iteration's parity) picks one of two scratch halves, so that a warp already in the next
    iteration cannot overwrite values another warp has not read yet."""
    vals = _lane_reduce(vals, combine, 32, step_arg)
    warps = cfg.threads // 32
    if warps == 1:
        return vals
    t = tk.cast(tk.thread_idx().x, i32)
    size = 64 if parity is not None else 32
    scratch = [tk.shared_array(f32, size) for _ in vals]
    half = parity * 32 if parity is not None else 0
    with tk.if_((t & 31) == 0):
        for s, v in zip(scratch, vals):
            s[half + (t >> 5)] = v
    tk.syncthreads()
    slot = half + (t & (warps - 1)) if cfg.rows == 1 else \
        half + ((t >> 5) & (32 - warps)) + (t & (warps - 1))
    got = tuple(s[slot] for s in scratch)
    if step_arg:  # the per-warp partials each cover 32 lanes
        return _lane_reduce(got, lambda a, b, k: combine(a, b, 32 * k), warps, True)
    return _lane_reduce(got, combine, warps)


def _lane(cfg: RowConfig) -> tuple[Any, Any]:
    """The thread's row group within the block and its lane within the group."""
    t = tk.cast(tk.thread_idx().x, i32)
    if cfg.rows == 1:
        return 0, t
    shift = cfg.threads.bit_length() - 1
    return t >> shift, t & (cfg.threads - 1)


def _vec(n: int, threads: int, itemsize: int) -> int:
    return min(16 // itemsize, n // threads)


def _offsets(n: int, threads: int, itemsize: int, lane: Any) -> list[Any]:
    """The element offsets (within a row) of the thread's 16-byte pieces."""
    vec = _vec(n, threads, itemsize)
    return [(j * threads + lane) * vec for j in range(n // (threads * vec))]


def _load_raw(x: Any, base: Any, offs: list[Any], vec: int, cache: str | None,
              evict: str | None = None) -> list[Any]:
    """The thread's elements of a row, in the array's dtype (16-byte loads)."""
    vals: list[Any] = []
    for off in offs:
        vals += list(x.vload(base + off, vec, cache=cache, evict=evict))
    return vals


def _store_row(out: Any, base: Any, offs: list[Any], vals: list[Any], cfg: RowConfig
               ) -> None:
    vec = len(vals) // len(offs)
    for j, off in enumerate(offs):
        out.vstore(base + off, [v.to(out.dtype) for v in vals[j * vec:(j + 1) * vec]],
                   cache=cfg.store_cache, evict=cfg.store_evict)


def _sum(vals: list[Any]) -> Any:
    """A pairwise sum (a tree: short dependency chains)."""
    while len(vals) > 1:
        vals = [vals[i] + vals[i + 1] if i + 1 < len(vals) else vals[i]
                for i in range(0, len(vals), 2)]
    return vals[0]


def _sum_sq(ds: list[Any]) -> Any:
    """The sum of ``d * d`` over ``ds`` as ``len(ds) // 8`` multiply-add chains (at least
    one), then a pairwise sum of the chains: one FFMA an element past each chain's first
    FMUL, where a pairwise sum of the products costs an FMUL and an FADD for every two
    elements more (session 13, bench/sass_rows.py: 4 FMUL and 4 FADD a thread fewer at
    16 elements; Triton's kernel sums them in one FFMA chain)."""
    k = max(1, len(ds) // 8)
    accs = [d * d for d in ds[:k]]
    for i, d in enumerate(ds[k:]):
        accs[i % k] = d * d + accs[i % k]
    return _sum(accs)


def _max(vals: list[Any]) -> Any:
    while len(vals) > 1:
        vals = [tk.fmax(vals[i], vals[i + 1]) if i + 1 < len(vals) else vals[i]
                for i in range(0, len(vals), 2)]
    return vals[0]


def _check_cfg(cfg: RowConfig, n: int, itemsize: int) -> None:
    vec = _vec(n, cfg.threads, itemsize)
    if (cfg.threads < 32 or cfg.threads & (cfg.threads - 1) or cfg.rows < 1
            or cfg.rows & (cfg.rows - 1) or n % (cfg.threads * vec) or cfg.block > 1024):
        raise ValueError(f"layout {cfg} does not tile a row of {n} elements: threads must "
                         "be a power of two >= 32, rows a power of two, threads * rows "
                         "<= 1024")
    if cfg.batch < 1 or cfg.persist < 0:
        raise ValueError(f"layout {cfg}: expected batch >= 1 and persist >= 0")
    if cfg.stages < 0 or cfg.stages > 8 or (cfg.stages and not cfg.persist):
        raise ValueError(f"layout {cfg}: stages expected 0, or 1 to 8 with persist > 0, "
                         f"got stages={cfg.stages}, persist={cfg.persist}")
    if cfg.stages >= 2 and cfg.stages * cfg.rows_per_unit * n * itemsize > 48 * 1024:
        raise ValueError(f"layout {cfg}: {cfg.stages} slots of {cfg.rows_per_unit} rows of "
                         f"{n * itemsize} bytes exceed 48 KiB of shared memory")
    if cfg.cache not in (None, "cs", "cg", "ca"):
        raise ValueError(f"layout {cfg}: cache expected None, 'cs', 'cg' or 'ca', "
                         f"got {cfg.cache!r}")
    for name, ev in (("load_evict", cfg.load_evict), ("store_evict", cfg.store_evict)):
        if ev not in (None, "first", "last", "normal", "unchanged"):
            raise ValueError(f"layout {cfg}: {name} expected None, 'first', 'last', "
                             f"'normal' or 'unchanged', got {ev!r}")


def _drive(cfg: RowConfig, n: int, x: Any, m_rows: Any, body: Any) -> None:
    """The row loop shared by both kernels: ``body(bases, offs, raws, parity)`` computes
    and stores the rows starting at ``bases`` (one per batch row) from their raw loaded
    elements. One block per unit of ``rows * batch`` rows, or (``persist``) a grid-stride
    loop over the units, the next unit's loads issued into registers before ``body``."""
    group, lane = _lane(cfg)
    vec = _vec(n, cfg.threads, x.dtype.itemsize)
    offs = _offsets(n, cfg.threads, x.dtype.itemsize, lane)
    per_unit = cfg.rows_per_unit

    def bases(unit: Any) -> list[Any]:
        first = unit * per_unit + group * cfg.batch
        return [(first + b) * n for b in range(cfg.batch)]

    def load(unit: Any) -> list[list[Any]]:
        return [_load_raw(x, base, offs, vec, cfg.cache, cfg.load_evict)
                for base in bases(unit)]

    unit0 = tk.cast(tk.block_idx().x, i32)
    if not cfg.persist:
        body(bases(unit0), offs, load(unit0), None)
        return
    units = m_rows // per_unit
    stride = tk.cast(tk.grid_dim().x, i32)
    if cfg.stages == 1:  # a grid that fills the machine, no prefetch
        it1 = tk.var(0)
        for unit in tk.range(unit0, units, stride):
            body(bases(unit), offs, load(unit), it1 & 1)
            it1 += 1
        return
    if cfg.stages >= 2:
        _drive_ring(cfg, n, x, units, unit0, stride, group, offs, vec, bases, body)
        return
    cur = [[tk.var(v, x.dtype) for v in row] for row in load(unit0)]
    nxt = [[tk.var(0.0, x.dtype) for _ in row] for row in cur]
    it = tk.var(0)
    for unit in tk.range(unit0, units, stride):
        with tk.if_(unit + stride < units):
            for vs, row in zip(nxt, load(unit + stride)):
                for v, got in zip(vs, row):
                    v.set(got)
        body(bases(unit), offs, [[v.get() for v in row] for row in cur], it & 1)
        for cs, ns in zip(cur, nxt):
            for c, v in zip(cs, ns):
                c.set(v)
        it += 1


def _drive_ring(cfg: RowConfig, n: int, x: Any, units: Any, unit0: Any, stride: Any,
                group: Any, offs: list[Any], vec: int, bases: Any, body: Any) -> None:
    """``stages >= 2``: the persistent loop fed by a ring of ``stages`` slots in shared
    memory (one per unit: ``rows * batch`` rows of ``n`` elements). The prologue starts
    ``cp.async`` copies of the block's first ``stages - 1`` units, one commit group each;
    iteration ``i`` starts the copy of unit ``i + stages - 1`` into the slot iteration
    ``i - 1`` read (its values already used by that iteration's stores), waits until at
    most ``stages - 1`` groups are in flight (unit ``i``'s has landed), reads its slot
    and runs ``body``. A group is committed every time (empty past the last unit) so
    that the wait's count is the same in every iteration. Each thread copies and reads
    back only its own pieces: no barrier guards the ring."""
    k = cfg.stages
    per_unit = cfg.rows_per_unit
    ring = tk.shared_array(x.dtype, k * per_unit * n)
    nbytes = vec * x.dtype.itemsize

    def slot_row(slot: Any, b: int) -> Any:
        return (slot * per_unit + group * cfg.batch + b) * n

    def start(unit: Any, slot: Any) -> None:
        with tk.if_(unit < units):
            for b, base in enumerate(bases(unit)):
                srow = slot_row(slot, b)
                for off in offs:
                    tk.cp_async(ring, srow + off, x, base + off, nbytes)
        tk.cp_async_commit()

    for s in range(k - 1):
        start(unit0 + s * stride, s)
    it = tk.var(0)
    for unit in tk.range(unit0, units, stride):
        slot = it % k
        start(unit + (k - 1) * stride, (it + (k - 1)) % k)
        tk.cp_async_wait(k - 1)
        raws = [_load_raw(ring, slot_row(slot, b), offs, vec, None)
                for b in range(cfg.batch)]
        body(bases(unit), offs, raws, it & 1)
        it += 1


def make_softmax(dtype: Any, n: int, cfg: RowConfig | None = None, twin: bool = False
                 ) -> Any:
    """Row softmax of an M x n array, laid out by ``cfg`` (default
    :func:`softmax_config`); launch ``[cfg.grid(M, sms), cfg.block](out, x, M)``.
    ``twin``: the same kernel under another name (its own module: the self-comparison
    anchor of bench_lang's rows)."""
    cfg = cfg or softmax_config(dtype, n)
    _check_cfg(cfg, n, dtype.itemsize)
    exp2 = tk.fast.exp2 if cfg.fast else tk.exp2

    def rcp(s: Any) -> Any:
        return tk.fast.rcp(s) if cfg.fast else 1.0 / s

    def merge(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, Any]:
        # (max, sum of exp2((x - max) * log2e)) of two parts; the smaller max's sum is
        # scaled by exp2((small - big) * log2e) <= 1 (one exp a step)
        m = tk.fmax(a[0], b[0])
        lo = tk.fmin(a[0], b[0])
        scale = exp2((lo - m) * LOG2E)
        big_s = tk.where(a[0] >= b[0], a[1], b[1])
        small_s = tk.where(a[0] >= b[0], b[1], a[1])
        return m, big_s + small_s * scale

    def fmax1(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any]:
        return (tk.fmax(a[0], b[0]),)

    def add1(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any]:
        return (a[0] + b[0],)

    @tk.jit(name=f"softmax_{dtype.name}_{n}_{cfg.tag()}" + ("_twin" if twin else ""))
    def softmax(out: tk.DevicePointer[dtype], x: tk.DevicePointer[dtype], m_rows: i32):
        cfg.bound()

        def body(bases: list[Any], offs: list[Any], raws: list[list[Any]], par: Any
                 ) -> None:
            rows = [[v.to(f32) for v in raw] for raw in raws]
            m_own = [_max(vals) for vals in rows]
            if cfg.onepass:
                ml = [m * LOG2E for m in m_own]
                es = [[exp2(v * LOG2E - mlb) for v in vals] for vals, mlb in zip(rows, ml)]
                parts: tuple[Any, ...] = ()
                for mb, eb in zip(m_own, es):
                    parts += (mb, _sum(eb))
                red = _block_reduce(parts, _batched(merge, 2, False), cfg, parity=par)
                fs = [exp2(ml[b] - red[2 * b] * LOG2E) * rcp(red[2 * b + 1]) if cfg.fast
                      else exp2(ml[b] - red[2 * b] * LOG2E) / red[2 * b + 1]
                      for b in range(len(rows))]
            else:
                ms = _block_reduce(tuple(m_own), _batched(fmax1, 1, False), cfg,
                                   parity=par)
                es = [[exp2(v * LOG2E - m * LOG2E) for v in vals]
                      for vals, m in zip(rows, ms)]
                ss = _block_reduce(tuple(_sum(eb) for eb in es), _batched(add1, 1, False),
                                   cfg, parity=par)
                fs = [rcp(s) for s in ss]
            for base, eb, f in zip(bases, es, fs):
                _store_row(out, base, offs, [e * f for e in eb], cfg)

        _drive(cfg, n, x, m_rows, body)

    return softmax


def make_layer_norm(dtype: Any, n: int, cfg: RowConfig | None = None, twin: bool = False
                    ) -> Any:
    """Row layer norm of an M x n array, laid out by ``cfg`` (default
    :func:`layer_norm_config`); launch
    ``[cfg.grid(M, sms), cfg.block](out, x, weight, bias, eps, M)``; ``twin`` as
    :func:`make_softmax`'s."""
    cfg = cfg or layer_norm_config(dtype, n)
    _check_cfg(cfg, n, dtype.itemsize)
    per = n // cfg.threads  # elements a thread holds of each row

    def merge(a: tuple[Any, ...], b: tuple[Any, ...], k: int) -> tuple[Any, Any]:
        # (mean, sum of squared deviations) of two parts of k * per elements each (Chan et
        # al.): the means average; M2 gains (mean_b - mean_a)^2 * (k * per) / 2
        d = b[0] - a[0]
        return (a[0] + b[0]) * 0.5, a[1] + b[1] + d * d * (0.5 * k * per)

    def add1(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any]:
        return (a[0] + b[0],)

    @tk.jit(name=f"layer_norm_{dtype.name}_{n}_{cfg.tag()}" + ("_twin" if twin else ""))
    def layer_norm(out: tk.DevicePointer[dtype], x: tk.DevicePointer[dtype],
                   weight: tk.DevicePointer[dtype], bias: tk.DevicePointer[dtype],
                   eps: f32, m_rows: i32):
        cfg.bound()
        _, lane = _lane(cfg)
        vec = _vec(n, cfg.threads, dtype.itemsize)
        w_offs = _offsets(n, cfg.threads, dtype.itemsize, lane)

        def wb() -> tuple[list[Any], list[Any]]:
            return ([v.to(f32) for v in _load_raw(weight, 0, w_offs, vec, None)],
                    [v.to(f32) for v in _load_raw(bias, 0, w_offs, vec, None)])

        hoisted = wb() if cfg.early else None  # before the row's loads, or the loop

        def body(bases: list[Any], offs: list[Any], raws: list[list[Any]], par: Any
                 ) -> None:
            rows = [[v.to(f32) for v in raw] for raw in raws]
            if cfg.onepass:
                parts: tuple[Any, ...] = ()
                for vals in rows:
                    mu = _sum(vals) * (1.0 / per)
                    parts += (mu, _sum_sq([v - mu for v in vals]))
                red = _block_reduce(parts, _batched(merge, 2, True), cfg, step_arg=True,
                                    parity=par)
                means = [red[2 * b] for b in range(len(rows))]
                m2s = [red[2 * b + 1] for b in range(len(rows))]
            else:
                ss = _block_reduce(tuple(_sum(vals) for vals in rows),
                                   _batched(add1, 1, False), cfg, parity=par)
                means = [s * (1.0 / n) for s in ss]
                m2s = list(_block_reduce(
                    tuple(_sum_sq([v - mean for v in vals])
                          for vals, mean in zip(rows, means)),
                    _batched(add1, 1, False), cfg, parity=par))
            wv, bv = hoisted or wb()
            for base, vals, mean, m2 in zip(bases, rows, means, m2s):
                rstd = (tk.fast.rsqrt if cfg.fast else tk.rsqrt)(m2 * (1.0 / n) + eps)
                _store_row(out, base, offs, [(v - mean) * rstd * w + b
                                             for v, w, b in zip(vals, wv, bv)], cfg)

        _drive(cfg, n, x, m_rows, body)

    return layer_norm

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
extern "C" __global__ void stencil2d(float* out, const float* a, int h, int w) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (y > 0 && y < h - 1 && x > 0 && x < w - 1)
    out[y * w + x] = a[(y - 1) * w + x] + a[(y + 1) * w + x] + a[y * w + x - 1]
                     + a[y * w + x + 1] - 4.0f * a[y * w + x];
}
extern "C" __global__ void nbody(float4* acc, const float4* pos, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float4 pi = pos[i];
    float ax = 0.f, ay = 0.f, az = 0.f;
    for (int j = 0; j < n; ++j) {
      float4 pj = pos[j];
      float dx = pj.x - pi.x, dy = pj.y - pi.y, dz = pj.z - pi.z;
      float inv = rsqrtf(dx * dx + dy * dy + dz * dz + 0.01f);
      float s = pj.w * inv * inv * inv;
      ax += dx * s; ay += dy * s; az += dz * s;
    }
    acc[i] = make_float4(ax, ay, az, 0.f);
  }
}
extern "C" __global__ void copy(float* out, const float* a, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    out[i] = a[i];
}
"""


# The grid-synchronised solver as a CUDA programmer writes it: cooperative groups (a
# toolkit header, so nvcc only; the row is skipped without nvcc).
#: The solver in CUDA C++ with its grid barrier left open: ``%(name)s`` the kernel's name,
#: ``%(setup)s`` what the barrier needs first, ``%(sync)s`` the barrier (diag_lang prices
#: another barrier in the same solver).
JACOBI_CUDA = r"""
extern "C" __global__ void %(name)s(float* u, float* v, int h, int w, int iters) {
  %(setup)s
  int stride = gridDim.x * blockDim.x, first = blockIdx.x * blockDim.x + threadIdx.x;
  for (int it = 0; it < iters; ++it) {
    const float* src = (it %% 2 == 0) ? u : v;
    float* dst = (it %% 2 == 0) ? v : u;
    for (int k = first; k < h * w; k += stride) {
      int y = k / w, x = k %% w;
      if (y > 0 && y < h - 1 && x > 0 && x < w - 1)
        dst[k] = 0.25f * (src[k - w] + src[k + w] + src[k - 1] + src[k + 1]);
      else
        dst[k] = src[k];
    }
    %(sync)s;
  }
}
"""
CUDA_COOP = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
""" + JACOBI_CUDA % {"name": "jacobi", "setup": "cg::grid_group grid = cg::this_grid();",
                     "sync": "grid.sync()"}


def compile_coop(arch: str, work: Path, source: str = CUDA_COOP,
                 name: str = "coop") -> bytes | None:
    """The cooperative-groups solver (or another ``source`` needing toolkit headers) as a
    cubin (nvcc -O3), or None without nvcc."""
    nvcc = shutil.which("nvcc") or next(
        (p for p in ("/usr/local/cuda/bin/nvcc",) if os.path.exists(p)), None)
    if not nvcc:
        return None
    src, out = work / f"{name}.cu", work / f"{name}.cubin"
    src.write_text(source)
    r = subprocess.run([nvcc, "-cubin", f"-arch={arch}", "-O3", "-o", str(out), str(src)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(f"nvcc failed on the cooperative-groups solver:\n{r.stderr}", file=sys.stderr)
        return None
    return out.read_bytes()


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
                 args: list[Any], cooperative: bool = False) -> Any:
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
            if cooperative:
                (e,) = drv.cuLaunchCooperativeKernel(fn, *grid, *block, 0, 0, addr)
            else:
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
    for k in (matmul, reduce_sum, transpose, copy, stencil2d, nbody, jacobi):
        k.artifact("sm_90")
    for dtype in (f32, tk.dt.float16):
        for n in NORM_SIZES:
            make_softmax(dtype, n).artifact("sm_90")
            make_layer_norm(dtype, n).artifact("sm_90")
    with tempfile.TemporaryDirectory() as d:
        _, how = compile_cuda("sm_90", Path(d))
        if compile_coop("sm_90", Path(d)) is None:
            print("check: the cooperative-groups solver did not build (no nvcc?)")
    print(f"check: thork kernels and hand-written CUDA ({how}) build for sm_90")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=None, help="write bench_lang.json here")
    ap.add_argument("--quick", action="store_true", help="smaller sizes")
    ap.add_argument("--check", action="store_true", help="build only (no GPU needed)")
    ap.add_argument("--rows-only", action="store_true",
                    help="only the softmax / layer-norm rows against Triton")
    ap.add_argument("--no-torch", action="store_true",
                    help="row kernels: leave torch's softmax / layer norm out of the rounds")
    ap.add_argument("--no-twins", action="store_true",
                    help="row kernels: leave the self-comparison anchors (Triton against "
                         "an identical copy of itself, Thork against its twin) out")
    opts = ap.parse_args()
    if opts.check:
        return check_only()
    if opts.rows_only:
        info: dict[str, Any] = {}
        ok = bench_row_kernels(opts, info, quick=opts.quick)
        if opts.out:
            opts.out.mkdir(parents=True, exist_ok=True)
            (opts.out / "bench_lang.json").write_text(json.dumps(info, indent=2))
        return 0 if ok else 1
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

    # shaped-array stencil (extents from the arguments) vs int h, w parameters
    sh, sw = (2048 if q else 8192) + 3, (2048 if q else 8192) - 5
    img = cp.asarray(rng.standard_normal((sh, sw), dtype=np.float32))
    s1, s2 = cp.zeros_like(img), cp.zeros_like(img)
    sgrid = ((sw + 31) // 32, (sh + 7) // 8, 1)
    tk_st = stencil2d[sgrid, (32, 8)]
    cu_st = hand.launcher("stencil2d", sgrid, (32, 8, 1), [s2, img, sh, sw])
    t_tk = time_ms(lambda: tk_st(s1, img, target="gpu"), cp, 10, 15)
    t_cu = time_ms(cu_st, cp, 10, 15)
    ref = img[:-2, 1:-1] + img[2:, 1:-1] + img[1:-1, :-2] + img[1:-1, 2:] - 4 * img[1:-1, 1:-1]
    ok = bool(cp.allclose(s1[1:-1, 1:-1], ref, atol=1e-4) and cp.array_equal(s1, s2))
    row(f"shaped stencil {sh}x{sw} float32", t_tk, t_cu, nbytes=8.0 * sh * sw, ok=ok)

    # vector-typed n-body (float4 loads, float3 arithmetic, a helper returning a vector)
    nb = 4096 if q else 16384
    pos = cp.asarray(rng.standard_normal((nb, 4), dtype=np.float32))
    pos[:, 3] = cp.abs(pos[:, 3]) + 0.5
    a1, a2 = cp.zeros_like(pos), cp.zeros_like(pos)
    ngrid = ((nb + 255) // 256, 1, 1)
    tk_nb = nbody[ngrid, 256]
    cu_nb = hand.launcher("nbody", ngrid, (256, 1, 1), [a2, pos, nb])
    t_tk = time_ms(lambda: tk_nb(a1, pos, nb, target="gpu"), cp, 3, 9)
    t_cu = time_ms(cu_nb, cp, 3, 9)
    p64 = cp.asnumpy(pos).astype(np.float64)[:512]
    d = cp.asnumpy(pos).astype(np.float64)[None, :, :3] - p64[:, None, :3]
    ref = (d * (cp.asnumpy(pos)[None, :, 3] / ((d * d).sum(-1) + NBODY_EPS2) ** 1.5)[..., None]
           ).sum(1)
    ok = bool(np.allclose(cp.asnumpy(a1)[:512, :3], ref, rtol=1e-3, atol=1e-2)
              and np.allclose(cp.asnumpy(a2)[:512, :3], ref, rtol=1e-3, atol=1e-2))
    row(f"vector n-body {nb} float4", t_tk, t_cu, flops=20.0 * nb * nb, ok=ok)

    # grid-synchronised Jacobi: one cooperative launch of 20 sweeps
    coop = compile_coop(arch, work)
    if coop is None:
        print("grid-sync Jacobi row skipped: the hand-written side needs nvcc")
    else:
        hand_coop = Handwritten(coop)
        jh, jw, iters = (1024, 1024, 20) if q else (4096, 4096, 20)
        grid_j = (sms * 2, 1, 1)  # 2 blocks of 256 threads per SM: resident on any GPU
        u0 = cp.asarray(rng.standard_normal((jh, jw), dtype=np.float32))
        u1, v1, u2, v2 = u0.copy(), cp.zeros_like(u0), u0.copy(), cp.zeros_like(u0)
        tk_j = jacobi[grid_j, 256]
        cu_j = hand_coop.launcher("jacobi", grid_j, (256, 1, 1), [u2, v2, jh, jw, iters],
                                  cooperative=True)
        tk_j(u1, v1, iters, target="gpu")
        cu_j()
        ok = bool(cp.allclose(u1, u2, rtol=1e-6, atol=1e-6)
                  and cp.allclose(v1, v2, rtol=1e-6, atol=1e-6))
        t_tk = time_ms(lambda: tk_j(u1, v1, iters, target="gpu"), cp, 3, 9)
        t_cu = time_ms(cu_j, cp, 3, 9)
        row(f"grid-sync Jacobi {jh}x{jw} x{iters}", t_tk, t_cu,
            nbytes=8.0 * jh * jw * iters, ok=ok)

    info = {"gpu": cp.cuda.runtime.getDeviceProperties(dev.id)["name"].decode(),
            "arch": arch, "handwritten_compiler": how, "copy_GBps": copy_gbps, "rows": rows,
            "thork_compile": {k.name: (k.compile_info.compiler if k.compile_info else None)
                              for k in (matmul, reduce_sum, transpose, copy, stencil2d,
                                        nbody, jacobi)}}
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
    norm_ok = bench_row_kernels(opts, info, quick=q)
    if opts.out:
        (opts.out / "bench_lang.json").write_text(json.dumps(info, indent=2))
    return 0 if all(r["correct"] for r in rows) and norm_ok else 1


# -- softmax and layer norm against Triton (tutorial-style row kernels) and torch ----------
NORM_SIZES = (1024, 2048, 4096, 8192, 16384)


def _triton_jit() -> Any:
    """Triton's row kernels as ``triton.jit`` functions, fresh ones every call (a second
    call's are an identical copy with its own module: bench_lang's ``self tri`` column):
    ``(softmax_rows, layer_norm_rows, num_warps(n))``; None without Triton.
    bench/sass_rows.py compiles the same functions offline for their SASS."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def softmax_rows(out_ptr, x_ptr, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
        x = x.to(tl.float32)
        x = x - tl.max(x, axis=0)
        e = tl.exp(x)
        y = e / tl.sum(e, axis=0)
        tl.store(out_ptr + row * n_cols + cols, y.to(out_ptr.dtype.element_ty), mask=mask)

    @triton.jit
    def layer_norm_rows(out_ptr, x_ptr, w_ptr, b_ptr, n_cols, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=0) / n_cols
        d = tl.where(mask, x - mean, 0.0)
        var = tl.sum(d * d, axis=0) / n_cols
        rstd = 1.0 / tl.sqrt(var + eps)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = d * rstd * w + b
        tl.store(out_ptr + row * n_cols + cols, y.to(out_ptr.dtype.element_ty), mask=mask)

    def warps(n: int) -> int:
        return 4 if n <= 2048 else 8 if n <= 4096 else 16

    return softmax_rows, layer_norm_rows, warps


def _triton_kernels() -> Any:
    """Triton row kernels in the style of its tutorials (one program per row, the row in
    registers, BLOCK = next power of two of N): launchers ``(softmax, layer_norm)``; None
    without Triton."""
    jitted = _triton_jit()
    if jitted is None:
        return None
    import triton

    softmax_rows, layer_norm_rows, warps = jitted

    def softmax(out: Any, x: Any) -> None:
        n = x.shape[1]
        softmax_rows[(x.shape[0],)](out, x, n, BLOCK=triton.next_power_of_2(n),
                                    num_warps=warps(n))

    def layer_norm(out: Any, x: Any, w: Any, b: Any, eps: float) -> None:
        n = x.shape[1]
        layer_norm_rows[(x.shape[0],)](out, x, w, b, n, eps, BLOCK=triton.next_power_of_2(n),
                                       num_warps=warps(n))

    return softmax, layer_norm


def _row_case(op: str, dtype: Any, x: Any, w: Any, b: Any, eps: float, tri: Any,
              do_bench: Any, sms: int, with_torch: bool = True, twins: Any = None,
              variants: dict[str, RowConfig] | None = None, rep: int = 0
              ) -> dict[str, Any]:
    """One softmax or layer-norm row of the table: check every side (each into its own
    poisoned output), then time them: 3 rounds, each timing every side once
    (``do_bench`` median; ``rep``: its ``rep`` in ms, warm-up a quarter of it; 0: its
    defaults), the order rotating between rounds; Thork, Triton and the copy all write
    one shared output buffer (no side gains or loses by where its output lies). The row's
    numbers are the medians of the 3 rounds.

    ``twins`` (session 12; ``_triton_kernels()`` loaded a second time, or None): the
    self-comparison anchor: Triton's kernel against an identical second copy of itself
    (its own JIT function and module) and Thork's against its twin (the same kernel
    under another name), timed in the same rounds, so that every run prints how far from
    1.0x the same protocol puts a kernel against itself. ``variants``: more Thork layouts
    timed beside the pick (bench/diag_rows.py)."""
    import torch

    m_rows, n = x.shape
    tdt = x.dtype
    nbytes = 2.0 * m_rows * n * x.element_size()
    y = torch.empty_like(x)  # the shared output of the timed runs
    cfg = softmax_config(dtype, n) if op == "softmax" else layer_norm_config(dtype, n)
    make = make_softmax if op == "softmax" else make_layer_norm
    layouts: dict[str, tuple[RowConfig, bool]] = {"thork": (cfg, False)}
    if twins:
        layouts["thork_twin"] = (cfg, True)
    for tag, c in (variants or {}).items():
        layouts.setdefault(tag, (c, False))
    if op == "softmax":
        ref = torch.softmax(x.float(), dim=-1).to(tdt)
        args: tuple[Any, ...] = (x, m_rows)
    else:
        ref = torch.nn.functional.layer_norm(x.float(), (n,), w.float(), b.float(),
                                             eps).to(tdt)
        args = (x, w, b, eps, m_rows)
    fns: dict[str, Any] = {}
    outs: dict[str, Any] = {}
    for key, (c, twin) in layouts.items():
        kern = make(dtype, n, c, twin=twin)[c.grid(m_rows, sms), c.block]
        outs[key] = torch.full_like(x, float("nan"))
        kern(outs[key], *args, target="gpu")
        fns[key] = (lambda kern=kern: kern(y, *args, target="gpu"))
    tri_sides = {"triton": tri, "triton_twin": twins} if tri else {}
    for key, t in tri_sides.items():
        if t is None:
            continue
        outs[key] = torch.full_like(x, float("nan"))
        if op == "softmax":
            t[0](outs[key], x)
            fns[key] = (lambda t=t: t[0](y, x))
        else:
            t[1](outs[key], x, w, b, eps)
            fns[key] = (lambda t=t: t[1](y, x, w, b, eps))
    if with_torch:
        fns["torch"] = ((lambda: torch.softmax(x, dim=-1)) if op == "softmax" else
                        (lambda: torch.nn.functional.layer_norm(x, (n,), w, b, eps)))
    fns["copy"] = lambda: y.copy_(x)
    torch.cuda.synchronize()
    tol = 2e-2 if tdt == torch.float16 else 1e-4
    oks = {k: bool(torch.allclose(v.float(), ref.float(), atol=tol, rtol=tol))
           for k, v in outs.items()}
    kw = {"warmup": max(1, rep // 4), "rep": rep} if rep else {}
    rounds: dict[str, list[float]] = {k: [] for k in fns}
    keys = list(fns)
    for i in range(3):  # interleaved: clock or thermal drift hits every side alike
        for k in keys[i % len(keys):] + keys[:i % len(keys)]:
            rounds[k].append(do_bench(fns[k], return_mode="median", **kw))
        main = [k for k in ("thork", "thork_twin", "triton", "triton_twin", "torch", "copy")
                if k in rounds]
        print(f"  {op} {dtype.name} N={n} {cfg.tag()} round {i + 1}: "
              + " ".join(f"{k} {rounds[k][i] * 1e3:.2f} us" for k in main)
              + (f"  thork/triton {rounds['triton'][i] / rounds['thork'][i]:.3f}x"
                 if "triton" in rounds else "")
              + (f"  self: triton {rounds['triton_twin'][i] / rounds['triton'][i]:.3f}x"
                 f" thork {rounds['thork_twin'][i] / rounds['thork'][i]:.3f}x"
                 if "triton_twin" in rounds else ""), flush=True)
    ms = {k: statistics.median(v) for k, v in rounds.items()}
    out = {"op": op, "dtype": dtype.name, "M": m_rows, "N": n,
           "correct": all(oks.values()), "ok": oks,
           "layout": cfg.tag(), "rounds_ms": rounds,
           "variants": {k: c._asdict() for k, (c, twin) in layouts.items() if not twin},
           **{f"{k}_ms": v for k, v in ms.items()},
           **{f"{k}_TBps": nbytes / v / 1e9 for k, v in ms.items()}}
    if "triton_twin" in ms:
        # x > 1: the first copy timed faster than the second (as thork/triton)
        out["self_triton"] = ms["triton_twin"] / ms["triton"]
        out["self_thork"] = ms["thork_twin"] / ms["thork"]
    return out


def bench_row_kernels(opts: Any, info: dict[str, Any], quick: bool) -> bool:
    """Softmax and layer norm, M = 4096 rows, N = 1024..16384, fp16 and fp32: Thork vs
    Triton vs torch vs a same-bytes device copy, ``triton.testing.do_bench`` medians, the
    median of 3 interleaved rounds (each printed). Prints TB/s (bytes = 2·M·N·itemsize)
    and ratios."""
    try:
        import torch
        from triton.testing import do_bench
    except ImportError as exc:
        print(f"softmax/layer-norm rows skipped: {exc}")
        return True
    tri = _triton_kernels()
    twins = None if getattr(opts, "no_twins", False) or not tri else _triton_kernels()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    m_rows = 1024 if quick else 4096
    eps = 1e-5
    out_rows: list[dict[str, Any]] = []
    ok_all = True
    torch.manual_seed(0)
    for dtype, tdt in ((f32, torch.float32), (tk.dt.float16, torch.float16)):
        for n in NORM_SIZES:
            x = torch.randn(m_rows, n, device="cuda", dtype=tdt)
            w = torch.rand(n, device="cuda", dtype=tdt) + 0.5
            b = torch.randn(n, device="cuda", dtype=tdt)
            for op in ("softmax", "layer_norm"):
                r = _row_case(op, dtype, x, w, b, eps, tri, do_bench, sms,
                              with_torch=not getattr(opts, "no_torch", False), twins=twins)
                out_rows.append(r)
                ok_all = ok_all and r["correct"]
    info["row_kernels"] = out_rows
    print_row_table(out_rows)
    return ok_all


def print_row_table(out_rows: list[dict[str, Any]]) -> None:
    """The row kernels' summary: TB/s of each side (median of the rounds), Thork over
    Triton, and the self-comparison anchors: Triton over its identical second copy and
    Thork over its twin (1.0 up to the protocol's own spread: a ratio to Triton inside
    that spread is a tie)."""
    print(f"\n{'row kernel':<28} {'layout':<16} {'thork TB/s':>10} {'triton':>8} {'torch':>8} "
          f"{'copy':>8} {'tk/triton':>9} {'tk/copy':>8} {'self tri':>8} {'self tk':>8} ok   "
          "goals: >= 1.0x Triton, >= 90% copy (N >= 4096)")
    nan = float("nan")
    for r in out_rows:
        trit = r.get("triton_TBps")
        speed = f"{r['thork_TBps'] / trit:.3f}" if trit else "-"
        print(f"{r['op'] + ' ' + r['dtype'] + ' ' + str(r['M']) + 'x' + str(r['N']):<28} "
              f"{r['layout']:<16} {r['thork_TBps']:>10.3f} {trit or nan:>8.3f} "
              f"{r.get('torch_TBps', nan):>8.3f} "
              f"{r['copy_TBps']:>8.3f} {speed:>9} {r['thork_TBps'] / r['copy_TBps']:>8.3f} "
              f"{r.get('self_triton', nan):>8.3f} {r.get('self_thork', nan):>8.3f} "
              f"{'yes' if r['correct'] else 'NO'}")
    selfs = [v for r in out_rows for v in (r.get("self_triton"), r.get("self_thork")) if v]
    if selfs:
        print(f"self-comparison (a kernel against its identical copy, same protocol): "
              f"{min(selfs):.3f}..{max(selfs):.3f}x over {len(selfs)} pairs")


if __name__ == "__main__":
    sys.exit(main())
