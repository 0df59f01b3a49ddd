"""Every ```python block in docs/ runs, page by page, as a reader would run it.

The blocks of one page run in order in one namespace (a later block may use what an
earlier one defined) that starts with ``np``, ``tk`` and ``fkl`` imported (docs/index.md
says pages assume them), in a temporary folder, on the CPU target (``THORK_TARGET=cpu``), so
CI without a GPU runs them all. The line right before a block's fence may say otherwise:

- ``<!-- snippet: gpu -->`` — the block needs a GPU (device arrays, streams, timings):
  it runs in the GPU suite (``-m gpu`` on a machine with one), with the blocks before it,
  on the default target, and is skipped elsewhere;
- ``<!-- snippet: skip REASON -->`` — the block is not meant to run (an excerpt, a
  plugin's ``pyproject.toml`` shown as Python...); the reason is required;
- ``<!-- snippet: needs MODULE -->`` — the block runs like any other where ``MODULE``
  imports (an optional dependency such as Dask's ``distributed``); the page is skipped,
  naming it, where it does not.
"""

from __future__ import annotations

import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import TARGETS, importable

DOCS = Path(__file__).resolve().parents[2] / "docs"
_FENCE = re.compile(r"^```(\w*)\s*$")
_MARK = re.compile(r"^<!--\s*snippet:\s*(gpu|skip|needs)\b\s*(.*?)\s*-->\s*$")


@dataclass
class Block:
    page: str
    line: int  # 1-based line of the first code line
    code: str
    mode: str  # "cpu", "gpu", "skip" or "needs" (reason: the module)
    reason: str = ""


def blocks(path: Path) -> list[Block]:
    """The ```python blocks of one page, with the marker before each."""
    out: list[Block] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        lang, start = m.group(1), i + 1
        end = next((j for j in range(start, len(lines)) if lines[j].strip() == "```"),
                   len(lines))
        if lang == "python":
            mark = _MARK.match(lines[i - 1]) if i > 0 else None
            mode, reason = (mark.group(1), mark.group(2)) if mark else ("cpu", "")
            out.append(Block(path.name, start + 1, "\n".join(lines[start:end]), mode,
                             reason))
        i = end + 1
    return out


PAGES = sorted(DOCS.rglob("*.md"))
ALL = [b for p in PAGES for b in blocks(p)]


#: What every page assumes (docs/index.md says so): NumPy, and both front-ends.
PRELUDE = "import numpy as np\nimport thork as tk\nimport fkl\n"


def _run(page_blocks: list[Block], upto: int) -> None:
    # A real module, so code that looks itself up in sys.modules (tk.struct's
    # annotations) finds the page's names.
    name = f"docs_snippets_{page_blocks[0].page.replace('-', '_').replace('.', '_')}"
    module = types.ModuleType(name)
    sys.modules[name] = module
    ns = module.__dict__
    exec(PRELUDE, ns)  # noqa: S102
    for b in page_blocks[:upto + 1]:
        if b.mode == "needs":
            pytest.importorskip(b.reason, reason=f"docs/{b.page}:{b.line} needs {b.reason}")
        if b.mode == "skip":
            continue
        # Padded so tracebacks give the page's own line numbers.
        code = compile("\n" * (b.line - 1) + b.code, f"docs/{b.page}", "exec")
        exec(code, ns)  # noqa: S102 - the docs' own examples


def _page_params(mode: str) -> list[object]:
    out = []
    for page in PAGES:
        bs = blocks(page)
        last = max((i for i, b in enumerate(bs)
                    if b.mode == mode or (mode == "cpu" and b.mode == "needs")), default=None)
        if last is not None:
            out.append(pytest.param(page.name, last, id=page.name))
    return out


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("THORK_TARGET", "cpu")


@pytest.mark.skipif(not importable("thork") or "cpu" not in TARGETS,
                    reason="docs snippets need the tracer and the CPU target")
@pytest.mark.skipif(not all(importable(m) for m in ("fkl", "thork_cpu")),
                    reason="docs snippets need every first-party front-end")
@pytest.mark.parametrize("page, upto", _page_params("cpu"))
def test_page_snippets_run_on_the_cpu(page, upto, sandbox):
    bs = [b for b in blocks(DOCS / page) if b.mode != "gpu"]
    _run(bs, len(bs) - 1)


@pytest.mark.gpu
@pytest.mark.parametrize("page, upto", _page_params("gpu"))
def test_page_gpu_snippets_run_on_the_gpu(page, upto, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("THORK_TARGET", raising=False)
    _run(blocks(DOCS / page), upto)


def test_every_opt_out_says_why():
    for b in ALL:
        if b.mode == "skip":
            assert len(b.reason) > 10, f"docs/{b.page}:{b.line}: say why it does not run"


def test_the_snippet_reader_sees_blocks_and_markers(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text\n```python\nx = 1\n```\n<!-- snippet: gpu -->\n```python\n"
                    "y = x\n```\n```bash\nls\n```\n<!-- snippet: skip shown as an excerpt"
                    " only -->\n```python\nz\n```\n")
    got = [(b.line, b.code, b.mode, b.reason) for b in blocks(page)]
    assert got == [(3, "x = 1", "cpu", ""), (7, "y = x", "gpu", ""),
                   (14, "z", "skip", "shown as an excerpt only")]
