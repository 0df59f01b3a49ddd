"""nox sessions: wheels, installs of every extra, plugin combinations, example plugins,
docs, the toolchain matrix and CI's rotation.

    nox -s wheels                         # build every distribution into wheelhouse/
    nox -s "extra(name='nvcc')"           # pip/uv install "thork[nvcc]" from wheelhouse/
                                          # into a fresh venv, run the tests that apply
    nox -s extras                         # every extra, one after the other
    nox -s "tests(plugins='core+trace')"  # the suite with only some plugins installed
    nox -s example_plugins                # examples/plugins/*: install, run their tests
    nox -s uv_add                         # `uv add` of thork from the wheelhouse
    nox -s docs                           # mkdocs build --strict
    nox -s rotation                       # CI's rotating cells (see docs/development.md)
    nox -s fuzz -- 600                    # the differential fuzz test for 600 s (not in CI)
    nox -s mutation                       # mutation testing (noxfile_mutation.py; not in CI)

Sessions that install Thork install it from the wheels in ``wheelhouse/`` (``requires``
builds them first), so they test what a user installs, not the source tree. With ``uv``
on PATH, session environments are made and filled by uv (seconds instead of a minute).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nox

# nox's console script does not put this folder on sys.path.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from noxfile_wheelhouse import DISTS, ROOT, WHEELHOUSE, install  # noqa: E402
from noxfile_wheelhouse import project as _project  # noqa: E402

nox.options.default_venv_backend = "uv|venv"
nox.options.reuse_existing_virtualenvs = False
nox.options.sessions = ["extras", "example_plugins"]

#: the meta-package's extras (new ones appear here by themselves); "base" is plain thork.
EXTRAS = ["base", *_project(ROOT).get("optional-dependencies", {})]
#: Extras too heavy to install on every CI run (torch brings torch, dask its scheduler;
#: the dev install runs the Dask tests anyway): in the rotation only.
HEAVY = {"torch", "dask"}
#: short plugin names of the test combinations below -> distribution.
SHORT = {"core": "thork-core", "trace": "thork-trace", "nvrtc": "thork-backend-nvrtc",
         "cpu": "thork-target-cpu", "nvcc": "thork-backend-nvcc",
         "clang": "thork-backend-clang", "compose": "fkl-compose"}
COMBINATIONS = {
    "core+trace": ["core", "trace"],
    "core+trace+nvrtc": ["core", "trace", "nvrtc"],
    "core+trace+cpu": ["core", "trace", "cpu"],
}
TEST_DEPS = ["pytest>=8", "pytest-xdist>=3.5", "hypothesis>=6", "ml_dtypes>=0.4",
             "opencv-python-headless>=4.8"]
#: Tests every install runs (the CLI, the plugin registry, the seed example), then the
#: tests of what each extra adds. The whole suite runs per extra in the rotation.
SMOKE = ["tests/core/test_cli.py", "tests/plugins/test_plugin_api.py", "tests/lang/test_seed.py"]
EXTRA_TESTS = {
    "base": ["tests/core/test_launch.py"],
    "nvrtc": ["tests/compilers/test_compilers_errors.py"],
    "cpu": ["tests/lang/test_lang_control.py"],
    "nvcc": ["tests/compilers/test_nvcc.py"],
    "clang": ["tests/compilers/test_clang_fallback.py"],
    "compose": ["tests/compose/test_fkl_pipe.py"],  # the examples need every plugin: in "all"
    "torch": ["tests/interop"],
    "dask": ["tests/compose/test_dask_frames.py"],
    "all": ["tests/core/test_examples.py"],
}


@nox.session
def wheels(session: nox.Session) -> None:
    """Build every distribution (packages/* and the meta-package) into wheelhouse/."""
    session.install("hatchling>=1.20", "pip")
    shutil.rmtree(WHEELHOUSE, ignore_errors=True)
    session.run("python", "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                "-w", str(WHEELHOUSE), *[str(p) for p in DISTS.values()], str(ROOT))
    built = sorted(p.name for p in WHEELHOUSE.glob("*.whl"))
    if len(built) != len(DISTS) + 1:
        session.error(f"expected {len(DISTS) + 1} wheels, built {built}")
    session.log("built " + ", ".join(built))


def _expected_plugins(extra: str) -> set[str]:
    """The distributions ``thork[extra]`` must bring (from the pyproject files)."""
    def deps(reqs: list[str]) -> set[str]:
        return {r.split(">")[0].split("<")[0].split("=")[0].split("[")[0].strip()
                for r in reqs}

    meta = _project(ROOT)
    want = deps(meta["dependencies"])
    if extra != "base":
        want |= deps(meta["optional-dependencies"][extra])
    todo = list(want)
    while todo:  # the plugins' own dependencies on each other
        d = todo.pop()
        if d in DISTS:
            for dep in deps(_project(DISTS[d]).get("dependencies", [])):
                if dep in DISTS and dep not in want:
                    want.add(dep)
                    todo.append(dep)
    return want & set(DISTS)


def _check_installed(session: nox.Session, extra: str) -> None:
    """``thork info --json`` in the session lists exactly the plugins the extra brings."""
    out = session.run("thork", "info", "--json", silent=True, stderr=subprocess.DEVNULL)
    info = json.loads(out) if isinstance(out, str) else {}
    got = {p["distribution"] for p in info.get("plugins", [])}
    want = _expected_plugins(extra)
    if got != want:
        session.error(f"thork[{extra}] installed plugins {sorted(got)}, expected {sorted(want)}")
    session.log(f"thork[{extra}]: {', '.join(sorted(got))}; default target "
                f"{info.get('default_target')}, compiler {info.get('default_compiler')}")


def _pytest(session: nox.Session, files: list[str], **env: str) -> None:
    files = [f for f in files if (ROOT / f).exists()]
    # The whole suite on every core (pytest-xdist); a few smoke files are quicker in one.
    workers = ["-n", "auto"] if files == ["tests"] else []
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", *workers, *files,
                *session.posargs, env=env, success_codes=[0, 5])


@nox.session(requires=["wheels"])
@nox.parametrize("name", EXTRAS)
def extra(session: nox.Session, name: str) -> None:
    """Install thork[name] from the wheelhouse into a fresh venv; check, test.

    name='base' is plain ``thork``. The plugins ``thork info --json`` lists must be
    exactly those the extra brings; then the tests that apply run."""
    install(session, *TEST_DEPS, "thork" if name == "base" else f"thork[{name}]")
    _check_installed(session, name)
    _pytest(session, [*SMOKE, *EXTRA_TESTS.get(name, [])])


@nox.session(venv_backend="none")
def extras(session: nox.Session) -> None:
    """Every extra but the heavy ones (torch), one after the other."""
    for name in (n for n in EXTRAS if n not in HEAVY):
        session.notify(f"extra(name={name!r})")


@nox.session(requires=["wheels"])
@nox.parametrize("plugins", list(COMBINATIONS))
def tests(session: nox.Session, plugins: str) -> None:
    """The whole suite with only the given plugins installed (from the wheelhouse).

    Tests needing a missing plugin or target skip, saying why."""
    install(session, *TEST_DEPS, *[SHORT[p] for p in COMBINATIONS[plugins]])
    _pytest(session, ["tests"])


@nox.session(requires=["wheels"])
@nox.parametrize("name", [n for n in EXTRAS if n])
def suite(session: nox.Session, name: str) -> None:
    """The whole suite against thork[name] installed from the wheelhouse.

    CI's rotation runs one of these per commit."""
    install(session, *TEST_DEPS, f"thork[{name}]")
    _pytest(session, ["tests"])


def _example_plugins() -> list[Path]:
    return sorted(p.parent for p in (ROOT / "examples" / "plugins").glob("*/pyproject.toml"))


@nox.session(requires=["wheels"])
def example_plugins(session: nox.Session) -> None:
    """Install the example plugins under examples/plugins/ and run their tests.

    Thork comes from the wheelhouse; each plugin from its folder, as a user installs it."""
    found = _example_plugins()
    if not found:
        session.skip("no example plugins under examples/plugins/")
    install(session, "pytest>=8", "thork[all]", *[str(p) for p in found])
    for p in found:
        tests = p / "tests"
        session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    str(tests if tests.is_dir() else p), *session.posargs)


