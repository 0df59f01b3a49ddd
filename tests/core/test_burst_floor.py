"""bench/burst_loop.c, the in-process C floors the hot-call benches anchor on: each burst
calls the driver entry point it is handed exactly k times with the function, geometry,
stream and parameter array a C program would pass, and reports a failure's code. The
driver is stood in for by a ctypes callback, so this runs without a GPU."""

import ctypes
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import build_shared

BENCH = Path(__file__).resolve().parents[2] / "bench"
if not (BENCH / "burst_loop.c").exists():
    pytest.skip("bench/burst_loop.c is not beside the tests", allow_module_level=True)

LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 7,
                          ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)
GRAPH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    so = build_shared(BENCH / "burst_loop.c", tmp_path_factory.mktemp("burst") /
                      "burst_loop.so")
    sys.path.insert(0, str(BENCH))
    try:
        from _floor import declare_burst
    finally:
        sys.path.remove(str(BENCH))
    return declare_burst(ctypes.CDLL(str(so)))


def _address(cb):
    return ctypes.cast(cb, ctypes.c_void_p).value


def test_launch_burst_passes_what_a_c_program_would(lib, rng):
    seen = []
    p = [int(x) for x in rng.integers(1, 2**63, 3, dtype=np.uint64)]
    fn_handle, stream = 0xF00D, 0xBEEF
    gx, bx, k = int(rng.integers(1, 10**6)), int(rng.integers(1, 1025)), 37

    @LAUNCH
    def fake(f, gx_, gy, gz, bx_, by, bz, shared, s, params, extra):
        ptrs = [ctypes.cast(params[i], ctypes.POINTER(ctypes.c_ulonglong))[0]
                for i in range(3)]
        seen.append((f, gx_, gy, gz, bx_, by, bz, shared, s, ptrs, extra))
        return 0

    us = lib.launch_burst(_address(fake), fn_handle, gx, bx, stream, *p, k)
    assert us >= 0
    assert len(seen) == k
    assert set(map(repr, seen)) == {repr((fn_handle, gx, 1, 1, bx, 1, 1, 0, stream, p,
                                          None))}


def test_bursts_stop_at_the_first_failure_and_report_its_code(lib):
    calls = []

    @LAUNCH
    def fails(*_args):
        calls.append(1)
        return 700 if len(calls) == 3 else 0

    assert lib.launch_burst(_address(fails), 1, 1, 1, None, 1, 2, 3, 10) == -700.0
    assert len(calls) == 3

    graphs = []

    @GRAPH
    def graph(exec_, stream):
        graphs.append((exec_, stream))
        return 0 if len(graphs) < 5 else 4

    assert lib.graph_burst(_address(graph), 0x11, 0x22, 9) == -4.0
    assert graphs == [(0x11, 0x22)] * 5


def test_the_benches_load_the_same_library_source():
    sys.path.insert(0, str(BENCH))
    try:
        import _floor
    finally:
        sys.path.remove(str(BENCH))
    assert _floor._BURST_SOURCE == BENCH / "burst_loop.c"
    assert callable(_floor.launch_burst) and callable(_floor.graph_burst)


# -- (session 17) diag_hot_floor's variants -------------------------------------------
CTX_GET = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))


def test_the_extra_variant_passes_the_values_packed(lib, rng):
    """CU_LAUNCH_PARAM_BUFFER_POINTER, the three values, BUFFER_SIZE (24), END; no
    kernelParams."""
    seen = []
    p = [int(x) for x in rng.integers(1, 2**63, 3, dtype=np.uint64)]

    @LAUNCH
    def fake(f, gx, gy, gz, bx, by, bz, shared, s, params, extra):
        e = ctypes.cast(extra, ctypes.POINTER(ctypes.c_void_p))
        vals = ctypes.cast(e[1], ctypes.POINTER(ctypes.c_ulonglong))
        size = ctypes.cast(e[3], ctypes.POINTER(ctypes.c_size_t))[0]
        seen.append((f, gx, bx, s, bool(params), e[0], [vals[i] for i in range(3)], e[2],
                     size, e[4]))
        return 0

    assert lib.launch_burst_extra(_address(fake), 0xF00D, 9, 64, 0xBEEF, *p, 5) >= 0
    assert seen == [(0xF00D, 9, 64, 0xBEEF, False, 1, p, 2, 24, None)] * 5


def test_the_ctx_variant_asks_the_context_before_each_launch(lib):
    order = []

    @CTX_GET
    def get(out):
        order.append("get")
        out[0] = 0x1234
        return 0 if order.count("get") < 4 else 201

    @LAUNCH
    def fake(*_args):
        order.append("launch")
        return 0

    assert lib.launch_burst_ctx(_address(fake), 1, 1, 1, None, 1, 2, 3,
                                     _address(get), 10) == -201.0
    assert order == ["get", "launch"] * 3 + ["get"]


def test_the_sweep_variant_launches_k_times(lib):
    calls = []

    @LAUNCH
    def fake(*_args):
        calls.append(1)
        return 0

    buf = np.zeros(1 << 16, np.uint8)
    assert lib.launch_burst_sweep(_address(fake), 1, 1, 1, None, 1, 2, 3,
                                       buf.ctypes.data, buf.nbytes, 7) >= 0
    assert len(calls) == 7
    assert lib.sweep_burst(buf.ctypes.data, buf.nbytes, 3) >= 0
