"""CI's script and rotation: README's test command runs verbatim first, and consecutive
runs cover every rotating cell."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_ci_runs_the_readme_test_command_verbatim_before_anything_else():
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"^(python3 -m pip install -r requirements-dev.txt && python3 -m "
                        r"pytest -n auto)\s", readme, re.M)
    assert command is not None
    run = (ROOT / ".ci" / "run").read_text()
    lines = [ln for ln in run.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    first_work = next(i for i, ln in enumerate(lines) if "pytest" in ln or "nox" in ln
                      or "ruff" in ln or "mypy" in ln or "mkdocs" in ln)
    assert lines[first_work] == command.group(1)


def test_rotation_covers_every_cell_within_the_longest_list():
    pytest.importorskip("nox")
    spec = importlib.util.spec_from_file_location("thork_noxfile", ROOT / "noxfile.py")
    assert spec is not None and spec.loader is not None
    nf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nf)
    longest = max(len(cells) for cells in nf.ROTATION.values())
    for start in (0, 17, 12345):  # any window of consecutive runs
        seen = {c for n in range(start, start + longest) for c in nf.rotation_cells(n)}
        assert seen == {c for cells in nf.ROTATION.values() for c in cells}
    for cell in (c for cells in nf.ROTATION.values() for c in cells):
        assert callable(getattr(nf, cell.split("(")[0])), cell  # a session of the noxfile
    assert all(n in nf.EXTRAS for n in ("base", "nvrtc", "cpu", "nvcc", "clang", "compose",
                                        "all"))
