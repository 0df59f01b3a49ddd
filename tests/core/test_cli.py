"""The ``thork`` command: help, version, ``python -m``, ``info --json`` and ``cache``."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import thork_core
from helpers import importable
from thork_core._cli import environment, human_size


def thork(*args: str, env: dict[str, str] | None = None, module: str = "thork",
          ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True,
                          text=True, timeout=300, env={**os.environ, **(env or {})})


@pytest.mark.skipif(not importable("thork"), reason="thork-trace (python -m thork) missing")
def test_bare_command_prints_help_and_every_subcommand_has_its_own():
    r = thork()
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: thork") and "info" in r.stdout and "cache" in r.stdout
    for sub in ("info", "plugins", "cache"):
        h = thork(sub, "--help")
        assert h.returncode == 0 and h.stdout.startswith(f"usage: thork {sub}"), h.stderr
        assert "--json" in h.stdout
    assert "{list,size,dir,clear}" in thork("cache", "--help").stdout


def test_version_names_core_and_plugin_api_with_both_module_entry_points():
    for module in ("thork_core", *(("thork",) if importable("thork") else ())):
        r = thork("--version", module=module)
        assert r.returncode == 0, r.stderr
        assert f"thork-core {thork_core.__version__}" in r.stdout
        assert f"plugin API {thork_core.PLUGIN_API_VERSION}" in r.stdout


def test_info_json_reports_versions_defaults_and_flags_bad_variables(tmp_path):
    env = {"THORK_CACHE_DIR": str(tmp_path / "c"), "THORK_ARCH": "sm_50",
           "THORK_LAUNCHER": "native", "THORK_NATIVE": "maybe", "THORK_TYPO_VAR": "1",
           "THORK_NVCC": str(tmp_path / "no-such-nvcc")}
    r = thork("info", "--json", env=env, module="thork_core")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["python"] == platform.python_version()
    assert d["numpy"] == np.__version__
    assert d["thork_core"] == thork_core.__version__
    assert d["plugin_api"] == thork_core.PLUGIN_API_VERSION
    assert "cuda_driver" in d  # None without a driver, "13.0"-like with one
    reg = thork_core.plugins()
    # thork plugins, then plugins of a front-end of its own (marked "via": fkl op plugins)
    assert {p["name"] for p in d["plugins"] if not p.get("via")} == set(reg.info)
    assert {c["name"] for c in d["compilers"]} == {c.name for c in reg.compilers()}
    for c in d["compilers"]:  # the toolkit version of each usable compiler
        assert (c["version"] is not None) == c["usable"], c
    try:
        target = reg.target()
    except thork_core.ThorkError:
        assert d["default_target"] is None
    else:
        assert d["default_target"] == target.name
        if os.environ.get("THORK_COMPILER") == "nvcc":  # the bad THORK_NVCC above: none
            assert d["default_compiler"] is None
        else:
            assert d["default_compiler"] == reg.compiler(None, target).name
    flagged = {e["name"]: e for e in d["environment"]}
    assert flagged["THORK_ARCH"]["error"] and "sm_75" in flagged["THORK_ARCH"]["error"]
    assert flagged["THORK_NATIVE"]["error"]
    assert flagged["THORK_NVCC"]["error"]
    assert flagged["THORK_TYPO_VAR"]["error"] == "not a variable Thork reads"
    assert flagged["THORK_LAUNCHER"]["error"] is None
    assert flagged["THORK_CACHE_DIR"]["error"] is None
    text = thork("info", env=env, module="thork_core").stdout
    assert "THORK_ARCH=sm_50  INVALID:" in text and "THORK_LAUNCHER=native\n" in text


def test_info_lists_array_adapters_with_their_describe_lines(tmp_path):
    """(session 20) Each adapter, highest priority first, with the line its describe()
    gives; thork_torch's says which reader the hot paths use (no torch here: that)."""
    r = thork("info", "--json", env={"THORK_CACHE_DIR": str(tmp_path / "c")},
              module="thork_core")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)["array_adapters"]
    reg = thork_core.plugins()
    assert [(a["name"], a["priority"]) for a in got] == \
        [(a.name, a.priority) for a in reg.array_adapters()]
    by_name = {a["name"]: a for a in got}
    assert by_name["numpy"]["describe"] is None  # the base class's: nothing to add
    if "torch" in by_name:
        line = by_name["torch"]["describe"]
        assert line.startswith("hot paths read CUDA tensors: "), line
        if not importable("torch"):
            assert line.endswith("torch is not installed")
    text = thork("info", env={"THORK_CACHE_DIR": str(tmp_path / "c")},
                 module="thork_core").stdout
    block = text.split("array adapters:\n")[1].split("gpus:")[0].splitlines()
    assert [ln.split()[0] for ln in block] == [a["name"] for a in got]
    for ln, a in zip(block, got):
        if a["describe"]:
            assert ln.endswith(f"  {a['describe']}"), ln
        else:
            assert ln.split() == [a["name"], "priority", str(a["priority"])], ln


