"""What tests share besides fixtures: the targets to run on, fresh random inputs, poisoned
outputs, and the record of every kernel the suite launched.

Tests import these as ``from helpers import poisoned, random_array`` (``tests/`` is on
``sys.path`` through the root conftest), and the topic modules beside this file as
``from helpers.<noun> import ...``; fixtures stay in the conftest.py of their folder. Test
modules never import each other (``plugins/test_suite_layout.py``).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["LAUNCHED", "TARGETS", "build_shared", "compiles_for_gpu", "has_plugin",
           "importable", "install_dist", "launch_short_of_memory", "poisoned",
           "random_array", "run_python", "run_threads"]


def build_shared(source: Any, out: Any, python: bool = False) -> Any:
    """Shared library ``out`` (a Path) built from C file ``source`` with the system's C
    compiler (``-O1 -Wall -Werror -shared -fPIC``; ``python``: Python's headers on the
    include path, for code that uses the C API). Skips the calling test when there is no
    compiler. Returns ``out``."""
    import shutil
    import subprocess
    import sysconfig

    import pytest

    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler")
    inc = ["-I", sysconfig.get_paths()["include"]] if python else []
    subprocess.run([cc, "-O1", "-Wall", "-Werror", "-shared", "-fPIC", *inc, str(source),
                    "-o", str(out)], check=True, capture_output=True)
    return out


def install_dist(site: Any, dist: str, entry_points: dict[str, str],
                 modules: dict[str, str] | None = None, group: str = "thork") -> None:
    """A distribution in folder ``site`` as pip would leave it: its modules (name → code,
    dedented) and a dist-info with ``entry_points`` in ``group``. Put ``site`` on
    ``sys.path`` (``monkeypatch.syspath_prepend``) for it to be found."""
    import textwrap
    from pathlib import Path

    site = Path(site)
    info = site / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    eps = "\n".join(f"{k} = {v}" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[{group}]\n{eps}\n")
    for mod, code in (modules or {}).items():
        (site / f"{mod}.py").write_text(textwrap.dedent(code))


def importable(module: str) -> bool:
    """True when ``module`` is installed (nox sessions install plugin subsets). A folder of
    tests on ``sys.path`` with the same name is a namespace package, not the module."""
    spec = importlib.util.find_spec(module)
    return spec is not None and spec.origin is not None


def _installed_targets() -> list[str]:
    try:
        from thork_core import plugins
    except ImportError:
        return []
    out = []
    for t in plugins().targets():
        ok, _ = t.available()
        if ok:
            out.append(t.name)
    return out


def has_plugin(name: str) -> bool:
    """True when the thork plugin ``name`` is registered."""
    from thork_core import plugins

    return name in plugins().info


# The targets every numeric test runs on: the GPU and the CPU by default (others, such as
# nvcc's gpu-hostlib, have their own tests); THORK_TEST_TARGETS=a,b overrides.
TARGETS = [t for t in _installed_targets() if t in ("gpu", "cpu")] \
    if os.environ.get("THORK_TEST_TARGETS") is None else [
    t for t in os.environ["THORK_TEST_TARGETS"].split(",") if t]

def poisoned(shape: Any, dtype: Any) -> np.ndarray:
    """An output array full of a value no correct kernel writes (NaN, or the max int)."""
    d = np.dtype(dtype)
    if d.kind == "f" or d.name == "bfloat16":
        return np.full(shape, np.nan, dtype=d)
    if d.kind == "b":
        return np.ones(shape, dtype=d)
    return np.full(shape, np.iinfo(d).max, dtype=d)


def random_array(rng: np.random.Generator, shape: Any, dtype: Any) -> np.ndarray:
    """Random values that fit ``dtype`` (integers over a range, floats normal)."""
    d = np.dtype(dtype)
    if d.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if d.kind in "iu":
        info = np.iinfo(d)
        lo, hi = max(int(info.min), -1000), min(int(info.max), 1000)
        return rng.integers(lo, hi, size=shape, endpoint=True).astype(d)
    return rng.standard_normal(size=shape).astype(d)


def compiles_for_gpu(kernel: Any, archs: tuple[str, ...] = ("sm_75", "sm_90")) -> None:
    """Assert ``kernel`` builds to cubin for each arch with NVRTC (no GPU needed).

    Sessions without the NVRTC plugin (nox's core+trace+cpu) have no CUDA compiler: there
    the check does not apply, and ``compilers/test_cubin_all_launched.py`` covers it where NVRTC is installed.
    """
    if not has_plugin("nvrtc"):
        return
    for arch in archs:
        art = kernel.artifact(arch, compiler="nvrtc")
        assert art.kind == "cubin" and art.data[:4] == b"\x7fELF", (kernel, arch)


#: Every kernel the suite launched (name@id -> Kernel), filled by conftest's session
#: fixture; ``compilers/test_cubin_all_launched.py`` compiles each to cubin at the end.
LAUNCHED: dict[str, Any] = {}


def run_threads(work: Callable[[int], object], n: int, join_seconds: float | None = None) -> None:
    """Run ``work(0)`` ... ``work(n - 1)`` in ``n`` threads started one after another, wait
    for all of them (at most ``join_seconds`` each; None: no limit) and raise the first
    exception any of them raised (AssertionError if one is still running). Threads that
    must start their calls together wait on a ``threading.Barrier`` of their own."""
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            work(i)
        except BaseException as exc:  # noqa: BLE001 - raised in the caller below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(join_seconds)
    stuck = [i for i, t in enumerate(threads) if t.is_alive()]
    assert not stuck, f"threads {stuck} still running after {join_seconds} s"
    if errors:
        raise errors[0]


def run_python(code: str, *args: str, env: dict[str, str] | None = None,
               timeout: float = 120) -> str:
    """Run ``code`` in a fresh interpreter (this one's executable; ``args`` its
    ``sys.argv[1:]``; ``env`` its environment, default this one's); its stdout. A non-zero
    exit fails the test with the tail of the child's stdout and stderr."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                          text=True, timeout=timeout, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.stdout


_SHORT_OF_MEMORY = r"""
import resource, numpy as np, thork as tk
{setup}
{launch}  # compiled, loaded and run once with memory to spare
vm = int([l for l in open("/proc/self/status") if l.startswith("VmSize")][0].split()[1])
resource.setrlimit(resource.RLIMIT_AS, (vm * 1024 + {headroom} * 2**20, resource.RLIM_INFINITY))
try:
    {launch}
    print("no error")
except tk.LaunchError as e:
    print("LaunchError:", e)
"""


def launch_short_of_memory(setup: str, launch: str, headroom_mib: int = 32) -> str:
    """Run ``setup`` (module-level code: imports ``numpy as np`` and ``thork as tk`` are
    there) and the one-line ``launch`` in a fresh interpreter, then ``launch`` again with
    the address space capped at what the process maps plus ``headroom_mib`` MiB (Linux:
    ``/proc`` and ``RLIMIT_AS``); returns its stdout, ``no error`` or ``LaunchError: ...``,
    with stderr appended."""
    import subprocess
    import sys

    script = _SHORT_OF_MEMORY.format(setup=setup, launch=launch, headroom=headroom_mib)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    return proc.stdout + proc.stderr
