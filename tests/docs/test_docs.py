"""What the docs promise a user: no reference to documents a user does not have, install
commands that work with what this checkout builds, and an API reference page for every
public package."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").rglob("*.md"))
SOURCES = sorted(p for p in (ROOT / "packages").rglob("*.py") if "/src/" in str(p))
READMES = [ROOT / "README.md", *sorted((ROOT / "packages").glob("*/README.md"))]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")


def _project(folder: Path) -> dict:
    with open(folder / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]


DISTS = {_project(p.parent)["name"] for p in (ROOT / "packages").glob("*/pyproject.toml")}
EXTRAS = set(_project(ROOT).get("optional-dependencies", {}))
#: Third-party packages a hint may tell a user to install from PyPI.
PYPI = {"ml_dtypes", "nox", "uv", "cupy-cuda13x", "cupy-cuda12x", "torch"}


@pytest.mark.parametrize("page", DOCS, ids=lambda p: str(p.relative_to(ROOT / "docs")))
def test_docs_refer_to_no_document_a_user_lacks(page):
    text = page.read_text()
    for pattern in (r"\bSPEC\b", r"\bseeds?\b", r"shared/", r"design card",
                    r"architecture-target", r"fkl-semantics\.md"):
        hits = [line for line in text.splitlines() if re.search(pattern, line)]
        assert not hits, f"{page.name} refers to a document users do not have: {hits[0]!r}"


_INSTALL = re.compile(r"(?:uv )?pip install ((?:-{1,2}[\w-]+(?: \S+)? )*)['\"]?([\w.\-\[\],]+)")


def _hints() -> list[tuple[str, str, str]]:
    out = []
    for path in [*DOCS, *SOURCES, *READMES]:
        for line in path.read_text().splitlines():
            for m in _INSTALL.finditer(line):
                out.append((path.name, m.group(1), m.group(2)))
    return out


@pytest.mark.parametrize("where, options, target", _hints())
def test_every_install_hint_is_a_command_that_works(where, options, target):
    if target == "-r" or options.startswith("-r") or target.startswith("-"):
        req = (options + target).split()[-1]
        assert req.startswith("-") or (ROOT / req).exists(), (where, req)
        return
    name, _, extras = target.partition("[")
    if name in DISTS or name == "thork":
        assert "--find-links wheelhouse" in options or "--find-links /" in options, (
            f"{where}: {target} is not on PyPI; the command must install it from the "
            "wheelhouse (pip install --find-links wheelhouse ...)")
        if name == "thork":
            for extra in filter(None, extras.rstrip("]").split(",")):
                assert extra in EXTRAS, f"{where}: thork has no extra {extra!r}"
        else:
            for extra in filter(None, extras.rstrip("]").split(",")):
                assert extra in _project(next(
                    p.parent for p in (ROOT / "packages").glob("*/pyproject.toml")
                    if _project(p.parent)["name"] == name)).get("optional-dependencies", {})
    else:
        assert name in PYPI, f"{where}: pip install {target}: not a package this project knows"


def test_hint_reader_finds_hints():
    assert ("x", "--find-links wheelhouse ", "thork[nvcc]") in [
        ("x", m.group(1), m.group(2)) for m in
        _INSTALL.finditer("pip install --find-links wheelhouse 'thork[nvcc]'")]


def test_every_public_package_has_an_api_reference_page():
    """Each import package of packages/ is rendered by a ``::: name`` directive; its public
    submodules render under it (mkdocs.yml: show_submodules)."""
    text = "\n".join(p.read_text() for p in (ROOT / "docs" / "reference").glob("*.md"))
    packages = {p.parent.name for p in (ROOT / "packages").glob("*/src/*/__init__.py")}
    missing = sorted(p for p in packages if f"::: {p}\n" not in text + "\n")
    assert not missing, f"no API reference page renders {missing} (docs/reference/)"
    assert "show_submodules: true" in (ROOT / "mkdocs.yml").read_text()


def test_every_page_is_in_the_site_nav():
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in DOCS:
        rel = str(page.relative_to(ROOT / "docs"))
        assert rel in nav, f"docs/{rel} is not in mkdocs.yml's nav"
