"""The memo of slow facts (``memo.json``) behind a fast disk-cache hit: a compiler's cache-key
parts are memoized only when the compiler says what they depend on, and a changed
fingerprint (an upgraded toolchain, edited compiler code) never serves a stale artifact."""

import importlib
import os
import sys
import textwrap
from typing import Any

import pytest
from thork_core import Artifact, DiskCache, KernelIR, _memo, compile_artifact
from thork_core._build import key_parts

COMPILER = """
    from thork_core import Artifact, Compiler

    CALLS = []

    class FakeCompiler(Compiler):
        name = "fakecc"
        produces = ("fakelib",)
        language = "fake"
        ver = "1"
        stamp = "a"         # what key_fingerprint reports (the toolchain's file stamp)
        memoize = True

        def version(self):
            CALLS.append("version")
            return self.ver

        def available(self):
            return True, ""

        def flags(self, kind, arch):
            CALLS.append("flags")
            return ["-O{level}", f"--arch={{arch}}"]

        def key_fingerprint(self):
            return [self.stamp] if self.memoize else None

        def compile(self, source, *, entry, kind, arch, options=()):
            CALLS.append("compile")
            return Artifact(kind=kind, data=source.encode(), entry=entry,
                            compiler=self.identity(), arch=arch)
"""


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A compiler class in a module of its own (its file is part of the fingerprint), and a
    private cache folder."""
    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "thork_fake_cc.py").write_text(textwrap.dedent(COMPILER.format(level=2)))
    importlib.invalidate_caches()
    sys.modules.pop("thork_fake_cc", None)
    mod = importlib.import_module("thork_fake_cc")
    yield mod
    sys.modules.pop("thork_fake_cc", None)


def new_process():
    """What a new process sees: the memo re-read from disk."""
    _memo.reset()


def test_key_parts_are_memoized_under_the_compilers_fingerprint(fake):
    cc = fake.FakeCompiler()
    assert key_parts(cc, "fakelib", "x1") == ("fakecc-1", ["-O2", "--arch=x1"])
    assert fake.CALLS == ["version", "flags"]
    new_process()
    fake.CALLS.clear()
    assert key_parts(fake.FakeCompiler(), "fakelib", "x1") == ("fakecc-1", ["-O2", "--arch=x1"])
    assert fake.CALLS == []  # neither the version nor the flags were asked for
    # Another arch or kind is another entry.
    assert key_parts(cc, "fakelib", "x2")[1] == ["-O2", "--arch=x2"]
    assert fake.CALLS == ["version", "flags"]


def test_changed_fingerprint_recomputes(fake):
    cc = fake.FakeCompiler()
    key_parts(cc, "fakelib", "x1")
    new_process()
    upgraded = fake.FakeCompiler()
    upgraded.ver, upgraded.stamp = "2", "b"  # the toolchain was replaced
    assert key_parts(upgraded, "fakelib", "x1")[0] == "fakecc-2"


def test_without_a_fingerprint_nothing_is_memoized(fake):
    cc = fake.FakeCompiler()
    cc.memoize = False
    for _ in range(2):
        new_process()
        fake.CALLS.clear()
        assert key_parts(cc, "fakelib", "x1") == ("fakecc-1", ["-O2", "--arch=x1"])
        assert fake.CALLS == ["version", "flags"]
    assert not os.path.exists(os.path.join(os.environ["THORK_CACHE_DIR"], "memo.json"))


def test_edited_compiler_code_recomputes(fake, tmp_path):
    key_parts(fake.FakeCompiler(), "fakelib", "x1")
    path = tmp_path / "thork_fake_cc.py"
    old = path.stat().st_mtime_ns
    path.write_text(textwrap.dedent(COMPILER.format(level=3)))  # new flags, same stamp
    os.utime(path, ns=(old + 10**9, old + 10**9))
    importlib.invalidate_caches()
    sys.modules.pop("thork_fake_cc", None)
    mod = importlib.import_module("thork_fake_cc")
    new_process()
    assert key_parts(mod.FakeCompiler(), "fakelib", "x1")[1] == ["-O3", "--arch=x1"]


def test_upgraded_compiler_never_gets_a_stale_artifact(fake):
    kernel = KernelIR("k", [], [], None)
    cc = fake.FakeCompiler()
    art, key, hit = compile_artifact(kernel, "src", cc, "fakelib", "x1")
    assert not hit and art.compiler == "fakecc-1"
    new_process()
    again = compile_artifact(kernel, "src", fake.FakeCompiler(), "fakelib", "x1")
    assert again[2] and again[1] == key  # a hit, without asking the compiler
    new_process()
    upgraded = fake.FakeCompiler()
    upgraded.ver, upgraded.stamp = "2", "b"
    art2, key2, hit2 = compile_artifact(kernel, "src", upgraded, "fakelib", "x1")
    assert not hit2 and key2 != key and art2.compiler == "fakecc-2"


def test_cache_clear_forgets_the_memo(tmp_path, monkeypatch):
    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path))
    _memo.remember("something", [1], "fact")
    DiskCache().put("ab" * 32, Artifact(kind="cubin", data=b"x", entry="k", compiler="c-1",
                                        arch="sm_90"))
    assert (tmp_path / "memo.json").exists()
    assert DiskCache().clear() == 1
    assert not (tmp_path / "memo.json").exists()
    assert _memo.recall("something", [1]) is None


def test_memo_follows_the_cache_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path / "a"))
    assert _memo.memo("fact", [1], lambda: "in a") == "in a"
    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path / "b"))
    assert _memo.memo("fact", [1], lambda: "in b") == "in b"  # not a's, without a reset
    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path / "a"))
    assert _memo.memo("fact", [1], lambda: "recomputed") == "in a"


def test_memo_keeps_recent_fingerprints(tmp_path, monkeypatch):
    """Two fingerprints in turn (two scripts' folders on sys.path) both hit; past KEEP
    fingerprints the oldest is relearned; a fingerprint stored again replaces its value."""
    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path))
    calls: list[int] = []

    def learn(i: int) -> Any:
        return lambda: calls.append(i) or f"v{i}"

    for _ in range(3):
        assert _memo.memo("fact", ["a"], learn(1)) == "v1"
        assert _memo.memo("fact", ["b"], learn(2)) == "v2"
    assert calls == [1, 2]
    _memo.reset()  # a fresh process reads the same from the file
    assert _memo.recall("fact", ["a"]) == "v1" and _memo.recall("fact", ["b"]) == "v2"
    for i in range(3, 3 + _memo.KEEP):
        _memo.memo("fact", [i], learn(i))
    assert _memo.recall("fact", ["a"]) is None and _memo.recall("fact", ["b"]) is None
    assert _memo.recall("fact", [3]) == "v3"
    _memo.remember("fact", [3], "new")
    assert _memo.recall("fact", [3]) == "new"
    assert _memo.recall("fact", [4]) == "v4"


def test_installed_listing_ignores_folders_without_distributions(tmp_path, monkeypatch):
    """A script's own folder on sys.path changes nothing (scripts in different folders
    share the plugin scan); a distribution appearing there does."""
    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path / "cache"))
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "script.py").write_text("")
    monkeypatch.setattr(sys, "path", [str(a), *sys.path])
    first = _memo.installed_fingerprint()
    monkeypatch.setattr(sys, "path", [str(b), *sys.path[1:]])
    assert _memo.installed_fingerprint() == first
    (b / "extra-1.0.dist-info").mkdir()
    assert _memo.installed_fingerprint() != first
