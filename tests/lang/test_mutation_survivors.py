"""Tests written to kill mutants of the numeric and checking code that the rest of the
suite let survive (issue 17). Every expected value here is derived by hand (IEEE bit
patterns, CUDA's documented shuffle rules) or from NumPy/ml_dtypes, never from Thork.

The mutants: bfloat16/float16 conversions truncating instead of rounding to nearest even;
argument dtype checked by item size only; ndim compared with ``<``; integer scalar
bounds off by one; bfloat16 scalars truncated; the CPU shuffle ignoring ``width``;
``syncthreads_or`` always true; CUDA-only mappings (atomicSub as atomicAdd, ``cvt.rz``
for ``cvt.rn``, ``shfl_up`` as ``shfl_down``) that no CPU run can see.
"""

import sys
from fractions import Fraction

import numpy as np
import pytest
import thork as tk
from helpers import launch_short_of_memory, poisoned, random_array
from thork_core import ArgumentError
from thork_core.ir import PRELUDE_MARK

f32, f64, i32, u32 = tk.dt.float32, tk.dt.float64, tk.dt.int32, tk.dt.uint32
bf16, f16 = tk.dt.bfloat16, tk.dt.float16


def _f32(bits: int) -> np.float32:
    return np.array([bits], np.uint32).view(np.float32)[0]


# -- float32 -> bfloat16 / float16 stores: round to nearest even, pinned bit patterns ------
# (float32 bits, bfloat16 bits): 1 + 2**-8 is halfway between 0x3F80 and 0x3F81 and goes
# to the even 0x3F80; 0x3F818000 is halfway with an odd lower neighbour and goes up; one
# ulp above halfway goes up; truncation would give the first 16 bits every time.
BF16_PINS = [
    (0x3F808000, 0x3F80), (0x3F818000, 0x3F82), (0x3F808001, 0x3F81), (0x3F80FFFF, 0x3F81),
    (0xBF808001, 0xBF81), (0x3F807FFF, 0x3F80), (0x7F7FFFFF, 0x7F80),  # rounds up to inf
    (0x7F800000, 0x7F80), (0xFF800000, 0xFF80), (0x00000000, 0x0000), (0x80000000, 0x8000),
    (0x00018000, 0x0002), (0x00008000, 0x0000),  # subnormals: ties to even
    (0x477FFFFF, 0x4780),  # 65535.996 carries into the exponent
]
# (float32 bits, float16 bits): 1 + 2**-11 is a tie (to 0x3C00), 1 + 3 * 2**-11 a tie
# with an odd neighbour (to 0x3C02); 65519.996 stays finite, 65520 rounds to inf;
# 2**-25 is half the smallest subnormal (to 0), 3 * 2**-26 is above half (to 0x0001).
F16_PINS = [
    (0x3F801000, 0x3C00), (0x3F803000, 0x3C02), (0x3F801001, 0x3C01), (0x477FEFFF, 0x7BFF),
    (0x477FF000, 0x7C00), (0x33000000, 0x0000), (0x33400000, 0x0001), (0xB3400000, 0x8001),
    (0x7F800000, 0x7C00), (0x38800000, 0x0400), (0xC0490FDB, 0xC248),  # -pi
]


@tk.jit
def store_half(b: tk.DevicePointer[bf16], h: tk.DevicePointer[f16], a: tk.DevicePointer[f32],
               n: i32):
    i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    with tk.if_(i < n):
        b[i] = a[i]
        h[i] = a[i]


def test_float32_to_half_stores_round_to_nearest_even(target):
    src = [p[0] for p in BF16_PINS] + [p[0] for p in F16_PINS]
    a = np.array(src, np.uint32).view(np.float32)
    n = a.size
    b, h = poisoned(n, np.uint16), poisoned(n, np.uint16)
    store_half[1, n](_bf16_view(b), h.view(np.float16), a, n, target=target)
    want_b = [p[1] for p in BF16_PINS]
    want_h = [p[1] for p in F16_PINS]
    assert [hex(v) for v in b[:len(BF16_PINS)]] == [hex(v) for v in want_b]
    assert [hex(v) for v in h[len(BF16_PINS):]] == [hex(v) for v in want_h]


def _bf16_view(a: np.ndarray) -> np.ndarray:
    ml = pytest.importorskip("ml_dtypes")
    return a.view(ml.bfloat16)


def test_nan_stays_nan_in_half_stores(target):
    a = np.array([0x7FC00000, 0x7F800001, 0xFFFFFFFF], np.uint32).view(np.float32)
    b, h = poisoned(3, np.uint16), poisoned(3, np.uint16)
    store_half[1, 3](_bf16_view(b), h.view(np.float16), a, 3, target=target)
    # NaN: exponent all ones and a non-zero mantissa (a signalling NaN comes back quiet).
    assert all((v & 0x7F80) == 0x7F80 and (v & 0x7F) != 0 for v in b), [hex(v) for v in b]
    assert all((v & 0x7C00) == 0x7C00 and (v & 0x3FF) != 0 for v in h), [hex(v) for v in h]


# -- float64 / wide integers -> 16-bit floats: one rounding, not two via float32 ------------
@tk.jit
def cast_wide(b: tk.DevicePointer[bf16], h: tk.DevicePointer[f16], d: tk.DevicePointer[f64],
              k: tk.DevicePointer[i32], q: tk.DevicePointer[tk.dt.int64], n: i32):
    i = tk.thread_idx().x
    with tk.if_(i < n):
        b[i * 3] = tk.cast(d[i], bf16)
        b[i * 3 + 1] = tk.cast(k[i], bf16)
        b[i * 3 + 2] = tk.cast(q[i], bf16)
        h[i] = tk.cast(d[i], f16)


def _exact_half_bits(x: int | float, mant: int, emin: int, fmt) -> int:
    """``x`` rounded once, exactly (Python fractions; ``round`` of a Fraction is half to
    even), to a float with ``mant`` fraction bits and smallest normal exponent ``emin``;
    returned as the bits of ``fmt`` (np.float16 or ml_dtypes.bfloat16)."""
    a = Fraction(x)
    sign = -1 if a < 0 else 1
    a = abs(a)
    if a == 0:
        return int(np.array(0.0 * sign, fmt).view(np.uint16))
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    ulp = Fraction(2) ** (max(e, emin) - mant)
    v = float(round(a / ulp) * ulp) * sign  # exact in a float64: at most 11 bits
    return int(np.array(v, fmt).view(np.uint16))  # representable: converting is exact


