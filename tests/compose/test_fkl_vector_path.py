"""fkl's flat (vectorized, "thread fusion") kernel: several pixels per thread with 2/4/8-wide
vector accesses, a scalar tail, and the 2-D kernel as the fallback for misaligned arrays.

Every result is checked against NumPy and, bit for bit, against the general 2-D kernel
(``pipe.flat = False``) and the channel-folded flat kernel (``pipe.fold = True``, where the
chain folds; tests/compose/test_fkl_folding.py has the rest), on odd sizes (widths and pixel counts that are not multiples of
the vector width), 1-4 channels, uint8/float32 (and a few other dtypes), batches and 1-D
vectors. Outputs are poisoned, and written inside larger poisoned buffers whose guard
elements must stay untouched.
"""

from __future__ import annotations

import re

import fkl
import numpy as np
import pytest
from helpers import poisoned, random_array
from thork_core import ArgumentError, CudaRenderer

pytestmark = pytest.mark.plugin("compose")

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def six_ops() -> list:
    return [fkl.Mul(1.5), fkl.Add(0.25), fkl.Mul(2.0), fkl.Sub(0.5), fkl.Max(-1.0),
            fkl.Min(4.0)]


def six_ref(x: np.ndarray) -> np.ndarray:
    f = np.float32
    return np.minimum(np.maximum((x * f(1.5) + f(0.25)) * f(2.0) - f(0.5), f(-1.0)), f(4.0))


def guarded(shape: tuple[int, ...], dtype, offset: int = 0, guard: int = 37):
    """A poisoned output of ``shape`` inside a larger poisoned buffer that starts 16-byte
    aligned: ``offset`` elements of guard before it (misaligning it when the offset is
    not a multiple of 16 bytes), ``guard`` after it. Returns (out, buffer, n)."""
    n = int(np.prod(shape))
    d = np.dtype(dtype)
    # Over-allocate, then start the buffer at a 16-byte boundary.
    raw = poisoned(n + offset + guard + 16, d)
    skip = (-raw.__array_interface__["data"][0] % 16) // d.itemsize
    buf = raw[skip:skip + n + offset + guard]
    return buf[offset:offset + n].reshape(shape), buf, n


def guards_intact(buf: np.ndarray, offset: int, n: int) -> bool:
    ref = poisoned(1, buf.dtype)[0]
    rest = np.concatenate([buf[:offset], buf[offset + n:]])
    return bool(np.all(rest != rest) if np.isnan(ref) else np.all(rest == ref))


def used_flat(pipe) -> bool:
    """Whether the pipe's (single) call ran the flat kernel."""
    return [p.built.lowered.block for p in pipe._plans.values()] == [(256, 1, 1)]


def both(ops: list, *inputs: np.ndarray, out=None, target: str = "cpu"):
    """The pipe's result with the flat kernel keeping the pixels' channels, with the
    2-D kernel and with the channel-folded flat kernel (the three must agree bit for
    bit; the last only where the chain folds), and the pipe."""
    pipe = fkl.compose(*ops, target=target)
    pipe.flat = True  # the GPU's default may be the 2-D kernel: ask for the flat one
    pipe.fold = False  # ... in the layout of this file (folding is on by default on GPUs)
    flat = pipe(*inputs, out=out)
    others = []
    grid = fkl.compose(*ops, target=target)
    grid.flat = False
    others.append(grid)
    folded = fkl.compose(*ops, target=target)
    folded.flat, folded.fold = True, True
    if folded.flat_spec(folded._pixtype(list(inputs) or None, None, 1)).folded:
        others.append(folded)
    for other in others:
        ref = other(*inputs)
        for a, b in zip(flat if isinstance(flat, tuple) else (flat,),
                        ref if isinstance(ref, tuple) else (ref,), strict=True):
            assert a.shape == b.shape and a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)  # NaN == NaN here: bit-identical results
    return flat, pipe


# -- the 6-op chain and plain copies on odd shapes -----------------------------------------
SHAPES = [(1, 1), (1, 3), (1, 5), (7, 13), (13, 21), (3, 1), (16, 16), (5, 129)]


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
@pytest.mark.parametrize("hw", SHAPES)
def test_six_op_chain_float32(target, rng, channels, hw):
    shape = (*hw, channels) if channels > 1 else hw
    x = random_array(rng, shape, np.float32)
    out, buf, n = guarded(shape, np.float32)
    got, pipe = both([fkl.TensorRead(), *six_ops(), fkl.TensorWrite()], x, out=out,
                     target=target)
    assert got is out
    np.testing.assert_allclose(out, six_ref(x), rtol=1e-6, atol=1e-6)
    assert guards_intact(buf, 0, n)
    assert used_flat(pipe)


