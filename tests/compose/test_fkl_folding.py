"""Channel folding: a chain of channel-uniform ops between packed reads and writes runs as
a 1-channel chain over the image's N * C elements (fkl/_flat.py).

Results are checked against NumPy with poisoned outputs, and bit for bit against the 2-D
kernel and the unfolded flat kernel; the tests also check that the folded kernel was the
one that ran (``pipe.flat_spec(t).folded``, ``lowered.fold``), which chains fold and
which do not, the misalignment fallback, that values never rebuild, and that the folded
CUDA kernel compiles for sm_90 with one 16-byte load and store per thread. No GPU needed.
"""

from __future__ import annotations

import re

import fkl
import numpy as np
import pytest
from helpers import poisoned, random_array

pytestmark = pytest.mark.plugin("compose")

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
F = np.float32


def six_ops() -> list:
    return [fkl.Mul(1.5), fkl.Add(0.25), fkl.Mul(2.0), fkl.Sub(0.5), fkl.Max(-1.0),
            fkl.Min(4.0)]


def six_ref(x: np.ndarray) -> np.ndarray:
    return np.minimum(np.maximum((x * F(1.5) + F(0.25)) * F(2.0) - F(0.5), F(-1.0)), F(4.0))


def pixtype(pipe, *inputs):
    return pipe._pixtype(list(inputs) or None, None, 1)


def folded_pipe(ops, target: str, vectors: int | None = None):
    """A pipe forced to the channel-folded flat kernel (the CPU's default keeps the
    channels; the GPU's folds)."""
    pipe = fkl.compose(*ops, target=target)
    pipe.flat, pipe.fold, pipe.vectors = True, True, vectors
    return pipe


def ran_folded(pipe, channels: int) -> bool:
    """Whether every call of ``pipe`` so far ran a flat kernel folded from ``channels``."""
    plans = list(pipe._plans.values())
    return bool(plans) and all(p.built.lowered.variant == "flat" and
                               p.built.lowered.fold == channels and p.fallback is None
                               for p in plans)


def check(ops, *inputs, ref, target, out_dtype=None, vectors=None, exact=False):
    """Run ``ops`` folded into a poisoned output; compare with ``ref`` and, bit for
    bit, with the 2-D and the unfolded flat kernels. Returns the pipe."""
    pipe = folded_pipe(ops, target, vectors)
    t = pixtype(pipe, *inputs)
    spec = pipe.flat_spec(t)
    assert spec is not None and spec.folded and spec.fold == t.channels, ops
    assert pipe.variant(t) == "flat"
    out = poisoned(ref.shape, out_dtype or ref.dtype)
    assert pipe(*inputs, out=out) is out
    assert ran_folded(pipe, t.channels)
    if exact:
        np.testing.assert_array_equal(out, ref)
    else:
        np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)
    for flat, fold in ((False, None), (True, False)):
        other = fkl.compose(*ops, target=target)
        other.flat, other.fold = flat, fold
        got = other(*inputs)
        np.testing.assert_array_equal(got, out.reshape(got.shape))  # bit-identical
        assert not ran_folded(other, t.channels)
    return pipe


# -- foldable chains give the right answer, folded ------------------------------------------
SHAPES = [(37, 53), (1, 1), (1, 3), (5, 7), (3, 37, 53), (2, 9, 11), (16, 16), (3, 129)]


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
@pytest.mark.parametrize("shape", SHAPES)
def test_float32_six_ops(target, rng, channels, shape):
    full = (*shape, channels) if channels > 1 else shape  # 3-D shapes are batches
    x = random_array(rng, full, np.float32)
    check([fkl.TensorRead(), *six_ops(), fkl.TensorWrite()], x, ref=six_ref(x),
          target=target)


@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("shape", [(37, 53), (1, 1), (9, 23), (2, 7, 5), (64, 64)])
def test_uint8_cast_to_float(target, rng, channels, shape):
    full = (*shape, channels) if channels > 1 else shape
    x = random_array(rng, full, np.uint8)
    ops = [fkl.TensorRead(batch=len(shape) == 3 or None), fkl.Cast("float32"),
           fkl.Mul(1 / 255.0), fkl.Sub(0.5), fkl.TensorWrite()]
    ref = x.astype(F) * F(1 / 255.0) - F(0.5)
    check(ops, x, ref=ref, target=target)


