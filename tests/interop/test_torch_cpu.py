"""torch tensors in Thork kernels and fkl pipes on the CPU target, thork_torch.wrap and
custom ops (eager and under torch.compile). Runs where torch is installed (nox -s torch)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

fkl = pytest.importorskip("fkl")  # the torch extra alone (CI's suite cell) has no fkl
import thork as tk  # noqa: E402
import thork_torch  # noqa: E402
from helpers import random_array  # noqa: E402
from thork_core import ArgumentError, dt  # noqa: E402

pytestmark = pytest.mark.plugin("torch")


def _copy_kernel(d: tk.DType) -> tk.Kernel:
    @tk.jit(name=f"torch_copy_{d.name}")
    def copy(src: tk.DevicePointer[d], dst: tk.DevicePointer[d], n: tk.dt.int32,
             bid: tk.Uint[tk.BlockIdx], tid: tk.Uint[tk.ThreadIdx], bdm: tk.Uint[tk.BlockDim]):
        i = bid * bdm + tid
        with tk.if_(i < n):
            dst[i] = src[i]

    return copy


@tk.jit
def axpb(x: tk.DevicePointer[tk.dt.float32], a: tk.dt.float32, n: tk.dt.int32,
         out: tk.DevicePointer[tk.dt.float32], bid: tk.Uint[tk.BlockIdx],
         tid: tk.Uint[tk.ThreadIdx], bdm: tk.Uint[tk.BlockDim]):
    i = bid * bdm + tid
    with tk.if_(i < n):
        out[i] = x[i] * a + 1.0


def _torch_of(a: np.ndarray):  # type: ignore[no-untyped-def]
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


def _numpy_of(t):  # type: ignore[no-untyped-def]
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(dt.bfloat16.numpy)
    return t.numpy()


@pytest.mark.parametrize("name", [d.name for d in tk.dt])
def test_every_dtype_goes_into_a_kernel_zero_copy(name, rng):
    d = getattr(dt, name)
    n = 301
    src_np = random_array(rng, n, d.numpy)
    src = _torch_of(src_np)
    dst = torch.empty(n, dtype=thork_torch.to_torch(d))
    # poison: bytes no correct copy writes (src's values differ somewhere with certainty)
    dst.view(torch.uint8).fill_(0xA5)
    _copy_kernel(d)[3, 128](src, dst, n, target="cpu")
    np.testing.assert_array_equal(_numpy_of(dst).view(np.uint8), src_np.view(np.uint8))


def test_adapter_view_is_zero_copy_and_strides_in_bytes():
    t = torch.arange(24, dtype=torch.float16).reshape(4, 6)
    v = thork_torch.tensor_view(t[:, 1:])
    assert v.ptr == t.data_ptr() + 2 and v.strides == (12, 2) and not v.contiguous
    assert v.dtype == dt.float16 and v.device == "cpu" and v.shape == (4, 5)


def test_strided_tensor_is_refused_naming_the_parameter():
    x = torch.zeros(64, 2)[:, 0]
    with pytest.raises(ArgumentError, match="C-contiguous"):
        axpb[1, 64](x, 1.0, 64, torch.zeros(64), target="cpu")


def test_unsupported_dtype_is_a_clear_error():
    with pytest.raises(ArgumentError, match="complex64 has no Thork equivalent"):
        axpb[1, 64](torch.zeros(64, dtype=torch.complex64), 1.0, 64, torch.zeros(64),
                    target="cpu")


def test_pipe_takes_cpu_tensors_and_returns_numpy_by_default(rng):
    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.Add(1.0), fkl.TensorWrite(),
                       target="cpu")
    img_np = rng.random((37, 53, 3), dtype=np.float32)
    r = pipe(torch.from_numpy(img_np))
    assert isinstance(r, np.ndarray)
    np.testing.assert_allclose(r, img_np * 2 + 1, rtol=1e-6)


def test_wrap_like_input_returns_tensors_sharing_thork_memory(rng):
    pipe = fkl.compose(fkl.TensorRead(), fkl.Cast("float32"), fkl.Mul(0.5),
                       fkl.TensorWrite())  # default target: the CPU copy runs CPU tensors
    img_np = rng.integers(0, 255, (29, 41, 3), dtype=np.uint8)
    r = thork_torch.wrap(pipe, output="like_input")(torch.from_numpy(img_np))
    assert isinstance(r, torch.Tensor) and r.dtype == torch.float32
    np.testing.assert_allclose(r.numpy(), img_np.astype(np.float32) * 0.5)


def test_wrap_writes_out_tensor(rng):
    pipe = fkl.compose(fkl.TensorRead(), fkl.Sub(3.0), fkl.TensorWrite(), target="cpu")
    x = torch.from_numpy(rng.standard_normal((17, 19), dtype=np.float32))
    out = torch.full((17, 19), float("nan"))
    got = thork_torch.wrap(pipe)(x, out=out)
    assert got is out
    np.testing.assert_allclose(out.numpy(), x.numpy() - 3.0, rtol=1e-6)


def test_wrap_rejects_bad_output_option_and_mixed_devices():
    with pytest.raises(ArgumentError, match="output must be one of"):
        thork_torch.wrap(axpb[1, 1], output="torch")
    with pytest.raises(ArgumentError, match="out= is for fkl pipes"):
        thork_torch.wrap(axpb[1, 64])(torch.zeros(4), 1.0, 4, torch.zeros(4),
                                      out=torch.zeros(4))


def test_custom_op_of_a_kernel_runs_eagerly(rng):
    op = thork_torch.custom_op(
        "thork_test::axpb", axpb, config=lambda x, a, n: ((n + 127) // 128, 128),
        outputs=lambda x, a, n: [(x.shape, x.dtype)])
    assert "Tensor x, float a, int n" in str(op._opoverload._schema)
    x = torch.from_numpy(rng.standard_normal(1001, dtype=np.float32))
    y = torch.ops.thork_test.axpb(x, 2.5, 1001)
    np.testing.assert_allclose(y.numpy(), x.numpy() * 2.5 + 1, rtol=1e-6)


def test_custom_op_of_a_pipe_has_fake_shapes(rng):
    pipe = fkl.compose(fkl.TensorRead(), fkl.Resize(11, 7), fkl.TensorWrite(), target="cpu")
    thork_torch.custom_op("thork_test::resize", pipe)
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        fake = torch.ops.thork_test.resize(torch.empty(40, 30, 3, dtype=torch.uint8))
    x = torch.from_numpy(rng.integers(0, 255, (40, 30, 3), dtype=np.uint8))
    ref = pipe(x.numpy())  # what the pipe itself makes: (7, 11, 3) float32 (fkl's Resize)
    assert tuple(fake.shape) == ref.shape == (7, 11, 3)
    assert fake.dtype == thork_torch.to_torch(ref.dtype)
    np.testing.assert_array_equal(torch.ops.thork_test.resize(x).numpy(), ref)


def test_custom_op_of_a_pipe_follows_each_input_shape_and_dtype(rng):
    """The op remembers output shapes per input signature: a new size or dtype (seen
    before or not) gets its own shape and dtype, never the previous call's."""
    pipe = fkl.compose(fkl.TensorRead(), fkl.Cast("float32"), fkl.Mul(0.5),
                       fkl.TensorSplit(), target="cpu")
    thork_torch.custom_op("thork_test::half_chw", pipe)
    for h, w, np_t in ((9, 13, np.uint8), (17, 5, np.uint8), (9, 13, np.float32),
                     (9, 13, np.uint8)):
        x_np = (rng.integers(0, 255, (h, w, 3)) if np_t == np.uint8 else
                rng.standard_normal((h, w, 3))).astype(np_t)
        got = torch.ops.thork_test.half_chw(torch.from_numpy(x_np))
        assert tuple(got.shape) == (3, h, w) and got.dtype == torch.float32
        np.testing.assert_allclose(got.numpy(), x_np.astype(np.float32).transpose(2, 0, 1)
                                   * 0.5, rtol=1e-6)


