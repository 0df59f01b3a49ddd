"""Layering: no import cycles among the private modules of core, thork and fkl (imports
at module level, the ones that run when a module loads), and none dodged by an import
inside a function without a listed reason; the cache knows nothing of renderers, and one
build path serves both front-ends."""

from __future__ import annotations

import ast
import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORE = ROOT / "packages" / "thork-core" / "src" / "thork_core"


def _runtime_imports(path: pathlib.Path) -> set[str]:
    """Core modules that ``path`` imports when it loads (not under TYPE_CHECKING, not
    inside functions)."""
    out: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out.update(a.name for a in node.names)
    return out


def _graph() -> dict[str, set[str]]:
    mods = {p.stem: p for p in CORE.glob("_*.py") if p.stem != "__init__"}
    return {m: _runtime_imports(p) & set(mods) for m, p in mods.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_cycle_finder_finds_cycles() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_core_private_modules_import_without_cycles() -> None:
    assert not _cycles(_graph()), _cycles(_graph())


def test_no_cycles_even_through_imports_inside_functions() -> None:
    """The cache and the memo: the memo uses the cache folder; the cache tells whoever
    registered (``on_clear``) when it was cleared, without importing the memo."""
    mods = {p.stem: p for p in CORE.glob("_*.py") if p.stem != "__init__"}
    lazy = {m: _all_imports(p) & set(mods) for m, p in mods.items()}
    assert "_memo" not in lazy["_cache"]
    assert ["_cache", "_memo"] not in _cycles(lazy)


def _all_imports(path: pathlib.Path) -> set[str]:
    """Like :func:`_runtime_imports`, with imports inside functions too."""
    out: set[str] = set()
    tree = ast.parse(path.read_text())
    skip = {id(n) for top in tree.body if isinstance(top, ast.If)
            and "TYPE_CHECKING" in ast.unparse(top.test) for n in ast.walk(top)}
    for node in ast.walk(tree):
        if id(node) in skip or not isinstance(node, ast.ImportFrom) or node.level != 1:
            continue
        out.update([node.module.split(".")[0]] if node.module else [a.name for a in node.names])
    return out


def test_the_registry_does_not_import_the_interfaces_it_registers() -> None:
    """Argument binding asks the registry for adapters; the registry must not import the
    target/compiler interfaces back at load time."""
    assert not _runtime_imports(CORE / "_plugins.py") & {"_target", "_compiler", "_adapter"}


def test_the_cache_does_not_import_the_renderer() -> None:
    assert "_renderer" not in _runtime_imports(CORE / "_cache.py")
    assert "_renderer" not in (CORE / "_cache.py").read_text()


def test_rendered_source_carries_the_codegen_version() -> None:
    """What replaces the codegen version in the cache key: each renderer writes it into
    the source, whose hash is the key's main part."""
    from thork_core.ir import CODEGEN_VERSION, CudaRenderer, KernelIR

    empty = KernelIR(name="k", params=[], body=[])
    assert f"codegen {CODEGEN_VERSION}" in CudaRenderer().render(empty)
    if importlib.util.find_spec("thork_cpu") is None:
        pytest.skip("thork-target-cpu not installed")
    from thork_cpu import CppRenderer

    assert f"codegen {CODEGEN_VERSION}" in CppRenderer().render(empty)


def test_front_ends_build_through_build_kernel() -> None:
    """One build path: both front-ends call build_kernel; neither loads artifacts into a
    target or compiles source for running on its own (``artifact()`` methods compile
    without loading, for inspection: compile_artifact, not this)."""
    sources = {"thork": ROOT / "packages" / "thork-trace" / "src" / "thork",
               "fkl": ROOT / "packages" / "fkl-compose" / "src" / "fkl"}
    users = set()
    for name, folder in sources.items():
        for f in folder.rglob("*.py"):
            tree = ast.parse(f.read_text())
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call):
                    continue
                func = ast.unparse(node.func)
                if func.endswith("build_kernel"):
                    users.add(name)
                kwargs = {k.arg for k in node.keywords}
                assert not (func.endswith(".load") and len(node.args) == 2), (
                    f"{f}: loads an artifact itself: {ast.unparse(node)}")
                assert not (func.endswith(".compile") and "entry" in kwargs), (
                    f"{f}: compiles itself: {ast.unparse(node)}")
    assert users == set(sources)


def test_clearing_the_cache_forgets_the_memo(tmp_path, monkeypatch):
    """What the memo held in memory is gone after ``DiskCache.clear`` (it subscribed)."""
    from thork_core import _memo
    from thork_core.build import disk_cache

    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path))
    _memo.reset()
    _memo.remember("h-api test", [1], "value")
    assert _memo.recall("h-api test", [1]) == "value"
    disk_cache().clear()
    assert _memo.recall("h-api test", [1]) is None
    assert not (tmp_path / _memo.FILE).exists()


#: Packages whose private modules are held to the layering rules below.
PACKAGES = {
    "thork_core": CORE,
    "thork": ROOT / "packages" / "thork-trace" / "src" / "thork",
    "fkl": ROOT / "packages" / "fkl-compose" / "src" / "fkl",
}

#: Imports inside functions that would close a load-time cycle, each for a reason of its
#: own (the rest has none: a shared helper moves down a layer, or the module above hands
#: what it owns to the one below, as ``fkl._pipe.copy_pipe`` to ``fkl._arrays.stack``).
#: ``_cuda`` -> ``_gpu``: the first context warms the GPU target up (the launch path's
#: imports, done early); ``_device_array`` -> ``_pitched_array``: ``DeviceArray(...,
#: pitch=)`` makes its subclass.
KNOWN_DEFERRED = {
    "thork_core": {("_cuda", "_gpu"), ("_device_array", "_pitched_array")},
    "thork": set(),
    "fkl": set(),
}


def _private_modules(folder: pathlib.Path) -> dict[str, pathlib.Path]:
    return {p.stem: p for p in folder.glob("_*.py") if p.stem not in ("__init__", "__main__")}


def _deferred_cycle_imports(folder: pathlib.Path = CORE) -> set[tuple[str, str]]:
    """(a, b) where a function of private module ``a`` of the package in ``folder``
    imports ``b`` and ``b`` imports ``a`` at load time (directly or through other
    modules): an import moved into a function to dodge a cycle."""
    mods = _private_modules(folder)
    top = {m: _runtime_imports(p) & set(mods) for m, p in mods.items()}
    found = set()
    for a, path in mods.items():
        for b in (_all_imports(path) & set(mods)) - top[a] - {a}:
            seen, todo = {b}, [b]
            while todo:
                for w in top[todo.pop()] - seen:
                    seen.add(w)
                    todo.append(w)
            if a in seen:
                found.add((a, b))
    return found


def test_the_dodge_finder_finds_dodged_cycles(tmp_path: pathlib.Path) -> None:
    (tmp_path / "_low.py").write_text("def f():\n    from ._high import g\n")
    (tmp_path / "_high.py").write_text("from ._low import f\n")
    (tmp_path / "_other.py").write_text("def h():\n    from ._low import f\n")
    assert _deferred_cycle_imports(tmp_path) == {("_low", "_high")}


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_function_level_imports_dodge_cycles(package: str) -> None:
    assert _deferred_cycle_imports(PACKAGES[package]) == KNOWN_DEFERRED[package]


@pytest.mark.parametrize("package", ["thork", "fkl"])
def test_private_modules_import_without_cycles(package: str) -> None:
    mods = _private_modules(PACKAGES[package])
    graph = {m: _runtime_imports(p) & set(mods) for m, p in mods.items()}
    assert not _cycles(graph), _cycles(graph)
