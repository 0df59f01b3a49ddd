"""NumPy arguments that share memory (the same array twice, overlapping views of one
buffer) behave as one memory on every target: the CPU target runs in the arrays
themselves; the GPU target makes one device copy of each group of overlapping arrays
(docs/targets.md, "NumPy arguments"). Values against NumPy doing the same on the same
memory (``tests/helpers/aliasing.py``), odd sizes, poisoned outputs; the fake driver's
account of the GPU path's copies is ``test_alias_trace.py``."""

from __future__ import annotations

import numpy as np
import pytest
import thork as tk
from helpers import TARGETS
from helpers.aliasing import CASES, KERNELS, build, shifted
from thork_core.runtime import configure_staging

SIZES = (1 + 9, 131, 4099)  # (each case needs a few elements beyond its shift)


def _launch(case, length, d, rng, target, make=None):
    buf, args, want, want_seen = build(case, length, d, rng, make)
    n = args[5]
    KERNELS[case.kernel][(n + 127) // 128, 128](*args, target=target)
    return buf, args[2], want, want_seen


@pytest.mark.skipif("cpu" not in TARGETS, reason="no CPU target")
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
@pytest.mark.parametrize("length", SIZES)
def test_aliased_numpy_arguments_on_the_cpu_target(rng, case, length):
    d = int(rng.integers(1, 4))
    buf, seen, want, want_seen = _launch(case, length, d, rng, "cpu")
    np.testing.assert_array_equal(buf, want)
    np.testing.assert_array_equal(seen, want_seen)


def test_the_models_differ_from_separate_copies(rng):
    """The cases detect separate copies: running each model on copies of the views
    (what the GPU target did before session 13) gives another answer for every aliasing
    case, and the same for the adjacent halves (no byte shared)."""
    from helpers.aliasing import MODELS

    for case in CASES:
        buf, (y, x, seen, dy, dx, n), want, want_seen = build(case, 131, 2, rng)
        yc, xc = y.copy(), x.copy()
        sc = xc if case.seen_is_buf else seen.copy()
        MODELS[case.kernel](yc, xc, sc, dy, dx, n)
        separate = buf.copy()
        ys, xs, *_ = case.views(separate, 131, 2)
        ys[...] = yc  # copied back in parameter order: the later copy wins
        xs[...] = xc
        same = np.array_equal(separate, want) and np.array_equal(
            sc if not case.seen_is_buf else separate, want_seen)
        assert same == (case.name == "adjacent"), case.name


@pytest.mark.gpu
@pytest.mark.parametrize("pinned", [False, True], ids=["pageable", "pinned"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_aliased_numpy_arguments_on_the_gpu(rng, case, pinned):
    """The GPU target gives the CPU target's answer (pageable arrays staged, page-locked
    ones copied directly; the process's first NumPy launch binds through the full path,
    the later ones through the fast one); staging in small chunks splits the written
    ranges too."""
    make = (lambda k: tk.pinned_empty(k, np.float32)) if pinned else None
    for length in SIZES + (300007,):
        for _ in range(2):
            d = int(rng.integers(1, 4))
            buf, seen, want, want_seen = _launch(case, length, d, rng, "gpu", make)
            np.testing.assert_array_equal(buf, want)
            np.testing.assert_array_equal(seen, want_seen)
    before = configure_staging(chunk_bytes=8192, inline_bytes=0)
    try:
        buf, seen, want, want_seen = _launch(case, 100003, 3, rng, "gpu", make)
    finally:
        configure_staging(**before)
    np.testing.assert_array_equal(buf, want)
    np.testing.assert_array_equal(seen, want_seen)


@pytest.mark.gpu
def test_aliased_numpy_arguments_from_threads_on_the_gpu(rng):
    from helpers import run_threads

    seeds = rng.integers(0, 1 << 31, 8)

    def work(k: int) -> None:
        r = np.random.default_rng(int(seeds[k]))
        make = (lambda m: tk.pinned_empty(m, np.float32)) if k % 2 else None
        for it in range(12):
            case = CASES[(k + it) % len(CASES)]
            buf, seen, want, want_seen = _launch(case, int(r.integers(10, 5000)),
                                                 int(r.integers(1, 4)), r, "gpu", make)
            assert np.array_equal(buf, want) and np.array_equal(seen, want_seen), case.name

    run_threads(work, 8)


class _Pool:
    """Device allocations at made-up 4 KiB-aligned addresses (recorded)."""

    def __init__(self) -> None:
        self.next, self.allocs = 1 << 20, []

    def alloc(self, nbytes: int, stream: int) -> int:
        ptr, self.next = self.next, self.next + ((nbytes + 8191) & ~4095)
        self.allocs.append((ptr, nbytes))
        return ptr


def _executable(monkeypatch):
    from thork_core import _cuda
    from thork_core._gpu import CudaExecutable
    from thork_core._launch import PyLauncher, param_kinds

    monkeypatch.setattr(_cuda, "device_count", lambda: 1)
    exe = CudaExecutable()
    exe._setup(shifted.ir, 0, PyLauncher(0, 1, 0, param_kinds(shifted.ir.params),
                                         lambda *a: None))
    return exe


def test_group_pointers_keep_each_arrays_alignment(monkeypatch):
    """Views at offsets whose alignments differ (a float32 view 4 bytes into a 256-byte
    aligned buffer, another 16 bytes in): the union's device copy starts 4 bytes into its
    block, so every parameter's device pointer is aligned (modulo 256) as its array is;
    one allocation, the written span (y's range) alone comes back."""
    from thork_core._gpu import _HostArray

    raw = np.empty(4096 + 256, np.uint8)
    base = raw[(-raw.ctypes.data) % 256:][:4096].view(np.float32)
    assert base.ctypes.data % 256 == 0
    y, x = base[1:900], base[4:1000]  # y written, x read: overlapping
    seen = np.empty(200, np.float32)
    exe, pool = _executable(monkeypatch), _Pool()
    host = [(0, _HostArray(y.ctypes.data, y.nbytes, y)),
            (1, _HostArray(x.ctypes.data, x.nbytes, x)),
            (2, _HostArray(seen.ctypes.data, seen.nbytes, seen))]
    values: list = [y, x, seen, 0, 3, 200]
    transfers: list = []
    owned: list[int] = []
    exe._bind_aliased(values, host, transfers, owned, pool, 0)
    assert len(pool.allocs) == 2 and sorted(owned) == sorted(p for p, _ in pool.allocs)
    for k, a in enumerate((y, x)):
        assert values[k] % 256 == a.ctypes.data % 256
    assert values[1] - values[0] == x.ctypes.data - y.ctypes.data
    group = next(t for t in transfers if t.host == y.ctypes.data)
    assert group.nbytes == x.ctypes.data + x.nbytes - y.ctypes.data
    assert group.device == values[0] and group.back and not group.direct
    assert group.spans == ((0, y.nbytes),)  # x's bytes past y's end are not copied back
    assert [p for p, n in pool.allocs if n == group.nbytes + 4]  # the 4-byte lead


def test_overlap_checks_compare_byte_ranges():
    from thork_core._gpu import _HostArray, _overlapping, _written_spans
    from thork_core._staging import Transfer

    def h(ptr: int, nbytes: int) -> tuple[int, _HostArray]:
        return 0, _HostArray(ptr, nbytes, None)

    assert not _overlapping([h(100, 50)], [])
    assert not _overlapping([h(100, 50), h(150, 50)], [])  # adjacent
    assert _overlapping([h(100, 50), h(149, 2)], [])
    assert _overlapping([h(100, 50), h(100, 50)], [])  # the same range
    assert not _overlapping([h(120, 0), h(100, 50)], [])  # empty arrays share nothing
    assert _overlapping([h(300, 8), h(0, 10), h(5, 1)], [])  # any pair, any order
    assert _overlapping([h(100, 8)], [Transfer(96, 0, 8, True, False, True)])
    assert not _overlapping([h(100, 8)], [Transfer(92, 0, 8, True, False, True)])
    m = [(10, 20, 0, True, False, None), (15, 40, 1, False, False, None),
         (30, 40, 2, True, False, None)]
    assert _written_spans(m, 10, 40) == ((0, 10), (20, 10))
    assert _written_spans(m[:1] + [(20, 40, 2, True, False, None)], 10, 40) == ()
    assert _written_spans([(10, 40, 1, False, False, None)], 10, 40) == ()


def test_overlap_check_agrees_with_every_pair(rng):
    """``_overlapping``'s sorted scan against comparing every pair, on random ranges (empty ones included) with and without queued
    page-locked transfers (which never overlap each other)."""
    from thork_core._gpu import _HostArray, _overlapping
    from thork_core._staging import Transfer

    for _ in range(20000):
        ranges = [(int(p), int(n)) for p, n in zip(rng.integers(0, 60, rng.integers(0, 10)),
                                                    rng.integers(0, 12, 10))]
        queued: list[tuple[int, int]] = []
        for p, n in zip(rng.integers(0, 60, rng.integers(0, 3)), rng.integers(1, 12, 3)):
            if all(not (p < a + b and a < p + n) for a, b in queued):
                queued.append((int(p), int(n)))
        every = ranges + queued
        want = any(every[i][1] and every[j][1] and every[i][0] < every[j][0] + every[j][1]
                   and every[j][0] < every[i][0] + every[i][1]
                   for i in range(len(every)) for j in range(i))
        host = [(i, _HostArray(p, n, None)) for i, (p, n) in enumerate(ranges)]
        got = _overlapping(host, [Transfer(p, 0, n, True, False, True) for p, n in queued])
        assert got == want, (ranges, queued)


def test_a_queued_read_only_copy_serves_a_later_written_alias(monkeypatch):
    """A page-locked array bound first to a read-only parameter (its copy in queued, not
    to come back) and then to a written one: the queued copy is the group's (no new
    allocation), now copied back whole; the written parameter points at it."""
    from thork_core._gpu import _HostArray
    from thork_core._staging import Transfer

    a = np.zeros(301, np.float32)
    seen = np.zeros(301, np.float32)
    exe, pool = _executable(monkeypatch), _Pool()
    queued = Transfer(a.ctypes.data, 1 << 30, a.nbytes, True, False, True)
    values: list = [a, 1 << 30, seen, 0, 0, 301]  # y = a (written) after x = a (read)
    transfers: list = [queued]
    owned = [1 << 30]
    host = [(0, _HostArray(a.ctypes.data, a.nbytes, a, True)),
            (2, _HostArray(seen.ctypes.data, seen.nbytes, seen, True))]
    exe._bind_aliased(values, host, transfers, owned, pool, 0)
    assert values[0] == values[1] == 1 << 30
    assert len(pool.allocs) == 1 and values[2] == pool.allocs[0][0]  # seen alone
    group = next(t for t in transfers if t.device == 1 << 30)
    assert (group.back, group.queued, group.spans, group.nbytes) == (True, True, (), a.nbytes)
    assert len(transfers) == 2 and queued not in transfers
