"""Counter-based RNG: Philox4x32-10 against the Random123 known-answer vectors, Philox4x64-10
bit-identical to numpy.random.Philox, and the uniform / Box–Muller conversions against the
same formulas in NumPy."""

import numpy as np
import pytest
import thork as tk
from helpers import compiles_for_gpu, poisoned

u32, u64, f32, f64 = tk.dt.uint32, tk.dt.uint64, tk.dt.float32, tk.dt.float64

# Random123's kat_vectors (Philox4x32-10): counter words, key words, result words.
KAT_4X32 = [
    ([0, 0, 0, 0], [0, 0], [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
    ([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2, [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]),
    ([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], [0xA4093822, 0x299F31D0],
     [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]),
]
# Random123's kat_vectors (Philox4x64-10).
KAT_4X64 = [
    ([0] * 4, [0] * 2,
     [0x16554D9ECA36314C, 0xDB20FE9D672D0FDC, 0xD7E772CEE186176B, 0x7E68B68AEC7BA23B]),
    ([0x243F6A8885A308D3, 0x13198A2E03707344, 0xA4093822299F31D0, 0x082EFA98EC4E6C89],
     [0x452821E638D01377, 0xBE5466CF34E90C6C],
     [0xA528F45403E61D95, 0x38C72DBD566E9788, 0xA5A1610E72FD18B5, 0x57BD43B5E52B7FE6]),
]


@tk.jit
def kat32(ctr: tk.DevicePointer[u32], key: tk.DevicePointer[u32], out: tk.DevicePointer[u32],
          t: tk.Uint[tk.ThreadIdx]):
    r = tk.philox4x32([ctr[4 * t + k] for k in range(4)], (key[2 * t], key[2 * t + 1]))
    for k in range(4):
        out[4 * t + k] = r[k]


@tk.jit
def kat64(ctr: tk.DevicePointer[u64], key: tk.DevicePointer[u64], out: tk.DevicePointer[u64],
          t: tk.Uint[tk.ThreadIdx]):
    r = tk.philox4x64([ctr[4 * t + k] for k in range(4)], (key[2 * t], key[2 * t + 1]))
    for k in range(4):
        out[4 * t + k] = r[k]


@pytest.mark.parametrize("kernel,kat,dtype", [(kat32, KAT_4X32, np.uint32),
                                              (kat64, KAT_4X64, np.uint64)])
def test_philox_known_answers(target, kernel, kat, dtype):
    ctr = np.array([c for c, _, _ in kat], dtype).reshape(-1)
    key = np.array([k for _, k, _ in kat], dtype).reshape(-1)
    out = poisoned(4 * len(kat), dtype)
    kernel[1, len(kat)](ctr, key, out, target=target)
    np.testing.assert_array_equal(out, np.array([r for _, _, r in kat], dtype).reshape(-1))
    compiles_for_gpu(kernel)


@tk.jit
def numpy_stream(out: tk.DevicePointer[u64], c: tk.DevicePointer[u64],
                 k: tk.DevicePointer[u64], blocks: tk.dt.int32):
    """Block b of NumPy's raw stream: philox4x64(counter + b + 1, key)."""
    b = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    with tk.if_(b < blocks):
        ctr = tk.counter_add([c[0], c[1], c[2], c[3]], tk.cast(b, u64) + 1)
        r = tk.philox4x64(ctr, (k[0], k[1]))
        tk.store_vec(out, 4 * b, r[:2])
        tk.store_vec(out, 4 * b + 2, r[2:])


@pytest.mark.parametrize("carry", [False, True])
def test_philox4x64_matches_numpy_stream(target, rng, carry):
    key = rng.integers(0, 2**64, 2, dtype=np.uint64)
    counter = rng.integers(0, 2**64, 4, dtype=np.uint64)
    if carry:  # the additions carry into the higher words
        counter[0] = np.uint64(2**64 - 3)
        counter[1] = np.uint64(2**64 - 1)
    blocks = 37
    ref = np.random.Philox(key=key, counter=counter).random_raw(4 * blocks)
    out = poisoned(4 * blocks, np.uint64)
    numpy_stream[2, 32](out, counter, key, blocks, target=target)
    np.testing.assert_array_equal(out, ref)
    compiles_for_gpu(numpy_stream)


@tk.jit
def conversions(out32: tk.DevicePointer[f32], out64: tk.DevicePointer[f64],
                n32: tk.DevicePointer[f32], n64: tk.DevicePointer[f64],
                seed: tk.dt.uint32, n: tk.dt.int32):
    i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    with tk.if_(i < n):
        a = tk.philox4x32((i, 0, 0, 0), (seed, 0))
        out32[i] = tk.uniform_float(a[0])
        z0, z1 = tk.box_muller(tk.uniform_float(a[1]), tk.uniform_float(a[2]))
        n32[2 * i] = z0
        n32[2 * i + 1] = z1
        w = tk.philox4x64((tk.cast(i, u64), 0, 0, 0), (tk.cast(seed, u64), 0))
        out64[i] = tk.uniform_double(w[0])
        d0, d1 = tk.box_muller(tk.uniform_double(w[1]), tk.uniform_double(w[2]))
        n64[2 * i] = d0
        n64[2 * i + 1] = d1


def _philox_np(ctr, key, bits):
    """Reference Philox4xW-10 on NumPy object integers (the published round function)."""
    m = (0xD2511F53, 0xCD9E8D57) if bits == 32 else (0xD2E7470EE14C6C93, 0xCA5A826395121157)
    w = (0x9E3779B9, 0xBB67AE85) if bits == 32 else (0x9E3779B97F4A7C15, 0xBB67AE8584CAA73B)
    mask = (1 << bits) - 1
    c, k = [int(x) for x in ctr], [int(x) for x in key]
    for r in range(10):
        if r:
            k = [(k[0] + w[0]) & mask, (k[1] + w[1]) & mask]
        p0, p1 = m[0] * c[0], m[1] * c[2]
        c = [(p1 >> bits) ^ c[1] ^ k[0], p1 & mask, (p0 >> bits) ^ c[3] ^ k[1], p0 & mask]
    return c


def test_uniform_and_normal_conversions(target):
    n, seed = 300, 12345
    outs = [poisoned(n, np.float32), poisoned(n, np.float64), poisoned(2 * n, np.float32),
            poisoned(2 * n, np.float64)]
    conversions[3, 128](*outs, seed, n, target=target)
    w32 = np.array([_philox_np((i, 0, 0, 0), (seed, 0), 32) for i in range(n)], np.uint32)
    w64 = np.array([_philox_np((i, 0, 0, 0), (seed, 0), 64) for i in range(n)], np.uint64)
    uf = lambda u: (u >> np.uint32(8)).astype(np.float32) * np.float32(2.0**-24)  # noqa: E731
    ud = lambda u: (u >> np.uint64(11)).astype(np.float64) * 2.0**-53  # noqa: E731
    np.testing.assert_array_equal(outs[0], uf(w32[:, 0]))  # exact conversions
    np.testing.assert_array_equal(outs[1], ud(w64[:, 0]))

    def box_muller(u1, u2, t):
        r = np.sqrt(t(-2.0) * np.log(t(1.0) - u1))
        th = t(2.0 * np.pi) * u2
        return np.stack([r * np.cos(th), r * np.sin(th)], 1).reshape(-1)

    ref32 = box_muller(uf(w32[:, 1]), uf(w32[:, 2]), np.float32)
    ref64 = box_muller(ud(w64[:, 1]), ud(w64[:, 2]), np.float64)
    # The same formula; the math functions differ by a few ulps between libraries.
    np.testing.assert_allclose(outs[2], ref32, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(outs[3], ref64, rtol=1e-12, atol=1e-12)
    assert 0.0 <= outs[0].min() and outs[0].max() < 1.0
    assert abs(outs[3].mean()) < 0.2 and 0.8 < outs[3].std() < 1.2
    compiles_for_gpu(conversions)


def test_mulhi(target, rng):
    @tk.jit
    def k(a: tk.DevicePointer[u64], b: tk.DevicePointer[u64], o: tk.DevicePointer[u64],
          a32: tk.DevicePointer[u32], o32: tk.DevicePointer[u32], t: tk.Uint[tk.ThreadIdx]):
        o[t] = tk.mulhi(a[t], b[t])
        o32[t] = tk.mulhi(a32[t], a32[t + 1])

    a = rng.integers(0, 2**64, 20, dtype=np.uint64)
    b = rng.integers(0, 2**64, 20, dtype=np.uint64)
    a32 = rng.integers(0, 2**32, 21, dtype=np.uint32)
    o, o32 = poisoned(20, np.uint64), poisoned(20, np.uint32)
    k[1, 20](a, b, o, a32, o32, target=target)
    assert [int(x) for x in o] == [(int(x) * int(y)) >> 64 for x, y in zip(a, b)]
    assert [int(x) for x in o32] == [(int(a32[i]) * int(a32[i + 1])) >> 32 for i in range(20)]
