"""Lazy plugin loading: the on-disk plugin index (what each entry point registers) lets a
registry import only the plugins a query needs. The index must follow installs, upgrades
and edits; a plugin that fails when finally imported still warns and is skipped."""

import importlib
import json
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
from thork_core import NoTargetError, Plugins, PluginWarning, _memo, _plugins

# A plugin module: an "alpha" target and an "alphacc" compiler feeding it. PRIORITY is
# replaced per test; DEP optionally imports a helper module.
ALPHA = """
    from thork_core import Compiler, Target, hookimpl
    {dep}

    class AlphaTarget(Target):
        name = "alpha"
        consumes = ("alphalib",)
        language = "alpha"
        priority = {priority}

        def available(self):
            return True, ""

        def renderer(self):
            raise NotImplementedError

        def arch(self):
            return "a1"

        def load(self, artifact, kernel):
            raise NotImplementedError

    class AlphaCompiler(Compiler):
        name = "alphacc"
        priority = 5
        produces = ("alphalib",)
        language = "alpha"

        def version(self):
            return "1"

        def available(self):
            return True, ""

        def compile(self, source, *, entry, kind, arch, options=()):
            raise NotImplementedError

    @hookimpl
    def thork_register_targets():
        return [AlphaTarget()]

    @hookimpl
    def thork_register_compilers():
        return [AlphaCompiler()]
"""

BETA = """
    from thork_core import Frontend, hookimpl

    @hookimpl
    def thork_register_frontends():
        return [Frontend("beta", "thork_beta_plugin", "a test front-end")]
"""

MODULES = ("thork_alpha_plugin", "thork_alpha_dep", "thork_beta_plugin")


def install(site, dist, version, entry_points, modules=None):
    """A distribution in ``site``: its metadata folder (replacing other versions of it, as
    an upgrade does) and its modules."""
    stem = dist.replace("-", "_")  # as wheels name it (importlib.metadata reads the stem)
    for old in site.glob(f"{stem}-*.dist-info"):
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
    info = site / f"{stem}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    eps = "\n".join(f"{k} = {v}" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[thork]\n{eps}\n")
    for mod, code in (modules or {}).items():
        write(site / f"{mod}.py", textwrap.dedent(code))
    fresh_process()


def write(path, text):
    """Write ``text``; make sure the modification time moves even within one clock tick,
    and to another whole second: a ``.pyc`` records its source's time in seconds (and its
    size, the same for priority 1 and 3), so an import could otherwise run the old code."""
    old = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    if path.stat().st_mtime_ns // 10**9 <= old // 10**9:
        new = (old // 10**9 + 2) * 10**9
        os.utime(path, ns=(new, new))


def fresh_process():
    """What a new process would see: none of the test plugins imported, no import caches."""
    for m in MODULES:
        sys.modules.pop(m, None)
    importlib.invalidate_caches()


@pytest.fixture
def site(tmp_path, monkeypatch):
    """An empty site folder on sys.path and a private cache (so a private plugin index)."""
    s = tmp_path / "site"
    s.mkdir()
    monkeypatch.syspath_prepend(str(s))
    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path / "cache"))
    for var in ("THORK_DISABLE_PLUGINS", "THORK_PLUGINS_AUTOLOAD", "THORK_TARGET",
                "THORK_COMPILER"):
        monkeypatch.delenv(var, raising=False)
    fresh_process()
    yield s
    fresh_process()


def alpha(priority=1, dep=""):
    return {"thork_alpha_plugin": ALPHA.format(priority=priority, dep=dep)}


