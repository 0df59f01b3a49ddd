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


# -- divergent pipes, circular tensors, batch pipes (issue 17) ---------------------------
# Each is checked against NumPy (not against its own unchecked form), then shown to report
# an access past an array whose extent the checks receive was shrunk on purpose: the
# error names the pipe, the parameter (and what it holds), the index and the bound.


def _shrink(monkeypatch: pytest.MonkeyPatch, module: object, ndim: int) -> None:
    """The extents ``module`` gives debug mode's checks halved for its ``ndim``-D arrays."""
    real = module.extent_bytes  # type: ignore[attr-defined]
    monkeypatch.setattr(module, "extent_bytes",
                        lambda v: real(v) // 2 if len(v.shape) == ndim else real(v))


def _cubin(ir: object) -> None:
    """The checked kernel also builds for the GPU (NVRTC, sm_90; no GPU needed)."""
    if not has_plugin("nvrtc"):
        return
    from thork_core import CudaRenderer, compile_artifact, plugins
    from thork_core.plugin import GpuTarget

    source = CudaRenderer().render(ir)
    assert "thork_at(" in source  # the accesses go through the checked address
    comp = plugins().compiler("nvrtc", GpuTarget())
    art, _, _ = compile_artifact(ir, source, comp, "cubin", "sm_90")
    assert art.data[:4] == b"\x7fELF"


def _divergent(target: str, **kw: object) -> fkl.Divergent:
    return fkl.compose_divergent(
        [0, 1, 0, 1, 0],
        [fkl.TensorRead(), fkl.Mul(2.0), fkl.Cast("float32"), fkl.TensorWrite()],
        [fkl.TensorRead(), fkl.Crop((2, 1, 5, 4)), fkl.TensorWrite()], target=target, **kw)


def test_debug_divergent_pipe_matches_numpy(target: str, rng: np.random.Generator) -> None:
    div = _divergent(target, debug=True)
    assert div.debug and not _divergent(target, debug=False).debug
    x = rng.integers(0, 256, size=(5, int(rng.integers(9, 20)) | 1, 13, 3), dtype=np.uint8)
    for _ in range(2):  # the first call and the planned one
        a, b = div(x)
        np.testing.assert_array_equal(a, x[[0, 2, 4]].astype(np.float32) * 2)
        np.testing.assert_array_equal(b, x[[1, 3], 1:5, 2:7])
    built = next(iter(div._built.values()))
    assert built.lowered.ir.debug_sites
    _cubin(built.lowered.ir)


@pytest.mark.parametrize("shrunk", ["plane map", "input"])
def test_debug_divergent_pipe_reports_an_access_past_its_array(
        target: str, monkeypatch: pytest.MonkeyPatch, shrunk: str) -> None:
    import fkl._divergent as divergent

    _shrink(monkeypatch, divergent, 1 if shrunk == "plane map" else 4)  # map 1-D, batch 4-D
    div = _divergent(target, debug=True)
    x = np.zeros((5, 9, 13, 3), np.uint8)
    with pytest.raises(BoundsError) as info:
        div(x)
    e = info.value
    assert str(e).startswith("<fkl divergent pipe: 2 chains over 5 planes>")
    if shrunk == "plane map":  # [chain of each plane, rank of each plane]: 10 entries
        # Every plane reads its rank at map[z + 5]: past the 5 entries left.
        assert e.array == "in2" and e.hi == 5 and 5 <= e.index < 10
        assert "parameter 'in2' = the plane map" in str(e)
    else:  # chain 0's input is in0, chain 1's is in1 (neither chain has a value table)
        assert e.array in ("in0", "in1") and e.hi == x.size // 2 and e.index >= e.hi
        assert f"chain {e.array[-1]}'s input (the batch)" in str(e)
    assert f"index {e.index} is outside 0..{e.hi - 1}" in str(e)
    assert e.kernel in str(e) and e.param_index is not None


def _reference_window(frames: list[np.ndarray], batch: int) -> np.ndarray:
    """newest_first: plane 0 the newest frame, planes never filled stay 0."""
    out = np.zeros((batch, *frames[0].shape), np.float32)
    for k, f in enumerate(reversed(frames[-batch:])):
        out[k] = f.astype(np.float32) * 0.5
    return out


def test_debug_circular_tensor_matches_numpy(target: str, rng: np.random.Generator) -> None:
    w, h, batch = 13, int(rng.integers(7, 15)) | 1, 3
    ring = fkl.CircularTensor(w, h, batch=batch, out_dtype="float32", target=target,
                              debug=True)
    assert ring.debug
    frames = []
    for _ in range(batch + 1):  # fills the window, then shifts it once
        frames.append(rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8))
        ring.update(frames[-1], [fkl.Cast("float32"), fkl.Mul(0.5)])
        snap = ring.snapshot()
        snap = snap.to_host() if hasattr(snap, "to_host") else np.asarray(snap)
        np.testing.assert_array_equal(snap, _reference_window(frames, batch))
    built = next(iter(ring._built.values()))
    assert built.lowered.ir.debug_sites
    _cubin(built.lowered.ir)


