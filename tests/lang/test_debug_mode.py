"""Debug mode (docs/debug-mode.md): every array access bounds-checked, on the CPU target
and the GPU; the first violation of a launch raises BoundsError naming the kernel, the
array, the index, the bound and the Python line. Non-debug code carries no checks."""

from __future__ import annotations

import inspect
import os

import numpy as np
import pytest
import thork as tk
from helpers import compiles_for_gpu, poisoned, random_array, run_python
from thork_core import BoundsError, CudaRenderer

F32 = tk.DevicePointer[tk.dt.float32]
I32 = tk.DevicePointer[tk.dt.int32]
Bid, Tid, Bdm = tk.Uint[tk.BlockIdx], tk.Uint[tk.ThreadIdx], tk.Uint[tk.BlockDim]


def _line(fn: object, marker: str) -> int:
    """The source line of ``fn`` (a kernel's Python function) holding ``marker``."""
    lines, first = inspect.getsourcelines(fn)  # type: ignore[arg-type]
    return first + next(k for k, text in enumerate(lines) if marker in text)


def _shift_read(debug: bool) -> tk.Kernel:
    @tk.jit(debug=debug)
    def shift_read(a: F32, out: F32, n: tk.dt.int32, k: tk.dt.int32, bid: Bid, tid: Tid,
                   bdm: Bdm):
        i = bid * bdm + tid
        with tk.if_(i < n):
            out[i] = a[i + k] * 2.0  # <- read
    return shift_read


def test_global_load_out_of_bounds_is_reported(target: str, rng: np.random.Generator) -> None:
    k = _shift_read(True)
    n = 37
    a = random_array(rng, n, np.float32)
    out = poisoned(n, np.float32)
    with pytest.raises(BoundsError) as info:
        k[2, 32](a, out, n, 3, target=target)
    e = info.value
    assert (e.kernel, e.array, e.param_index) == ("shift_read", "a", 0)
    assert e.hi == n and e.lo == 0 and n <= e.index < n + 3
    assert e.file == os.path.abspath(__file__)
    assert e.line == _line(k.fn, "# <- read")
    assert e.thread[0] + 32 * e.block[0] == e.index - 3
    assert f"{os.path.basename(__file__)}:{e.line}" in str(e) and "'a'" in str(e)
    # The record is cleared: an in-bounds launch of the same kernel runs and is right.
    out = poisoned(n, np.float32)
    k[2, 32](a, out, n - 3, 3, target=target)
    np.testing.assert_array_equal(out[:n - 3], a[3:] * 2)
    assert np.isnan(out[n - 3:]).all()
    compiles_for_gpu(k)


def test_negative_index_is_reported(target: str, rng: np.random.Generator) -> None:
    k = _shift_read(True)
    a = random_array(rng, 19, np.float32)
    with pytest.raises(BoundsError) as info:
        k[1, 32](a, poisoned(19, np.float32), 19, -2, target=target)
    # i is uint32 (block index arithmetic), so i - 2 wraps for threads 0 and 1: the access
    # really is 4 Gi elements away, as the unchecked C++ would make it.
    assert info.value.index in (2**32 - 2, 2**32 - 1)


def test_out_of_bounds_store_is_dropped_and_reported(target: str) -> None:
    @tk.jit(debug=True)
    def scatter(out: I32, idx: I32, n: tk.dt.int32, bid: Bid, tid: Tid, bdm: Bdm):
        i = bid * bdm + tid
        with tk.if_(i < n):
            out[idx[i]] = i  # <- store

    n = 23
    idx = np.arange(n, dtype=np.int32)[::-1].copy()
    idx[5] = n + 1000  # far outside: without checks this writes past the array
    out = np.full(n + 8, -7, np.int32)[:n]  # a view: the tail would show a stray write
    base = out.base
    with pytest.raises(BoundsError) as info:
        scatter[1, 32](out, idx, n, target=target)
    e = info.value
    assert (e.array, e.index, e.hi, e.param_index) == ("out", n + 1000, n, 0)
    assert e.line == _line(scatter.fn, "# <- store")
    assert (base[n:] == -7).all()
    expect = np.full(n, -7, np.int32)
    ok = np.arange(n) != 5
    expect[idx[ok]] = np.arange(n, dtype=np.int32)[ok]
    np.testing.assert_array_equal(out, expect)


