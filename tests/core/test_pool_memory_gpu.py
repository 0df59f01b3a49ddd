"""The device pool gives back what launches and pipes take (docs/debug-mode.md): after
10,000 launches (NumPy arguments staged through the pool, device outputs allocated per
call) and 1,000 fkl pipes created, called and dropped, the pool's used memory is back at
its start value; after trimming, its reserved memory is within 2 MiB of the start."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import thork as tk

pytestmark = pytest.mark.gpu

MiB = 1 << 20


@tk.jit(target="gpu")
def _scale(out: tk.DevicePointer[tk.dt.float32], a: tk.DevicePointer[tk.dt.float32],
           n: tk.dt.int32, bid: tk.Uint[tk.BlockIdx], tid: tk.Uint[tk.ThreadIdx],
           bdm: tk.Uint[tk.BlockDim]):
    i = bid * bdm + tid
    with tk.if_(i < n):
        out[i] = a[i] * 3.0


def _settled(pool: object) -> tuple[int, int]:
    from thork_core.runtime import driver

    gc.collect()
    drv = driver()
    assert int(drv.cuCtxSynchronize()[0]) == 0
    return pool.used_bytes(), pool.reserved_bytes()  # type: ignore[attr-defined]


def test_pool_returns_to_start_after_launches_and_pipes(rng: np.random.Generator) -> None:
    import fkl
    from thork_core import DeviceArray
    from thork_core.runtime import device_pool

    pool = device_pool(0)
    n = 1001
    a = rng.standard_normal(n).astype(np.float32)
    out = np.empty_like(a)
    da = DeviceArray.from_host(a)
    frame = DeviceArray.from_host(rng.integers(0, 256, (31, 17, 3), dtype=np.uint8))
    _scale[(n + 127) // 128, 128](out, a, n)  # warm: compiled, staging set up
    pool.trim()
    used0, reserved0 = _settled(pool)
    for k in range(10_000):
        if k % 2:
            _scale[(n + 127) // 128, 128](out, a, n)  # staged through the pool
        else:
            dout = DeviceArray((n,), "float32")  # a pool allocation per launch
            _scale[(n + 127) // 128, 128](dout, da, n)
            del dout
    np.testing.assert_array_equal(out, a * np.float32(3.0))
    for k in range(1_000):
        pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(float(k % 7)), fkl.TensorWrite(),
                           target="gpu")
        res = pipe(frame)
        if k == 999:  # the same chain on the CPU target (NumPy in, NumPy out)
            host = fkl.compose(fkl.TensorRead(), fkl.Mul(5.0), fkl.TensorWrite(),
                               target="cpu")(frame.to_host())
            np.testing.assert_array_equal(res.to_host(), host)
        del pipe, res
    used1, _ = _settled(pool)
    assert used1 == used0, f"pool used memory {used0} -> {used1} bytes"
    pool.trim()
    _, reserved1 = _settled(pool)
    assert abs(reserved1 - reserved0) <= 2 * MiB, f"reserved {reserved0} -> {reserved1}"
    del da, frame
