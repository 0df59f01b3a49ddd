"""Selection rules (thork_core._selection, docs/plugins.md "Selection rules"): a third-party
target or compiler never silently displaces the built-in default whatever its priority;
opting in with THORK_PLUGIN_DEFAULTS or naming it does; a target's preferred compiler;
per-call ``compiler=`` on launches."""

from __future__ import annotations

import numpy as np
import pytest
import thork_core
from helpers import has_plugin, install_dist, poisoned, random_array
from thork_core import NoTargetError, Plugins

pytestmark = pytest.mark.plugin("cpu")

PLUGIN = """
from thork_core.plugin import hookimpl
from thork_cpu import CpuTarget, HostCompiler

class Greedy(CpuTarget):
    '''A working CPU target that claims the highest priority.'''
    name = "greedy"
    priority = 10_000

class GreedyCxx(HostCompiler):
    '''A working host compiler claiming the highest priority (adds a define).'''
    name = "greedy-cxx"
    priority = 10_000
    def flags(self, kind, arch):
        return [*super().flags(kind, arch), "-DGREEDY=1"]

class Picky(CpuTarget):
    '''A target naming its preferred compiler, whose priority is the lowest.'''
    name = "picky"
    priority = -5
    preferred_compiler = "picky-cxx"

class PickyCxx(HostCompiler):
    name = "picky-cxx"
    priority = -5

class Lost(CpuTarget):
    '''Prefers a compiler that is not installed.'''
    name = "lost"
    priority = -5
    preferred_compiler = "no-such-cxx"

@hookimpl
def thork_register_targets():
    return [Greedy(), Picky(), Lost()]

@hookimpl
def thork_register_compilers():
    return [GreedyCxx(), PickyCxx()]
"""


@pytest.fixture
def greedy(tmp_path, monkeypatch):
    """The plugin above installed (entry point ``greedy`` of distribution thork-greedy);
    no process-wide choices in the environment."""
    pytest.importorskip("thork_cpu")
    install_dist(tmp_path, "thork-greedy", {"greedy": "thork_greedy_plugin"},
                 {"thork_greedy_plugin": PLUGIN})
    monkeypatch.syspath_prepend(str(tmp_path))
    for var in ("THORK_TARGET", "THORK_COMPILER", "THORK_PLUGIN_DEFAULTS"):
        monkeypatch.delenv(var, raising=False)
    thork_core.reset_plugins()
    yield
    thork_core.reset_plugins()


def builtin_default() -> str:
    return Plugins(blocked={"greedy"}).target().name


def test_third_party_target_never_silently_displaces_the_default(greedy, monkeypatch):
    reg = Plugins()
    assert "greedy" in reg.info and reg.target("greedy").priority == 10_000
    assert reg.target().name == builtin_default() != "greedy"
    # Named, it runs; opted in, its priority counts.
    assert reg.target("greedy").name == "greedy"
    monkeypatch.setenv("THORK_TARGET", "greedy")
    assert Plugins().target().name == "greedy"
    monkeypatch.delenv("THORK_TARGET")
    monkeypatch.setenv("THORK_PLUGIN_DEFAULTS", "someone-else, greedy")
    assert Plugins().target().name == "greedy"


def test_third_party_compiler_never_silently_displaces_the_default(greedy, monkeypatch):
    reg = Plugins()
    cpu = reg.target("cpu")
    assert reg.compiler(None, cpu).name == "host-cxx"
    assert reg.compiler("greedy-cxx", cpu).name == "greedy-cxx"
    monkeypatch.setenv("THORK_PLUGIN_DEFAULTS", "greedy")
    assert Plugins().compiler(None, cpu).name == "greedy-cxx"


def test_untrusted_plugins_still_serve_when_nothing_trusted_is_available(greedy):
    """Ranked last, not excluded: with the built-in targets blocked the plugin's run."""
    reg = Plugins(blocked={"cpu"})
    # core's GPU target may be available (on the GPU machine); the rule is about order.
    names = [t.name for t in reg.targets() if t.available()[0]]
    chosen = reg.target().name
    assert chosen == ("gpu" if "gpu" in names else "greedy")


