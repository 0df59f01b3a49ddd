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
    lib = ctypes.CDLL(str(so))
    lib.launch_burst.restype = lib.graph_burst.restype = ctypes.c_double
    lib.launch_burst.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint,
                                 ctypes.c_uint, ctypes.c_void_p, ctypes.c_ulonglong,
                                 ctypes.c_ulonglong, ctypes.c_ulonglong, ctypes.c_int]
    lib.graph_burst.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int]
    return lib


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