def test_vectors_and_other_dtypes(target, rng):
    """1-D vectors, uint8 in and out, saturation, float64, bitwise ops, unary math."""
    for n in (1, 3, 4, 5, 17, 1027):
        v = random_array(rng, (n,), np.float32)
        check([fkl.TensorRead(), *six_ops(), fkl.TensorWrite()], v, ref=six_ref(v),
              target=target)
    u = random_array(rng, (13, 29, 3), np.uint8)
    ref = np.clip(np.rint(u.astype(F) * F(1.7) - F(20.0)), 0, 255).astype(np.uint8)
    ops = [fkl.TensorRead(), fkl.Cast("float32"), fkl.Mul(1.7), fkl.Sub(20.0),
           fkl.SaturateCast("uint8"), fkl.TensorWrite()]
    if target == "cpu":  # built without contraction: exactly NumPy's two roundings
        check(ops, u, ref=ref, target=target, exact=True)
    else:
        # CUDA compilers contract u*1.7-20 into one FMA (one rounding), which can move a
        # value across a .5 boundary of rint. The FMA result is exact in float64 (8-bit
        # times 24-bit products), rounded once to float32: each element must be one of
        # the two.
        fused = np.clip(np.rint((u.astype(np.float64) * np.float64(F(1.7)) - 20.0)
                                .astype(F)), 0, 255).astype(np.uint8)
        pipe = folded_pipe(ops, target)
        out = poisoned(u.shape, np.uint8)
        assert pipe(u, out=out) is out and ran_folded(pipe, 3)
        assert np.all((out == ref) | (out == fused))
        for flat, fold in ((False, None), (True, False)):  # every kernel: the same bits
            other = fkl.compose(*ops, target=target)
            other.flat, other.fold = flat, fold
            np.testing.assert_array_equal(other(u), out)
    check([fkl.TensorRead(), fkl.Xor(0x5A), fkl.ShiftRight(1), fkl.And(0x3F),
           fkl.TensorWrite()], u, ref=((u ^ 0x5A) >> 1) & 0x3F, target=target, exact=True)
    d = random_array(rng, (7, 11, 3), np.float64)
    check([fkl.TensorRead(), fkl.Abs(), fkl.Sqrt(), fkl.Add(1.0), fkl.Ln(), fkl.TensorWrite()],
          d, ref=np.log(np.sqrt(np.abs(d)) + 1.0), target=target)
    f = random_array(rng, (5, 19, 4), np.float32)
    check([fkl.TensorRead(), fkl.Saturate(-0.5, 0.5), fkl.Sqr(), fkl.Normalize(0.1, 0.5),
           fkl.SaturateFloat(), fkl.TensorWrite()], f,
          ref=np.clip((np.clip(f, F(-0.5), F(0.5)) ** 2 - F(0.1)) / F(0.5), 0, 1),
          target=target)


def test_mid_write_dual_read_read_set_static_loop(target, rng):
    x = random_array(rng, (9, 13, 3), np.float32)
    pipe = folded_pipe([fkl.TensorRead(), fkl.Mul(2.0), fkl.MidWrite(), fkl.Add(1.0),
                        fkl.TensorWrite()], target)
    mid, out = poisoned(x.shape, np.float32), poisoned(x.shape, np.float32)
    pipe(x, out=[mid, out])
    assert ran_folded(pipe, 3)
    np.testing.assert_array_equal(mid, x * F(2.0))
    np.testing.assert_array_equal(out, x * F(2.0) + F(1.0))
    a, b = random_array(rng, (5, 13, 3), np.uint8), random_array(rng, (5, 13, 3), np.uint8)
    check([fkl.DualRead(), fkl.AbsDiff(), fkl.TensorWrite()], a, b,
          ref=np.abs(a.astype(np.int32) - b.astype(np.int32)), target=target, exact=True)
    check([fkl.ReadSet(1.25, (3, 5, 7, 3)), fkl.Mul(2.0), fkl.TensorWrite()],
          ref=np.full((3, 5, 7, 3), 2.5, np.float32), target=target, exact=True)
    ref = x.copy()
    for _ in range(5):
        ref = ref + F(0.25)
    check([fkl.TensorRead(), fkl.StaticLoop(fkl.Add(0.25), 5), fkl.TensorWrite()], x,
          ref=ref, target=target, exact=True)


