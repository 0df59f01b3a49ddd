"""fkl-compose benchmark: fused chains against torch eager, CuPy and a device copy.

    python bench/bench_fkl.py --out DIR [--quick] [--only filters|crops|resize|hot ...]

Rows (GPU rows run when a GPU is visible; anchors when torch / CuPy / torchvision import):
  * 6-op float chain, 1080p x 3: fkl fused vs torch eager vs CuPy unfused (and cupy.fuse)
  * DNN preprocessing, uint8 1080p HWC -> crop -> resize 224 -> normalize -> float CHW:
    fkl vs torch eager (+ torchvision v2 when present)
  * uint8 HWC -> normalized float CHW at 1080p (no resize): fkl vs torch eager
  * achieved bandwidth vs cuMemcpyDtoD of the same bytes, measured in the same run
  * hot-call overhead (host time per call, device arrays, out= given) vs raw cuLaunchKernel
  * cold compile of a 6-op chain (trace + NVRTC + load, fresh disk cache) and a disk hit
  * CPU target vs NumPy for the 6-op chain, and a 16-crop batch vs 16 single calls
  * hot call with CuPy / torch arrays (foreign producers) and the allocating pipe(x)
  * horizontal fusion (issue 14): 8 x 1080p -> 224 NCHW in one call vs CV-CUDA's
    resize_crop_convert_reformat (when `import cvcuda` works) and 8 single calls; 64 crops
    of a 4K frame in one call vs 64 calls and a same-bytes copy; compose_divergent vs its
    two chains alone; CircularTensor.update vs a same-bytes copy
  * neighbourhood filters (issue 21), 1920x1080x3 u8 in and out, untiled and tiled
    (shared-memory tile + halo): 3x3 box and Gaussian vs a
    same-bytes cuMemcpyDtoD (goal >= 80%), median 5x5 and a 15x15 LinearFilter reported;
    CV-CUDA gaussian / median_blur anchors when `import cvcuda` works
  * OpenCV resize modes (issue 21), 1080p x 3 u8 -> 1280x720 u8: cv_linear, cv_area,
    cv_cubic, cv_nearest, cv_nearest_exact and a cv_linear replicate warp; CV-CUDA
    resize / warp_affine anchors

GPU times are CUDA events (medians of fresh-input repetitions after a warm-up), three
ways: around one call from an idle GPU (host launch latency included), around 20 calls
back to back (steady state), and do_bench's way (an L2 flush queued first, so the GPU is
busy when the start event runs: device work only). Everything runs on the legacy
default stream, which torch and CuPy also use by default. Results go to
DIR/bench_fkl.json; the compact table is printed last.
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

# A fresh, private disk cache so that the cold-compile row really compiles.
os.environ["THORK_CACHE_DIR"] = tempfile.mkdtemp(prefix="thork-bench-fkl-")

import fkl  # noqa: E402
import numpy as np  # noqa: E402

H, W, C = 1080, 1920, 3
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
ROWS: list[dict[str, Any]] = []


def row(group: str, name: str, value: float, unit: str, note: str = "") -> None:
    ROWS.append({"group": group, "name": name, "value": value, "unit": unit, "note": note})
    print(f"  {group:<14} {name:<34} {value:10.2f} {unit:<6} {note}", flush=True)


def six_ops() -> list[fkl.Op]:
    return [fkl.Mul(1.5), fkl.Add(0.25), fkl.Mul(2.0), fkl.Sub(0.5), fkl.Max(-1.0),
            fkl.Min(4.0)]


def six_ops_numpy(x: Any) -> Any:
    y = x * np.float32(1.5) + np.float32(0.25)
    y = y * np.float32(2.0) - np.float32(0.5)
    return np.minimum(np.maximum(y, np.float32(-1.0)), np.float32(4.0))


# -- GPU timing ---------------------------------------------------------------------------
class Events:
    """Driver-API CUDA events on the legacy default stream."""

    def __init__(self) -> None:
        from thork_core import _cuda

        self.cuda = _cuda
        self.drv = _cuda.driver()
        _cuda.make_current(0)
        self.a = _cuda.check(self.drv.cuEventCreate(0), "cuEventCreate")
        self.b = _cuda.check(self.drv.cuEventCreate(0), "cuEventCreate")

    def time_us(self, fn: Callable[[], Any], reps: int, warmup: int = 5,
                refresh: Callable[[], Any] | None = None, busy: bool = False) -> float:
        """Median device time of ``fn`` in microseconds (``refresh`` runs untimed
        before each repetition, e.g. to write fresh inputs).

        ``busy=False``: the GPU is idle when the start event is recorded, so the host's
        launch latency is in the number. ``busy=True`` times the way
        ``triton.testing.do_bench`` does: a 512 MB memset queued before each start event
        (it evicts the 60 MB L2 and keeps the GPU busy for ~150 us) lets ``fn`` queue its
        work before the start event runs: only the device's work and the gaps between its
        kernels count. One call's host cost is measured on its own (the hot-call rows)."""
        drv, check = self.drv, self.cuda.check
        if busy and getattr(self, "flush", None) is None:
            from thork_core._device_array import DeviceArray

            self.flush = DeviceArray((512 << 20,), "uint8")
        for _ in range(warmup):
            fn()
        check(drv.cuCtxSynchronize(), "sync")
        times = []
        for i in range(reps):
            if refresh is not None:
                refresh()
            if busy:
                check(drv.cuMemsetD8Async(self.flush.ptr, i & 0xFF, 512 << 20, 0), "memset")
            check(drv.cuEventRecord(self.a, 0), "record")
            fn()
            check(drv.cuEventRecord(self.b, 0), "record")
            check(drv.cuEventSynchronize(self.b), "sync")
            times.append(check(drv.cuEventElapsedTime(self.a, self.b), "elapsed") * 1e3)
        return statistics.median(times)

    def stream_us(self, fn: Callable[[], Any], reps: int, batch: int = 20,
                  refresh: Callable[[], Any] | None = None) -> float:
        """Per-call device time in steady state: events around ``batch`` calls issued back
        to back (``refresh`` before each, e.g. the next fresh input), as a pipeline over a
        stream of frames runs; median over ``reps`` batches. One call's launch ramp and
        the event overhead are shared by the batch instead of charged to each call."""
        drv, check = self.drv, self.cuda.check
        for _ in range(3):
            fn()
        check(drv.cuCtxSynchronize(), "sync")
        times = []
        for _ in range(reps):
            check(drv.cuEventRecord(self.a, 0), "record")
            for _ in range(batch):
                if refresh is not None:
                    refresh()
                fn()
            check(drv.cuEventRecord(self.b, 0), "record")
            check(drv.cuEventSynchronize(self.b), "sync")
            times.append(check(drv.cuEventElapsedTime(self.a, self.b), "elapsed") * 1e3
                         / batch)
        return statistics.median(times)


def describe(pipe: Any, x: Any) -> str:
    """Which kernel ``pipe`` runs for aligned inputs like ``x``: variant, channel fold
    (C: the chain runs as 1 channel over N * C elements) and groups per thread."""
    t = pipe._pixtype(x, None, 1)
    variant = pipe.variant(t)
    if variant != "flat":
        return f"variant {variant}"
    spec = pipe.flat_spec(t)
    fold = f"folded x{spec.fold}" if spec.folded else "unfolded"
    return f"variant flat, {fold}, {spec.pixels} px x {spec.vectors} per thread"


def try_import(name: str) -> Any:
    try:
        return __import__(name)
    except Exception:
        return None


def bench_large_frame(ev: Events, rng: Any, reps: int) -> None:
    """The 6-op chain on an 8K frame (4320 x 7680 x 3 float32, 398 MB each way): launch
    ramp and L2 no longer matter, so this is the bandwidth comparison with a copy."""
    from thork_core import _cuda
    from thork_core._device_array import DeviceArray

    h, w, c = 4320, 7680, 3
    print(f"6-op float chain, 8K ({h}x{w}x{c} float32)", flush=True)
    fresh = [DeviceArray.from_host(rng.standard_normal((h, w, c)).astype(np.float32))
             for _ in range(2)]
    out = DeviceArray((h, w, c), "float32")
    pipe = fkl.compose(fkl.TensorRead(), *six_ops(), fkl.TensorWrite(), target="gpu")
    pipe(fresh[0], out=out)
    assert np.allclose(out.to_host(), six_ops_numpy(fresh[0].to_host()), rtol=1e-5,
                       atol=1e-5)
    k = [0]

    def rotate() -> None:
        k[0] = (k[0] + 1) % len(fresh)

    t_fkl = ev.time_us(lambda: pipe(fresh[k[0]], out=out), reps, refresh=rotate)
    nbytes = h * w * c * 4
    t_copy = ev.time_us(lambda: _cuda.check(
        ev.drv.cuMemcpyDtoDAsync(out.ptr, fresh[k[0]].ptr, nbytes, 0), "copy"), reps,
        refresh=rotate)
    row("8K frame", "fkl fused (1 kernel)", t_fkl, "us", describe(pipe, fresh[0]))
    row("8K frame", "cuMemcpyDtoD same bytes", t_copy, "us",
        f"{2 * nbytes / t_copy / 1e3:.0f} GB/s")
    row("8K frame", "fkl achieved", 2 * nbytes / t_fkl / 1e3, "GB/s",
        f"{100 * t_copy / t_fkl:.0f}% of copy; goal >= 90%")
    # uint8 HWC -> normalized float CHW on the same frame size: 3 bytes in, 12 out.
    imgs = [DeviceArray.from_host(rng.integers(0, 256, (h, w, c)).astype(np.uint8))
            for _ in range(2)]
    planes = DeviceArray((c, h, w), "float32")
    pbytes = h * w * c * 5
    for flat in (None, True, False):
        plain = fkl.compose(fkl.TensorRead(), fkl.ColorConversion("BGR2RGB"),
                            fkl.Mul(1 / 255.0), fkl.Sub(MEAN), fkl.Div(STD),
                            fkl.TensorSplit(), target="gpu")
        plain.flat = flat
        plain(imgs[0], out=planes)
        t_p = ev.time_us(lambda p=plain: p(imgs[k[0]], out=planes), reps, refresh=rotate)
        label = {None: "default", True: "forced flat", False: "forced grid"}[flat]
        row("8K frame", f"u8->CHW {label}", t_p, "us",
            f"{100 * (pbytes / t_p) / (2 * nbytes / t_copy):.0f}% of copy bandwidth; "
            f"{describe(plain, imgs[0])}")


