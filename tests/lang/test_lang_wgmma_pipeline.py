"""Hopper pipelines: setmaxnreg under launch bounds, thread-block clusters (multicast TMA,
remote mbarrier arrivals, cluster barriers), TMA stores, and examples/gemm_wgmma.py.

Values against NumPy on fresh random inputs of odd sizes, outputs poisoned; the same
kernels on the GPU target where the GPU is a Hopper (the ``hopper`` fixture), the CPU
model here. Deadlocks and bad ranks are CPU-only checks (a GPU would hang).
"""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import thork as tk
from helpers import has_plugin, launch_short_of_memory, poisoned

f16, f32, u16, u32, u64, i32 = (tk.dt.float16, tk.dt.float32, tk.dt.uint16, tk.dt.uint32,
                                tk.dt.uint64, tk.dt.int32)
P = tk.DevicePointer


@pytest.fixture
def hopper(target):
    """The ``target`` fixture, skipping GPUs other than sm_90."""
    if target == "gpu":
        from thork_core import gpu_arch

        if not gpu_arch().startswith("sm_90"):
            pytest.skip(f"the GPU is {gpu_arch()}, not a Hopper (sm_90)")
    return target


def _map(target, array, box, sw, keep):
    """The tensor map of ``array`` for ``target`` (on the GPU of a device copy kept in
    ``keep``, which the caller reads back from)."""
    if target == "gpu":
        from thork_core import DeviceArray

        keep.append(DeviceArray.from_host(np.ascontiguousarray(array)))
        return tk.tensor_map(keep[-1], box, sw)
    return tk.tensor_map(array, box, sw)


def _compilers():
    from thork_core import plugins

    return [c.name for c in plugins().compilers()
            if c.name in ("nvrtc", "nvcc") and has_plugin(c.name) and c.available()[0]]


