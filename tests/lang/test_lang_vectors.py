"""Vector types (float2/3/4, int2/4, half2, double2) with arithmetic and vector loads,
@tk.struct values as parameters and locals, and @tk.func helpers returning tuples."""

import numpy as np
import pytest
import thork as tk
from helpers import compiles_for_gpu, poisoned, random_array

f32, i32 = tk.dt.float32, tk.dt.int32
EPS2 = 0.01


@tk.func
def interaction(pi, pj):
    """Acceleration of body i by body j (softened gravity): a float3."""
    d = tk.float3(pj.x - pi.x, pj.y - pi.y, pj.z - pi.z)
    r2 = tk.dot(d, d) + EPS2
    inv = tk.rsqrt(r2)
    return d * (pj.w * inv * inv * inv)


@tk.jit
def nbody(pos: tk.DevicePointer[f32], acc: tk.DevicePointer[f32], n: i32):
    i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    with tk.if_(i < n):
        pi = tk.float4.load(pos, i)               # one 16-byte load: x, y, z, mass
        a = tk.float3.var(0.0)
        for j in tk.range(n):
            a += interaction(pi, tk.float4.load(pos, j))
        tk.float4.store(acc, i, tk.float4(a.x, a.y, a.z, 0.0))


def test_vector_nbody(target, rng):
    n = 67
    pos = random_array(rng, (n, 4), np.float32)
    pos[:, 3] = rng.random(n).astype(np.float32) + 0.5
    acc = poisoned((n, 4), np.float32)
    nbody[(n + 31) // 32, 32](pos, acc, n, target=target)
    d = pos[None, :, :3].astype(np.float64) - pos[:, None, :3]
    r2 = (d * d).sum(-1) + EPS2
    ref = (d * (pos[None, :, 3] / r2 ** 1.5)[..., None]).sum(1)
    np.testing.assert_allclose(acc[:, :3], ref, rtol=1e-3, atol=1e-3)
    assert (acc[:, 3] == 0).all()
    src = nbody.source
    assert "thork_vec<float, 4>" in src and "_ret" in src  # vector load, struct return
    compiles_for_gpu(nbody)


@tk.jit
def lanes(h: tk.DevicePointer[tk.dt.float16], ii: tk.DevicePointer[i32],
          out_h: tk.DevicePointer[tk.dt.float16], out_i: tk.DevicePointer[i32],
          d: tk.DevicePointer[tk.dt.float64], tid: tk.Uint[tk.ThreadIdx]):
    v = tk.half2.load(h, tid)
    (v * 2.0 - tk.half2(1.0, 0.5)).store(out_h, tid)
    q = tk.int4.load(ii, tid)
    r = q * tk.int4(1, 2, 3, 4) + 7
    tk.int2.store(out_i, 2 * tid, tk.int2(r.x + r.y, r.z))
    tk.int2.store(out_i, 2 * tid + 1, tk.int2(r.w, -r[0]))
    w = tk.double2.load(d, tid)
    tk.double2.store(d, tid, w / 4.0 + 1.0)


def test_half_int_double_vectors(target, rng):
    t = 9
    h = random_array(rng, 2 * t, np.float16)
    ii = random_array(rng, 4 * t, np.int32)
    d = random_array(rng, 2 * t, np.float64)
    d0 = d.copy()
    out_h, out_i = poisoned(2 * t, np.float16), poisoned(4 * t, np.int32)
    lanes[1, t](h, ii, out_h, out_i, d, target=target)
    hh = h.reshape(t, 2).astype(np.float32)
    ref_h = (hh * 2 - np.float32([1.0, 0.5])).astype(np.float16).reshape(-1)
    np.testing.assert_array_equal(out_h, ref_h)
    q = ii.reshape(t, 4).astype(np.int64) * [1, 2, 3, 4] + 7
    ref_i = np.stack([q[:, 0] + q[:, 1], q[:, 2], q[:, 3], -q[:, 0]], 1).reshape(-1)
    np.testing.assert_array_equal(out_i, ref_i.astype(np.int32))
    np.testing.assert_allclose(d, d0 / 4 + 1, rtol=1e-15)


@tk.struct
class Affine:
    scale: tk.dt.float32
    shift: tk.dt.float32
    clamp: tk.dt.int32


@tk.func
def apply_both(p, x):
    """Two results: a tuple."""
    y = x * p.scale + p.shift
    return y, tk.min(tk.cast(y, i32), p.clamp)


@tk.jit
def affine(x: tk.DevicePointer[f32], y: tk.DevicePointer[f32], k: tk.DevicePointer[i32],
           p: Affine, n: i32):
    i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    with tk.if_(i < n):
        q = Affine(p.scale * 2.0, p.shift, p.clamp)       # a struct local
        a, b = apply_both(q, x[i])
        y[i] = a
        k[i] = b


def test_struct_parameter_local_and_tuple_return(target, rng):
    n = 150
    x = random_array(rng, n, np.float32) * 10
    y, k = poisoned(n, np.float32), poisoned(n, np.int32)
    affine[2, 128](x, y, k, Affine(1.5, -2.0, 5), n, target=target)
    ref = x * np.float32(3.0) - np.float32(2.0)
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-5)  # the GPU may fuse: fma
    np.testing.assert_array_equal(k, np.minimum(np.trunc(y).astype(np.int32), 5))
    y2 = poisoned(n, np.float32)
    affine[2, 128](x, y2, k, (0.5, 1.0, 100), n, target=target)   # a tuple works too
    np.testing.assert_allclose(y2, x * np.float32(1.0) + 1.0, rtol=1e-6, atol=1e-6)
    assert [p.name for p in affine.params][3:6] == ["p_scale", "p_shift", "p_clamp"]
    compiles_for_gpu(affine)


def test_struct_argument_errors(target):
    x = np.zeros(4, np.float32)
    with pytest.raises(tk.ArgumentError, match=r"'p' expects a Affine \(or a tuple of its 3"):
        affine[1, 32](x, x, np.zeros(4, np.int32), 1.0, 4, target=target)
    with pytest.raises(tk.TraceError, match="must be annotated with a dtype"):
        @tk.struct
        class Bad:
            v: list


def test_vector_errors():
    @tk.jit
    def k(a: tk.DevicePointer[tk.dt.int32]):
        tk.float4.load(a, 0)

    with pytest.raises(tk.TraceError, match=r"must hold float32"):
        k.ir  # noqa: B018

    @tk.jit
    def k2(a: tk.DevicePointer[f32]):
        v = tk.float4.load(a, 0) + tk.float2(1.0, 2.0)
        a[0] = v.x

    with pytest.raises(tk.TraceError, match="vector lengths differ"):
        k2.ir  # noqa: B018
