"""Memory and synchronization: atomics, warp primitives, vector access, dynamic shared
memory, block votes — on every available target, and compiled for sm_75/sm_90."""

import numpy as np
import pytest
import thork as tk
from helpers import TARGETS, compiles_for_gpu, poisoned, random_array
from thork_core import CompileError, LaunchError, TraceError
from thork_core.ir import EVICT_PRIORITIES

f32, i32, u32 = tk.dt.float32, tk.dt.int32, tk.dt.uint32


def gpu_ok(kernel):
    compiles_for_gpu(kernel)


# -- atomics: every op, every type, global and shared --------------------------------------
ATOMIC_TYPES = ["int32", "uint32", "int64", "uint64", "float32", "float64"]


def _atomics_kernel(dtype):
    @tk.jit(name=f"atomics_{dtype.name}")
    def k(g: tk.DevicePointer[dtype], olds: tk.DevicePointer[dtype],
          vals: tk.DevicePointer[dtype], n: i32):
        """Slots: 0 add, 1 sub, 2 min, 3 max, 4 exch-count (cas), then shared copies."""
        sh = tk.shared_array(dtype, 8)
        t = tk.thread_idx().x
        i = tk.block_idx().x * tk.block_dim().x + t
        with tk.if_(t < 8):
            sh[t] = g[t]
        tk.syncthreads()
        with tk.if_(i < n):
            v = vals[i]
            tk.atomic_add(g, 0, v)
            tk.atomic_sub(g, 1, v)
            tk.atomic_min(g, 2, v)
            tk.atomic_max(g, 3, v)
            # A CAS loop that increments slot 4 by one: tests atomic_cas.
            done = tk.var(False)
            cur = tk.var(g[4])
            with tk.while_(lambda: ~done):
                seen = tk.atomic_cas(g, 4, cur, cur + 1)
                done.set(seen == cur)
                cur.set(seen)  # the canonical loop: retry with the value CAS saw
            olds[i] = tk.atomic_exch(g, 5, v)
            tk.atomic_min(sh, 2, v)
            tk.atomic_max(sh, 3, v)
            tk.atomic_add(sh, 0, v)
        tk.syncthreads()
        with tk.if_(t == 0):
            tk.atomic_min(g, 6, sh[2])
            tk.atomic_max(g, 7, sh[3])
    return k


ATOMIC_KERNELS = {name: _atomics_kernel(getattr(tk.dt, name)) for name in ATOMIC_TYPES}


@pytest.mark.parametrize("name", ATOMIC_TYPES)
def test_atomics_every_op_and_type(target, rng, name):
    dtype = np.dtype(name)
    n = int(rng.integers(300, 700)) | 1
    if dtype.kind == "f":
        vals = rng.integers(-50, 50, size=n).astype(dtype)  # exact sums in any order
    elif dtype.kind == "u":
        vals = rng.integers(0, 100, size=n).astype(dtype)
    else:
        vals = rng.integers(-100, 100, size=n).astype(dtype)
    start = 10_000 if dtype.kind != "f" else 0
    g = np.array([start, start + 10**6 if dtype.kind == "u" else 0, 1000, 0, 0, 7,
                  1000, 0], dtype)
    g0 = g.copy()
    olds = poisoned(n, dtype)
    ATOMIC_KERNELS[name][(n + 127) // 128, 128](g, olds, vals, n, target=target)
    assert g[0] == g0[0] + vals.sum(dtype=dtype)
    assert g[1] == g0[1] - vals.sum(dtype=dtype)
    assert g[2] == min(g0[2], vals.min())
    assert g[3] == max(g0[3], vals.max())
    assert g[4] == n
    # exch: the olds plus the final value are the initial 7 and every value, once each.
    np.testing.assert_array_equal(np.sort(np.append(olds, g[5])), np.sort(np.append(vals, 7)))
    assert g[6] == min(g0[6], vals.min()) and g[7] == max(g0[7], vals.max())
    gpu_ok(ATOMIC_KERNELS[name])


@tk.jit
def bit_atomics(g: tk.DevicePointer[u32], vals: tk.DevicePointer[u32], n: i32):
    i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    with tk.if_(i < n):
        tk.atomic_or(g, 0, vals[i])
        tk.atomic_and(g, 1, vals[i])
        tk.atomic_xor(g, 2, vals[i])


def test_bitwise_atomics(target, rng):
    n = 301
    vals = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32) | np.uint32(1)
    g = np.array([0, 0xFFFFFFFF, 0], np.uint32)
    bit_atomics[3, 128](g, vals, n, target=target)
    assert g[0] == np.bitwise_or.reduce(vals)
    assert g[1] == np.bitwise_and.reduce(vals)
    assert g[2] == np.bitwise_xor.reduce(vals)
    gpu_ok(bit_atomics)


