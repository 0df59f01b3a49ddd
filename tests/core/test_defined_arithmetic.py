"""Defined integer arithmetic (docs/guarantees.md): ``x // 0 = 0``, ``x % 0 = x``,
``MIN // -1 = MIN``, ``MIN % -1 = 0``, and signed ``+ - * <<`` and negation wrap, the same on
every target and compiler. Checked against a NumPy/Python-integer model of those rules on
every integer type, with the edge values mixed into fresh random inputs, plus the case of a
user's overflow guard that C++'s undefined signed overflow would let the optimizer remove.
"""

import numpy as np
import pytest
import thork as tk
from helpers import compiles_for_gpu, has_plugin, poisoned

INT_TYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


def promoted(name: str) -> np.dtype:
    """C++ integral promotion (what tk computes in): narrower than int becomes int32."""
    d = np.dtype(name)
    return np.dtype(np.int32) if d.itemsize < 4 else d


def wrap(values: list[int], d: np.dtype) -> np.ndarray:
    """Python integers reduced modulo 2**bits into ``d`` (two's complement)."""
    bits = d.itemsize * 8
    out = []
    for v in values:
        v &= (1 << bits) - 1
        if d.kind == "i" and v >= 1 << (bits - 1):
            v -= 1 << bits
        out.append(v)
    return np.array(out, dtype=d)


def model_div(a: int, b: int, d: np.dtype) -> int:
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    q = q if (a < 0) == (b < 0) else -q  # truncating, as C++
    return int(wrap([q], d)[0])


def model_mod(a: int, b: int, d: np.dtype) -> int:
    if b == 0:
        return a
    return int(wrap([a - b * model_div(a, b, d)], d)[0]) if not (b == -1) else 0


