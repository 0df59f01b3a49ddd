"""The selection record (``_build``) and the native module's checked-file record
(``_native``): what lets a fresh process's disk-cache hit skip the registry, the compiler
and a second hash of the launch module, and every way such a record goes stale (it must
then be ignored, never give another artifact).

The GPU target is stubbed (available, ``THORK_ARCH=sm_90``, ``load`` returns the
artifact): NVRTC compiles here without a GPU. "A new process" is the memo re-read and the
registry forgotten."""

from __future__ import annotations

import os
import threading
import types
from typing import Any

import pytest
from thork_core import _build, _memo, _plugins, reset_plugins

nvrtc = pytest.importorskip("thork_nvrtc._compiler")


def _kernel(c: float) -> Any:
    import thork as tk

    @tk.jit
    def rec_add(out: tk.DevicePointer[tk.dt.float32], a: tk.DevicePointer[tk.dt.float32],
                i: tk.Uint[tk.ThreadIdx]):
        out[i] = a[i] + c

    return rec_add.ir


@pytest.fixture
def gpu(tmp_path, monkeypatch):
    """A private cache, THORK_ARCH=sm_90, a GPU target that is available and whose load
    hands back the artifact; NVRTC must work here."""
    from thork_core import _cuda
    from thork_core._gpu import GpuTarget

    if not nvrtc.NvrtcCompiler().available()[0]:
        pytest.skip("NVRTC is not usable here")
    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("THORK_ARCH", "sm_90")
    for v in ("THORK_TARGET", "THORK_COMPILER", "THORK_SELECTION_RECORD"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setattr(_cuda, "gpu_status", lambda: (True, "stubbed"))
    monkeypatch.setattr(GpuTarget, "load",
                        lambda self, art, k: types.SimpleNamespace(artifact=art))
    new_process()
    yield
    new_process()


def new_process() -> None:
    _memo.reset()
    reset_plugins()
    _build._TARGETS.clear()


def full(ir: Any) -> Any:
    """The build as a fresh process without a record makes it."""
    exe, info = _build.build_kernel(ir)
    return exe.artifact, info


def test_a_hit_takes_the_record_without_registry_or_compiler(gpu):
    ir = _kernel(1.5)
    art, info = full(ir)  # compiles, indexes the plugins, writes the record
    assert info.cache == "compiled" and info.compiler.startswith("nvrtc-")
    new_process()
    got = _build._recorded_build(ir, None, None, 0)
    assert got is not None
    exe, info2 = got
    assert _plugins._INSTANCE is None, "the registry was built"
    assert info2.cache == "disk" and info2.key == info.key
    assert exe.artifact.data == art.data
    assert info2.flags == info.flags and info2.arch == "sm_90"


def test_the_record_gives_the_key_the_full_path_gives(gpu):
    ir = _kernel(2.5)
    full(ir)
    new_process()
    _, via_record = _build.build_kernel(ir)
    new_process()
    with pytest.MonkeyPatch.context() as m:
        m.setenv("THORK_SELECTION_RECORD", "0")
        _, via_registry = _build.build_kernel(ir)
    assert via_record.key == via_registry.key and via_record.cache == "disk"


def test_a_miss_goes_the_full_way(gpu):
    full(_kernel(3.5))
    new_process()
    assert _build._recorded_build(_kernel(4.5), None, None, 0) is None  # not compiled yet
    _, info = _build.build_kernel(_kernel(4.5))
    assert info.cache == "compiled"


def test_a_changed_declared_variable_ignores_the_record(gpu, monkeypatch):
    ir = _kernel(5.5)
    full(ir)
    new_process()
    monkeypatch.setenv("CUDA_HOME", "/nonexistent/cuda-elsewhere")
    assert _build._recorded_build(ir, None, None, 0) is None


def test_a_changed_declared_file_ignores_the_record(gpu, monkeypatch, tmp_path):
    lib = tmp_path / "libnvrtc.so.99"
    lib.write_bytes(b"one")
    real = nvrtc.NvrtcCompiler.key_inputs
    monkeypatch.setattr(nvrtc.NvrtcCompiler, "key_inputs",
                        lambda self: (real(self)[0], [*real(self)[1], str(lib)]))
    ir = _kernel(6.5)
    full(ir)
    new_process()
    assert _build._recorded_build(ir, None, None, 0) is not None
    new_process()
    lib.write_bytes(b"a toolkit upgraded in place")
    assert _build._recorded_build(ir, None, None, 0) is None
    new_process()
    lib.unlink()
    assert _build._recorded_build(ir, None, None, 0) is None


def test_a_changed_selection_variable_ignores_the_record(gpu, monkeypatch):
    ir = _kernel(7.5)
    full(ir)
    new_process()
    monkeypatch.setenv("THORK_COMPILER", "nvrtc")
    assert _build._recorded_build(ir, None, None, 0) is None
    monkeypatch.delenv("THORK_COMPILER")
    monkeypatch.setenv("THORK_DISABLE_PLUGINS", "clang")
    assert _build._recorded_build(ir, None, None, 0) is None
    monkeypatch.delenv("THORK_DISABLE_PLUGINS")
    assert _build._recorded_build(ir, "cpu", None, 0) is None  # another request


def test_an_edited_plugin_file_ignores_the_record(gpu, tmp_path):
    ir = _kernel(8.5)
    full(ir)
    extra = tmp_path / "plugin_file.py"
    extra.write_text("x = 1\n")
    index = _memo.recall(_plugins._INDEX, [_plugins._INDEX_FORMAT])
    first = next(iter(index))
    index[first]["files"].append([str(extra), *_memo.path_fingerprint([str(extra)])[0][1:]])
    _memo.remember(_plugins._INDEX, [_plugins._INDEX_FORMAT], index)
    new_process()
    _build.build_kernel(ir)  # records under the index as it now is
    new_process()
    assert _build._recorded_build(ir, None, None, 0) is not None
    new_process()
    extra.write_text("x = 22\n")
    assert _build._recorded_build(ir, None, None, 0) is None


def test_a_wrong_recorded_identity_never_gives_another_artifact(gpu):
    ir = _kernel(9.5)
    art, info = full(ir)
    base = _build._record_base(None, None)
    rec = _memo.recall(_build._RECORD, base)
    rec["keys"]["sm_90"][1] = "nvrtc-0.1"  # as if recorded for another NVRTC
    _memo.remember(_build._RECORD, base, rec)
    new_process()
    assert _build._recorded_build(ir, None, None, 0) is None  # its key is not cached
    exe, info2 = _build.build_kernel(ir)  # the full path: the real identity's entry
    assert info2.key == info.key and exe.artifact.data == art.data


@pytest.mark.parametrize("damage", [None, [], {"target": 3}, {"target": ["x", 0, "gpu"]},
                                    "text"])
def test_a_damaged_record_is_ignored(gpu, damage):
    ir = _kernel(10.5)
    full(ir)
    base = _build._record_base(None, None)
    rec = _memo.recall(_build._RECORD, base)
    if isinstance(damage, dict):
        rec.update(damage)
    else:
        rec = damage
    _memo.remember(_build._RECORD, base, rec)
    new_process()
    assert _build._recorded_build(ir, None, None, 0) is None


def test_an_unavailable_target_ignores_the_record(gpu, monkeypatch):
    from thork_core import _cuda

    ir = _kernel(11.5)
    full(ir)
    new_process()
    monkeypatch.setattr(_cuda, "gpu_status", lambda: (False, "no GPU now"))
    assert _build._recorded_build(ir, None, None, 0) is None


def test_switched_off(gpu, monkeypatch):
    ir = _kernel(12.5)
    full(ir)
    new_process()
    monkeypatch.setenv("THORK_SELECTION_RECORD", "0")
    assert _build._recorded_build(ir, None, None, 0) is None


def test_threads_building_through_the_record_agree(gpu):
    irs = [_kernel(20.5 + i) for i in range(4)]
    keys = [full(ir)[1].key for ir in irs]
    new_process()
    got: list[Any] = [None] * 16
    go = threading.Barrier(16)

    def work(n: int) -> None:
        go.wait()
        got[n] = _build.build_kernel(irs[n % 4])[1]

    threads = [threading.Thread(target=work, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [i.key for i in got] == [keys[n % 4] for n in range(16)]
    assert all(i.cache == "disk" for i in got)


# -- the native launch module's checked-file record ----------------------------------------

@pytest.fixture
def native_lib(tmp_path, monkeypatch):
    """The native module built into a private cache; its key and file."""
    from thork_core import _native

    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path / "cache"))
    _memo.reset()
    src, cc = _native._source(), _native._cc()
    key = _native._source_key(src, cc)
    try:
        path = _native._verified_library(src, cc, key)
    except RuntimeError as exc:
        pytest.skip(str(exc))
    _native._remember_checked(key, path)
    _memo.reset()
    yield _native, key, path
    _memo.reset()


def test_a_checked_library_is_not_hashed_again(native_lib):
    native, key, path = native_lib
    assert native._checked_before(key) == path


@pytest.mark.parametrize("change", ["rewrite", "restamp", "replace", "chmod", "remove"])
def test_a_changed_library_takes_the_full_check(native_lib, change):
    native, key, path = native_lib
    data = open(path, "rb").read()
    if change == "rewrite":
        with open(path, "r+b") as f:
            f.write(b"\0")
    elif change == "restamp":
        st = os.stat(path)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # same times: ctime moves
    elif change == "replace":
        os.replace(path, path + ".old")
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, 0o600)
    elif change == "chmod":
        os.chmod(path, 0o666)
    else:
        os.unlink(path)
    assert native._checked_before(key) is None
    if change != "remove":  # the full check still refuses what is not Thork's
        if change in ("rewrite", "chmod"):
            assert native._verified_library(native._source(), native._cc(), key) == path
            assert open(path, "rb").read() == data  # rebuilt or re-stored, not the bytes


def test_an_old_library_takes_the_full_check(native_lib):
    native, key, path = native_lib
    st = os.stat(path)
    old = st.st_mtime_ns - 2 * native._RECHECK_S * 10**9
    os.utime(path, ns=(st.st_atime_ns, old))
    native._remember_checked(key, path)  # as if recorded then
    _memo.reset()
    assert native._checked_before(key) is None
