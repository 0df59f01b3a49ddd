"""The plugin registry: entry points, broken and blocked plugins, `thork info`, and that
every hook is both tested and documented."""

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import thork_core
from thork_core import Plugins, PluginWarning, _hookspecs

ROOT = Path(__file__).resolve().parents[2]


def make_dist(tmp_path, name, entry_points, module_code=None):
    """A minimal installed distribution on sys.path, with 'thork' entry points."""
    site = tmp_path / "site"
    info = site / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    eps = "\n".join(f"{k} = {v}" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[thork]\n{eps}\n")
    if module_code:
        for mod, code in module_code.items():
            (site / f"{mod}.py").write_text(textwrap.dedent(code))
    return site


def test_broken_entry_point_warns_and_is_skipped(tmp_path, monkeypatch):
    site = make_dist(tmp_path, "thork-broken", {"broken": "thork_no_such_module_xyz"})
    monkeypatch.syspath_prepend(str(site))
    with pytest.warns(PluginWarning, match=r"plugin 'broken' .* failed to load and was skipped"):
        reg = Plugins()
    assert "broken" not in reg.info
    assert "core" in reg.info
    assert any(t.name == "gpu" for t in reg.targets())


def test_plugin_whose_hook_raises_is_skipped(tmp_path, monkeypatch):
    site = make_dist(tmp_path, "thork-raises", {"raises": "thork_raising_plugin"}, {
        "thork_raising_plugin": """
            from thork_core import hookimpl

            @hookimpl
            def thork_register_compilers():
                raise RuntimeError("toolchain exploded")
        """})
    monkeypatch.syspath_prepend(str(site))
    with pytest.warns(PluginWarning, match=r"'raises' failed in thork_register_compilers"):
        reg = Plugins()
    assert "raises" in reg.info
    assert reg.info["raises"].registered == {}


def test_third_party_plugin_registers_a_target(tmp_path, monkeypatch):
    site = make_dist(tmp_path, "thork-extra", {"extra": "thork_extra_plugin"}, {
        "thork_extra_plugin": """
            from thork_core import Frontend, hookimpl

            @hookimpl
            def thork_register_frontends():
                return [Frontend("extra", "thork_extra_plugin", "a third-party front-end")]
        """})
    monkeypatch.syspath_prepend(str(site))
    reg = Plugins()
    assert reg.info["extra"].registered == {"frontends": ["extra"]}
    assert reg.info["extra"].version == "0.1"


def test_blocked_plugin_is_not_loaded(tmp_path, monkeypatch):
    site = make_dist(tmp_path, "thork-broken2", {"broken2": "thork_no_such_module_abc"})
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("THORK_DISABLE_PLUGINS", "broken2, cpu")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a blocked plugin is never even imported
        reg = Plugins()
    assert "broken2" not in reg.info and "cpu" not in reg.info
    assert all(t.name != "cpu" for t in reg.targets())


def test_autoload_off_keeps_only_core(monkeypatch):
    monkeypatch.setenv("THORK_PLUGINS_AUTOLOAD", "0")
    reg = Plugins()
    assert list(reg.info) == ["core"]
    assert reg.compilers() == []


def test_missing_compiler_error_names_the_package():
    from thork_core import PluginError
    from thork_core._gpu import GpuTarget

    reg = Plugins(autoload=False)
    with pytest.raises(PluginError, match=r"compiler 'nvrtc' is not installed; install thork-backend-nvrtc"):
        reg.compiler("nvrtc", GpuTarget())


def test_thork_info_lists_what_is_installed():
    r = subprocess.run([sys.executable, "-m", "thork_core._cli", "info"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    reg = thork_core.plugins()
    for name, info in reg.info.items():
        assert f"{name}" in r.stdout and info.version in r.stdout
    for c in reg.compilers():
        assert c.name in r.stdout
    for section in ("plugins:", "compilers:", "targets:", "gpus:", "cache:"):
        assert section in r.stdout
    assert "cpu:" in r.stdout or "cpu" not in reg.info


def _hook_names():
    tree = ast.parse(Path(_hookspecs.__file__).read_text())
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef)
            and n.name.startswith("thork_")]


def test_every_hook_is_documented():
    doc = (ROOT / "docs" / "plugins.md").read_text()
    names = _hook_names()
    assert len(names) >= 4
    for name in names:
        assert f"`{name}`" in doc, f"{name} missing from docs/plugins.md"
        fn = getattr(_hookspecs, name)
        assert fn.__doc__ and "Called" in fn.__doc__, f"{name} must say when it is called"


def test_every_hook_is_tested():
    tests = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py"))
    for name in _hook_names():
        assert f"def {name}(" in tests, f"no test implements {name}"


def test_every_hook_is_exercised_by_a_test_plugin(tmp_path, monkeypatch):
    site = make_dist(tmp_path, "thork-all", {"all": "thork_all_hooks"}, {
        "thork_all_hooks": """
            from thork_core import Frontend, hookimpl
            from thork_core.plugin import ArrayAdapter
            from thork_cpu import CpuTarget, HostCompiler

            class Lists(ArrayAdapter):
                name = "pylist"
                priority = 1

                def view(self, obj, stream):
                    return None

            class Cpu2(CpuTarget):
                name = "cpu2"

            class Cxx2(HostCompiler):
                name = "cxx2"
                priority = 1

            @hookimpl
            def thork_register_compilers():
                return [Cxx2()]

            @hookimpl
            def thork_register_targets():
                return [Cpu2()]

            @hookimpl
            def thork_register_frontends():
                return [Frontend("all", "thork_all_hooks", "test")]

            @hookimpl
            def thork_register_array_adapters():
                return [Lists()]
        """})
    pytest.importorskip("thork_cpu")
    monkeypatch.syspath_prepend(str(site))
    reg = Plugins()
    assert reg.info["all"].registered == {
        "compilers": ["cxx2"], "targets": ["cpu2"], "frontends": ["all"],
        "array_adapters": ["pylist"]}
    assert reg.array_adapters()[-1].name == "pylist"
    assert reg.target("cpu2").name == "cpu2"
    assert reg.compiler("cxx2", reg.target("cpu2")).name == "cxx2"


def test_process_compiler_choice_applies_only_where_it_fits(monkeypatch):
    pytest.importorskip("thork_cpu")
    pytest.importorskip("thork_nvcc")
    from thork_core import PluginError
    from thork_core._gpu import GpuTarget

    reg = thork_core.plugins()
    monkeypatch.setenv("THORK_COMPILER", "nvcc")
    cpu = reg.target("cpu")
    assert reg.compiler(None, cpu).name == "host-cxx"      # nvcc cannot feed the CPU
    if reg.compiler("nvcc", GpuTarget()).available()[0]:
        assert reg.compiler(None, GpuTarget()).name == "nvcc"
    with pytest.raises(PluginError, match="cannot produce code for the cpu target"):
        reg.compiler("nvcc", cpu)                           # an explicit choice is strict
    monkeypatch.setenv("THORK_COMPILER", "no-such-compiler")
    with pytest.raises(PluginError, match="compiler 'no-such-compiler' is not installed"):
        reg.compiler(None, cpu)
