"""``kernel[grid, block](...)`` decided in C: core's native ``LaunchCall`` base, armed with a
``Binder``, without a GPU. A ctypes stand-in for ``cuLaunchKernel`` (the Recorder of
test_native_launch) records each launch; a Python ``_miss`` records every call the C code
hands back. Every argument the binder does not take, every keyword other than ``stream``,
and every stream the C code cannot read must reach ``_miss`` with exactly the caller's
arguments and nothing launched; the GPU suite (tests/core/test_launch_hot_call.py) holds
the real kernel's fast and fallback results to NumPy."""

from __future__ import annotations

import sys
import weakref
from typing import Any

import pytest
import thork as tk
from helpers import run_threads
from helpers.kernels import scale_add
from helpers.launch_recorder import BIND_CASES, Cai, Stream, device_array, make_binder

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX C compiler")

GRID, BLOCK, SHARED = (3, 2, 1), (64, 1, 1), 16


def to_handle(stream: Any) -> int:
    from thork_core._cuda import stream_handle

    return stream_handle(stream)


def _launch_class(native):
    class Hot(native.LaunchCall):
        """What thork's Launch does: _miss is the Python call path."""

        def __init__(self) -> None:
            self.missed: list[tuple[Any, ...]] = []

        def _miss(self, *args: Any, **kwargs: Any) -> Any:
            self.missed.append((args, kwargs))
            return "python path"

    return Hot


def _armed(native, cai: bool = True):
    rec, binder = make_binder(native, cai)
    hot = _launch_class(native)()
    hot._arm(binder, GRID, BLOCK, SHARED, to_handle)
    return rec, hot


def test_an_unarmed_launch_runs_the_python_path(native):
    hot = _launch_class(native)()
    assert hot._hot_binder is None
    args = (device_array(0x100), 2.5, device_array(0x200), 7)
    assert hot(*args) == "python path"
    assert hot(*args, stream=5) == "python path"
    assert hot.missed == [(args, {}), (args, {"stream": 5})]


@pytest.mark.parametrize("case", BIND_CASES, ids=[c[0] for c in BIND_CASES])
def test_armed_calls_launch_in_c_or_reach_python_unchanged(native, case):
    """The binder's decisions, through the call itself: a launch with the armed geometry
    (and None returned), or the caller's exact arguments in _miss with nothing launched."""
    _, args, stream, launched = case
    rec, hot = _armed(native)
    kwargs = {"stream": stream} if stream else {}
    result = hot(*args, **kwargs)
    if launched is None:
        assert result == "python path" and rec.calls == []
        assert hot.missed == [(args, kwargs)]
        assert all(a is b for a, b in zip(hot.missed[0][0], args))
        return
    assert result is None and hot.missed == []
    (call,) = rec.calls
    assert (call["pointers"], call["scalars"]) == launched
    assert (call["grid"], call["block"], call["shared"], call["stream"]) == \
        (GRID, BLOCK, SHARED, stream)


STREAM_CASES = [  # (name, stream, launched on)
    ("None", None, 0),
    ("an int handle", 77, 77),
    ("a stream object (to_handle)", Stream(99), 99),
]


@pytest.mark.parametrize("case", STREAM_CASES, ids=[c[0] for c in STREAM_CASES])
def test_armed_call_streams(native, case):
    _, stream, on = case
    rec, hot = _armed(native)
    args = (device_array(0x100), 1.0, device_array(0x200), 3)
    assert hot(*args, stream=stream) is None and hot.missed == []
    assert rec.calls[0]["stream"] == on


MISS_CALLS = [  # (name, kwargs): each must go to the Python path untouched
    ("a negative stream", {"stream": -1}),
    ("a stream beyond 64 bits", {"stream": 2**64}),
    ("a target keyword", {"target": "cpu"}),
    ("a compiler keyword", {"compiler": "nvcc"}),
    ("stream and target", {"stream": 0, "target": "gpu"}),
    ("a compile-time constant by keyword", {"n": 4}),
]


@pytest.mark.parametrize("case", MISS_CALLS, ids=[c[0] for c in MISS_CALLS])
def test_keywords_the_c_call_does_not_take_reach_python(native, case):
    _, kwargs = case
    rec, hot = _armed(native)
    args = (device_array(0x100), 1.0, device_array(0x200), 3)
    assert hot(*args, **kwargs) == "python path"
    assert rec.calls == [] and hot.missed == [(args, kwargs)]


