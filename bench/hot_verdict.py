"""The hot ``kernel[grid, block](...)`` rows judged over several processes (session 17).

    python bench/hot_verdict.py [--processes 7] [--variant NAME=PYTHONPATH ...] [--out DIR]

On the H200 one process's interleaved rows (``bench_core.py --only hot``) moved between
0.98x and 1.31x the C floor for one version of the code (docs/benchmarks.md "Session 17"):
a process-wide state of the machine that a single process cannot average out. This runs
``bench_core.py --only hot`` in ``--processes`` fresh processes per variant, the variants
alternating process by process (a, b, a, b, ...) so that drift of the machine falls on
each alike, reads each process's ``bench_core.json``, and prints each interleaved
``kernel[...]`` row's ratio to that process's own in-process floor: per process, then per
variant the median, minimum and maximum, and the verdict by the median (the goal of issue
11, <= 1.15x the floor). (session 20) Where bench_core paired each row with the C loop run
just before it in each round, the ratio is that pairing's median; the table against each
process's median floor follows for comparison.

``--variant NAME=PYTHONPATH`` (repeatable) runs that variant with that ``PYTHONPATH`` (an
install of other wheels, for an A/B); without one, the single variant ``here`` runs with
the environment as it is. ``--bench`` names the script to run (bench_core.py beside this
file; the tests hand a stand-in). Needs what bench_core.py's hot rows need: a GPU, CuPy, a
C compiler.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median
from typing import Any

GOAL = 1.15
ROW_PREFIX = "interleaved: kernel["
#: (session 18) bench_core's ideal-launcher rows (bench/ideal_launcher.c): not Thork, the
#: least any launcher does; reported beside the rows as their bound
BOUND_PREFIX = "  ideal launcher, "


def ratios(rows: list[dict[str, Any]], paired: bool = True) -> dict[str, float]:
    """Each interleaved ``kernel[...]`` row of one bench_core.json, and each ideal-launcher
    bound: its time over the floor the row is judged against, by row name (the bounds'
    names start with "ideal launcher"). That is the row's ``paired`` value where it has
    one (session 20: the median over rounds of the row over the C loop run just before
    it), else (or with ``paired=False``) its time over the process's median floor."""
    out: dict[str, float] = {}
    for r in rows:
        what = str(r.get("what", ""))
        thork, floor, own = r.get("thork"), r.get("floor"), r.get("paired")
        if paired and isinstance(own, float) and own > 0:
            value = own  # (session 20) the median of the row over its own floor
        elif isinstance(thork, float) and isinstance(floor, float) and floor > 0:
            value = thork / floor
        else:
            continue
        if what.startswith(ROW_PREFIX):
            out[what[len("interleaved: "):]] = value
        elif what.startswith(BOUND_PREFIX):
            out[what.strip().split(" (")[0]] = value
    return out


def summary(results: dict[str, list[dict[str, float]]]) -> str:
    """The table: per row and variant, each process's ratio, then the median, minimum,
    maximum and the verdict by the median."""
    names: list[str] = []
    for per_process in results.values():
        for got in per_process:
            names += [n for n in got if n not in names]
    lines = []
    for name in names:
        lines.append(name)
        for variant, per_process in results.items():
            vals = [got[name] for got in per_process if name in got]
            if not vals:
                continue
            med = median(vals)
            if name.startswith("ideal launcher"):
                verdict = (f"a bound, not Thork: above {GOAL}x by the median (the goal is "
                           "out of reach of any launcher that reads what it reads)"
                           if med > GOAL else
                           f"a bound, not Thork: within {GOAL}x by the median")
            else:
                verdict = f"<= {GOAL}x by the median: " + ("met" if med <= GOAL else "NOT met")
            each = " ".join(f"{v:.3f}" for v in vals)
            lines.append(f"  {variant:<10} median {med:.3f}x  min {min(vals):.3f}  "
                         f"max {max(vals):.3f}  ({len(vals)} processes: {each})  {verdict}")
    lines += over_bounds(results, names)
    return "\n".join(lines)


