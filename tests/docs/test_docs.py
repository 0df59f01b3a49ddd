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
    for pattern in (r"\bSPEC\b", r"\bseeds/|\bseeds? 00\d|\bthe seeds\b", r"shared/", r"design card",
                    r"architecture-target", r"fkl-semantics\.md"):
        hits = [line for line in text.splitlines() if re.search(pattern, line)]
        assert not hits, f"{page.name} refers to a document users do not have: {hits[0]!r}"


_INSTALL = re.compile(r"(?:uv )?pip install ([^`\n;)#]*)")
#: Options that take a value, and whether that value is a path in this checkout.
_OPTIONS = {"-r": True, "--requirement": True, "-e": True, "--editable": True,
            "-f": False, "--find-links": False, "-c": True}


def _commands() -> list[tuple[str, str]]:
    out = []
    for path in [*DOCS, *SOURCES, *READMES]:
        for line in path.read_text().splitlines():
            out.extend((path.name, m.group(1).strip()) for m in _INSTALL.finditer(line))
    return out


def check_install(args: str) -> list[str]:
    """What is wrong with ``pip install ARGS`` (empty when it works with this checkout)."""
    raw = args.split()
    # The command ends at a word followed by a comma or full stop (prose goes on).
    end = next((k + 1 for k, w in enumerate(raw) if w.rstrip("'\"").endswith((",", "."))),
               len(raw))
    words = [w.strip("'\",.") for w in raw[:end]]
    problems, find_links, i = [], False, 0
    while i < len(words):
        w = words[i]
        if w in _OPTIONS:
            value = words[i + 1] if i + 1 < len(words) else ""
            if _OPTIONS[w] and not (ROOT / value).exists():
                problems.append(f"{w} {value}: no such file in this checkout")
            find_links |= w in ("-f", "--find-links")
            i += 2
            continue
        if w.startswith("-"):
            i += 1
            continue
        if not re.fullmatch(r"[\w.\-]+(\[[\w,\-]+\])?([<>=!~]=?[\w.]+)?", w):
            break  # prose after the command
        name, _, extras = w.partition("[")
        extras_list = [e for e in extras.rstrip("]").split(",") if e]
        if name in DISTS or name == "thork":
            if not find_links:
                problems.append(f"{w} is not on PyPI: install it with --find-links wheelhouse")
            known = EXTRAS if name == "thork" else set(_project(next(
                p.parent for p in (ROOT / "packages").glob("*/pyproject.toml")
                if _project(p.parent)["name"] == name)).get("optional-dependencies", {}))
            problems += [f"{name} has no extra {e!r}" for e in extras_list if e not in known]
        elif name not in PYPI:
            problems.append(f"{name}: not a package this project knows")
        i += 1
    return problems


@pytest.mark.parametrize("where, args", _commands())
def test_every_install_hint_is_a_command_that_works(where, args):
    assert check_install(args) == [], f"{where}: pip install {args}"


@pytest.mark.parametrize("args, ok", [
    ("--find-links wheelhouse 'thork[nvcc]'", True),
    ("'thork[nvcc]'", False),
    ("--find-links wheelhouse 'thork[nope]'", False),
    ("-e examples/no-such-plugin", False),
    ("-r requirements-dev.txt", True),
    ("ml_dtypes", True),
    ("left-pad", False),
    ("--find-links wheelhouse 'thork[nvcc]', after nox -s wheels", True),
])
def test_install_hint_checker(args, ok):
    assert (check_install(args) == []) is ok


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