def quiet_registry(**kw):
    """A registry built without any warning (an indexed plugin is not imported to build it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return Plugins(**kw)


def test_indexed_plugins_are_imported_only_when_needed(site):
    install(site, "thork-alpha", "0.1", {"alpha": "thork_alpha_plugin"}, alpha())
    install(site, "thork-beta", "0.1", {"beta": "thork_beta_plugin"}, {"thork_beta_plugin": BETA})
    first = Plugins()  # nothing indexed yet: every plugin is imported and indexed
    assert {"alpha", "beta"} <= set(first.loaded())
    fresh_process()

    reg = quiet_registry()
    assert "thork_alpha_plugin" not in sys.modules and "thork_beta_plugin" not in sys.modules
    assert reg.loaded() == []
    # What each plugin registered is known without importing it.
    assert reg.info["alpha"].registered == {"targets": ["alpha"], "compilers": ["alphacc"]}
    assert reg.info["alpha"].version == "0.1"
    assert reg.info["beta"].registered == {"frontends": ["beta"]}

    t = reg.target("alpha")
    assert t.name == "alpha" and type(t).__module__ == "thork_alpha_plugin"
    assert reg.compiler(None, t).name == "alphacc"
    assert reg.loaded() == ["alpha"]
    assert "thork_beta_plugin" not in sys.modules
    # The full lists import the rest, in the same order as an eager registry.
    assert [f.name for f in reg.frontends()] == [f.name for f in first.frontends()]
    assert [c.name for c in reg.compilers()] == [c.name for c in first.compilers()]
    assert [t.name for t in reg.targets()] == [t.name for t in first.targets()]
    assert "beta" in reg.loaded()


def test_unknown_names_are_answered_from_the_index(site):
    install(site, "thork-alpha", "0.1", {"alpha": "thork_alpha_plugin"}, alpha())
    Plugins()
    fresh_process()
    reg = quiet_registry()
    with pytest.raises(NoTargetError, match=r"no target named 'omega' is installed; "
                                            r"installed: .*alpha"):
        reg.target("omega")
    assert "alpha" not in reg.loaded()


def test_new_and_upgraded_entry_points_invalidate_the_memo(site):
    install(site, "thork-alpha", "0.1", {"alpha": "thork_alpha_plugin"}, alpha(priority=1))
    Plugins()
    fresh_process()
    assert quiet_registry().info["alpha"].version == "0.1"

    # Installing another distribution: its entry point is found (and imported once).
    install(site, "thork-beta", "0.1", {"beta": "thork_beta_plugin"}, {"thork_beta_plugin": BETA})
    reg = Plugins()
    assert reg.info["beta"].registered == {"frontends": ["beta"]}
    assert "beta" in reg.loaded() and "alpha" not in reg.loaded()

    # Upgrading alpha (new version, new code): the new registrations, not the memo's.
    install(site, "thork-alpha", "0.2", {"alpha": "thork_alpha_plugin"}, alpha(priority=7))
    reg = Plugins()
    assert reg.info["alpha"].version == "0.2"
    assert "alpha" in reg.loaded()
    assert next(t for t in reg.targets() if t.name == "alpha").priority == 7
    fresh_process()
    reg = quiet_registry()
    assert reg.loaded() == []
    assert [i.priority for i in reg._items("targets") if i.name == "alpha"] == [7]

    # Uninstalling: gone from the registry, and from the index.
    for f in (site / "thork_alpha-0.2.dist-info").iterdir():
        f.unlink()
    (site / "thork_alpha-0.2.dist-info").rmdir()
    fresh_process()
    reg = quiet_registry()
    assert "alpha" not in reg.info
    index = _memo.recall(_plugins._INDEX, [_plugins._INDEX_FORMAT])
    assert not any(k.startswith("alpha=") for k in index)


def test_edited_plugin_module_is_reindexed(site):
    # An editable install: same version, edited code.
    install(site, "thork-alpha", "0.1", {"alpha": "thork_alpha_plugin"}, alpha(priority=1))
    Plugins()
    write(site / "thork_alpha_plugin.py", textwrap.dedent(ALPHA.format(priority=3, dep="")))
    fresh_process()
    reg = Plugins()
    assert "alpha" in reg.loaded()  # its index entry no longer matched its files
    assert reg.target("alpha").priority == 3


def test_registrations_that_differ_from_the_index_win(site, monkeypatch):
    # A plugin whose registrations change without its files changing (it reads the
    # environment: against the rules, but the registry must still answer from the objects).
    code = ALPHA.replace("priority = {priority}",
                         "priority = int(__import__('os').environ['ALPHA_PRIORITY'])")
    monkeypatch.setenv("ALPHA_PRIORITY", "1")
    install(site, "thork-alpha", "0.1", {"alpha": "thork_alpha_plugin"},
            {"thork_alpha_plugin": code.format(dep="")})
    Plugins()
    fresh_process()
    monkeypatch.setenv("ALPHA_PRIORITY", "3")
    reg = quiet_registry()
    assert [i.priority for i in reg._items("targets") if i.name == "alpha"] == [1]  # indexed
    assert reg.target("alpha").priority == 3  # imported: the real one
    assert [t.priority for t in reg.targets() if t.name == "alpha"] == [3]
    fresh_process()
    assert [i.priority for i in quiet_registry()._items("targets") if i.name == "alpha"] == [3]


def test_lazily_imported_plugin_that_fails_warns_and_is_skipped(site):
    install(site, "thork-alpha", "0.1", {"alpha": "thork_alpha_plugin"},
            {**alpha(dep="import thork_alpha_dep"), "thork_alpha_dep": "X = 1\n"})
    Plugins()
    (site / "thork_alpha_dep.py").unlink()  # not part of the index's fingerprint
    fresh_process()

    reg = quiet_registry()  # indexed: not imported yet, so no warning yet
    assert "alpha" in reg.info
    with pytest.warns(PluginWarning, match=r"plugin 'alpha' .* failed to load and was skipped"):
        with pytest.raises(NoTargetError, match="no target named 'alpha'"):
            reg.target("alpha")
    assert "alpha" not in reg.info
    assert all(c.name != "alphacc" for c in reg.compilers())
    # The next registry imports it up front again (it left the index), and warns there.
    fresh_process()
    with pytest.warns(PluginWarning, match=r"plugin 'alpha' .* failed to load"):
        reg = Plugins()
    assert "alpha" not in reg.info


def test_failing_hook_is_never_indexed(site):
    install(site, "thork-raises", "0.1", {"raises": "thork_alpha_plugin"}, {
        "thork_alpha_plugin": """
            from thork_core import hookimpl

            @hookimpl
            def thork_register_compilers():
                raise RuntimeError("toolchain exploded")
        """})
    for _ in range(2):  # every registry imports it and warns, as without the index
        fresh_process()
        with pytest.warns(PluginWarning, match=r"'raises' failed in thork_register_compilers"):
            reg = Plugins()
        assert reg.info["raises"].registered == {}


def test_blocking_and_autoload_off_never_import_indexed_plugins(site, monkeypatch):
    install(site, "thork-alpha", "0.1", {"alpha": "thork_alpha_plugin"}, alpha())
    Plugins()
    fresh_process()
    monkeypatch.setenv("THORK_DISABLE_PLUGINS", "alpha")
    reg = quiet_registry()
    assert "alpha" not in reg.info and all(t.name != "alpha" for t in reg.targets())
    assert "thork_alpha_plugin" not in sys.modules
    monkeypatch.delenv("THORK_DISABLE_PLUGINS")
    monkeypatch.setenv("THORK_PLUGINS_AUTOLOAD", "0")
    reg = quiet_registry()
    assert list(reg.info) == ["core"] and reg.compilers() == []
    monkeypatch.delenv("THORK_PLUGINS_AUTOLOAD")
    # Neither registry dropped alpha from the index.
    assert quiet_registry().loaded() == []


def test_target_from_the_environment_imports_only_its_plugin(site, monkeypatch):
    install(site, "thork-alpha", "0.1", {"alpha": "thork_alpha_plugin"}, alpha())
    install(site, "thork-beta", "0.1", {"beta": "thork_beta_plugin"}, {"thork_beta_plugin": BETA})
    Plugins()
    fresh_process()
    monkeypatch.setenv("THORK_TARGET", "alpha")
    reg = quiet_registry()
    assert reg.target().name == "alpha"
    assert reg.loaded() == ["alpha"]


def test_a_new_file_next_to_the_script_does_not_rescan_entry_points(site, monkeypatch):
    calls = []
    real = _plugins._scan_entry_points
    monkeypatch.setattr(_plugins, "_scan_entry_points", lambda: calls.append(1) or real())
    install(site, "thork-alpha", "0.1", {"alpha": "thork_alpha_plugin"}, alpha())
    _plugins._entry_points()
    assert len(calls) == 1
    (site / "output.txt").write_text("a program writing next to itself")
    _plugins._entry_points()
    assert len(calls) == 1  # same distributions: the memo holds
    install(site, "thork-beta", "0.1", {"beta": "thork_beta_plugin"}, {"thork_beta_plugin": BETA})
    assert any(ep[0] == "beta" for ep in _plugins._entry_points())
    assert len(calls) == 2


def test_thork_info_is_the_same_with_a_cold_and_a_warm_index(tmp_path):
    env = dict(os.environ, THORK_CACHE_DIR=str(tmp_path / "cache"))
    for var in ("THORK_DISABLE_PLUGINS", "THORK_PLUGINS_AUTOLOAD"):
        env.pop(var, None)
    outs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-m", "thork_core._cli", "info"], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout)
    assert outs[0] == outs[1]
    memo = json.loads((tmp_path / "cache" / "memo.json").read_text())
    ((_, index),) = memo[_plugins._INDEX]  # one fingerprint: [[fingerprint, value]]
    for name in Plugins().info:
        assert any(k.startswith(f"{name}=") for k in index), name
        assert f"  {name} " in outs[1]