# -- setmaxnreg and launch bounds -------------------------------------------------------------
@tk.jit
def roles(out: P[f32]):
    """Warpgroup 0 gives registers back, warpgroups 1-2 take them (one if/else)."""
    tk.launch_bounds(384, 1)
    tid = tk.thread_idx().x
    with tk.if_(tid // 128 == 0):
        tk.setmaxnreg_dec(40)
        out[tid] = tk.cast(tid, f32)
    with tk.else_():
        tk.setmaxnreg_inc(232)
        out[tid] = tk.cast(tid, f32) * 2.0


def test_setmaxnreg_roles_run_and_render(hopper):
    out = poisoned((384,), np.float32)
    roles[1, 384](out, target=hopper)
    t = np.arange(384, dtype=np.float32)
    np.testing.assert_array_equal(out, np.where(t < 128, t, 2 * t))
    src = roles.cuda_source
    assert "__launch_bounds__(384, 1) roles(" in src
    assert "setmaxnreg.dec.sync.aligned.u32" in src and "thork_setmaxnreg_dec<40>()" in src
    assert "thork_setmaxnreg_inc<232>()" in src


@pytest.mark.plugin("cpu")  # the CPU target checks the launch
def test_launch_bounds_refuse_larger_blocks():
    with pytest.raises(tk.LaunchError, match=r"512 threads.*launch_bounds\(384, 1\)"):
        roles[1, 512](np.zeros(512, np.float32), target="cpu")


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
def test_setmaxnreg_and_clusters_compile_for_sm90a(compiler):
    if compiler not in _compilers():
        pytest.skip(f"{compiler} is not usable here")
    for kern in (roles, cluster_exchange, tma_roundtrip):
        art = kern.artifact("sm_90", compiler=compiler)
        assert art.arch == "sm_90a" and art.kind == "cubin" and art.data[:4] == b"\x7fELF"


def test_setmaxnreg_launch_bounds_and_cluster_errors():
    def trace(fn):
        with pytest.raises(tk.TraceError) as info:
            tk.jit(fn).ir  # noqa: B018 - tracing raises
        return str(info.value)

    def no_bounds(x: P[f32]):
        tk.setmaxnreg_inc(232)
    assert "declare tk.launch_bounds(max_threads, 1)" in trace(no_bounds)

    def bad_count(bad):
        def kern(x: P[f32]):
            tk.launch_bounds(256, 1)
            tk.setmaxnreg_dec(bad)
        return kern
    for bad in (20, 100, 264, True):
        assert "multiple of 8 from 24 to 256" in trace(bad_count(bad)), bad

    def twice(x: P[f32]):
        tk.launch_bounds(256, 1)
        tk.launch_bounds(128, 1)
    assert "already declared launch bounds (256, 1)" in trace(twice)

    def bad_bounds(args):
        def kern(x: P[f32]):
            tk.launch_bounds(*args)
        return kern
    for args in ((0,), (2048,), (256, 0), (256.0,)):
        assert "must be a Python int" in trace(bad_bounds(args)), args

    @tk.func
    def helper(x: P[f32]):
        tk.launch_bounds(128)

    def in_func(x: P[f32]):
        helper(x)
    assert "not in a device function" in trace(in_func)

    def too_big(x: P[f32]):
        tk.cluster_dims(3, 3)
    assert "at most 8 blocks per cluster, got 3 x 3 x 1 = 9" in trace(too_big)

    def unclustered(x: P[f32]):
        tk.cluster_sync()
    assert "declare tk.cluster_dims" in trace(unclustered)

    def bad_mask(x: P[u64]):
        tk.cluster_dims(2)
        s = tk.shared_array(f16, (1024,))
        bar = tk.shared_array(u64, (1,))
        tk.tma_load(s, 0, x, 0, 0, bar, 0, multicast=0)
    assert "mask of cluster ranks from 1 to 0xffff, got 0" in trace(bad_mask)

    def bad_wait(x: P[f32]):
        tk.tma_store_wait(8)
    assert "from 0 to 7, got 8" in trace(bad_wait)


# -- clusters: multicast TMA, remote arrivals, cluster barriers -----------------------------
@tk.jit
def cluster_exchange(tmap: P[u64], out: P[u16], ranks: P[u32]):
    """Clusters of 2 blocks: each block multicasts its 16 x 64 box (rows 16 blockIdx.x...)
    into both blocks' shared memory at rank x 1024, so each ends up with its cluster's two
    boxes; then each block's thread 0 arrives on the other block's barrier and waits for
    the other's arrival on its own."""
    tk.cluster_dims(2)
    s = tk.shared_array(u16, (2 * 16 * 64,))
    bar = tk.shared_array(u64, (2,))
    tid, bx = tk.thread_idx().x, tk.block_idx().x
    rank = tk.cluster_ctarank()
    with tk.if_(tid == 0):
        tk.mbarrier_init(bar, 0, 1)
        tk.mbarrier_init(bar, 1, 1)
        tk.fence_mbarrier_init()
    tk.cluster_sync()
    with tk.if_(tid == 0):
        tk.mbarrier_expect_tx(bar, 0, 2 * 16 * 64 * 2)   # both boxes land here
        tk.tma_load(s, rank * 1024, tmap, 0, 16 * bx, bar, 0, multicast=3)
    tk.mbarrier_wait(bar, 0, 0)
    for i in tk.range(tid, 2 * 16 * 64, 128):
        out[bx * 2048 + i] = s[i]
    with tk.if_(tid == 0):
        tk.mbarrier_arrive(bar, 1, cta=rank ^ 1)
    tk.mbarrier_wait(bar, 1, 0)
    with tk.if_(tid == 0):
        ranks[bx] = rank
    tk.cluster_sync()                                    # no block leaves while peers work


def test_cluster_multicast_and_remote_arrivals(hopper, rng):
    src = rng.integers(1, 60000, (64, 64)).astype(np.uint16)
    out = poisoned((4 * 2048,), np.uint16)
    ranks = poisoned((4,), np.uint32)
    keep: list = []
    cluster_exchange[4, 128](_map(hopper, src, (16, 64), 0, keep), out, ranks,
                             target=hopper)
    np.testing.assert_array_equal(ranks, [0, 1, 0, 1])
    for bx in range(4):
        first = bx - bx % 2                              # the cluster's blocks' boxes
        want = np.concatenate([src[16 * first:16 * first + 16].ravel(),
                               src[16 * first + 16:16 * first + 32].ravel()])
        np.testing.assert_array_equal(out[bx * 2048:(bx + 1) * 2048], want)
    assert "__cluster_dims__(2, 1, 1)" in cluster_exchange.cuda_source
    assert ".multicast::cluster" in cluster_exchange.cuda_source


@pytest.mark.plugin("cpu")  # the CPU target checks the launch
def test_cluster_launch_errors_on_cpu():
    src = np.zeros((64, 64), np.uint16)
    tmap = tk.tensor_map(src, (16, 64))
    with pytest.raises(tk.LaunchError, match=r"grid \(3, 1, 1\) must be a multiple"):
        cluster_exchange[3, 128](tmap, np.zeros(3 * 2048, np.uint16),
                                 np.zeros(3, np.uint32), target="cpu")

    @tk.jit
    def far(x: P[f32]):
        tk.cluster_dims(2)
        bar = tk.shared_array(u64, (1,))
        tk.mbarrier_arrive(bar, 0, cta=5)
    with pytest.raises(tk.LaunchError, match="rank outside the block's cluster"):
        far[2, 32](np.zeros(1, np.float32), target="cpu")

    @tk.jit
    def deserter(x: P[f32]):
        tk.cluster_dims(2)
        with tk.if_(tk.cluster_ctarank() == 1):
            tk.return_()
        tk.cluster_sync()
    with pytest.raises(tk.LaunchError, match="waited for a block of the cluster that had"):
        deserter[2, 32](np.zeros(1, np.float32), target="cpu")


@pytest.mark.plugin("cpu")
def test_cpu_cluster_failure_names_its_cause_not_the_barrier_it_left():
    # Rank 0 fails (its map is not a tensor map) and ends; rank 1 then waits at the cluster
    # barrier for it. The launch reports rank 0's failure, not rank 1's consequence.
    @tk.jit
    def one_bad(good: P[u64], bad: P[u64]):
        tk.cluster_dims(2)
        s = tk.shared_array(u16, (16 * 64,))
        bar = tk.shared_array(u64, (1,))
        with tk.if_(tk.thread_idx().x == 0):
            tk.mbarrier_init(bar, 0, 1)
        with tk.if_(tk.cluster_ctarank() == 0):
            with tk.if_(tk.thread_idx().x == 0):
                tk.tma_load(s, 0, bad, 0, 0, bar, 0)
            tk.return_()
        tk.cluster_sync()
    good = tk.tensor_map(np.zeros((64, 64), np.uint16), (16, 64))
    for grid in (2, 6):      # blocks after the failing ones see the deadlock
        with pytest.raises(tk.LaunchError, match="not a CPU tensor map"):
            one_bad[grid, 32](good, np.zeros(16, np.uint64), target="cpu")


@tk.jit
def relay(flags: P[i32], out: P[i32], arrive: i32):
    """Rank 1's thread 0 spins until the host sets ``flags[1]``, then (if ``arrive``)
    arrives on rank 0's mbarrier; rank 0 waits for that, then its thread 0 spins until the
    host sets ``flags[0]`` and arrives on rank 1's, which rank 1 waits for (if
    ``arrive``; else rank 1 goes on to the final cluster barrier)."""
    tk.cluster_dims(2)
    bar = tk.shared_array(u64, (1,))
    tid, rank = tk.thread_idx().x, tk.cluster_ctarank()
    with tk.if_(tid == 0):
        tk.mbarrier_init(bar, 0, 1)
        tk.fence_mbarrier_init()
    tk.cluster_sync()
    with tk.if_(rank == 1):
        with tk.if_(tid == 0):
            with tk.while_(lambda: tk.atomic_add(flags, 1, 0) == 0):
                pass
            with tk.if_(arrive != 0):
                tk.mbarrier_arrive(bar, 0, cta=0)
    with tk.if_(rank == 0):
        tk.mbarrier_wait(bar, 0, 0)
        with tk.if_(tid == 0):
            with tk.while_(lambda: tk.atomic_add(flags, 0, 0) == 0):
                pass
            tk.mbarrier_arrive(bar, 0, cta=1)
    with tk.if_(rank == 1):
        with tk.if_(arrive != 0):
            tk.mbarrier_wait(bar, 0, 0)
    tk.cluster_sync()
    with tk.if_(tid == 0):
        out[tk.block_idx().x] = rank + 1


def _relay_timed(set_at: tuple[float, float], arrive: int = 1) -> tuple[float, np.ndarray]:
    """``relay`` on the CPU target with the host setting ``flags[i]`` ``set_at[i]``
    seconds after the launch starts (0: set before): (seconds the launch took, out)."""
    import threading
    import time

    out = poisoned((2,), np.int32)
    relay[2, 32](np.ones(2, np.int32), out, 1, target="cpu")  # built: not timed
    out[:] = -1
    flags = np.array([at <= 0 for at in set_at], np.int32)
    timers = [threading.Timer(at, flags.__setitem__, (i, 1))
              for i, at in enumerate(set_at) if at > 0]
    t0 = time.monotonic()  # before the timers start: a flag is never set before t0 + at
    for t in timers:
        t.start()
    try:
        relay[2, 32](flags, out, arrive, target="cpu")
    finally:
        for t in timers:
            t.cancel()
        flags[:] = 1
    return time.monotonic() - t0, out


@pytest.mark.plugin("cpu")
def test_cpu_cluster_peer_running_longer_than_the_deadlock_wait_is_no_deadlock():
    # Rank 0 has nothing to do for 6 s while rank 1 runs (spinning on a flag the host sets
    # then): valid on a GPU. The deadlock check (5 s without progress) once counted only
    # finished scheduling rounds as progress, so a block still running its first round
    # looked stuck and the launch failed. Now a block that runs is never a deadlock.
    took, out = _relay_timed((0.0, 6.0))
    assert took >= 6.0
    np.testing.assert_array_equal(out, [1, 2])


@pytest.mark.plugin("cpu")
def test_cpu_cluster_block_woken_by_a_peer_runs_as_long_as_it_needs():
    # Rank 0 waits (a whole scheduling round without progress) until rank 1's arrival at
    # 0.5 s, then runs for 6 s in that round while rank 1 waits for it: rank 0 counts as
    # running from its wake-up, not as waiting until its round ends.
    took, out = _relay_timed((6.5, 0.5))
    assert took >= 6.5
    np.testing.assert_array_equal(out, [1, 2])


@pytest.mark.plugin("cpu")
def test_cpu_cluster_deadlock_with_every_block_waiting_is_still_found():
    # Rank 1 never arrives: once it waits at the final cluster barrier, every block waits
    # and nothing moves; the launch fails about 5 s later instead of hanging.
    with pytest.raises(tk.LaunchError, match="could never complete"):
        _relay_timed((0.0, 0.0), arrive=0)


@pytest.mark.plugin("cpu")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and RLIMIT_AS")
def test_cpu_cluster_blocks_that_could_not_start_fail_the_launch_not_hang_it():
    # Blocks whose OS thread could not start count as ended at a cluster barrier too: the
    # started blocks of their clusters stop waiting (before, they waited forever). 32 MiB
    # more address space: a few 8 MiB thread stacks, not 64 blocks' worth.
    out = launch_short_of_memory('''
@tk.jit
def meet(x: tk.DevicePointer[tk.dt.float32]):
    tk.cluster_dims(8)
    tk.cluster_sync()
    x[tk.block_idx().x] = 1.0

x = np.zeros(64, np.float32)
''', 'meet[64, 32](x, target="cpu")')
    assert "could not start a thread or allocate memory" in out, out


@pytest.mark.plugin("cpu")
def test_cpu_cluster_barrier_that_opens_is_never_a_deadlock():
    # Session 15's CI failure: a block waiting at a cluster barrier read the barrier's
    # generation, then (descheduled) found its peer ended. The peer had been the last to
    # arrive, opened the barrier and finished in between: a deadlock reported for a barrier
    # that opened. Many short clustered launches of one-thread blocks (hundreds of OS
    # threads on few cores, so waiters are descheduled often) hit that window once or
    # twice in 10 s on a 2-core machine before the fix; each launch must succeed.
    @tk.jit
    def meet(x: P[f32]):
        tk.cluster_dims(2)
        tk.cluster_sync()
        x[tk.block_idx().x] = 1.0
    import time

    # (session 17) at least 24 launches, however slow the machine (a count of launches
    # done in 4 s failed on a loaded 2-core machine: 16), and more while 4 s last
    x = np.zeros(512, np.float32)
    end, n = time.monotonic() + 4.0, 0
    while n < 24 or time.monotonic() < end:
        x[:] = 0
        meet[512, 1](x, target="cpu")
        assert x.min() == 1.0
        n += 1


# -- TMA stores --------------------------------------------------------------------------
@tk.jit
def tma_roundtrip(tin: P[u64], tout: P[u64], n: i32, x: i32, y: i32):
    """Load a box by TMA, add 1 to each element with ordinary stores, store it back by TMA
    to the same place of another array."""
    s = tk.shared_array(u16, (64 * 64,))
    bar = tk.shared_array(u64, (1,))
    tid = tk.thread_idx().x
    with tk.if_(tid == 0):
        tk.mbarrier_init(bar, 0, 1)
    tk.syncthreads()
    with tk.if_(tid == 0):
        tk.mbarrier_expect_tx(bar, 0, n * 2)
        tk.tma_load(s, 0, tin, x, y, bar, 0)
    tk.mbarrier_wait(bar, 0, 0)
    for i in tk.range(tid, n, 128):
        s[i] = s[i] + 1
    tk.fence_proxy_async()
    tk.syncthreads()
    with tk.if_(tid == 0):
        tk.tma_store(tout, x, y, s, 0)
        tk.tma_store_commit()
        tk.tma_store_wait(0)


@pytest.mark.parametrize("sw", [0, 32, 64, 128])
def test_tma_store_round_trip_clips_at_the_edges(hopper, rng, sw):
    """A box hanging over the bottom and right edges: inside it, in the array, the loaded
    values plus 1; elsewhere (and past the edges) nothing is written. The load and the
    store of one map agree on the swizzled layout."""
    cols = (sw or 64) // 2
    rows = 24
    src = rng.integers(0, 60000, (37, 72)).astype(np.uint16)
    dst = poisoned((37, 72), np.uint16)
    keep: list = []
    tin = _map(hopper, src, (rows, cols), sw, keep)
    tout = _map(hopper, dst, (rows, cols), sw, keep)
    x, y = 72 - cols + 8, 20
    tma_roundtrip[1, 128](tin, tout, rows * cols, x, y, target=hopper)
    got = keep[-1].to_host() if hopper == "gpu" else dst
    want = poisoned((37, 72), np.uint16)
    want[y:y + rows, x:x + cols] = src[y:y + rows, x:x + cols] + 1
    np.testing.assert_array_equal(got, want)
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in \
        tma_roundtrip.cuda_source


# -- examples/gemm_wgmma.py ----------------------------------------------------------------
def _example():
    path = Path(__file__).resolve().parents[2] / "examples" / "gemm_wgmma.py"
    spec = importlib.util.spec_from_file_location("gemm_wgmma_example", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gemm_wgmma_example"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("size,tile", [
    ((77, 45, 136), {}),                                               # one tile, edges
    ((130, 70, 200), dict(BN=64, STAGES=3, epilogue="staged")),         # 3 x 2 tiles, wraps
    ((200, 96, 72), dict(BN=32, WM=128, CONSUMERS=1, STAGES=2)),        # no setmaxnreg
    ((200, 136, 128), dict(BN=128, epilogue="tma", cluster=2, blocks=4)),  # 2 clusters
    ((260, 200, 96), dict(BN=192, WM=128, STAGES=2, epilogue="tma", cluster=2)),
])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gemm_example(hopper, rng, size, tile, dtype):
    pytest.importorskip("ml_dtypes")
    mod = _example()
    if hopper == "cpu" and mod.hopper_gpu():
        pytest.skip("the example picks the GPU where it is a Hopper")
    for out in ("float32", dtype):
        worst = mod.check(*size, dtype, rng, out, **tile)
        assert worst <= 1.0, (out, worst)


