"""Scale-out on Dask ``distributed``: an fkl preprocessing pipe and a thork kernel mapped over
a stream of frames by the workers of a small ``LocalCluster``, checked against a
single-process run and NumPy; and an ahead-of-time bundle serving worker processes with a
fresh cache, which then compile nothing. Skipped, saying so, where ``distributed`` is not
installed (``pip install --find-links wheelhouse "thork[dask]"``)."""

from __future__ import annotations

import os
from typing import Any

import fkl
import numpy as np
import pytest
import thork as tk
from helpers import poisoned

distributed = pytest.importorskip("distributed", reason="distributed (Dask) is not installed")

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def _pipe(target: str) -> Any:
    return fkl.compose(fkl.TensorRead(), fkl.ColorConversion("BGR2RGB"), fkl.Mul(1 / 255.0),
                       fkl.Sub(MEAN), fkl.Div(STD), fkl.TensorSplit(), target=target)


def _reference(frame: np.ndarray) -> np.ndarray:
    rgb = frame[..., ::-1].astype(np.float32) * np.float32(1 / 255.0)
    return ((rgb - np.float32(MEAN)) / np.float32(STD)).transpose(2, 0, 1)


def _frames(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    """Frames of odd, varying sizes (each size its own plan; one kernel)."""
    return [rng.integers(0, 256, (int(rng.integers(9, 60)) | 1, int(rng.integers(9, 60)) | 1,
                                  3), dtype=np.uint8) for _ in range(n)]


def _brightness_kernel() -> Any:
    """A kernel made inside a function: it travels to workers by value (cloudpickle)."""

    @tk.jit
    def brightness(out: tk.DevicePointer[tk.dt.float32], x: tk.DevicePointer[tk.dt.uint8],
                   gain: tk.dt.float32, n: tk.dt.int32, bid: tk.Uint[tk.BlockIdx],
                   tid: tk.Uint[tk.ThreadIdx], bdm: tk.Uint[tk.BlockDim]):
        i = bid * bdm + tid
        with tk.if_(i < n):
            out[i] = tk.cast(x[i], tk.dt.float32) * gain

    return brightness


def _run_pipe(pipe: Any, frame: np.ndarray) -> np.ndarray:
    return pipe(frame)


def _run_kernel(kernel: Any, frame: np.ndarray, gain: float, target: str) -> np.ndarray:
    flat = frame.reshape(-1)
    out = poisoned(flat.size, np.float32)
    kernel[(flat.size + 127) // 128, 128](out, flat, gain, flat.size, target=target)
    return out


def test_pipe_and_kernel_over_frames_on_a_local_cluster(target, rng):
    frames = _frames(rng, 8)
    pipe = _pipe(target)
    kernel = _brightness_kernel()
    gain = float(np.float32(rng.uniform(0.5, 2)))
    local = [pipe(f) for f in frames]  # the single-process run
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        remote = client.scatter(pipe, broadcast=True)
        piped = client.gather(client.map(_run_pipe, [remote] * len(frames), frames))
        scaled = client.gather(client.map(_run_kernel, [kernel] * len(frames), frames,
                                          [gain] * len(frames), [target] * len(frames)))
    for got, mine, frame in zip(piped, local, frames):
        np.testing.assert_allclose(got, mine, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got, _reference(frame), rtol=1e-5, atol=1e-5)
    for got, frame in zip(scaled, frames):
        np.testing.assert_allclose(got, frame.reshape(-1).astype(np.float32)
                                   * np.float32(gain), rtol=1e-6)


def _in_worker(pipe: Any, frame: np.ndarray) -> tuple[np.ndarray, dict[str, int], int]:
    """Run the pipe in a worker process; what it built there and which process it was."""
    from thork_core.build import build_stats

    return pipe(frame), build_stats(), os.getpid()


@pytest.mark.plugin("cpu")
def test_a_bundle_serves_dask_worker_processes_without_compiling(tmp_path, monkeypatch, rng):
    pipe = _pipe("cpu")
    frames = _frames(rng, 6)
    local = [pipe(f) for f in frames]
    from thork_core.build import make_bundle

    bundle = tmp_path / "bundle"
    made = make_bundle([(pipe, (frames[0],))], str(bundle), [("cpu", None)])
    assert made["entries"] >= 1
    # Workers start with an empty cache of their own and the bundle named (and the
    # Python launcher: a fresh cache would otherwise build the native launch module
    # first, which is Thork's own C extension, not a kernel, and slow on CI's 2 cores).
    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path / "worker-cache"))
    monkeypatch.setenv("THORK_LAUNCHER", "python")
    monkeypatch.setenv("THORK_CACHE_BUNDLE", str(bundle))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        remote = client.scatter(pipe, broadcast=True)
        out = client.gather(client.map(_in_worker, [remote] * len(frames), frames))
        pids = set(client.run(os.getpid).values())
    assert os.getpid() not in pids  # real worker processes
    for (got, _, _), mine, frame in zip(out, local, frames):
        np.testing.assert_allclose(got, mine, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got, _reference(frame), rtol=1e-5, atol=1e-5)
    last: dict[int, dict[str, int]] = {}
    for _, stats, pid in out:
        last[pid] = stats  # each worker's counters after its last task
    assert set(last) <= pids and last
    for pid, stats in last.items():
        assert stats["compiles"] == 0, f"worker {pid} compiled: {stats}"
        assert stats["bundle"] >= 1, f"worker {pid} did not use the bundle: {stats}"