# -- groups per thread (pipe.vectors), block-strided ----------------------------------------
@pytest.mark.parametrize("vectors", [2, 4])
def test_several_groups_per_thread(target, rng, vectors):
    # Sizes with partial last blocks, a tail, several blocks, and fewer groups than one
    # block's threads.
    for shape in ((37, 53, 3), (1, 1, 3), (3, 5, 1), (2, 300, 41, 3), (1, 2049)):
        x = random_array(rng, shape, np.float32)
        pipe = check([fkl.TensorRead(), *six_ops(), fkl.TensorWrite()], x, ref=six_ref(x),
                     target=target, vectors=vectors)
        (plan,) = pipe._plans.values()
        assert plan.built.lowered.vectors == vectors
    u = random_array(rng, (33, 65, 3), np.uint8)
    pipe = folded_pipe([fkl.TensorRead(), fkl.Cast("float32"), fkl.Mul(0.5), fkl.MidWrite(),
                        fkl.Add(1.0), fkl.TensorWrite()], target, vectors)
    mid, out = pipe(u)
    assert ran_folded(pipe, 3)
    np.testing.assert_array_equal(mid, u.astype(F) * F(0.5))
    np.testing.assert_array_equal(out, u.astype(F) * F(0.5) + F(1.0))


# -- which chains fold ---------------------------------------------------------------------
def t_of(dtype: str, channels: int, pair: bool = False):
    from fkl._pixel import PixType
    from thork_core import dtype_of

    return PixType(dtype_of(dtype), channels, 2 if pair else 1)


FOLDS = [
    [fkl.TensorRead(), *six_ops(), fkl.TensorWrite()],
    [fkl.TensorRead(), fkl.Mul((2.0,)), fkl.Div(3.0), fkl.TensorWrite()],
    [fkl.TensorRead(), fkl.Cast("float32"), fkl.Exp(), fkl.Ln(), fkl.TensorWrite()],
    [fkl.TensorRead(), fkl.Saturate(0.0, 1.0), fkl.Normalize(0.5, 0.25), fkl.TensorWrite()],
    [fkl.TensorRead(), fkl.StaticLoop(fkl.Mul(1.01), 4), fkl.MidWrite(), fkl.TensorWrite()],
    [fkl.TensorRead(), fkl.AbsDiff(3.0), fkl.Equal(1.0), fkl.TensorWrite()],
]
NO_FOLD = [
    [fkl.TensorRead(), fkl.Mul((1.0, 2.0, 3.0)), fkl.TensorWrite()],  # per-channel values
    [fkl.TensorRead(), fkl.Mul(2.0), fkl.Sub(MEAN), fkl.TensorWrite()],
    [fkl.TensorRead(), fkl.ColorConversion("BGR2RGB"), fkl.TensorWrite()],
    [fkl.TensorRead(), fkl.VectorReorder((2, 1, 0)), fkl.TensorWrite()],
    [fkl.TensorRead(), fkl.VectorReorderRT((2, 1, 0)), fkl.TensorWrite()],
    [fkl.TensorRead(), fkl.VectorReduce("sum"), fkl.TensorWrite()],
    [fkl.TensorRead(), fkl.MxVFloat3(np.eye(3)), fkl.TensorWrite()],
    [fkl.TensorRead(), fkl.AddLast(1.0), fkl.TensorWrite()],
    [fkl.TensorRead(), fkl.Discard(2), fkl.TensorWrite()],
    [fkl.TensorRead(), fkl.Saturate((0.0, 0.0, 0.0), 1.0), fkl.TensorWrite()],
    [fkl.TensorRead(), fkl.Normalize(MEAN, STD), fkl.TensorWrite()],
    [fkl.TensorRead(), fkl.StaticLoop(fkl.Add((1.0, 2.0, 3.0)), 2), fkl.TensorWrite()],
    [fkl.TensorRead(), fkl.Mul(2.0), fkl.TensorSplit()],  # planar write
    [fkl.TensorRead(), fkl.SplitWrite()],
    [fkl.TensorRead(), fkl.Crop((0, 0, 2, 2)), fkl.TensorWrite()],  # geometry
    [fkl.TensorPack(), fkl.TensorWrite()],
]