def test_atomics_reject_bad_types():
    def k(a: tk.DevicePointer[tk.dt.float16]):
        tk.atomic_add(a, 0, 1.0)

    def k2(a: tk.DevicePointer[f32]):
        tk.atomic_or(a, 0, 1.0)
    with pytest.raises(TraceError, match="float16"):
        tk.jit(k).ir
    with pytest.raises(TraceError, match="integer"):
        tk.jit(k2).ir


# -- warp primitives ----------------------------------------------------------------------
@tk.jit
def warp_ops(out: tk.DevicePointer[f32], bits: tk.DevicePointer[u32],
             a: tk.DevicePointer[f32], src: tk.DevicePointer[i32]):
    i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    v = a[i]
    out[i * 8 + 0] = tk.shfl_idx(v, src[i])
    out[i * 8 + 1] = tk.shfl_up(v, 3)
    out[i * 8 + 2] = tk.shfl_down(v, 5)
    out[i * 8 + 3] = tk.shfl_xor(v, 6)
    out[i * 8 + 4] = tk.shfl_down(v, 2, width=8)
    out[i * 8 + 5] = tk.shfl_xor(v, 1, width=4)
    out[i * 8 + 6] = tk.warp_max(v, width=16)
    out[i * 8 + 7] = tk.cast(tk.shfl_idx(tk.cast(v * 100.0, tk.dt.int16), 0), f32)
    bits[i * 4 + 0] = tk.ballot(v > 0)
    bits[i * 4 + 1] = tk.cast(tk.warp_any(v > 2.5), u32)
    bits[i * 4 + 2] = tk.cast(tk.warp_all(v > -3.5), u32)
    bits[i * 4 + 3] = tk.activemask()


def test_warp_primitives(target, rng):
    nw = 3
    n = 32 * nw
    a = random_array(rng, n, np.float32)
    src = rng.integers(0, 32, size=n).astype(np.int32)
    out = poisoned((n, 8), np.float32)
    bits = poisoned((n, 4), np.uint32)
    warp_ops[1, n](out, bits, a, src, target=target)
    lane = np.arange(n) % 32
    base = np.arange(n) - lane
    A = a
    np.testing.assert_array_equal(out[:, 0], A[base + src])
    np.testing.assert_array_equal(out[:, 1], np.where(lane >= 3, A[np.arange(n) - 3], A))
    np.testing.assert_array_equal(out[:, 2], np.where(lane + 5 < 32, A[np.minimum(np.arange(n) + 5, n - 1)], A))
    np.testing.assert_array_equal(out[:, 3], A[base + (lane ^ 6)])
    seg8 = lane // 8 * 8
    np.testing.assert_array_equal(out[:, 4], np.where(lane + 2 < seg8 + 8, A[np.minimum(np.arange(n) + 2, n - 1)], A))
    np.testing.assert_array_equal(out[:, 5], A[base + (lane ^ 1)])
    np.testing.assert_array_equal(out[:, 6], A.reshape(-1, 16).max(1).repeat(16))
    lane0 = (A[base] * np.float32(100)).astype(np.int16).astype(np.float32)
    np.testing.assert_array_equal(out[:, 7], lane0)
    w = A.reshape(nw, 32)
    ballot = ((w > 0) * (1 << np.arange(32, dtype=np.uint64))).sum(1).astype(np.uint32)
    np.testing.assert_array_equal(bits[:, 0], ballot.repeat(32))
    np.testing.assert_array_equal(bits[:, 1], (w > 2.5).any(1).repeat(32))
    np.testing.assert_array_equal(bits[:, 2], (w > -3.5).all(1).repeat(32))
    np.testing.assert_array_equal(bits[:, 3], 0xFFFFFFFF)
    gpu_ok(warp_ops)