def test_custom_op_of_a_pipe_from_8_threads(rng):
    """Threads calling one op with different input sizes at once each get their own
    output shape and values (the op's remembered output shapes are shared)."""
    from concurrent.futures import ThreadPoolExecutor

    pipe = fkl.compose(fkl.TensorRead(), fkl.Cast("float32"), fkl.Mul(2.0),
                       fkl.TensorSplit(), target="cpu")
    thork_torch.custom_op("thork_test::double_chw", pipe)
    inputs = [rng.integers(0, 255, (5 + i % 3, 7 + i % 4, 3)).astype(np.uint8)
              for i in range(32)]

    def run(x_np: np.ndarray) -> np.ndarray:
        return torch.ops.thork_test.double_chw(torch.from_numpy(x_np)).numpy()

    with ThreadPoolExecutor(8) as pool:
        outs = list(pool.map(run, inputs))
    for x_np, got in zip(inputs, outs):
        np.testing.assert_array_equal(got, x_np.astype(np.float32).transpose(2, 0, 1) * 2)


def test_custom_op_name_must_have_a_namespace():
    with pytest.raises(ArgumentError, match="namespace::op"):
        thork_torch.custom_op("noname", axpb[1, 1])


def test_custom_ops_inside_torch_compile_fullgraph(rng):
    """torch.compile(fullgraph=True) raises on any graph break: passing means the ops
    traced through their fake implementations. Needs a C++ compiler (Inductor, CPU)."""
    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.Add(1.0), fkl.TensorWrite(),
                       target="cpu")
    thork_torch.custom_op("thork_test::affine_pipe", pipe)
    thork_torch.custom_op("thork_test::axpb2", axpb[8, 128])

    @torch.compile(fullgraph=True)
    def f(x):  # type: ignore[no-untyped-def]
        y = torch.ops.thork_test.affine_pipe(x * 3)
        return torch.ops.thork_test.axpb2(y.reshape(-1), 0.5, y.numel()) - 1

    x_np = rng.standard_normal((31, 33), dtype=np.float32)[:, :31].copy()  # 961 elements
    got = f(torch.from_numpy(x_np))
    np.testing.assert_allclose(got.numpy().reshape(31, 31), (x_np * 3 * 2 + 1) * 0.5,
                               rtol=1e-5, atol=1e-6)