def edge_inputs(rng: np.random.Generator, name: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``a`` and ``b`` of dtype ``name``: random values with MIN, MAX, 0, ±1 mixed in and
    every pairing of the edges present."""
    d = np.dtype(name)
    info = np.iinfo(d)
    edges = sorted({int(info.min), int(info.max), 0, 1, int(info.min) + 1,
                    *([-1] if d.kind == "i" else [])})
    pa, pb = zip(*[(x, y) for x in edges for y in edges])
    ra = rng.integers(int(info.min), int(info.max), size=n, endpoint=True, dtype=d)
    rb = rng.integers(int(info.min), int(info.max), size=n, endpoint=True, dtype=d)
    rb[rng.random(n) < 0.2] = 0
    if d.kind == "i":
        rb[rng.random(n) < 0.1] = -1
    a = np.concatenate([np.array(pa, dtype=d), ra])
    b = np.concatenate([np.array(pb, dtype=d), rb])
    perm = rng.permutation(a.size)
    return a[perm], b[perm]


def arith_kernel(name: str) -> tk.Kernel:
    t = getattr(tk.dt, name)
    r = getattr(tk.dt, promoted(name).name)
    i32 = tk.dt.int32

    @tk.jit
    def int_ops(q: tk.DevicePointer[r], m: tk.DevicePointer[r], s: tk.DevicePointer[r],
                df: tk.DevicePointer[r], p: tk.DevicePointer[r], ng: tk.DevicePointer[r],
                sh: tk.DevicePointer[r], a: tk.DevicePointer[t], b: tk.DevicePointer[t],
                n: i32):
        i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
        with tk.if_(i < n):
            x, y = a[i], b[i]
            q[i] = x // y
            m[i] = x % y
            s[i] = x + y
            df[i] = x - y
            p[i] = x * y
            ng[i] = -tk.cast(x, r)
            sh[i] = tk.cast(x, r) << 3

    int_ops.__name__ = f"int_ops_{name}"
    return int_ops


@pytest.mark.parametrize("name", INT_TYPES)
def test_integer_ops_match_the_defined_model(target, rng, name):
    n = int(rng.integers(300, 700)) | 1
    a, b = edge_inputs(rng, name, n)
    size = a.size
    r = promoted(name)
    outs = [poisoned(size, r) for _ in range(7)]
    k = arith_kernel(name)
    k[(size + 127) // 128, 128](*outs, a, b, size, target=target)
    ai, bi = [int(v) for v in a.astype(object)], [int(v) for v in b.astype(object)]
    q, m, s, df, p, ng, sh = outs
    np.testing.assert_array_equal(q, np.array([model_div(x, y, r) for x, y in zip(ai, bi)], r))
    np.testing.assert_array_equal(m, np.array([model_mod(x, y, r) for x, y in zip(ai, bi)], r))
    np.testing.assert_array_equal(s, wrap([x + y for x, y in zip(ai, bi)], r))
    np.testing.assert_array_equal(df, wrap([x - y for x, y in zip(ai, bi)], r))
    np.testing.assert_array_equal(p, wrap([x * y for x, y in zip(ai, bi)], r))
    np.testing.assert_array_equal(ng, wrap([-x for x in ai], r))
    np.testing.assert_array_equal(sh, wrap([x << 3 for x in ai], r))
    compiles_for_gpu(k)


@pytest.mark.parametrize("name", ["int32", "int64"])
def test_min_by_minus_one_and_zero_divisors_do_not_trap(target, name):
    """The inputs that raise SIGFPE in plain C++ on x86 (and are undefined on the GPU)."""
    d = np.dtype(name)
    lo = int(np.iinfo(d).min)
    a = np.array([lo, lo, 7, -7, 0, lo, 5], dtype=d)
    b = np.array([-1, 0, 0, 0, 0, 1, -1], dtype=d)
    k = arith_kernel(name)
    outs = [poisoned(a.size, d) for _ in range(7)]
    k[1, 32](*outs, a, b, a.size, target=target)
    np.testing.assert_array_equal(outs[0], np.array([lo, 0, 0, 0, 0, lo, -5], d))
    np.testing.assert_array_equal(outs[1], np.array([0, lo, 7, -7, 0, 0, 0], d))


def overflow_guard_kernel(name: str) -> tk.Kernel:
    t = getattr(tk.dt, name)

    @tk.jit
    def guarded(out: tk.DevicePointer[t], a: tk.DevicePointer[t], b: tk.DevicePointer[t],
                n: tk.dt.int32):
        i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
        with tk.if_(i < n):
            x = a[i]
            # A user's guard: "x + 100 wrapped, so x was near MAX". With signed overflow
            # undefined, C++ compilers fold 'x + 100 < x' to false and drop the branch.
            wrapped = x + 100 < x
            d = tk.where(wrapped, 0, b[i])
            # A zero divisor selected by the guard: still defined (0).
            out[i] = tk.where(wrapped, -1, x // tk.where(d == 0, 1, d))

    guarded.__name__ = f"guarded_{name}"
    return guarded


@pytest.mark.parametrize("name", ["int32", "int64"])
def test_overflow_guard_is_not_optimized_away(target, rng, name):
    d = np.dtype(name)
    hi = int(np.iinfo(d).max)
    n = 301
    a = rng.integers(-1000, 1000, size=n).astype(d)
    a[rng.random(n) < 0.3] = hi - rng.integers(0, 99)  # x + 100 overflows here
    b = rng.integers(1, 50, size=n).astype(d)
    out = poisoned(n, d)
    k = overflow_guard_kernel(name)
    k[(n + 63) // 64, 64](out, a, b, n, target=target)
    ai = a.astype(object)
    wrapped = np.array([int(wrap([x + 100], d)[0]) < x for x in ai])
    ref = np.array([-1 if w else model_div(int(x), int(y), d)
                    for w, x, y in zip(wrapped, ai, b.astype(object))], d)
    assert wrapped.any() and not wrapped.all()
    np.testing.assert_array_equal(out, ref)


def test_rendered_cuda_uses_the_defined_forms():
    """The CUDA source every compiler receives spells division through the defined helpers
    and signed + - * as unsigned arithmetic; each installed CUDA compiler builds it."""
    k = arith_kernel("int32")
    src = k.cuda_source  # the translation unit the compilers get (prelude first)
    assert "thork_idiv<int>(" in src and "thork_imod<int>(" in src
    assert "((int)((unsigned int)(" in src  # + - * << wrap through unsigned int
    body = src[src.index('extern "C" __global__'):].split("// ---- Thork's prelude")[0]
    assert " / " not in body and " % " not in body  # no raw division left in the kernel
    k64 = arith_kernel("int64")
    assert "((long long)((unsigned long long)(" in k64.cuda_source or \
        "((int64_t)((unsigned long long)(" in k64.cuda_source
    from thork_core import PluginError

    compiled = 0
    for compiler in ("nvrtc", "nvcc", "clang"):
        if not has_plugin(compiler):
            continue
        try:
            art = k.artifact("sm_90", compiler=compiler)
        except PluginError:  # installed but its toolchain is absent here
            continue
        assert art.kind == "cubin" and art.data[:4] == b"\x7fELF", compiler
        compiled += 1
    if has_plugin("nvrtc"):
        assert compiled >= 1


def test_cpu_source_uses_the_defined_forms():
    if "cpu" not in __import__("helpers").TARGETS:
        pytest.skip("no CPU target here")
    src = arith_kernel("int16").source_for("cpu")
    assert "thork_idiv<int>(" in src and "thork_imod<int>(" in src


def test_floordiv_and_mod_of_the_same_operands_share_one_division():
    """``y, x = k // w, k % w`` with a run-time ``w`` (the grid-stride Jacobi sweeps of
    bench/bench_lang.py) is one hardware division per element, as in C++: the defined forms
    keep the division unconditional, so the compiler sees the same ``a / d`` twice. With
    the guards as branches NVRTC emitted a ``div.s32`` and a ``rem.s32`` here (session 9).
    Checked in NVRTC's PTX; the values are the model tests' above."""
    if not has_plugin("nvrtc"):
        pytest.skip("NVRTC plugin not installed")
    f32 = tk.dt.float32

    @tk.jit
    def sweeps(u: tk.DevicePointer[f32, 2], v: tk.DevicePointer[f32, 2], iters: tk.dt.int32):
        h, w = u.shape
        stride = tk.grid_dim(signed=True).x * tk.block_dim(signed=True).x
        first = tk.block_idx(signed=True).x * tk.block_dim(signed=True).x + \
            tk.thread_idx(signed=True).x
        for it in tk.range(iters):
            src = tk.where(it % 2 == 0, u, v)
            dst = tk.where(it % 2 == 0, v, u)
            for k in tk.range(first, h * w, stride):
                y, x = k // w, k % w
                with tk.if_((y > 0) & (y < h - 1) & (x > 0) & (x < w - 1)):
                    dst[k] = 0.25 * (src[k - w] + src[k + w] + src[k - 1] + src[k + 1])
                with tk.else_():
                    dst[k] = src[k]

    from thork_core import PluginError

    try:
        ptx = sweeps.artifact("sm_90", compiler="nvrtc", kind="ptx").data
    except PluginError:
        pytest.skip("NVRTC is not usable here")
    text = ptx.decode() if isinstance(ptx, bytes) else ptx
    ops = [ln.split()[0] for ln in text.splitlines() if ln.strip()[:4] in ("div.", "rem.")]
    assert "div.s32" in ops and not any(op.startswith("rem.") for op in ops), ops