@tk.jit
def vote_block(out: tk.DevicePointer[i32], a: tk.DevicePointer[f32]):
    i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    v = a[i]
    out[i * 3] = tk.syncthreads_count(v > 0)
    out[i * 3 + 1] = tk.cast(tk.syncthreads_and(v > -2.0), i32)
    out[i * 3 + 2] = tk.cast(tk.syncthreads_or(v > 2.0), i32)


def test_syncthreads_count_and_or(target, rng):
    nb, bs = 5, 96
    a = random_array(rng, nb * bs, np.float32)
    out = poisoned((nb * bs, 3), np.int32)
    vote_block[nb, bs](out, a, target=target)
    b = a.reshape(nb, bs)
    np.testing.assert_array_equal(out[:, 0], (b > 0).sum(1).repeat(bs))
    np.testing.assert_array_equal(out[:, 1], (b > -2).all(1).repeat(bs))
    np.testing.assert_array_equal(out[:, 2], (b > 2).any(1).repeat(bs))
    gpu_ok(vote_block)


# -- vector loads and stores ----------------------------------------------------------------
def _vec_kernel(dtype, n):
    @tk.jit(name=f"vec_{dtype.name}_{n}")
    def k(out: tk.DevicePointer[dtype], a: tk.DevicePointer[dtype], count: i32):
        i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
        with tk.if_(i * n < count):
            vals = a.vload(i * n, n)
            out.vstore(i * n, [v + v for v in reversed(vals)])
        tk.threadfence()
    return k


VEC_CASES = [("float32", 2), ("float32", 4), ("int32", 4), ("float64", 2), ("float16", 8),
             ("uint8", 8)]
VEC_KERNELS = {c: _vec_kernel(getattr(tk.dt, c[0]), c[1]) for c in VEC_CASES}


