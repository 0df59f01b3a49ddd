"""Plugin API versioning and plugin failures: a plugin outside its declared API range, or
one that cannot load, is skipped with one warning that names it, says why, and points at
the plugin's file; everything else keeps working."""

from __future__ import annotations

import importlib
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import thork_core
from thork_core import Plugins, PluginWarning, _plugin_api, _plugins
from thork_core._plugin_api import in_range, incompatibility, parse_range

MODULE = "thork_versioned_plugin"
PLUGIN = """
    from thork_core import Frontend, hookimpl

    THORK_PLUGIN_API = {api!r}

    @hookimpl
    def thork_register_frontends():
        return [Frontend("versioned", "thork_versioned_plugin", "a test front-end")]
"""


@pytest.fixture
def site(tmp_path, monkeypatch):
    s = tmp_path / "site"
    s.mkdir()
    monkeypatch.syspath_prepend(str(s))
    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path / "cache"))
    for var in ("THORK_DISABLE_PLUGINS", "THORK_PLUGINS_AUTOLOAD", "THORK_TARGET"):
        monkeypatch.delenv(var, raising=False)
    _plugins._WARNED.clear()
    sys.modules.pop(MODULE, None)
    importlib.invalidate_caches()
    yield s
    sys.modules.pop(MODULE, None)


def install(site: Path, code: str, version: str = "0.3") -> Path:
    info = site / f"thork_versioned-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: thork-versioned\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[thork]\nversioned = {MODULE}\n")
    path = site / f"{MODULE}.py"
    path.write_text(textwrap.dedent(code))
    importlib.invalidate_caches()
    return path


def registry(times: int = 1) -> tuple[Plugins, list[warnings.WarningMessage]]:
    """The last of ``times`` registries, and the plugin warnings shown while building them
    (under Python's default filter, which shows a warning once per location)."""
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("default")
        for _ in range(times):
            sys.modules.pop(MODULE, None)  # as a new registry in a fresh process would
            reg = Plugins()
    return reg, [w for w in got if issubclass(w.category, PluginWarning)]


def still_works(reg: Plugins) -> None:
    """Core and the first-party plugins are all there."""
    assert "core" in reg.info
    assert any(t.name == "gpu" for t in reg.targets())
    assert set(thork_core.plugins().info) - {"versioned"} <= set(reg.info)


def test_out_of_range_plugin_is_skipped_with_one_line_naming_plugin_range_and_core(site):
    path = install(site, PLUGIN.format(api=">=2.0,<3"))
    reg, got = registry(times=2)  # warned once per process, though both skip it
    assert "versioned" not in reg.info
    assert "versioned" not in [f.name for f in reg.frontends()]
    assert len(got) == 1
    text = str(got[0].message)
    assert "\n" not in text
    assert "'versioned'" in text and "thork-versioned 0.3" in text
    assert ">=2.0,<3" in text and f"provides {thork_core.PLUGIN_API_VERSION}" in text
    assert got[0].filename == str(path)  # the plugin's file, not Thork's
    still_works(reg)


def test_in_range_plugin_loads_and_its_range_is_indexed(site):
    install(site, PLUGIN.format(api=f">={thork_core.PLUGIN_API_VERSION},<2"))
    reg, got = registry()
    assert got == [] and reg.info["versioned"].registered == {"frontends": ["versioned"]}


def test_indexed_plugin_is_rechecked_when_core_api_moves(site, monkeypatch):
    install(site, PLUGIN.format(api=">=1.0,<2"))
    reg, got = registry()
    assert "versioned" in reg.info and got == []
    sys.modules.pop(MODULE, None)
    # A newer core (plugin API 2.0) with the same plugin index on disk.
    monkeypatch.setattr(_plugin_api, "PLUGIN_API_VERSION", "2.0")
    reg, got = registry()
    assert "versioned" not in reg.info
    mine = [str(w.message) for w in got if "'versioned'" in str(w.message)]
    assert len(mine) == 1 and ">=1.0,<2" in mine[0] and "provides 2.0" in mine[0]
    # (the first-party plugins, declaring <2 too, are skipped alike; core stays)
    assert "core" in reg.info


def test_invalid_declaration_is_reported_as_such(site):
    install(site, PLUGIN.format(api="version one"))
    reg, got = registry()
    assert "versioned" not in reg.info
    assert len(got) == 1 and "THORK_PLUGIN_API is invalid" in str(got[0].message)
    still_works(reg)


@pytest.mark.parametrize("body, error, line", [
    ("import thork_no_such_dependency_xyz\n", "ModuleNotFoundError", 1),
    ("x = 1\nraise RuntimeError('plugin setup exploded')\n", "plugin setup exploded", 2),
    ("def broken(:\n", "SyntaxError", 1),
])
def test_broken_plugin_warns_once_naming_it_and_its_error_at_its_own_line(
        site, body, error, line):
    path = install(site, body)
    reg, got = registry(times=2)  # warned once per process, though both skip it
    assert "versioned" not in reg.info
    assert len(got) == 1
    text = str(got[0].message)
    assert "'versioned'" in text and error in text and "\n" not in text
    assert (got[0].filename, got[0].lineno) == (str(path), line)
    still_works(reg)


def test_first_party_plugins_declare_a_range_that_includes_core():
    from importlib import metadata

    for ep in metadata.entry_points(group="thork"):
        if ep.dist is None or not ep.dist.metadata["Name"].startswith(("thork", "fkl")):
            continue
        declared = getattr(ep.load(), _plugin_api.ATTRIBUTE, None)
        assert declared is not None, f"{ep.name} declares no {_plugin_api.ATTRIBUTE}"
        assert incompatibility(declared) is None, (ep.name, declared)


@pytest.mark.parametrize("version, spec, ok", [
    ("1.0", ">=1.0,<2", True), ("1.7", ">=1.0,<2", True), ("2.0", ">=1.0,<2", False),
    ("0.9", ">=1.0,<2", False), ("1.0", ">1.0", False), ("1.1", ">1.0", True),
    ("1.0", "==1", True), ("1.0", "!=1.0", False), ("1.2", "<=1.2", True),
    ("1.2.1", "<=1.2", False),
])
def test_in_range(version, spec, ok):
    assert in_range(version, spec) is ok


@pytest.mark.parametrize("spec", ["", "1.0", ">=", "~=1.0", ">=1.0;<2", ">=a"])
def test_parse_range_rejects_what_it_cannot_read(spec):
    with pytest.raises(ValueError):
        parse_range(spec)