def test_wide_sources_round_once_to_half_types(target):
    ml = pytest.importorskip("ml_dtypes")
    # Each is just above a 16-bit tie but rounds to the tie in float32 first: rounding
    # twice (double -> float -> half) would then go to even, i.e. down. (ml_dtypes itself
    # rounds float64 through float32, so the reference is exact arithmetic.)
    d = np.array([1 + 2**-8 + 2**-40, 1 + 2**-11 + 2**-40, -(1 + 2**-8 + 2**-30), 1.5])
    k = np.array([2**24 + 2**16 + 1, -(2**24 + 2**16 + 1), 0x7FFFFFFF, 3], np.int32)
    q = np.array([2**60 + 2**52 + 1, -(2**60 + 2**52 + 1), 2**62 - 1, -7], np.int64)
    n = 4
    b, h = poisoned(3 * n, np.uint16), poisoned(n, np.uint16)
    cast_wide[1, n](_bf16_view(b), h.view(np.float16), d, k, q, n, target=target)
    b = b.reshape(n, 3)

    def bf(x):
        return _exact_half_bits(x, 7, -126, ml.bfloat16)
    assert [hex(v) for v in b[:, 0]] == [hex(bf(float(x))) for x in d]
    assert [hex(v) for v in b[:, 1]] == [hex(bf(int(x))) for x in k]
    assert [hex(v) for v in b[:, 2]] == [hex(bf(int(x))) for x in q]
    # 1 + 2**-8 + 2**-40 -> 1 + 2**-7 (0x3F81); 2**60 + 2**52 + 1 -> 2**60 + 2**53 (0x5D81)
    assert (b[0, 0], b[0, 2]) == (0x3F81, 0x5D81)
    assert [hex(v) for v in h] == [hex(_exact_half_bits(float(x), 10, -14, np.float16))
                                   for x in d]
    assert h[1] == 0x3C01


# -- argument checks --------------------------------------------------------------------
@tk.jit
def copy2d(out: tk.DevicePointer[f32, 2], a: tk.DevicePointer[f32, 2], n: i32):
    i = tk.thread_idx().x
    with tk.if_(i < n):
        out[0, i] = a[0, i]


def test_array_dtype_is_checked_by_dtype_not_item_size(target):
    out = poisoned((1, 5), np.float32)
    for wrong in (np.int32, np.uint32):  # the same item size as float32
        with pytest.raises(ArgumentError, match=r"copy2d\(\).*'a'.*float32.*got int32|uint32"):
            copy2d[1, 5](out, np.ones((1, 5), wrong), 5, target=target)
    with pytest.raises(ArgumentError, match="'out'.*float32"):
        copy2d[1, 5](np.zeros((1, 5), np.int32), np.ones((1, 5), np.float32), 5,
                     target=target)
    assert np.isnan(out).all()  # nothing ran


@pytest.mark.parametrize("shape", [(5,), (1, 1, 5)])
def test_ndim_is_compared_exactly(target, shape):
    out = poisoned((1, 5), np.float32)
    with pytest.raises(ArgumentError, match=rf"'a' expects a 2-D array, got {len(shape)}-D"):
        copy2d[1, 5](out, np.ones(shape, np.float32), 5, target=target)
    a = random_array(np.random.default_rng(3), (1, 5), np.float32)
    copy2d[1, 5](out, a, 5, target=target)
    np.testing.assert_array_equal(out, a)


def _scalar_kernel(t):
    def k(out: tk.DevicePointer[tk.dt.float64], s: t):
        out[0] = tk.cast(s, tk.dt.float64)
    k.__annotations__ = {"out": tk.DevicePointer[tk.dt.float64], "s": t}
    return tk.jit(k, name=f"scalar_{t.name}")


@pytest.mark.parametrize("name", ["int8", "uint8", "int16", "uint16", "int32", "uint32",
                                  "int64", "uint64"])
def test_int_scalar_bounds_exactly_at_the_edge(target, name):
    bits = np.dtype(name).itemsize * 8
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if name[0] == "i" else (0, 2**bits - 1)
    k = _scalar_kernel(getattr(tk.dt, name))
    out = poisoned(1, np.float64)
    for ok in (lo, hi):
        k[1, 1](out, ok, target=target)
        assert out[0] == float(ok)
    for bad in (lo - 1, hi + 1):
        with pytest.raises(ArgumentError, match=rf"'s' value {bad} is out of range for {name}"):
            k[1, 1](out, bad, target=target)


def test_bfloat16_scalar_rounds_to_nearest_even(target):
    ml = pytest.importorskip("ml_dtypes")
    k = _scalar_kernel(bf16)
    out = poisoned(1, np.float64)
    # Just below a tie, float32 rounds *up* onto the tie: rounding to odd must first step
    # back toward zero (1 + 2**-8 - 2**-40 is below halfway: 1.0, not 1 + 2**-7).
    values = [1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, 1 + 2**-8 + 2**-40,
              -(1 + 2**-7 + 2**-9), 3.0e38, -2.5, 1e-40, 1 + 2**-8 - 2**-40,
              -(1 + 2**-8 - 2**-40), 1 + 3 * 2**-8 - 2**-40,
              # float32 rounds up to just above the tie (odd last bit): still above it
              1 + 2**-8 + 0.75 * 2**-23, -(1 + 2**-8 + 0.75 * 2**-23)]
    for v in values:
        k[1, 1](out, v, target=target)
        want = np.array([_exact_half_bits(v, 7, -126, ml.bfloat16)], np.uint16)
        assert out[0] == float(want.view(ml.bfloat16)[0]), v
    for nan in (float("nan"), -float("nan")):  # a NaN keeps its sign through the rounding
        k[1, 1](out, nan, target=target)
        assert np.isnan(out[0]) and np.signbit(out[0]) == np.signbit(nan), nan


# -- warp shuffles honour width (CUDA's rules, written out by hand) ---------------------------
@tk.jit
def shuffles(out: tk.DevicePointer[i32], a: tk.DevicePointer[i32], src: tk.DevicePointer[i32]):
    i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    v = a[i]
    out[i * 5 + 0] = tk.shfl_idx(v, src[i], width=8)
    out[i * 5 + 1] = tk.shfl_up(v, 3, width=8)
    out[i * 5 + 2] = tk.shfl_down(v, 5, width=16)
    out[i * 5 + 3] = tk.shfl_xor(v, 5, width=4)
    out[i * 5 + 4] = tk.shfl_idx(v, src[i], width=32)