@pytest.mark.parametrize("ops", FOLDS, ids=lambda ops: "-".join(o.name[4:] for o in ops))
def test_chains_that_fold(ops):
    t = t_of("float32", 3)
    pipe = fkl.compose(*ops)
    assert pipe.flat_spec(t, "gpu").folded
    assert pipe.variant(t, "gpu") == "flat"  # the GPU's default: the folded flat kernel
    assert pipe.variant(t, "cpu") == "flat" and not pipe.flat_spec(t, "cpu").folded
    low = pipe.lowered(t, "flat", target="gpu")
    assert (low.variant, low.fold, low.folded) == ("flat", 3, True)
    pipe.fold = False  # folding off: the GPU's default is the 2-D kernel again
    assert pipe.variant(t, "gpu") == "grid"


@pytest.mark.parametrize("ops", NO_FOLD, ids=lambda ops: "-".join(o.name[4:] for o in ops))
def test_chains_that_do_not_fold(ops):
    t = t_of("float32", 3)
    pipe = fkl.compose(*ops)
    pipe.fold = True
    spec = pipe.flat_spec(t, "gpu")
    assert spec is None or not spec.folded
    assert pipe.variant(t, "gpu") == "grid"  # the GPU keeps the 2-D kernel for these


def test_dual_read_and_read_set_fold_by_value_kind():
    pair = t_of("uint8", 3, pair=True)
    assert fkl.compose(fkl.DualRead(), fkl.Sub(), fkl.TensorWrite()).flat_spec(
        pair, "gpu").folded
    one = fkl.compose(fkl.ReadSet(1.0, (4, 4, 3)), fkl.TensorWrite())
    many = fkl.compose(fkl.ReadSet([1.0, 2.0, 3.0], (4, 4, 3)), fkl.TensorWrite())
    t = t_of("float32", 3)
    assert one.flat_spec(t, "gpu").folded and not many.flat_spec(t, "gpu").folded
    assert one.chain.key() != many.chain.key()  # the value kind is part of the identity


def test_channel_uniform_is_type_level():
    """``channel_uniform`` follows the value kind (one value or one per channel), which
    ``key`` holds, never the values."""
    assert fkl.Mul(2.0).channel_uniform() and fkl.Mul([3.0]).channel_uniform()
    assert not fkl.Mul((2.0, 2.0, 2.0)).channel_uniform()
    assert fkl.Mul(2.0).key() == fkl.Mul(5.0).key() != fkl.Mul((2.0, 2.0, 2.0)).key()
    assert fkl.Saturate(0, 1).key() != fkl.Saturate((0, 0, 0), 1).key()
    assert fkl.Normalize(0.5, 0.2).key() != fkl.Normalize(MEAN, STD).key()
    assert fkl.StaticLoop(fkl.Abs(), 3).channel_uniform()
    assert not fkl.StaticLoop(fkl.VectorReorder((1, 0)), 3).channel_uniform()
    assert not fkl.VectorReduce("max").channel_uniform()  # its op is a name, not an Op
    assert fkl.TensorRead().channel_uniform() and fkl.MidWrite().channel_uniform()
    assert not fkl.TensorSplit().channel_uniform()


