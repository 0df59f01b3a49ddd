"""fkl.compose(..., debug=True) (docs/debug-mode.md): the pipe's kernel is bounds-checked
like a debug tk kernel; results equal the unchecked pipe's, and an access past an array
(here: the extents the checks receive shrunk on purpose) raises BoundsError."""

from __future__ import annotations

import fkl
import numpy as np
import pytest
from helpers import has_plugin
from thork_core import BoundsError


def _chains() -> list[list[object]]:
    return [[fkl.Mul(2.0), fkl.Add(3.0)],
            [fkl.Crop((3, 2, 11, 9)), fkl.Resize(7, 5)],
            [fkl.GaussianBlur((5, 5), 1.2)]]


@pytest.mark.parametrize("k", range(3))
def test_debug_pipe_matches_the_plain_pipe(target: str, rng: np.random.Generator,
                                           k: int) -> None:
    ops = _chains()[k]
    checked = fkl.compose(fkl.TensorRead(), *ops, fkl.TensorWrite(), target=target,
                          debug=True)
    plain = fkl.compose(fkl.TensorRead(), *ops, fkl.TensorWrite(), target=target)
    x = rng.integers(0, 256, size=(int(rng.integers(15, 40)) | 1, 23, 3), dtype=np.uint8)
    a, b = checked(x), plain(x)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(checked(x), b)  # the second (hot-path) call too
    assert checked.kernels.debug and not plain.kernels.debug
    ir = next(iter(checked._plans.values())).built.lowered.ir
    assert ir.debug_sites  # every access of the pipe's kernel has a site
    if has_plugin("nvrtc"):  # the checked kernel builds for the GPU (no GPU needed)
        from thork_core import CudaRenderer, compile_artifact, plugins
        from thork_core.plugin import GpuTarget

        comp = plugins().compiler("nvrtc", GpuTarget())
        art, _, _ = compile_artifact(ir, CudaRenderer().render(ir), comp, "cubin", "sm_90")
        assert art.data[:4] == b"\x7fELF"


def test_debug_pipe_reports_an_access_past_its_array(target: str, monkeypatch:
                                                     pytest.MonkeyPatch) -> None:
    import fkl._call as call

    real = call.extent_bytes
    monkeypatch.setattr(call, "extent_bytes", lambda v: real(v) // 2)  # the input's half
    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.TensorWrite(), target=target,
                       debug=True)
    x = np.arange(9 * 11 * 3, dtype=np.float32).reshape(9, 11, 3)
    with pytest.raises(BoundsError) as info:
        pipe(x)
    e = info.value
    assert e.param_index is not None and e.hi == x.size // 2 and e.index >= e.hi
    assert e.kernel in str(e) and e.file is not None


def test_thork_debug_makes_pipes_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THORK_DEBUG", "1")
    assert fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.TensorWrite()).kernels.debug
    monkeypatch.setenv("THORK_DEBUG", "0")
    assert not fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.TensorWrite()).kernels.debug
