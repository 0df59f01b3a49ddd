"""Type checkers see what ``@tk.jit`` makes: a ``Kernel`` (not ``Any``), bare and called.

Runs mypy (a dev dependency) on a small file with ``reveal_type`` and reads what it
revealed; skipped where mypy is not installed."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

api = pytest.importorskip("mypy.api")

ROOT = Path(__file__).resolve().parents[2]

SOURCE = textwrap.dedent("""
    import thork as tk

    @tk.jit
    def bare(out: tk.DevicePointer[tk.dt.float32], i: tk.Uint[tk.ThreadIdx]) -> None:
        out[i] = 1.0

    @tk.jit(target="cpu", name="named")
    def called(out: tk.DevicePointer[tk.dt.float32], i: tk.Uint[tk.ThreadIdx]) -> None:
        out[i] = 2.0

    reveal_type(bare)
    reveal_type(called)
    reveal_type(tk.jit(target="cpu"))
    bare.no_such_attribute
""")


def test_jit_gives_a_kernel_to_type_checkers(tmp_path: Path) -> None:
    src = tmp_path / "user_code.py"
    src.write_text(SOURCE)
    stdout, stderr, _ = api.run([
        "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"),
        "--no-error-summary", "--follow-imports=silent", str(src),
    ])
    revealed = [line.split("Revealed type is ", 1)[1].strip('"')
                for line in stdout.splitlines() if "Revealed type is" in line]
    assert revealed[:2] == ["thork._kernel.Kernel", "thork._kernel.Kernel"], stdout + stderr
    assert "thork._kernel.Kernel" in revealed[2] and "def" in revealed[2], revealed
    # A typo on a kernel is caught: the type is real, not Any.
    assert 'has no attribute "no_such_attribute"' in stdout, stdout


def test_mypy_sees_the_source_tree() -> None:
    # The config's mypy_path names every package's src folder (a package added without
    # it would be checked as missing).
    text = (ROOT / "pyproject.toml").read_text()
    for pkg in sorted(p.name for p in (ROOT / "packages").iterdir() if (p / "src").is_dir()):
        assert f"packages/{pkg}/src" in text, pkg
    assert os.path.isdir(ROOT / "packages")
