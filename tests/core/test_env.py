"""On/off THORK_* variables read one way (thork_core._env.env_flag): every variable takes
the same spellings, case and spaces ignored; unset or empty is the default; anything else
warns once, naming the variable and the value, and keeps the default (never guessed)."""

import warnings

import pytest
from thork_core import _env
from thork_core.plugin import EnvironmentWarning, env_flag

ON = ["1", "true", "TRUE", " yes ", "On"]
OFF = ["0", "false", "No", " off", "OFF "]


@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch):
    monkeypatch.setattr(_env, "_warned", set())


@pytest.mark.parametrize("default", [True, False])
def test_spellings_of_on_and_off(monkeypatch, default):
    for raw in ON:
        monkeypatch.setenv("THORK_SOME_FLAG", raw)
        assert env_flag("THORK_SOME_FLAG", default) is True, raw
    for raw in OFF:
        monkeypatch.setenv("THORK_SOME_FLAG", raw)
        assert env_flag("THORK_SOME_FLAG", default) is False, raw
    for raw in ("", "   "):
        monkeypatch.setenv("THORK_SOME_FLAG", raw)
        assert env_flag("THORK_SOME_FLAG", default) is default
    monkeypatch.delenv("THORK_SOME_FLAG")
    assert env_flag("THORK_SOME_FLAG", default) is default


@pytest.mark.parametrize("raw", ["maybe", "2", "enable", "t", "ctypes"])
def test_other_values_warn_once_and_keep_the_default(monkeypatch, raw):
    monkeypatch.setenv("THORK_SOME_FLAG", raw)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        assert env_flag("THORK_SOME_FLAG", True) is True
        assert env_flag("THORK_SOME_FLAG", False) is False
    assert len(got) == 1, [str(w.message) for w in got]
    assert got[0].category is EnvironmentWarning
    assert f"THORK_SOME_FLAG={raw!r}" in str(got[0].message)
    assert "1, 0, true, false, yes, no, on, off" in str(got[0].message)


def test_the_library_reads_its_variables_this_way(monkeypatch):
    import thork_core

    monkeypatch.setenv("THORK_DEBUG", " Yes")
    assert thork_core.debug_default() is True
    monkeypatch.setenv("THORK_DEBUG", "maybe")  # before: silently off, no word
    with pytest.warns(EnvironmentWarning, match="THORK_DEBUG='maybe'"):
        assert thork_core.debug_default() is False
    for raw, want in (("ON", True), ("no", False)):
        monkeypatch.setenv("THORK_DEBUG", raw)
        assert thork_core.debug_default() is want, raw


def test_thork_info_accepts_exactly_these_spellings():
    from thork_core._cli import environment

    for raw in (*ON, *OFF):
        assert environment({"THORK_DEBUG": raw})[0]["error"] is None, raw
    assert environment({"THORK_DEBUG": "maybe"})[0]["error"]


def test_one_warning_when_many_threads_read_a_bad_value(monkeypatch):
    import threading

    from helpers import run_threads

    said: list[str] = []
    monkeypatch.setattr(_env.warnings, "warn", lambda msg, *a, **k: said.append(msg))
    monkeypatch.setenv("THORK_SOME_FLAG", "perhaps")
    start = threading.Barrier(16)

    def work(i: int) -> None:
        start.wait()
        for _ in range(200):
            assert env_flag("THORK_SOME_FLAG", i % 2 == 0) is (i % 2 == 0)

    run_threads(work, 16, join_seconds=60)
    assert len(said) == 1 and "THORK_SOME_FLAG='perhaps'" in said[0]
