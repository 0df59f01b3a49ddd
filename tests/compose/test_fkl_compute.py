"""fkl compute, vector, memory and color ops against NumPy references (fresh random,
odd-sized inputs; poisoned outputs where the caller passes ``out``)."""

from __future__ import annotations

import fkl
import numpy as np
import pytest
from helpers import poisoned, random_array

pytestmark = pytest.mark.plugin("compose")

H, W = 13, 21


def run(target: str, ops: list, *inputs: np.ndarray, out=None):
    return fkl.compose(fkl.TensorRead() if len(inputs) == 1 else fkl.DualRead(), *ops,
                       fkl.TensorWrite(), target=target)(*inputs, out=out)


def close(a, b, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64),
                               rtol=rtol, atol=atol)


# -- arithmetic ---------------------------------------------------------------------------
@pytest.mark.parametrize("name,ref", [
    ("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply), ("Div", np.divide),
    ("Max", np.maximum), ("Min", np.minimum), ("AbsDiff", lambda a, b: np.abs(a - b)),
])
def test_binary_float_scalar_and_per_channel(target, rng, name, ref):
    x = random_array(rng, (H, W, 3), np.float32)
    s = float(rng.uniform(0.5, 2.0))
    per = [float(v) for v in rng.uniform(0.5, 2.0, 3)]
    out = poisoned((H, W, 3), np.float32)
    got = run(target, [getattr(fkl, name)(s)], x, out=out)
    assert got is out
    close(out, ref(x, np.float32(s)))
    close(run(target, [getattr(fkl, name)(per)], x), ref(x, np.array(per, np.float32)))


def test_integer_arithmetic_follows_cpp_promotion(target, rng):
    x = random_array(rng, (H, W), np.uint8)
    got = run(target, [fkl.Add(200)], x)
    assert got.dtype == np.int32  # uint8 + int -> int32, no wrap-around
    np.testing.assert_array_equal(got, x.astype(np.int32) + 200)
    got = run(target, [fkl.Mul(0.5)], x)
    assert got.dtype == np.float32
    close(got, x * np.float32(0.5))
    y = random_array(rng, (H, W), np.int32)
    d = run(target, [fkl.Div(-7)], y)
    np.testing.assert_array_equal(d, np.trunc(y / -7).astype(np.int32))  # C++ truncation
    np.testing.assert_array_equal(run(target, [fkl.Div(0)], y), np.zeros_like(y))


def test_dual_source_read(target, rng):
    a = random_array(rng, (H, W, 2), np.float32)
    b = random_array(rng, (H, W, 2), np.float32)
    for name, ref in [("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply),
                      ("Max", np.maximum), ("Min", np.minimum),
                      ("AbsDiff", lambda p, q: np.abs(p - q))]:
        close(run(target, [getattr(fkl, name)()], a, b), ref(a, b))
    b[::2] = a[::2]
    eq = run(target, [fkl.Equal()], a, b)
    assert eq.dtype == np.bool_
    np.testing.assert_array_equal(eq, a == b)


def test_unary_math(target, rng):
    x = random_array(rng, (H, W, 3), np.float32)
    close(run(target, [fkl.Abs()], x), np.abs(x))
    close(run(target, [fkl.Sqr()], x), x * x)
    p = np.abs(x) + np.float32(0.1)
    close(run(target, [fkl.Sqrt()], p), np.sqrt(p))
    close(run(target, [fkl.Ln()], p), np.log(p), rtol=1e-5, atol=1e-6)
    close(run(target, [fkl.Exp()], x), np.exp(x), rtol=1e-5)
    i = random_array(rng, (H, W), np.int16)
    got = run(target, [fkl.Abs()], i)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.abs(i.astype(np.int32)))
    u = random_array(rng, (H, W), np.uint8)
    got = run(target, [fkl.Sqrt()], u)
    assert got.dtype == np.float32
    close(got, np.sqrt(u.astype(np.float32)))


def test_bitwise_and_shifts(target, rng):
    x = random_array(rng, (H, W, 4), np.uint8)
    for op, ref in [(fkl.And(0x5A), x & 0x5A), (fkl.Or(0x81), x | 0x81),
                    (fkl.Xor(0xFF), x ^ 0xFF), (fkl.Not(), ~x),
                    (fkl.ShiftLeft(3), (x << 3).astype(np.uint8)), (fkl.ShiftRight(2), x >> 2),
                    (fkl.And([1, 2, 4, 8]), x & np.array([1, 2, 4, 8], np.uint8))]:
        got = run(target, [op], x)
        assert got.dtype == np.uint8, op
        np.testing.assert_array_equal(got, ref, err_msg=repr(op))
    s = random_array(rng, (H, W), np.int32)
    np.testing.assert_array_equal(run(target, [fkl.ShiftRight(3)], s), s >> 3)


# -- conversions --------------------------------------------------------------------------
def test_cast_truncates_toward_zero(target, rng):
    x = (rng.standard_normal((H, W)) * 50).astype(np.float32)
    got = run(target, [fkl.Cast("int32")], x)
    np.testing.assert_array_equal(got, np.trunc(x).astype(np.int32))
    u = random_array(rng, (H, W, 3), np.uint8)
    close(run(target, [fkl.Cast(np.float64)], u), u.astype(np.float64))


def test_saturate_cast_pin(target):
    x = np.array([[-3.2, .5, 1.5, 2.5, 254.5, 255.5, 300, np.nan]], dtype=np.float32)
    got = run(target, [fkl.SaturateCast("uint8")], x)
    np.testing.assert_array_equal(got, [[0, 0, 2, 2, 254, 255, 255, 0]])


def test_saturate_cast_random(target, rng):
    x = (rng.standard_normal((H, W, 3)) * 200).astype(np.float32)
    x[0, 0, 0] = np.nan
    for d in (np.uint8, np.int8, np.uint16, np.int16, np.int32):
        info = np.iinfo(d)
        ref = np.clip(np.rint(np.nan_to_num(x, nan=0)), info.min, info.max).astype(d)
        np.testing.assert_array_equal(run(target, [fkl.SaturateCast(d)], x), ref)
    i = random_array(rng, (H, W), np.int32)
    np.testing.assert_array_equal(run(target, [fkl.SaturateCast("uint8")], i),
                                  np.clip(i, 0, 255).astype(np.uint8))
    np.testing.assert_array_equal(run(target, [fkl.SaturateCast("int8")], i),
                                  np.clip(i, -128, 127).astype(np.int8))


def test_saturate_and_saturate_float(target, rng):
    x = random_array(rng, (H, W, 3), np.float32)
    close(run(target, [fkl.Saturate(-0.5, [0.1, 0.2, 0.3])], x),
          np.clip(x, -0.5, np.array([0.1, 0.2, 0.3], np.float32)))
    x[1, 1, 1] = np.nan
    np.testing.assert_array_equal(run(target, [fkl.SaturateFloat()], x),
                                  np.nan_to_num(np.clip(x, 0, 1), nan=0))
    u = random_array(rng, (H, W), np.uint8)
    np.testing.assert_array_equal(run(target, [fkl.Saturate(10, 100)], u),
                                  np.clip(u.astype(np.int32), 10, 100))


# -- vector ops ---------------------------------------------------------------------------
def test_vector_ops(target, rng):
    x = random_array(rng, (H, W, 4), np.float32)
    close(run(target, [fkl.Discard(2)], x), x[..., :2])
    close(run(target, [fkl.Discard(3), fkl.AddLast(7.5)], x),
          np.concatenate([x[..., :3], np.full((H, W, 1), 7.5, np.float32)], axis=-1))
    close(run(target, [fkl.VectorReorder([3, 1, 0])], x), x[..., [3, 1, 0]])
    close(run(target, [fkl.VectorReorderRT([2, 0, 3, 1])], x), x[..., [2, 0, 3, 1]])
    close(run(target, [fkl.VectorReduce("sum")], x), x.sum(-1), rtol=1e-5, atol=1e-5)
    close(run(target, [fkl.VectorReduce("max")], x), x.max(-1))
    close(run(target, [fkl.VectorReduce("min")], x), x.min(-1))
    close(run(target, [fkl.VectorReduce("prod")], x), x.prod(-1), rtol=1e-5, atol=1e-5)
    u = random_array(rng, (H, W, 3), np.uint8)
    got = run(target, [fkl.VectorReduce("sum")], u)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, u.astype(np.int32).sum(-1))


