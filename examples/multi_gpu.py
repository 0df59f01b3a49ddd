"""Every visible GPU at once: one thread per device runs a kernel and an fkl pipe on arrays
living on that device, each result checked against NumPy.

Launches follow their arrays (a ``DeviceArray(..., device=k)`` runs on device k; the kernel
is loaded there once, compiled for that device's architecture); ``device=k`` routes host
(NumPy) inputs. On the CPU target the same code runs once, on the host.
Usage: python examples/multi_gpu.py
"""

from __future__ import annotations

import threading

import fkl
import numpy as np
import thork as tk
from thork_core import plugins
from thork_core.runtime import DeviceArray, device_count


@tk.jit
def saxpy(out: tk.DevicePointer[tk.dt.float32], x: tk.DevicePointer[tk.dt.float32],
          y: tk.DevicePointer[tk.dt.float32], a: tk.dt.float32, n: tk.dt.int32,
          bid: tk.Uint[tk.BlockIdx], tid: tk.Uint[tk.ThreadIdx], bdm: tk.Uint[tk.BlockDim]):
    i = bid * bdm + tid
    with tk.if_(i < n):
        out[i] = a * x[i] + y[i]


target = plugins().target(None).name
devices = list(range(device_count())) if target == "gpu" else [None]
pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(1 / 255.0), fkl.Sub(0.5), fkl.TensorWrite(),
                   target=target)
errors: list[BaseException] = []


def work(device: int | None) -> None:
    try:
        rng = np.random.default_rng(device)
        n = 1_000_003
        x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
        want = np.float32(2.5) * x + y
        frame = rng.integers(0, 256, (481, 641, 3), dtype=np.uint8)
        if device is None:  # the CPU target: NumPy arrays in and out
            out = np.full(n, np.nan, np.float32)
            saxpy[(n + 255) // 256, 256](out, x, y, 2.5, n)
            got, img = out, pipe(frame)
        else:  # arrays on `device`: kernel and pipe run there
            dx, dy = DeviceArray.from_host(x, device=device), DeviceArray.from_host(y,
                                                                                    device=device)
            dout = DeviceArray(n, "float32", device=device)
            saxpy[(n + 255) // 256, 256](dout, dx, dy, 2.5, n)
            dimg = pipe(fkl.DeviceBuffer.from_host(frame, device=device))
            assert dimg.__dlpack_device__() == (2, device)  # the output lives there too
            got, img = dout.to_host(), dimg.to_host()
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(img, frame * np.float32(1 / 255.0) - np.float32(0.5),
                                   rtol=1e-6, atol=1e-6)
    except BaseException as exc:  # noqa: BLE001 - reported below
        errors.append(exc)


threads = [threading.Thread(target=work, args=(d,)) for d in devices]
for t in threads:
    t.start()
for t in threads:
    t.join()
if errors:
    raise errors[0]
where = f"{len(devices)} GPU(s)" if devices != [None] else "the cpu target"
print(f"saxpy and a pipe on {where}, one thread each: results match NumPy")
print("ok")