def test_shuffles_honour_the_width(target, rng):
    n = 64
    a = rng.integers(-1000, 1000, n).astype(np.int32)
    src = rng.integers(0, 64, n).astype(np.int32)  # beyond the segment and the warp
    out = poisoned((n, 5), np.int32)
    shuffles[1, n](out, a, src, target=target)
    want = np.empty((n, 5), np.int32)
    for t in range(n):
        warp, lane = t - t % 32, t % 32

        def at(src_lane, warp=warp):
            return a[warp + src_lane]
        seg8, seg16, seg4 = lane // 8 * 8, lane // 16 * 16, lane // 4 * 4
        want[t, 0] = at(seg8 + src[t] % 8)
        want[t, 1] = at(lane - 3) if lane - 3 >= seg8 else a[t]
        want[t, 2] = at(lane + 5) if lane + 5 < seg16 + 16 else a[t]
        want[t, 3] = at(lane ^ 5) if (lane ^ 5) < seg4 + 4 else a[t]
        want[t, 4] = at(src[t] % 32)
    np.testing.assert_array_equal(out, want)


# -- block votes with exactly one voter ---------------------------------------------------------
@tk.jit
def votes(out: tk.DevicePointer[i32], a: tk.DevicePointer[i32]):
    i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    v = a[i]
    out[i * 3] = tk.cast(tk.syncthreads_or(v != 0), i32)
    out[i * 3 + 1] = tk.cast(tk.syncthreads_and(v != 0), i32)
    out[i * 3 + 2] = tk.syncthreads_count(v != 0)


def test_block_votes_are_decided_by_single_threads(target):
    bs = 67
    # block 0: nobody; 1: only the last thread; 2: only thread 0; 3: everybody;
    # 4: everybody but the last thread; 5: everybody but thread 0.
    pattern = [[], [bs - 1], [0], list(range(bs)), list(range(bs - 1)), list(range(1, bs))]
    a = np.zeros((len(pattern), bs), np.int32)
    for blk, on in enumerate(pattern):
        a[blk, on] = 1
    out = poisoned((len(pattern), bs, 3), np.int32)
    votes[len(pattern), bs](out, a.ravel(), target=target)
    assert out[..., 0].tolist() == [[v] * bs for v in (0, 1, 1, 1, 1, 1)]
    assert out[..., 1].tolist() == [[v] * bs for v in (0, 0, 0, 1, 0, 0)]
    assert out[..., 2].tolist() == [[v] * bs for v in (0, 1, 1, bs, bs - 1, bs - 1)]


# -- the rendered CUDA: which intrinsic, direction and rounding each op maps to ----------------
def _body(kernel) -> str:
    return kernel.cuda_source.split(PRELUDE_MARK)[0] if PRELUDE_MARK in kernel.cuda_source \
        else kernel.cuda_source


def _cuda_of(fn, annotations) -> str:
    fn.__annotations__ = annotations
    k = tk.jit(fn, name=fn.__name__)
    return k.cuda_source


ATOMIC_CASES = [
    ("atomic_add", i32, "atomicAdd(", ["atomicSub(", "atomicMax("]),
    ("atomic_sub", i32, "atomicSub(", ["atomicAdd(", "atomicMin("]),
    ("atomic_min", i32, "atomicMin(", ["atomicMax(", "atomicSub("]),
    ("atomic_max", i32, "atomicMax(", ["atomicMin(", "atomicAdd("]),
    ("atomic_exch", i32, "atomicExch(", ["atomicCAS(", "atomicAdd("]),
    ("atomic_and", u32, "atomicAnd(", ["atomicOr(", "atomicXor("]),
    ("atomic_or", u32, "atomicOr(", ["atomicAnd(", "atomicXor("]),
    ("atomic_xor", u32, "atomicXor(", ["atomicAnd(", "atomicOr("]),
    ("atomic_add", f32, "atomicAdd(", ["atomicSub("]),
]


def _kernel_text(src: str, name: str) -> str:
    """The ``__global__`` function ``name`` of ``src`` (the prelude left out)."""
    start = src.index(f" {name}(")
    return src[src.rindex("\n", 0, start):]


@pytest.mark.parametrize(("op", "t", "want", "never"), ATOMIC_CASES)
def test_cuda_atomics_map_to_their_intrinsic(op, t, want, never):
    def atom_k(a, v):
        getattr(tk, op)(a, 0, v)
    src = _kernel_text(_cuda_of(atom_k, {"a": tk.DevicePointer[t], "v": t}), "atom_k")
    assert want in src, src
    for other in never:
        assert other not in src, src



# CUDA's float atomics (CUDA C++ Programming Guide, "Atomic Functions"): atomicAdd has
# float and double overloads, atomicExch a float one only, atomicCAS integer ones only,
# and there is no float atomicSub, atomicMin or atomicMax. So a float sub is an add of the
# negation, min/max are Thork's CAS loops, a double exch and every float CAS go through
# the same-width unsigned type (float: 32 bits, double: 64).
FLOAT_ATOMIC_CASES = [
    ("atomic_sub", f32, ["atomicAdd(", "-("], ["atomicSub("]),
    ("atomic_sub", f64, ["atomicAdd(", "-("], ["atomicSub("]),
    ("atomic_min", f32, ["thork_atomic_min("], ["atomicAdd(", "atomicMin("]),
    ("atomic_max", f64, ["thork_atomic_max("], ["atomicAdd(", "atomicMax("]),
    ("atomic_exch", f32, ["atomicExch("], ["thork_f2u(", "thork_u2f("]),
    ("atomic_exch", f64, ["thork_u2d(atomicExch((unsigned long long*)", "thork_d2u("],
     ["thork_f2u(", "thork_u2f("]),
    ("atomic_cas", f32, ["thork_u2f(atomicCAS((unsigned int*)", "thork_f2u("],
     ["thork_d2u(", "thork_u2d("]),
    ("atomic_cas", f64, ["thork_u2d(atomicCAS((unsigned long long*)", "thork_d2u("],
     ["thork_f2u(", "thork_u2f("]),
]


@pytest.mark.parametrize(("op", "t", "want", "never"), FLOAT_ATOMIC_CASES)
def test_cuda_float_atomics_use_the_overloads_cuda_has(op, t, want, never):
    def fatom(a, v):
        if op == "atomic_cas":
            tk.atomic_cas(a, 0, v, v + 1)
        else:
            getattr(tk, op)(a, 0, v)
    src = _kernel_text(_cuda_of(fatom, {"a": tk.DevicePointer[t], "v": t}), "fatom")
    for text in want:
        assert text in src, src
    for text in never:
        assert text not in src, src


