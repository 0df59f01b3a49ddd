"""The selection rules' order in one place (``thork_core._selection``): which name applies,
else the candidates in the order they are tried, availability aside. ``pick_target`` and
``pick_compiler`` walk that order asking availability; the build's selection record
(``_build._first_choice``) writes a record only where the choice was its first candidate.
Registry entries here are stand-ins with the fields the rules read."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from thork_core import NoTargetError, PluginError
from thork_core import _selection as sel


class _Plugin:
    def __init__(self, dist: str, name: str) -> None:
        self.dist, self.name = dist, name


class _Obj:
    """A target or compiler object: available or not (with a reason)."""

    def __init__(self, name: str, ok: bool = True, language: str = "cpp",
                 consumes: tuple[str, ...] = ("hostlib",), preferred: str | None = None
                 ) -> None:
        self.name, self.ok, self.language, self.consumes = name, ok, language, consumes
        self.preferred_compiler = preferred
        self.asked = 0

    def available(self) -> tuple[bool, str]:
        self.asked += 1
        return self.ok, "" if self.ok else f"{self.name} is off"


class _Entry:
    """A registry entry: its facts, its plugin, its object."""

    def __init__(self, name: str, priority: int, trusted: bool = True, ok: bool = True,
                 language: str = "cpp", kinds: tuple[str, ...] = ("hostlib",)) -> None:
        self.name, self.priority, self.language, self.kinds = name, priority, language, kinds
        self.plugin = _Plugin("thork-core" if trusted else "someone-else", f"ep-{name}")
        self.obj = _Obj(name, ok, language)


@pytest.fixture(autouse=True)
def _no_process_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("THORK_TARGET", "THORK_COMPILER", sel.OPT_IN_VARIABLE):
        monkeypatch.delenv(var, raising=False)


def _names(entries: list[Any]) -> list[str]:
    return [e.name for e in entries]


def test_target_order_caller_then_environment_then_rank(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    items = [_Entry("low", 1), _Entry("greedy", 1000, trusted=False), _Entry("high", 50)]
    assert sel.target_candidates(items, None) == (None, [items[2], items[0], items[1]])
    assert sel.target_candidates(items, "low") == ("low", [])
    monkeypatch.setenv("THORK_TARGET", "greedy")
    assert sel.target_candidates(items, None) == ("greedy", [])
    assert sel.target_candidates(items, "low") == ("low", [])  # the caller's name first
    monkeypatch.delenv("THORK_TARGET")
    monkeypatch.setenv(sel.OPT_IN_VARIABLE, "ep-greedy")  # opted in: its priority counts
    assert _names(sel.target_candidates(items, None)[1]) == ["greedy", "high", "low"]


def test_compiler_order_preferred_then_rank_among_fitting(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    cxx = _Entry("cxx", 10)
    pref = _Entry("pref", -5)
    other = _Entry("other", 20)
    third = _Entry("third", 1000, trusted=False)
    cuda = _Entry("cuda", 99, language="cuda", kinds=("cubin",))
    wrong_kind = _Entry("ptxonly", 99, kinds=("ptx",))
    items = [cuda, cxx, pref, other, third, wrong_kind]
    tgt = _Obj("t", preferred="pref")
    name, fitting, order = sel.compiler_candidates(items, None, tgt)
    assert name is None
    assert _names(fitting) == ["cxx", "pref", "other", "third"]
    assert _names(order) == ["pref", "other", "cxx", "third"]  # each once
    plain = _Obj("t")  # no preference: rank only
    assert _names(sel.compiler_candidates(items, None, plain)[2]) == \
        ["other", "cxx", "pref", "third"]
    lost = _Obj("t", preferred="not-installed")
    assert _names(sel.compiler_candidates(items, None, lost)[2]) == \
        ["other", "cxx", "pref", "third"]
    # Rule 1: the caller's name, fitting or not (pick_compiler says why it cannot serve).
    assert sel.compiler_candidates(items, "cuda", tgt)[::2] == ("cuda", [])
    # Rule 2: THORK_COMPILER where it fits, or where nothing has that name (an error)...
    monkeypatch.setenv("THORK_COMPILER", "cxx")
    assert sel.compiler_candidates(items, None, tgt)[::2] == ("cxx", [])
    monkeypatch.setenv("THORK_COMPILER", "nope")
    assert sel.compiler_candidates(items, None, tgt)[::2] == ("nope", [])
    # ...but not where it names an installed compiler for another target (a process-wide
    # nvcc must not break CPU kernels): the order of rules 3 and 4 applies.
    monkeypatch.setenv("THORK_COMPILER", "cuda")
    assert sel.compiler_candidates(items, None, tgt)[0] is None
    assert _names(sel.compiler_candidates(items, None, tgt)[2]) == \
        ["pref", "other", "cxx", "third"]
    assert sel.compiler_candidates(items, "other", tgt)[::2] == ("other", [])


def test_pick_walks_the_order_asking_availability() -> None:
    """With every combination of available entries, pick_target and pick_compiler return
    the first available candidate of the order, having asked no entry after it."""
    for oks in itertools.product([True, False], repeat=3):
        targets = [_Entry(n, p, ok=ok) for n, p, ok in zip("abc", (1, 3, 2), oks)]
        order = sel.target_candidates(targets, None)[1]
        want = next((e for e in order if e.obj.ok), None)
        if want is None:
            with pytest.raises(NoTargetError, match="no target can run kernels here"):
                sel.pick_target(targets, None, lambda e: e.obj)
        else:
            assert sel.pick_target(targets, None, lambda e: e.obj) is want.obj
        after = order[order.index(want) + 1:] if want is not None else []
        assert all(e.obj.asked == 0 for e in after)

        compilers = [_Entry(n, p, ok=ok) for n, p, ok in zip("xyz", (5, 1, 9), oks)]
        tgt = _Obj("t", preferred="y")
        order = sel.compiler_candidates(compilers, None, tgt)[2]
        assert _names(order) == ["y", "z", "x"]
        want = next((e for e in order if e.obj.ok), None)
        if want is None:
            with pytest.raises(PluginError, match=r"y: y is off; z: z is off; x: x is off"):
                sel.pick_compiler(compilers, None, tgt, lambda e: e.obj)
        else:
            assert sel.pick_compiler(compilers, None, tgt, lambda e: e.obj) is want.obj
        assert all(e.obj.asked <= 1 for e in compilers)  # each asked once at most


def test_the_record_takes_only_first_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_first_choice`` (the build's selection record) agrees with the order: the CPU
    target (named, or ranked first) and its first compiler qualify; a compiler the rules would have tried later
    (a fallback) does not, nor does the non-fitting ``THORK_COMPILER`` make it."""
    import thork_core
    from thork_core import _build, plugins

    reg = plugins()
    if "cpu" not in [t.name for t in reg.targets()]:
        pytest.skip("thork-target-cpu not installed")
    cpu = reg.target("cpu")
    if not cpu.available()[0]:
        pytest.skip("the CPU target is not available here")
    first = reg.compiler(None, cpu)
    with reg._lock:
        items = reg._items("compilers")
    _, _, order = sel.compiler_candidates(items, None, cpu)
    assert order[0].obj is first
    assert _build._first_choice("cpu", None, cpu, first) is not None
    with reg._lock:
        targets = reg._items("targets")
    ranked_first = sel.target_candidates(targets, None)[1][0].obj is cpu  # not with a GPU
    # Unnamed, the CPU target qualifies only where it is ranked first (here the GPU
    # target ranks first; without a GPU choosing the CPU is a fallback).
    assert (_build._first_choice(None, None, cpu, first) is not None) == ranked_first
    later = object()  # any compiler object that is not the first candidate
    assert _build._first_choice("cpu", None, cpu, later) is None
    assert _build._first_choice("cpu", "host-cxx", cpu, later) is not None  # named
    cuda = [c for c in items if c.language == "cuda"]
    if cuda:
        monkeypatch.setenv("THORK_COMPILER", cuda[0].name)
        assert _build._first_choice("cpu", None, cpu, later) is None
        assert _build._first_choice("cpu", None, cpu, first) is not None
    thork_core.reset_plugins()
