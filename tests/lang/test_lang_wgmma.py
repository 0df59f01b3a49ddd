"""Hopper: sm_90a targeting, tk.wgmma on shared-memory descriptors, mbarriers, TMA tile loads.

The descriptor bits and the swizzle address mapping are pinned against values worked out
by hand from the PTX ISA ("Matrix Descriptor Format", the swizzling modes of "Shared Memory
Matrix Layout"); results against NumPy on random odd-valued inputs of odd sizes. The D
fragment layout (PTX's m64nNk16 accumulator figure) is written out independently below.
On the CPU target the model is exact (products exact, float32 sums in k order), so the
CPU results are compared bit-exactly with NumPy doing the same; on the GPU within the
tensor cores' bound. No GPU here: the GPU paths compile to cubin for sm_90a.
"""

import pickle

import numpy as np
import pytest
import thork as tk
from helpers import has_plugin, poisoned

f16, bf16, f32 = tk.dt.float16, tk.dt.bfloat16, tk.dt.float32
u64, i32, u32 = tk.dt.uint64, tk.dt.int32, tk.dt.uint32
P = tk.DevicePointer


@pytest.fixture
def hopper(target):
    """The ``target`` fixture, skipping GPUs other than sm_90 (where these kernels are an
    ArchError: test_hopper_kernels_need_sm90 checks that)."""
    if target == "gpu":
        from thork_core import gpu_arch

        if not gpu_arch().startswith("sm_90"):
            pytest.skip(f"the GPU is {gpu_arch()}, not a Hopper (sm_90)")
    return target


