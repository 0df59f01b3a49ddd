"""The GPU target's copies of NumPy arguments that share memory, through
``bench/drvtrace.c`` standing in for the driver in a child process (no GPU: device memory
is host memory, copies are memmove, the kernels are their NumPy models from
``tests/helpers/aliasing.py`` run on the device buffers, so separate device copies of one
host buffer would show in the values). Each group of overlapping arrays is one device
buffer: allocated and copied in once, the written parameters' ranges copied back once;
pageable (staged) and page-locked (queued as bound) arrays, the first launch's full
binding path, small staging chunks, a failed binding and eight threads."""

from __future__ import annotations

import textwrap

import pytest
from helpers.drvtrace_child import BENCH, TESTS, require_drvtrace, run_child

require_drvtrace()

CHILD = textwrap.dedent('''
    import json, sys, threading
    import numpy as np
    sys.path[:0] = [sys.argv[1], sys.argv[2]]
    import drvtrace
    tracer = drvtrace.install("fake")
    import thork as tk
    from helpers.aliasing import CASES, KERNELS, MODELS, build
    from thork_core.runtime import configure_staging

    rng = np.random.default_rng(int(sys.argv[3]))
    BY_NAME = {c.name: c for c in CASES}

    def use(model):
        def run(args, threads):
            dy, dx, n = args.scalar(3), args.scalar(4), args.scalar(5)
            model(args.array(0, dy + n), args.array(1, dx + n), args.array(2, n), dy, dx, n)
        drvtrace.add_kernel(tracer, run)

    def pinned(k):
        return tk.pinned_empty(k, np.float32)

    def one(case, length, d, page_locked, r=rng, record=True):
        buf, args, want, want_seen = build(case, length, d, r, pinned if page_locked else None)
        n = args[5]
        if record:
            tracer.start()
        KERNELS[case.kernel][(n + 127) // 128, 128](*args)
        calls = tracer.stop() if record else []
        return {"case": case.name, "pinned": page_locked, "L": length, "d": d, "n": n,
                "ok": bool(np.array_equal(buf, want)),
                "ok_seen": bool(np.array_equal(args[2], want_seen)),
                "calls": [[c.name, c.a, c.b] for c in calls
                          if c.name not in ("mark", "ctx_set")],
                "live": tracer.live_blocks()}

    out = {}
    # 1. the process's first NumPy arguments bind through the full path (page-locked
    #    arrays are then bound with the others, not queued one by one)
    use(MODELS["shifted"])
    out["first"] = one(BY_NAME["partial"], 131, 2, True)
    # 2. every case, pageable and page-locked, odd sizes, the fast path armed
    runs = []
    for case in CASES:
        use(MODELS[case.kernel])
        for page_locked in (False, True):
            for length in (10, 131, 4099, 300007):
                for _ in range(2):
                    runs.append(one(case, length, int(rng.integers(1, 4)), page_locked))
    out["runs"] = runs
    # 3. staging in 8 KiB chunks, lanes even for small totals: the written range split
    before = configure_staging(chunk_bytes=8192, inline_bytes=0)
    chunked = []
    for case in CASES:
        use(MODELS[case.kernel])
        chunked.append(one(case, 100003, 3, False))
    configure_staging(**before)
    out["chunked"] = chunked
    # 4. a later argument fails to bind after an aliased page-locked pair was seen
    use(MODELS["shifted"])
    buf = pinned(257)
    buf[...] = 1.0
    tracer.start()
    try:
        KERNELS["shifted"][3, 128](buf[2:], buf, np.zeros(255, np.float64), 0, 2, 255)
        err = None
    except tk.ArgumentError as exc:
        err = str(exc)
    calls = tracer.stop()
    out["bad"] = {"err": err, "names": [c.name for c in calls
                                       if c.name not in ("mark", "ctx_set")],
                  "live": tracer.live_blocks()}
    try:  # a strided view is refused as before (its bytes are not one range)
        KERNELS["shifted"][3, 128](buf[::2], buf, np.zeros(128, np.float32), 0, 0, 128)
        out["strided"] = None
    except tk.ArgumentError as exc:
        out["strided"] = str(exc)
    # 5. eight threads, the shifted kernel's cases, pageable and page-locked
    use(MODELS["shifted"])
    mine = [c for c in CASES if c.kernel == "shifted"]
    bad = []
    def worker(seed):
        r = np.random.default_rng(seed)
        for it in range(15):
            got = one(mine[(seed + it) % len(mine)], int(r.integers(10, 3000)),
                      int(r.integers(1, 4)), bool((seed + it) % 2), r, record=False)
            if not (got["ok"] and got["ok_seen"]):
                bad.append((seed, got["case"]))
    ts = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
    for t in ts: t.start()
    for t in ts: t.join()
    out["threads"] = {"bad": bad, "live": tracer.live_blocks()}
    print(json.dumps(out))
''')


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    seed = int.from_bytes(__import__("os").urandom(4), "little")
    print(f"child seed: {seed}")
    return run_child(tmp_path_factory.mktemp("alias_trace"), CHILD, BENCH, TESTS, seed,
                     timeout=600)


