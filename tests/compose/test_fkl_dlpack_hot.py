"""Producers that offer only DLPack on the hot path (session 8, issue 11).

A pipe called with arrays that have ``__dlpack__``/``__dlpack_device__`` and no
``__cuda_array_interface__`` used to take the general path on every call (four adapter
views, each one ``__dlpack__`` call: 173.5 us per call on the H200 against a C floor of
3.5 us and 9.4 us per ``__dlpack__``). Now each input and ``out=`` is read once per call
with the launch stream (the protocol's handshake) and keyed like any other array.

Runs without a GPU: the GPU target's call path with recorded launches (``fake_gpu``),
DLPack-only wrappers around DeviceArrays at made-up addresses.
"""

from __future__ import annotations

from typing import Any

import fkl
import numpy as np
import pytest
from helpers import run_threads
from helpers.fake_gpu import wrap_device
from thork_core import ArgumentError

pytestmark = pytest.mark.plugin("compose")


class DLPackOnly:
    """A producer with only the DLPack protocol; records the streams it was asked for."""

    def __init__(self, a: Any) -> None:
        self.a = a
        self.streams: list[Any] = []

    def __dlpack__(self, **kw: Any) -> Any:
        self.streams.append(kw.get("stream"))
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self) -> Any:
        return self.a.__dlpack_device__()


@pytest.fixture(autouse=True)
def _no_driver(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, int]]:
    """Made-up addresses (device 0); stream waits recorded instead of queued."""
    from thork_core import _cuda, _device_array, runtime

    waits: list[tuple[int, int, int]] = []
    monkeypatch.setattr(_cuda, "pointer_device", lambda ptr: 0)
    # the producer's own handshake wait (DeviceArray.__dlpack__): not Thork's to record
    monkeypatch.setattr(_device_array, "stream_wait", lambda *a, **k: None)
    monkeypatch.setattr(_cuda, "stream_wait", lambda d, p, c: waits.append((p, c, d)))
    monkeypatch.setattr(runtime, "stream_wait", lambda d, p, c: waits.append((p, c, d)))
    return waits


def _pipe() -> Any:
    return fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.Add(1.0), fkl.TensorWrite(),
                       target="gpu")


def test_dlpack_only_arrays_are_hot(fake_gpu: list[Any], slow_calls: list[int]) -> None:
    pipe = _pipe()
    x = DLPackOnly(wrap_device(1 << 32, (5, 7, 3), "float32"))
    for k in range(6):
        y = DLPackOnly(wrap_device((1 << 33) + k * 4096, (5, 7, 3), "float32"))
        fake_gpu.clear()
        x.streams.clear()
        assert pipe(x, out=y) is y
        (_, ptrs), = fake_gpu
        assert ptrs == [1 << 32, (1 << 33) + k * 4096]
        if k >= 2:  # hot: one __dlpack__ per array, for the legacy default stream (1)
            assert x.streams == [1] and y.streams == [1]
    assert slow_calls[0] == 1


def test_dlpack_hot_call_names_the_given_stream(fake_gpu: list[Any],
                                                slow_calls: list[int],
                                                _no_driver: list[Any]) -> None:
    pipe = _pipe()
    x = DLPackOnly(wrap_device(1 << 32, (9, 4), "float32"))
    y = DLPackOnly(wrap_device(1 << 33, (9, 4), "float32"))
    for _ in range(3):
        pipe(x, out=y, stream=0x5000)
    x.streams.clear()
    y.streams.clear()
    fake_gpu.clear()
    pipe(x, out=y, stream=0x5000)
    assert x.streams == [0x5000] and y.streams == [0x5000]
    (prep, _), = fake_gpu
    assert slow_calls[0] == 1
    assert not _no_driver  # the producers ordered the stream: no wait of Thork's own