# -- PTX facts, written out ---------------------------------------------------------------
def d_coord(tid, i):
    """(row, col) of accumulator register i of thread tid (0..127) of the warpgroup:
    warp w = tid // 32 owns rows 16w..16w+15; lane (g, t) = (lane // 4, lane % 4) holds,
    per 8-column block j = i // 4, rows g and g + 8, columns 8j + 2t and 8j + 2t + 1."""
    w, lane = tid // 32, tid % 32
    g, t = lane // 4, lane % 4
    return 16 * w + g + (8 if i % 4 >= 2 else 0), 8 * (i // 4) + 2 * t + i % 2


def test_descriptor_bits_by_hand():
    # start 0x1230 -> 0x123 in bits 0-13; LBO 128 -> 8 at bit 16; SBO 256 -> 16 at bit 32.
    assert tk.wgmma_descriptor(0x1230, 128, 256) == 0x123 | 8 << 16 | 16 << 32
    # swizzle modes in bits 62-63: 128 B -> 1, 64 B -> 2, 32 B -> 3
    assert tk.wgmma_descriptor(0, 16, 1024, 128) == 1 << 16 | 64 << 32 | 1 << 62
    assert tk.wgmma_descriptor(0x400, 16, 512, 64) == 0x40 | 1 << 16 | 32 << 32 | 2 << 62
    assert tk.wgmma_descriptor(0x3FFF0, 0, 256, 32) == 0x3FFF | 16 << 32 | 3 << 62
    for bad in ((8, 16, 16), (0, 24, 16), (0, 16, 1 << 18), (1 << 18, 16, 16)):
        with pytest.raises(tk.TraceError, match="wgmma_descriptor"):
            tk.wgmma_descriptor(*bad)
    with pytest.raises(tk.TraceError, match="swizzle must be"):
        tk.wgmma_descriptor(0, 16, 16, 16)


def test_swizzle_address_mapping_by_hand():
    # 128 B: 16-byte chunk (bits 4-6) XOR row in the 8-row atom (bits 7-9).
    assert tk.swizzle(0x080, 128) == 0x090     # row 1 chunk 0 -> chunk 1
    assert tk.swizzle(0x3F0, 128) == 0x380     # row 7 chunk 7 -> chunk 0
    assert tk.swizzle(0x2A5, 128) == 0x2F5     # row 5 chunk 2 (byte 5) -> chunk 7
    assert tk.swizzle(0x400, 128) == 0x400     # the pattern repeats every 1024 bytes
    # 64 B: chunk bits 4-5 XOR bits 7-8 (rows of 64 bytes: row // 2).
    assert tk.swizzle(0x080, 64) == 0x090
    assert tk.swizzle(0x0B0, 64) == 0x0A0
    assert tk.swizzle(0x1C0, 64) == 0x1F0      # row 7: bits 7-8 = 3, chunk 0 -> 3
    # 32 B: chunk bit 4 XOR bit 7 (rows of 32 bytes: rows 4..7 swap their halves).
    assert tk.swizzle(0x060, 32) == 0x060
    assert tk.swizzle(0x080, 32) == 0x090
    assert tk.swizzle(0x0F0, 32) == 0x0E0
    assert all(tk.swizzle(a, 0) == a for a in range(0, 4096, 16))
    for w in (32, 64, 128):  # a permutation of each 8-row atom
        atom = 8 * w
        assert sorted(tk.swizzle(a, w) for a in range(atom)) == list(range(atom))


# -- wgmma from hand-placed shared memory (no swizzle) -------------------------------------
def _plain_kernel(n, dtype):
    @tk.jit
    def wg_plain(a: P[dtype], b: P[dtype], c: P[f32], d: P[f32]):
        """A 64x16 and B n x16 (K-major) stored as core matrices: 8 rows x 16 bytes, K
        chunks 128 bytes apart (LBO), 8-row groups 256 bytes apart (SBO)."""
        sa = tk.shared_array(dtype, (64 * 16,))
        sb = tk.shared_array(dtype, (n * 16,))
        tid = tk.thread_idx().x
        for src, dst, count in ((a, sa, 64 * 16), (b, sb, n * 16)):
            for j in range(max(count // 128, 1)):
                e = tid + 128 * j
                r, kk = e // 16, e % 16
                with tk.if_(e < count):
                    dst[(r // 8) * 128 + (kk // 8) * 64 + (r % 8) * 8 + kk % 8] = src[e]
        tk.fence_proxy_async()
        tk.syncthreads()
        da = tk.wgmma_descriptor(tk.smem_address(sa), 128, 256)
        db = tk.wgmma_descriptor(tk.smem_address(sb), 128, 256)
        acc = tuple(c[tid * (n // 2) + i] for i in range(n // 2))
        tk.wgmma_fence()
        out = tk.wgmma(da, db, acc, n, dtype=dtype)
        tk.wgmma_commit()
        tk.wgmma_wait(0)
        for i in range(n // 2):
            d[tid * (n // 2) + i] = out[i]
    return wg_plain


def _odd(rng, shape, dtype):
    """Odd integers in [-7, 7]: exact in 16-bit floats, products exact in float32."""
    x = rng.integers(-4, 4, shape) * 2 + 1
    return x.astype(np.dtype(dtype))


def _kfirst_sum(a, b, c):
    """C + sum_k a[:, k] b[:, k] in float32, k in order (the CPU model's arithmetic)."""
    acc = c.astype(np.float32).copy()
    af, bf = a.astype(np.float32), b.astype(np.float32)
    for k in range(a.shape[1]):
        acc = (acc + np.outer(af[:, k], bf[:, k]).astype(np.float32)).astype(np.float32)
    return acc


@pytest.mark.parametrize("n,dtype", [(8, "float16"), (24, "float16"), (32, "bfloat16"),
                                     (192, "bfloat16"), (256, "float16")])
def test_wgmma_fragment_and_values(hopper, rng, n, dtype):
    target = hopper
    if dtype == "bfloat16":
        pytest.importorskip("ml_dtypes")
    kern = _plain_kernel(n, {"float16": f16, "bfloat16": bf16}[dtype])
    a = _odd(rng, (64, 16), dtype)
    b = _odd(rng, (n, 16), dtype)
    cmat = _odd(rng, (64, n), np.float32)
    # C and D travel per thread in the D fragment's order.
    cregs = np.array([[cmat[d_coord(t, i)] for i in range(n // 2)] for t in range(128)],
                     np.float32)
    dregs = poisoned((128, n // 2), np.float32)
    kern[1, 128](a, b, cregs, dregs, target=target)
    got = np.empty((64, n), np.float32)
    for t in range(128):
        for i in range(n // 2):
            got[d_coord(t, i)] = dregs[t, i]
    ref = cmat + a.astype(np.float64) @ b.astype(np.float64).T
    if target == "cpu":
        np.testing.assert_array_equal(got, _kfirst_sum(a, b, cmat))
    bound = 16 * 2.0**-22 * (np.abs(cmat) + np.abs(a.astype(np.float64)) @ np.abs(
        b.astype(np.float64)).T)
    assert (np.abs(got - ref) <= bound).all()


# -- TMA (swizzled) + mbarrier + wgmma over several k16 steps -------------------------------
def _map(target, array, box, sw, keep):
    """The tensor map of ``array`` for ``target``: of a device copy on the GPU (the driver's
    CUtensorMap, the copy kept alive in ``keep``), of the NumPy array itself on the CPU."""
    if target == "gpu":
        from thork_core import DeviceArray

        keep.append(DeviceArray.from_host(np.ascontiguousarray(array)))
        return tk.tensor_map(keep[-1], box, sw)
    return tk.tensor_map(array, box, sw)


def _tma_kernel(sw, n):
    cols = sw // 2  # 16-bit elements per swizzled row: the K tile

    @tk.jit
    def wg_tma(ta: P[u64], tb: P[u64], d: P[f32], m: i32, nn: i32):
        """One warpgroup: thread 0 loads A (64 x cols) and B (n x cols) by TMA into the
        swizzled layout, everyone waits on the mbarrier, then cols/16 wgmma steps."""
        sa = tk.shared_array(f16, (64 * cols,))
        sb = tk.shared_array(f16, (n * cols,))
        bar = tk.shared_array(u64, (1,))
        tid = tk.thread_idx().x
        with tk.if_(tid == 0):
            tk.mbarrier_init(bar, 0, 1)
        tk.syncthreads()
        with tk.if_(tid == 0):
            tk.mbarrier_expect_tx(bar, 0, (64 + n) * cols * 2)
            tk.tma_load(sa, 0, ta, 0, 0, bar, 0)
            tk.tma_load(sb, 0, tb, 0, 0, bar, 0)
        tk.mbarrier_wait(bar, 0, 0)
        tk.wgmma_fence()
        acc = None
        for ks in range(cols // 16):
            da = tk.wgmma_descriptor(tk.smem_address(sa, ks * 16), 16, 8 * sw, sw)
            db = tk.wgmma_descriptor(tk.smem_address(sb, ks * 16), 16, 8 * sw, sw)
            acc = tk.wgmma(da, db, acc, n)
        tk.wgmma_commit()
        tk.wgmma_wait(0)
        w, lane = tid // 32, tid % 32
        g, t = lane // 4, lane % 4
        for i in range(n // 2):
            row = 16 * w + g + 8 * ((i >> 1) & 1)
            col = 8 * (i >> 2) + 2 * t + (i & 1)
            with tk.if_((row < m) & (col < nn)):
                d[row * nn + col] = acc[i]
    return wg_tma


@pytest.mark.parametrize("sw,n", [(128, 16), (64, 64), (32, 8)])
def test_tma_swizzled_wgmma_with_out_of_bounds(hopper, rng, sw, n):
    target = hopper
    cols = sw // 2
    m, k, nn = 51, cols - 8, n - 3  # odd sizes: TMA zero-fills rows, columns and K
    a = _odd(rng, (m, k), np.float16)
    b = _odd(rng, (nn, k), np.float16)
    d = poisoned((m, nn), np.float32)
    keep: list = []
    ta, tb = _map(target, a, (64, cols), sw, keep), _map(target, b, (n, cols), sw, keep)
    _tma_kernel(sw, n)[1, 128](ta, tb, d, m, nn, target=target)
    np.testing.assert_array_equal(d, a.astype(np.float32) @ b.astype(np.float32).T)


@tk.jit
def tma_raw(tmap: P[u64], out: P[tk.dt.uint16], rows: i32, cols: i32, x: i32, y: i32):
    """Copy the shared tile a TMA load produced, byte for byte, to ``out``."""
    s = tk.shared_array(tk.dt.uint16, (64 * 64,))
    bar = tk.shared_array(u64, (1,))
    tid = tk.thread_idx().x
    with tk.if_(tid == 0):
        tk.mbarrier_init(bar, 0, 1)
    tk.syncthreads()
    with tk.if_(tid == 0):
        tk.mbarrier_expect_tx(bar, 0, rows * cols * 2)
        tk.tma_load(s, 0, tmap, x, y, bar, 0)
    tk.mbarrier_wait(bar, 0, 0)
    for i in tk.range(tid, rows * cols, 128):
        out[i] = s[i]


@pytest.mark.parametrize("sw", [0, 32, 64, 128])
def test_tma_shared_layout_is_the_swizzle(hopper, rng, sw):
    """The shared tile after a TMA load: element (r, c) of the box at byte
    swizzle(r * row_bytes + 2c) (the tile is 1024-byte aligned), zeros outside the array.
    On the GPU this checks the model against the hardware's TMA."""
    target = hopper
    cols = (sw or 64) // 2
    rows = 24
    src = rng.integers(1, 60000, (37, 72)).astype(np.uint16)
    x, y = 56, 20  # the box hangs over the right and bottom edges
    out = poisoned((rows * cols,), np.uint16)
    keep: list = []
    tma_raw[1, 128](_map(target, src, (rows, cols), sw, keep), out, rows, cols, x, y,
                    target=target)
    want = np.zeros(rows * cols, np.uint16)
    for r in range(rows):
        for c in range(cols):
            yy, xx = y + r, x + c
            v = src[yy, xx] if yy < src.shape[0] and xx < src.shape[1] else 0
            want[tk.swizzle((r * cols + c) * 2, sw) // 2] = v
    np.testing.assert_array_equal(out, want)


def test_tensor_map_validation():
    a = np.zeros((40, 40), np.float16)
    with pytest.raises(tk.ArgumentError, match="box rows must be from 1 to 256"):
        tk.tensor_map(a, (300, 8))
    with pytest.raises(tk.ArgumentError, match="multiple of 16 bytes"):
        tk.tensor_map(a, (8, 4))
    with pytest.raises(tk.ArgumentError, match="row stride"):
        tk.tensor_map(np.zeros((8, 9), np.float16), (8, 8))
    with pytest.raises(tk.ArgumentError, match="address must be a multiple of 16"):
        tk.tensor_map(np.zeros((8, 80), np.uint8)[:, 1:65], (8, 16))
    with pytest.raises(tk.ArgumentError, match="exactly 64 bytes"):
        tk.tensor_map(np.zeros((8, 64), np.float16), (8, 64), swizzle=64)
    with pytest.raises(tk.ArgumentError, match="exactly 128 bytes"):
        tk.tensor_map(np.zeros((8, 64), np.float16), (8, 32), swizzle=128)
    with pytest.raises(tk.ArgumentError, match="2-D"):
        tk.tensor_map(np.zeros(64, np.float16), (8, 8))
    with pytest.raises(tk.ArgumentError, match="swizzle must be"):
        tk.tensor_map(a, (8, 8), swizzle=16)
    with pytest.raises(tk.ArgumentError, match="element type"):
        tk.tensor_map(np.zeros((8, 8), np.complex64), (8, 8))


    class FakeGpuArray:  # the checks come before the driver is asked
        def __init__(self, ptr, shape, strides=None):
            self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f2",
                                             "data": (ptr, False), "strides": strides,
                                             "version": 3}
    with pytest.raises(tk.ArgumentError, match="address must be a multiple of 16"):
        tk.tensor_map(FakeGpuArray(0x10008, (64, 64)), (64, 64), 128)
    with pytest.raises(tk.ArgumentError, match="row stride"):
        tk.tensor_map(FakeGpuArray(0x10000, (64, 64), (100, 2)), (64, 64), 128)
    with pytest.raises(tk.ArgumentError, match="box cols must be from 1 to 256"):
        tk.tensor_map(FakeGpuArray(0x10000, (64, 512)), (64, 264))
    words = tk.tensor_map(a, (16, 8), 0)
    assert words.dtype == np.uint64 and words.shape == (16,)
    assert words[1] == a.ctypes.data and list(words[2:9]) == [40, 40, 80, 8, 16, 2, 0]


@pytest.mark.plugin("cpu")
def test_wrong_map_and_partial_warpgroup_fail_the_launch():
    out = np.zeros(64, np.uint16)
    with pytest.raises(tk.LaunchError, match="not a CPU tensor map"):
        tma_raw[1, 128](np.zeros(16, np.uint64), out, 8, 8, 0, 0, target="cpu")
    kern = _plain_kernel(8, f16)
    a, b = np.ones((64, 16), np.float16), np.ones((8, 16), np.float16)
    with pytest.raises(tk.LaunchError, match="warpgroup missing threads"):
        kern[1, 96](a, b, np.zeros((128, 4), np.float32), np.zeros((128, 4), np.float32),
                    target="cpu")


def test_mbarrier_phases_and_deadlock(hopper):
    target = hopper
    @tk.jit
    def phases(out: P[i32], rounds: i32):
        """Warp 1 produces a value per round; warp 0 waits on 'full' (parity flips each
        round) and acknowledges on 'empty', so a round's value is read exactly once."""
        bars = tk.shared_array(u64, (2,))
        slot = tk.shared_array(i32, (1,))
        tid = tk.thread_idx().x
        with tk.if_(tid == 0):
            tk.mbarrier_init(bars, 0, 1)   # full
            tk.mbarrier_init(bars, 1, 1)   # empty
        tk.syncthreads()
        for r in tk.range(rounds):
            with tk.if_(tid == 32):
                tk.mbarrier_wait(bars, 1, (r + 1) % 2)   # round 0 passes at once
                slot[0] = r * r + 7
                tk.mbarrier_arrive(bars, 0)
            with tk.if_(tid == 0):
                tries = tk.var(0)
                with tk.while_(lambda r=r: ~tk.mbarrier_try_wait(bars, 0, r % 2)):
                    tries += 1
                out[r] = slot[0] + 0 * tries
                tk.mbarrier_arrive(bars, 1)

    out = poisoned((9,), np.int32)
    phases[1, 64](out, 9, target=target)
    np.testing.assert_array_equal(out, np.arange(9) ** 2 + 7)

    @tk.jit
    def never(out: P[i32]):
        bar = tk.shared_array(u64, (1,))
        with tk.if_(tk.thread_idx().x == 0):
            tk.mbarrier_init(bar, 0, 2)
        tk.syncthreads()
        tk.mbarrier_wait(bar, 0, 0)   # nobody arrives
        out[0] = 1

    if target == "cpu":
        with pytest.raises(tk.LaunchError, match="could never"):
            never[1, 32](np.zeros(1, np.int32), target="cpu")


# -- targeting -----------------------------------------------------------------------------
@pytest.mark.plugin("nvrtc")
def test_hopper_kernels_need_sm90(monkeypatch):
    kern = _plain_kernel(16, f16)
    assert kern.ir.hopper_feature == "tk.wgmma"
    assert tma_raw.ir.hopper_feature == "tk.tma_load"
    assert kern.ir.min_sm == 90
    for arch in ("sm_80", "sm_89", "sm_100", "sm_120"):
        with pytest.raises(tk.ArchError) as info:
            kern.artifact(arch, compiler="nvrtc" if has_plugin("nvrtc") else None)
        e = info.value
        assert (e.kernel, e.feature, e.arch) == ("wg_plain", "tk.wgmma", arch)
        assert "sm_90a" in str(e) and arch in str(e) and "wg_plain" in str(e)
        assert isinstance(e, tk.CompileError)
        again = pickle.loads(pickle.dumps(e))
        assert (again.kernel, again.arch, str(again)) == (e.kernel, e.arch, str(e))
    # the device description: THORK_ARCH stands for the GPU a build targets
    from thork_core import gpu_arch
    from thork_core._build import resolve_arch

    monkeypatch.setenv("THORK_ARCH", "sm_89")
    with pytest.raises(tk.ArchError, match="sm_89"):
        resolve_arch(kern.ir, gpu_arch())
    # the launch's build path on a GPU that describes itself as sm_80 / sm_100: the error
    # comes before anything is compiled or loaded (no GPU needed)
    from thork_core._build import build
    from thork_core._gpu import GpuTarget

    for arch in ("sm_80", "sm_100"):
        fake = type("FakeGpu", (GpuTarget,), {"arch": lambda self, a=arch: a})
        with pytest.raises(tk.ArchError, match=f"wg_plain.*tk.wgmma.*{arch}"):
            build(kern.ir, kern.cuda_source, fake(), object())  # type: ignore[arg-type]
    assert resolve_arch(kern.ir, "sm_90") == "sm_90a"
    assert resolve_arch(kern.ir, "cpu") == "cpu"


@pytest.mark.plugin("nvrtc")
def test_cache_key_has_sm90a():
    from thork_core import plugins
    from thork_core._build import key_parts, precompile
    from thork_core._cache import cache_key

    kern = _plain_kernel(16, f16)
    from thork_core._gpu import GpuTarget

    comp = plugins().compiler("nvrtc", GpuTarget())
    k90a = precompile(kern.ir, "gpu", comp, "sm_90")
    ident, flags90 = key_parts(comp, "cubin", "sm_90")
    assert any("sm_90a" in f for f in key_parts(comp, "cubin", "sm_90a")[1])
    assert k90a != cache_key(kern.cuda_source, ident, flags90, "cubin", "sm_90")
    ident, flags = key_parts(comp, "cubin", "sm_90a")
    assert k90a == cache_key(kern.cuda_source, ident, flags, "cubin", "sm_90a")


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc", "clang"])
def test_hopper_kernels_compile_to_cubin_for_sm90a(compiler):
    if not has_plugin(compiler):
        pytest.skip(f"{compiler} is not installed here")
    from thork_core import plugins

    ok, why = next(c for c in plugins().compilers() if c.name == compiler).available()
    if not ok:
        pytest.skip(f"{compiler} is not usable here: {why}")
    # n = 192: 96 accumulators, a thork_vec whose size is no power of two
    for kern in (_plain_kernel(256, bf16), _plain_kernel(192, f16), _tma_kernel(128, 64),
                 tma_raw):
        art = kern.artifact("sm_90", compiler=compiler)
        assert art.arch == "sm_90a" and art.kind == "cubin" and art.data[:4] == b"\x7fELF"
        # clang without sm_90a (before clang 17) hands over to nvcc, saying why
        fallback = art.info.get("fallback", "")
        assert art.compiler.startswith(f"{compiler}-") or (
            compiler == "clang" and fallback.startswith("nvcc: ")), (art.compiler, fallback)
    src = _plain_kernel(64, f16).cuda_source
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16" in src
    assert "aligned(1024)" in src


def test_wgmma_errors():
    def trace(fn):
        k = tk.jit(fn)
        with pytest.raises(tk.TraceError) as info:
            k.ir  # noqa: B018 - tracing raises
        return str(info.value)

    def bad_n(x: P[u64]):
        tk.wgmma(x[0], x[0], None, 20)
    assert "n must be a multiple of 8 from 8 to 256, got 20" in trace(bad_n)

    def bad_desc(x: P[u32]):
        tk.wgmma(x[0], x[0], None, 8)
    assert "64-bit descriptor" in trace(bad_desc)

    def bad_acc(x: P[u64]):
        tk.wgmma(x[0], x[0], (0.0,) * 3, 8)
    assert "tuple of 4 float32" in trace(bad_acc)

    def bad_dtype(x: P[u64]):
        tk.wgmma(x[0], x[0], None, 8, dtype=f32)
    assert "float16 or bfloat16" in trace(bad_dtype)

    def bad_wait(x: P[u64]):
        tk.wgmma_wait(9)
    assert "from 0 to 7" in trace(bad_wait)

    def global_barrier(x: P[u64]):
        tk.mbarrier_init(x, 0, 1)
    assert "shared uint64 array" in trace(global_barrier)

    def not_a_map(x: P[f32]):
        s = tk.shared_array(f32, (16,))
        bar = tk.shared_array(u64, (1,))
        tk.tma_load(s, 0, x, 0, 0, bar, 0)
    assert "uint64 array parameter" in trace(not_a_map)


def test_tensor_map_passes_the_bindings_own_integer_types(monkeypatch):
    """cuda-bindings' cuTensorMapEncodeTiled refuses plain ints for its cuuint32_t and
    cuuint64_t lists (the H200 run of 2026-12-01 failed so): each value travels as the
    binding's own type, with the value asked for."""
    cu = pytest.importorskip("cuda.bindings.driver")
    from thork import _tma

    seen = {}

    class Map:
        opaque = list(range(16))

    def encode(dtype, rank, ptr, dims, strides, box, elem, *rest):
        for name, vals, kind in (("dims", dims, cu.cuuint64_t),
                                 ("strides", strides, cu.cuuint64_t),
                                 ("box", box, cu.cuuint32_t), ("elem", elem, cu.cuuint32_t)):
            assert all(isinstance(v, kind) for v in vals), (name, vals)
            seen[name] = [int(v) for v in vals]
        seen["rank"], seen["ptr"] = rank, ptr
        return 0, Map()

    monkeypatch.setattr(cu, "cuTensorMapEncodeTiled", encode)
    out = _tma._encode_gpu(0x7000, "float16", 77, 45, 160, 64, 32, 128)
    assert seen == {"dims": [77, 45], "strides": [160], "box": [64, 32], "elem": [1, 1],
                    "rank": 2, "ptr": 0x7000}
    assert out.dtype == np.uint64 and out.tolist() == list(range(16))