@pytest.mark.parametrize(("t", "want", "never"), [
    (tk.dt.int32, "(-2147483647 - 1)", "2147483648"),
    (tk.dt.int64, "(-9223372036854775807LL - 1LL)", "9223372036854775808"),
])
def test_integer_min_literals_are_written_as_max_minus_one(t, want, never):
    # C++ [lex.icon]: an unsuffixed decimal literal takes the first of int, long, long long
    # that holds it, so "-2147483648" is a long negated (not an int), and 9223372036854775808
    # fits no signed type (nvcc/NVRTC make it unsigned: "x > -9223372036854775808LL" would
    # compare unsigned). The minimum of int32/int64 must be written as MAX - 1 spelled out.
    lo = -(2 ** (t.bits - 1))

    def lits(a, o):
        i = tk.thread_idx().x
        o[i] = tk.cast(a[i] > lo, t) + (a[i] + lo)
    src = _kernel_text(_cuda_of(lits, {"a": tk.DevicePointer[t], "o": tk.DevicePointer[t]}),
                       "lits")
    assert src.count(want) == 2, src
    assert never not in src, src


@pytest.mark.plugin("cpu")
def test_mma_and_cp_async_helpers_only_in_kernels_that_use_them():
    # The mma/ldmatrix/cp.async helpers (and the CPU target's whole-warp check) are emitted
    # only into kernels that call them: a plain kernel's sources carry none.
    def plain(a: tk.DevicePointer[f32]):
        a[tk.thread_idx().x] = a[tk.thread_idx().x] + 1.0

    def copies(a: tk.DevicePointer[f32]):
        s = tk.shared_array(f32, 128)
        t = tk.thread_idx().x
        tk.cp_async(s, 4 * t, a, 4 * t, 16)
        tk.cp_async_commit()
        tk.cp_async_wait(0)
        a[t] = s[t]
    for fn, used in ((plain, False), (copies, True)):
        k = tk.jit(fn)
        assert ("thork_cp_async_16(" in k.cuda_source) is used
        assert ("THORK_PARTIAL_WARP" in k.source_for("cpu")) is used

def test_cuda_64_bit_signed_atomic_sub_adds_the_negation():
    # CUDA has no atomicSub for 64-bit: it must be an add of the two's-complement negation.
    def atom64(a, v):
        tk.atomic_sub(a, 0, v)
    src = _kernel_text(_cuda_of(atom64, {"a": tk.DevicePointer[tk.dt.int64],
                                         "v": tk.dt.int64}), "atom64")
    assert "atomicAdd(" in src and "(0ull - (unsigned long long)(" in src, src


@pytest.mark.parametrize(("op", "intrinsic"), [
    ("shfl_idx", "__shfl_sync("), ("shfl_up", "__shfl_up_sync("),
    ("shfl_down", "__shfl_down_sync("), ("shfl_xor", "__shfl_xor_sync(")])
def test_cuda_shuffles_map_to_their_direction(op, intrinsic):
    def shfl_k(out, a):
        i = tk.thread_idx().x
        out[i] = getattr(tk, op)(a[i], 3, width=16)
    src = _kernel_text(_cuda_of(shfl_k, {"out": tk.DevicePointer[f32],
                                         "a": tk.DevicePointer[f32]}), "shfl_k")
    assert intrinsic in src, src
    others = {"__shfl_sync(", "__shfl_up_sync(", "__shfl_down_sync(", "__shfl_xor_sync("}
    for other in others - {intrinsic}:
        assert other not in src, src


def test_cuda_half_conversions_round_to_nearest():
    def conv(h: tk.DevicePointer[f16], a: tk.DevicePointer[f32]):
        h[0] = a[0]
    src = tk.jit(conv).cuda_source
    # The hardware conversion, when used, is round-to-nearest-even (cvt.rn), never rz/rm/rp.
    for mode in ("cvt.rz.", "cvt.rm.", "cvt.rp.", "cvt.rzi.", "cvt.rni."):
        assert mode not in src
    if "cvt." in src:
        assert "cvt.rn.f16.f32" in src
    # The portable bfloat16 rounding adds 0x7fff plus the lowest kept bit (ties to even).
    assert "0x7fffu + ((x >> 16) & 1u)" in src


@pytest.mark.parametrize(("func", "t", "want"), [
    ("rint", f32, "rintf("), ("round", f32, "roundf("), ("trunc", f32, "truncf("),
    ("floor", f32, "floorf("), ("ceil", f32, "ceilf("), ("rint", f64, "rint("),
    ("floor", f64, "floor("), ("ceil", f64, "ceil("), ("trunc", f64, "trunc("),
])
def test_cuda_rounding_functions_keep_their_mode(func, t, want):
    def rnd(out, a):
        out[0] = getattr(tk, func)(a[0])
    src = _kernel_text(_cuda_of(rnd, {"out": tk.DevicePointer[t], "a": tk.DevicePointer[t]}),
                       "rnd")
    assert want in src, src
    for other in {"rint", "round", "trunc", "floor", "ceil"} - {func}:
        assert f"{other}{'f' if t == f32 else ''}(" not in src, src


def test_cuda_float_to_int_cast_truncates_in_c():
    def f2i(out: tk.DevicePointer[i32], a: tk.DevicePointer[f32]):
        out[0] = tk.cast(a[0], i32)
    src = _kernel_text(tk.jit(f2i).cuda_source, "f2i")
    assert "((int)(" in src.replace("int32_t", "int"), src
    for r in ("__float2int_rn", "__float2int_rd", "__float2int_ru", "rintf(", "roundf("):
        assert r not in src


# -- DLPack type codes, from dlpack.h (kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4,
# kDLComplex 5, kDLBool 6) ---------------------------------------------------------------------
DLPACK = {(0, 8): "int8", (0, 16): "int16", (0, 32): "int32", (0, 64): "int64",
          (1, 8): "uint8", (1, 16): "uint16", (1, 32): "uint32", (1, 64): "uint64",
          (2, 16): "float16", (2, 32): "float32", (2, 64): "float64", (4, 16): "bfloat16",
          (6, 8): "bool"}


def test_dlpack_type_codes_map_to_their_dtype():
    from thork_core._dtype import from_dlpack_code

    for (code, bits), name in DLPACK.items():
        assert from_dlpack_code(code, bits) == getattr(tk.dt, name), (code, bits)
    for code, bits in [(1, 65), (0, 1), (2, 8), (5, 64), (4, 32), (6, 1), (3, 64)]:
        with pytest.raises(TypeError, match=f"code={code}, bits={bits}"):
            from_dlpack_code(code, bits)



def test_dtype_widths_are_numpy_s_and_exported_to_dlpack_as_such():
    # Each dtype's storage width is NumPy's item size in bits (bfloat16: ml_dtypes' 2
    # bytes); DeviceArray's DLPack export writes that (code, bits) pair, the table above.
    ml = pytest.importorskip("ml_dtypes")
    from thork_core.launch import dlpack_code

    for (code, bits), name in DLPACK.items():
        t = getattr(tk.dt, name)
        ref = np.dtype(ml.bfloat16 if name == "bfloat16" else name)
        assert t.itemsize == ref.itemsize, name
        if name != "bool":
            assert t.bits == 8 * ref.itemsize, name
        assert dlpack_code(t) == (code, bits), name  # what the exporter writes (lanes 1)

