"""noxfile_mutation.py's per-line test selection: which lines show that a mutated node ran,
and which tests a mutant then runs (docs/testing.md, "Mutation testing")."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FAKE = "packages/fake/src/fake/_mod.py"
SOURCE = '''\
TABLE = (1,
         2,
         3)


@decorate(4)
def f(x, y=5):
    if x > 6 and y:
        return (x +
                7)
    try:
        pass
    except (ValueError if x == 8 else TypeError):
        pass
    return -x


def g(a, b, c):
    return c + a * b  # a * comment
'''


@pytest.fixture
def runner(monkeypatch):
    spec = importlib.util.spec_from_file_location("noxfile_mutation_t", ROOT / "noxfile_mutation.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "noxfile_mutation_t", mod)  # dataclasses look it up
    spec.loader.exec_module(mod)
    mod._SOURCES[FAKE] = SOURCE
    monkeypatch.setitem(mod.TARGETS, FAKE, ["tests/a.py", "tests/b.py"])
    return mod


def mutant(runner, line, what):
    found = [m for m in runner.mutants_of(FAKE) if m.line == line and m.what == what]
    assert len(found) == 1, [m.id for m in runner.mutants_of(FAKE)]
    return found[0]


def test_lines_of_a_mutant_are_its_statement_or_its_compound_header(runner):
    # A constant on the second line of a folded tuple: the whole statement (Python loads
    # the folded tuple on its first line only).
    assert runner.mutant_lines(mutant(runner, 2, "const2->3")) == [1, 2, 3]
    # Decorator argument and default: the def header, decorators included.
    assert runner.mutant_lines(mutant(runner, 6, "const4->5")) == [6, 7]
    assert runner.mutant_lines(mutant(runner, 7, "const5->6")) == [6, 7]
    # The if test: its header line only, not the body.
    assert runner.mutant_lines(mutant(runner, 8, "Gt->GtE@0")) == [8]
    # A multi-line return: both lines.
    assert runner.mutant_lines(mutant(runner, 10, "const7->8")) == [9, 10]
    # An except clause's type: the clause's header.
    assert runner.mutant_lines(mutant(runner, 13, "Eq->NotEq@0")) == [13]
    assert runner.mutant_lines(mutant(runner, 15, "drop-USub")) == [15]


def test_a_mutant_runs_the_tests_of_its_lines_fastest_first(runner):
    cov = runner.CoverageMap({
        "tests": ["tests/a.py::t_slow", "tests/b.py::t_fast", "tests/other.py::t", "tests/a.py::u"],
        "seconds": [2.0, 0.1, 0.0, 1.0],
        # -1: executed outside any test (at import)
        "lines": {FAKE: {"1": [-1], "8": [0, 1, 2], "9": [3], "10": [2], "15": [2]}}})
    # The module's selection only, fastest first.
    assert cov.tests_for(mutant(runner, 8, "Gt->GtE@0")) == ["tests/b.py::t_fast",
                                                              "tests/a.py::t_slow"]
    # Any line of the statement counts.
    assert cov.tests_for(mutant(runner, 10, "const7->8")) == ["tests/a.py::u"]
    # Run at import only: the whole selection (None).
    assert cov.tests_for(mutant(runner, 2, "const2->3")) is None
    # Executed by a test outside the selection only: the whole selection too.
    assert cov.tests_for(mutant(runner, 15, "drop-USub")) is None
    # Never executed: no test can kill it ([]: a survivor without a run).
    assert cov.tests_for(mutant(runner, 13, "Eq->NotEq@0")) == []


def test_a_mutant_no_test_executes_is_a_survivor_without_a_run(runner, tmp_path):
    cov = runner.CoverageMap({"tests": [], "seconds": [], "lines": {FAKE: {}}})
    rec = runner.run_one(mutant(runner, 13, "Eq->NotEq@0"), tmp_path, 1.0, cov)
    assert rec["status"] == "survived" and rec["tests"] == 0
    assert rec["tail"] == ["no test of the selection executes line 13"]
    assert not (tmp_path / "fake").exists()  # nothing was written or run


def test_every_listed_equivalent_mutant_exists_and_has_a_reason(runner):
    # mutation_equivalent.txt names mutants of the current sources (a moved line must be
    # moved there too, or the entry silently stops excluding anything).
    ids = {m.id for path in runner.TARGETS if path != FAKE for m in runner.mutants_of(path)}
    listed = runner.equivalent_ids()
    assert listed
    assert sorted(set(listed) - ids) == []
    assert all(len(reason) > 20 for reason in listed.values())


def test_ids_ending_in_an_operator_count_keep_it(runner, monkeypatch, tmp_path):
    # "Add->Sub#2" (the second operator at one column) is an id, not an id and a comment:
    # only " #" starts the reason.
    eq = tmp_path / "eq.txt"
    eq.write_text("# header\np.py:5:3:Add->Sub#2  # the reason\np.py:6:1:const1->0  # r\n")
    monkeypatch.setattr(runner, "EQUIVALENT", eq)
    assert runner.equivalent_ids() == {"p.py:5:3:Add->Sub#2": "the reason",
                                       "p.py:6:1:const1->0": "r"}


@pytest.mark.parametrize(("line", "what", "changed"), [
    (10, "const7->8", "                8)"),
    (8, "Gt->GtE@0", "    if x >= 6 and y:"),
    (8, "And->Or", "    if x > 6 or y:"),
    (15, "drop-USub", "    return  x"),
    (13, "Eq->NotEq@0", "    except (ValueError if x != 8 else TypeError):"),
    # "*" -> "+" binds differently: the node is parenthesized (same line, same tree)
    (19, "Mult->Add", "    return c + (a + b)  # a * comment"),
])
def test_a_mutated_module_keeps_every_other_line(runner, line, what, changed):
    # Kernels carry #line directives, part of their cache key: only the mutated line
    # may differ from the original module, and the result parses to the mutated tree.
    out = runner.mutated_source(mutant(runner, line, what)).splitlines()
    orig = SOURCE.splitlines()
    assert len(out) == len(orig)
    assert [k + 1 for k, (a, b) in enumerate(zip(orig, out)) if a != b] == [line]
    assert out[line - 1] == changed
