"""Disk-cache keys cover the compiler's identity and version, its flags and the arch:
switching or upgrading a compiler never serves a stale artifact."""

from __future__ import annotations

import pytest
import thork as tk
from helpers.compiler_suite import SUITE, require_compiler
from helpers.fake_clang import fake_clang
from thork_core import CudaRenderer, cache_key, compile_artifact, disk_cache, plugins


def _compiler(name):
    require_compiler(name)
    return next(c for c in plugins().compilers() if c.name == name)


def _ir_and_source():
    k = tk.jit(SUITE["saxpy"].fn)
    return k.ir, CudaRenderer().render(k.ir)


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path / "cache"))
    return disk_cache()


def _counting(monkeypatch, comp):
    calls = []
    original = type(comp).compile

    def compile(self, *a, **kw):
        calls.append(kw.get("arch"))
        return original(self, *a, **kw)

    monkeypatch.setattr(type(comp), "compile", compile)
    return calls


@pytest.mark.parametrize("name", ["nvcc", "clang"])
def test_switching_compilers_never_shares_an_entry(name, private_cache):
    ir, src = _ir_and_source()
    a_nvrtc, key_nvrtc, _ = compile_artifact(ir, src, _compiler("nvrtc"), "cubin", "sm_80")
    a_other, key_other, hit = compile_artifact(ir, src, _compiler(name), "cubin", "sm_80")
    assert key_nvrtc != key_other and not hit
    assert a_nvrtc.compiler.startswith("nvrtc-")
    assert a_other.compiler.startswith(f"{name}-") or a_other.info.get("fallback")


@pytest.mark.parametrize("name", ["nvcc", "clang"])
def test_a_new_version_recompiles(name, private_cache, monkeypatch):
    comp = _compiler(name)
    ir, src = _ir_and_source()
    calls = _counting(monkeypatch, comp)
    _, key1, hit1 = compile_artifact(ir, src, comp, "cubin", "sm_80")
    _, key1b, hit1b = compile_artifact(ir, src, comp, "cubin", "sm_80")
    assert (hit1, hit1b, key1 == key1b, len(calls)) == (False, True, True, 1)
    real = comp.version()
    monkeypatch.setattr(type(comp), "version", lambda self: real + "-upgraded")
    art, key2, hit2 = compile_artifact(ir, src, comp, "cubin", "sm_80")
    assert not hit2 and key2 != key1 and len(calls) == 2
    assert art.compiler.endswith("-upgraded") or "-upgraded-" in art.compiler \
        or art.info.get("fallback")


@pytest.mark.parametrize("name", ["nvrtc", "nvcc", "clang"])
def test_arch_kind_and_flags_are_in_the_key(name, private_cache, monkeypatch):
    comp = _compiler(name)
    ir, src = _ir_and_source()
    keys = {compile_artifact(ir, src, comp, kind, arch)[1]
            for kind in ("cubin", "ptx") for arch in ("sm_75", "sm_90")}
    assert len(keys) == 4
    base = comp.flags("cubin", "sm_80")
    k1 = cache_key(src, comp.identity(), base, "cubin", "sm_80")
    k2 = cache_key(src, comp.identity(), [*base, "-DX"], "cubin", "sm_80")
    assert k1 != k2


def test_clang_identity_names_clang_toolkit_and_preamble():
    comp = _compiler("clang")
    from thork_clang import find_clang
    from thork_nvcc import find_toolkit

    clang, _ = find_clang()
    tk_, _ = find_toolkit()
    ident = comp.identity()
    assert ident.startswith(f"clang-{clang.version}+")
    if tk_ is not None:
        assert f"+cuda{tk_.version}-" in ident  # ptxas/libdevice/fallback toolkit
    assert ident.rsplit("-", 1)[1].startswith("p")  # digest of the preamble


def test_nvcc_identity_carries_the_host_wrapper_digest():
    comp = _compiler("nvcc")
    ident = comp.identity()
    assert ident.startswith(f"nvcc-{comp.version()}-w")


def test_a_fallback_is_cached_with_its_note(private_cache, monkeypatch, tmp_path):
    """A fallback artifact keeps its note on a cache hit (thork info / compile_info)."""
    comp = _compiler("clang")
    _compiler("nvcc")
    monkeypatch.setenv("THORK_CLANG", fake_clang(tmp_path, "unsupported"))
    ir, src = _ir_and_source()
    a1, _, hit1 = compile_artifact(ir, src, comp, "cubin", "sm_80")
    a2, _, hit2 = compile_artifact(ir, src, comp, "cubin", "sm_80")
    assert (hit1, hit2) == (False, True)
    assert a1.info["fallback"].startswith("nvcc: ") and a2.info["fallback"] == a1.info["fallback"]