def test_gemm_example_rejects_bad_tiles():
    mod = _example()
    a, bt = np.zeros((64, 64), np.float16), np.zeros((64, 64), np.float16)
    c = np.zeros((64, 64), np.float32)
    for kw, msg in ((dict(K=60), "K must be a positive multiple of 8, got 60"),
                    (dict(BN=100), "BN must be a multiple of 16"),
                    (dict(WM=32), "WM must be 64 or 128, got 32"),
                    (dict(CONSUMERS=4), "CONSUMERS must be 1, 2 or 3, got 4"),
                    (dict(cluster=4), "cluster must be 1 or 2, got 4"),
                    (dict(epilogue="fast"), "epilogue must be one of direct, staged, tma"),
                    (dict(WM=128, BN=256), "needs 256 accumulators per thread")):
        args = dict(M=64, N=64, K=64)
        args.update({k: v for k, v in kw.items() if k in args})
        tile = {k: v for k, v in kw.items() if k not in args}
        with pytest.raises(ValueError, match=msg):
            mod.prepare(c, a, bt, args["M"], args["N"], args["K"], target="cpu", **tile)
    with pytest.raises(ValueError, match="c must hold float32 or float16, got int32"):
        mod.prepare(np.zeros((64, 64), np.int32), a, bt, 64, 64, 64, target="cpu")