def test_an_adapters_describe_line_never_breaks_info():
    from thork_core._cli import _describe

    class Says:
        def describe(self):
            return "reads in C here"

    class Raises:
        def describe(self):
            raise RuntimeError("no driver")

    class Duck:  # an adapter not derived from ArrayAdapter: no describe at all
        pass

    assert _describe(Says()) == "reads in C here"
    assert _describe(Raises()) == "describe() failed: RuntimeError: no driver"
    assert _describe(Duck()) is None
    assert _describe(thork_core.ArrayAdapter()) is None


def test_environment_checks_names_against_installed_plugins():
    reg = thork_core.plugins()
    names = [t.name for t in reg.targets()]
    got = {e["name"]: e["error"] for e in environment(
        {"THORK_TARGET": names[0], "THORK_COMPILER": "no-such-compiler", "PATH": "/bin"})}
    assert set(got) == {"THORK_TARGET", "THORK_COMPILER"} and got["THORK_TARGET"] is None
    assert got["THORK_COMPILER"].startswith("no compiler of that name; installed: ")
    for c in reg.compilers():
        assert c.name in got["THORK_COMPILER"]


def test_every_variable_the_packages_read_is_documented_by_thork_info():
    """Each ``THORK_*`` name read in a package's source is in ``ENVIRONMENT``, so ``thork
    info`` never calls a variable Thork reads 'not a variable Thork reads'."""
    import re
    from pathlib import Path

    from thork_core._cli import ENVIRONMENT

    root = Path(__file__).resolve().parents[2] / "packages"
    read = set()
    for src in root.glob("*/src/**/*.py"):
        text = src.read_text()
        read |= set(re.findall(r"""environ(?:\.get\(|\[)\s*["'](THORK_[A-Z0-9_]+)""", text))
        # on/off variables go through thork_core._env.env_flag
        read |= set(re.findall(r"""env_flag\(\s*["'](THORK_[A-Z0-9_]+)""", text))
        # a name kept in a constant first (OPT_IN_VARIABLE = "THORK_PLUGIN_DEFAULTS")
        read |= set(re.findall(r"""^\s*[A-Z_]*VAR[A-Z_]*\s*=\s*["'](THORK_[A-Z0-9_]+)["']""",
                               text, re.M))
    assert {"THORK_DEBUG", "THORK_CACHE_DIR", "THORK_PLUGIN_DEFAULTS",
            "THORK_CLANG_FALLBACK"} <= read  # the scan works
    assert read <= set(ENVIRONMENT), sorted(read - set(ENVIRONMENT))
    harness = {e["name"]: e["error"] for e in environment(
        {"THORK_BENCH_TIMEOUT": "90", "THORK_FUZZ_SEED": "1", "THORK_DEBUGG": "1"})}
    assert harness == {"THORK_BENCH_TIMEOUT": None, "THORK_FUZZ_SEED": None,
                       "THORK_DEBUGG": "not a variable Thork reads"}


@pytest.mark.parametrize("value, ok", [("native", True), ("python", True), ("ctypes", True),
                                       (" Native ", True), ("bindings", False),
                                       ("natve", False)])
def test_launcher_variable_accepts_exactly_what_the_launcher_reads(monkeypatch, value, ok):
    from thork_core._launch import launcher_choice

    got = {e["name"]: e["error"] for e in environment({"THORK_LAUNCHER": value})}
    monkeypatch.setenv("THORK_LAUNCHER", value)
    if ok:
        assert got["THORK_LAUNCHER"] is None
        assert launcher_choice() == ("python" if value == "ctypes" else value.strip().lower())
    else:
        assert "expected one of native, python, ctypes" in got["THORK_LAUNCHER"]
        with pytest.raises(thork_core.LaunchError, match=f"THORK_LAUNCHER='{value}'"):
            launcher_choice()