# -- non-foldable chains stay correct --------------------------------------------------------
def test_non_foldable_chains_are_correct_and_unfolded(target, rng):
    x = random_array(rng, (37, 53, 3), np.float32)
    for ops, ref in (
            ([fkl.TensorRead(), fkl.Mul((1.0, 2.0, 3.0)), fkl.TensorWrite()],
             x * np.float32([1.0, 2.0, 3.0])),
            ([fkl.TensorRead(), fkl.ColorConversion("BGR2RGB"), fkl.Mul(2.0),
              fkl.TensorWrite()], x[..., ::-1] * F(2.0))):
        for flat in (None, True, False):
            pipe = fkl.compose(*ops, target=target)
            pipe.flat, pipe.fold = flat, True
            out = poisoned(x.shape, np.float32)
            pipe(x, out=out)
            np.testing.assert_array_equal(out, ref)
            (plan,) = pipe._plans.values()
            assert plan.built.lowered.fold == 0
        assert pipe.variant(pixtype(pipe, x), "gpu") == "grid"


# -- alignment: a misaligned array runs the 2-D kernel ---------------------------------------
def test_misaligned_arrays_fall_back(target, rng):
    shape = (37, 53, 3)
    n = int(np.prod(shape))
    pipe = folded_pipe([fkl.TensorRead(), *six_ops(), fkl.TensorWrite()], target)
    base = random_array(rng, (n + 8,), np.float32)
    skip = (-base.__array_interface__["data"][0] % 16) // 4
    aligned = base[skip:skip + n].reshape(shape)
    out = poisoned(shape, np.float32)
    pipe(aligned, out=out)
    np.testing.assert_allclose(out, six_ref(aligned), rtol=1e-6, atol=1e-6)
    assert ran_folded(pipe, 3)
    for offset in (1, 2, 3):  # a view offset by one element (4 bytes) of a larger buffer
        xv = base[skip + offset:skip + offset + n].reshape(shape)
        assert xv.__array_interface__["data"][0] % 16
        out = poisoned(shape, np.float32)
        assert pipe(xv, out=out) is out
        np.testing.assert_allclose(out, six_ref(xv), rtol=1e-6, atol=1e-6)
    (plan,) = pipe._plans.values()
    assert plan.built.lowered.fold == 3
    assert plan.fallback is not None and plan.fallback.built.lowered.variant == "grid"
    # A misaligned output too, and the NumPy-style view of seed tests: base[1:].reshape.
    raw = poisoned((n + 8,), np.float32)
    s = (-raw.__array_interface__["data"][0] % 16) // 4 + 1
    out = raw[s:s + n].reshape(shape)
    pipe(aligned, out=out)
    np.testing.assert_allclose(out, six_ref(aligned), rtol=1e-6, atol=1e-6)
    assert np.all(np.isnan(raw[:s])) and np.all(np.isnan(raw[s + n:]))
    xv = random_array(rng, (n + 1,), np.float32)[1:].reshape(shape)
    np.testing.assert_allclose(pipe(xv), six_ref(xv), rtol=1e-6, atol=1e-6)


# -- values are parameters ----------------------------------------------------------------
def test_values_do_not_rebuild_the_folded_kernel(target, rng):
    x = random_array(rng, (7, 9, 3), np.float32)
    folded_pipe([fkl.TensorRead(), fkl.Mul(1.0), fkl.Add(0.0), fkl.TensorWrite()], target)(x)
    before = fkl.stats()["builds"]
    for a, b in ((2.0, 1.0), (-1.0, 5.0), (0.5, -0.25)):
        pipe = folded_pipe([fkl.TensorRead(), fkl.Mul(a), fkl.Add(b), fkl.TensorWrite()],
                           target)
        np.testing.assert_allclose(pipe(x), x * F(a) + F(b), rtol=1e-6, atol=1e-6)
        assert ran_folded(pipe, 3)
        # Another size of the same pixel type: a new plan, not a new kernel.
        y = random_array(rng, (31, 5, 3), np.float32)
        np.testing.assert_allclose(pipe(y), y * F(a) + F(b), rtol=1e-6, atol=1e-6)
    assert fkl.stats()["builds"] == before
    # Folded and unfolded kernels are different kernels (the fold is in the identity).
    pipe = folded_pipe([fkl.TensorRead(), fkl.Mul(1.0), fkl.TensorWrite()], target)
    t = pixtype(pipe, x)
    sig = pipe.signature(t)
    pipe.fold = False
    assert pipe.signature(t) != sig