def test_shared_local_and_module_arrays(target: str) -> None:
    TABLE = tk.const_array(np.arange(5, dtype=np.float32))

    @tk.jit(debug=True)
    def spaces(out: F32, which: tk.dt.int32, j: tk.dt.int32, tid: Tid):
        s = tk.shared_array(tk.dt.float32, 32)
        loc = tk.local_array(tk.dt.float32, 6)
        s[tid] = 1.0
        loc[0] = 2.0
        tk.syncthreads()
        with tk.if_(tid == 0):
            with tk.if_(which == 0):
                out[0] = s[j]  # <- shared
            with tk.if_(which == 1):
                out[0] = loc[j]  # <- local
            with tk.if_(which == 2):
                out[0] = TABLE[j]  # <- module

    for which, space, bound, marker in ((0, "shared", 32, "# <- shared"),
                                        (1, "local", 6, "# <- local"),
                                        (2, "module", 5, "# <- module")):
        out = poisoned(1, np.float32)
        spaces[1, 32](out, which, bound - 1, target=target)  # the last element: fine
        with pytest.raises(BoundsError) as info:
            spaces[1, 32](poisoned(1, np.float32), which, bound, target=target)
        e = info.value
        assert e.hi == bound and e.index == bound and e.param_index is None, space
        assert e.line == _line(spaces.fn, marker)
        assert space in str(e)
    compiles_for_gpu(spaces)


def _dyn_kernel() -> tk.Kernel:
    @tk.jit(debug=True)
    def dyn(out: F32, tid: Tid, bdm: Bdm):
        buf = tk.dynamic_shared(tk.dt.float32)
        for i in tk.range(tid, 1024, bdm):  # 4 KiB of dynamic shared memory
            buf[i] = tk.cast(i, tk.dt.float32)  # <- dynamic
        tk.syncthreads()
        with tk.if_(tid == 0):
            out[0] = buf[1023]
    return dyn


def test_dynamic_shared_bound_is_the_launch_bytes(target: str) -> None:
    """Issue 13's leftover: 4 KiB of dynamic shared memory used, 0 bytes launched."""
    dyn = _dyn_kernel()
    with pytest.raises(BoundsError) as info:
        dyn[1, 64](poisoned(1, np.float32), target=target)
    e = info.value
    assert e.hi == 0 and "dynamic shared" in str(e) and e.line == _line(dyn.fn, "# <- dynamic")
    with pytest.raises(BoundsError) as info:  # one float short
        dyn[1, 64, 4092](poisoned(1, np.float32), target=target)
    assert info.value.hi == 1023 and info.value.index == 1023
    out = poisoned(1, np.float32)
    dyn[1, 64, 4096](out, target=target)
    assert out[0] == 1023.0
    compiles_for_gpu(dyn)


def test_views_device_functions_and_atomics(target: str) -> None:
    @tk.func
    def get(p: F32, i: tk.dt.int32) -> tk.dt.float32:
        return p[i]  # <- in func

    @tk.jit(debug=True)
    def views(a: F32, hist: I32, out: F32, i: tk.dt.int32, b: tk.dt.int32, tid: Tid):
        with tk.if_(tid == 0):
            out[0] = get(a + 3, i)
            tk.atomic_add(hist, b, 1)  # <- atomic

    a = np.arange(10, dtype=np.float32)
    hist = np.zeros(4, np.int32)
    out = poisoned(1, np.float32)
    views[1, 32](a, hist, out, 6, 3, target=target)  # a[9], hist[3]: fine
    assert out[0] == 9.0 and hist.tolist() == [0, 0, 0, 1]
    with pytest.raises(BoundsError) as info:
        views[1, 32](a, hist, out, 7, 0, target=target)  # a[10] through the view
    e = info.value
    assert e.array == "p" and e.line == _line(get.fn, "# <- in func")
    assert (e.index, e.lo, e.hi) == (7, -3, 7)  # the view starts 3 elements in: 7 remain
    views[1, 32](a, hist, out, -3, 1, target=target)  # a[0] through the view: fine
    assert out[0] == 0.0
    with pytest.raises(BoundsError) as info:
        views[1, 32](a, hist, out, 0, 4, target=target)
    assert (info.value.array, info.value.index, info.value.hi) == ("hist", 4, 4)
    assert info.value.line == _line(views.fn, "# <- atomic")
    compiles_for_gpu(views)


