"""torch views (crops, channel subsets, slices) read and written in place by fkl pipes
(issue 18: strided arrays). Runs where torch is installed (nox -s torch); the GPU cases
where a GPU is visible too."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

fkl = pytest.importorskip("fkl")  # the torch extra alone (CI's suite cell) has no fkl

pytestmark = pytest.mark.plugin("torch")


def _base() -> torch.Tensor:
    g = torch.Generator().manual_seed(int(np.random.default_rng().integers(1 << 30)))
    return torch.rand((2, 11, 17, 4), generator=g, dtype=torch.float32)


def test_torch_cpu_views_in_place() -> None:
    base = _base()
    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.Add(1.0), fkl.TensorWrite(),
                       target="cpu")
    for view in (base[1, 2:9, 3:14, :3], base[0, ::2, :, 1], base[:, 1:10, 2:15]):
        assert not view.is_contiguous()
        want = view.numpy() * np.float32(2) + np.float32(1)
        np.testing.assert_allclose(pipe(view), want, rtol=1e-6)
    canvas = torch.full((2, 11, 17, 4), -7.0)
    src = base[1, 2:9, 3:14, :3].contiguous().numpy()
    pipe(src, out=canvas[0, 1:8, 2:13, 1:4])
    np.testing.assert_allclose(canvas[0, 1:8, 2:13, 1:4].numpy(),
                               src * np.float32(2) + np.float32(1), rtol=1e-6)
    assert (canvas[0, :, :, 0] == -7).all() and (canvas[1] == -7).all()


@pytest.mark.gpu
def test_torch_cuda_views_in_place() -> None:
    base = _base()
    dev = base.cuda()
    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.TensorSplit(), target="gpu")
    for _ in range(2):  # the second call takes the hot path, keyed by the strides
        out = pipe(dev[1, 2:9, 3:14, :3])
        torch.cuda.synchronize()
        want = (base[1, 2:9, 3:14, :3].numpy() * np.float32(2)).transpose(2, 0, 1)
        np.testing.assert_allclose(out.to_host(), want, rtol=1e-6)
    canvas = torch.zeros((20, 30, 3), device="cuda")
    write = fkl.compose(fkl.TensorRead(), fkl.Mul(3.0), fkl.TensorWrite(), target="gpu")
    write(dev[0, :, :, :3], out=canvas[4:15, 5:22])
    torch.cuda.synchronize()
    np.testing.assert_allclose(canvas[4:15, 5:22].cpu().numpy(),
                               base[0, :, :, :3].numpy() * np.float32(3), rtol=1e-6)
    assert float(canvas[:4].abs().sum()) == 0.0