@nox.session(venv_backend="none", requires=["wheels"])
def uv_add(session: nox.Session) -> None:
    """A user's uv project: uv init, uv add thork[cpu] from the wheelhouse, run an example.

    Skipped without uv."""
    uv = shutil.which("uv")
    if uv is None:
        session.skip("uv is not installed (pip install uv)")
    tmp = Path(session.create_tmp()) / "uv-project"
    shutil.rmtree(tmp, ignore_errors=True)
    env = {"VIRTUAL_ENV": "", "UV_PROJECT_ENVIRONMENT": ""}
    session.run(uv, "init", "-q", "--no-workspace", "--name", "myproject", str(tmp),
                external=True, env=env)
    session.run(uv, "add", "-q", "--directory", str(tmp), "--find-links", str(WHEELHOUSE),
                *[arg for d in [*DISTS, "thork"] for arg in ("--refresh-package", d)],
                "thork[cpu]", external=True, env=env)
    session.run(uv, "run", "--directory", str(tmp), "python",
                str(ROOT / "examples" / "matrix_add.py"), external=True,
                env={**env, "THORK_TARGET": "cpu"})


@nox.session
def docs(session: nox.Session) -> None:
    """The docs site, built strictly (a broken link or reference fails)."""
    session.install("-r", str(ROOT / "requirements-docs.txt"))
    session.install(*[str(p) for p in DISTS.values()])
    session.run("python", "-m", "mkdocs", "build", "--strict", "-q",
                "--site-dir", session.create_tmp() + "/site")


