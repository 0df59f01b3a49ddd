"""``import thork`` with NumPy already imported: issue 11's import row, the median over
fresh processes of ``python -X importtime -c "import numpy; import thork"``'s cumulative
time for ``thork``, and the modules that cost most of it (median self time).

    python bench/import_time.py [--runs 20] [--top 15]
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import subprocess
import sys


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--top", type=int, default=15)
    opt = ap.parse_args()
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # users' processes import from .pyc files
    own: dict[str, list[int]] = collections.defaultdict(list)
    total = []
    for _ in range(opt.runs + 1):  # the first run writes the .pyc files: dropped
        r = subprocess.run([sys.executable, "-X", "importtime", "-c",
                            "import numpy; import thork"], capture_output=True, text=True,
                           env=env, check=True)
        after_numpy, thork_us = False, None
        rows = []
        for line in r.stderr.splitlines()[1:]:
            self_us, cum_us, name = line.split("|")
            if name.strip() == "numpy" and name.startswith(" numpy"):
                after_numpy = True
                continue
            if after_numpy:
                rows.append((name.strip(), int(self_us.split(":")[1])))
                if name.strip() == "thork" and name.startswith(" thork"):
                    thork_us = int(cum_us)
        assert thork_us is not None, r.stderr[-2000:]
        total.append(thork_us)
        for name, us in rows:
            own[name].append(us)
    total = total[1:]
    print(f"import thork after numpy (-X importtime, cumulative): median "
          f"{statistics.median(total) / 1e3:.2f} ms (min {min(total) / 1e3:.2f}, max "
          f"{max(total) / 1e3:.2f}, {len(total)} processes)")
    top = sorted(own, key=lambda n: -statistics.median(own[n]))[:opt.top]
    print("  largest self times (median ms): " + ", ".join(
        f"{n} {statistics.median(own[n]) / 1e3:.2f}" for n in top))


if __name__ == "__main__":
    main()
