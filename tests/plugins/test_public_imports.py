"""No package imports another package's private module: first-party plugins use only what a
third party can (the public facades ``thork_core``, ``thork_core.plugin``, ``.ir``,
``.runtime``, ``.build``, ``.launch``, ``thork``, ``thork.tracing``, ``fkl``...)."""

from __future__ import annotations

import ast
import importlib
import pathlib

import pytest
from helpers import run_python

ROOT = pathlib.Path(__file__).resolve().parents[2]
# Every first-party package, and the example third-party plugins (they must hold to the
# same rule, being what an outsider writes).
SOURCES = sorted(
    [p for p in (ROOT / "packages").glob("*/src/*") if p.is_dir()]
    + [p for p in (ROOT / "examples" / "plugins").glob("*/src/*") if p.is_dir()]
)
OWN = {p.name for p in SOURCES} | {"thork_core", "thork", "fkl"}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(tree: ast.AST, own: str) -> list[str]:
    """``line: statement`` for each import of another package's private module or name
    (inside functions too, and ``from pkg import _module`` forms)."""
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods = [(a.name, ()) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            mods = [(node.module, tuple(a.name for a in node.names))]
        else:
            continue
        for mod, names in mods:
            top, *rest = mod.split(".")
            if top == own or top not in OWN:
                continue
            if any(_private(p) for p in rest) or any(_private(n) for n in names):
                hits.append(f"{node.lineno}: {ast.unparse(node)}")
    return hits


def test_the_checker_sees_every_form() -> None:
    src = """
import thork_core._cache
from thork_core._ir import Var
from thork_core import _cuda
from thork_core import ir, _memo as m
def f():
    from thork._trace import Value
from thork_core.ir import Var
from thork_cpu import CpuTarget
from own._x import y
from . import _z
import os._private
"""
    hits = private_imports(ast.parse(src), "own")
    assert [h.split(":")[0] for h in hits] == ["2", "3", "4", "5", "7"]


def test_no_package_imports_another_packages_private_modules() -> None:
    assert SOURCES, "no package sources found"
    hits = []
    for pkg in SOURCES:
        for f in sorted(pkg.rglob("*.py")):
            tree = ast.parse(f.read_text(encoding="utf-8"), str(f))
            hits += [f"{f.relative_to(ROOT)}:{h}" for h in private_imports(tree, pkg.name)]
    assert not hits, "imports of another package's private modules:\n" + "\n".join(hits)


FACADES = {
    "thork_core.ir": ["thork_core._ir"],
    "thork_core.plugin": [],
    "thork_core.runtime": ["thork_core._memory"],
    "thork_core.build": [],
    "thork_core.launch": [],
    "thork.tracing": ["thork._trace", "thork._control"],
}


@pytest.mark.parametrize("facade", sorted(FACADES))
def test_facades_export_what_they_list(facade: str) -> None:
    """Every name a facade lists exists, is documented by its origin, and the facade
    covers the whole public list of the private modules it stands for."""
    if facade.startswith("thork.") and importlib.util.find_spec("thork") is None:
        pytest.skip("thork-trace not installed")
    mod = importlib.import_module(facade)
    assert mod.__doc__ and len(mod.__doc__) > 200, f"{facade} needs a docstring"
    for name in mod.__all__:
        assert hasattr(mod, name), f"{facade}.{name} is listed but missing"
    for private in FACADES[facade]:
        missing = set(importlib.import_module(private).__all__) - set(mod.__all__)
        assert not missing, f"{facade} lacks {sorted(missing)} of {private}"


def test_plugin_facade_is_cheap_and_complete() -> None:
    """Importing the plugin API does not load the CUDA target (plugin modules import it
    in every process); its lazy names resolve."""
    code = ("import sys, thork_core.plugin as p; assert 'thork_core._gpu' not in sys.modules;"
            "assert p.GpuTarget.__name__ == 'GpuTarget'; print(p.PLUGIN_API_VERSION)")
    major, minor = run_python(code).strip().split(".")
    assert major.isdigit() and minor.isdigit()


def test_build_is_the_build_module() -> None:
    """``thork_core.build`` is the public module (no function shadows it)."""
    import types

    import thork_core
    import thork_core.build

    assert isinstance(thork_core.build, types.ModuleType)
    assert callable(thork_core.build.build_kernel)
    assert thork_core.build_kernel is thork_core.build.build_kernel