@pytest.mark.parametrize("dtype", ["uint8", "float32", "uint16", "int32", "float16",
                                   "float64"])
@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_copy_every_dtype_and_channel_count(target, rng, dtype, channels):
    for hw in ((1, 1), (3, 7), (11, 17), (2, 64)):
        shape = (*hw, channels) if channels > 1 else hw
        x = random_array(rng, shape, dtype)
        out, buf, n = guarded(shape, dtype)
        got, _ = both([fkl.TensorRead(), fkl.TensorWrite()], x, out=out, target=target)
        np.testing.assert_array_equal(got, x)
        assert guards_intact(buf, 0, n)


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_uint8_in_float32_out(target, rng, channels):
    shape = (9, 23, channels) if channels > 1 else (9, 23)
    x = random_array(rng, shape, np.uint8)
    ops = [fkl.TensorRead(), fkl.Cast("float32"), fkl.Mul(1 / 255.0), fkl.Sub(0.5),
           fkl.TensorWrite()]
    out, buf, n = guarded(shape, np.float32)
    got, _ = both(ops, x, out=out, target=target)
    np.testing.assert_allclose(got, x.astype(np.float32) * np.float32(1 / 255.0) -
                               np.float32(0.5), rtol=1e-6, atol=1e-6)
    assert guards_intact(buf, 0, n)
    # And back: float32 -> saturated uint8 (P is set by the uint8 side).
    y = random_array(rng, shape, np.float32) * 100
    got, _ = both([fkl.TensorRead(), fkl.SaturateCast("uint8"), fkl.TensorWrite()], y,
                  target=target)
    np.testing.assert_array_equal(got, np.clip(np.rint(y), 0, 255).astype(np.uint8))


def test_batches_and_vectors(target, rng):
    for shape in ((3, 5, 7, 3), (2, 1, 1, 2), (4, 3, 5), (5, 2, 9, 4)):
        x = random_array(rng, shape, np.float32)
        got, _ = both([fkl.TensorRead(batch=len(shape) == 3), *six_ops(), fkl.TensorWrite()],
                      x, target=target)
        np.testing.assert_allclose(got, six_ref(x), rtol=1e-6, atol=1e-6)
    for n in (1, 3, 4, 5, 17, 1027):
        v = random_array(rng, (n,), np.float32)
        out, buf, m = guarded((n,), np.float32)
        got, _ = both([fkl.TensorRead(), *six_ops(), fkl.TensorWrite()], v, out=out,
                      target=target)
        assert got.shape == (n,)
        np.testing.assert_allclose(got, six_ref(v), rtol=1e-6, atol=1e-6)
        assert guards_intact(buf, 0, m)
        u = random_array(rng, (n,), np.uint8)
        got, _ = both([fkl.TensorRead(), fkl.Add(3), fkl.TensorWrite()], u, target=target)
        np.testing.assert_array_equal(got, u.astype(np.int32) + 3)


# -- planar and multiple outputs, dual reads, constants, loops -----------------------------
def test_split_writes(target, rng):
    for shape in ((9, 23, 3), (8, 16, 3), (2, 4, 6, 3), (3, 5, 7, 4), (2, 4, 4, 2)):
        x = random_array(rng, shape, np.uint8)
        batch = len(shape) == 4
        axes = (0, 3, 1, 2) if batch else (2, 0, 1)
        ops = [fkl.ColorConversion("BGR2RGB")] if shape[-1] == 3 else []
        ref = x[..., ::-1] if ops else x
        norm = [fkl.Cast("float32"), fkl.Mul(1 / 255.0)]
        ref_f = ref.astype(np.float32) * np.float32(1 / 255.0)
        split, _ = both([fkl.TensorRead(), *ops, *norm, fkl.TensorSplit()], x, target=target)
        np.testing.assert_array_equal(split, ref_f.transpose(axes))
        tsplit, _ = both([fkl.TensorRead(), *ops, fkl.TensorTSplit()], x, target=target)
        t_axes = (3, 0, 1, 2) if batch else (2, 0, 1)
        np.testing.assert_array_equal(tsplit, ref.transpose(t_axes))
        planes, _ = both([fkl.TensorRead(), *ops, fkl.SplitWrite()], x, target=target)
        for k, p in enumerate(planes):
            np.testing.assert_array_equal(p, ref[..., k])