def test_cuda_printf_arguments_are_promoted_to_their_format_width():
    # printf's varargs: 64-bit integers travel as (unsigned) long long, narrower ones as
    # (unsigned) int, floats (half ones converted first) as double, bool as a string.
    def say(a: tk.DevicePointer[tk.dt.int64], b: tk.DevicePointer[tk.dt.uint64],
            c: tk.DevicePointer[tk.dt.int8], d: tk.DevicePointer[tk.dt.uint16],
            e: tk.DevicePointer[f16], g: tk.DevicePointer[tk.dt.bool]):
        tk.print(a[0], b[0], c[0], d[0], e[0], g[0])
    src = _kernel_text(tk.jit(say).cuda_source, "say")
    call = src[src.index("printf("):]
    call = call[:call.index(";")]
    # Each argument in order, with the conversion its format needs.
    import re
    fmt = re.search(r'printf\("([^"]*)"', call).group(1)
    assert fmt.replace("\\n", "").split() == ["%lld", "%llu", "%d", "%u", "%g", "%s"], call
    args = re.findall(r"\(\((long long|unsigned long long|int|unsigned int|double)\)\(", call)
    assert args == ["long long", "unsigned long long", "int", "unsigned int", "double"], call
    assert "((double)(thork_h2f(" in call and '? "True" : "False")' in call, call


@pytest.mark.parametrize(("value", "name"), [
    (0, "int32"), (5, "int32"), (-(2**31), "int32"), (2**31 - 1, "int32"),
    (2**31, "int64"), (-(2**31) - 1, "int64"), (2**63 - 1, "int64"), (-(2**63), "int64"),
    (2**63, "uint64"), (2**64 - 1, "uint64"), (True, "bool"), (2.5, "float32")])
def test_python_literals_take_the_documented_type(value, name):
    # docs/language.md: an int is int32, else int64, else uint64; a float is float32
    # (weak); True/False are bool. Seen through tracing: x_int8 + literal promotes.
    got = {}

    def probe(a: tk.DevicePointer[tk.dt.bool]):
        got["t"] = tk.cast(a[0], tk.dt.bool) & True if name == "bool" else \
            tk.where(a[0], value, value)
    tk.jit(probe, name="probe").ir
    assert got["t"].dtype == getattr(tk.dt, name)


@pytest.mark.parametrize("big", [2**64, -(2**63) - 1])
def test_int_literals_beyond_64_bits_are_an_error(big):
    # Above uint64's maximum or below int64's minimum, no 64-bit type holds the literal.
    def k(out: tk.DevicePointer[tk.dt.uint64]):
        out[0] = out[0] + big
    with pytest.raises((OverflowError, tk.TraceError), match="64 bits"):
        tk.jit(k).ir


# -- survivors of the full-run sample (issue 17, session 5) --------------------------------


def test_cuda_cp_async_uses_cg_for_16_bytes_only():
    # PTX ISA, cp.async: the .cg qualifier (cache in L2 only) is defined for a cp-size of
    # 16 bytes only; 4- and 8-byte copies must use .ca.
    def cpa(a: tk.DevicePointer[f32]):
        s = tk.shared_array(f32, 16)
        t = tk.thread_idx().x
        tk.cp_async(s, 4 * t, a, 4 * t, 16)
        tk.cp_async(s, 4 * t, a, 4 * t, 8)
        tk.cp_async(s, 4 * t, a, 4 * t, 4)
        tk.cp_async_commit()
        tk.cp_async_wait(0)
    src = tk.jit(cpa).cuda_source
    for nbytes, cache in ((16, "cg"), (8, "ca"), (4, "ca")):
        assert f"thork_cp_async_{nbytes}(" in _kernel_text(src, "cpa")
        helper = src[src.index(f"void thork_cp_async_{nbytes}("):]
        helper = helper[:helper.index("}")]
        assert f'"cp.async.{cache}.shared.global [%0], [%1], {nbytes}, %2;' in helper, helper


@pytest.mark.plugin("cpu")
def test_cpu_static_shared_arrays_start_16_byte_aligned():
    # The CPU target lays static shared arrays out in the block's buffer in declaration
    # order, each at a multiple of 16 bytes (as CUDA aligns __shared__ arrays of
    # vectors): float32[3] (12 bytes) at 0, float64[5] (40 bytes) at 16, int32[4]
    # (exactly 16 bytes) at 64, int8[1] at 80 (one byte still takes 16), float32[1] at 96.
    def lay(out: tk.DevicePointer[f32]):
        a = tk.shared_array(f32, 3)
        b = tk.shared_array(f64, 5)
        c = tk.shared_array(i32, 4)
        d = tk.shared_array(tk.dt.int8, 1)
        e = tk.shared_array(f32, 1)
        a[0] = 1.0
        b[0] = 2.0
        c[0] = 3
        d[0] = 4
        e[0] = 5.0
        out[0] = a[0] + tk.cast(b[0], f32) + tk.cast(c[0], f32) + tk.cast(d[0], f32) + e[0]
    src = tk.jit(lay).source_for("cpu")
    offsets = [int(line.split("smem + ")[1].split(")")[0])
               for line in src.splitlines() if "thork_blk->smem + " in line]
    assert offsets == [0, 16, 64, 80, 96], offsets



@pytest.mark.plugin("cpu")
def test_cpu_static_shared_arrays_of_hopper_kernels_start_1024_byte_aligned():
    # A kernel using Hopper operations (here an mbarrier) aligns its static shared arrays
    # to 1024 bytes, as CUDA needs for 128-byte-swizzled TMA tiles and wgmma descriptors
    # (the swizzle pattern repeats every 1024 bytes): float16[3] (6 bytes) at 0,
    # float16[600] (1200 bytes) at 1024, uint64[1] at 1024 + 2048 = 3072.
    def lay(out: tk.DevicePointer[f32]):
        a = tk.shared_array(f16, 3)
        b = tk.shared_array(f16, 600)
        bar = tk.shared_array(tk.dt.uint64, 1)
        with tk.if_(tk.thread_idx().x == 0):
            tk.mbarrier_init(bar, 0, 1)
        a[0] = tk.cast(1.0, f16)
        b[0] = tk.cast(2.0, f16)
        out[0] = tk.cast(a[0], f32) + tk.cast(b[0], f32)
    src = tk.jit(lay).source_for("cpu")
    offsets = [int(line.split("smem + ")[1].split(")")[0])
               for line in src.splitlines() if "thork_blk->smem + " in line]
    assert offsets == [0, 1024, 3072], offsets

