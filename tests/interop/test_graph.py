"""thork_core.Graph / tk.graph: record launches (kernels and fkl pipes), replay them as one,
change arguments between replays. CPU target everywhere; CUDA graphs on the GPU."""

from __future__ import annotations

import numpy as np
import pytest
import thork as tk
from helpers import TARGETS
from thork_core import ArgumentError, LaunchError

fkl = pytest.importorskip("fkl")


@tk.jit
def axpb(x: tk.DevicePointer[tk.dt.float32], a: tk.dt.float32, n: tk.dt.int32,
         out: tk.DevicePointer[tk.dt.float32], bid: tk.Uint[tk.BlockIdx],
         tid: tk.Uint[tk.ThreadIdx], bdm: tk.Uint[tk.BlockDim]):
    i = bid * bdm + tid
    with tk.if_(i < n):
        out[i] = x[i] * a + 1.0


def _frame(target: str):  # type: ignore[no-untyped-def]
    """Two pipes and two kernels: y = 2x+1 (kernel), z = (y*3-0.5) (pipe), w = z*a+1
    (kernel), v = w+7 (pipe)."""
    p1 = fkl.compose(fkl.TensorRead(), fkl.Mul(3.0), fkl.Sub(0.5), fkl.TensorWrite(),
                     target=target)
    p2 = fkl.compose(fkl.TensorRead(), fkl.Add(7.0), fkl.TensorWrite(), target=target)
    return p1, p2


def _reference(x: np.ndarray, a1: float, a2: float) -> np.ndarray:
    y = x * a1 + 1
    z = y * 3 - 0.5
    w = z * a2 + 1
    return w + 7


@pytest.mark.skipif("cpu" not in TARGETS, reason="no CPU target")
def test_cpu_graph_records_without_running_then_replays(rng):
    n = 1001
    x = rng.standard_normal(n, dtype=np.float32)
    y, z, w, v = (np.full(n, np.nan, np.float32) for _ in range(4))
    p1, p2 = _frame("cpu")
    grid = (n + 127) // 128
    with tk.graph(target="cpu") as g:
        axpb[grid, 128](x, 2.0, n, y, target="cpu")
        p1(y, out=z)
        axpb[grid, 128](z, 0.25, n, w, target="cpu")
        p2(w, out=v)
    assert np.isnan(v).all() and np.isnan(y).all()  # recorded, not run
    assert len(g) == 4
    g.replay()
    np.testing.assert_allclose(v, _reference(x, 2.0, 0.25), rtol=1e-5)
    # A new frame in the same input buffer: replay sees the new values.
    x[:] = rng.standard_normal(n, dtype=np.float32)
    v[:] = np.nan
    g()
    np.testing.assert_allclose(v, _reference(x, 2.0, 0.25), rtol=1e-5)


@pytest.mark.skipif("cpu" not in TARGETS, reason="no CPU target")
def test_cpu_graph_rebind_and_set_arg(rng):
    n = 333
    x1 = rng.standard_normal(n, dtype=np.float32)
    x2 = rng.standard_normal(n, dtype=np.float32)
    y = np.full(n, np.nan, np.float32)
    with tk.graph(target="cpu") as g:
        axpb[3, 128](x1, 2.0, n, y, target="cpu")
    assert g.rebind(x1, x2) == 1
    g.set_arg(0, 1, np.float32(-3.0))
    g.replay()
    np.testing.assert_allclose(y, x2 * -3 + 1, rtol=1e-6)
    with pytest.raises(ArgumentError, match="4 bytes, the value 8"):
        g.set_arg(0, 1, np.float64(1.0))
    with pytest.raises(ArgumentError, match="has no width"):
        g.set_arg(0, 1, 1.0)
    with pytest.raises(ArgumentError, match="node 5 out of range"):
        g.set_arg(5, 0, np.float32(1))
    with pytest.raises(ArgumentError, match="no recorded launch uses"):
        g.rebind(x1, x2)


def test_graph_misuse_is_a_clear_error():
    g = tk.graph(target="cpu")
    with pytest.raises(LaunchError, match="graph is new"):
        g.replay()
    with pytest.raises(ArgumentError, match="Graph target"):
        tk.graph(target="tpu")
    with pytest.raises(LaunchError, match="exec_handle: the graph is new"):
        g.exec_handle  # noqa: B018
    with g:
        pass
    assert g.exec_handle == 0  # a CPU graph has no CUgraphExec
    with pytest.raises(LaunchError, match="records once"):
        g.__enter__()