def bench_gpu(reps: int) -> None:
    from thork_core import _cuda
    from thork_core._device_array import DeviceArray

    ev = Events()
    drv = ev.drv
    torch, cupy = try_import("torch"), try_import("cupy")
    if torch is not None and not torch.cuda.is_available():
        torch = None
    rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))

    # -- 6-op float chain ---------------------------------------------------------------
    print("6-op float chain, 1080p x 3 float32", flush=True)
    host = rng.standard_normal((H, W, C)).astype(np.float32)
    x = DeviceArray.from_host(host)
    out = DeviceArray((H, W, C), "float32")
    pipe = fkl.compose(fkl.TensorRead(), *six_ops(), fkl.TensorWrite(), target="gpu")
    pipe(x, out=out)
    assert np.allclose(out.to_host(), six_ops_numpy(host), rtol=1e-5, atol=1e-5)
    fresh = [DeviceArray.from_host(rng.standard_normal((H, W, C)).astype(np.float32))
             for _ in range(4)]  # 100 MB: no input is still in the 60 MB L2 when read again
    k = [0]

    def rotate() -> None:
        k[0] = (k[0] + 1) % len(fresh)

    t_fkl = ev.time_us(lambda: pipe(fresh[k[0]], out=out), reps, refresh=rotate)
    chosen = describe(pipe, x)
    print(f"  default kernel: {chosen}", flush=True)
    row("6-op chain", "fkl fused (1 kernel)", t_fkl, "us", chosen)
    # The same chain with each kernel variant forced, to see which layout wins here:
    # (flat, fold, groups per thread); the folded flat kernel is the GPU's default.
    for label, flat, fold, vectors in (
            ("flat folded (1 x float4)", True, True, None),
            ("flat folded, 2 groups/thread", True, True, 2),
            ("flat unfolded (3 x float4)", True, False, None),
            ("grid (2-D)", False, None, None)):
        forced = fkl.compose(fkl.TensorRead(), *six_ops(), fkl.TensorWrite(), target="gpu")
        forced.flat, forced.fold, forced.vectors = flat, fold, vectors
        forced(x, out=out)
        assert np.allclose(out.to_host(), six_ops_numpy(host), rtol=1e-5, atol=1e-5)
        t_v = ev.time_us(lambda f=forced: f(fresh[k[0]], out=out), reps, refresh=rotate)
        row("6-op chain", f"  variant {label}", t_v, "us", describe(forced, x))
    nbytes = H * W * C * 4
    dst = DeviceArray((nbytes,), "uint8")
    # The copy reads the same rotated inputs as the chain (a fixed source would sit in
    # the 60 MB L2 and flatter the copy).
    t_copy = ev.time_us(lambda: _cuda.check(
        drv.cuMemcpyDtoDAsync(dst.ptr, fresh[k[0]].ptr, nbytes, 0), "copy"), reps,
        refresh=rotate)
    row("bandwidth", "cuMemcpyDtoD same bytes", 2 * nbytes / t_copy / 1e3, "GB/s",
        f"{t_copy:.1f} us")
    row("bandwidth", "fkl 6-op chain achieved", 2 * nbytes / t_fkl / 1e3, "GB/s",
        f"{100 * t_copy / t_fkl:.0f}% of copy")
    bench_large_frame(ev, rng, reps)
    if torch is not None:
        tout = torch.from_dlpack(out)
        pipe(x, out=out)  # the timing loop left the result of another input in out
        _cuda.check(drv.cuCtxSynchronize(), "sync")
        assert np.allclose(tout.cpu().numpy(), six_ops_numpy(host), rtol=1e-5, atol=1e-5)

        # The anchors read the same rotated fresh inputs as fkl (METHOD: a fixed input
        # would sit in the 60 MB L2 and flatter them).
        txs = [torch.from_dlpack(f) for f in fresh]

        def torch_chain() -> Any:
            t = txs[k[0]]
            return ((((t * 1.5) + 0.25) * 2.0) - 0.5).clamp_min(-1.0).clamp_max(4.0)

        t_torch = ev.time_us(torch_chain, reps, refresh=rotate)
        row("6-op chain", "torch eager (6 kernels)", t_torch, "us",
            f"fkl speedup {t_torch / t_fkl:.1f}x")
    if cupy is not None:
        cxs = [cupy.asarray(f) for f in fresh]

        def cupy_chain() -> Any:
            cx = cxs[k[0]]
            return cupy.minimum(cupy.maximum((cx * 1.5 + 0.25) * 2.0 - 0.5, -1.0), 4.0)

        t_cupy = ev.time_us(cupy_chain, reps, refresh=rotate)
        row("6-op chain", "CuPy unfused", t_cupy, "us", f"fkl speedup {t_cupy / t_fkl:.1f}x")
        def chain6(a: Any) -> Any:  # cupy.fuse needs a named function
            return cupy.minimum(cupy.maximum((a * 1.5 + 0.25) * 2.0 - 0.5, -1.0), 4.0)

        try:
            fused = cupy.fuse(chain6)
            fused(cxs[0])
            t_cf = ev.time_us(lambda: fused(cxs[k[0]]), reps, refresh=rotate)
            row("6-op chain", "CuPy fuse", t_cf, "us", f"fkl speedup {t_cf / t_fkl:.1f}x")
        except Exception as exc:  # an anchor failing must not stop the run
            print(f"  CuPy fuse skipped: {type(exc).__name__}: {str(exc)[:200]}")

    # -- steady state: a stream of frames, calls back to back --------------------------
    # One call timed alone carries the kernel's launch ramp and tail and the events'
    # own cost (a copy of 25 MB: ~18 us alone, ~13.6 us back to back in
    # bench/diag_stream.py); a pipeline over frames pays them once per batch. Every call
    # still reads the next fresh input.
    print("6-op chain, steady state (20 calls back to back per timing)", flush=True)
    batch_reps = max(reps // 4, 5)
    s_fkl = ev.stream_us(lambda: pipe(fresh[k[0]], out=out), batch_reps, refresh=rotate)
    s_copy = ev.stream_us(lambda: _cuda.check(
        drv.cuMemcpyDtoDAsync(dst.ptr, fresh[k[0]].ptr, nbytes, 0), "copy"), batch_reps,
        refresh=rotate)
    row("steady state", "fkl fused, per frame", s_fkl, "us",
        f"{100 * s_copy / s_fkl:.0f}% of copy")
    row("steady state", "cuMemcpyDtoD same bytes, per frame", s_copy, "us",
        f"{2 * nbytes / s_copy / 1e3:.0f} GB/s")
    if torch is not None:
        s_torch = ev.stream_us(torch_chain, batch_reps, refresh=rotate)
        row("steady state", "torch eager (6 kernels), per frame", s_torch, "us",
            f"fkl speedup {s_torch / s_fkl:.1f}x; goal >= 5x")
    if cupy is not None:
        s_cupy = ev.stream_us(cupy_chain, batch_reps, refresh=rotate)
        row("steady state", "CuPy unfused, per frame", s_cupy, "us",
            f"fkl speedup {s_cupy / s_fkl:.1f}x")
    # -- device time, do_bench's convention: no host launch latency in any row ----------
    print("6-op chain, device time (a 512 MB L2 flush queued before each timing, "
          "as triton.testing.do_bench does)", flush=True)
    d_fkl = ev.time_us(lambda: pipe(fresh[k[0]], out=out), reps, refresh=rotate,
                       busy=True)
    d_copy = ev.time_us(lambda: _cuda.check(
        drv.cuMemcpyDtoDAsync(dst.ptr, fresh[k[0]].ptr, nbytes, 0), "copy"), reps,
        refresh=rotate, busy=True)
    row("device time", "fkl fused", d_fkl, "us", f"{100 * d_copy / d_fkl:.0f}% of copy")
    row("device time", "cuMemcpyDtoD same bytes", d_copy, "us",
        f"{2 * nbytes / d_copy / 1e3:.0f} GB/s")
    if torch is not None:
        d_torch = ev.time_us(torch_chain, reps, refresh=rotate, busy=True)
        row("device time", "torch eager (6 kernels)", d_torch, "us",
            f"fkl speedup {d_torch / d_fkl:.1f}x; goal >= 5x")
        try:  # the same through Triton's own timer, where Triton is installed
            from triton.testing import do_bench

            tb_fkl = do_bench(lambda: pipe(fresh[0], out=out), warmup=25, rep=200,
                              return_mode="median") * 1e3
            tb_torch = do_bench(lambda: (((((txs[0] * 1.5) + 0.25) * 2.0) - 0.5)
                                         .clamp_min(-1.0).clamp_max(4.0)),
                                warmup=25, rep=200, return_mode="median") * 1e3
            row("device time", "do_bench: fkl fused", tb_fkl, "us",
                "triton.testing.do_bench, median")
            row("device time", "do_bench: torch eager", tb_torch, "us",
                f"fkl speedup {tb_torch / tb_fkl:.1f}x")
        except Exception as exc:  # no Triton, or an older one without return_mode
            print(f"  triton.testing.do_bench skipped: {type(exc).__name__}: {exc}")
    if cupy is not None:
        d_cupy = ev.time_us(cupy_chain, reps, refresh=rotate, busy=True)
        row("device time", "CuPy unfused", d_cupy, "us",
            f"fkl speedup {d_cupy / d_fkl:.1f}x")
    pipe(x, out=out)
    _cuda.check(drv.cuCtxSynchronize(), "sync")
    assert np.allclose(out.to_host(), six_ops_numpy(host), rtol=1e-5, atol=1e-5)

    # -- DNN preprocessing --------------------------------------------------------------
    print("DNN preprocessing, uint8 1080p HWC -> crop -> 224x224 -> normalize -> CHW",
          flush=True)
    img_h = rng.integers(0, 256, (H, W, C)).astype(np.uint8)
    img = DeviceArray.from_host(img_h)
    rect = (420, 0, 1080, 1080)
    dnn = fkl.compose(fkl.TensorRead(), fkl.Crop(rect), fkl.Resize(224, 224),
                      fkl.ColorConversion("BGR2RGB"), fkl.Mul(1 / 255.0), fkl.Sub(MEAN),
                      fkl.Div(STD), fkl.TensorSplit(), target="gpu")
    dout = DeviceArray((3, 224, 224), "float32")
    dnn(img, out=dout)
    t_dnn = ev.time_us(lambda: dnn(img, out=dout), reps)
    row("dnn preproc", "fkl (1 kernel)", t_dnn, "us", describe(dnn, img))
    plain = fkl.compose(fkl.TensorRead(), fkl.ColorConversion("BGR2RGB"), fkl.Mul(1 / 255.0),
                        fkl.Sub(MEAN), fkl.Div(STD), fkl.TensorSplit(), target="gpu")
    pout = DeviceArray((3, H, W), "float32")
    plain(img, out=pout)
    t_plain = ev.time_us(lambda: plain(img, out=pout), reps)
    pbytes = H * W * C * 5
    row("dnn preproc", "fkl u8 HWC->f32 CHW 1080p", t_plain, "us",
        f"{pbytes / t_plain / 1e3:.0f} GB/s = "
        f"{100 * (pbytes / t_plain) / (2 * nbytes / t_copy):.0f}% of copy; "
        f"{describe(plain, img)}")
    for flat in (True, False):  # which layout wins for planar writes, on this GPU
        forced = fkl.compose(fkl.TensorRead(), fkl.ColorConversion("BGR2RGB"),
                             fkl.Mul(1 / 255.0), fkl.Sub(MEAN), fkl.Div(STD),
                             fkl.TensorSplit(), target="gpu")
        forced.flat = flat
        forced(img, out=pout)
        t_v = ev.time_us(lambda f=forced: f(img, out=pout), reps)
        row("dnn preproc", f"  u8->CHW forced {'flat' if flat else 'grid'}", t_v, "us",
            describe(forced, img))
    if torch is not None:
        ti = torch.from_dlpack(img)
        mean = torch.tensor(MEAN, device="cuda").view(3, 1, 1)
        std = torch.tensor(STD, device="cuda").view(3, 1, 1)
        x0, y0, w0, h0 = rect

        def torch_dnn() -> Any:
            c = ti[y0:y0 + h0, x0:x0 + w0].permute(2, 0, 1).flip(0).float().unsqueeze(0)
            r = torch.nn.functional.interpolate(c, size=(224, 224), mode="bilinear",
                                                align_corners=False)[0]
            return (r / 255.0 - mean) / std

        t_t = ev.time_us(torch_dnn, reps)
        row("dnn preproc", "torch eager", t_t, "us", f"fkl speedup {t_t / t_dnn:.1f}x")

        def torch_plain() -> Any:
            return (ti.permute(2, 0, 1).flip(0).float() / 255.0 - mean) / std

        t_tp = ev.time_us(torch_plain, reps)
        row("dnn preproc", "torch eager u8->f32 CHW 1080p", t_tp, "us",
            f"fkl speedup {t_tp / t_plain:.1f}x")
        tv = try_import("torchvision")
        if tv is not None:
            try:
                from torchvision.transforms.v2 import functional as F

                def tv_dnn() -> Any:
                    c = F.crop(ti.permute(2, 0, 1), y0, x0, h0, w0).flip(0)
                    r = F.resize(c, [224, 224], antialias=False)
                    return F.normalize(F.to_dtype(r, torch.float32, scale=True), MEAN, STD)

                t_tv = ev.time_us(tv_dnn, reps)
                row("dnn preproc", "torchvision v2", t_tv, "us",
                    f"fkl speedup {t_tv / t_dnn:.1f}x")
            except Exception as exc:  # an older torchvision without v2
                print(f"  torchvision skipped: {exc}")

    bench_hot_call()


def bench_hot_call() -> None:
    """Host time per hot call (tiny image, out= given): DeviceArrays, CuPy, torch and
    DLPack-only producers against the C floor (``--only hot`` runs just this)."""
    from thork_core import _cuda
    from thork_core._device_array import DeviceArray

    drv = Events().drv
    # -- hot-call overhead --------------------------------------------------------------
    print("hot-call overhead (tiny image, device arrays, out= given)", flush=True)
    tiny = DeviceArray.from_host(np.arange(16, dtype=np.float32))
    tout = DeviceArray((16,), "float32")
    hot = fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.Add(1.0), fkl.Mul(3.0),
                      fkl.TensorWrite(), target="gpu")
    t1, t2 = tiny.reshape(1, 16), tout.reshape(1, 16)
    hot(t1, out=t2)
    assert np.allclose(tout.to_host(), (np.arange(16) * 2 + 1) * 3)
    (entry,) = hot._hot.values()  # the one-in, one-out hot path is the one measured
    guard = entry.guard
    plan = next(iter(hot._plans.values()))
    prepared = plan.launcher.prepared
    ptrs = [(t1.ptr, t2.ptr)[i] for i in plan.order]
    call = prepared.call
    from thork_core._native import native_status

    print(f"  native launch module: {native_status()}; pipe entry: "
          f"{' -> '.join(c.__name__ for c in type(hot).__mro__)}", flush=True)
    # The same launch through core's Python launcher (what runs where the native module
    # cannot be built): a copy of the executable with a PyLauncher.
    import copy

    from thork_core._cuda import function_address, make_current
    from thork_core._launch import CONV_CU, PyLauncher, param_kinds

    exe = plan.built.exe
    exe_py = copy.copy(exe)
    exe_py.launcher = PyLauncher(
        CONV_CU, function_address("cuLaunchKernel"), int(exe._function),
        param_kinds(exe.kernel.params), exe._failed, int(make_current(0)),
        function_address("cuCtxGetCurrent"), function_address("cuCtxSetCurrent"))
    slow = exe_py.prepare(prepared.grid, prepared.block, prepared.values)
    slow_guard = slow.guard(type(t1), [(t1.shape, t1.dtype, t1.device),
                                       (t2.shape, t2.dtype, t2.device)], plan.order,
                            plan.align_mask)

    def per_call(fn: Callable[[], Any], n: int) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        took = (time.perf_counter() - t0) / n * 1e6
        _cuda.check(drv.cuCtxSynchronize(), "sync")
        return took

    py_call = fkl.Pipe.__call__  # the pipe's Python entry (what runs without GuardedCall)
    variants: dict[str, Callable[[], Any]] = {
        "call": lambda: hot(t1, out=t2),
        "py_call": lambda: py_call(hot, t1, out=t2),
        "guard": lambda: guard(t1, t2, None),
        "launch": lambda: call(ptrs, 0),
        "py_guard": lambda: slow_guard(t1, t2, None),
        "py_launch": lambda: slow(ptrs, 0),
    }
    for fn in variants.values():
        for _ in range(200):
            fn()
    _cuda.check(drv.cuCtxSynchronize(), "sync")
    tout.copy_from_host(np.full(16, np.nan, np.float32))
    slow_guard(t1, t2, None)
    assert np.allclose(tout.to_host(), (np.arange(16) * 2 + 1) * 3)
    n = 10000
    burst_k = 200
    native = getattr(prepared, "native", None) is not None

    def measure(variants: dict[str, Callable[[], Any]]) -> tuple[dict[str, float],
                                                                  dict[str, float]]:
        """Host time per call: 10000 back to back (the driver's queue can fill and make
        the host wait on the GPU), and bursts of 200 from an idle GPU (host cost alone);
        variants interleaved so that drifts of the host hit all alike."""
        samples: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(7):
            for name, fn in variants.items():
                samples[name].append(per_call(fn, n))
        bursts: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(51):
            for name, fn in variants.items():
                _cuda.check(drv.cuCtxSynchronize(), "sync")
                t0 = time.perf_counter()
                for _ in range(burst_k):
                    fn()
                bursts[name].append((time.perf_counter() - t0) / burst_k * 1e6)
        _cuda.check(drv.cuCtxSynchronize(), "sync")
        return ({k: statistics.median(v) for k, v in samples.items()},
                {k: statistics.median(v) for k, v in bursts.items()})

    def report(where: str, med: dict[str, float], bmed: dict[str, float],
               floor: dict[str, float]) -> None:
        for label, m, fl in (("10000 back to back", med, floor.get("sustained")),
                             (f"bursts of {burst_k}", bmed, floor.get("burst"))):
            ref = f"; C floor {fl:.2f} us" if fl else ""
            row("hot call", f"fkl pipe(x, out=y{where}), {label}", m["call"], "us",
                f"host time per call; goal <= 5 us{ref}")
            if "py_call" in m:
                row("hot call", "  same through Pipe.__call__ (Python)", m["py_call"], "us",
                    "the entry without core's GuardedCall")
            row("hot call", "  core guard alone (checks + launch)", m["guard"], "us",
                "C (native module)" if native else "Python (no native module)")
            row("hot call", "  prepared launch alone (addresses only)", m["launch"], "us",
                "C" if native else "ctypes")
            if "py_guard" in m:
                row("hot call", "  Python path: guard (THORK_LAUNCHER=ctypes)", m["py_guard"],
                    "us")
                row("hot call", "  Python path: prepared launch", m["py_launch"], "us")
            if fl:
                row("hot call", "  C floor: cuLaunchKernel from C", fl, "us",
                    "bench/launch_floor.c")

    med, bmed = measure(variants)
    floor = launch_floor() or {}
    report("", med, bmed, floor)
    # The same with a stream given (a non-blocking stream, as a pipeline would own).
    stream_obj = _cuda.check(drv.cuStreamCreate(1), "cuStreamCreate")  # non-blocking
    sh = int(stream_obj)
    on_stream: dict[str, Callable[[], Any]] = {
        "call": lambda: hot(t1, out=t2, stream=sh),
        "guard": lambda: guard(t1, t2, sh),
        "launch": lambda: call(ptrs, sh),
    }
    tout.copy_from_host(np.full(16, np.nan, np.float32))
    hot(t1, out=t2, stream=sh)
    _cuda.check(drv.cuStreamSynchronize(stream_obj), "sync")
    assert np.allclose(tout.to_host(), (np.arange(16) * 2 + 1) * 3)
    med, bmed = measure(on_stream)
    report(", stream=s", med, bmed, launch_floor("created"))
    _cuda.check(drv.cuStreamDestroy(stream_obj), "cuStreamDestroy")
    samples_alloc = []
    for _ in range(5):
        samples_alloc.append(per_call(lambda: hot(t1), n // 4))
    row("hot call", "fkl pipe(x) allocating out", statistics.median(samples_alloc), "us")
    sustained = floor.get("sustained")
    ref = f"; C floor {sustained:.2f} us, goal <= 1.15x" if sustained else ""
    row("hot call", "  pipe(x, out=y) same run (DeviceArrays)",
        statistics.median([per_call(lambda: hot(t1, out=t2), n // 4) for _ in range(5)]),
        "us", f"goal: allocating <= 1.5x this{ref}")
    # Foreign producers: CuPy and torch arrays through __cuda_array_interface__ (hot key).
    for name, mod in (("CuPy", try_import("cupy")), ("torch", try_import("torch"))):
        if mod is None or (name == "torch" and not mod.cuda.is_available()):
            print(f"  {name} hot-call rows skipped: not importable here")
            continue
        if name == "CuPy":
            fx, fo = mod.asarray(t1), mod.asarray(t2)
        else:
            fx, fo = mod.from_dlpack(t1), mod.from_dlpack(t2)
        hot(fx, out=fo)
        hot(fx, out=fo)
        took = statistics.median([per_call(lambda a=fx, b=fo: hot(a, out=b), n // 4)
                                  for _ in range(5)])
        row("hot call", f"fkl pipe(x, out=y), {name} arrays", took, "us",
            f"{took / sustained:.2f}x C floor (goal <= 1.15x)" if sustained else "")
    # A producer that offers only DLPack (no __cuda_array_interface__): the goal is the C
    # floor plus the producer's own __dlpack__ time, measured here too, called as the
    # pipe calls it (the legacy stream named, a versioned capsule). Session 10: the pipe
    # reads such arrays in core's C guard (__dlpack_device__, __dlpack__, the capsule), so
    # its floor is the DeviceArray pipe's plus what the protocol asks of the producer per
    # array (both calls): that bound is printed too (Thork's part = the rest).
    from diag_producers import DLPackOnly

    dx, do = DLPackOnly(t1), DLPackOnly(t2)
    hot(dx, out=do)
    hot(dx, out=do)
    took = statistics.median([per_call(lambda: hot(dx, out=do), n // 10) for _ in range(5)])
    own = statistics.median([per_call(lambda: dx.__dlpack__(stream=1, max_version=(1, 0)),
                                      n // 10) for _ in range(5)])
    dev = statistics.median([per_call(dx.__dlpack_device__, n // 10) for _ in range(5)])
    da_call = statistics.median([per_call(lambda: hot(t1, out=t2), n // 10) for _ in range(5)])
    goal = f"; goal <= C floor + 2 x __dlpack__ = {sustained + 2 * own:.2f} us" \
        if sustained else ""
    row("hot call", "fkl pipe(x, out=y), DLPack-only arrays", took, "us",
        f"producer __dlpack__ {own:.2f} us per array{goal}")
    bound = da_call + 2 * (own + dev)
    row("hot call", "  DeviceArray pipe + 2 x (__dlpack__ + __dlpack_device__)", bound, "us",
        f"__dlpack_device__ {dev:.2f} us; DeviceArray pipe {da_call:.2f} us; Thork's part "
        f"{took - bound:+.2f} us")
    dl_direct = statistics.median([per_call(
        lambda: t1.__dlpack__(stream=1, max_version=(1, 0)), n // 10) for _ in range(5)])
    row("hot call", "  DeviceArray.__dlpack__ (no wrapper)", dl_direct, "us",
        "the capsule built in C (session 10; 12.2 us through ctypes before)")
    foreign_interleaved(hot, t1, t2)


def foreign_interleaved(hot: Any, t1: Any, t2: Any) -> None:
    """(session 11) ``pipe(x, out=y)`` with DeviceArrays, CuPy arrays and torch tensors,
    the C floor, and the producers' own reads a correct launcher must make per call (the
    current stream once; per array the pointer, dtype, contiguity and shape: the pipe's
    plan is per exact shape), in interleaved rounds (medians): each verdict is decided
    within one run against "C floor + producer reads"."""
    from _floor import floor_kernel, launch_burst, measure_launch_floor
    from thork_core import _cuda, gpu_arch
    from thork_core.runtime import DeviceArray

    drv = _cuda.driver()
    cupy, torch = try_import("cupy"), try_import("torch")
    if torch is not None and not torch.cuda.is_available():
        torch = None
    matrix_add: Any = floor_kernel()
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(matrix_add.artifact(gpu_arch(0)).data)
    # (session 11) The floor looped in C in this process too: the same context, thread and
    # host state as the rows (the separate program runs in a process of its own).
    fa = [DeviceArray.from_host(np.zeros(1024, np.float32)) for _ in range(3)]
    floor_launch = matrix_add[8, 128]
    floor_launch(*fa)
    try:
        burst: Any = launch_burst(floor_launch, (fa[0].ptr, fa[1].ptr, fa[2].ptr))
        burst(10)
    except Exception as exc:  # noqa: BLE001 - no C compiler: the separate program only
        print(f"  in-process C floor skipped: {type(exc).__name__}: {exc}")
        burst = None
    # (session 11) The same call expression on a C no-op (the native module's noop, a
    # vectorcall builtin taking out= as a keyword): what CPython itself costs per call.
    from thork_core._native import native_module

    mod = native_module()
    noop = mod.noop if mod is not None else (lambda *args, **kwargs: None)
    variants: dict[str, Callable[[], Any]] = {
        "DeviceArray pipe": lambda: hot(t1, out=t2),
        "CPython floor": lambda: noop(t1, out=t2),
        "empty Python call": lambda: None,
    }
    if cupy is not None:
        cx, co = cupy.asarray(t1), cupy.asarray(t2)
        hot(cx, out=co)
        gcs = cupy.cuda.get_current_stream

        def cupy_reads() -> None:
            gcs().ptr  # noqa: B018 - each read is the measured work
            cx._c_contiguous  # noqa: B018
            cx.dtype  # noqa: B018
            cx.shape  # noqa: B018
            cx.data.ptr  # noqa: B018
            co._c_contiguous  # noqa: B018
            co.dtype  # noqa: B018
            co.shape  # noqa: B018
            co.data.ptr  # noqa: B018

        variants["CuPy pipe"] = lambda: hot(cx, out=co)
        variants["CuPy reads"] = cupy_reads
    if torch is not None:
        tx, to = torch.from_dlpack(t1), torch.from_dlpack(t2)
        hot(tx, out=to)
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None) or \
            (lambda d: torch.cuda.current_stream(d).cuda_stream)

        def torch_reads() -> None:
            raw(0)
            tx.is_cuda  # noqa: B018
            tx.dtype  # noqa: B018
            tx.is_contiguous()
            tx.shape  # noqa: B018
            tx.data_ptr()
            to.is_cuda  # noqa: B018
            to.dtype  # noqa: B018
            to.is_contiguous()
            to.shape  # noqa: B018
            to.data_ptr()

        variants["torch pipe"] = lambda: hot(tx, out=to)
        variants["torch reads"] = torch_reads
    n = 10000
    short = 1000  # calls per round below the driver's queue depth: host cost alone
    got: dict[str, list[float]] = {k: [] for k in ["C floor", *variants, "C floor, 1000",
                                                   "DeviceArray pipe, 1000"]}
    if burst is not None:
        got["C floor, in process"] = []
    for _ in range(7):
        got["C floor"].append(measure_launch_floor(f.name, "matrix_add", n=1024, rounds=3)[
            "enqueue_us"])
        if burst is not None:
            burst(300)
            _cuda.check(drv.cuCtxSynchronize(), "sync")
            got["C floor, in process"].append(burst(n))
            _cuda.check(drv.cuCtxSynchronize(), "sync")
        got["C floor, 1000"].append(measure_launch_floor(
            f.name, "matrix_add", n=1024, rounds=5, launches=short)["enqueue_us"])
        for name, fn in variants.items():
            for _ in range(300):
                fn()
            _cuda.check(drv.cuCtxSynchronize(), "sync")
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            got[name].append((time.perf_counter() - t0) / n * 1e6)
            _cuda.check(drv.cuCtxSynchronize(), "sync")
        fn = variants["DeviceArray pipe"]
        t0 = time.perf_counter()
        for _ in range(short):
            fn()
        got["DeviceArray pipe, 1000"].append((time.perf_counter() - t0) / short * 1e6)
        _cuda.check(drv.cuCtxSynchronize(), "sync")
    med = {k: statistics.median(v) for k, v in got.items()}
    row("interleaved", "C floor: cuLaunchKernel from C, separate program", med["C floor"],
        "us", "7 rounds, median; each round: the floor, then every row below")
    # The verdicts take the floor measured in this process when there is one.
    floor = med.get("C floor, in process", med["C floor"])
    if "C floor, in process" in med:
        row("interleaved", "C floor in this process (the verdicts' floor)", floor, "us",
            "bench/burst_loop.c: cuLaunchKernel looped in C, same context and thread")
    goal = 1.15 * floor
    py_call, empty = med["CPython floor"], med["empty Python call"]
    row("interleaved", "  CPython call floor: noop(x, out=y)", py_call, "us",
        "a C no-op called the same way (lambda included, as in every row)")

    def verdict(took: float, bound: float) -> str:
        return "met" if took <= goal else \
            "impossible: bound > 1.15x floor" if bound > goal else "NOT met"

    da = med["DeviceArray pipe"]
    row("interleaved", "pipe(x, out=y) DeviceArrays", da, "us",
        f"{da / floor:.3f}x floor (goal <= 1.15x: {verdict(da, floor + py_call)})")
    row("interleaved", "  C floor + CPython call floor", floor + py_call, "us",
        f"Thork {da / (floor + py_call):.3f}x this bound (own {da - floor - py_call:+.2f} us)")
    short_floor, short_da = med["C floor, 1000"], med["DeviceArray pipe, 1000"]
    row("interleaved", "  same, 1000 calls from an idle GPU", short_da, "us",
        f"{short_da / short_floor:.3f}x the C floor's 1000 launches ({short_floor:.2f} us): "
        "below the queue depth, host cost alone")
    for lib in ("CuPy", "torch"):
        if f"{lib} pipe" not in med:
            continue
        took, reads = med[f"{lib} pipe"], med[f"{lib} reads"]
        bound = floor + reads
        full = bound + py_call - empty  # the reads row's own call counted once
        verdict_text = verdict(took, full)
        row("interleaved", f"pipe(x, out=y) {lib} arrays", took, "us",
            f"{took / floor:.3f}x floor; goal <= 1.15x = {goal:.2f} us: {verdict_text}")
        row("interleaved", f"  {lib}'s own reads (stream + 2 arrays)", reads, "us",
            "what any correct launcher reads per call")
        row("interleaved", "  C floor + those reads", bound, "us",
            f"Thork {took / bound:.3f}x this bound ({took - bound:+.2f} us)")
        row("interleaved", "  C floor + reads + CPython call floor", full, "us",
            f"Thork {took / full:.3f}x this bound (own {took - full:+.2f} us)")
    if mod is not None:
        print(f"  launches keep the GIL here (one thread): {mod.keeps_gil()}")


# -- horizontal fusion (issue 14) ----------------------------------------------------------

def call_host_us(drv: Any, fn: Callable[[], Any], n: int) -> float:
    """Host microseconds per call of ``fn`` over ``n`` back-to-back calls, after one
    warm-up call, the device synchronized before and after (outside the timing)."""
    from thork_core import _cuda

    fn()
    _cuda.check(drv.cuCtxSynchronize(), "sync")
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    took = (time.perf_counter() - t0) / n * 1e6
    _cuda.check(drv.cuCtxSynchronize(), "sync")
    return took


def bench_batch(ev: Events, rng: Any, reps: int) -> None:
    """Batches in one call against CV-CUDA, single calls and a same-bytes copy; steady
    state device time over 20 back-to-back calls (host time per call noted)."""
    from thork_core import _cuda
    from thork_core._device_array import DeviceArray

    drv = ev.drv
    batch_reps = max(reps // 4, 5)

    def host_us(fn: Callable[[], Any], n: int = 200) -> float:
        return call_host_us(drv, fn, n)

    def copy_us(nbytes: int) -> float:
        a, b = DeviceArray((nbytes,), "uint8"), DeviceArray((nbytes,), "uint8")
        return ev.stream_us(lambda: _cuda.check(
            drv.cuMemcpyDtoDAsync(b.ptr, a.ptr, nbytes, 0), "copy"), batch_reps)

    # 8 x 1080p u8 HWC -> 224x224 bilinear -> x/255 -> float (8, 3, 224, 224), one call.
    print("batch: 8 x 1080p u8 -> 224x224 -> x/255 -> float NCHW", flush=True)
    frames = DeviceArray.from_host(rng.integers(0, 256, (8, H, W, C)).astype(np.uint8))
    nchw = DeviceArray((8, C, 224, 224), "float32")
    pipe8 = fkl.compose(fkl.TensorRead(), fkl.Resize(224, 224), fkl.Mul(1 / 255),
                        fkl.TensorSplit(), target="gpu")
    pipe8(frames, out=nchw)
    t8 = ev.stream_us(lambda: pipe8(frames, out=nchw), batch_reps)
    row("batch", "8x1080p->224 NCHW, fkl 1 call", t8, "us",
        f"host {host_us(lambda: pipe8(frames, out=nchw)):.1f} us/call")
    single = fkl.compose(fkl.TensorRead(), fkl.Resize(224, 224), fkl.Mul(1 / 255),
                         fkl.TensorSplit(), target="gpu")
    one = [DeviceArray.wrap(frames.ptr + i * H * W * C, (H, W, C), "uint8", owner=frames)
           for i in range(8)]
    outs = [DeviceArray.wrap(nchw.ptr + i * C * 224 * 224 * 4, (C, 224, 224), "float32",
                             owner=nchw) for i in range(8)]

    def eight_calls() -> None:
        for i in range(8):
            single(one[i], out=outs[i])

    t8s = ev.stream_us(eight_calls, batch_reps)
    row("batch", "  8 single fkl calls", t8s, "us", f"batch speedup {t8s / t8:.1f}x")
    cvcuda = try_import("cvcuda")
    if cvcuda is None:
        print("  anchor missing: CV-CUDA (`import cvcuda` failed; pip install cvcuda-cu13)",
              flush=True)
    else:
        try:
            src = cvcuda.as_tensor(frames, "NHWC")
            rect = cvcuda.RectI(0, 0, 224, 224)

            def cv() -> Any:
                return cvcuda.resize_crop_convert_reformat(
                    src, (224, 224), cvcuda.Interp.LINEAR, rect, layout="NCHW",
                    data_type=cvcuda.Type.F32, scale=1 / 255, offset=0.0)

            cv()
            t_cv = ev.stream_us(cv, batch_reps)
            row("batch", "  CV-CUDA resize_crop_convert_reformat", t_cv, "us",
                f"fkl / CV-CUDA = {t8 / t_cv:.2f} (goal <= 0.8)")
        except Exception as exc:  # an anchor failing must not stop the run
            print(f"  CV-CUDA anchor failed: {type(exc).__name__}: {str(exc)[:200]}")

    bench_crops(ev, rng, reps)

    # compose_divergent of two chains vs the two chains alone.
    print("divergent: 2 chains over 8 x 1080p planes", flush=True)
    c0 = [fkl.TensorRead(), fkl.Resize(224, 224), fkl.Mul(1 / 255), fkl.TensorSplit()]
    c1 = [fkl.TensorRead(), fkl.Crop((480, 270, 960, 540)), fkl.Resize(480, 270),
          fkl.SaturateCast("uint8"), fkl.TensorWrite()]
    plane_map = [0, 1, 0, 1, 0, 1, 0, 1]
    div = fkl.compose_divergent(plane_map, c0, c1, target="gpu")
    d_outs = div(frames)
    half = DeviceArray.wrap(frames.ptr, (4, H, W, C), "uint8", owner=frames)
    p0 = fkl.compose(*c0, target="gpu")
    p1 = fkl.compose(*c1, target="gpu")
    o0, o1 = p0(half), p1(half)
    t_div = ev.stream_us(lambda: div(frames, out=d_outs), batch_reps)
    t_0 = ev.stream_us(lambda: p0(half, out=o0), batch_reps)
    t_1 = ev.stream_us(lambda: p1(half, out=o1), batch_reps)
    row("divergent", "compose_divergent, 1 launch", t_div, "us",
        f"{t_div / (t_0 + t_1):.2f}x the two chains alone (goal <= 1.1); host "
        f"{host_us(lambda: div(frames, out=d_outs), 50):.1f} us/call")
    row("divergent", "  chain 0 alone (4 planes)", t_0, "us")
    row("divergent", "  chain 1 alone (4 planes)", t_1, "us")

    # CircularTensor.update at 1080p vs a copy of the bytes it must move.
    print("CircularTensor.update, 1080p u8 -> float planar window of 4", flush=True)
    ct = fkl.CircularTensor(W, H, batch=4, dtype="uint8", channels=C, layout="planar",
                            out_dtype="float32", target="gpu")
    src = DeviceArray.from_host(rng.integers(0, 256, (H, W, C)).astype(np.uint8))
    ops = [fkl.Cast("float32"), fkl.Mul(1 / 255)]
    ct.update(src, ops=ops)
    t_ct = ev.stream_us(lambda: ct.update(src, ops=ops), batch_reps)
    plane = H * W * C * 4
    ct_bytes = H * W * C + 3 * plane + 4 * plane  # frame read + planes moved + written
    t_ctc = copy_us(ct_bytes)
    row("circular", "CircularTensor.update 1080p", t_ct, "us",
        f"{100 * t_ctc / t_ct:.0f}% of a same-bytes copy (goal >= 90%); host "
        f"{host_us(lambda: ct.update(src, ops=ops), 50):.1f} us/call")
    row("circular", "  cuMemcpyDtoD same bytes", t_ctc, "us")


def bench_crops(ev: Events, rng: Any, reps: int) -> None:
    """64 crops of 448x448 from one 4K frame -> 224x224 normalized CHW float in one call,
    against 64 back-to-back single calls and a same-bytes copy (issue 14); the one call
    also with each thread's pixels along x forced (``pipe.variants.columns``: the default
    chooses 4 here, docs/fkl-resize.md), checked against a NumPy float64 reference."""
    from thork_core import _cuda
    from thork_core._device_array import DeviceArray

    drv = ev.drv
    batch_reps = max(reps // 4, 5)

    def host_us(fn: Callable[[], Any], n: int = 50) -> float:
        return call_host_us(drv, fn, n)

    print("batch: 64 crops 448x448 of a 4K frame -> 224 normalized CHW", flush=True)
    fh, fw = 2160, 3840
    host = rng.integers(0, 256, (fh, fw, C)).astype(np.uint8)
    frame = DeviceArray.from_host(host)
    rects = [(int(x), int(y), 448, 448) for x, y in zip(
        rng.integers(0, fw - 448, 64), rng.integers(0, fh - 448, 64))]
    crops = DeviceArray((64, C, 224, 224), "float32")
    tail = [fkl.Resize(224, 224), fkl.Mul(1 / 255), fkl.Sub(MEAN), fkl.Div(STD),
            fkl.TensorSplit()]
    pipe64 = fkl.compose(fkl.TensorRead(), fkl.Crop(rects), *tail, target="gpu")
    pipe64(frame, out=crops)
    got = crops.to_host()
    # FKL's bilinear at exactly 2x: source column 2x (weight 1) and 2x + 1 (weight 0).
    want = np.stack([host[y:y + 448:2, x:x + 448:2] for x, y, _, _ in rects])
    want = ((want / 255.0 - np.asarray(MEAN)) / np.asarray(STD)).transpose(0, 3, 1, 2)
    err = float(np.abs(got - want).max())
    assert err < 1e-4, f"64 crops: max |fkl - NumPy| {err}"
    t64 = ev.stream_us(lambda: pipe64(frame, out=crops), batch_reps)
    singles = [fkl.compose(fkl.TensorRead(), fkl.Crop(r), *tail, target="gpu") for r in rects]
    souts = [DeviceArray.wrap(crops.ptr + i * C * 224 * 224 * 4, (C, 224, 224), "float32",
                              owner=crops) for i in range(64)]

    def sixty_four() -> None:
        for p, o in zip(singles, souts):
            p(frame, out=o)

    t64s = ev.stream_us(sixty_four, max(batch_reps // 4, 3))
    nbytes = 64 * 448 * 448 * C + 64 * C * 224 * 224 * 4  # source read + output written
    a, b = DeviceArray((nbytes,), "uint8"), DeviceArray((nbytes,), "uint8")
    t_copy = ev.stream_us(lambda: _cuda.check(
        drv.cuMemcpyDtoDAsync(b.ptr, a.ptr, nbytes, 0), "copy"), batch_reps)
    plan = next(iter(pipe64._plans.values()))
    taps = "1 tap" if any(str(k[1]).endswith("/1tap") for k in pipe64.kernels._built) \
        else "4 taps"
    row("batch", "64 crops 4K->224 CHW, fkl 1 call", t64, "us",
        f"{plan.built.lowered.cols} px/thread, {taps}; max |err| {err:.1e}; host "
        f"{host_us(lambda: pipe64(frame, out=crops)):.1f} us/call")
    row("batch", "  64 single fkl calls", t64s, "us",
        f"1 call / 64 calls = {t64 / t64s:.3f} (goal <= 0.1)")
    row("batch", "  cuMemcpyDtoD same bytes", t_copy, "us",
        f"fkl at {100 * t_copy / t64:.0f}% of copy bandwidth (goal >= 80%)")
    # Pixels per thread: (columns, rows) forced (pipe.variants.columns / .rows), with the
    # one-tap kernel (session 10: FKL's linear at whole factors reads 1 tap, not 4) and,
    # as the session-9 kernel, with four taps (Resize.one_tap = False); "loads apart":
    # the one-tap kernel with each pixel's loads next to its store (LOADS_FIRST False).
    from fkl import _lowering
    from fkl._kernels import reset_stats

    configs = [(4, 1, False, True), (4, 1, True, False), (1, 1, True, True),
               (2, 1, True, True), (4, 1, True, True), (8, 1, True, True),
               (1, 2, True, True), (1, 4, True, True), (2, 2, True, True),
               (4, 2, True, True), (2, 4, True, True)]
    for n, m, one_tap, early in configs:
        _lowering.LOADS_FIRST = early
        reset_stats(clear_cache=True)  # LOADS_FIRST is read when a kernel is traced
        resize = fkl.Resize(224, 224)
        resize.one_tap = one_tap
        forced = fkl.compose(fkl.TensorRead(), fkl.Crop(rects), resize, *tail[1:],
                             target="gpu")
        forced.variants.columns, forced.variants.rows = n, m
        forced(frame, out=crops)
        d = float(np.abs(crops.to_host() - got).max())
        assert d <= 1e-6, f"columns={n} rows={m}: differs from the default by {d}"
        t = ev.stream_us(lambda forced=forced: forced(frame, out=crops), batch_reps)
        kind = ("4 taps" if not one_tap else "1 tap" if early else "1 tap, loads apart")
        row("batch", f"  1 call, {n} x {m} px/thread, {kind}", t, "us",
            f"columns={n} rows={m}; 1 call / 64 calls = {t / t64s:.3f}")
    _lowering.LOADS_FIRST = True
    reset_stats(clear_cache=True)


def bench_filters(ev: Events, rng: Any, reps: int) -> None:
    """Neighbourhood filters on 1080p x 3 uint8, in and out, steady-state device time
    (20 back-to-back calls), against a same-bytes copy and CV-CUDA."""
    from thork_core import _cuda
    from thork_core._device_array import DeviceArray

    drv = ev.drv
    batch_reps = max(reps // 4, 5)
    print("filters: 1920x1080x3 u8 -> u8", flush=True)
    src = DeviceArray.from_host(rng.integers(0, 256, (H, W, C)).astype(np.uint8))
    dst = DeviceArray((H, W, C), "uint8")
    nbytes = H * W * C
    t_copy = ev.stream_us(lambda: _cuda.check(
        drv.cuMemcpyDtoDAsync(dst.ptr, src.ptr, nbytes, 0), "copy"), batch_reps)
    row("filters", "cuMemcpyDtoD same bytes", t_copy, "us", "in + out = 2 x 6.2 MB")
    kernel15 = rng.normal(size=(15, 15)).astype(np.float32)
    # The tiled rows (tiled=True, the GPU default: the block's tile + halo staged in
    # shared memory first, docs/fkl-filters.md) run next to the untiled ones
    # (tiled=False), so one GPU run compares both.
    # "tiled v1": the earlier tiled kernel (one output per thread, every tile entry
    # border-mapped; the filter's `tile_v1` knob), "tiled rows=N": N output rows per
    # thread forced (`tile_rows`), next to the default tiled kernel (issue 21).
    # "tiled packed" / "tiled unpacked": the uint8 tile as one 32-bit word per pixel or
    # one array per channel (`tile_packed`).
    # "tiled vec=X" (session 9): the tile's whole-word loads and the output rows'
    # whole-word stores (`tile_vec`: "both", "load", "store"; the default: none).
    def knobs(op: Any, v1: bool = False, rows: int | None = None,
              packed: bool | None = None, vec: str | None = None) -> Any:
        op.tile_v1, op.tile_rows, op.tile_packed, op.tile_vec = v1, rows, packed, vec
        return op

    cases = {
        "box 3x3": (fkl.BoxFilter(3, tiled=False), True),
        "box 3x3 tiled v1": (knobs(fkl.BoxFilter(3, tiled=True), v1=True), True),
        "box 3x3 tiled rows=1": (knobs(fkl.BoxFilter(3, tiled=True), rows=1), True),
        "box 3x3 tiled rows=2": (knobs(fkl.BoxFilter(3, tiled=True), rows=2), True),
        "box 3x3 tiled rows=8": (knobs(fkl.BoxFilter(3, tiled=True), rows=8), True),
        "box 3x3 tiled packed": (knobs(fkl.BoxFilter(3, tiled=True), packed=True), True),
        "box 3x3 tiled unpacked": (knobs(fkl.BoxFilter(3, tiled=True), packed=False), True),
        "box 3x3 tiled vec=both": (knobs(fkl.BoxFilter(3, tiled=True), vec="both"), True),
        "box 3x3 tiled vec=load": (knobs(fkl.BoxFilter(3, tiled=True), vec="load"), True),
        "box 3x3 tiled vec=store": (knobs(fkl.BoxFilter(3, tiled=True), vec="store"), True),
        "box 3x3 tiled": (fkl.BoxFilter(3, tiled=True), True),
        "gaussian 3x3": (fkl.GaussianBlur(3, 0.8, tiled=False), True),
        "gaussian 3x3 tiled v1": (knobs(fkl.GaussianBlur(3, 0.8, tiled=True), v1=True), True),
        "gaussian 3x3 tiled rows=2": (knobs(fkl.GaussianBlur(3, 0.8, tiled=True), rows=2),
                                      True),
        "gaussian 3x3 tiled rows=8": (knobs(fkl.GaussianBlur(3, 0.8, tiled=True), rows=8),
                                      True),
        "gaussian 3x3 tiled packed": (knobs(fkl.GaussianBlur(3, 0.8, tiled=True),
                                            packed=True), True),
        "gaussian 3x3 tiled unpacked": (knobs(fkl.GaussianBlur(3, 0.8, tiled=True),
                                              packed=False), True),
        "gaussian 3x3 tiled vec=both": (knobs(fkl.GaussianBlur(3, 0.8, tiled=True),
                                              vec="both"), True),
        "gaussian 3x3 tiled vec=load": (knobs(fkl.GaussianBlur(3, 0.8, tiled=True),
                                              vec="load"), True),
        "gaussian 3x3 tiled vec=store": (knobs(fkl.GaussianBlur(3, 0.8, tiled=True),
                                               vec="store"), True),
        "gaussian 3x3 tiled": (fkl.GaussianBlur(3, 0.8, tiled=True), True),
        "median 5x5": (fkl.MedianBlur(5, tiled=False), False),
        "median 5x5 tiled": (fkl.MedianBlur(5, tiled=True), False),
        "linear 15x15": (fkl.LinearFilter(kernel15, tiled=False), False),
        "linear 15x15 tiled": (fkl.LinearFilter(kernel15, tiled=True), False),
    }
    times: dict[str, float] = {}
    results: dict[str, Any] = {}
    for name, (op, goal) in cases.items():
        pipe = fkl.compose(fkl.TensorRead(), op, fkl.TensorWrite(), target="gpu")
        pipe(src, out=dst)
        results[name] = dst.to_host()
        untiled = results.get(name.split(" tiled")[0])
        if " tiled" in name and untiled is not None:
            # The same pixels as the untiled kernel (an FMA contracted differently may
            # move a uint8 result by one at a rounding boundary: docs/fkl-filters.md;
            # box and uint8 Gaussian sum integers: equal).
            diff = np.abs(results[name].astype(np.int32) - untiled.astype(np.int32))
            exact = name.startswith(("box", "gaussian"))
            assert diff.max() <= (0 if exact else 1), \
                f"{name}: differs from untiled by {diff.max()}"
        t = ev.stream_us(lambda pipe=pipe: pipe(src, out=dst), batch_reps)
        times[name] = t
        note = f"at {100 * t_copy / t:.0f}% of copy" + (" (goal >= 80%)" if goal else "")
        row("filters", f"fkl {name}", t, "us", note)
    # OpenCV's own uint8 Gaussian (bit-exact fixed point) on this frame: fkl's equals it.
    try:
        import cv2

        want = cv2.GaussianBlur(src.to_host(), (3, 3), 0.8)
        bad = int((results["gaussian 3x3 tiled"] != want).sum())
        assert bad == 0, f"gaussian 3x3: {bad} pixels differ from cv2.GaussianBlur"
        print("  gaussian 3x3 equals cv2.GaussianBlur on every pixel", flush=True)
    except ImportError:
        print("  cv2 not importable: the Gaussian's OpenCV check skipped", flush=True)
    # Anchors: fkl's own copies of the frame (the grid kernel: a byte per load and
    # store, what the untiled/tiled filters pay; the flat kernel: vectorized), and the
    # tiled box on a misaligned view (the scalar fallback kernel, same pixels).
    for name, flat in (("copy grid (bytes)", False), ("copy flat (vectors)", True)):
        cp = fkl.compose(fkl.TensorRead(), fkl.TensorWrite(), target="gpu")
        cp.variants.flat = flat
        cp(src, out=dst)
        row("filters", f"fkl {name}", ev.stream_us(lambda cp=cp: cp(src, out=dst),
                                                   batch_reps), "us")
    big = DeviceArray((H * W * C + 4,), "uint8")
    _cuda.check(drv.cuMemcpyDtoDAsync(big.ptr + 1, src.ptr, H * W * C, 0), "copy")
    odd_src = DeviceArray.wrap(big.ptr + 1, (H, W, C), "uint8", owner=big)
    box = fkl.compose(fkl.TensorRead(), knobs(fkl.BoxFilter(3, tiled=True), vec="both"),
                      fkl.TensorWrite(), target="gpu")
    box(odd_src, out=dst)
    assert (dst.to_host() == results["box 3x3 tiled"]).all(), "misaligned box differs"
    row("filters", "fkl box 3x3 tiled, input +1 byte", ev.stream_us(
        lambda: box(odd_src, out=dst), batch_reps), "us", "vec=both: its scalar fallback")
    cvcuda = try_import("cvcuda")
    if cvcuda is None:
        print("  anchor missing: CV-CUDA (`import cvcuda` failed; pip install cvcuda-cu13)",
              flush=True)
        return
    anchors = {
        "gaussian 3x3": lambda s: cvcuda.gaussian(s, kernel_size=(3, 3), sigma=(0.8, 0.8),
                                                  border=cvcuda.Border.REFLECT101),
        "median 5x5": lambda s: cvcuda.median_blur(s, ksize=(5, 5)),
    }
    cvcuda_rows(ev, "filters", src, anchors, times, batch_reps)


def cvcuda_rows(ev: Events, group: str, src: Any, anchors: dict[str, Any],
                times: dict[str, float], batch_reps: int) -> None:
    """One row per CV-CUDA anchor ``call(tensor)`` on the 1080p u8 frame ``src``, with
    fkl's time for the same name against it; a failing anchor prints and is skipped."""
    import cvcuda
    from thork_core._device_array import DeviceArray

    one = DeviceArray.wrap(src.ptr, (1, H, W, C), "uint8", owner=src)
    for name, call in anchors.items():
        try:
            t_src = cvcuda.as_tensor(one, "NHWC")
            call(t_src)
            t_cv = ev.stream_us(lambda call=call, t_src=t_src: call(t_src), batch_reps)
            row(group, f"  CV-CUDA {name}", t_cv, "us",
                f"fkl / CV-CUDA = {times[name] / t_cv:.2f} (goal <= 1.0)")
        except Exception as exc:  # an anchor failing must not stop the run
            print(f"  CV-CUDA {name} anchor failed: {type(exc).__name__}: {str(exc)[:200]}")


def bench_resize(ev: Events, rng: Any, reps: int) -> None:
    """OpenCV-compatible resize modes (1080p x 3 u8 -> 1280x720 u8) and a cv_linear warp
    with a replicated border, steady-state device time, against CV-CUDA's resize (each
    interpolation) and warp_affine."""
    from thork_core._device_array import DeviceArray

    batch_reps = max(reps // 4, 5)
    dw, dh = 1280, 720
    print(f"resize: {W}x{H}x3 u8 -> {dw}x{dh} u8 (OpenCV modes)", flush=True)
    src = DeviceArray.from_host(rng.integers(0, 256, (H, W, C)).astype(np.uint8))
    dst = DeviceArray((dh, dw, C), "uint8")
    m = np.array([[W / dw * 0.98, 0.02, 3.0], [-0.02, H / dh * 0.98, 5.0]])
    cases = {
        "cv_linear": fkl.Resize(dw, dh, interpolation="cv_linear"),
        "cv_area": fkl.Resize(dw, dh, interpolation="cv_area"),
        "cv_cubic": fkl.Resize(dw, dh, interpolation="cv_cubic"),
        "cv_nearest": fkl.Resize(dw, dh, interpolation="cv_nearest"),
        "cv_nearest_exact": fkl.Resize(dw, dh, interpolation="cv_nearest_exact"),
        "warp cv_linear replicate": fkl.Warping(m, dw, dh, interpolation="cv_linear",
                                                border="REPLICATE"),
    }
    times: dict[str, float] = {}
    for name, op in cases.items():
        pipe = fkl.compose(fkl.TensorRead(), op, fkl.TensorWrite(), target="gpu")
        pipe(src, out=dst)
        times[name] = ev.stream_us(lambda pipe=pipe: pipe(src, out=dst), batch_reps)
        row("resize", f"fkl {name}", times[name], "us")
        if name == "cv_area":
            area = dst.to_host()
            try:
                import cv2

                want = cv2.resize(src.to_host(), (dw, dh), interpolation=cv2.INTER_AREA)
                diff = np.abs(area.astype(np.int32) - want.astype(np.int32))
                print(f"  cv_area vs cv2.resize INTER_AREA: max |diff| {diff.max()}, "
                      f"{100 * (diff == 0).mean():.2f}% equal", flush=True)
            except ImportError:
                pass
            # Each thread's pixels along x forced (the default: 1 at this size).
            for n in (2, 4):
                forced = fkl.compose(fkl.TensorRead(), fkl.Resize(
                    dw, dh, interpolation="cv_area"), fkl.TensorWrite(), target="gpu")
                forced.variants.columns = n
                forced(src, out=dst)
                assert (dst.to_host() == area).all(), f"cv_area columns={n} differs"
                row("resize", f"fkl cv_area columns={n}", ev.stream_us(
                    lambda forced=forced: forced(src, out=dst), batch_reps), "us")
    cvcuda = try_import("cvcuda")
    if cvcuda is None:
        print("  anchor missing: CV-CUDA (`import cvcuda` failed; pip install cvcuda-cu13)",
              flush=True)
        return
    anchors = {
        "cv_linear": lambda s: cvcuda.resize(s, (1, dh, dw, C), cvcuda.Interp.LINEAR),
        "cv_area": lambda s: cvcuda.resize(s, (1, dh, dw, C), cvcuda.Interp.AREA),
        "cv_cubic": lambda s: cvcuda.resize(s, (1, dh, dw, C), cvcuda.Interp.CUBIC),
        "cv_nearest": lambda s: cvcuda.resize(s, (1, dh, dw, C), cvcuda.Interp.NEAREST),
        "warp cv_linear replicate": lambda s: cvcuda.warp_affine(
            s, m.astype(np.float32), cvcuda.Interp.LINEAR | cvcuda.Interp.WARP_INVERSE_MAP,
            border_mode=cvcuda.Border.REPLICATE, border_value=[0.0]),
    }
    cvcuda_rows(ev, "resize", src, anchors, times, batch_reps)


def bench_batch_cpu(reps: int) -> None:
    """The crop batch on the CPU target: 16 crops of a 1080p frame in one call vs 16."""
    from thork_core import plugins

    if not plugins().target("cpu").available()[0]:
        return
    print("CPU target: 16 crops 200x200 of 1080p -> 64x64 normalized CHW", flush=True)
    rng = np.random.default_rng()
    frame = rng.integers(0, 256, (H, W, C)).astype(np.uint8)
    rects = [(int(x), int(y), 200, 200) for x, y in zip(
        rng.integers(0, W - 200, 16), rng.integers(0, H - 200, 16))]
    tail = [fkl.Resize(64, 64), fkl.Mul(1 / 255), fkl.Sub(MEAN), fkl.Div(STD),
            fkl.TensorSplit()]
    batch = fkl.compose(fkl.TensorRead(), fkl.Crop(rects), *tail, target="cpu")
    singles = [fkl.compose(fkl.TensorRead(), fkl.Crop(r), *tail, target="cpu") for r in rects]
    out = batch(frame)
    for k, p in enumerate(singles):
        assert np.array_equal(out[k], p(frame))

    t1 = wall_ms(lambda: batch(frame, out=out), reps)
    t16 = wall_ms(lambda: [p(frame, out=out[k]) for k, p in enumerate(singles)], reps)
    row("cpu target", "16 crops, fkl 1 call (cpu)", t1, "ms")
    row("cpu target", "  16 single calls (cpu)", t16, "ms", f"batch speedup {t16 / t1:.1f}x")


def launch_floor(stream: str = "legacy") -> dict[str, float]:
    """``cuLaunchKernel`` from C (bench/launch_floor.c) on a 3-pointer kernel: 10000 launches
    back to back (``sustained``) and bursts of 200 from an idle GPU (``burst``), on the
    legacy stream or a ``created`` non-blocking one."""
    try:
        from _floor import floor_kernel, measure_launch_floor
        from thork_core import gpu_arch

        matrix_add: Any = floor_kernel()

        with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
            f.write(matrix_add.artifact(gpu_arch(0)).data)
        return {
            "sustained": measure_launch_floor(f.name, "matrix_add", n=1024, rounds=21,
                                              stream=stream)["enqueue_us"],
            "burst": measure_launch_floor(f.name, "matrix_add", n=1024, rounds=201,
                                          launches=200, stream=stream)["enqueue_us"],
        }
    except Exception as exc:  # no C compiler: the rows say so
        print(f"  C floor skipped: {type(exc).__name__}: {exc}")
        return {}


def bench_compile() -> None:
    print("cold compile of a 6-op chain", flush=True)
    from thork_core import plugins

    target = "gpu" if plugins().target(None).name == "gpu" else "cpu"
    x = np.random.default_rng().standard_normal((7, 9, 3)).astype(np.float64)
    fkl.reset_stats(clear_cache=True)
    t0 = time.perf_counter()
    pipe = fkl.compose(fkl.TensorRead(), *six_ops(), fkl.TensorWrite(), target=target)
    pipe(x)
    cold = (time.perf_counter() - t0) * 1e3
    info = pipe.compile_info()
    row("compile", f"cold 6-op chain ({target})", cold, "ms",
        f"{info.compiler if info else '?'}; compile {info.compile_ms if info else 0:.0f} ms")
    fkl.reset_stats(clear_cache=True)
    t0 = time.perf_counter()
    fkl.compose(fkl.TensorRead(), *six_ops(), fkl.TensorWrite(), target=target)(x)
    row("compile", "same chain, disk-cache hit", (time.perf_counter() - t0) * 1e3, "ms")
    t0 = time.perf_counter()
    fkl.compose(fkl.TensorRead(), fkl.Mul(9.0), fkl.Add(8.0), fkl.Mul(7.0), fkl.Sub(6.0),
                fkl.Max(5.0), fkl.Min(4.0), fkl.TensorWrite(), target=target)(x)
    row("compile", "new values, memory hit", (time.perf_counter() - t0) * 1e3, "ms",
        f"builds so far: {fkl.stats()['builds']}")


def wall_ms(fn: Callable[[], Any], reps: int) -> float:
    """Median wall time of ``fn`` in milliseconds (one untimed warm-up call)."""
    fn()
    ts = []
    for _ in range(max(3, reps // 10)):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def bench_cpu(reps: int) -> None:
    from thork_core import plugins

    if not plugins().target("cpu").available()[0]:
        return
    print("CPU target vs NumPy, 6-op chain, 1080p x 3 float32", flush=True)
    rng = np.random.default_rng()
    host = rng.standard_normal((H, W, C)).astype(np.float32)
    out = np.empty_like(host)
    pipe = fkl.compose(fkl.TensorRead(), *six_ops(), fkl.TensorWrite(), target="cpu")
    pipe(host, out=out)
    assert np.allclose(out, six_ops_numpy(host), rtol=1e-5, atol=1e-5)

    t_fkl = wall_ms(lambda: pipe(host, out=out), reps)
    t_np = wall_ms(lambda: six_ops_numpy(host), reps)
    row("cpu target", "fkl fused (cpu)", t_fkl, "ms",
        f"{os.cpu_count()} cores; {describe(pipe, host)}")
    row("cpu target", "NumPy eager", t_np, "ms", f"fkl speedup {t_np / t_fkl:.1f}x")
    # The folded flat kernel, the GPU's default layout, on the CPU for comparison.
    folded = fkl.compose(fkl.TensorRead(), *six_ops(), fkl.TensorWrite(), target="cpu")
    folded.flat, folded.fold = True, True
    folded(host, out=out)
    assert np.allclose(out, six_ops_numpy(host), rtol=1e-5, atol=1e-5)
    row("cpu target", "  fkl flat folded (cpu)", wall_ms(lambda: folded(host, out=out), reps), "ms",
        describe(folded, host))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=".", help="folder for bench_fkl.json")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--only", choices=["filters", "crops", "resize", "hot"], action="append",
                    default=None, help="run only these groups (repeatable; default: every "
                    "group)")
    args = ap.parse_args()
    reps = 20 if args.quick else 100
    from thork_core._cuda import gpu_status

    gpu, why = gpu_status()
    if args.only:
        groups = {"filters": bench_filters, "crops": bench_crops, "resize": bench_resize}
        for name in dict.fromkeys(args.only):
            if gpu and name == "hot":
                bench_hot_call()
            elif gpu:
                groups[name](Events(), np.random.default_rng(), reps)
            else:
                print(f"no GPU ({why}): the {name} rows need one", flush=True)
    elif gpu:
        bench_gpu(reps)
        bench_batch(Events(), np.random.default_rng(), reps)
        bench_filters(Events(), np.random.default_rng(), reps)
        bench_resize(Events(), np.random.default_rng(), reps)
    else:
        print(f"no GPU ({why}): GPU rows skipped", flush=True)
    if args.only is None:
        bench_compile()
        bench_cpu(reps)
        bench_batch_cpu(reps)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "bench_fkl.json")
    with open(path, "w") as f:
        json.dump({"rows": ROWS, "python": sys.version.split()[0]}, f, indent=1)
    print(f"\nwrote {path}\n")
    print(f"{'group':<14} {'what':<34} {'value':>10} {'unit':<6} note")
    print("-" * 100)
    for r in ROWS:
        print(f"{r['group']:<14} {r['name']:<34} {r['value']:10.2f} {r['unit']:<6} {r['note']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