def test_dnn_normalize_to_chw(target, rng):
    """The bench's u8 HWC -> normalized f32 CHW chain, poisoned and guarded."""
    for h, w in ((8, 24), (9, 23), (1, 1), (4, 2)):
        x = random_array(rng, (h, w, 3), np.uint8)
        out, buf, n = guarded((3, h, w), np.float32)
        ops = [fkl.TensorRead(), fkl.ColorConversion("BGR2RGB"), fkl.Mul(1 / 255.0),
               fkl.Sub(MEAN), fkl.Div(STD), fkl.TensorSplit()]
        got, _ = both(ops, x, out=out, target=target)
        ref = (x[..., ::-1] * np.float32(1 / 255.0) - np.float32(MEAN)) / np.float32(STD)
        np.testing.assert_allclose(got, ref.transpose(2, 0, 1), rtol=1e-5, atol=1e-5)
        assert guards_intact(buf, 0, n)


def test_mid_write_dual_read_read_set_static_loop(target, rng):
    x = random_array(rng, (7, 11, 3), np.float32)
    (mid, final), _ = both([fkl.TensorRead(), fkl.Mul(2.0), fkl.MidWrite(),
                            fkl.ColorConversion("RGB2GRAY"), fkl.TensorWrite()], x,
                           target=target)
    np.testing.assert_array_equal(mid, x * np.float32(2.0))
    assert final.shape == (7, 11)
    a, b = random_array(rng, (5, 13), np.uint8), random_array(rng, (5, 13), np.uint8)
    got, _ = both([fkl.DualRead(), fkl.AbsDiff(), fkl.TensorWrite()], a, b, target=target)
    np.testing.assert_array_equal(got, np.abs(a.astype(np.int32) - b.astype(np.int32)))
    got, _ = both([fkl.ReadSet([1.0, 2.0], (3, 5, 7, 2)), fkl.Add(0.5), fkl.TensorWrite()],
                  target=target)
    np.testing.assert_array_equal(got, np.broadcast_to(np.float32([1.5, 2.5]), (3, 5, 7, 2)))
    got, pipe = both([fkl.TensorRead(), fkl.StaticLoop(fkl.Add(0.5), 9), fkl.TensorWrite()],
                     x, target=target)
    ref = x.copy()
    for _ in range(9):
        ref = ref + np.float32(0.5)
    np.testing.assert_array_equal(got, ref)
    cuda = CudaRenderer(line_directives=False).render(pipe.lowered(pipe._pixtype(x, None, 1)).ir)
    assert cuda.count("for (int") == 2  # group and tail: one loop each, not one per pixel


# -- alignment: misaligned arrays run the 2-D kernel ----------------------------------------
def test_misaligned_arrays_fall_back(target, rng):
    shape = (5, 9, 3)
    n = int(np.prod(shape))
    x = random_array(rng, shape, np.float32)
    pipe = fkl.compose(fkl.TensorRead(), *six_ops(), fkl.TensorWrite(), target=target)
    pipe.flat = True
    pipe(x)
    builds = fkl.stats()["builds"]
    # A misaligned output (4 bytes past a 16-byte boundary): same answer, the grid
    # variant is built once, the guards hold.
    for offset in (1, 2, 3, 4, 1):
        out, buf, _ = guarded(shape, np.float32, offset=offset)
        assert pipe(x, out=out) is out
        np.testing.assert_allclose(out, six_ref(x), rtol=1e-6, atol=1e-6)
        assert guards_intact(buf, offset, n)
    assert fkl.stats()["builds"] <= builds + 1  # at most the grid variant (maybe cached)
    (plan,) = pipe._plans.values()
    assert plan.built.lowered.block == (256, 1, 1)
    assert plan.fallback is not None and plan.fallback.built.lowered.block == (32, 8, 1)
    builds = fkl.stats()["builds"]
    # A misaligned input (a view one element into a larger array).
    big = random_array(rng, (n + 1,), np.float32)
    xv = big[1:].reshape(shape)
    assert xv.__array_interface__["data"][0] % 16
    np.testing.assert_allclose(pipe(xv), six_ref(xv), rtol=1e-6, atol=1e-6)
    assert fkl.stats()["builds"] == builds
    # Aligned again: the flat kernel (its result lands in a fresh, poisoned output).
    out, buf, _ = guarded(shape, np.float32, offset=4)
    pipe(x, out=out)
    np.testing.assert_allclose(out, six_ref(x), rtol=1e-6, atol=1e-6)
    assert guards_intact(buf, 4, n)
    # uint8: 8-byte vectors need 8-byte (here: 16-byte) alignment.
    u = random_array(rng, (6, 10, 3), np.uint8)
    upipe = fkl.compose(fkl.TensorRead(), fkl.Add(1), fkl.TensorWrite(), target=target)
    upipe.flat = True
    for offset in (0, 1, 3, 8):
        raw = random_array(rng, (u.size + 32,), np.uint8)
        skip = -raw.__array_interface__["data"][0] % 16
        uv = raw[skip + offset:skip + offset + u.size].reshape(u.shape)
        np.testing.assert_array_equal(upipe(uv), uv.astype(np.int32) + 1)