@tk.jit
def warp_votes(out: tk.DevicePointer[u32], k: tk.DevicePointer[u32]):
    lane = tk.lane_id()
    w = tk.thread_idx().x // 32
    out[tk.thread_idx().x * 3 + 0] = tk.cast(tk.warp_all(lane != k[w]), u32)
    out[tk.thread_idx().x * 3 + 1] = tk.cast(tk.warp_any(lane == k[w]), u32)
    out[tk.thread_idx().x * 3 + 2] = tk.ballot((lane == k[w]) | (lane == 3))


def test_warp_votes_see_the_one_lane_that_differs(target, rng):
    # Warp w's predicate differs from the rest in lane k[w] only (k = 32: in no lane).
    k = np.array([int(rng.integers(0, 32)), 3, 32, 0], np.uint32)
    out = poisoned(128 * 3, np.uint32)
    warp_votes[1, 128](out, k, target=target)
    got = out.reshape(4, 32, 3)
    for w in range(4):
        one = k[w] < 32
        want_ballot = (1 << 3) | ((1 << int(k[w])) if one else 0)
        assert (got[w, :, 0] == (0 if one else 1)).all(), (w, got[w, :, 0])
        assert (got[w, :, 1] == (1 if one else 0)).all(), (w, got[w, :, 1])
        assert (got[w, :, 2] == want_ballot).all(), (w, got[w, :, 2])


@pytest.mark.parametrize("op", ["ballot", "warp_any", "warp_all"])
def test_cuda_votes_pass_the_mask_first(op):
    # __ballot_sync / __any_sync / __all_sync(mask, predicate) (CUDA programming guide).
    def vote_k(out: tk.DevicePointer[u32], m: u32, a: tk.DevicePointer[i32]):
        i = tk.thread_idx().x
        out[i] = tk.cast(getattr(tk, op)(a[i] > 7, m), u32)
    src = _kernel_text(tk.jit(vote_k).cuda_source, "vote_k")
    name = {"ballot": "ballot", "warp_any": "any", "warp_all": "all"}[op]
    call = src[src.index(f"__{name}_sync("):]
    first, second = call[len(f"__{name}_sync("):call.index(")")].split(",")
    assert first.strip() == "m" and second.strip() not in ("m", ""), call[:80]


@pytest.mark.parametrize(("t", "narrow"), [(f32, False), (i32, False), (u32, False),
                                           (tk.dt.int16, True), (tk.dt.uint8, True)])
def test_cuda_shuffles_pass_32_bit_values_unconverted(t, narrow):
    # __shfl_sync has int/unsigned/float overloads (CUDA programming guide): a 32-bit value
    # goes as it is; narrower integers travel as int and are converted back.
    def shfl32(out: tk.DevicePointer[t], a: tk.DevicePointer[t]):
        i = tk.thread_idx().x
        out[i] = tk.shfl_down(a[i], 1)
    src = _kernel_text(tk.jit(shfl32).cuda_source, "shfl32")
    call = src[src.index("__shfl_down_sync("):]
    call = call[:call.index(";")]
    assert ("(int)(" in call) == narrow, call


@pytest.mark.plugin("cpu")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and RLIMIT_AS")
def test_cpu_cooperative_launch_out_of_memory_says_so():
    # Each code the CPU entry returns has its own message: out of memory is not reported as
    # a grid barrier that some block skipped. 32 MiB more address space: not the 4 x 1024
    # fiber stacks (64 KiB each) of the blocks.
    out = launch_short_of_memory('''
i32 = tk.dt.int32

@tk.jit
def rot(x: tk.DevicePointer[i32], out: tk.DevicePointer[i32]):
    n = tk.cast(tk.grid_dim().x * tk.block_dim().x, i32)
    i = tk.cast(tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x, i32)
    x[i] = x[i] * 2
    tk.grid_sync()
    out[i] = x[(i + 1) % n]

x = np.zeros(4 * 1024, np.int32); out = np.zeros_like(x)
''', 'rot[4, 1024](x, out, target="cpu")')
    assert "could not start a thread or allocate memory" in out, out


def test_syncwarp_waits_for_the_lanes_of_its_mask_only(target):
    # CUDA's __syncwarp(mask) waits for the lanes in mask: lanes 0-15 meet at it while
    # lanes 16-31 have already gone on to __syncthreads (valid: the block converges
    # there). A barrier over the whole warp would never open.
    @tk.jit
    def half(out: tk.DevicePointer[i32]):
        s = tk.shared_array(i32, 32)
        lane = tk.thread_idx().x
        with tk.if_(lane < 16):
            s[lane] = lane * 3
            tk.syncwarp(0x0000FFFF)
            out[lane] = s[15 - lane]
        tk.syncthreads()
        with tk.if_(lane >= 16):
            out[lane] = lane
    out = poisoned(32, np.int32)
    half[1, 32](out, target=target)
    np.testing.assert_array_equal(out, np.r_[(15 - np.arange(16)) * 3, np.arange(16, 32)])


def test_plugin_scalar_value_and_arg_count_checks():
    # thork_core.plugin's scalar_value (what a target's Python launcher stores for a scalar
    # argument) and check_arg_count, for targets that bind arguments themselves.
    from thork_core.plugin import check_arg_count, scalar_value

    @tk.jit
    def flags(out: tk.DevicePointer[i32], on: tk.dt.bool, n: i32):
        out[0] = tk.cast(on, i32) + n
    ir = flags.ir
    on, n = ir.params[1], ir.params[2]
    assert scalar_value(True, on, ir) is True
    assert scalar_value(0, on, ir) is False
    assert scalar_value(np.bool_(True), on, ir) is True
    with pytest.raises(ArgumentError, match="parameter 'on' expects a bool, got float"):
        scalar_value(1.0, on, ir)
    assert scalar_value(-7, n, ir) == -7
    assert scalar_value(np.int16(5), n, ir) == 5  # a NumPy scalar is a Python one
    # An array with dimensions is named as one; a 0-d array is no int (NumPy scalars are).
    with pytest.raises(ArgumentError, match=r"parameter 'n' is a scalar int32, got an array "
                                            r"\(ndim 1\)"):
        scalar_value(np.array([5]), n, ir)
    with pytest.raises(ArgumentError, match="parameter 'n' expects an int for int32, got "
                                            "ndarray"):
        scalar_value(np.array(5), n, ir)

    @tk.jit
    def scaled(out: tk.DevicePointer[f32], f: f32):
        out[0] = f
    f = scaled.ir.params[1]
    assert scalar_value(2, f, scaled.ir) == 2.0
    for bad, name in ((True, "bool"), ("2", "str"), (None, "NoneType")):
        with pytest.raises(ArgumentError, match=f"expects a number for float32, got {name}"):
            scalar_value(bad, f, scaled.ir)
    check_arg_count(ir, [None, True, 3])
    for args in ([None, True], [None, True, 3, 4]):
        with pytest.raises(ArgumentError, match=rf"flags\(\) takes 3 argument\(s\) "
                                                rf"\(out, on, n\), got {len(args)}"):
            check_arg_count(ir, args)


