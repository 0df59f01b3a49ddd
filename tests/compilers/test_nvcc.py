"""nvcc: finding the toolkit (THORK_NVCC, CUDA_HOME, PATH, the wheel), its artifacts
(cubin, PTX, and the host library with a C launch entry), and arch checks."""

from __future__ import annotations

import ctypes
import os
import stat
import sys

import pytest
from helpers.compiler_suite import SUITE, kernel_for, require_compiler
from thork_core import CompileError, CudaRenderer

# Skipped (with the reason) where thork-backend-nvcc is not installed.
pytestmark = pytest.mark.plugin("nvcc")


def _fake_nvcc(bin_dir, version="12.9.86") -> str:
    os.makedirs(bin_dir, exist_ok=True)
    path = os.path.join(str(bin_dir), "nvcc")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n"
                f'echo "Cuda compilation tools, release {version[:4]}, V{version}"\n')
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return path


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    for var in ("THORK_NVCC", "CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", f"{empty}:/usr/bin:/bin")
    return monkeypatch


def test_thork_nvcc_wins_and_is_final(clean_env, tmp_path):
    from thork_nvcc import find_toolkit

    fake = _fake_nvcc(tmp_path / "tk" / "bin")
    clean_env.setenv("CUDA_HOME", "/usr/local/cuda")
    clean_env.setenv("THORK_NVCC", fake)
    tk, _ = find_toolkit()
    assert tk is not None and (tk.origin, tk.version) == ("THORK_NVCC", "12.9.86")
    assert tk.root == (tmp_path / "tk").resolve()
    clean_env.setenv("THORK_NVCC", str(tmp_path / "missing" / "nvcc"))
    tk, why = find_toolkit()
    assert tk is None and "THORK_NVCC: no " in why  # never replaced by another toolkit


@pytest.mark.parametrize("var", ["CUDA_HOME", "CUDA_PATH"])
def test_cuda_home_and_cuda_path(clean_env, tmp_path, var):
    from thork_nvcc import find_toolkit

    _fake_nvcc(tmp_path / "cuda" / "bin", "12.4.131")
    clean_env.setenv(var, str(tmp_path / "cuda"))
    tk, _ = find_toolkit()
    assert tk is not None and (tk.origin, tk.version) == (var, "12.4.131")


def test_path_then_wheel(clean_env, tmp_path):
    from thork_nvcc import find_toolkit, wheel_nvcc

    site = tmp_path / "site"
    _fake_nvcc(site / "nvidia" / "cu13" / "bin", "13.5.37")
    clean_env.setattr(sys, "path", [str(site), *sys.path])
    assert wheel_nvcc() == site / "nvidia" / "cu13" / "bin" / "nvcc"
    on_path = tmp_path / "onpath"
    _fake_nvcc(on_path, "12.8.93")
    clean_env.setenv("PATH", f"{on_path}:/usr/bin:/bin")
    tk, _ = find_toolkit()
    assert (tk.origin, tk.version) == ("PATH", "12.8.93")
    clean_env.setenv("PATH", "/usr/bin:/bin")
    tk, _ = find_toolkit()
    assert (tk.origin, tk.version) == ("wheel", "13.5.37")


def test_cu12_wheel_layout(clean_env, tmp_path):
    from thork_nvcc import wheel_nvcc

    site = tmp_path / "site12"
    _fake_nvcc(site / "nvidia" / "cuda_nvcc" / "bin", "12.9.86")
    clean_env.setattr(sys, "path", [str(site)])
    assert wheel_nvcc() == site / "nvidia" / "cuda_nvcc" / "bin" / "nvcc"


def _nvcc():
    require_compiler("nvcc")
    from thork_nvcc import NvccCompiler

    return NvccCompiler()


def _saxpy_source():
    return CudaRenderer().render(kernel_for("saxpy").ir)


def test_ptx_for_the_virtual_arch():
    art = _nvcc().compile(_saxpy_source(), entry="saxpy", kind="ptx", arch="sm_80")
    text = art.data.decode()
    assert ".target sm_80" in text and ".entry saxpy" in text


def test_unsupported_arch_is_a_clear_error():
    comp = _nvcc()
    with pytest.raises(CompileError, match=r"nvcc \S+ cannot compile for sm_52; it supports "
                                           r".*sm_75"):
        comp.compile(_saxpy_source(), entry="saxpy", kind="cubin", arch="sm_52")
    with pytest.raises(CompileError, match="not 'fatbin'"):
        comp.compile(_saxpy_source(), entry="saxpy", kind="fatbin", arch="sm_80")


def test_hostlib_exports_a_c_launch_entry(tmp_path, monkeypatch):
    """The seed-004 path: a .so whose ``thork_launch`` ctypes can call (no GPU here: the
    call must fail cleanly with a CUDA error code and message, not crash)."""
    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path))
    art = kernel_for("saxpy", "nvcc").artifact("sm_80", kind="hostlib")
    _nvcc()
    assert art.kind == "hostlib" and art.data[:4] == b"\x7fELF"
    assert art.info["host_entry"] == "thork_launch"
    from thork_nvcc._hostlib import library_path

    lib = ctypes.CDLL(library_path(art))
    for sym in ("thork_launch", "thork_error_string", "thork_attributes"):
        assert hasattr(lib, sym), sym
    lib.thork_error_string.restype = ctypes.c_char_p
    assert lib.thork_error_string(0) == b"no error"
    from thork_core import _cuda

    if not _cuda.gpu_status()[0]:
        dims = (ctypes.c_uint * 3)(1, 1, 1)
        lib.thork_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                     ctypes.c_uint, ctypes.c_void_p]
        rc = lib.thork_launch(None, dims, dims, 0, None)
        assert rc != 0 and lib.thork_error_string(rc)


def test_every_suite_kernel_builds_a_hostlib_for_sm_90(tmp_path, monkeypatch):
    """One arch only: a host library costs ~2 s of nvcc per kernel."""
    _nvcc()
    for name in ("all_dtypes", "control"):
        art = kernel_for(name, "nvcc").artifact("sm_90", kind="hostlib")
        assert art.data[:4] == b"\x7fELF" and art.entry == name
    assert set(SUITE) >= {"all_dtypes", "control"}


def test_describe_for_thork_info():
    text = _nvcc().describe()
    assert text.startswith("nvcc: CUDA ") and "sm_75" in text and "hostlib" in text


def test_hostlib_target_refuses_a_device_that_does_not_exist():
    """The gpu-hostlib target checks the device as the gpu target does (one check, core's
    ``visible_device``), before opening any library."""
    pytest.importorskip("thork_nvcc")
    from thork_core import Artifact, DeviceError, KernelIR
    from thork_core.runtime import device_count
    from thork_nvcc import HostlibTarget

    art = Artifact(kind="hostlib", data=b"", entry="k", compiler="nvcc", arch="sm_90")
    bad = max(device_count(), 1) + 3
    with pytest.raises(DeviceError, match=rf"^k: cuda:{bad} does not exist \("):
        HostlibTarget().load_on(art, KernelIR(name="k", params=[], body=[]), bad)
