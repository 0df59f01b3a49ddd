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
from helpers.aliasing import CASES, KERNELS, build
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
    ones copied directly; the first launch of each kernel binds through the full path,
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