def test_vector_reorder_rt_does_not_recompile(target, rng):
    x = random_array(rng, (H, W, 3), np.float32)
    run(target, [fkl.VectorReorderRT([0, 1, 2])], x)
    before = fkl.stats()["builds"]
    for perm in ([2, 1, 0], [1, 2, 0], [0, 0, 1]):
        close(run(target, [fkl.VectorReorderRT(perm)], x), x[..., perm])
    assert fkl.stats()["builds"] == before


def test_mxv_float3(target, rng):
    x = random_array(rng, (H, W, 3), np.float32)
    m = rng.standard_normal((3, 3)).astype(np.float32)
    close(run(target, [fkl.MxVFloat3(m)], x), np.einsum("ij,hwj->hwi", m, x),
          rtol=1e-5, atol=1e-5)


def test_normalize(target, rng):
    x = random_array(rng, (H, W, 3), np.uint8)
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    close(run(target, [fkl.Normalize(mean, std)], x),
          (x.astype(np.float32) - np.float32(mean)) / np.float32(std), rtol=1e-5, atol=1e-4)


# -- vertical fusion, StaticLoop, MidWrite ------------------------------------------------
def test_long_chain_is_one_kernel(target, rng):
    x = random_array(rng, (H, W, 3), np.float32)
    ops = [fkl.Mul(1.01), fkl.Add(-0.5), fkl.Sub(0.25), fkl.Mul(2.0), fkl.Max(-1.0),
           fkl.Min(3.0), fkl.Div(1.5), fkl.Abs()]
    ref = np.abs(np.minimum(np.maximum((((x * np.float32(1.01)) - np.float32(0.5))
                                        - np.float32(0.25)) * 2, -1), 3) / np.float32(1.5))
    before = fkl.stats()["builds"]
    pipe = fkl.compose(fkl.TensorRead(), *ops, fkl.TensorWrite(), target=target)
    close(pipe(x), ref)
    assert fkl.stats()["builds"] <= before + 1
    assert pipe.source(x).count('extern "C" __global__' if target == "gpu" else "thork_entry(") == 1


