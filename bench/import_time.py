"""``import thork`` with NumPy already imported: issue 11's import row, the median over
fresh processes of ``python -X importtime -c "import numpy; import thork; thork.jit"``'s
cumulative time for ``thork``, and the modules that cost most of it (median self time).

    python bench/import_time.py [--runs 20] [--top 15]
                                [--variant LABEL:VAR=VALUE[;VAR=VALUE...]]...

Each process also touches ``thork.jit`` after the import: where ``tk.jit`` loads the build
and launch path on first use (session 12), the ``+ jit`` column is what a process that
defines a kernel pays in all (every top-level import after NumPy's, cumulative), the
``import thork`` column what importing alone costs. ``--variant`` (repeatable) measures
several environments in one run, their processes alternating (a shared machine's drifts
hit all alike): e.g. ``--variant main:PYTHONPATH=/tmp/site-main --variant
new:PYTHONPATH=/tmp/site-new``.
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import subprocess
import sys

CODE = "import numpy; import thork; thork.jit"


def parse(stderr: str) -> tuple[int, int, list[tuple[str, int]]]:
    """``import thork``'s cumulative µs, every top-level import's after NumPy's summed
    (the import and ``thork.jit``), and the (module, self µs) rows after NumPy's."""
    after_numpy, thork_us, total_us = False, None, 0
    rows = []
    for line in stderr.splitlines()[1:]:
        if not line.startswith("import time:"):
            continue
        self_us, cum_us, name = line.split("|")
        top = not name.startswith("  ")  # one space before a top-level name
        if name.strip() == "numpy" and top:
            after_numpy = True
            continue
        if after_numpy:
            rows.append((name.strip(), int(self_us.split(":")[1])))
            if top:
                total_us += int(cum_us)
            if name.strip() == "thork" and top:
                thork_us = int(cum_us)
    assert thork_us is not None, stderr[-2000:]
    return thork_us, total_us, rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--variant", action="append", default=[],
                    help="LABEL:VAR=VALUE[;VAR=VALUE...] (repeat: alternating processes)")
    opt = ap.parse_args()
    envs: dict[str, dict[str, str]] = {}
    for spec in opt.variant or [":"]:
        label, _, assigns = spec.partition(":")
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # users' processes import from .pyc files
        for a in filter(None, assigns.split(";")):
            var, _, value = a.partition("=")
            env[var] = value
        envs[label] = env
    own: dict[str, dict[str, list[int]]] = {k: collections.defaultdict(list) for k in envs}
    total: dict[str, list[int]] = {k: [] for k in envs}
    with_jit: dict[str, list[int]] = {k: [] for k in envs}
    for i in range(opt.runs + 1):  # the first round writes the .pyc files: dropped
        for label, env in envs.items():
            r = subprocess.run([sys.executable, "-X", "importtime", "-c", CODE],
                               capture_output=True, text=True, env=env, check=True)
            if not i:
                continue
            thork_us, all_us, rows = parse(r.stderr)
            total[label].append(thork_us)
            with_jit[label].append(all_us)
            for name, us in rows:
                own[label][name].append(us)
    for label in envs:
        t, j = total[label], with_jit[label]
        tag = f" [{label}]" if label else ""
        print(f"import thork after numpy{tag} (-X importtime, cumulative): median "
              f"{statistics.median(t) / 1e3:.2f} ms (min {min(t) / 1e3:.2f}, max "
              f"{max(t) / 1e3:.2f}, {len(t)} processes); + jit (import thork, then "
              f"thork.jit): median {statistics.median(j) / 1e3:.2f} ms (min "
              f"{min(j) / 1e3:.2f})")
        top = sorted(own[label], key=lambda n: -statistics.median(own[label][n]))[:opt.top]
        print("  largest self times (median ms, import and jit): " + ", ".join(
            f"{n} {statistics.median(own[label][n]) / 1e3:.2f}" for n in top))


if __name__ == "__main__":
    main()