def test_dlpack_hot_keys_shape_dtype_and_layout(fake_gpu: list[Any],
                                                slow_calls: list[int]) -> None:
    pipe = _pipe()
    x = DLPackOnly(wrap_device(1 << 32, (6, 5), "float32"))
    pipe(x, out=DLPackOnly(wrap_device(1 << 33, (6, 5), "float32")))
    fake_gpu.clear()
    other = DLPackOnly(wrap_device(1 << 34, (5, 6), "float32"))  # another shape: planned anew
    pipe(other, out=DLPackOnly(wrap_device(1 << 35, (5, 6), "float32")))
    assert slow_calls[0] == 2 and len(fake_gpu) == 1
    with pytest.raises(ArgumentError, match="shape"):  # an out= of another shape
        pipe(x, out=DLPackOnly(wrap_device(1 << 36, (5, 6), "float32")))
    with pytest.raises(ArgumentError, match="dtype"):  # ... or dtype
        pipe(x, out=DLPackOnly(wrap_device(1 << 36, (6, 5), "int32")))
    assert len(fake_gpu) == 1  # nothing launched for the refused calls
    # A pitched input keys apart from the compact one (its byte strides): planned once
    # (the pitched read), then hot; the launches get its address.
    for k in range(3):
        fake_gpu.clear()
        pitched = DLPackOnly(wrap_device((1 << 37) + k * 4096, (6, 5), "float32", pitch=64))
        pipe(pitched, out=DLPackOnly(wrap_device(1 << 36, (6, 5), "float32")))
        (_, ptrs), = fake_gpu
        assert ptrs == [(1 << 37) + k * 4096, 1 << 36]
    # two plans, the two refused out= (a strided-out write may take them: the general
    # path checks and names them) and the pitched input's plan
    assert slow_calls[0] == 5


def test_dlpack_read_in_c_matches_ctypes() -> None:
    """The native module's capsule reader and the ctypes one agree field for field, on
    DeviceArray capsules (versioned or not, compact and pitched) and NumPy's."""
    from thork_core import _probe
    from thork_core._native import native_module

    mod = native_module()
    if mod is None:
        pytest.skip("no native module here (no C compiler)")
    arrays = [wrap_device(1 << 32, (3, 4, 5), "uint8"), wrap_device((1 << 33) + 64, (7, 9), "float16",
                                                        pitch=32),
              wrap_device(1 << 34, (), "float64")]
    for a in arrays:
        for kw in ({}, {"max_version": (1, 0)}):
            cap = a.__dlpack__(stream=1, **kw)
            got = mod.dlpack_read(cap)
            assert got == _probe._read_capsule(cap)
            assert got[0] == a.ptr and got[1] == a.shape and got[4:6] == (2, 0)
    host = np.arange(24, dtype=np.int16).reshape(4, 6)[:, ::2]
    cap = host.__dlpack__()
    got = mod.dlpack_read(cap)
    assert got == _probe._read_capsule(cap)
    assert got[1] == (4, 3) and got[2:4] == (0, 16) and got[6] == (6, 2) and got[4] == 1
    assert mod.dlpack_read(object()) is None  # not a capsule of DLPack's


def test_dlpack_probe_strides_only_when_not_compact() -> None:
    """A compact layout keys as None whatever strides the producer wrote; a pitched one by
    its byte strides (which the general path then refuses or plans for)."""
    from thork_core import _probe

    compact = wrap_device(1 << 32, (4, 5), "float32")
    got = _probe.dlpack_probe(DLPackOnly(compact), 0)
    assert got is not None and got[1][1:] == ((4, 5), compact.dtype, 0, None)
    pitched = wrap_device(1 << 33, (4, 5), "float32", pitch=64)
    got = _probe.dlpack_probe(DLPackOnly(pitched), 0)
    assert got is not None and got[1][4] == (64, 4)
    assert got[0] == 1 << 33 and got[3] is False
    one_row = wrap_device(1 << 34, (1, 5), "float32", pitch=64)  # a stride over extent 1: compact
    got = _probe.dlpack_probe(DLPackOnly(one_row), 0)
    assert got is not None and got[1][4] is None


def test_dlpack_out_overlapping_its_input_is_refused(fake_gpu: list[Any],
                                                     slow_calls: list[int]) -> None:
    """DLPack-only arrays expose no range without a read: the overlap check takes their
    ranges from what the call read (hot) or from their views (general path), so an out=
    over the input is refused on both paths, and exactly the input is allowed in place."""
    pipe = _pipe()
    shape = (6, 5)
    x = DLPackOnly(wrap_device(1 << 32, shape, "float32"))
    with pytest.raises(ArgumentError, match="separate from input 0"):  # first call
        pipe(x, out=DLPackOnly(wrap_device((1 << 32) + 8, shape, "float32")))
    assert not fake_gpu
    for k in range(3):  # the hot entry, with an out= key it learned
        pipe(x, out=DLPackOnly(wrap_device((1 << 33) + k * 4096, shape, "float32")))
    fake_gpu.clear()
    for start in ((1 << 32) + 8, (1 << 32) - 4 * 29):  # inside; ending inside
        with pytest.raises(ArgumentError, match="separate from input 0"):
            pipe(x, out=DLPackOnly(wrap_device(start, shape, "float32")))
    assert not fake_gpu
    pipe(x, out=DLPackOnly(wrap_device(1 << 32, shape, "float32")))  # exactly the input
    (_, ptrs), = fake_gpu
    assert ptrs == [1 << 32, 1 << 32]
    pipe(x, out=DLPackOnly(wrap_device((1 << 32) + 4 * 30, shape, "float32")))  # just after
    assert len(fake_gpu) == 2