def test_static_loop(target, rng):
    x = random_array(rng, (H, W, 2), np.float32)
    pipe = fkl.compose(fkl.TensorRead(), fkl.StaticLoop(fkl.Add(0.5), 1000),
                       fkl.TensorWrite(), target=target)
    ref = x.copy()
    for _ in range(1000):
        ref = ref + np.float32(0.5)
    close(pipe(x), ref, rtol=1e-5, atol=1e-3)
    src = pipe.source(x)
    small = fkl.compose(fkl.TensorRead(), fkl.StaticLoop(fkl.Add(0.5), 2),
                        fkl.TensorWrite(), target=target).source(x)
    # One loop, not 1000 copies: the code size does not grow with n.
    assert "for (int" in src and abs(len(src) - len(small)) < 16
    u = random_array(rng, (H, W), np.int32)
    p2 = fkl.compose(fkl.TensorRead(), fkl.StaticLoop(fkl.Mul(3), 5), fkl.TensorWrite(),
                     target=target)
    np.testing.assert_array_equal(p2(u), u * 243)


def test_mid_write(target, rng):
    x = random_array(rng, (H, W, 3), np.float32)
    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.MidWrite(), fkl.Add(1.0),
                       fkl.TensorWrite(), target=target)
    mid, final = pipe(x)
    close(mid, x * 2)
    close(final, x * 2 + 1)


# -- memory ops ---------------------------------------------------------------------------
def test_split_pack_and_tsplit(target, rng):
    x = random_array(rng, (H, W, 3), np.float32)
    split = fkl.compose(fkl.TensorRead(), fkl.TensorSplit(), target=target)(x)
    close(split, x.transpose(2, 0, 1))
    back = fkl.compose(fkl.TensorPack(), fkl.TensorWrite(), target=target)(
        np.ascontiguousarray(split))
    close(back, x)
    b = random_array(rng, (3, H, W, 4), np.uint8)
    np.testing.assert_array_equal(
        fkl.compose(fkl.TensorRead(), fkl.TensorSplit(), target=target)(b),
        b.transpose(0, 3, 1, 2))
    ts = fkl.compose(fkl.TensorRead(), fkl.TensorTSplit(), target=target)(b)
    np.testing.assert_array_equal(ts, b.transpose(3, 0, 1, 2))
    np.testing.assert_array_equal(
        fkl.compose(fkl.TensorTPack(), fkl.TensorWrite(), target=target)(ts), b)


