"""Add mypy's current findings to the "Known debt" overrides in pyproject.toml.

    python3 .ci/mypy_debt.py          # then review the diff of pyproject.toml

For each module with findings, the kinds (error codes) found are added to its entry, so
`python3 -m mypy` passes again; entries are never removed here (fix a module, then delete
its codes by hand). Use it after merging code that mypy flags, not to hide new code's
mistakes: new modules should start clean.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
MARK = "# Known debt"


def findings() -> dict[str, set[str]]:
    out = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                         text=True).stdout
    found: dict[str, set[str]] = defaultdict(set)
    for line in out.splitlines():
        m = re.match(r"packages/[^/]+/src/(.+)\.py:\d+: error: .*\[([a-z-]+)\]$", line)
        if m:
            found[m.group(1).replace("/", ".").removesuffix(".__init__")].add(m.group(2))
    return found


def current(text: str) -> dict[str, set[str]]:
    debt: dict[str, set[str]] = defaultdict(set)
    section = text[text.index(MARK):]
    for block in section.split("[[tool.mypy.overrides]]")[1:]:
        mods = re.findall(r'"([\w.]+)"', block.split("disable_error_code")[0])
        codes = re.findall(r'"([a-z-]+)"', block.split("disable_error_code")[1])
        for mod in mods:
            debt[mod].update(codes)
    return debt


def render(debt: dict[str, set[str]]) -> str:
    out = [f"{MARK} (findings as of the check's introduction), one entry per module.\n"
           "# Kept up to date by .ci/mypy_debt.py; remove codes as modules get fixed.\n"]
    for mod in sorted(debt):
        codes = ", ".join(f'"{c}"' for c in sorted(debt[mod]))
        out.append(f'[[tool.mypy.overrides]]\nmodule = ["{mod}"]\n'
                   f"disable_error_code = [{codes}]\n")
    return "\n".join(out)


def main() -> int:
    text = PYPROJECT.read_text()
    debt = current(text)
    new = findings()
    for mod, codes in new.items():
        debt[mod].update(codes)
    head = text[:text.index(MARK)]
    PYPROJECT.write_text(head + render(debt))
    added = sum(len(c) for c in new.values())
    print(f"{added} module/code pairs found by mypy; pyproject.toml's debt list updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