def test_dlpack_out_exactly_the_input_of_a_geometric_chain_is_refused(
        fake_gpu: list[Any], slow_calls: list[int]) -> None:
    pipe = fkl.compose(fkl.TensorRead(), fkl.Crop((1, 1, 4, 3)), fkl.TensorWrite(),
                       target="gpu")
    x = DLPackOnly(wrap_device(1 << 32, (3, 4), "float32"))
    with pytest.raises(ArgumentError, match="separate from input 0"):
        pipe(DLPackOnly(wrap_device(1 << 32, (6, 5), "float32")), out=x)
    assert not fake_gpu


def test_foreign_hot_paths_from_many_threads(fake_gpu: list[Any],
                                             slow_calls: list[int]) -> None:
    """One pipe called from 8 threads at once with DLPack-only inputs and outputs, cold
    and then hot: every launch gets the addresses of its own call (the capsules, the
    learned out= keys and the hot table are shared)."""
    import threading

    pipe = _pipe()
    shape = (7, 9)
    n_threads, calls = 8, 40
    barrier = threading.Barrier(n_threads)

    def work(t: int) -> None:
        barrier.wait()
        for k in range(calls):
            x = DLPackOnly(wrap_device((1 << 32) + (t * calls + k) * 4096, shape, "float32"))
            y = DLPackOnly(wrap_device((1 << 40) + (t * calls + k) * 4096, shape, "float32"))
            assert pipe(x, out=y) is y

    run_threads(work, n_threads)
    launched = sorted(tuple(ptrs) for _, ptrs in fake_gpu)
    want = sorted(((1 << 32) + i * 4096, (1 << 40) + i * 4096)
                  for i in range(n_threads * calls))
    assert launched == want  # each call launched once, with its own input and output
    assert slow_calls[0] <= n_threads  # at most the first call of each thread planned


def test_dlpack_input_gets_cores_guard(fake_gpu: list[Any],
                                       slow_calls: list[int]) -> None:
    """(session 10) A compact DLPack-only input gets core's guard (in C on the GPU; here
    the Python twin the fake launch hands out): later calls launch through it with their
    own addresses, DLPack-only or DeviceArray outputs alike, and a refused out= (another
    shape, or over the input) falls to the Python path, which names it. A pitched input
    gets no guard."""
    pipe = _pipe()
    shape = (5, 7)
    x = DLPackOnly(wrap_device(1 << 32, shape, "float32"))
    pipe(x, out=DLPackOnly(wrap_device(1 << 33, shape, "float32")))
    guard = pipe._hot_guard
    assert guard is not None
    for out in (DLPackOnly(wrap_device((1 << 34) + 4096, shape, "float32")),
                wrap_device((1 << 35) + 8192, shape, "float32")):
        fake_gpu.clear()
        x.streams.clear()
        assert guard(x, out, None) is True
        (_, ptrs), = fake_gpu
        assert ptrs[0] == 1 << 32 and ptrs[1] in ((1 << 34) + 4096, (1 << 35) + 8192)
        assert x.streams == [1]
    fake_gpu.clear()
    assert guard(x, DLPackOnly(wrap_device(1 << 36, (7, 5), "float32")), None) is False
    assert guard(x, DLPackOnly(wrap_device((1 << 32) + 8, shape, "float32")), None) is False
    assert not fake_gpu
    with pytest.raises(ArgumentError, match="separate from input 0"):
        pipe(x, out=DLPackOnly(wrap_device((1 << 32) + 8, shape, "float32")))
    pitched = _pipe()
    pitched(DLPackOnly(wrap_device(1 << 37, shape, "float32", pitch=64)),
            out=DLPackOnly(wrap_device(1 << 38, shape, "float32")))
    assert pitched._hot_guard is None