def test_split_write(target, rng):
    x = random_array(rng, (H, W, 4), np.int16)
    outs = [poisoned((H, W), np.int16) for _ in range(4)]
    got = fkl.compose(fkl.TensorRead(), fkl.SplitWrite(), target=target)(x, out=outs)
    assert len(got) == 4
    for c in range(4):
        np.testing.assert_array_equal(outs[c], x[..., c])


def test_read_set(target, rng):
    v = [float(a) for a in rng.standard_normal(3)]
    got = fkl.compose(fkl.ReadSet(v, (H, W, 3)), fkl.Mul(2.0), fkl.TensorWrite(),
                      target=target)()
    close(got, np.broadcast_to(np.float32(v) * 2, (H, W, 3)))


def test_batch_read_write(target, rng):
    x = random_array(rng, (3, H, W, 3), np.float32)
    close(run(target, [fkl.Mul(3.0)], x), x * 3)
    g = random_array(rng, (5, H, W), np.uint8)
    np.testing.assert_array_equal(
        fkl.compose(fkl.TensorRead(batch=True), fkl.Add(1), fkl.TensorWrite(),
                    target=target)(g), g.astype(np.int32) + 1)


# -- color --------------------------------------------------------------------------------
def _gray(rgb: np.ndarray, dtype) -> np.ndarray:
    f = rgb.astype(np.float32)
    g = f[..., 0] * np.float32(0.299) + f[..., 1] * np.float32(0.587) + \
        f[..., 2] * np.float32(0.114)
    return g.astype(dtype) if np.dtype(dtype).kind == "f" else \
        np.clip(np.rint(g), 0, 255).astype(dtype)


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_color_conversions(target, rng, dtype):
    x3 = random_array(rng, (H, W, 3), dtype) if dtype == np.float32 else \
        rng.integers(0, 256, (H, W, 3)).astype(np.uint8)
    x4 = random_array(rng, (H, W, 4), dtype) if dtype == np.float32 else \
        rng.integers(0, 256, (H, W, 4)).astype(np.uint8)
    a255 = np.full((H, W, 1), 255, dtype)
    cases = {
        "BGR2RGB": (x3, x3[..., ::-1]), "RGB2BGR": (x3, x3[..., ::-1]),
        "BGRA2RGBA": (x4, x4[..., [2, 1, 0, 3]]), "RGBA2BGRA": (x4, x4[..., [2, 1, 0, 3]]),
        "RGB2RGBA": (x3, np.concatenate([x3, a255], -1)),
        "BGR2BGRA": (x3, np.concatenate([x3, a255], -1)),
        "BGR2RGBA": (x3, np.concatenate([x3[..., ::-1], a255], -1)),
        "RGB2BGRA": (x3, np.concatenate([x3[..., ::-1], a255], -1)),
        "RGBA2RGB": (x4, x4[..., :3]), "BGRA2BGR": (x4, x4[..., :3]),
        "BGRA2RGB": (x4, x4[..., [2, 1, 0]]), "RGBA2BGR": (x4, x4[..., [2, 1, 0]]),
        "RGB2GRAY": (x3, _gray(x3, dtype)), "RGBA2GRAY": (x4, _gray(x4, dtype)),
        "BGR2GRAY": (x3, _gray(x3[..., ::-1], dtype)),
        "BGRA2GRAY": (x4, _gray(x4[..., [2, 1, 0]], dtype)),
    }
    assert set(cases) == set(fkl.COLOR_CODES)
    for code, (inp, ref) in cases.items():
        got = run(target, [fkl.ColorConversion(code)], inp)
        assert got.dtype == dtype, code
        if dtype == np.uint8:
            # Float rounding may differ by one ulp at exact .5 ties: at most ±1 on gray.
            assert np.abs(got.astype(int) - ref.astype(int)).max() <= (1 if "GRAY" in code
                                                                        else 0), code
            if "GRAY" not in code:
                np.testing.assert_array_equal(got, ref, err_msg=code)
        else:
            close(got, ref)


def test_gray_against_opencv(target, rng):
    cv2 = pytest.importorskip("cv2")
    x = rng.integers(0, 256, (H, W, 3)).astype(np.uint8)
    got = run(target, [fkl.ColorConversion("BGR2GRAY")], x)
    assert np.abs(got.astype(int) - cv2.cvtColor(x, cv2.COLOR_BGR2GRAY)).max() <= 1
    np.testing.assert_array_equal(run(target, [fkl.ColorConversion("BGR2RGB")], x),
                                  cv2.cvtColor(x, cv2.COLOR_BGR2RGB))