def _expected(r: dict) -> tuple[list[int], int, int]:
    """(sorted allocation sizes, bytes copied in, bytes copied out) of one run, bytes."""
    L, d, n, f = r["L"], r["d"], r["n"], 4
    pinned = r["pinned"]
    if r["case"] == "same":
        return sorted([f * L, f * n]), f * (L + n), f * (L + n)
    if r["case"] == "partial":  # buf[d:] written, buf read: only buf[d:] comes back;
        # page-locked: buf[d:]'s queued copy is superseded by the union's
        allocs = [f * L, f * n] + ([f * (L - d)] if pinned else [])
        return sorted(allocs), sum(allocs), f * (L - d) + f * n
    if r["case"] == "covering":  # buf's queued copy spans x = buf[d:]: reused
        return sorted([f * L, f * n]), f * (L + n), f * (L + n)
    if r["case"] == "pair":  # buf[d:] and buf[:-1], both written: the union comes back
        allocs = [f * L, f * n] + ([f * (L - d)] if pinned else [])
        return sorted(allocs), sum(allocs), f * (L + n)
    if r["case"] == "adjacent":  # no byte shared: three copies, as without aliasing
        h = L // 2
        return sorted([f * h, f * (L - h), f * n]), f * (L + n), f * (h + n)
    assert r["case"] == "three"
    return [f * L], f * L, f * L


def _check_calls(r: dict) -> None:
    calls = r["calls"]
    names = [c[0] for c in calls]
    allocs = [c for c in calls if c[0] == "alloc"]
    want_allocs, want_in, want_out = _expected(r)
    where = (r["case"], r["pinned"], r["L"], r["d"])
    assert sorted(c[2] for c in allocs) == want_allocs, where
    assert sum(c[2] for c in calls if c[0] == "htod") == want_in, where
    assert sum(c[2] for c in calls if c[0] == "dtoh") == want_out, where
    assert names.count("launch") == 1 and names.count("stream_sync") == 1, where
    assert names[-1] == "stream_sync", where
    launch = names.index("launch")
    assert "htod" not in names[launch:] and "dtoh" not in names[:launch], where
    assert sorted(c[1] for c in calls if c[0] == "free") == sorted(c[1] for c in allocs)
    assert r["live"] == 0, where
    if r["pinned"]:  # the first array's copy in is queued at once, before any check
        assert names[:2] == ["alloc", "htod"], where
        assert not {"event_record", "event_sync"} & set(names), where
    # every copy lies inside a block this call allocated
    blocks = [(c[1], c[1] + c[2]) for c in allocs]
    for c in calls:
        if c[0] in ("htod", "dtoh"):
            assert any(lo <= c[1] and c[1] + c[2] <= hi for lo, hi in blocks), (where, c)


def test_aliased_values_against_numpy(traced):
    """Every case, pageable and page-locked, 10 to 300007 floats: the memory and the
    poisoned ``seen`` hold what NumPy computes on the same memory."""
    runs = traced["runs"] + traced["chunked"] + [traced["first"]]
    assert len(runs) == 6 * 2 * 4 * 2 + 6 + 1
    bad = [(r["case"], r["pinned"], r["L"], r["d"]) for r in runs
           if not (r["ok"] and r["ok_seen"])]
    assert bad == []


def test_one_copy_per_aliased_group(traced):
    """The driver calls: one allocation per group of overlapping arrays (a page-locked
    array whose queued copy the group's union supersedes, one more), copies in and out of
    exactly the bytes the semantics need, one launch, frees in stream order, one sync."""
    for r in traced["runs"] + traced["chunked"]:
        _check_calls(r)


def test_first_call_binds_the_group_through_the_full_path(traced):
    """The process's first NumPy arguments take the adapter path: the page-locked pair
    is one copy of the union (no queued copy to supersede), seen another."""
    r = traced["first"]
    assert r["ok"] and r["ok_seen"]
    allocs = sorted(c[2] for c in r["calls"] if c[0] == "alloc")
    assert allocs == sorted([4 * 131, 4 * 129])
    assert sum(c[2] for c in r["calls"] if c[0] == "dtoh") == 4 * 129 * 2
    assert r["live"] == 0


def test_small_chunks_split_the_written_range(traced):
    for r in traced["chunked"]:
        outs = [c for c in r["calls"] if c[0] == "dtoh"]
        assert all(c[2] <= 8192 for c in outs)
        assert len(outs) > 2 * 100003 * 4 // 8192 // 2


def test_failed_binding_after_an_aliased_pair_frees_everything(traced):
    bad = traced["bad"]
    assert bad["err"] is not None and "'seen'" in bad["err"] and "float64" in bad["err"]
    assert "launch" not in bad["names"] and bad["names"][-1] == "stream_sync"
    assert bad["names"].count("alloc") == bad["names"].count("free")
    assert bad["live"] == 0
    assert "'y'" in traced["strided"] and "C-contiguous" in traced["strided"]


def test_aliased_round_trips_from_eight_threads(traced):
    assert traced["threads"] == {"bad": [], "live": 0}
