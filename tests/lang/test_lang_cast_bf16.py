"""``tk.cast(x, bfloat16, nan="canonical")``: float32 to bfloat16 rounded to nearest even
with every NaN as the canonical 0x7FFF — the GPU's ``cvt.rn.bf16.f32`` (and, two side by
side, ``cvt.rn.bf16x2.f32``), the same bits in software on the CPU target.

Bits against NumPy (ml_dtypes' round-to-nearest-even bfloat16 for every non-NaN, 0x7FFF
for NaN) on fresh random bit patterns of every class plus the edges (ties to even and to
odd, just past a tie, subnormals, the largest finite value rounding to inf, signed zeros,
NaNs of several payloads and both signs), an odd length, outputs poisoned. The GPU
target's run of the same tests is the hardware check (``-k gpu``).
"""

import numpy as np
import pytest
import thork as tk
from helpers import compiles_for_gpu

ml_dtypes = pytest.importorskip("ml_dtypes")

f16, f32, bf16, i32 = tk.dt.float16, tk.dt.float32, tk.dt.bfloat16, tk.dt.int32
P = tk.DevicePointer
POISON = 0x1234  # bfloat16 bits no conversion below gives (3.3e-27 is not an input)

EDGES = np.array([
    0x00000000, 0x80000000,                  # +-0
    0x3F808000, 0x3F818000, 0xBF808000,      # ties: to even (down), to even (up), negative
    0x3F808001, 0x3F807FFF,                  # just past / before a tie
    0x00000001, 0x00008000, 0x00018000, 0x807FFFFF, 0x007F8000,  # subnormals, ties among them
    0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F7FFF, 0x7F7F8000,  # largest finite: to inf; just under
    0x7F800000, 0xFF800000,                  # +-inf
    0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FBFFFFF, 0x7FFFFFFF, 0xFFFFFFFF,
    0x7FC12345, 0xFF812345,                  # NaNs: quiet, signalling, payloads, signs
], dtype=np.uint32)


def _inputs(rng, n):
    """``n`` float32 values: the edges, then random bit patterns (every class)."""
    bits = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    bits[:len(EDGES)] = EDGES
    # a quarter with the low 16 bits at a tie, a tenth NaN with random payloads
    tie = rng.random(n) < 0.25
    bits[len(EDGES):][tie[len(EDGES):]] = (bits[len(EDGES):][tie[len(EDGES):]]
                                           & np.uint32(0xFFFF0000)) | np.uint32(0x8000)
    nan = rng.random(n) < 0.1
    nan[:len(EDGES)] = False
    bits[nan] = (bits[nan] & np.uint32(0x80000000)) | np.uint32(0x7F800000) \
        | rng.integers(1, 2**23, size=int(nan.sum()), dtype=np.uint32)
    return bits.view(np.float32)


def _reference(x):
    """The canonical rounding's bits: ml_dtypes (to nearest even) and 0x7FFF for NaN."""
    with np.errstate(over="ignore", invalid="ignore"):
        want = np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).view(np.uint16).copy()
    want[np.isnan(x)] = 0x7FFF
    return want


def _keep_reference(x):
    """The default (``nan="keep"``) bits: as the canonical rounding, but a NaN keeps its
    sign and the top 7 bits of its payload, quieted (0x40)."""
    want = _reference(x)
    bits = np.asarray(x, np.float32).view(np.uint32)
    nan = np.isnan(x)
    want[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)
    return want


@tk.jit
def to_bf16(x: P[f32], one: P[bf16], two: P[bf16], keep: P[bf16], n: i32):
    """one[i]: each value alone; two: pairs stored together (the packed conversion);
    keep: the default cast."""
    i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    with tk.if_(i < n):
        one[i] = tk.cast(x[i], bf16, nan="canonical")
        keep[i] = x[i].to(bf16)
    with tk.if_(2 * i + 1 < n):
        two.vstore(2 * i, (x[2 * i].to(bf16, nan="canonical"),
                           tk.cast(x[2 * i + 1], bf16, nan="canonical")))


def _poisoned(n):
    return np.full(n + 3, POISON, np.uint16).view(ml_dtypes.bfloat16)