@pytest.mark.parametrize("shrunk", ["frame", "window"])
def test_debug_circular_tensor_reports_an_access_past_its_array(
        target: str, monkeypatch: pytest.MonkeyPatch, shrunk: str) -> None:
    import fkl._circular as circular

    _shrink(monkeypatch, circular, 3 if shrunk == "frame" else 4)  # (H, W, C), (B, H, W, C)
    ring = fkl.CircularTensor(11, 9, batch=3, target=target, debug=True)
    frame = np.zeros((9, 11, 3), np.uint8)
    with pytest.raises(BoundsError) as info:
        ring.update(frame)
    e = info.value
    assert str(e).startswith("<fkl.CircularTensor 3 x 11x9x3 uint8 packed newest_first>")
    if shrunk == "frame":
        assert e.array == "in0" and e.hi == frame.size // 2 and e.index >= e.hi
        assert "parameter 'in0' = the frame" in str(e)
    else:  # the window read (the previous one) or written (the next one)
        assert e.array in ("in1", "out0") and e.hi == 3 * frame.size // 2
        assert e.index >= e.hi and "the window" in str(e)
    assert ring.updates == 0  # a failed update does not rotate the window


def test_debug_batch_pipe_with_per_item_values(target: str, rng: np.random.Generator,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch through one pipe, per-item factors in a value table, all checked; then the
    table's extent halved: the planes past the half read past it."""
    import fkl._call as call

    factors = [0.5, 2.0, 3.0, 0.25, 1.5]
    x = rng.random((5, 7, int(rng.integers(5, 12)) | 1, 3), dtype=np.float32)
    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(fkl.PerItem(factors)), fkl.TensorWrite(),
                       target=target, debug=True)
    want = x * np.asarray(factors, np.float32)[:, None, None, None]
    np.testing.assert_array_equal(pipe(x), want)
    np.testing.assert_array_equal(pipe(x, active_batch=3)[:3], want[:3])  # active variant
    _shrink(monkeypatch, call, 1)
    shrunk = fkl.compose(fkl.TensorRead(), fkl.Mul(fkl.PerItem(factors)), fkl.TensorWrite(),
                         target=target, debug=True)
    with pytest.raises(BoundsError) as info:
        shrunk(x)
    e = info.value
    entries = 3 * len(factors)  # the table holds each item's factor once per channel
    assert e.hi == entries // 2 and e.hi <= e.index < entries
    assert e.array == "in1" and e.param_index is not None


def test_thork_debug_makes_divergent_and_circular_checked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THORK_DEBUG", "1")
    assert _divergent("cpu").debug
    assert fkl.CircularTensor(5, 4, batch=2, target="cpu").debug
    monkeypatch.setenv("THORK_DEBUG", "0")
    assert not _divergent("cpu").debug
    assert not fkl.CircularTensor(5, 4, batch=2, target="cpu").debug