def test_shaped_arrays_and_results_match(target: str, rng: np.random.Generator) -> None:
    @tk.jit(debug=True)
    def transpose(a: tk.DevicePointer[tk.dt.float32, 2], out: tk.DevicePointer[tk.dt.float32, 2],
                  bid: Bid, tid: Tid, bdm: Bdm):
        i = bid * bdm + tid
        rows, cols = a.shape
        with tk.if_(i < rows * cols):
            out[i % cols, i // cols] = a[i // cols, i % cols]

    a = random_array(rng, (7, 13), np.float32)
    out = poisoned((13, 7), np.float32)
    transpose[3, 32](a, out, target=target)
    np.testing.assert_array_equal(out, a.T)
    with pytest.raises(BoundsError) as info:  # out is one row short
        transpose[3, 32](a, poisoned((12, 7), np.float32), target=target)
    assert info.value.array == "out" and info.value.hi == 84


@pytest.mark.plugin("cpu")
def test_non_debug_source_has_no_checks() -> None:
    plain, checked = _shift_read(False), _shift_read(True)
    src = plain.cuda_source
    assert "thork_at(" not in src and "thork_dbg" not in src and "thork_span" not in src
    assert [p.name for p in plain.params] == ["a", "out", "n", "k"]
    assert "thork_at(" in checked.cuda_source and "thork_dbg_record" in checked.cuda_source
    # Instrumenting builds a new IR: the plain kernel renders byte for byte as before.
    before = CudaRenderer().render(plain.ir)
    from thork_core import instrument

    instrument(plain.ir)
    assert CudaRenderer().render(plain.ir) == before
    cpu_plain = plain.source_for("cpu")
    assert "thork_at(" not in cpu_plain and "thork_dbg" not in cpu_plain


@pytest.mark.plugin("cpu")
def test_debug_is_part_of_the_cache_key() -> None:
    plain, checked = _shift_read(False), _shift_read(True)
    assert plain.compile(target="cpu").key != checked.compile(target="cpu").key


def test_thork_debug_environment_variable() -> None:
    code = ("import thork as tk\n"
            "@tk.jit\n"
            "def k(a: tk.DevicePointer[tk.dt.float32]):\n"
            "    a[0] = 1.0\n"
            "print(k.debug, 'thork_at(' in k.cuda_source)\n")
    for value, expect in (("1", "True True"), ("0", "False False"), ("", "False False")):
        env = {**os.environ, "THORK_DEBUG": value}
        assert run_python(code, env=env).strip() == expect, value
    assert _shift_read(False).debug is False  # an explicit argument wins over the variable


def test_prepared_launch_of_a_debug_build_is_checked() -> None:
    """Front-ends' check-free path (Executable.prepare) still reads the record."""
    from helpers import TARGETS
    from thork_core import build_kernel

    if "cpu" not in TARGETS:
        pytest.skip("host pointers need the CPU target")
    k = _shift_read(True)
    exe, _ = build_kernel(k.ir, "cpu")
    assert exe.launcher is None  # no unchecked launcher for fast paths to take
    a = np.arange(10, dtype=np.float32)
    out = poisoned(10, np.float32)
    # Values per parameter: a, out (pointers, given per call), n, k, span_a, span_out.
    bad = exe.prepare((1, 1, 1), (32, 1, 1), [0, 0, 10, 1, 10, 10])
    with pytest.raises(BoundsError) as info:
        bad.call([a.ctypes.data, out.ctypes.data], 0)
    assert (info.value.array, info.value.index, info.value.hi) == ("a", 10, 10)
    good = exe.prepare((1, 1, 1), (32, 1, 1), [0, 0, 9, 1, 10, 10])
    out = poisoned(10, np.float32)
    good.call([a.ctypes.data, out.ctypes.data], 0)
    np.testing.assert_array_equal(out[:9], a[1:] * 2)