def test_tma_load_and_store_argument_errors():
    """tk.tma_load and tk.tma_store name themselves, the argument and what came."""
    def trace(fn):  # type: ignore[no-untyped-def]
        with pytest.raises(tk.TraceError) as info:
            tk.jit(fn).ir  # noqa: B018 - tracing raises
        return str(info.value)

    def load(tm, col):  # type: ignore[no-untyped-def]
        def kern(tmap: P[tm], x: P[f32]):
            buf = tk.shared_array(tk.dt.uint16, (1024,))
            bar = tk.shared_array(u64, (1,))
            tk.tma_load(buf, 0, tmap, col if col is not None else x[0], 0, bar, 0)
        return kern

    def store(tm, col):  # type: ignore[no-untyped-def]
        def kern(tmap: P[tm], x: P[f32]):
            buf = tk.shared_array(tk.dt.uint16, (1024,))
            tk.tma_store(tmap, col if col is not None else x[0], 0, buf, 0)
        return kern

    for make, name in ((load, "tk.tma_load()"), (store, "tk.tma_store()")):
        msg = trace(make(f32, 0))
        assert msg.startswith(f"{name}: the tensor map must be a uint64 array parameter"), msg
        msg = trace(make(u64, None))
        assert f"{name}: col must be an integer, got float32" in msg, msg