@pytest.mark.parametrize("case", VEC_CASES, ids=[f"{d}x{n}" for d, n in VEC_CASES])
def test_vector_loads_and_stores(target, rng, case):
    name, n = case
    count = n * (int(rng.integers(50, 200)) | 1)
    a = random_array(rng, count, name)
    out = poisoned(count, name)
    VEC_KERNELS[case][(count // n + 63) // 64, 64](out, a, count, target=target)
    ref = (a + a).reshape(-1, n)[:, ::-1].reshape(-1)
    np.testing.assert_array_equal(out, ref)
    src = VEC_KERNELS[case].source
    assert "thork_vec<" in src
    gpu_ok(VEC_KERNELS[case])


def test_vector_width_errors():
    def k(a: tk.DevicePointer[tk.dt.float64]):
        a.vload(0, 4)

    def k2(a: tk.DevicePointer[f32]):
        a.vload(2, 4)
    with pytest.raises(TraceError, match="32 bytes"):
        tk.jit(k).ir
    with pytest.raises(TraceError, match="multiple of 4"):
        tk.jit(k2).ir


# -- cache hints (ld.global.<op> / st.global.<op>) -----------------------------------------
# (dtype, n: 1 = m.load/m.store, else vload/vstore, load op, store op): every access size
# (1, 2, 4, 8, 16 bytes) and every PTX cache operator at least once.
HINT_CASES = [("uint8", 1, "cs", "cs"), ("float16", 1, "cg", "wt"), ("uint8", 2, "lu", "cg"),
              ("float32", 1, "cv", "wb"), ("float64", 1, "ca", "cs"), ("float32", 2, "cs", "cs"),
              ("int32", 4, "cg", "cg"), ("float16", 8, "cs", "cs"), ("float32", 4, "lu", "wt")]


def _hint_kernel(dtype, n, lop, sop):
    @tk.jit(name=f"hint_{dtype.name}_{n}_{lop}_{sop}")
    def k(out: tk.DevicePointer[dtype], a: tk.DevicePointer[dtype], count: i32):
        i = tk.cast(tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x, i32)
        with tk.if_(i * n < count):
            if n == 1:
                out.store(i, a.load(i, cache=lop) + a[i], cache=sop)
            else:
                vals = a.vload(i * n, n, cache=lop)
                out.vstore(i * n, [v + v for v in reversed(vals)], cache=sop)
    return k


HINT_KERNELS = {c: _hint_kernel(getattr(tk.dt, c[0]), *c[1:]) for c in HINT_CASES}
HINT_IDS = [f"{d}x{n}-{lo}-{so}" for d, n, lo, so in HINT_CASES]


def _run_hinted(case, target, rng):
    name, n, _, _ = case
    count = n * (int(rng.integers(50, 200)) | 1)
    a = random_array(rng, count, name)
    out = poisoned(count, name)
    HINT_KERNELS[case][(count // n + 63) // 64, 64](out, a, count, target=target)
    ref = (a + a).reshape(-1, n)[:, ::-1].reshape(-1)
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("case", HINT_CASES, ids=HINT_IDS)
def test_cache_hints_move_the_same_values(target, rng, case):
    """A hint changes where data is cached, never a value (the CPU target ignores it)."""
    _run_hinted(case, target, rng)
    gpu_ok(HINT_KERNELS[case])


@pytest.mark.gpu
@pytest.mark.parametrize("case", HINT_CASES, ids=HINT_IDS)
def test_cache_hints_on_the_gpu(rng, case):
    _run_hinted(case, "gpu", rng)


@pytest.mark.parametrize("case", HINT_CASES, ids=HINT_IDS)
def test_cache_hints_in_the_cuda_source(case):
    name, n, lop, sop = case
    k = HINT_KERNELS[case]
    nbytes = getattr(tk.dt, name).itemsize * n
    form = {16: "v4.u32", 8: "v2.u32", 4: "u32", 2: "u16", 1: "u8"}[nbytes]
    src = k.cuda_source
    assert f"thork_ld_{lop}(" in src and f"thork_st_{sop}(" in src
    assert f'"ld.global.{lop}.{form}' in src and f'"st.global.{sop}.{form}' in src
    # one helper per operator used, none for the others; plain C++ on the CPU target
    assert src.count("THORK_FN T thork_ld_") == 1 and src.count("THORK_FN void thork_st_") == 1
    if "cpu" in TARGETS:
        cpu = k.source_for("cpu")  # (the shared prelude's guarded bf16 asm aside)
        assert "thork_ld_" not in cpu and "thork_st_" not in cpu
        assert "ld.global" not in cpu and "st.global" not in cpu
    assert "thork_ld_" not in VEC_KERNELS[("float32", 4)].cuda_source


# -- L2 eviction priorities (evict=: createpolicy + .L2::cache_hint) ----------------------
# (dtype, n, load cache op, load priority, store cache op, store priority): every access size
# and every priority at least once, alone and with a cache operator.
EVICT_CASES = [("float32", 4, None, "first", None, "last"),
               ("float16", 8, "cs", "first", "cs", "normal"),
               ("uint8", 1, None, "unchanged", "wt", "first"),
               ("float16", 1, "cg", "last", None, "unchanged"),
               ("int32", 1, None, "normal", None, None),
               ("float64", 1, None, None, "cg", "last"),
               ("float32", 2, "lu", "first", None, "first"),
               ("uint8", 2, None, "last", "cs", None)]
EVICT_IDS = ["-".join(str(p) for p in c) for c in EVICT_CASES]


def _evict_kernel(dtype, n, lop, lev, sop, sev):
    @tk.jit(name=f"evict_{dtype.name}_{n}_{lop}_{lev}_{sop}_{sev}")
    def k(out: tk.DevicePointer[dtype], a: tk.DevicePointer[dtype], count: i32):
        i = tk.cast(tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x, i32)
        with tk.if_(i * n < count):
            if n == 1:
                out.store(i, a.load(i, cache=lop, evict=lev) + a[i], cache=sop, evict=sev)
            else:
                vals = a.vload(i * n, n, cache=lop, evict=lev)
                out.vstore(i * n, [v + v for v in reversed(vals)], cache=sop, evict=sev)
    return k


EVICT_KERNELS = {c: _evict_kernel(getattr(tk.dt, c[0]), *c[1:]) for c in EVICT_CASES}


def _run_evicted(case, target, rng):
    name, n = case[:2]
    count = n * (int(rng.integers(50, 200)) | 1)
    a = random_array(rng, count, name)
    out = poisoned(count, name)
    EVICT_KERNELS[case][(count // n + 63) // 64, 64](out, a, count, target=target)
    ref = (a + a).reshape(-1, n)[:, ::-1].reshape(-1)
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("case", EVICT_CASES, ids=EVICT_IDS)
def test_evict_hints_move_the_same_values(target, rng, case):
    """An eviction priority changes what the L2 keeps, never a value (the CPU target
    ignores it)."""
    _run_evicted(case, target, rng)
    compiles_for_gpu(EVICT_KERNELS[case], archs=("sm_80", "sm_90"))


@pytest.mark.gpu
@pytest.mark.parametrize("case", EVICT_CASES, ids=EVICT_IDS)
def test_evict_hints_on_the_gpu(rng, case):
    _run_evicted(case, "gpu", rng)


@pytest.mark.parametrize("case", EVICT_CASES, ids=EVICT_IDS)
def test_evict_hints_in_the_cuda_source(case):
    name, n, lop, lev, sop, sev = case
    k = EVICT_KERNELS[case]
    nbytes = getattr(tk.dt, name).itemsize * n
    form = {16: "v4.u32", 8: "v2.u32", 4: "u32", 2: "u16", 1: "u8"}[nbytes]
    src = k.cuda_source

    def helper(kind, op, ev):
        parts = [p for p in (op, ev and f"L2{ev}") if p]
        return f"thork_{kind}_{'_'.join(parts)}(" if parts else None

    def ptx(kind, op, ev):
        quals = "".join(f".{q}" for q in (op, ev and "L2::cache_hint") if q)
        return f'"{kind}.global{quals}.{form} '

    for kind, op, ev in (("ld", lop, lev), ("st", sop, sev)):
        if helper(kind, op, ev) is None:
            continue
        assert helper(kind, op, ev) in src, (kind, op, ev)
        assert ptx(kind, op, ev) in src, (kind, op, ev)
        if ev:  # the access names the policy operand, computed by its helper
            assert f"const unsigned long long pol = thork_l2_policy_{ev}();" in src
    for ev in {lev, sev} - {None}:
        assert (f'asm("createpolicy.fractional.L2::evict_{ev}.b64 %0, 1.0;" : "=l"(p));'
                in src)
        assert src.count(f"THORK_FN unsigned long long thork_l2_policy_{ev}()") == 1
    for ev in set(EVICT_PRIORITIES) - {lev, sev}:
        assert f"thork_l2_policy_{ev}" not in src
    if lev:  # the exact 16-byte / 1-byte forms of a hinted load
        if nbytes == 16:
            assert (f'"ld.global{"." + lop if lop else ""}.L2::cache_hint.v4.u32 '
                    '{%0, %1, %2, %3}, [%4], %5;" : "=r"(r.u[0]), "=r"(r.u[1]), '
                    '"=r"(r.u[2]), "=r"(r.u[3]) : "l"(p), "l"(pol) : "memory");') in src
    if sev and nbytes == 1:
        assert (f'"st.global{"." + sop if sop else ""}.L2::cache_hint.u8 [%0], %1, %2;" : : '
                '"l"(p), "h"(r.h), "l"(pol) : "memory");') in src
    assert k.ir.min_sm == 80
    if "cpu" in TARGETS:
        cpu = k.source_for("cpu")
        assert "createpolicy" not in cpu and "thork_l2_policy" not in cpu
        assert "L2::cache_hint" not in cpu


@pytest.mark.plugin("nvrtc")
def test_evict_hints_need_sm80():
    k = EVICT_KERNELS[EVICT_CASES[0]]
    assert k.ir.sm80_feature == "an L2 eviction priority (evict=)"
    with pytest.raises(CompileError, match=r"uses an L2 eviction priority \(evict=\), which "
                                           r"needs sm_80 or newer; cannot compile it for sm_75"):
        k.artifact("sm_75", compiler="nvrtc")
    assert HINT_KERNELS[HINT_CASES[0]].ir.min_sm == 75  # cache operators alone: no policy


def test_evict_hint_errors():
    def bad_priority(a: tk.DevicePointer[f32]):
        a.vload(0, 4, evict="evict_first")

    def bad_store_priority(a: tk.DevicePointer[f32]):
        a.store(0, 1.0, evict="lu")

    def shared(a: tk.DevicePointer[f32]):
        sh = tk.shared_array(f32, 32)
        a[0] = sh.load(0, evict="first")

    def not_a_string(a: tk.DevicePointer[f32]):
        tk.store_vec(a, 0, (1.0, 2.0), evict=True)

    def bad_cache_with_priority(a: tk.DevicePointer[f32]):
        a[0] = a.load(0, cache="wt", evict="first")
    with pytest.raises(TraceError, match=r"tk.load_vec\(\): evict must be None or one of "
                                         r"'first', 'last', 'normal', 'unchanged' \(L2 "
                                         r"eviction priorities\), got 'evict_first'"):
        tk.jit(bad_priority).ir
    with pytest.raises(TraceError, match=r"'a'.store\(\): evict must be .*got 'lu'"):
        tk.jit(bad_store_priority).ir
    with pytest.raises(TraceError, match=r"evict='first' applies to global memory; .* is a "
                                         "shared array"):
        tk.jit(shared).ir
    with pytest.raises(TraceError, match=r"tk.store_vec\(\): evict must be .*got True"):
        tk.jit(not_a_string).ir
    with pytest.raises(TraceError, match=r"'a'.load\(\): cache must be None or one of .*"
                                         "got 'wt'"):
        tk.jit(bad_cache_with_priority).ir


def test_cache_hint_errors():
    def bad_load_op(a: tk.DevicePointer[f32]):
        a.vload(0, 4, cache="wb")

    def bad_store_op(a: tk.DevicePointer[f32]):
        a.store(0, 1.0, cache="lu")

    def shared(a: tk.DevicePointer[f32]):
        sh = tk.shared_array(f32, 32)
        a[0] = sh.load(0, cache="cs")

    def not_a_string(a: tk.DevicePointer[f32]):
        tk.store_vec(a, 0, (1.0, 2.0), cache=1)
    with pytest.raises(TraceError, match=r"tk.load_vec\(\): cache must be None or one of "
                                         r"'ca', 'cg', 'cs', 'lu', 'cv'.*got 'wb'"):
        tk.jit(bad_load_op).ir
    with pytest.raises(TraceError, match=r"'a'.store\(\): cache must be None or one of "
                                         r"'wb', 'cg', 'cs', 'wt'.*got 'lu'"):
        tk.jit(bad_store_op).ir
    with pytest.raises(TraceError, match="applies to global memory; .* is a shared array"):
        tk.jit(shared).ir
    with pytest.raises(TraceError, match=r"tk.store_vec\(\): cache must be .*got 1"):
        tk.jit(not_a_string).ir


# -- dynamic shared memory -------------------------------------------------------------------
@tk.jit
def reverse_dynamic(out: tk.DevicePointer[f32], a: tk.DevicePointer[f32],
                    idx: tk.DevicePointer[i32], n: i32):
    """Reverse each block's chunk through dynamic shared memory (two arrays in it)."""
    buf = tk.dynamic_shared(f32)
    ib = tk.dynamic_shared(i32, offset=4096)
    t, bs = tk.thread_idx().x, tk.block_dim().x
    i = tk.block_idx().x * bs + t
    with tk.if_(i < n):
        buf[t] = a[i]
        ib[t] = idx[i]
    tk.syncthreads()
    r = bs - 1 - t
    j = tk.block_idx().x * bs + r
    with tk.if_((j < n) & (i < n)):
        out[i * 2] = buf[r]
        out[i * 2 + 1] = tk.cast(ib[r], f32)


@tk.jit
def static_and_dynamic(out: tk.DevicePointer[f32], n: i32):
    """4 KiB of static shared memory beside n floats of dynamic shared memory."""
    st = tk.shared_array(f32, (1024,))
    dyn = tk.dynamic_shared(f32)
    t = tk.thread_idx().x
    for i in range(4):
        st[t + 256 * i] = tk.cast(t + 256 * i, f32)
    dyn[n - 1 - t] = tk.cast(t, f32) * 2.0
    tk.syncthreads()
    out[t] = st[1023 - t] + dyn[n - 256 + t]


def test_static_plus_dynamic_shared_over_48k(target):
    """46 KiB dynamic + 4 KiB static: over CUDA's 48 KiB default cap, which counts both, so
    the launch must opt in although the dynamic part alone is under 48 KiB."""
    n = 46 * 1024 // 4
    out = poisoned(256, np.float32)
    static_and_dynamic[1, 256, 4 * n](out, n, target=target)
    t = np.arange(256)
    np.testing.assert_array_equal(out, (1023 - t) + 2.0 * (255 - t))


@pytest.mark.parametrize("bs", [64, 200])
def test_dynamic_shared_memory(target, rng, bs):
    n = bs * 7
    a = random_array(rng, n, np.float32)
    idx = np.arange(n, dtype=np.int32)
    out = poisoned((n, 2), np.float32)
    reverse_dynamic[7, bs, 4096 + 4 * bs](out, a, idx, n, target=target)
    np.testing.assert_array_equal(out[:, 0], a.reshape(7, bs)[:, ::-1].reshape(-1))
    np.testing.assert_array_equal(out[:, 1], idx.reshape(7, bs)[:, ::-1].reshape(-1))
    assert "extern __shared__" in reverse_dynamic.source
    gpu_ok(reverse_dynamic)


# -- barrier semantics on the CPU target -----------------------------------------------------
@tk.jit
def barrier_in_loop(out: tk.DevicePointer[i32], rounds: i32):
    """Each round every thread reads its neighbour's value written in the previous round:
    correct only if the barrier really separates the rounds."""
    s = tk.shared_array(i32, 2 * 128)
    t = tk.thread_idx().x
    s[t] = tk.cast(t, i32)
    tk.syncthreads()
    for r in tk.range(rounds):
        cur = (r % 2) * 128
        nxt = 128 - cur
        s[nxt + t] = s[cur + (t + 1) % 128] + 1
        tk.syncthreads()
    out[t] = s[(rounds % 2) * 128 + t]


def test_barriers_inside_device_loops(target, rng):
    rounds = int(rng.integers(5, 40))
    out = poisoned(128, np.int32)
    barrier_in_loop[1, 128](out, rounds, target=target)
    np.testing.assert_array_equal(out, (np.arange(128) + rounds) % 128 + rounds)
    gpu_ok(barrier_in_loop)


@tk.jit
def early_exit_then_barrier(out: tk.DevicePointer[i32], n: i32):
    s = tk.shared_array(i32, 64)
    t = tk.thread_idx().x
    with tk.if_(t >= n):
        tk.return_()  # exited threads no longer count for the barrier
    s[t] = tk.cast(t, i32) * 2
    tk.syncthreads()
    out[t] = s[n - 1 - t]


def test_returned_threads_leave_the_barrier(target):
    out = poisoned(64, np.int32)
    early_exit_then_barrier[1, 64](out, 40, target=target)
    np.testing.assert_array_equal(out[:40], (39 - np.arange(40)) * 2)
    assert (out[40:] == np.iinfo(np.int32).max).all()


@tk.jit
def divergent_barrier(out: tk.DevicePointer[i32]):
    t = tk.thread_idx().x
    with tk.if_(t < 10):
        tk.syncthreads()  # waits for lanes 10.. which wait in the shuffle for lanes < 10
    with tk.else_():
        out[t] = tk.shfl_down(tk.cast(t, i32), 1)
    out[t] = 1


@pytest.mark.plugin("cpu")  # runs on the CPU target by name
def test_cpu_reports_a_barrier_that_never_opens():
    # Only on the CPU target: on a GPU this is undefined behaviour (it may hang).
    out = np.zeros(32, np.int32)
    with pytest.raises(LaunchError, match="could never"):
        divergent_barrier[1, 32](out, target="cpu")
