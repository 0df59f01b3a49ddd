"""Shifts by any count (docs/guarantees.md): a count outside ``[0, bits)`` of the promoted
operand type shifts every bit out — ``<<`` gives 0, ``>>`` gives -1 for a negative signed
value and 0 otherwise — as NumPy defines them, the same on the CPU target and the GPU.
Checked against a Python-integer model and against NumPy itself."""

from __future__ import annotations

import numpy as np
import pytest
import thork as tk
from helpers import compiles_for_gpu, poisoned

TYPES = ["int32", "int64", "uint32", "uint64", "int8", "uint16"]


def promoted(name: str) -> np.dtype:
    d = np.dtype(name)
    return np.dtype(np.int32) if d.itemsize < 4 else d


def model(a: int, c: int, op: str, d: np.dtype) -> int:
    """The rule on Python integers: no C++ involved."""
    bits = d.itemsize * 8
    if not 0 <= c < bits:
        return -1 if (op == "shr" and a < 0) else 0
    v = (a << c) if op == "shl" else (a >> c)
    v &= (1 << bits) - 1
    if d.kind == "i" and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def shift_kernel(name: str) -> tk.Kernel:
    t, r = getattr(tk.dt, name), getattr(tk.dt, str(promoted(name)))
    i32 = tk.dt.int32

    @tk.jit
    def shifts(left: tk.DevicePointer[r], right: tk.DevicePointer[r], a: tk.DevicePointer[t],
               c: tk.DevicePointer[i32], n: i32):
        i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
        with tk.if_(i < n):
            x = tk.cast(a[i], r)
            k = tk.cast(c[i], r)
            left[i] = x << k
            right[i] = x >> k

    shifts.__name__ = f"shifts_{name}"
    return shifts


@pytest.mark.parametrize("name", TYPES)
def test_shift_counts_match_the_model_and_numpy(target: str, rng: np.random.Generator,
                                                name: str) -> None:
    d, r = np.dtype(name), promoted(name)
    bits = r.itemsize * 8
    info = np.iinfo(d)
    counts = [0, 1, bits - 1, bits, bits + 1, 2 * bits, 200, 2**31 - 1]
    if r.kind == "i":
        counts += [-1, -bits, -(2**31)]
    n = int(rng.integers(200, 400)) | 1
    a = rng.integers(int(info.min), int(info.max), size=n, endpoint=True, dtype=d)
    a[:4] = [info.min, info.max, 0, 1 if d.kind == "u" else -1]
    c = np.array([counts[k % len(counts)] for k in range(n)], np.int32)
    rng.shuffle(c)
    left, right = poisoned(n, r), poisoned(n, r)
    k = shift_kernel(name)
    k[(n + 127) // 128, 128](left, right, a, c, n, target=target)
    ai = [int(v) for v in a.astype(r).astype(object)]
    ci = [int(v) if r.kind == "i" else int(v) % 2**bits for v in c.astype(object)]
    np.testing.assert_array_equal(left, np.array([model(x, y, "shl", r) for x, y in
                                                  zip(ai, ci)], r))
    np.testing.assert_array_equal(right, np.array([model(x, y, "shr", r) for x, y in
                                                   zip(ai, ci)], r))
    # NumPy's own shifts agree (the counts in the promoted type, as the kernel has them).
    cr = c.astype(r)
    np.testing.assert_array_equal(left, np.left_shift(a.astype(r), cr))
    np.testing.assert_array_equal(right, np.right_shift(a.astype(r), cr))
    compiles_for_gpu(k)