def test_planes_that_are_not_vector_aligned_use_the_grid_kernel(target, rng):
    # A 3x3 plane is 9 pixels: its channel planes do not start on a float4 boundary.
    x = random_array(rng, (2, 3, 3, 3), np.float32)
    pipe = fkl.compose(fkl.TensorRead(), fkl.TensorSplit(), target=target)
    np.testing.assert_array_equal(pipe(x), x.transpose(0, 3, 1, 2))
    assert not used_flat(pipe)


# -- which chains take the flat kernel, identity, generated code ---------------------------
def test_which_chains_are_flat():
    pytest.importorskip("thork_cpu")
    t3 = fkl.compose(fkl.TensorRead(), fkl.TensorWrite())._pixtype(
        np.zeros((2, 2, 3), np.float32), None, 1)
    flat = [
        (fkl.TensorRead(), *six_ops(), fkl.TensorWrite()),
        (fkl.TensorRead(), fkl.MidWrite(), fkl.TensorSplit()),
        (fkl.TensorRead(), fkl.SplitWrite()),
    ]
    grid = [
        (fkl.TensorRead(), fkl.Crop((0, 0, 1, 1)), fkl.TensorWrite()),
        (fkl.TensorRead(), fkl.Mul(2.0), fkl.Resize(4, 4), fkl.Add(1.0), fkl.TensorWrite()),
        (fkl.TensorPack(), fkl.TensorWrite()),
    ]
    for ops in flat:
        assert fkl.compose(*ops, target="cpu").variant(t3) == "flat", ops  # CPU default
        forced = fkl.compose(*ops)
        forced.flat = True
        assert forced.variant(t3) == "flat", ops
    for ops in grid:
        pipe = fkl.compose(*ops)
        pipe.flat = True  # asked for, but these chains have no flat form
        assert pipe.variant(t3) == "grid", ops
        with pytest.raises(ArgumentError, match="no flat kernel"):
            pipe.lowered(t3, "flat")
    pipe = fkl.compose(*flat[0], target="cpu")
    assert pipe.signature(t3) != pipe.signature(t3, "grid")
    pipe.flat = False
    assert pipe.variant(t3) == "grid"
    with pytest.raises(ArgumentError, match="variant"):
        pipe.lowered(t3, "wide")


def test_values_do_not_rebuild_the_flat_kernel(target, rng):
    x = random_array(rng, (7, 9, 3), np.float32)
    fkl.compose(fkl.TensorRead(), fkl.Mul(1.0), fkl.Add(0.0), fkl.TensorWrite(),
                target=target)(x)
    before = fkl.stats()["builds"]
    for a, b in ((2.0, 1.0), (-1.0, 5.0)):
        got = fkl.compose(fkl.TensorRead(), fkl.Mul(a), fkl.Add(b), fkl.TensorWrite(),
                          target=target)(x)
        np.testing.assert_allclose(got, x * np.float32(a) + np.float32(b), rtol=1e-6,
                                   atol=1e-6)
    # A new size is a new plan, not a new kernel.
    fkl.compose(fkl.TensorRead(), fkl.Mul(3.0), fkl.Add(0.0), fkl.TensorWrite(),
                target=target)(random_array(rng, (31, 5, 3), np.float32))
    assert fkl.stats()["builds"] == before


def test_thread_fusion_flag_is_kept():
    with pytest.raises(ArgumentError, match="thread_fusion"):
        fkl.compose(fkl.TensorRead(), fkl.TensorWrite(), target="cpu", thread_fusion=True)


