"""Startup costs without a GPU: ``import thork`` and a fresh process's disk-cache hit on the
GPU target up to the loaded artifact (registry, trace, render, key, disk read), with the
driver stubbed (``gpu_status`` says yes, ``THORK_ARCH=sm_90``; NVRTC compiles the one miss
that fills the cache). Issue 11's startup rows are host work: this measures them where
there is no GPU, and compares checkouts in one run (alternating processes).

    python bench/diag_startup.py [--runs 20] [--compare /path/to/other/checkout]
                                 [--callgrind]

Each tree's packages are imported from its ``packages/*/src`` (this checkout's by
default), each with a cache folder of its own. ``--callgrind`` adds instruction counts
(valgrind's callgrind, between two marker calls in the child: deterministic, unlike wall
time on a shared machine) for the import and for the registry span.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _floor import KERNEL_SOURCE  # noqa: E402

CHILD = textwrap.dedent('''
    import time
    W = time.perf_counter
    t_start = W()
    import json, os, sys
    import numpy
    t_np = W()
    import thork
    t_imp = W()
    sys.path.insert(0, sys.argv[1])
    from seedkernel import matrix_add
    from thork_core import _cuda
    _cuda.gpu_status = lambda: (True, "stubbed")
    from thork_core._build import _fetch, choose, key_parts, resolve_arch
    mode = sys.argv[2]
    marks = [("start", W())]
    if mode == "import":  # callgrind: the import alone, between the markers
        sys.exit(0)
    os.getppid()  # callgrind marker: zero the counts
    tgt, comp = choose("gpu", None)
    marks.append(("registry", W()))
    if mode == "registry":
        os.getpgrp()  # callgrind marker: dump
        sys.exit(0)
    ir = matrix_add.ir
    marks.append(("trace", W()))
    src = tgt.renderer().render(ir)
    marks.append(("render", W()))
    arch = resolve_arch(ir, tgt.arch())
    kind = next(k for k in tgt.consumes if k in comp.produces)
    ident, flags = key_parts(comp, kind, arch)
    marks.append(("key", W()))
    art, key, how = _fetch(ir, src, comp, kind, arch, ident, flags)
    marks.append(("disk", W()))
    out = {"import_ms": (t_imp - t_np) * 1e3, "how": how}
    for (_, a), (name, b) in zip(marks, marks[1:]):
        out[name + "_ms"] = (b - a) * 1e3
    out["span_ms"] = (marks[-1][1] - marks[0][1]) * 1e3
    print(json.dumps(out))
''')

IMPORT_CHILD = textwrap.dedent('''
    import os, sys
    import numpy
    os.getppid()
    import thork
    os.getpgrp()
''')


def tree_env(tree: Path | None, cache: str) -> dict[str, str]:
    env = dict(os.environ, THORK_CACHE_DIR=cache, THORK_ARCH="sm_90",
               OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # users' processes import from .pyc files
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            str(p) for p in sorted((tree / "packages").glob("*/src")))
    return env


def callgrind(cmd: list[str], env: dict[str, str]) -> float | None:
    """Instructions (millions) between the child's two marker calls."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                            "--zero-before=os_getppid", "--dump-before=os_getpgrp", *cmd],
                           env=dict(env, PYTHONHASHSEED="0"), capture_output=True, text=True)
        if r.returncode != 0:
            return None
        for f in Path(d).glob("cg.out.*"):
            for line in f.read_text().splitlines():
                if line.startswith("summary:"):
                    return int(line.split()[1]) / 1e6
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--compare", type=Path, default=None,
                    help="another checkout to measure in the same run")
    ap.add_argument("--callgrind", action="store_true")
    opt = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="thork-startup-"))
    (work / "seedkernel.py").write_text(KERNEL_SOURCE)
    (work / "child.py").write_text(CHILD)
    (work / "import_child.py").write_text(IMPORT_CHILD)
    trees: dict[str, Path | None] = {"this": HERE.parent if opt.compare else None}
    if opt.compare:
        trees["compare"] = opt.compare.resolve()
    envs = {k: tree_env(t, str(work / f"cache-{k}")) for k, t in trees.items()}
    child = [sys.executable, str(work / "child.py"), str(work)]
    for env in envs.values():
        for _ in range(2):  # fill the cache (one compile), then settle the memo
            r = subprocess.run([*child, "full"], env=env, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(r.stderr)
    results: dict[str, list[dict[str, Any]]] = {k: [] for k in envs}
    for _ in range(opt.runs):  # alternating, so drifts of a shared machine hit all alike
        for k, env in envs.items():
            r = subprocess.run([*child, "full"], env=env, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(r.stderr)
            got = json.loads(r.stdout.strip().splitlines()[-1])
            assert got["how"] == "disk", got
            results[k].append(got)
    names = ("import_ms", "registry_ms", "trace_ms", "render_ms", "key_ms", "disk_ms",
             "span_ms")
    print(f"fresh-process medians of {opt.runs} (ms; import: `import thork` after NumPy; "
          "span: registry → trace → render → key → disk-cache read, GPU target stubbed)")
    for k, rs in results.items():
        label = str(trees[k]) if trees[k] else "this environment"
        print(f"  {label}: " + "  ".join(
            f"{n[:-3]} {statistics.median(r[n] for r in rs):.2f}" for n in names))
    if opt.callgrind:
        if not shutil.which("valgrind"):
            print("  callgrind: valgrind is not installed")
            return
        py = os.path.realpath(sys.executable)  # not a shim: valgrind must see the binary
        for k, env in envs.items():
            imp = callgrind([py, str(work / "import_child.py")], env)
            reg_cmd = [py, str(work / "child.py"), str(work), "registry"]
            # Twice: under valgrind LD_LIBRARY_PATH differs, which NVRTC's memoized
            # version depends on (the first run asks NVRTC once); the second is the hit.
            reg = [callgrind(reg_cmd, env) for _ in range(2)][-1]
            label = str(trees[k]) if trees[k] else "this environment"
            print(f"  {label}: instructions, import thork {imp or float('nan'):.1f} M, "
                  f"registry {reg or float('nan'):.2f} M")


if __name__ == "__main__":
    main()