# -- the CUDA kernel, without a GPU ------------------------------------------------------------
def test_gpu_source_without_a_gpu():
    """``source()`` of a target="gpu" pipe renders CUDA without looking for a GPU; its
    default kernel for a foldable chain is the folded flat one: one float4 per thread."""
    x = np.zeros((1080, 1920, 3), np.float32)
    pipe = fkl.compose(fkl.TensorRead(), *six_ops(), fkl.TensorWrite(), target="gpu")
    body = pipe.source(x).split("__global__ void")[1]
    assert body.count("*(const thork_vec<float, 4>*)(in0") == 1  # one 16-byte load
    assert body.count("*(thork_vec<float, 4>*)(out0") == 1  # one 16-byte store
    grid = pipe.source(x, variant="grid").split("__global__ void")[1]
    assert "thork_vec" not in grid


@pytest.mark.plugin("nvrtc")
@pytest.mark.parametrize("target", [None, "gpu", "cpu"])
def test_folded_kernel_compiles_for_sm90(target):
    """``artifact()`` needs no GPU whatever the pipe's target, and its default is the
    kernel the GPU runs: for the 6-op chain the folded flat kernel."""
    x = np.zeros((1080, 1920, 3), np.float32)
    pipe = fkl.compose(fkl.TensorRead(), *six_ops(), fkl.TensorWrite(), target=target)
    art = pipe.artifact(x, arch="sm_90", compiler="nvrtc")
    assert art.kind == "cubin" and art.data[:4] == b"\x7fELF"
    ptx = pipe.artifact(x, arch="sm_90", compiler="nvrtc", kind="ptx").data
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    assert len(re.findall(r"ld\.global(?:\.nc)?\.v4\.f32", ptx)) == 1
    assert len(re.findall(r"st\.global\.v4\.f32", ptx)) == 1
    # uint8 -> float32: one 4-byte load of 4 uint8, one float4 store.
    u = np.zeros((1080, 1920, 3), np.uint8)
    cast = fkl.compose(fkl.TensorRead(), fkl.Cast("float32"), fkl.Mul(1 / 255.0),
                       fkl.TensorWrite(), target=target)
    ptx = cast.artifact(u, arch="sm_90", compiler="nvrtc", kind="ptx").data
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    assert len(re.findall(r"st\.global\.v4\.f32", ptx)) == 1
    assert len(re.findall(r"ld\.global(?:\.nc)?\.v4\.[us]8", ptx)) == 1  # 4 bytes
    # Two groups per thread: two loads in flight, both compiled.
    two = fkl.compose(fkl.TensorRead(), *six_ops(), fkl.TensorWrite(), target=target)
    two.vectors = 2
    ptx = two.artifact(x, arch="sm_90", compiler="nvrtc", kind="ptx").data
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    assert len(re.findall(r"ld\.global(?:\.nc)?\.v4\.f32", ptx)) == 2


@pytest.mark.plugin("nvrtc")
def test_artifact_of_a_gpu_pipe_needs_no_gpu():
    """``artifact()`` with ``variant=None`` picks the GPU's default kernel without
    resolving the pipe's target (it used to fail with NoTargetError without a GPU)."""
    u = np.zeros((9, 23, 3), np.uint8)
    for ops, variant in (
            ([fkl.TensorRead(), fkl.Cast("float32"), fkl.Mul(0.5), fkl.TensorWrite()],
             "flat"),
            ([fkl.TensorRead(), fkl.ColorConversion("BGR2RGB"), fkl.TensorWrite()], "grid"),
            ([fkl.TensorRead(), fkl.Resize(4, 4), fkl.TensorWrite()], "grid")):
        pipe = fkl.compose(*ops, target="gpu")
        art = pipe.artifact(u, arch="sm_90", compiler="nvrtc")
        assert art.kind == "cubin" and art.data[:4] == b"\x7fELF"
        assert "__global__" in pipe.source(u)
        assert pipe._target is None  # nothing looked for a GPU
        assert pipe.variant(pixtype(pipe, u), "gpu") == variant
