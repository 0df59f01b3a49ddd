"""What thork_torch says of its C++ reader, and when it decides (session 20): nothing is
decided while torch is not imported; ``reader_report`` (``thork info``) loads a cached
reader but never builds or starts one. A stand-in ``torch`` module and a stand-in cache
lookup: no torch, compiler or GPU needed."""

from __future__ import annotations

import sys
import types

import pytest

_reader = pytest.importorskip("thork_torch._reader")


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.delenv("THORK_TORCH_READER", raising=False)
    _reader._reset()
    yield
    _reader._reset()


def fake_torch(cuda: str | None, gpu: bool) -> types.ModuleType:
    torch = types.ModuleType("torch")
    torch.version = types.SimpleNamespace(cuda=cuda)  # type: ignore[attr-defined]
    torch.cuda = types.SimpleNamespace(is_available=lambda: gpu)  # type: ignore[attr-defined]
    return torch


@pytest.fixture
def lookups(monkeypatch):
    """_lookup answering from a list the test fills (None: not cached), each call's build
    flag recorded; a background build fails the test unless the test allows it."""
    calls: list[bool] = []
    answer: list[object] = [None]

    def lookup(torch, build):
        calls.append(build)
        return answer[0]

    def no_background(torch):
        raise AssertionError("a background build was started")

    monkeypatch.setattr(_reader, "_lookup", lookup)
    monkeypatch.setattr(_reader, "_start_background", no_background)
    return calls, answer


def test_nothing_is_decided_while_torch_is_not_imported(monkeypatch, lookups):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert _reader.reader_status() == "not decided yet (torch is not imported)"
    assert _reader.reader_capsule() is None
    assert "status" not in _reader._STATE
    # torch imported later (CUDA build, no GPU): decided then, and said why
    monkeypatch.setitem(sys.modules, "torch", fake_torch("13.0", gpu=False))
    assert _reader.reader_status() == "not used (torch sees no GPU here)"
    monkeypatch.setitem(sys.modules, "torch", fake_torch(None, gpu=False))
    assert _reader.reader_status() == "not used (torch sees no GPU here)"  # decided once
    assert lookups[0] == []


def test_report_builds_nothing_and_says_how_the_reader_will_come(monkeypatch, lookups):
    calls, answer = lookups
    monkeypatch.setitem(sys.modules, "torch", fake_torch("13.0", gpu=True))
    line = _reader.reader_report()
    assert line.startswith("C++ reader not built yet (built in the background by the first "
                           "launch with a CUDA tensor; thork_torch.build_reader()"), line
    assert "status" not in _reader._STATE and calls == [False]
    monkeypatch.setenv("THORK_TORCH_READER", "build")
    assert "by the first launch with a CUDA tensor, which waits" in _reader.reader_report()
    monkeypatch.setenv("THORK_TORCH_READER", "0")
    assert _reader.reader_report() == "off (THORK_TORCH_READER=0)"
    assert calls == [False, False]  # never with build=True


def test_report_loads_a_cached_reader(monkeypatch, lookups):
    calls, answer = lookups
    answer[0] = types.SimpleNamespace(cuda=True, reader="capsule")
    monkeypatch.setitem(sys.modules, "torch", fake_torch("13.0", gpu=True))
    assert _reader.reader_report() == "ready (C++, CUDA)"
    assert _reader.reader_capsule() == "capsule" and calls == [False]


def test_status_after_report_starts_the_background_build_once(monkeypatch, lookups):
    calls, answer = lookups
    started: list[object] = []
    monkeypatch.setattr(_reader, "_start_background", started.append)
    torch = fake_torch("13.0", gpu=True)
    monkeypatch.setitem(sys.modules, "torch", torch)
    _reader.reader_report()
    assert started == []
    assert _reader.reader_status() == \
        "building in the background (torch's Python API until then)"
    assert _reader.reader_status().startswith("building") and started == [torch]


def test_report_without_torch_installed(monkeypatch, lookups):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    assert _reader.reader_report() == "torch is not installed"
    assert "status" not in _reader._STATE


def test_the_adapter_describes_the_reader(monkeypatch, lookups):
    from thork_torch import TorchAdapter

    monkeypatch.setitem(sys.modules, "torch", fake_torch(None, gpu=False))
    assert TorchAdapter().describe() == \
        "hot paths read CUDA tensors: not used (torch has no CUDA here)"