@pytest.mark.plugin("nvrtc")
def test_ptx_has_vector_accesses():
    """NVRTC's PTX for the flat kernels has the vector accesses (other compilers may
    merge or split them: clang 16 widens the three 32-bit loads, seen on the H200)."""
    x = np.zeros((1080, 1920, 3), np.float32)
    pipe = fkl.compose(fkl.TensorRead(), *six_ops(), fkl.TensorWrite())
    pipe.flat, pipe.fold = True, False  # the unfolded layout (test_fkl_folding: folded)
    src = pipe.source(x) if pipe._resolve().name == "gpu" else ""
    ptx = pipe.artifact(x, arch="sm_90", kind="ptx", compiler="nvrtc").data
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    assert len(re.findall(r"ld\.global(?:\.nc)?\.v4\.f32", ptx)) == 3
    assert len(re.findall(r"st\.global\.v4\.f32", ptx)) == 3
    assert "thork_vec" in src or not src
    # The 2-D kernel stays scalar; both variants compile.
    grid = pipe.artifact(x, arch="sm_90", kind="ptx", variant="grid", compiler="nvrtc").data
    grid = grid.decode() if isinstance(grid, bytes) else grid
    assert ".v4." not in grid
    u = np.zeros((1080, 1920, 3), np.uint8)
    plain = fkl.compose(fkl.TensorRead(), fkl.ColorConversion("BGR2RGB"),
                        fkl.Mul(1 / 255.0), fkl.Sub(MEAN), fkl.Div(STD), fkl.TensorSplit())
    plain.flat = True  # this chain does not fold
    ptx = plain.artifact(u, arch="sm_90", kind="ptx", compiler="nvrtc").data
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    # 4 pixels per thread: three 32-bit loads of the packed bytes, a float4 per plane.
    assert len(re.findall(r"st\.global\.v4\.f32", ptx)) == 3
    assert len(re.findall(r"ld\.global(?:\.nc)?\.v4\.[us]8", ptx)) == 3
    for arch in ("sm_75", "sm_90"):
        art = plain.artifact(u, arch=arch, compiler="nvrtc")
        assert art.data[:4] == b"\x7fELF"


@pytest.mark.gpu
def test_device_arrays_hot_path_alignment(rng):
    """Device arrays go through the pre-packed hot path, which checks the addresses on
    every call: a misaligned view runs the 2-D kernel, an aligned one the flat kernel."""
    from thork_core._device_array import DeviceArray

    shape = (37, 61, 3)
    n = int(np.prod(shape))
    host = random_array(rng, shape, np.float32)
    x = fkl.DeviceBuffer.from_host(host)
    for fusion in (False, True):
        pipe = fkl.compose(fkl.TensorRead(), *six_ops(), fkl.TensorWrite(), target="gpu",
                           thread_fusion=fusion)
        backing = fkl.DeviceBuffer.from_host(poisoned((n + 64,), np.float32))
        for offset in (4, 1, 4, 3, 8):  # 16 bytes in (aligned), then misaligned, ...
            out = DeviceArray.wrap(backing.ptr + 4 * offset, shape, "float32", device=0,
                                   owner=backing)
            for _ in range(2):  # the first call plans, the second is the hot path
                assert pipe(x, out=out) is out
            full = backing.to_host()
            np.testing.assert_allclose(full[offset:offset + n].reshape(shape), six_ref(host),
                                       rtol=1e-5, atol=1e-5)
            assert np.all(np.isnan(full[:offset])) and np.all(np.isnan(full[offset + n:]))
            backing = fkl.DeviceBuffer.from_host(poisoned((n + 64,), np.float32))
        (plan,) = pipe._plans.values()
        assert plan.built.lowered.block == (256, 1, 1) and plan.fallback is not None


def test_gpu_default_is_flat_only_when_coalesced():
    """The GPU's choice (asked without a GPU): the flat kernel for channel-folded chains
    and for coalesced ones (uint8 HWC -> planar float CHW: 4 pixels, three 32-bit loads
    and one float4 per plane); the grid kernel when a thread's share of a stream spans
    several vectors (unfolded float32 x3, packed uint8 x3 -> uint8 x3)."""
    u = np.zeros((37, 53, 3), np.uint8)
    f = np.zeros((37, 53, 3), np.float32)
    cases = [
        (u, [fkl.ColorConversion("BGR2RGB"), fkl.Mul(1 / 255.0), fkl.Sub(MEAN),
             fkl.Div(STD), fkl.TensorSplit()], "flat", True),
        (u, [fkl.ColorConversion("BGR2RGB"), fkl.TensorWrite()], "grid", False),
        (f, [fkl.Mul((1.0, 2.0, 3.0)), fkl.TensorWrite()], "grid", False),
        (f, [*six_ops(), fkl.TensorWrite()], "flat", True),  # folded: 1 float4
    ]
    for x, ops, variant, coalesced in cases:
        pipe = fkl.compose(fkl.TensorRead(), *ops, target="gpu")
        t = pipe._pixtype(x, None, 1)
        assert pipe.variant(t, "gpu") == variant, ops
        assert pipe.flat_spec(t, "gpu").coalesced is coalesced, ops
        assert pipe._target is None  # decided without looking for a GPU
