"""Kernels to profile under Nsight Compute (session 9, issues 14 and 21): each launched
twice on the legacy stream, in this order — the 64-crop batch (4K u8 -> 64 x 224^2
normalized CHW float) with 4 and with 1 pixel per thread, the tiled 3x3 Gaussian and box
on 1080p x 3 u8.

    ncu --clock-control none --kernel-name regex:fkl_ --launch-count 8 \\
        --section SpeedOfLight ... python3 bench/diag_fkl_profile.py
"""

from __future__ import annotations

import fkl
import numpy as np
from thork_core import _cuda
from thork_core._device_array import DeviceArray

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def main() -> None:
    rng = np.random.default_rng(0)
    frame = DeviceArray.from_host(rng.integers(0, 256, (2160, 3840, 3)).astype(np.uint8))
    rects = [(int(x), int(y), 448, 448) for x, y in zip(
        rng.integers(0, 3840 - 448, 64), rng.integers(0, 2160 - 448, 64))]
    crops = DeviceArray((64, 3, 224, 224), "float32")
    tail = [fkl.Resize(224, 224), fkl.Mul(1 / 255), fkl.Sub(MEAN), fkl.Div(STD),
            fkl.TensorSplit()]
    src = DeviceArray.from_host(rng.integers(0, 256, (1080, 1920, 3)).astype(np.uint8))
    dst = DeviceArray((1080, 1920, 3), "uint8")
    runs = []
    for n in (4, 1):
        pipe = fkl.compose(fkl.TensorRead(), fkl.Crop(rects), *tail, target="gpu")
        pipe.variants.columns = n
        runs.append(lambda pipe=pipe: pipe(frame, out=crops))
    for op in (fkl.GaussianBlur(3, 0.8), fkl.BoxFilter(3)):
        pipe = fkl.compose(fkl.TensorRead(), op, fkl.TensorWrite(), target="gpu")
        runs.append(lambda pipe=pipe: pipe(src, out=dst))
    for fn in runs:
        fn()
        fn()
    _cuda.check(_cuda.driver().cuCtxSynchronize(), "sync")
    print("profiled: crops cols=4, crops cols=1, gaussian 3x3, box 3x3 (2 launches each)")


if __name__ == "__main__":
    main()
