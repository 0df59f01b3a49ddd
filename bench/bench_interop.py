"""Interop bench: graph replay against cuGraphLaunch from C, a 5-pipe frame replayed
against 5 calls, an fkl pipe as a torch custom op inside torch.compile against torch eager
and torch.compile of the same preprocessing, and the torch-tensor round trip.

Usage: python bench/bench_interop.py [--out DIR] [--quick]  (writes DIR/bench_interop.json)
GPU rows need a GPU (torch/CuPy rows need those packages); the CPU rows run anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("THORK_CACHE_DIR", tempfile.mkdtemp(prefix="thork-bench-interop-"))

import fkl  # noqa: E402
import numpy as np  # noqa: E402
import thork as tk  # noqa: E402

ROWS: list[dict[str, Any]] = []
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def row(group: str, name: str, value: float, unit: str, note: str = "") -> None:
    ROWS.append({"group": group, "name": name, "value": value, "unit": unit, "note": note})
    print(f"  {group:<12} {name:<44} {value:10.2f} {unit:<6} {note}", flush=True)


def burst_us(fn: Callable[[], Any], sync: Callable[[], Any], rounds: int, k: int = 200
             ) -> float:
    """Median host microseconds per call over ``rounds`` bursts of ``k`` calls, each burst
    started from an idle GPU (``sync`` between bursts), as the C floor measures."""
    for _ in range(20):
        fn()
    sync()
    per = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(k):
            fn()
        per.append((time.perf_counter() - t0) * 1e6 / k)
        sync()
    return statistics.median(per)


def five_pipes(target: str) -> list[Any]:
    """Five small per-frame steps of a preprocessing loop, each its own pipe."""
    return [
        fkl.compose(fkl.TensorRead(), fkl.Cast("float32"), fkl.Mul(1 / 255), fkl.TensorWrite(),
                    target=target),
        fkl.compose(fkl.TensorRead(), fkl.Sub(MEAN), fkl.TensorWrite(), target=target),
        fkl.compose(fkl.TensorRead(), fkl.Div(STD), fkl.TensorWrite(), target=target),
        fkl.compose(fkl.TensorRead(), fkl.Max(-2.0), fkl.Min(2.0), fkl.TensorWrite(),
                    target=target),
        fkl.compose(fkl.TensorRead(), fkl.Mul(0.5), fkl.Add(0.25), fkl.TensorWrite(),
                    target=target),
    ]


def frame_buffers(h: int, w: int, make: Callable[[Any], Any]) -> list[Any]:
    rng = np.random.default_rng(1)
    frame = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    return [make(frame)] + [make(np.zeros((h, w, 3), np.float32)) for _ in range(5)]


def frame_reference(frame: np.ndarray) -> np.ndarray:
    x = frame.astype(np.float32) * np.float32(1 / 255)
    x = (x - np.float32(MEAN)) / np.float32(STD)
    x = np.clip(x, -2, 2)
    return x * np.float32(0.5) + np.float32(0.25)


# -- GPU: graphs ---------------------------------------------------------------------------
def bench_graph_floor(rounds: int) -> None:
    """``g.replay()`` against ``cuGraphLaunch`` looped in C on the same graph exec and
    stream, in this process, interleaved round by round (each round: a burst of 200 from
    C, a sync, a burst of 200 replays, a sync), so that drift between the two (the GPU
    falling behind, clocks) hits both alike; the separate-process C program
    (bench/graph_floor.c, run once after) is reported beside it."""
    from _floor import floor_kernel, graph_burst, measure_graph_floor
    from thork_core import gpu_arch
    from thork_core.runtime import DeviceArray, driver

    matrix_add: Any = floor_kernel()
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(matrix_add.artifact(gpu_arch(0)).data)
    a = DeviceArray.from_host(np.zeros(1024, np.float32))
    b = DeviceArray.from_host(np.zeros(1024, np.float32))
    out = DeviceArray.from_host(np.zeros(1024, np.float32))
    launch = matrix_add[8, 128]
    launch(out, a, b)
    try:
        c_burst: Callable[[int, int, int], float] | None = graph_burst()
    except Exception as exc:  # noqa: BLE001 - no C compiler: the row says so
        print(f"  in-process C floor skipped: {type(exc).__name__}: {exc}")
        c_burst = None
    k = 200
    for nodes in (1, 5):
        with tk.graph() as g:
            for _ in range(nodes):
                launch(out, a, b, stream=g.stream)
        s, replay = g.stream, g.replay

        def sync(s: int = s) -> None:
            driver().cuStreamSynchronize(s)

        for _ in range(20):
            replay()
        sync()
        mine, theirs = [], []
        for _ in range(rounds):
            if c_burst is not None:
                theirs.append(c_burst(g.exec_handle, s, k))
                sync()
            t0 = time.perf_counter()
            for _ in range(k):
                replay()
            mine.append((time.perf_counter() - t0) * 1e6 / k)
            sync()
        thork = statistics.median(mine)
        floor = statistics.median(theirs) if theirs else float("nan")
        row("graph", f"replay {nodes}-node graph (Graph.replay)", thork, "us",
            "host, burst of 200, interleaved with the C loop")
        row("graph", f"cuGraphLaunch {nodes}-node, C loop in this process", floor, "us",
            "bench/burst_loop.c, same exec and stream")
        row("graph", f"replay / C floor ({nodes}-node)", thork / floor, "x", "target <= 1.15")
        row("graph", f"replay per kernel ({nodes}-node)", thork / nodes, "us")
        try:
            other = measure_graph_floor(f.name, "matrix_add", nodes, rounds=rounds)
        except Exception as exc:  # noqa: BLE001 - no C compiler: the row says so
            print(f"  C floor skipped: {type(exc).__name__}: {exc}")
            other = float("nan")
        row("graph", f"cuGraphLaunch {nodes}-node graph, separate C process", other, "us",
            "bench/graph_floor.c (not interleaved: for scale)")
        # the same replay through the Python method (ctypes), for the native path's gain
        slow = burst_us(lambda g=g: tk.Graph.replay(g), sync, rounds)
        row("graph", f"replay {nodes}-node through the Python method (ctypes)", slow, "us",
            f"g.replay is {type(g.replay).__name__}")
        # the same launches one by one, for scale
        per = burst_us(lambda n=nodes, s=s: [launch(out, a, b, stream=s) for _ in range(n)],
                       sync, rounds)
        row("graph", f"{nodes} separate launches (kernel[g, b](...))", per, "us")


def bench_frame_gpu(rounds: int, h: int, w: int) -> None:
    from thork_core.runtime import DeviceArray, driver

    pipes = five_pipes("gpu")
    bufs = frame_buffers(h, w, DeviceArray.from_host)

    def calls(s: int = 0) -> None:
        for i, p in enumerate(pipes):
            p(bufs[i], out=bufs[i + 1], stream=s)

    calls()
    with tk.graph() as g:
        calls(g.stream)
    s = g.stream
    g.replay()
    driver().cuStreamSynchronize(s)
    ok = np.allclose(bufs[5].to_host(), frame_reference(bufs[0].to_host()), atol=1e-5)
    sync = lambda: driver().cuStreamSynchronize(s)  # noqa: E731
    sep = burst_us(lambda: calls(s), sync, rounds)
    rep = burst_us(g.replay, sync, rounds)
    note = f"{h}x{w}x3, host per frame, {'checked' if ok else 'MISMATCH'}"
    row("frame", "5 pipes: 5 separate calls", sep, "us", note)
    row("frame", "5 pipes: one Graph.replay", rep, "us", note)
    # end to end: frames back to back with the GPU's time included
    k = 50

    def e2e(fn: Callable[[], Any]) -> float:
        fn()
        sync()
        t0 = time.perf_counter()
        for _ in range(k):
            fn()
        sync()
        return (time.perf_counter() - t0) * 1e6 / k

    row("frame", "5 pipes: separate calls, with GPU time", statistics.median(
        e2e(lambda: calls(s)) for _ in range(5)), "us", f"{k} frames then sync")
    row("frame", "5 pipes: replay, with GPU time", statistics.median(
        e2e(g.replay) for _ in range(5)), "us", f"{k} frames then sync")


# -- GPU: torch ------------------------------------------------------------------------------
def bench_torch(reps: int) -> None:
    try:
        import thork_torch
        import torch
    except ImportError as exc:
        print(f"  torch rows skipped: {exc}")
        return
    if not torch.cuda.is_available():
        print("  torch rows skipped: torch sees no GPU")
        return
    h, w = 1080, 1920
    mean = torch.tensor(MEAN, device="cuda")
    std = torch.tensor(STD, device="cuda")
    pipe = fkl.compose(fkl.TensorRead(), fkl.Cast("float32"), fkl.Mul(1 / 255),
                       fkl.Sub(MEAN), fkl.Div(STD), fkl.TensorSplit(), target="gpu")
    thork_torch.custom_op("thork_bench::preprocess", pipe)

    def eager(x: Any) -> Any:
        return ((x.float() / 255 - mean) / std).permute(2, 0, 1).contiguous()

    compiled_torch = torch.compile(eager, fullgraph=True)

    @torch.compile(fullgraph=True)
    def compiled_op(x: Any) -> Any:
        return torch.ops.thork_bench.preprocess(x)

    x = torch.randint(0, 256, (h, w, 3), dtype=torch.uint8, device="cuda")
    ref = eager(x)
    variants = {"torch eager": lambda: eager(x),
                "torch.compile of the same preprocessing": lambda: compiled_torch(x),
                "fkl pipe as custom op in torch.compile": lambda: compiled_op(x),
                "fkl pipe via thork_torch.wrap(like_input)":
                    lambda: thork_torch.wrap(pipe, output="like_input")(x)}
    for name, fn in variants.items():
        got = fn()
        ok = torch.allclose(got.reshape(ref.shape), ref, atol=1e-5)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        for _ in range(reps):
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e3)
        row("torch", name, statistics.median(times), "us",
            f"1080p uint8 HWC -> float CHW, per call with GPU time, "
            f"{'checked' if ok else 'MISMATCH'}")
    # the round trip: torch tensor in, Thork kernel, torch tensor out (host cost)
    small = torch.randint(0, 256, (64, 64, 3), dtype=torch.uint8, device="cuda")
    out = torch.empty((3, 64, 64), device="cuda")
    sync = torch.cuda.synchronize
    wrapped = thork_torch.wrap(pipe)
    row("torch", "round trip: pipe(t, out=t2) direct", burst_us(
        lambda: pipe(small, out=out), sync, 51), "us", "64x64 host per call")
    row("torch", "round trip: wrap(pipe)(t, out=t2)", burst_us(
        lambda: wrapped(small, out=out), sync, 51), "us", "torch's current stream")
    like = thork_torch.wrap(pipe, output="like_input")
    row("torch", "round trip: wrap(pipe, like_input)(t)", burst_us(
        lambda: like(small), sync, 51), "us", "Thork allocates, torch.from_dlpack")
    row("torch", "round trip: custom op eager", burst_us(
        lambda: torch.ops.thork_bench.preprocess(small), sync, 51), "us", "torch allocates")
    from thork_core.runtime import DeviceArray

    row("torch", "DLPack: torch -> DeviceArray -> torch", burst_us(
        lambda: torch.from_dlpack(DeviceArray.from_dlpack(small)), sync, 51), "us",
        "zero copy both ways")


# -- CPU -------------------------------------------------------------------------------------
def bench_cpu(rounds: int) -> None:
    h, w = 270, 480
    pipes = five_pipes("cpu")
    bufs = frame_buffers(h, w, lambda a: a.copy())

    def calls() -> None:
        for i, p in enumerate(pipes):
            p(bufs[i], out=bufs[i + 1])

    calls()
    with tk.graph(target="cpu") as g:
        calls()
    g.replay()
    ok = np.allclose(bufs[5], frame_reference(bufs[0]), atol=1e-5)
    note = f"{h}x{w}x3 on the CPU target, {'checked' if ok else 'MISMATCH'}"

    def wall(fn: Callable[[], Any]) -> float:
        fn()
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e6)
        return statistics.median(times)

    row("cpu", "5 pipes: 5 separate calls", wall(calls), "us", note)
    row("cpu", "5 pipes: one Graph.replay", wall(g.replay), "us", note)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--out", default=".", help="folder for bench_interop.json")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = ap.parse_args()
    rounds = 21 if args.quick else 201
    from thork_core.runtime import gpu_status

    gpu, why = gpu_status()
    if gpu:
        bench_graph_floor(rounds)
        bench_frame_gpu(rounds, 256, 256)
        bench_frame_gpu(max(rounds // 4, 11), 1080, 1920)
        bench_torch(20 if args.quick else 100)
    else:
        print(f"no GPU ({why}): GPU rows skipped", flush=True)
    bench_cpu(5 if args.quick else 21)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "bench_interop.json")
    with open(path, "w") as f:
        json.dump({"rows": ROWS, "python": sys.version.split()[0]}, f, indent=1)
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
