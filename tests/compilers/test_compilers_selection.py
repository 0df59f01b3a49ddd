"""Which compiler builds a kernel: per kernel (``tk.jit(compiler=)``), per process
(``THORK_COMPILER``), else by priority (NVRTC first); missing compilers name their package."""

from __future__ import annotations

import pytest
from helpers.compiler_suite import kernel_for, require_compiler
from thork_core import PluginError, Plugins, plugins, reset_plugins
from thork_core._gpu import GpuTarget


@pytest.fixture
def fresh_registry():
    """Reload plugins after the test changed the environment that steers them."""
    reset_plugins()
    yield
    reset_plugins()


def _cpu(reg: Plugins):
    for t in reg.targets():
        if t.name == "cpu":
            return t
    pytest.skip("thork-target-cpu is not installed")


def _hostlib(reg: Plugins):
    for t in reg.targets():
        if t.name == "gpu-hostlib":
            return t
    pytest.skip("thork-backend-nvcc is not installed")


def test_priorities_put_nvrtc_first_then_nvcc_then_clang(monkeypatch):
    monkeypatch.delenv("THORK_COMPILER", raising=False)  # the suite may run with it set
    reg = Plugins(autoload=True, blocked=set())
    prio = {c.name: c.priority for c in reg.compilers()}
    for name in ("nvrtc", "nvcc", "clang"):
        if name not in prio:
            pytest.skip(f"{name} plugin not installed")
    assert prio["nvrtc"] > prio["nvcc"] > prio["clang"]
    assert reg.compiler(None, GpuTarget()).name == "nvrtc"


def test_without_nvrtc_priority_picks_nvcc_then_clang(monkeypatch):
    monkeypatch.delenv("THORK_COMPILER", raising=False)
    require_compiler("nvcc")
    require_compiler("clang")
    assert Plugins(blocked={"nvrtc"}).compiler(None, GpuTarget()).name == "nvcc"
    assert Plugins(blocked={"nvrtc", "nvcc"}).compiler(None, GpuTarget()).name == "clang"


def test_cpu_target_never_gets_a_cuda_compiler(monkeypatch):
    monkeypatch.delenv("THORK_COMPILER", raising=False)
    reg = Plugins()
    cpu = _cpu(reg)
    assert reg.compiler(None, cpu).language == "c++"
    # Even with NVRTC gone, nvcc's CUDA 'hostlib' must not be offered to the CPU target.
    assert Plugins(blocked={"nvrtc"}).compiler(None, cpu).name == "host-cxx"
    for name in ("nvcc", "clang"):
        require_compiler(name)
        with pytest.raises(PluginError, match=f"compiler '{name}' cannot produce code for the cpu"):
            reg.compiler(name, cpu)


def test_gpu_hostlib_target_is_fed_by_nvcc_only(monkeypatch):
    monkeypatch.delenv("THORK_COMPILER", raising=False)
    reg = Plugins()
    hostlib = _hostlib(reg)
    assert hostlib.consumes == ("hostlib",) and hostlib.language == "cuda"
    assert reg.compiler(None, hostlib).name == "nvcc"
    for other in ("nvrtc", "clang"):
        if any(c.name == other for c in reg.compilers()):
            with pytest.raises(PluginError, match="cannot produce code for the gpu-hostlib"):
                reg.compiler(other, hostlib)
    # Never chosen over the real GPU target when nothing is asked for.
    gpu = next(t for t in reg.targets() if t.name == "gpu")
    assert hostlib.priority < gpu.priority


@pytest.mark.parametrize("name", ["nvcc", "clang"])
def test_per_kernel_choice(name, monkeypatch, fresh_registry):
    monkeypatch.delenv("THORK_COMPILER", raising=False)
    require_compiler(name)
    art = kernel_for("saxpy", name).artifact("sm_80")
    assert art.compiler.startswith(f"{name}-")
    # An unpinned kernel in the same process still gets the priority choice.
    best = plugins().compiler(None, GpuTarget()).name
    assert kernel_for("saxpy").artifact("sm_80").compiler.startswith(f"{best}-")
    if any(c.name == "nvrtc" for c in plugins().compilers()):
        assert best == "nvrtc"


@pytest.mark.parametrize("name", ["nvcc", "clang"])
def test_per_process_choice_and_per_kernel_override(name, monkeypatch, fresh_registry):
    require_compiler(name)
    require_compiler("nvrtc")
    monkeypatch.setenv("THORK_COMPILER", name)
    assert kernel_for("saxpy").artifact("sm_80").compiler.startswith(f"{name}-")
    # A kernel's own choice beats the process-wide one.
    assert kernel_for("saxpy", "nvrtc").artifact("sm_80").compiler.startswith("nvrtc-")


@pytest.mark.parametrize("name,package", [("nvcc", "thork-backend-nvcc"),
                                          ("clang", "thork-backend-clang"),
                                          ("nvrtc", "thork-backend-nvrtc")])
def test_missing_compiler_names_its_package(name, package, monkeypatch, fresh_registry):
    monkeypatch.setenv("THORK_DISABLE_PLUGINS", name)
    with pytest.raises(PluginError, match=rf"compiler '{name}' is not installed; install "
                       rf"{package} \(pip install --find-links wheelhouse 'thork\[{name}\]'"):
        kernel_for("saxpy", name).artifact("sm_80")


def test_unusable_clang_says_why(monkeypatch, fresh_registry, tmp_path):
    require_compiler("clang")
    missing = str(tmp_path / "no-such-clang")
    monkeypatch.setenv("THORK_CLANG", missing)
    with pytest.raises(PluginError, match=r"compiler 'clang' is installed but not usable: "
                                          r"THORK_CLANG=.*no-such-clang"):
        kernel_for("saxpy", "clang").artifact("sm_80")


def test_unusable_nvcc_says_where_it_looked(monkeypatch, fresh_registry, tmp_path):
    require_compiler("nvcc")
    monkeypatch.setenv("THORK_NVCC", str(tmp_path / "nvcc"))
    with pytest.raises(PluginError, match=r"compiler 'nvcc' is installed but not usable: "
                                          r"no nvcc found \(THORK_NVCC: no .*nvcc\)"):
        kernel_for("saxpy", "nvcc").artifact("sm_80")
