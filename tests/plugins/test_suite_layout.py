"""The test suite's own layering: test modules never import each other (nor ``conftest``).
What several test files share lives in the ``helpers`` package (plain code) or in the
folder's ``conftest.py`` (fixtures, which pytest finds without an import); a test that
imports another test module collects its tests twice over, hides fixtures behind
``noqa`` imports and breaks when that file is renamed or moved."""

from __future__ import annotations

import ast
import pathlib

TESTS = pathlib.Path(__file__).resolve().parents[1]
ROOT = TESTS.parent


def _is_test_module(path: pathlib.Path) -> bool:
    """pytest's default ``python_files`` (``test_*.py``, ``*_test.py``), and conftest."""
    return path.stem.startswith("test_") or path.stem.endswith("_test") or \
        path.stem == "conftest"


def _imported_names(tree: ast.AST) -> list[tuple[int, str, int]]:
    """(line, dotted module name, relative level) of every import, at any depth."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, 0) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.module:
                out.append((node.lineno, node.module, node.level))
            else:  # from . import a, b
                out += [(node.lineno, a.name, node.level) for a in node.names]
    return out


def _test_module_imports(text: str, where: str, in_helpers: bool,
                         test_modules: set[str]) -> list[str]:
    """``where:line: module`` for each import in ``text`` of a test module (by its name as
    pytest's rootdir-relative import puts it on ``sys.path``, or as ``tests.<...>``), of
    conftest, or relative (test folders are no packages; only ``helpers`` is, and its
    modules may import each other relatively)."""
    hits = []
    for line, name, level in _imported_names(ast.parse(text)):
        if level and not in_helpers:
            hits.append(f"{where}:{line}: relative import {'.' * level}{name}")
        elif not level and name.split(".")[0] in test_modules | {"tests"}:
            hits.append(f"{where}:{line}: {name}")
    return hits


def _check(path: pathlib.Path, test_modules: set[str]) -> list[str]:
    return _test_module_imports(path.read_text(), str(path.relative_to(ROOT)),
                                TESTS / "helpers" in path.parents, test_modules)


def test_the_checker_finds_imports_of_test_modules() -> None:
    src = (
        "import os\n"
        "from helpers import poisoned\n"
        "from helpers.yuv import pack\n"
        "from test_other import x\n"
        "def f():\n"
        "    import conftest\n"
        "    from tests.core.test_y import z\n"
        "    from . import sibling\n"
        "    from test_other_thing import q\n"
        "'from test_other import in_a_string'\n"
    )
    mods = {"test_other", "conftest"}
    hits = _test_module_imports(src, "t.py", False, mods)
    assert hits == ["t.py:4: test_other", "t.py:6: conftest", "t.py:7: tests.core.test_y",
                    "t.py:8: relative import .sibling"]
    assert _test_module_imports("from . import yuv\n", "h.py", True, mods) == []


def test_no_test_module_imports_another() -> None:
    files = sorted(TESTS.rglob("*.py"))
    test_modules = {p.stem for p in files if _is_test_module(p)}
    assert {"test_native_launch", "conftest"} <= test_modules  # the walk found the suite
    hits = [h for p in files for h in _check(p, test_modules)]
    assert not hits, ("test modules import other test modules; move what they share to "
                      "tests/helpers/<noun>.py (plain code) or the folder's conftest.py "
                      "(fixtures):\n" + "\n".join(hits))


def test_benches_import_no_test_modules() -> None:
    """The benches share the suite's kernels through ``helpers`` too."""
    test_modules = {p.stem for p in TESTS.rglob("*.py") if _is_test_module(p)}
    hits = []
    for p in sorted((ROOT / "bench").rglob("*.py")):
        for line, name, _ in _imported_names(ast.parse(p.read_text())):
            if name.split(".")[0] in test_modules | {"tests"}:
                hits.append(f"{p.relative_to(ROOT)}:{line}: {name}")
    assert not hits, "\n".join(hits)