@nox.session(venv_backend="none")
def fuzz(session: nox.Session) -> None:
    """The differential fuzz test with a long budget, in the current (dev) environment:
    ``nox -s fuzz`` (600 s), ``nox -s fuzz -- 3600`` (seconds); ``THORK_FUZZ_SEED`` picks
    the seed. CI runs the same test with 3 s; this session is not in CI's run."""
    seconds = session.posargs[0] if session.posargs else "600"
    session.run("python", "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                "tests/lang/test_lang_fuzz.py", env={"THORK_FUZZ_SECONDS": seconds})


@nox.session(venv_backend="none")
def mutation(session: nox.Session) -> None:
    """Mutation testing of the numeric and checking modules (noxfile_mutation.py), in the
    current (dev) environment (``coverage`` installed: each mutant runs only the tests that
    executed its line); about 3 s a mutant on 2 shared cores, a few hours for every one.
    By default every mutant in a seeded stratified order (``--per-module 10000 --seed
    2026``): stop it any time, results accumulate in ``.mutation/results.jsonl`` and ``--
    report`` prints the score of what ran and the estimate over all mutants. Not in CI."""
    args = session.posargs or ["--per-module", "10000", "--seed", "2026"]
    command = [] if args[0] in ("run", "list", "report") else ["run"]
    session.run("nice", "-n", "10", "python", str(ROOT / "noxfile_mutation.py"), *command,
                *args, external=True)


@nox.session
def bench(session: nox.Session) -> None:
    """The core benchmarks (GPU numbers need a GPU; CPU-only numbers otherwise)."""
    session.install(*[str(p) for p in DISTS.values()])
    session.run("python", "bench/bench_core.py", *session.posargs)


# The compiler-toolchain matrix lives beside this file.
from noxfile_toolchains import *  # noqa: E402,F401,F403
from noxfile_toolchains import CLANG_VERSIONS  # noqa: E402

#: What CI's every run leaves out, run one of each list per commit (see ``rotation``).
ROTATION = {
    "toolchain": ["toolchain_nvrtc(cuda='12')", "toolchain_nvcc(source='system')",
                  *[f"toolchain_clang(version={v!r})" for v in CLANG_VERSIONS if v != "16"]],
    # The whole suite under one plugin set: subsets of plugins, then each extra.
    "suite": [*[f"tests(plugins={c!r})" for c in COMBINATIONS],
              # the heavy extras (torch) too: one run in len(list) pays for their install
              *[f"suite(name={n!r})" for n in EXTRAS if n != "base"]],
}


def rotation_cells(n: int) -> list[str]:
    """The cells CI runs for run number ``n``: the (n mod length)-th of each list, so
    consecutive runs walk every list and each cell runs at least once in any
    max(len(list)) consecutive runs."""
    return [cells[n % len(cells)] for cells in ROTATION.values()]


def _rotation_number() -> int:
    """``THORK_CI_ROTATION``, else the number of commits on the tested branch (one more
    per merged change), else the day number."""
    env = os.environ.get("THORK_CI_ROTATION")
    if env:
        return int(env)
    try:
        out = subprocess.run(["git", "rev-list", "--count", "HEAD"], cwd=ROOT,
                             capture_output=True, text=True, timeout=30)
        if out.returncode == 0 and out.stdout.strip().isdigit():
            return int(out.stdout.strip())
    except OSError:
        pass
    import datetime

    return datetime.date.today().toordinal()


@nox.session(venv_backend="none")
def rotation(session: nox.Session) -> None:
    """CI's rotating cells for this run: one toolchain cell beyond toolchains_ci and the
    whole suite under one plugin set (docs/development.md lists the cells)."""
    n = _rotation_number()
    cells = rotation_cells(n)
    session.log(f"rotation run {n}: {', '.join(cells)} (THORK_CI_ROTATION=N picks run N)")
    for cell in cells:
        clang = cell.startswith("toolchain_clang")
        version = cell.split("'")[1] if clang else ""
        if clang and shutil.which(f"clang++-{version}") is None and shutil.which("apt-get") \
                and os.environ.get("CI"):
            session.run("apt-get", "install", "-y", "-qq", f"clang-{version}", external=True,
                        success_codes=[0, 100], silent=True)
        session.notify(cell)