@pytest.mark.parametrize("epilogue", ["direct", "staged", "tma"])
def test_gemm_example_bf16_output_is_canonically_rounded(hopper, rng, epilogue):
    """A bfloat16 c goes through tk.cast(..., nan="canonical") in every epilogue: rows of
    a holding a NaN give 0x7FFF whatever the NaN's bits, the rest rounds to nearest even
    (the float32 accumulators of small integers are exact, so c equals NumPy's product
    rounded by ml_dtypes)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    mod = _example()
    if hopper == "cpu" and mod.hopper_gpu():
        pytest.skip("the example picks the GPU where it is a Hopper")
    M, N, K = 70, 136, 64
    bf = np.dtype(ml_dtypes.bfloat16)
    a = rng.integers(-40, 41, (M, K)).astype(np.float32)
    bt = rng.integers(-40, 41, (N, K)).astype(np.float32)
    want = (a @ bt.T).astype(bf).view(np.uint16).copy()  # |c| < 2^17: 257 x 257 odd steps
    a16, bt16 = a.astype(bf), bt.astype(bf)
    nan_rows = [3, 66]
    a16.view(np.uint16)[nan_rows, 5] = [0xFFC1, 0x7F81]     # a negative and a signalling NaN
    want[nan_rows, :] = 0x7FFF
    c0 = np.full((M, N), 0x1234, np.uint16).view(bf)
    tile = dict(BN=128, STAGES=2, epilogue=epilogue)
    if hopper == "gpu":
        from thork_core import DeviceArray

        da, dbt, dc = (DeviceArray.from_host(x) for x in (a16, bt16, c0))
        mod.gemm(dc, da, dbt, M, N, K, "bfloat16", **tile)
        c = dc.to_host()
    else:
        c = c0.copy()
        mod.gemm(c, a16, bt16, M, N, K, "bfloat16", target="cpu", **tile)
    got = c.view(np.uint16)
    bad = np.argwhere(got != want)
    assert bad.size == 0, [(tuple(i), hex(got[tuple(i)]), hex(want[tuple(i)]))
                           for i in bad[:6]]


def test_gemm_example_tuned_defaults():
    """prepare() with no tile keyword takes TUNED's entry for the largest listed size that
    M, N and K all reach (output in the input type); else, or with any keyword, DEFAULTS."""
    mod = _example()
    for (dtype, size), entry in mod.TUNED.items():
        want = dict(mod.DEFAULTS, **entry)
        assert mod.tuned(size, size, size, dtype, dtype) == want
        assert mod.tuned(size + 8, 3 * size, size, dtype, dtype) == want
        assert mod.tuned(size, size, size, dtype, "float32") == mod.DEFAULTS
        below = [n for d, n in mod.TUNED if d == dtype and n < size]
        assert mod.tuned(size - 8, size, size, dtype, dtype) == (
            dict(mod.DEFAULTS, **mod.TUNED[dtype, max(below)]) if below else mod.DEFAULTS)
    assert mod.tuned(1000, 4096, 4096, "bfloat16", "bfloat16") == mod.DEFAULTS
    assert mod.tuned(8192, 8192, 4096, "bfloat16", "bfloat16") == \
        dict(mod.DEFAULTS, **mod.TUNED["bfloat16", 4096])
    a, bt = np.zeros((64, 64), np.float16), np.zeros((64, 64), np.float16)
    with pytest.raises(ValueError, match="bf16_nan must be 'canonical' or 'keep', got 'x'"):
        mod.prepare(np.zeros((64, 64), np.float32), a, bt, 64, 64, 64, bf16_nan="x",
                    target="cpu")
