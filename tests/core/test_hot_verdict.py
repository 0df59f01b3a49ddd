"""bench/hot_verdict.py, the hot rows judged over several processes: each process's ratio
to its own floor, the variants alternating, the verdict by the median. A stand-in bench
script writes the rows bench_core.py would, so this runs without a GPU."""

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
if not (BENCH / "hot_verdict.py").exists():
    pytest.skip("bench/hot_verdict.py is not beside the tests", allow_module_level=True)

_spec = importlib.util.spec_from_file_location("hot_verdict", BENCH / "hot_verdict.py")
hv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hv)

# A stand-in for bench_core.py --only hot --out DIR: its rows come from a queue file
# (one JSON list of (floor, devicearrays, cupy) per process, taken in call order), and it
# records which PYTHONPATH it ran with.
STAND_IN = r'''
import json, os, sys
from pathlib import Path
args = sys.argv[1:]
assert args[:2] == ["--only", "hot"] and args[2] == "--out", args
out = Path(args[3])
queue = Path(os.environ["HV_QUEUE"])
todo = json.loads(queue.read_text())
if not todo:
    sys.exit(3)
entry = todo.pop(0)
paired = entry.pop() if entry and isinstance(entry[-1], dict) else {}
floor, da, cu, *ideal = entry
queue.write_text(json.dumps(todo))
with open(os.environ["HV_LOG"], "a") as log:
    log.write(os.environ.get("PYTHONPATH", "-") + "\n")
if floor is None:
    sys.exit(2)  # a process that fails
out.mkdir(parents=True)
rows = [
    {"what": "interleaved: C floor in this process (the verdicts' floor)", "thork": floor,
     "cupy": 6.0, "floor": floor, "unit": "us", "goal": "x"},
    {"what": "interleaved: kernel[...] DeviceArrays", "thork": da, "cupy": 6.0,
     "floor": floor, "unit": "us", "goal": "x"},
    {"what": "  vs C floor + CPython call floor", "thork": da, "cupy": 6.0,
     "floor": floor + 0.05, "unit": "us", "goal": "bound"},
    {"what": "interleaved: kernel[...] CuPy arrays", "thork": cu, "cupy": 6.0,
     "floor": floor, "unit": "us", "goal": "x"},
    {"what": "hot launch, thork DeviceArray", "thork": 1.0, "cupy": 6.0, "floor": None,
     "unit": "us", "goal": "x"},
]
if ideal:
    rows += [
        {"what": "  ideal launcher, CuPy arrays (the least any launcher reads)",
         "thork": ideal[0], "cupy": 6.0, "floor": floor, "unit": "us", "goal": "x"},
        {"what": "  Thork vs the ideal launcher", "thork": cu, "cupy": 6.0,
         "floor": ideal[0], "unit": "us", "goal": "x"},
    ]
for r in rows:  # (session 20) a row's median over its own paired floor
    for name, value in paired.items():
        if r["what"] == "interleaved: kernel[...] " + name:
            r["paired"] = value
(out / "bench_core.json").write_text(json.dumps(rows))
'''


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    script = tmp_path / "bench_core.py"
    script.write_text(STAND_IN)
    queue, log = tmp_path / "queue.json", tmp_path / "paths.txt"
    monkeypatch.setenv("HV_QUEUE", str(queue))
    monkeypatch.setenv("HV_LOG", str(log))
    return script, queue, log


def test_each_process_is_judged_against_its_own_floor_and_the_median_decides(
        stand_in, tmp_path, rng, capsys):
    script, queue, log = stand_in
    floors = rng.uniform(3.2, 4.6, 10)
    da = floors * rng.uniform(1.05, 1.14, 10)
    cu = floors * rng.uniform(1.10, 1.40, 10)
    cu[::2] = floors[::2] * rng.uniform(1.16, 1.30, 5)  # variant a: always over the goal
    queue.write_text(json.dumps([[f, d, c] for f, d, c in zip(floors, da, cu)]))
    out = tmp_path / "out"
    rc = hv.main(["--processes", "5", "--variant", "a=/site/a", "--variant", "b=/site/b",
                  "--bench", str(script), "--out", str(out)])
    assert rc == 0
    assert log.read_text().split() == ["/site/a", "/site/b"] * 5  # alternating
    text = (out / "hot_verdict.txt").read_text()
    assert text == capsys.readouterr().out.split("\n", 10)[-1].rstrip("\n") + "\n"
    lines = text.splitlines()
    for row, values in (("kernel[...] DeviceArrays", da / floors),
                        ("kernel[...] CuPy arrays", cu / floors)):
        at = lines.index(row)
        for k, variant in enumerate("ab"):
            mine = values[k::2]
            line = lines[at + 1 + k]
            assert line.split()[0] == variant
            med = float(np.median(mine))
            assert f"median {med:.3f}x" in line
            assert f"min {mine.min():.3f}" in line and f"max {mine.max():.3f}" in line
            assert " ".join(f"{v:.3f}" for v in mine) in line
            assert line.endswith("met") and (("NOT met" in line) == (med > 1.15))
    assert "bound" not in text and "hot launch" not in text  # only the interleaved rows
    assert "NOT met" in lines[lines.index("kernel[...] CuPy arrays") + 1]


