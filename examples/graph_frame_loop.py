"""A frame loop recorded once and replayed as one graph: three fkl pipes and a kernel.

On a GPU, ``tk.graph()`` captures the launches queued on ``g.stream`` into a CUDA graph
and ``g.replay()`` is one cuGraphLaunch; ``g.rebind`` points the graph at another frame
buffer without recording again. Without a GPU the CPU target records and replays the same
launches. Usage: python examples/graph_frame_loop.py
"""

import fkl
import numpy as np
import thork as tk
from thork_core.runtime import DeviceArray, check, driver, gpu_status


@tk.jit
def threshold(x: tk.DevicePointer[tk.dt.float32], t: tk.dt.float32, n: tk.dt.int32,
              out: tk.DevicePointer[tk.dt.float32], bid: tk.Uint[tk.BlockIdx],
              tid: tk.Uint[tk.ThreadIdx], bdm: tk.Uint[tk.BlockDim]):
    i = bid * bdm + tid
    with tk.if_(i < n):
        out[i] = tk.where(x[i] > t, 1.0, 0.0)


def reference(frame: np.ndarray, t: float) -> np.ndarray:
    x = frame.astype(np.float32) / 255
    x = (x - 0.5) * 2
    x = np.abs(x)
    return (x > t).astype(np.float32)


def main() -> int:
    gpu = gpu_status()[0]
    target = "gpu" if gpu else "cpu"
    h, w = 240, 320
    n = h * w * 3
    rng = np.random.default_rng()
    frames = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for _ in range(3)]
    pipes = [
        fkl.compose(fkl.TensorRead(), fkl.Cast("float32"), fkl.Mul(1 / 255), fkl.TensorWrite(),
                    target=target),
        fkl.compose(fkl.TensorRead(), fkl.Sub(0.5), fkl.Mul(2.0), fkl.TensorWrite(),
                    target=target),
        fkl.compose(fkl.TensorRead(), fkl.Abs(), fkl.TensorWrite(), target=target),
    ]
    up = DeviceArray.from_host if gpu else (lambda a: a.copy())
    src = [up(f) for f in frames]
    tmp = [up(np.zeros((h, w, 3), np.float32)) for _ in range(4)]

    def frame(x, stream=None):
        kw = {"stream": stream} if gpu else {}
        pipes[0](x, out=tmp[0], **kw)
        pipes[1](tmp[0], out=tmp[1], **kw)
        pipes[2](tmp[1], out=tmp[2], **kw)
        threshold[(n + 255) // 256, 256](tmp[2], 0.25, n, tmp[3], target=target, **kw)

    frame(src[0])  # a first call outside the graph builds the kernels
    with tk.graph(target=target) as g:
        frame(src[0], g.stream)
    print(f"recorded {len(g)} launches on the {target}")
    ok = True
    for i in range(1, 3):  # the next frames: point the graph at the new input, replay
        g.rebind(src[i - 1], src[i])
        g.replay()
        if gpu:  # the replay is queued on g.stream: wait for it before reading back
            check(driver().cuStreamSynchronize(g.stream), "cuStreamSynchronize")
        got = tmp[3].to_host() if gpu else tmp[3]
        ok &= np.array_equal(got.reshape(h, w, 3), reference(frames[i], 0.25))
    print(f"graph frame loop: {'ok' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
