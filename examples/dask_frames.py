"""Scale-out on Dask: an fkl preprocessing pipe mapped over a stream of frames by the
workers of a ``distributed.LocalCluster``, checked against a single-process run and NumPy.

With GPUs, one worker process per GPU, each running its frames on its own device
(``pipe(frame, device=k)``); without one, two workers on the CPU target. The pipe is sent
to the workers once (``client.scatter``: pipes and kernels pickle as what makes them, and
each worker builds its kernel on first use, from the disk cache or an ahead-of-time
bundle: docs/scale-out.md). Needs ``distributed``
(``pip install --find-links wheelhouse "thork[dask]"``).
Usage: python examples/dask_frames.py [--frames N]
"""

from __future__ import annotations

import argparse
import sys

import fkl
import numpy as np
from thork_core import plugins
from thork_core.runtime import device_count, gpu_status

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def make_pipe(target: str) -> fkl.Pipe:
    """uint8 BGR HWC -> RGB, scaled, normalized, planar float CHW: one kernel."""
    return fkl.compose(fkl.TensorRead(), fkl.ColorConversion("BGR2RGB"), fkl.Mul(1 / 255.0),
                       fkl.Sub(MEAN), fkl.Div(STD), fkl.TensorSplit(), target=target)


def preprocess(pipe: fkl.Pipe, frame: np.ndarray, gpus: int) -> np.ndarray:
    """One task: run ``pipe`` on ``frame`` on this worker's GPU (worker k uses device
    k mod ``gpus``), or on the CPU target when ``gpus`` is 0."""
    if not gpus:
        return pipe(frame)
    from distributed import get_worker

    return pipe(frame, device=int(get_worker().name) % gpus)


def reference(frame: np.ndarray) -> np.ndarray:
    rgb = frame[..., ::-1].astype(np.float32) * np.float32(1 / 255.0)
    return ((rgb - np.float32(MEAN)) / np.float32(STD)).transpose(2, 0, 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=12)
    args = parser.parse_args()
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        print("distributed is not installed (pip install --find-links wheelhouse "
              "'thork[dask]'); nothing to run")
        return 0
    target = plugins().target(None).name
    gpus = device_count() if target == "gpu" and gpu_status()[0] else 0
    h, w = (720, 1280) if gpus else (181, 321)
    rng = np.random.default_rng()
    frames = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for _ in range(args.frames)]
    pipe = make_pipe(target)
    local = [pipe(f) for f in frames]  # the single-process run

    workers = max(gpus, 2)
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        remote_pipe = client.scatter(pipe, broadcast=True)
        futures = client.map(preprocess, [remote_pipe] * len(frames), frames,
                             [gpus] * len(frames))
        results = client.gather(futures)
    for got, mine, frame in zip(results, local, frames):
        np.testing.assert_allclose(got, mine, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got, reference(frame), rtol=1e-5, atol=1e-5)
    where = f"{gpus} GPU(s)" if gpus else "the cpu target"
    print(f"{len(frames)} frames of {w}x{h} on {workers} Dask workers ({where}) match the "
          "single-process run and NumPy")
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