def test_a_target_names_its_preferred_compiler(greedy, monkeypatch):
    reg = Plugins()
    picky = reg.target("picky")
    assert reg.compiler(None, picky).name == "picky-cxx"     # over host-cxx's priority
    assert reg.compiler("host-cxx", picky).name == "host-cxx"  # an explicit name wins
    monkeypatch.setenv("THORK_COMPILER", "host-cxx")
    assert Plugins().compiler(None, picky).name == "host-cxx"  # so does the process's
    monkeypatch.delenv("THORK_COMPILER")
    # A preference that is not installed falls back to the default ranking.
    assert reg.compiler(None, reg.target("lost")).name == "host-cxx"


def test_unknown_target_is_a_clear_error(greedy):
    with pytest.raises(NoTargetError, match=r"no target named 'nope'.*installed: .*greedy"):
        Plugins().target("nope")


def test_per_call_compiler_on_a_launch(greedy, rng):
    import thork as tk

    f32 = tk.dt.float32

    @tk.jit(target="cpu")
    def scale(x: tk.DevicePointer[f32], out: tk.DevicePointer[f32], n: tk.dt.int32):
        i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
        with tk.if_(i < n):
            out[i] = x[i] * 3.0 + 1.0

    n = 1001
    x = random_array(rng, n, np.float32)
    out = poisoned(n, np.float32)
    scale[(n + 127) // 128, 128](x, out, n, compiler="greedy-cxx")
    np.testing.assert_allclose(out, x * np.float32(3) + np.float32(1), rtol=1e-6, atol=1e-6)
    assert scale.compile_info.compiler.startswith("greedy-cxx")
    assert "-DGREEDY=1" in scale.compile_info.flags
    out2 = poisoned(n, np.float32)
    scale[(n + 127) // 128, 128](x, out2, n)                     # the kernel's own choice
    np.testing.assert_array_equal(out2, out)
    assert scale.compile_info.compiler.startswith("host-cxx")
    if has_plugin("nvrtc"):  # (a plugin subset without it names the missing plugin)
        with pytest.raises(thork_core.PluginError, match="compiler 'nvrtc' cannot produce "
                                                         "code for the cpu target"):
            scale[1, 1](x, out, n, compiler="nvrtc")


@pytest.mark.gpu
def test_per_call_compiler_on_the_gpu(rng):
    """Per call, each installed CUDA compiler builds its own executable; same results."""
    import thork as tk
    from helpers import has_plugin

    f32 = tk.dt.float32

    @tk.jit(target="gpu")
    def fma3(x: tk.DevicePointer[f32], out: tk.DevicePointer[f32], n: tk.dt.int32):
        i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
        with tk.if_(i < n):
            out[i] = x[i] * 3.0 + 1.0

    n = 4097
    x = random_array(rng, n, np.float32)
    used = []
    for name in ("nvrtc", "nvcc", "clang"):
        if not has_plugin(name):
            continue
        reg = thork_core.plugins()
        try:
            reg.compiler(name, reg.target("gpu"))
        except thork_core.PluginError:  # installed, but its toolchain is absent here
            continue
        out = poisoned(n, np.float32)
        fma3[(n + 255) // 256, 256](x, out, n, compiler=name)
        np.testing.assert_allclose(out, x * np.float32(3) + np.float32(1), rtol=1e-6, atol=1e-6)
        info = fma3.compile_info
        assert info.compiler.startswith(name) or info.fallback, (name, info)
        used.append(name)
    assert used, "no CUDA compiler usable"


def test_a_constant_named_like_a_launch_option_is_refused():
    """``compiler=`` (like ``stream=`` and ``target=``) is the launch's own keyword, so a
    compile-time constant cannot take that name: a clear error, not a compiler lookup."""
    import thork as tk

    @tk.jit(target="cpu")
    def k(out: tk.DevicePointer[tk.dt.int32], compiler: tk.Constexpr[int] = 1):
        out[0] = compiler

    out = np.zeros(1, np.int32)
    with pytest.raises(thork_core.TraceError, match="constant 'compiler' has the name of a "
                                                   "launch option"):
        k[1, 1](out, compiler=2)