@pytest.mark.skipif("cpu" not in TARGETS, reason="no CPU target")
def test_cpu_graph_failed_recording_cannot_replay(rng):
    x = np.zeros(8, np.float32)
    g = tk.graph(target="cpu")
    with pytest.raises(RuntimeError), g:
        axpb[1, 8](x, 1.0, 8, x, target="cpu")
        raise RuntimeError("user code failed")
    with pytest.raises(LaunchError, match="failed"):
        g.replay()
    # the recorder was cleared: launches run again
    y = np.full(8, np.nan, np.float32)
    axpb[1, 8](x, 1.0, 8, y, target="cpu")
    assert np.all(y == 1.0)


@pytest.mark.gpu
def test_gpu_graph_replays_frame_and_updates_pointers_and_values(rng):
    from thork_core.runtime import DeviceArray

    n = 4099
    x_np = rng.standard_normal(n, dtype=np.float32)
    x = DeviceArray.from_host(x_np)
    y, z, w, v = (DeviceArray.from_host(np.full(n, np.nan, np.float32)) for _ in range(4))
    p1, p2 = _frame("gpu")
    grid = (n + 127) // 128
    # warm-up outside capture (builds kernels and hot paths)
    axpb[grid, 128](x, 2.0, n, y)
    p1(y, out=z)
    p2(w, out=v)
    v.copy_from_host(np.full(n, np.nan, np.float32))
    with tk.graph() as g:
        s = g.stream
        axpb[grid, 128](x, 2.0, n, y, stream=s)
        p1(y, out=z, stream=s)
        axpb[grid, 128](z, 0.25, n, w, stream=s)
        p2(w, out=v, stream=s)
    assert np.isnan(v.to_host()).all()  # captured, not run
    assert len(g) == 4
    g.replay()
    from thork_core.runtime import driver

    driver().cuStreamSynchronize(g.stream)
    np.testing.assert_allclose(v.to_host(), _reference(x_np, 2.0, 0.25), rtol=1e-5)
    x2_np = rng.standard_normal(n, dtype=np.float32)
    x2 = DeviceArray.from_host(x2_np)
    assert g.rebind(x, x2) == 1
    g.set_arg(0, 1, np.float32(-1.5))
    g.replay()
    driver().cuStreamSynchronize(g.stream)
    np.testing.assert_allclose(v.to_host(), _reference(x2_np, -1.5, 0.25), rtol=1e-5)


@pytest.mark.gpu
def test_gpu_graph_refuses_the_legacy_stream():
    with pytest.raises(ArgumentError, match="cannot be captured"):
        with tk.graph(stream=0):
            pass


@pytest.mark.gpu
def test_gpu_graph_exec_handle_launches_from_c(rng):
    """The raw exec handle, launched by cuGraphLaunch called through ctypes (as C code
    would), runs the recorded kernel on the given stream."""
    import ctypes

    from thork_core._cuda import function_address
    from thork_core.runtime import DeviceArray, driver

    n = 1037
    x_np = rng.standard_normal(n, dtype=np.float32)
    x = DeviceArray.from_host(x_np)
    y = DeviceArray.from_host(np.full(n, np.nan, np.float32))
    axpb[(n + 127) // 128, 128](x, 3.0, n, y)
    y.copy_from_host(np.full(n, np.nan, np.float32))
    with tk.graph() as g:
        axpb[(n + 127) // 128, 128](x, 3.0, n, y, stream=g.stream)
    assert g.exec_handle != 0
    launch = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)(
        function_address("cuGraphLaunch"))
    assert launch(g.exec_handle, g.stream) == 0
    driver().cuStreamSynchronize(g.stream)
    # rtol and atol: the GPU may fuse x * 3 + 1 into one FMA (one rounding, NumPy two).
    np.testing.assert_allclose(y.to_host(), x_np * 3.0 + 1.0, rtol=1e-6, atol=1e-6)
    g.close()
    with pytest.raises(LaunchError, match="exec_handle: the graph is closed"):
        g.exec_handle  # noqa: B018