def test_int_range_of_every_integer_dtype_is_numpy_s():
    from thork_core._dtype import int_range

    assert int_range(tk.dt.bool) == (0, 1)
    for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
        info = np.iinfo(name)
        assert int_range(getattr(tk.dt, name)) == (int(info.min), int(info.max)), name
    with pytest.raises(TypeError, match="float32 is not an integer dtype"):
        int_range(f32)


@pytest.mark.parametrize(("t", "intrinsic", "never"), [
    (u32, "__umulhi(", "__umul64hi("), (tk.dt.uint64, "__umul64hi(", "__umulhi(")])
def test_cuda_mulhi_maps_to_its_width(t, intrinsic, never):
    # CUDA Math API: __umulhi for 32-bit, __umul64hi for 64-bit unsigned operands.
    def hi(o, a, b):
        o[0] = tk.mulhi(a, b)
    src = _kernel_text(_cuda_of(hi, {"o": tk.DevicePointer[t], "a": t, "b": t}), "hi")
    assert intrinsic in src and never not in src, src


def test_bfloat16_nan_scalar_is_the_quiet_nan(target):
    # A NaN scalar becomes bfloat16 0x7FC0 (the float32 quiet NaN's top half: sign 0,
    # exponent all ones, quiet bit set), -NaN 0xFFC0.
    ml = pytest.importorskip("ml_dtypes")

    @tk.jit
    def store(o: tk.DevicePointer[bf16], v: bf16):
        o[0] = v
    out = poisoned(1, ml.bfloat16)
    for v, bits in ((float("nan"), 0x7FC0), (-float("nan"), 0xFFC0)):
        store[1, 1](out, v, target=target)
        assert int(out.view(np.uint16)[0]) == bits, hex(int(out.view(np.uint16)[0]))


def test_dtype_names_give_the_singletons():
    from thork_core._dtype import dtype_of

    for name in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                 "uint64", "float16", "bfloat16", "float32", "float64"):
        assert dtype_of(name) is getattr(tk.dt, name), name
    with pytest.raises(TypeError):
        dtype_of("float31")


def test_cuda_shared_arrays_align_to_1024_bytes_in_hopper_kernels_only():
    # A 128-byte TMA/wgmma swizzle repeats every 1024 bytes: kernels using Hopper
    # operations align their shared arrays to 1024 bytes, every other kernel to 16.
    def plain(out: tk.DevicePointer[f32]):
        s = tk.shared_array(f32, 8)
        s[0] = 1.0
        out[0] = s[0]

    def hopper(out: tk.DevicePointer[f32]):
        s = tk.shared_array(f32, 8)
        bar = tk.shared_array(tk.dt.uint64, 1)
        with tk.if_(tk.thread_idx().x == 0):
            tk.mbarrier_init(bar, 0, 1)
        s[0] = 1.0
        out[0] = s[0]
    for fn, align in ((plain, 16), (hopper, 1024)):
        src = tk.jit(fn).cuda_source
        assert f"__shared__ __attribute__((aligned({align}))) float" in src, src
        other = 1024 if align == 16 else 16
        assert f"__attribute__((aligned({other})))" not in src, src


@pytest.mark.plugin("cpu")
def test_cuda_rsqrt_is_the_intrinsic_and_host_cpp_divides():
    # CUDA's math API has rsqrtf/rsqrt; host C++ has none, so the CPU target writes
    # 1 / sqrt.
    def rs(o: tk.DevicePointer[f32], a: tk.DevicePointer[f32]):
        o[0] = tk.rsqrt(a[0])
    k = tk.jit(rs)
    assert "rsqrtf(" in _kernel_text(k.cuda_source, "rs")
    cpu = k.source_for("cpu")
    assert "rsqrt" not in cpu[cpu.index(" rs("):], cpu


@pytest.mark.parametrize("t", [f32, f64])
def test_cuda_float_cas_passes_compare_then_value(t):
    # atomicCAS(address, compare, val): the compare is the second argument, the new value
    # the third, each through the same-width unsigned type.
    def cas(a, c, v):
        tk.atomic_cas(a, 0, c, v)
    src = _kernel_text(_cuda_of(cas, {"a": tk.DevicePointer[t], "c": t, "v": t}), "cas")
    to_u = "thork_f2u" if t == f32 else "thork_d2u"
    assert f"{to_u}(c), {to_u}(v))" in src, src


@pytest.mark.parametrize(("op", "text"), [
    ("ballot", "__ballot_sync(4294967295u, "), ("warp_any", "(__any_sync(4294967295u, "),
    ("warp_all", "(__all_sync(4294967295u, ")])
def test_cuda_ballot_is_a_mask_and_votes_are_bools(op, text):
    # __ballot_sync returns the unsigned mask itself; __any_sync/__all_sync return int,
    # which Thork's bool result compares with 0.
    def v(out: tk.DevicePointer[u32], a: tk.DevicePointer[i32]):
        i = tk.thread_idx().x
        out[i] = tk.cast(getattr(tk, op)(a[i] > 7), u32)
    src = _kernel_text(tk.jit(v).cuda_source, "v")
    line = next(ln for ln in src.splitlines() if "_sync(4294967295u" in ln)
    assert text in line, line
    assert line.rstrip().endswith("!= 0);") is (op != "ballot"), line


def test_cuda_cp_async_commit_and_wait_groups():
    # PTX ISA: cp.async.commit_group closes a group, cp.async.wait_group N waits until at
    # most N groups are pending.
    def grp(a: tk.DevicePointer[f32]):
        s = tk.shared_array(f32, 64)
        t = tk.thread_idx().x
        tk.cp_async(s, 4 * t, a, 4 * t, 16)
        tk.cp_async_commit()
        tk.cp_async_wait(1)
        tk.cp_async_wait(0)
        a[t] = s[t]
    src = _kernel_text(tk.jit(grp).cuda_source, "grp")
    assert src.count('"cp.async.commit_group;"') == 1, src
    assert '"cp.async.wait_group 1;"' in src and '"cp.async.wait_group 0;"' in src, src