def test_a_failed_process_is_reported_and_left_out(stand_in, tmp_path, capsys):
    script, queue, log = stand_in
    queue.write_text(json.dumps([[4.0, 4.4, 4.6], [None, 0, 0], [4.0, 4.2, 4.8]]))
    rc = hv.main(["--processes", "3", "--bench", str(script), "--out", str(tmp_path / "o")])
    printed = capsys.readouterr().out
    assert rc == 0
    assert "here process 2: exit 2, no rows" in printed
    assert "median 1.075x" in printed and "(2 processes: 1.100 1.050)" in printed
    assert "median 1.175x" in printed and "NOT met" in printed


def test_no_rows_at_all_is_a_failure_and_bad_arguments_are_named(stand_in, tmp_path):
    script, queue, log = stand_in
    queue.write_text(json.dumps([[None, 0, 0]]))
    assert hv.main(["--processes", "1", "--bench", str(script),
                    "--out", str(tmp_path / "o")]) == 1
    with pytest.raises(SystemExit):
        hv.main(["--processes", "0"])
    with pytest.raises(SystemExit):
        hv.main(["--variant", "nopath"])
    with pytest.raises(SystemExit):
        hv.main(["--variant", "a=/x", "--variant", "a=/y"])
    assert sys.exc_info() == (None, None, None)


def test_the_ideal_launcher_is_reported_as_a_bound_not_judged_as_thork(stand_in, tmp_path,
                                                                       rng):
    """(session 18) bench_core's ideal-launcher row: its ratio per process and median, said
    to be a bound; over 1.15x by the median it says the goal is out of reach."""
    script, queue, log = stand_in
    floors = rng.uniform(3.2, 4.6, 6)
    ideal = floors * np.array([1.17, 1.12, 1.19, 1.13, 1.16, 1.11])  # a: over, b: within
    queue.write_text(json.dumps([[f, f * 1.1, f * 1.2, i] for f, i in zip(floors, ideal)]))
    out = tmp_path / "out"
    assert hv.main(["--processes", "3", "--variant", "a=/a", "--variant", "b=/b",
                    "--bench", str(script), "--out", str(out)]) == 0
    lines = (out / "hot_verdict.txt").read_text().splitlines()
    at = lines.index("ideal launcher, CuPy arrays")
    a, b = lines[at + 1], lines[at + 2]
    assert f"median {np.median(ideal[::2] / floors[::2]):.3f}x" in a
    assert f"median {np.median(ideal[1::2] / floors[1::2]):.3f}x" in b
    assert a.endswith("(the goal is out of reach of any launcher that reads what it reads)")
    assert b.endswith("a bound, not Thork: within 1.15x by the median")
    assert "met" not in a + b
    assert not any(line.startswith("Thork vs") for line in lines)
    # Thork's row over the bound, process by process (the floor cancels), and its median
    at = lines.index("kernel[...] CuPy arrays / ideal launcher, CuPy arrays")
    for k, variant in enumerate("ab"):
        mine = (floors * 1.2 / ideal)[k::2]
        line = lines[at + 1 + k]
        assert line.split()[0] == variant
        assert f"median {np.median(mine):.3f}x" in line
        assert " ".join(f"{v:.3f}" for v in mine) in line


def test_a_rows_paired_ratio_is_the_verdict_and_the_median_floor_reading_follows(
        stand_in, tmp_path, rng):
    """(session 20) bench_core pairs each row with the C loop run just before it: that
    ratio's median decides; each row over the process's median floor is printed after it,
    for comparison with sessions 17-19."""
    script, queue, log = stand_in
    floors = rng.uniform(3.2, 4.6, 3)
    cu = floors * np.array([1.21, 1.19, 1.22])  # over the goal by the median floor
    own = rng.uniform(1.08, 1.14, 3)  # within it by the pairing
    da_own = rng.uniform(1.02, 1.06, 3)
    queue.write_text(json.dumps([
        [f, f * 1.1, c, {"CuPy arrays": o, "DeviceArrays": d}]
        for f, c, o, d in zip(floors, cu, own, da_own)]))
    out = tmp_path / "out"
    assert hv.main(["--processes", "3", "--bench", str(script), "--out", str(out)]) == 0
    verdict, _, plain = (out / "hot_verdict.txt").read_text().partition(
        "The same rows over each process's median floor")
    lines = verdict.splitlines()
    line = lines[lines.index("kernel[...] CuPy arrays") + 1]
    assert f"median {np.median(own):.3f}x" in line and line.endswith(": met")
    assert " ".join(f"{v:.3f}" for v in own) in line
    line = lines[lines.index("kernel[...] DeviceArrays") + 1]
    assert f"median {np.median(da_own):.3f}x" in line
    lines = plain.splitlines()
    line = lines[lines.index("kernel[...] CuPy arrays") + 1]
    assert f"median {np.median(cu / floors):.3f}x" in line and line.endswith("NOT met")


def test_without_paired_rows_only_one_table_is_printed(stand_in, tmp_path):
    script, queue, log = stand_in
    queue.write_text(json.dumps([[4.0, 4.4, 4.6]]))
    out = tmp_path / "out"
    assert hv.main(["--processes", "1", "--bench", str(script), "--out", str(out)]) == 0
    assert "median floor" not in (out / "hot_verdict.txt").read_text()
