"""The driver calls of a NumPy round trip with ``tk.pinned_empty`` arrays (issue 11's pinned
row, session 13), recorded by ``bench/drvtrace.c`` standing in for the driver in a child
process (no GPU: device memory is host memory, copies are memmove, the kernel a NumPy
add). Each page-locked array's copy in is queued as soon as it is bound; then the launch,
the copy out of the written array, the device memory back to the pool in stream order,
and one synchronization: nothing waits, and nothing is copied, between them."""

from __future__ import annotations

import textwrap

import pytest
from helpers.drvtrace_child import BENCH, require_drvtrace, run_child

require_drvtrace()

CHILD = textwrap.dedent('''
    import json, sys, threading
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import drvtrace
    tracer = drvtrace.install("fake")
    drvtrace.add_hook(tracer)
    import thork as tk
    from _floor import floor_kernel

    matrix_add = floor_kernel()
    rng = np.random.default_rng(int(sys.argv[2]))
    out = {}

    def names(calls):
        return [c.name for c in calls if c.name not in ("mark", "ctx_set")]

    def pinned(n, values=None):
        a = tk.pinned_empty(n, "float32")
        a[...] = np.nan if values is None else values
        return a

    # 1. all pinned, odd block counts, poisoned output; the first call arms the fast path
    runs = []
    for blocks in (1, 37, 8191):
        n = 128 * blocks
        A = pinned(n, rng.standard_normal(n, dtype=np.float32))
        B = pinned(n, rng.standard_normal(n, dtype=np.float32))
        for rep in range(3):
            C = pinned(n)
            tracer.start()
            matrix_add[blocks, 128](C, A, B)
            calls = tracer.stop()
            runs.append({"n": n, "ok": bool(np.array_equal(C, A + B)),
                         "names": names(calls),
                         "calls": [[c.name, c.a, c.b, c.c] for c in calls
                                   if c.name not in ("mark", "ctx_set")],
                         "live": tracer.live_blocks()})
    out["pinned"] = runs

    # 2. a view of a pinned block, and a pinned output with a pageable input
    n = 128 * 9
    A = pinned(n + 64, rng.standard_normal(n + 64, dtype=np.float32))[64:]
    B = rng.standard_normal(n, dtype=np.float32)  # pageable: staged
    C = pinned(n)
    tracer.start()
    matrix_add[9, 128](C, A, B)
    calls = tracer.stop()
    out["mixed"] = {"ok": bool(np.array_equal(C, A + B)), "names": names(calls),
                    "live": tracer.live_blocks()}

    # 3. a later argument fails to bind after two copies in were queued
    A = pinned(n, 1.0)
    C = pinned(n)
    tracer.start()
    try:
        matrix_add[9, 128](C, A, np.ones(n, np.float64))
        err = None
    except tk.ArgumentError as exc:
        err = str(exc)
    calls = tracer.stop()
    out["bad"] = {"err": err, "names": names(calls), "live": tracer.live_blocks()}

    # 4. eight threads, pinned round trips at once
    bad = []
    def worker(seed):
        r = np.random.default_rng(seed)
        m = 128 * 11
        a = pinned(m, r.standard_normal(m, dtype=np.float32))
        b = pinned(m, r.standard_normal(m, dtype=np.float32))
        for _ in range(20):
            c = pinned(m)
            matrix_add[11, 128](c, a, b)
            if not np.array_equal(c, a + b):
                bad.append(seed)
    ts = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
    for t in ts: t.start()
    for t in ts: t.join()
    out["threads"] = {"bad": bad, "live": tracer.live_blocks()}
    print(json.dumps(out))
''')


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    return run_child(tmp_path_factory.mktemp("pinned_trace"), CHILD, BENCH, 1234)


PINNED_CALLS = ["alloc", "htod"] * 3 + ["launch", "dtoh", "free", "free", "free",
                                         "stream_sync"]


def test_pinned_round_trip_values_against_numpy(traced):
    """Poisoned (NaN) pinned outputs get A + B exactly, at 128, 4736 and 1048448 floats."""
    assert [r["n"] for r in traced["pinned"]] == [128] * 3 + [4736] * 3 + [1048448] * 3
    assert all(r["ok"] for r in traced["pinned"])


def test_pinned_round_trip_makes_exactly_these_driver_calls(traced):
    """Every call: per array, allocate then queue its copy in; the launch; one copy out (C,
    the written array); the three frees in stream order; one sync. No synchronization,
    event or extra copy anywhere between, nothing after the sync, nothing left allocated.
    (The process's first NumPy argument binds through the full path: from the second call
    on, the fast path.)"""
    for r in traced["pinned"][1:]:
        assert r["names"] == PINNED_CALLS, r["names"]
        assert r["live"] == 0


def test_pinned_round_trip_copies_the_bytes_the_semantics_need(traced):
    """C goes in (it is written: its host values must go in) as well as A and B, whole;
    only C comes out; all on one stream, the launch included; each free is of a block this
    call allocated."""
    for r in traced["pinned"][1:]:
        n = r["n"]
        calls = r["calls"]
        allocs = [c for c in calls if c[0] == "alloc"]
        htods = [c for c in calls if c[0] == "htod"]
        dtohs = [c for c in calls if c[0] == "dtoh"]
        frees = [c for c in calls if c[0] == "free"]
        assert [c[2] for c in allocs] == [4 * n] * 3
        assert [(c[1], c[2]) for c in htods] == [(a[1], 4 * n) for a in allocs]
        assert [(c[1], c[2]) for c in dtohs] == [(allocs[0][1], 4 * n)]  # C, param 0
        assert sorted(c[1] for c in frees) == sorted(a[1] for a in allocs)
        assert len({c[3] for c in calls}) == 1  # one stream for every call


def test_views_and_mixed_pinned_pageable(traced):
    """A view into a pinned block is copied directly; a pageable input beside pinned ones
    is staged; values exact; the frees still come before the one sync."""
    mixed = traced["mixed"]
    assert mixed["ok"] and mixed["live"] == 0
    names = mixed["names"]
    assert names[:4] == ["alloc", "htod", "alloc", "htod"]  # C and the view of A: at once
    assert names.count("stream_sync") == 1 and names[-1] == "stream_sync"
    assert names.index("launch") < names.index("dtoh")
    assert names.count("free") == 3 and names.index("free") > names.index("dtoh")


def test_a_failed_binding_after_queued_copies_frees_and_waits(traced):
    """B of the wrong dtype after C and A were queued: ArgumentError naming the parameter,
    no launch, both blocks freed, the stream synchronized before the error (the copies
    read the caller's arrays)."""
    bad = traced["bad"]
    assert bad["err"] is not None and "'B'" in bad["err"] and "float64" in bad["err"]
    assert bad["names"] == ["alloc", "htod", "alloc", "htod", "free", "free", "stream_sync"]
    assert bad["live"] == 0


def test_pinned_round_trips_from_eight_threads(traced):
    assert traced["threads"] == {"bad": [], "live": 0}