def test_print_escapes_quotes_and_backslashes(target, capfd):
    # A printed text with a double quote and a backslash comes out as written. (The
    # array's copy back waits for the kernel, so the device's printf buffer is flushed.)
    @tk.jit
    def say(n: i32, done: tk.DevicePointer[i32]):
        tk.print('say "hi" \\ back', n)
        done[0] = 1
    done = np.zeros(1, np.int32)
    say[1, 1](3, done, target=target)
    assert done[0] == 1
    assert 'say "hi" \\ back 3' in capfd.readouterr().out


def test_input_typestr_is_numpy_s_except_bfloat16():
    # The __array_interface__ typestr NumPy gives each dtype; bfloat16's "<V2" names no
    # element type, so none is claimed for it.
    from thork_core._dtype import input_typestr

    for name in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                 "uint64", "float16", "float32", "float64"):
        assert input_typestr(getattr(tk.dt, name)) == np.dtype(name).str, name
    assert input_typestr(bf16) is None


def test_non_finite_float64_literals(target):
    # inf and nan literals in float64 arithmetic (written as bit patterns: C++ has no
    # literal for them), against NumPy.
    @tk.jit
    def nonfinite(o: tk.DevicePointer[f64], a: tk.DevicePointer[f64]):
        o[0] = a[0] + float("inf")
        o[1] = a[0] - float("inf")
        o[2] = a[0] * float("nan")
    a = np.array([2.5])
    o = poisoned(3, np.float64)
    nonfinite[1, 1](o, a, target=target)
    np.testing.assert_array_equal(o, [np.inf, -np.inf, np.nan])


def test_from_numpy_maps_every_supported_dtype():
    from thork_core._dtype import from_numpy

    for name in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                 "uint64", "float16", "float32", "float64"):
        assert from_numpy(np.dtype(name)) is getattr(tk.dt, name), name
    with pytest.raises(TypeError, match="unsupported dtype"):
        from_numpy(np.dtype(np.complex64))


# -- survivors of the full run of 2026-12-01 (session 8) ---------------------------------
def test_mutable_local_from_a_thread_index_is_not_const(target):
    # A grid-stride loop's index starts as threadIdx.x and is reassigned: its C++ local
    # must be a plain (non-const) variable. Every element i < n gets i, written by thread
    # i % 8 (n odd, so the last lap is partial).
    @tk.jit
    def stride(out: tk.DevicePointer[u32], n: u32):
        i = tk.var(tk.thread_idx().x)
        with tk.while_(lambda: i < n):
            out[i] = i * 3
            i += tk.block_dim().x
    n = 37
    out = poisoned(n + 3, np.uint32)
    stride[1, 8](out, n, target=target)
    np.testing.assert_array_equal(out[:n], np.arange(n, dtype=np.uint32) * 3)
    assert (out[n:] == poisoned(3, np.uint32)).all()


def test_float64_literals_in_exponent_form(target, rng):
    # Python writes 1e16 and 1e-07 without a decimal point ("1e+16"): they must reach the
    # kernel as those doubles (NumPy computes the same float64 operations).
    @tk.jit
    def expo(o: tk.DevicePointer[f64], a: tk.DevicePointer[f64]):
        i = tk.thread_idx().x
        o[3 * i] = a[i] + 1e16
        o[3 * i + 1] = a[i] * 1e-07
        o[3 * i + 2] = a[i] - 2.5e300
    a = rng.standard_normal(5) * 1e3
    o = poisoned(15, np.float64)
    expo[1, 5](o, a, target=target)
    np.testing.assert_array_equal(o[0::3], a + 1e16)
    np.testing.assert_array_equal(o[1::3], a * 1e-07)
    np.testing.assert_array_equal(o[2::3], a - 2.5e300)


def test_cuda_syncwarp_passes_its_mask():
    # __syncwarp(mask) (CUDA programming guide): a given mask reaches the intrinsic, no
    # mask means all 32 lanes.
    def sw(out: tk.DevicePointer[i32]):
        tk.syncwarp(0x0000FFFF)
        out[0] = 1
        tk.syncwarp()
    src = _kernel_text(tk.jit(sw).cuda_source, "sw")
    assert "__syncwarp(65535u);" in src, src
    assert "__syncwarp(4294967295u);" in src, src


@pytest.mark.parametrize("op", ["atomic_min", "atomic_max"])
def test_cuda_int64_atomic_min_max_use_the_signed_overload(op):
    # CUDA has atomicMin/atomicMax for long long int (signed compare) and for unsigned long
    # long int: an int64 min must not go through the unsigned overload, where -1 > 1.
    def mm(a: tk.DevicePointer[tk.dt.int64], v: tk.dt.int64):
        getattr(tk, op)(a, 0, v)
    src = _kernel_text(tk.jit(mm).cuda_source, "mm")
    call = src[src.index("atomicM"):]
    call = call[:call.index(";")]
    assert "unsigned" not in call, call


def test_cuda_syncthreads_count_returns_the_count():
    # __syncthreads_count returns how many threads had a non-zero predicate; and/or
    # return a non-zero int, which Thork's bool result compares with 0.
    def bv(out: tk.DevicePointer[i32], a: tk.DevicePointer[i32]):
        i = tk.thread_idx().x
        out[0] = tk.syncthreads_count(a[i] > 0)
        out[1] = tk.cast(tk.syncthreads_and(a[i] > 0), i32)
    src = _kernel_text(tk.jit(bv).cuda_source, "bv")
    count = next(ln for ln in src.splitlines() if "__syncthreads_count(" in ln)
    both = next(ln for ln in src.splitlines() if "__syncthreads_and(" in ln)
    assert "!= 0" not in count and count.strip().startswith("int "), count
    assert "!= 0)" in both, both


def test_dtypes_are_immutable():
    import dataclasses

    with pytest.raises(dataclasses.FrozenInstanceError):
        tk.dt.float32.bits = 16  # type: ignore[misc]
    assert tk.dt.float32.bits == 32


def test_print_keeps_utf8_and_control_bytes(target, capfd):
    # Non-ASCII text (UTF-8) and control bytes come out byte for byte as written: the C
    # string literal escapes what is not printable ASCII instead of writing the UTF-8
    # bytes one by one as Latin-1 characters.
    text = "naïve ±1 \x01\x1f\x7f tab\there ??= end"

    @tk.jit
    def say8(n: i32, done: tk.DevicePointer[i32]):
        tk.print(text, n)
        done[0] = 1
    done = np.zeros(1, np.int32)
    say8[1, 1](5, done, target=target)
    assert done[0] == 1
    assert text + " 5\n" in capfd.readouterr().out