@pytest.mark.parametrize("raw, error", [("1048576", None), ("0", "positive"),
                                        ("-5", "positive"), ("2GB", "whole number"),
                                        ("1e9", "whole number")])
def test_cache_size_variable_is_checked_and_a_bad_value_warns(monkeypatch, raw, error):
    from thork_core._cache import _DEFAULT_MAX, CacheWarning, max_bytes

    got = {e["name"]: e["error"] for e in environment({"THORK_CACHE_MAX_BYTES": raw})}
    monkeypatch.setenv("THORK_CACHE_MAX_BYTES", raw)
    if error is None:
        assert got["THORK_CACHE_MAX_BYTES"] is None and max_bytes() == int(raw)
    else:
        assert error in got["THORK_CACHE_MAX_BYTES"]
        with pytest.warns(CacheWarning, match="THORK_CACHE_MAX_BYTES"):
            assert max_bytes() == _DEFAULT_MAX


@pytest.mark.parametrize("n", [0, 1, 1023, 1024, 1536, 5 * 1024**2 + 1, 3 * 1024**3])
def test_human_size(n):
    text = human_size(n)
    number, unit = text.split()
    scale = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}[unit]
    assert abs(float(number) * scale - n) <= 0.05 * scale
    assert unit == "B" or 1 <= float(number) < 1024 or unit == "GiB"


RUN_ON_CPU = textwrap.dedent("""
    import numpy as np
    import thork as tk

    @tk.jit
    def twice(out: tk.DevicePointer[tk.dt.float32], a: tk.DevicePointer[tk.dt.float32],
              i: tk.Uint[tk.ThreadIdx]):
        out[i] = a[i] * 2.0

    a = np.arange(37, dtype=np.float32)
    out = np.full_like(a, np.nan)
    twice[1, 37](out, a, target="cpu")
    assert np.array_equal(out, a * 2)
""")


def _files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


@pytest.mark.skipif(not importable("thork_cpu") or not importable("thork"),
                    reason="needs the tracer and the CPU target")
def test_cache_accounts_for_and_clears_everything_thork_wrote(tmp_path):
    root = tmp_path / "cache"
    env = {"THORK_CACHE_DIR": str(root)}
    script = tmp_path / "run_on_cpu.py"
    script.write_text(RUN_ON_CPU)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=300, env={**os.environ, **env})
    assert r.returncode == 0, r.stderr
    (root / "my-notes.txt").write_text("not Thork's")
    files = _files(root)
    assert any(f.endswith(".art") for f in files), files
    assert any(f.endswith(".so") and "native" not in f for f in files), files  # CPU .so

    r = thork("cache", "size", "--json", env=env, module="thork_core")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["dir"] == str(root)
    thork_files = {k: v for k, v in files.items() if k != "my-notes.txt"}
    assert report["files"] == len(thork_files)
    assert report["bytes"] == sum(thork_files.values())
    assert report["parts"]["other"] == {"files": 1, "bytes": len("not Thork's"),
                                        "what": report["parts"]["other"]["what"]}
    assert report["parts"]["kernels"]["files"] >= 1
    assert report["parts"]["libraries"]["files"] >= 1

    listing = thork("cache", env=env, module="thork_core").stdout
    assert "twice" in listing and "iB" in listing
    assert thork("cache", "dir", env=env, module="thork_core").stdout.strip() == str(root)

    r = thork("cache", "clear", "--json", env=env, module="thork_core")
    assert r.returncode == 0, r.stderr
    done = json.loads(r.stdout)
    assert done["removed"]["files"] == len(thork_files)
    assert done["removed"]["bytes"] == sum(thork_files.values())
    assert done["failed"] == []
    # Only the user's file is left: no Thork file, no empty folder.
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == ["my-notes.txt"]
    again = json.loads(thork("cache", "list", "--json", env=env, module="thork_core").stdout)
    assert again["files"] == 0 and again["kernels"] == []
