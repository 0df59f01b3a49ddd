"""Every example in examples/ runs to completion and reports success (it checks itself
against NumPy and exits non-zero on a mismatch)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import TARGETS

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
#: What each family of examples imports beyond core (a plugin subset may lack it: skip).
NEEDS = {"fkl_": ("fkl",), "graph_": ("fkl",), "multi_gpu": ("fkl",),
         "torch_": ("torch", "thork_torch", "fkl"), "dask_": ("distributed", "fkl")}


@pytest.mark.skipif(not TARGETS, reason="no target installed to run the examples")
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(path):
    for prefix, modules in NEEDS.items():
        if path.name.startswith(prefix):
            for module in modules:
                pytest.importorskip(module)
    r = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                       timeout=600, env=dict(os.environ), cwd=ROOT)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "MISMATCH" not in r.stdout
