"""thork_torch's C++ reader of torch tensors (``_reader.cpp``, session 19), checked against
torch's own Python API: what it says of a tensor (address, shape, dtype, contiguity,
device) must be what ``data_ptr()``, ``shape``, ``dtype``, ``is_contiguous()`` and
``device`` say, on fresh random shapes and views; what it cannot vouch for (conjugate and
negative views, sparse layouts, non-tensors) it refuses; its current stream is torch's.
Needs torch and a C++ compiler (the reader is built here, ~15-40 s once per cache); CUDA
parts run where torch sees a GPU. The hot path with the reader registered is in
test_foreign_hot.py (GPU)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from thork_torch import _reader  # noqa: E402

CUDA = torch.cuda.is_available()


@pytest.fixture(scope="module")
def reader():
    try:
        return _reader.build_reader()
    except Exception as exc:  # noqa: BLE001 - no C++ compiler or headers here
        import shutil

        if shutil.which(os.environ.get("CXX") or "c++") is None:
            pytest.skip(f"no C++ compiler: {exc}")
        raise


def _expect(t):
    dev = (2, t.device.index or 0) if t.is_cuda else (1, 0)
    return (t.data_ptr(), tuple(t.shape), t.dtype, *dev, int(t.is_contiguous()))


DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
          torch.uint8, torch.int32, torch.int64, torch.bool, torch.complex64]


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_what_it_reads_is_what_torch_says(reader, rng, device):
    if device == "cuda" and not CUDA:
        pytest.skip("torch has no CUDA here")
    for trial in range(40):
        dtype = DTYPES[trial % len(DTYPES)]
        ndim = int(rng.integers(0, 5))
        shape = tuple(int(s) for s in rng.integers(1, 9, ndim))
        base = torch.zeros(shape, dtype=dtype, device=device)
        views = [base]
        if ndim >= 2:
            views += [base.transpose(0, 1), base[1:], base[:, ::2]]
        if ndim >= 1:
            views += [base[..., :1], base.unsqueeze(0).expand(3, *shape),
                      base.reshape(-1)[1:] if base.numel() > 1 else base]
        for t in views:
            assert reader.read(t) == _expect(t), (shape, dtype, t.stride())
    empty = torch.empty((0, 3), device=device)
    assert reader.read(empty)[1:] == _expect(empty)[1:]  # (an empty tensor's address: any)


def test_what_it_refuses(reader):
    x = torch.randn(5, 3, dtype=torch.complex64)
    assert reader.read(x) is not None
    assert reader.read(x.conj()) is None  # a lazy conjugate: memory holds other values
    assert reader.read(torch.randn(4)._neg_view()) is None
    assert reader.read(torch.randn(4, 4).to_sparse()) is None
    for other in (None, 1, 2.5, np.zeros(3, np.float32), "tensor"):
        assert reader.read(other) is None
    with pytest.raises(TypeError):
        reader.current_stream("0")


def test_its_current_stream_is_torchs(reader):
    if not CUDA:  # (a CUDA build of torch on a machine without a GPU: no stream either)
        assert reader.cuda == (torch.version.cuda is not None)
        assert reader.current_stream(0) is None
        pytest.skip("torch sees no GPU here: no stream to compare")
    assert reader.cuda is True
    raw = torch._C._cuda_getCurrentRawStream
    assert reader.current_stream(0) == raw(0)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        assert reader.current_stream(0) == side.cuda_stream == raw(0)
    assert reader.current_stream(0) == raw(0)
    assert reader.current_stream(torch.cuda.device_count()) is None  # no such device
    assert reader.current_stream(-1) is None


def test_the_adapter_hands_the_launcher_the_capsule_where_it_reads_cuda(reader, monkeypatch):
    from thork_torch import TorchAdapter

    style, current, dtypes = TorchAdapter().native_reader(torch.Tensor)
    assert style == 2 and dtypes[torch.float32].name == "float32"
    if CUDA:
        assert current is reader.reader  # the C++ reader
    else:
        assert callable(current)  # torch's Python API: a CPU build reads no CUDA tensor
    assert TorchAdapter().native_reader(torch.nn.Parameter) is None


def test_the_policy_variable(monkeypatch):
    from thork_core import PluginError

    monkeypatch.setenv("THORK_TORCH_READER", "0")
    _reader._reset()
    try:
        assert _reader.reader_capsule() is None
        assert _reader.reader_status().startswith("off")
        with pytest.raises(PluginError, match="THORK_TORCH_READER=0"):
            _reader.build_reader()
        monkeypatch.setenv("THORK_TORCH_READER", "sometimes")
        _reader._reset()
        with pytest.raises(PluginError, match="THORK_TORCH_READER: one of auto, build, 0 "
                                              "expected, got 'sometimes'"):
            _reader.build_reader()
        assert _reader.reader_capsule() is None  # never raises
        assert "unavailable" in _reader.reader_status()
    finally:
        _reader._reset()


def test_the_build_recipe_follows_torch():
    recipe = _reader.build_recipe(torch, "c++17")
    flags = recipe["flags"]
    assert "-std=c++17" in flags
    abi = int(bool(torch._C._GLIBCXX_USE_CXX11_ABI))
    assert f"-D_GLIBCXX_USE_CXX11_ABI={abi}" in flags
    tdir = os.path.dirname(os.path.abspath(torch.__file__))
    assert os.path.join(tdir, "include") in flags
    assert ("-DTHORK_TORCH_CUDA" in flags) == (torch.version.cuda is not None)
    assert ("-lc10_cuda" in recipe["libs"]) == (torch.version.cuda is not None)
    assert recipe["extra"] == [torch.__version__, tdir]


def test_the_background_build_fills_the_cache(tmp_path):
    """What a process without the reader starts (``python -m thork_torch._reader``): a
    separate process that builds into the cache without importing torch; the parent then
    finds the library there without compiling."""
    env = {**os.environ, "THORK_CACHE_DIR": str(tmp_path / "cache")}
    import json

    spec = json.dumps({"recipes": [_reader.build_recipe(torch, s) for s in _reader._STDS]})
    probe = ("import sys, runpy; sys.argv = ['x', sys.argv[1]]\n"
             "try:\n    runpy.run_module('thork_torch._reader', run_name='__main__')\n"
             "except SystemExit as e:\n    code = e.code\n"
             "print('torch imported' if 'torch' in sys.modules else 'no torch'); "
             "sys.exit(code)")
    proc = subprocess.run([sys.executable, "-c", probe, spec], env=env, capture_output=True,
                          text=True, timeout=600)
    if proc.returncode != 0 and "No such file" in proc.stderr:
        pytest.skip(proc.stderr[-300:])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "no torch"
    check = ("import torch, sys\nfrom thork_torch import _reader\n"
             "mod = _reader._lookup(torch, build=False)\n"
             "print(mod is not None and mod.read(torch.ones(3)) is not None)")
    got = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True,
                         text=True, timeout=300)
    assert got.stdout.strip() == "True", got.stderr[-2000:]


def test_auto_builds_in_the_background_then_switches(monkeypatch, tmp_path):
    """THORK_TORCH_READER=auto in a process that finds nothing cached: the first look
    answers "not yet" at once (torch's Python API serves), a separate process builds,
    and when it ends the reader is loaded and the launcher asked again. (A CPU build of
    the reader here: torch is made to look like a CUDA build with a GPU, the recipe's CUDA
    part taken out again.)"""
    import threading

    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("THORK_TORCH_READER", "auto")
    fake_inc = str(tmp_path)
    monkeypatch.setattr(_reader, "_cuda_include", lambda: fake_inc)
    real_recipe = _reader.build_recipe

    def cpu_recipe(t, std="c++20"):
        r = real_recipe(t, std)
        flags, out = r["flags"], []
        for i, f in enumerate(flags):
            if f == "-DTHORK_TORCH_CUDA" or f == fake_inc or (
                    f == "-I" and i + 1 < len(flags) and flags[i + 1] == fake_inc):
                continue
            out.append(f)
        return {**r, "flags": out, "libs": [x for x in r["libs"] if x != "-lc10_cuda"]}

    monkeypatch.setattr(_reader, "build_recipe", cpu_recipe)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    done = threading.Event()
    monkeypatch.setattr(_reader, "_refresh", done.set)
    monkeypatch.setattr(_reader, "_STATE", {})
    assert _reader.reader_capsule() is None  # at once: nothing cached, the build started
    assert _reader.reader_status().startswith("building in the background")
    assert done.wait(600), _reader.reader_status()
    mod = _reader._STATE["module"]
    assert _reader.reader_status() == "ready (C++, CPU only; built in the background)"
    x = torch.arange(6.0).reshape(2, 3)
    assert mod.read(x) == _expect(x)
    assert _reader._lookup(torch, build=False) is not None  # in the cache for later processes