def test_a_stream_object_that_fails_raises_the_python_paths_error(native):
    """to_handle is the Python path's own conversion: its error is the call's error."""
    rec, hot = _armed(native)
    from thork_core import ArgumentError

    with pytest.raises((ArgumentError, TypeError)):
        hot(device_array(0x100), 1.0, device_array(0x200), 3, stream=object())
    assert rec.calls == [] and hot.missed == []


def test_without_cai_only_device_arrays_are_taken(native):
    rec, hot = _armed(native, cai=False)
    args = (Cai(0x100), 1.0, device_array(0x200), 0)
    assert hot(*args) == "python path" and rec.calls == []
    assert hot(device_array(0x100), 1.0, device_array(0x200), 0) is None and len(rec.calls) == 1


def test_disarming_and_rearming(native):
    rec, hot = _armed(native)
    args = (device_array(0x100), 1.0, device_array(0x200), 3)
    hot._arm(None, GRID, BLOCK, 0, None)
    assert hot._hot_binder is None
    assert hot(*args) == "python path" and rec.calls == []
    _, binder = make_binder(native)
    rec2 = binder  # keep the binder's recorder alive through the binder
    hot._arm(rec2, (1, 1, 1), (32, 1, 1), 0, None)
    assert hot._hot_binder is rec2
    # Without to_handle, a stream object goes to Python; ints and None stay in C.
    assert hot(*args, stream=Stream(5)) == "python path"
    assert hot(*args, stream=9) is None


def test_arm_checks_its_arguments(native):
    _, binder = make_binder(native)
    hot = _launch_class(native)()
    with pytest.raises(TypeError, match="binder must be a Binder"):
        hot._arm("binder", GRID, BLOCK, 0, None)
    with pytest.raises(ValueError, match="grid"):
        hot._arm(binder, (0, 1, 1), BLOCK, 0, None)
    with pytest.raises(ValueError, match="block"):
        hot._arm(binder, GRID, (1, 1), 0, None)
    with pytest.raises(TypeError, match="to_handle"):
        hot._arm(binder, GRID, BLOCK, 0, 5)
    with pytest.raises(TypeError, match="_arm"):
        hot._arm(binder)
    assert hot._hot_binder is None
    with pytest.raises(AttributeError):
        hot._hot_binder = binder  # read-only: only _arm sets it (with its geometry)


def test_many_threads_share_one_armed_launch(native):
    """Each call binds its own arguments on its own C stack: 8 threads, 200 calls each,
    every recorded launch carries the pointers its own call passed."""
    rec, hot = _armed(native)

    def work(t: int) -> None:
        for i in range(200):
            a, b = 0x1000 * (t + 1) + 16 * i, 0x100000 * (t + 1) + 16 * i
            assert hot(device_array(a), float(i), device_array(b), t) is None

    run_threads(work, 8)
    assert hot.missed == []
    assert len(rec.calls) == 8 * 200
    for call in rec.calls:
        a, b = call["pointers"]
        fi, t = call["scalars"]
        i = int(fi)
        assert (a, b) == (0x1000 * (t + 1) + 16 * i, 0x100000 * (t + 1) + 16 * i)


def test_an_armed_launch_is_collected(native):
    """The binder and to_handle are held in C members the collector can see: a cycle
    through them is freed."""
    import gc

    rec, hot = _armed(native)
    ref = weakref.ref(hot)
    hot.cycle = hot
    del hot
    gc.collect()
    assert ref() is None


@pytest.mark.plugin("cpu")
def test_thork_launch_objects_have_the_native_base(native):
    """kernel[grid, block] is a LaunchCall subclass that is still a thork.Launch; a call
    on the CPU target (no binder) stays on the Python path and is correct."""
    import numpy as np

    kernel = tk.jit(scale_add.fn, target="cpu")  # out = x * s + 1
    launch = kernel[3, 32]
    assert isinstance(launch, native.LaunchCall) and isinstance(launch, tk.Launch)
    assert kernel[3, 32] is launch
    x = np.random.default_rng(5).standard_normal(71).astype(np.float32)
    out = np.full(71, np.nan, np.float32)
    launch(out, x, 2.5, 71)
    np.testing.assert_allclose(out, x * np.float32(2.5) + np.float32(1), rtol=1e-6)
    assert launch._hot_binder is None  # the CPU target has no binder: nothing armed
