"""Fixtures shared by the fkl tests: the GPU call path without a GPU (``fake_gpu``) and a
count of the calls that take the general path (``slow_calls``). fkl is imported inside
the fixtures: this folder is not collected where fkl is not installed."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.fake_gpu import FakeExecutable, FakeGpuTarget


@pytest.fixture
def slow_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the calls that take the general path (``CallPath._call_slow``)."""
    from fkl import _call

    count = [0]
    orig = _call.CallPath._call_slow

    def spy(self: Any, *a: Any, **k: Any) -> Any:
        count[0] += 1
        return orig(self, *a, **k)

    monkeypatch.setattr(_call.CallPath, "_call_slow", spy)
    return count


@pytest.fixture(params=[1, 2], ids=["one-gpu", "two-gpus"])
def fake_gpu(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Pipes with target="gpu" plan and launch without a GPU: kernels traced for CUDA,
    launches appended to the returned list as (prepared launch, addresses). With two
    GPUs core's probe reads no ``__cuda_array_interface__`` (it names no device)."""
    from fkl._kernels import Built, Kernels
    from thork_core import _probe

    log: list[Any] = []
    monkeypatch.setattr(Kernels, "resolve", lambda self: FakeGpuTarget())
    monkeypatch.setattr(Kernels, "get", lambda self, t, variant, device=0: Built(
        self.lowered(t, variant, "gpu"), FakeExecutable(log), None))  # type: ignore[arg-type]
    monkeypatch.setattr(_probe, "_ONE_GPU", [request.param == 1])
    return log
