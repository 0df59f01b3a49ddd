"""fkl video benchmark (issue 18): YUV frames into DNN-ready tensors, on the GPU.

    python bench/bench_video.py --out DIR [--quick]

Rows (GPU only; CV-CUDA anchors when `import cvcuda` works):
  * NV12 1080p -> RGB planar float normalized (BT.709), one kernel, vs a same-bytes
    cuMemcpyDtoD (bytes = the NV12 frame read + the float output written; goal >= 90%)
  * P010 1080p -> the same, vs its same-bytes copy
  * NV12 1080p -> RGB -> resize 224x224 -> normalize (mean/std) -> CHW, one kernel
  * pitched NV12 (a DeviceBuffer with rows 2048 bytes apart), read in place
  * RGB u8 -> NV12 (BT.709) written contiguous and into a pitched DeviceBuffer
  * CV-CUDA: cvtcolor NV12 -> RGB (goal: fkl's NV12 -> RGB u8 <= 1.0x its time), and the
    chain cvtcolor -> resize -> convertto -> normalize -> reformat (goal: fkl >= 2x faster)

Steady-state time per call (events around 20 back-to-back calls, bench_fkl's Events):
a call whose host work outlasts its kernel is timed by its host work, as a pipeline over
a stream of frames sees it. The pitched rows and their contiguous twins also note the
device-only time (queued behind a busy GPU, so the host's share is hidden; the busy
memset also flushes L2, so it can exceed the steady-state number) and how many GPUs are
visible: a per-call time far above the device-only time is host time (h-pitch7: every
pitched call used to re-plan on the host). Results go to DIR/bench_video.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fkl  # noqa: E402
import numpy as np  # noqa: E402
from bench_fkl import MEAN, ROWS, STD, Events, row  # noqa: E402

H, W = 1080, 1920


def bench_gpu(reps: int) -> None:
    from thork_core._cuda import check, device_count
    from thork_core._device_array import DeviceArray

    ev = Events()
    drv = ev.drv
    rng = np.random.default_rng()
    gpus = f"{device_count()} GPU(s) visible"

    def device_us(fn: Any) -> float:
        """Device time alone: ``fn`` queued behind a busy GPU (bench_fkl's busy mode)."""
        return ev.time_us(fn, reps, busy=True)

    def copy_us(nbytes: int) -> float:
        a, b = DeviceArray((nbytes,), "uint8"), DeviceArray((nbytes,), "uint8")
        return ev.stream_us(lambda: check(drv.cuMemcpyDtoDAsync(b.ptr, a.ptr, nbytes, 0),
                                          "copy"), reps)

    print("video: NV12 / P010 1080p -> RGB planar float normalized", flush=True)
    nv12 = DeviceArray.from_host(rng.integers(0, 256, (H * 3 // 2, W)).astype(np.uint8))
    p010 = DeviceArray.from_host((rng.integers(0, 1024, (H * 3 // 2, W)) << 6)
                                 .astype(np.uint16))
    chw = DeviceArray((3, H, W), "float32")
    t_nv12 = d_nv12 = 0.0
    for name, frame, depth in (("NV12", nv12, 8), ("P010", p010, 10)):
        pipe = fkl.compose(fkl.ReadYUV(name, to_rgb="bt709"), fkl.NormalizePixel(depth),
                           fkl.TensorSplit(), target="gpu")
        pipe(frame, out=chw)
        t = ev.stream_us(lambda p=pipe, f=frame: p(f, out=chw), reps)
        nbytes = frame.nbytes + chw.nbytes
        t_copy = copy_us(nbytes)
        note = ""
        if name == "NV12":
            t_nv12, d_nv12 = t, device_us(lambda p=pipe, f=frame: p(f, out=chw))
            note = f"; device-only {d_nv12:.1f} us"
        row("video", f"{name} 1080p -> RGB CHW float", t, "us",
            f"copy of same bytes {t_copy:.1f} us: fkl at {100 * t_copy / t:.0f}% "
            "(goal >= 90%)" + note)

    print("video: pitched NV12 (rows 2048 bytes apart)", flush=True)
    pitched = DeviceArray.from_host(rng.integers(0, 256, (H * 3 // 2, W)).astype(np.uint8),
                                    pitch=2048)
    pipe = fkl.compose(fkl.ReadYUV("NV12", to_rgb="bt709"), fkl.NormalizePixel(8),
                       fkl.TensorSplit(), target="gpu")
    pipe(pitched, out=chw)
    t = ev.stream_us(lambda: pipe(pitched, out=chw), reps)
    d = device_us(lambda: pipe(pitched, out=chw))
    row("video", "pitched NV12 -> RGB CHW float", t, "us",
        f"DeviceBuffer(pitch=2048), read in place; contiguous {t_nv12:.1f} us; device-only "
        f"{d:.1f} us (contiguous {d_nv12:.1f}); {gpus} (goal: within 10% of contiguous)")

    print("video: RGB u8 -> NV12 (BT.709) write, contiguous and pitched", flush=True)
    rgb = DeviceArray.from_host(rng.integers(0, 256, (H, W, 3)).astype(np.uint8))
    enc = fkl.compose(fkl.TensorRead(), fkl.RGB2YUV("bt709"), fkl.WriteYUV("NV12"),
                      target="gpu")
    flat_out = DeviceArray((H * 3 // 2, W), "uint8")
    pitched_out = DeviceArray((H * 3 // 2, W), "uint8", pitch=2048)
    for label, dst in (("contiguous", flat_out), ("pitched 2048", pitched_out)):
        enc(rgb, out=dst)
        t = ev.stream_us(lambda d=dst: enc(rgb, out=d), reps)
        d_enc = device_us(lambda d=dst: enc(rgb, out=d))
        t_copy = copy_us(rgb.nbytes + flat_out.nbytes)
        row("video", f"RGB 1080p -> NV12 {label}", t, "us",
            f"copy of same bytes {t_copy:.1f} us: fkl at {100 * t_copy / t:.0f}%; "
            f"device-only {d_enc:.1f} us; {gpus}")

    print("video: NV12 1080p -> RGB -> resize 224 -> normalize -> CHW", flush=True)
    out224 = DeviceArray((3, 224, 224), "float32")
    dnn = fkl.compose(fkl.ReadYUV("NV12", to_rgb="bt709"), fkl.Resize(224, 224),
                      fkl.NormalizePixel(8), fkl.Sub(MEAN), fkl.Div(STD), fkl.TensorSplit(),
                      target="gpu")
    dnn(nv12, out=out224)
    t_dnn = ev.stream_us(lambda: dnn(nv12, out=out224), reps)
    row("video", "NV12 -> RGB -> 224 -> norm -> CHW", t_dnn, "us", "one kernel")

    rgb8 = DeviceArray((H, W, 3), "uint8")
    cvt = fkl.compose(fkl.ReadYUV("NV12", to_rgb="bt601"), fkl.SaturateCast("uint8"),
                      fkl.TensorWrite(), target="gpu")
    cvt(nv12, out=rgb8)
    t_cvt = ev.stream_us(lambda: cvt(nv12, out=rgb8), reps)
    row("video", "NV12 -> RGB u8 (cvtcolor)", t_cvt, "us", "BT.601 limited, as OpenCV")

    if importlib.util.find_spec("cvcuda") is None:
        print("  anchor missing: CV-CUDA (pip install cvcuda-cu13)", flush=True)
        return
    try:
        import cvcuda

        src = cvcuda.as_tensor(nv12.reshape(1, H * 3 // 2, W, 1), "NHWC")
        code = cvcuda.ColorConversion.YUV2RGB_NV12

        def cv_cvt() -> Any:
            return cvcuda.cvtcolor(src, code)

        cv_cvt()
        t_cv = ev.stream_us(cv_cvt, reps)
        row("video", "  CV-CUDA cvtcolor NV12 -> RGB", t_cv, "us",
            f"fkl / CV-CUDA = {t_cvt / t_cv:.2f} (goal <= 1.0)")
        base = cvcuda.as_tensor(DeviceArray.from_host(
            np.array(MEAN, np.float32).reshape(1, 1, 1, 3)), "NHWC")
        scale = cvcuda.as_tensor(DeviceArray.from_host(
            np.array(STD, np.float32).reshape(1, 1, 1, 3)), "NHWC")

        def cv_chain() -> Any:
            rgb = cvcuda.cvtcolor(src, code)
            small = cvcuda.resize(rgb, (1, 224, 224, 3), cvcuda.Interp.LINEAR)
            f = cvcuda.convertto(small, np.float32, scale=1 / 255)
            n = cvcuda.normalize(f, base=base, scale=scale,
                                 flags=cvcuda.NormalizeFlags.SCALE_IS_STDDEV)
            return cvcuda.reformat(n, "NCHW")

        cv_chain()
        t_cvc = ev.stream_us(cv_chain, reps)
        row("video", "  CV-CUDA 5-op chain", t_cvc, "us",
            f"CV-CUDA / fkl = {t_cvc / t_dnn:.2f} (goal >= 2)")
    except Exception as exc:  # an anchor failing must not stop the run
        print(f"  CV-CUDA anchor failed: {type(exc).__name__}: {str(exc)[:200]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=".", help="folder for bench_video.json")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = ap.parse_args()
    from thork_core._cuda import gpu_status

    gpu, why = gpu_status()
    if gpu:
        bench_gpu(10 if args.quick else 50)
    else:
        print(f"no GPU ({why}): GPU rows skipped", flush=True)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "bench_video.json")
    with open(path, "w") as f:
        json.dump({"rows": ROWS, "python": sys.version.split()[0]}, f, indent=1)
    print(f"\nwrote {path}")
    for r in ROWS:
        print(f"{r['group']:<14} {r['name']:<34} {r['value']:10.2f} {r['unit']:<6} {r['note']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