def test_canonical_cast_rounds_like_numpy(target, rng):
    n = 4099                                  # odd: the last value has no pair partner
    x = _inputs(rng, n)
    one, two, keep = _poisoned(n), _poisoned(n), _poisoned(n)
    to_bf16[(n + 127) // 128, 128](x, one, two, keep, n, target=target)
    want = _reference(x)
    got = one.view(np.uint16)
    bad = np.flatnonzero(got[:n] != want)
    assert bad.size == 0, [(hex(x.view(np.uint32)[i]), hex(got[i]), hex(want[i]))
                           for i in bad[:8]]
    np.testing.assert_array_equal(two.view(np.uint16)[:n - 1], want[:n - 1])
    np.testing.assert_array_equal(keep.view(np.uint16)[:n], _keep_reference(x))
    for out in (one, keep):                   # nothing past n written
        assert (out.view(np.uint16)[n:] == POISON).all()
    assert (two.view(np.uint16)[n - 1:] == POISON).all()
    # the NaNs are where the two modes part: at least the edges' payloads differ
    nan = np.isnan(x)
    assert (got[:n][nan] == 0x7FFF).all() and (keep.view(np.uint16)[:n][nan] != 0x7FFF).any()


@tk.jit
def half_to_bf16(x: P[f16], y: P[bf16], b: P[bf16], z: P[bf16], n: i32):
    """float16 and bfloat16 inputs: widened exactly to float32, then rounded once."""
    i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    with tk.if_(i < n):
        y[i] = tk.cast(x[i], bf16, nan="canonical")
        z[i] = tk.cast(b[i], bf16, nan="canonical")


def test_canonical_cast_from_16_bit_floats(target, rng):
    n = 1001
    hbits = rng.integers(0, 2**16, size=n, dtype=np.uint64).astype(np.uint16)
    hbits[:8] = [0x0001, 0x8001, 0x03FF, 0x7BFF, 0x7C00, 0xFC00, 0x7E01, 0xFD55]
    x = hbits.view(np.float16)
    bbits = rng.integers(0, 2**16, size=n, dtype=np.uint64).astype(np.uint16)
    bbits[:3] = [0x7FC1, 0xFF81, 0x0001]     # bfloat16 NaNs become canonical too
    b = bbits.view(ml_dtypes.bfloat16)
    y, z = _poisoned(n), _poisoned(n)
    half_to_bf16[(n + 127) // 128, 128](x, y, b, z, n, target=target)
    np.testing.assert_array_equal(y.view(np.uint16)[:n], _reference(x.astype(np.float32)))
    want_b = bbits.copy()
    want_b[np.isnan(b.astype(np.float32))] = 0x7FFF
    np.testing.assert_array_equal(z.view(np.uint16)[:n], want_b)
    assert (y.view(np.uint16)[n:] == POISON).all() and (z.view(np.uint16)[n:] == POISON).all()


def test_canonical_cast_of_constants(target):
    """Constant operands go through the same conversion (not folded with the default's
    NaN rule)."""
    @tk.jit
    def consts(out: P[bf16]):
        out[0] = tk.cast(tk.cast(1.0 + 2.0**-8, f32), bf16, nan="canonical")  # tie: to 1
        out[1] = tk.cast(tk.cast(float("nan"), f32), bf16, nan="canonical")
        out[2] = tk.cast(tk.cast(-float("nan"), f32), bf16, nan="canonical")
        out[3] = tk.cast(tk.cast(1.0 + 3 * 2.0**-8, f32), bf16, nan="canonical")  # up

    out = _poisoned(1)
    consts[1, 1](out, target=target)
    assert out.view(np.uint16)[:4].tolist() == [0x3F80, 0x7FFF, 0x7FFF, 0x3F82]


def test_canonical_cast_is_the_hardware_conversion_in_cuda():
    src = to_bf16.cuda_source
    assert 'asm("cvt.rn.bf16.f32 %0, %1;"' in src and "__CUDA_ARCH__ >= 800" in src
    assert "thork_f2b_rn(" in to_bf16.source
    compiles_for_gpu(to_bf16)                # sm_75: the software path; sm_90: cvt


def test_canonical_cast_errors_name_the_argument():
    def trace(body):  # type: ignore[no-untyped-def]
        def kern(x: P[f32], d: P[tk.dt.float64], j: P[i32], y: P[bf16], h: P[f16]):
            body(x, d, j, y, h)
        with pytest.raises(tk.TraceError) as info:
            tk.jit(kern).ir  # noqa: B018 - tracing raises
        return str(info.value)

    msg = trace(lambda x, d, j, y, h: y.__setitem__(0, tk.cast(x[0], bf16, nan="fast")))
    assert "tk.cast(): nan must be one of 'keep', 'canonical', got 'fast'" in msg, msg
    msg = trace(lambda x, d, j, y, h: h.__setitem__(0, tk.cast(x[0], f16, nan="canonical")))
    assert "nan='canonical' converts to bfloat16 only, got dtype float16" in msg, msg
    for arr, name in ((1, "float64"), (2, "int32")):
        msg = trace(lambda x, d, j, y, h, arr=arr: y.__setitem__(
            0, tk.cast((x, d, j)[arr][0], bf16, nan="canonical")))
        assert f"needs x of float32, float16 or bfloat16 (one rounding from float32), got " \
               f"{name}" in msg, msg
