"""The seed example (seeds/000) runs as written on every target and matches NumPy."""

import os
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import TARGETS

ROOT = Path(__file__).resolve().parents[2]
# The example launches at import time, so every test here needs some target.
pytestmark = pytest.mark.skipif(not TARGETS, reason="no target installed to run the example")


def test_seed_example_matches_numpy(target, monkeypatch):
    monkeypatch.setenv("THORK_TARGET", target)
    ns = runpy.run_path(str(ROOT / "examples" / "matrix_add.py"))
    assert ns["matrix_add"].compile_info.target == target
    np.testing.assert_array_equal(ns["C"], ns["A"] + ns["B"])


def test_main_job_script_reports_where_it_ran():
    env = dict(os.environ)
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "matrix_add.py")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "matches NumPy" in r.stdout
    assert " on gpu " in r.stdout or " on cpu " in r.stdout


def test_seed_source_is_plain_cuda():
    ns = runpy.run_path(str(ROOT / "examples" / "matrix_add.py"), run_name="not_main")
    src = ns["matrix_add"].source
    assert 'extern "C" __global__ void matrix_add(float* out, const float* A, const float* B)' in src
    assert not any(line.lstrip().startswith("#include") for line in src.splitlines())
    # The built-ins expand at the top of the body, as the seed describes.
    assert "const unsigned int bid = blockIdx.x;" in src
    assert "const unsigned int tid = threadIdx.x;" in src
    assert "const unsigned int bdm = blockDim.x;" in src
    assert '#line' in src and "matrix_add.py" in src


@pytest.mark.plugin("nvrtc")
@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_90"])
def test_seed_compiles_to_cubin(arch):
    ns = runpy.run_path(str(ROOT / "examples" / "matrix_add.py"), run_name="not_main")
    art = ns["matrix_add"].artifact(arch)
    assert art.kind == "cubin" and art.arch == arch
    assert art.data[:4] == b"\x7fELF"