#: (session 18) Thork's rows and the ideal launchers that bound them
BOUNDS = {"kernel[...] CuPy arrays": ("ideal launcher, CuPy arrays",),
          "kernel[...] torch tensors": ("ideal launcher, torch tensors",
                                        "ideal launcher, torch tensors via libtorch")}


def over_bounds(results: dict[str, list[dict[str, float]]], names: list[str]) -> list[str]:
    """(session 18) Each Thork row over each ideal launcher that bounds it, per process
    (both ratios share the process's floor, so the floor cancels: what the spread between
    processes moves least), then the median: how far Thork is from the least any launcher
    does."""
    lines = []
    for row, bounds in BOUNDS.items():
        for bound in bounds:
            if row not in names or bound not in names:
                continue
            lines.append(f"{row} / {bound}")
            for variant, per_process in results.items():
                vals = [got[row] / got[bound] for got in per_process
                        if row in got and bound in got]
                if vals:
                    each = " ".join(f"{v:.3f}" for v in vals)
                    lines.append(f"  {variant:<10} median {median(vals):.3f}x  "
                                 f"({len(vals)} processes: {each})")
    return lines


Results = dict[str, list[dict[str, float]]]


def run(bench: Path, variants: dict[str, str | None], processes: int, out: Path,
        timeout: float) -> tuple[Results, Results]:
    """``bench --only hot --out DIR`` in ``processes`` fresh processes per variant,
    alternating; the ratios of each, paired and (second) over each process's median
    floor. A process that fails is reported and left out."""
    results: Results = {v: [] for v in variants}
    plain: Results = {v: [] for v in variants}
    for i in range(processes):
        for variant, path in variants.items():
            env = dict(os.environ)
            if path is not None:
                env["PYTHONPATH"] = path
            dest = out / f"{variant}-{i + 1}"
            cmd = [sys.executable, str(bench), "--only", "hot", "--out", str(dest)]
            try:
                done = subprocess.run(cmd, env=env, capture_output=True, text=True,
                                      timeout=timeout)
            except subprocess.TimeoutExpired:
                print(f"{variant} process {i + 1}: timed out after {timeout:.0f} s",
                      flush=True)
                continue
            dest.mkdir(parents=True, exist_ok=True)
            (dest / "log.txt").write_text(done.stdout + done.stderr)
            table = dest / "bench_core.json"
            if done.returncode != 0 or not table.is_file():
                print(f"{variant} process {i + 1}: exit {done.returncode}, no rows "
                      f"({dest / 'log.txt'})", flush=True)
                continue
            table_rows = json.loads(table.read_text())
            got = ratios(table_rows)
            results[variant].append(got)
            plain[variant].append(ratios(table_rows, paired=False))
            print(f"{variant} process {i + 1}: " + ", ".join(
                f"{n} {v:.3f}x" for n, v in got.items()), flush=True)
    return results, plain


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int, default=7)
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=PYTHONPATH")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--bench", type=Path,
                    default=Path(__file__).resolve().with_name("bench_core.py"))
    ap.add_argument("--timeout", type=float, default=150.0,
                    help="seconds per process (default 150)")
    args = ap.parse_args(argv)
    if args.processes < 1:
        ap.error(f"--processes: expected a positive count, got {args.processes}")
    variants: dict[str, str | None] = {}
    for spec in args.variant:
        name, sep, path = spec.partition("=")
        if not sep or not name or name in variants:
            ap.error(f"--variant: expected a new NAME=PYTHONPATH, got {spec!r}")
        variants[name] = path
    if not variants:
        variants["here"] = None
    out = args.out or Path(tempfile.mkdtemp(prefix="thork-hot-verdict-"))
    results, plain = run(args.bench, variants, args.processes, out, args.timeout)
    text = summary(results)
    if plain != results:  # (session 20) sessions 17-19's reading, for comparison
        text += ("\n\nThe same rows over each process's median floor (sessions 17-19's "
                 "reading; not the verdict where the rows are paired):\n" + summary(plain))
    print(text)
    out.mkdir(parents=True, exist_ok=True)
    (out / "hot_verdict.txt").write_text(text + "\n")
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
