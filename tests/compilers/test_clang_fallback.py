"""clang: the real compilers found on PATH, and the silent nvcc fallback where clang's
CUDA support lags the toolkit (simulated with a fake clang driver)."""

from __future__ import annotations

import shutil

import pytest
from helpers.compiler_suite import ARCHS, kernel_for, require_compiler
from helpers.fake_clang import fake_clang
from thork_core import CompileError, CudaRenderer, reset_plugins

# Skipped (with the reason) where thork-backend-clang is not installed.
pytestmark = pytest.mark.plugin("clang")

@pytest.fixture
def clang_env(monkeypatch, tmp_path):
    require_compiler("clang")
    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path / "cache"))
    reset_plugins()
    yield monkeypatch
    reset_plugins()


def _clang():
    from thork_clang import ClangCompiler

    return ClangCompiler()


def test_unsupported_toolkit_falls_back_to_nvcc_silently(clang_env, tmp_path, capfd):
    require_compiler("nvcc")
    clang_env.setenv("THORK_CLANG", fake_clang(tmp_path, "unsupported"))
    k = kernel_for("saxpy", "clang")
    art = k.artifact("sm_80")
    out, err = capfd.readouterr()
    assert (out, err) == ("", ""), "the fallback must not print anything"
    assert art.data[:4] == b"\x7fELF" and art.compiler.startswith("nvcc-")
    note = art.info["fallback"]
    assert note.startswith("nvcc: clang 99.0.0: ") and "supported by CUDA versions" in note
    assert art.info["requested"] == "clang"
    # thork info shows it.
    assert "falls back to nvcc" in _clang().describe()


def test_ptx_too_new_for_ptxas_falls_back(clang_env, tmp_path):
    require_compiler("nvcc")
    clang_env.setenv("THORK_CLANG", fake_clang(tmp_path, "newptx"))
    art = kernel_for("saxpy", "clang").artifact("sm_80")
    assert art.info["fallback"].startswith("nvcc: ptxas ")
    assert "rejected clang 99.0.0's PTX" in art.info["fallback"]
    # PTX output needs no ptxas: clang's (fake) PTX is returned as it is.
    ptx = kernel_for("saxpy", "clang").artifact("sm_80", kind="ptx")
    assert ptx.data.startswith(b".version 99.9") and "fallback" not in ptx.info


def test_fallback_can_be_turned_off(clang_env, tmp_path):
    clang_env.setenv("THORK_CLANG", fake_clang(tmp_path, "unsupported"))
    clang_env.setenv("THORK_CLANG_FALLBACK", "0")
    with pytest.raises(CompileError, match=r"clang failed to compile kernel 'saxpy' for sm_80 "
                                           r"\(clang 99.0.0: .*\); the nvcc fallback is off"):
        kernel_for("saxpy", "clang").artifact("sm_80")


def test_without_nvcc_the_clang_error_stands(clang_env, tmp_path):
    clang_env.setenv("THORK_CLANG", fake_clang(tmp_path, "unsupported"))
    from thork_nvcc import NvccCompiler

    clang_env.setattr(NvccCompiler, "available", lambda self: (False, "no nvcc found (test)"))
    with pytest.raises(CompileError, match="there is no nvcc to fall back to"):
        kernel_for("saxpy", "clang").artifact("sm_80")


def _installed_clangs():
    return [f"clang++-{n}" for n in range(40, 9, -1) if shutil.which(f"clang++-{n}")]


@pytest.mark.parametrize("clang", _installed_clangs() or [
    pytest.param("none", marks=pytest.mark.skip(reason="no clang++-N on PATH"))])
@pytest.mark.parametrize("arch", ARCHS)
def test_each_installed_clang(clang, arch, clang_env):
    """Every clang++-N here compiles itself where it knows the arch, else falls back."""
    clang_env.setenv("THORK_CLANG", clang)
    comp = _clang()
    major = int(clang.rsplit("-", 1)[1])
    art = comp.compile(CudaRenderer().render(kernel_for("math32").ir), entry="math32",
                       kind="cubin", arch=arch)
    assert art.data[:4] == b"\x7fELF"
    # Clang releases known to have the arch, and known to lack it (15 is undecided here).
    knows = {"sm_75": 11, "sm_80": 11, "sm_90": 16}[arch]
    lacks = {"sm_75": 9, "sm_80": 10, "sm_90": 14}[arch]
    if major >= knows:
        assert "fallback" not in art.info, art.info.get("fallback")
        assert art.compiler.startswith(f"clang-{major}.")
    elif major <= lacks:
        assert art.info["fallback"].startswith("nvcc: ")
        assert "unsupported CUDA gpu architecture" in art.info["fallback"]


def test_clang_is_found_newest_first(monkeypatch):
    clangs = _installed_clangs()
    if not clangs:
        pytest.skip("no clang++-N on PATH")
    monkeypatch.delenv("THORK_CLANG", raising=False)
    from thork_clang import find_clang

    found, _ = find_clang()
    assert found is not None and found.path.endswith(clangs[0])
