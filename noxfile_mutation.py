"""A small mutation tester for Thork's numeric and checking code (``nox -s mutation``).

Why not mutmut: mutmut mutates one source tree and runs one test command; Thork is a
monorepo of plugin packages whose tests are spread over ``tests/<area>/``, and most
mutants only need the few test files that exercise their module. This runner parses each
target module with :mod:`ast`, enumerates *mutants* (one small change each: an arithmetic,
comparison, boolean or bitwise operator swapped, an integer constant moved by one, a
``not`` dropped, a comparison operand made constant), and for each mutant:

1. copies the packages' ``src`` folders into a scratch folder once, writes the mutated
   module there (only the mutated tokens rewritten, so every line keeps its number),
   and runs ``pytest -x`` with the scratch ``src`` folders first on ``PYTHONPATH`` (the
   worktree itself is never modified, so other work keeps running against unmutated
   code) — not over the module's whole test selection but over the
   tests that *executed the mutated line*, fastest first (below);
2. counts the mutant *killed* when a test fails (or the run exceeds its timeout) and
   *survived* when every selected test passes. A survivor of its per-line tests is run
   again on the module's whole selection (``--no-confirm`` skips that): the coverage map
   misses tests that reach a line only in a child process, or only through a kernel an
   earlier test traced (thork's ``@tk.jit`` kernels keep their rendered source per
   signature; fkl's process-wide kernel table is cleared before each test of the coverage
   run, so each fkl test traces its own).

Per-line selection: before the first mutant, the union of the modules' selections runs
once, unmutated, under ``coverage`` with one context per test (this file is the pytest
plugin that names them), and ``.mutation/coverage.json`` keeps, for every line of every
target module, the tests that executed it and each test's duration; it is rebuilt when a
target module, a selected test file, ``tests/conftest.py``/``tests/helpers`` or this file
changes.
A mutant's lines are its innermost statement (only the header of a compound one), since
a constant on a later line of a folded tuple fires no line event of its own. A mutant
whose lines ran only outside any test (at import) runs the whole selection; one whose
lines no test executed is recorded *survived* without a run ("no test of the selection
executes line N": by definition no test can kill it). ``--no-coverage`` runs every mutant
on the whole selection, as before.

Kernel cache: the mutants share one cache folder (``.mutation/cache``, kept between runs).
The disk cache's key is a hash of the generated source and the compiler, so a mutant that
changes generated code compiles its own kernels and one that does not loads what that
same source compiled before (byte for byte what it would compile). Generated source
carries ``#line`` directives naming the traced Python file and line (fkl's modules are
traced), so two things keep it unchanged: the mutated module is the original text with
only the mutated tokens rewritten (:func:`mutated_source`; ``ast.unparse`` moved every
line, so every fkl kernel recompiled for every fkl mutant), and the scratch copy lives at
one fixed path per results file (``.mutation/src-results``; a fresh temporary folder per
run changed every kernel's source in every run).

Mutants listed in ``mutation_equivalent.txt`` (``<mutant id>  # reason``) are equivalent
to the original (no input can tell them apart) and are left out of the score.

    python noxfile_mutation.py list [--module M]            # the mutants and their ids
    python noxfile_mutation.py run [--module M] [--sample N | --per-module N] [--seed S]
                                   [--results FILE] [--only-survivors] [--ids FILE]
                                   [--reverse] [--limit N] [--no-coverage] [--no-confirm]
    python noxfile_mutation.py report [--results FILE]

``run`` appends one JSON line per mutant to ``--results`` (default
``.mutation/results.jsonl``) and skips mutants already there, so a long run can be done in
chunks; ``--only-survivors`` re-runs the survivors of a previous run (after new tests),
``--ids`` the mutants listed in a file. ``--per-module N`` is a stratified sample (N of
each module, interleaved: stopped early, it is still one); a second process may run the
same selection from its end (``--reverse --results .mutation/results-rev.jsonl``): files
``<stem>-*.jsonl`` next to the results file are read with it. Each record has the
mutant's ``status``, its ``seconds``, ``tests`` (how many ran: a number, or ``all``) and,
for a confirmed survivor or a per-line run that failed to start, ``confirmed`` (the seconds
of the run on the whole selection). ``report`` prints the counts per module, the score of
the mutants run, and the score over *all* mutants estimated from the stratified sample
with a 95 % interval (:func:`estimate`)."""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent
EQUIVALENT = ROOT / "mutation_equivalent.txt"
RESULTS = ROOT / ".mutation" / "results.jsonl"

#: module (relative to the repo root) -> the tests that exercise it (run with -x).
TARGETS: dict[str, list[str]] = {
    "packages/thork-core/src/thork_core/_dtype.py": [
        "tests/core/test_dtypes.py", "tests/core/test_launch_checks.py",
        "tests/lang/test_mutation_survivors.py", "tests/lang/test_lang_fuzz.py"],
    "packages/thork-core/src/thork_core/_binding.py": [
        "tests/core/test_launch_checks.py", "tests/core/test_launch.py",
        "tests/lang/test_mutation_survivors.py"],
    "packages/thork-core/src/thork_core/_renderer.py": [
        "tests/lang/test_mutation_survivors.py", "tests/core/test_defined_arithmetic.py",
        "tests/lang/test_lang_fuzz.py", "tests/lang/test_lang_math.py",
        "tests/lang/test_lang_print_atomics.py", "tests/lang/test_lang_classic.py",
        "tests/lang/test_lang_mma.py", "tests/core/test_shift_counts.py",
        "tests/lang/test_debug_mode.py", "tests/lang/test_lang_globals.py",
        "tests/lang/test_lang_wgmma.py", "tests/lang/test_lang_control.py",
        "tests/lang/test_lang_cond.py", "tests/lang/test_lang_signed.py",
        "tests/lang/test_lang_views.py", "tests/lang/test_lang_shaped.py",
        "tests/lang/test_lang_vectors.py", "tests/lang/test_lang_memory.py",
        "tests/lang/test_lang_random.py"],
    "packages/target-cpu/src/thork_cpu/_renderer.py": [
        "tests/lang/test_mutation_survivors.py", "tests/core/test_defined_arithmetic.py",
        "tests/lang/test_lang_fuzz.py", "tests/lang/test_lang_classic.py",
        "tests/lang/test_lang_print_atomics.py", "tests/lang/test_lang_memory.py",
        "tests/lang/test_lang_mma.py", "tests/core/test_shift_counts.py",
        "tests/lang/test_debug_mode.py", "tests/lang/test_lang_vectors.py",
        "tests/lang/test_lang_globals.py", "tests/lang/test_lang_wgmma.py",
        "tests/lang/test_lang_grid_sync.py", "tests/lang/test_lang_control.py",
        "tests/lang/test_lang_cond.py", "tests/lang/test_lang_signed.py",
        "tests/lang/test_lang_views.py", "tests/lang/test_lang_shaped.py",
        "tests/core/test_cpu_sanitize.py", "tests/lang/test_lang_math.py",
        "tests/lang/test_lang_random.py"],
    "packages/fkl-compose/src/fkl/_geometry.py": [
        "tests/compose/test_fkl_survivors.py", "tests/compose/test_fkl_geometry.py",
        "tests/compose/test_fkl_batch.py", "tests/compose/test_fkl_resize_opencv.py",
        "tests/compose/test_fkl_checks.py"],
    # border_index moved here from _geometry (session 13): the same tests reach it
    "packages/fkl-compose/src/fkl/_resampling.py": [
        "tests/compose/test_fkl_survivors.py", "tests/compose/test_fkl_geometry.py",
        "tests/compose/test_fkl_batch.py", "tests/compose/test_fkl_resize_opencv.py",
        "tests/compose/test_fkl_checks.py"],
    "packages/fkl-compose/src/fkl/_ops.py": [
        "tests/compose/test_fkl_survivors.py", "tests/compose/test_fkl_compute.py",
        "tests/compose/test_fkl_checks.py", "tests/compose/test_fkl_pipe.py",
        "tests/compose/test_fkl_ops_extra.py", "tests/compose/test_fkl_tuple.py",
        "tests/compose/test_fkl_folding.py"],
    "packages/fkl-compose/src/fkl/_color.py": [
        "tests/compose/test_fkl_survivors.py", "tests/compose/test_fkl_compute.py",
        "tests/compose/test_fkl_vector_path.py"],
}

_BINOP_SWAPS: dict[type, list[type]] = {
    ast.Add: [ast.Sub], ast.Sub: [ast.Add], ast.Mult: [ast.Div, ast.Add],
    ast.Div: [ast.Mult, ast.FloorDiv], ast.FloorDiv: [ast.Div, ast.Mult], ast.Mod: [ast.FloorDiv],
    ast.LShift: [ast.RShift], ast.RShift: [ast.LShift], ast.BitAnd: [ast.BitOr],
    ast.BitOr: [ast.BitAnd], ast.BitXor: [ast.BitOr], ast.Pow: [ast.Mult],
}
_CMP_SWAPS: dict[type, list[type]] = {
    ast.Lt: [ast.LtE, ast.GtE], ast.LtE: [ast.Lt, ast.Gt], ast.Gt: [ast.GtE, ast.LtE],
    ast.GtE: [ast.Gt, ast.Lt], ast.Eq: [ast.NotEq], ast.NotEq: [ast.Eq],
    ast.Is: [ast.IsNot], ast.IsNot: [ast.Is], ast.In: [ast.NotIn], ast.NotIn: [ast.In],
}


@dataclass(frozen=True)
class Mutant:
    """One change to one module: ``id`` is ``path:line:col:what`` (stable across runs
    while the line is unchanged)."""

    path: str
    line: int
    col: int
    what: str
    index: int  # which node of the walk (the walk order is deterministic)

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}:{self.col}:{self.what}"


def _docstring_nodes(tree: ast.AST) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _annotation_nodes(tree: ast.AST) -> set[int]:
    """Nodes inside type annotations (mutating them changes nothing at run time)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        anns: list[ast.AST | None] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            anns.append(node.returns)
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
                if arg is not None:
                    anns.append(arg.annotation)
        elif isinstance(node, ast.AnnAssign):
            anns.append(node.annotation)
        for ann in anns:
            if ann is not None:
                out.update(id(n) for n in ast.walk(ann))
    return out


def _candidates(tree: ast.AST) -> Iterator[tuple[ast.AST, str, object]]:
    """(node, description, replacement spec) for every mutant of ``tree``, in walk order."""
    skip = _docstring_nodes(tree) | _annotation_nodes(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in _BINOP_SWAPS:
            for new in _BINOP_SWAPS[type(node.op)]:
                yield node, f"{type(node.op).__name__}->{new.__name__}", new
        elif isinstance(node, ast.Compare):
            for k, op in enumerate(node.ops):
                for new in _CMP_SWAPS.get(type(op), []):
                    yield node, f"{type(op).__name__}->{new.__name__}@{k}", (k, new)
        elif isinstance(node, ast.BoolOp):
            new = ast.Or if isinstance(node.op, ast.And) else ast.And
            yield node, f"{type(node.op).__name__}->{new.__name__}", new
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub, ast.Invert)):
            yield node, f"drop-{type(node.op).__name__}", None
        elif (isinstance(node, ast.Constant) and type(node.value) is int):
            yield node, f"const{node.value}->{node.value + 1}", node.value + 1
            if node.value != 0:
                yield node, f"const{node.value}->{node.value - 1}", node.value - 1
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            yield node, f"const{node.value}->{not node.value}", not node.value


_SOURCES: dict[str, str] = {}


def _source(path: str) -> str:
    """The module as it was when this run first read it (edits made while a long run
    goes on do not shift its mutants)."""
    if path not in _SOURCES:
        _SOURCES[path] = (ROOT / path).read_text()
    return _SOURCES[path]


def mutants_of(path: str) -> list[Mutant]:
    tree = ast.parse(_source(path))
    out, seen = [], set()
    for index, (node, what, _) in enumerate(_candidates(tree)):
        m = Mutant(path, node.lineno, node.col_offset, what, index)  # type: ignore[attr-defined]
        # Nested operators can start at one column ("a + b + c"): the later ones get "#k".
        k = 1
        while m.id in seen:
            k += 1
            m = Mutant(path, m.line, m.col, f"{what.split('#')[0]}#{k}", index)
        seen.add(m.id)
        out.append(m)
    return out


def _mutate_tree(tree: ast.AST, m: Mutant) -> tuple[ast.AST, object]:
    """Apply ``m`` to ``tree`` in place; returns the mutated node and the spec."""
    for index, (node, what, spec) in enumerate(_candidates(tree)):
        if index != m.index:
            continue
        assert what == m.what.split("#")[0], (what, m)
        if isinstance(node, (ast.BinOp, ast.AugAssign)):
            node.op = spec()  # type: ignore[operator,misc]
        elif isinstance(node, ast.Compare):
            k, new = spec  # type: ignore[misc]
            node.ops[k] = new()
        elif isinstance(node, ast.BoolOp):
            node.op = spec()  # type: ignore[operator,misc]
        elif isinstance(node, ast.UnaryOp):
            # Replace the unary node by its operand: rewrite through the parent.
            for parent in ast.walk(tree):
                for field, value in ast.iter_fields(parent):
                    if value is node:
                        setattr(parent, field, node.operand)
                    elif isinstance(value, list):
                        for j, item in enumerate(value):
                            if item is node:
                                value[j] = node.operand
        elif isinstance(node, ast.Constant):
            node.value = spec
        return node, spec
    raise LookupError(m)


_OP_TEXT: dict[type, str] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
    ast.Mod: "%", ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|",
    ast.BitXor: "^", ast.Pow: "**", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
    ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is", ast.IsNot: "is not", ast.In: "in",
    ast.NotIn: "not in", ast.And: "and", ast.Or: "or",
}


def _spliced(source: str, node: ast.AST, m: Mutant, wrap: bool = False) -> str:
    """``source`` with only the mutated tokens rewritten in place: every other line and
    column stays where it was. Kernels traced through the module carry ``#line`` directives
    naming its lines, which are part of their generated source and so of their disk-cache
    key: a reformatted module (``ast.unparse``) would recompile every kernel for every
    mutant, a spliced one only those whose code the mutant changes."""
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def at(lineno: int, col: int) -> int:  # ast columns count UTF-8 bytes
        return starts[lineno - 1] + len(lines[lineno - 1].encode()[:col].decode())

    def gap(a: ast.AST, b: ast.AST) -> tuple[int, int]:
        return (at(a.end_lineno, a.end_col_offset),  # type: ignore[attr-defined]
                at(b.lineno, b.col_offset))  # type: ignore[attr-defined]

    def core(lo: int, hi: int) -> tuple[int, int]:
        """The operator's span in source[lo:hi]: what is left of the gap between two
        operands without comments, blanks, line continuations and parentheses."""
        text = source[lo:hi]
        keep = []
        in_comment = False
        for k, ch in enumerate(text):
            if ch == "#":
                in_comment = True
            elif ch == "\n":
                in_comment = False
            if not in_comment and ch not in " \t\n\\()":
                keep.append(k)
        if not keep:
            raise ValueError("no operator text")
        return lo + keep[0], lo + keep[-1] + 1

    edits: list[tuple[int, int, str]] = []
    if isinstance(node, ast.BinOp):
        edits.append((*core(*gap(node.left, node.right)), _OP_TEXT[type(node.op)]))
    elif isinstance(node, ast.AugAssign):
        edits.append((*core(*gap(node.target, node.value)), _OP_TEXT[type(node.op)] + "="))
    elif isinstance(node, ast.Compare):
        k = int(m.what.split("@")[1].split("#")[0])
        left = node.left if k == 0 else node.comparators[k - 1]
        edits.append((*core(*gap(left, node.comparators[k])), _OP_TEXT[type(node.ops[k])]))
    elif isinstance(node, ast.BoolOp):
        for a, b in zip(node.values, node.values[1:]):
            edits.append((*core(*gap(a, b)), _OP_TEXT[type(node.op)]))
    elif isinstance(node, ast.UnaryOp):
        lo = at(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        hi = at(node.operand.lineno, node.operand.col_offset)  # type: ignore[attr-defined]
        lo, end = core(lo, hi)
        edits.append((lo, end, " " * (end - lo)))
    elif isinstance(node, ast.Constant):
        edits.append((at(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                      at(node.end_lineno, node.end_col_offset),  # type: ignore[attr-defined]
                      repr(node.value)))
    if wrap:  # the new operator binds differently ("a * b + c" -> "(a + b) + c")
        edits.append((at(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                      at(node.lineno, node.col_offset), "("))  # type: ignore[attr-defined]
        end = at(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        edits.append((end, end, ")"))
    out = source
    for lo, hi, text in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        out = out[:lo] + text + out[hi:]
    return out


def mutated_source(m: Mutant) -> str:
    """The module with mutant ``m`` applied: the original text with the mutated tokens
    rewritten in place (:func:`_spliced`), checked to parse to exactly the mutated tree;
    where it does not (a position Python reports oddly, as inside some f-strings), the
    mutated tree unparsed (lines move: its kernels recompile)."""
    source = _source(m.path)
    tree = ast.parse(source)
    node, _ = _mutate_tree(tree, m)
    want = ast.dump(tree)
    for wrap in (False, True):
        try:
            spliced = _spliced(source, node, m, wrap)
            if ast.dump(ast.parse(spliced)) == want:
                return spliced
        except (ValueError, SyntaxError, IndexError, KeyError):
            pass
    return ast.unparse(tree)


def equivalent_ids() -> dict[str, str]:
    out: dict[str, str] = {}
    if EQUIVALENT.exists():
        for raw in EQUIVALENT.read_text().splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            # A comment starts at " #": ids may end in "#k" (the k-th operator at a column).
            ident, _, reason = line.partition(" #")
            out[ident.strip()] = reason.strip()
    return out


def _scratch(results: Path | None = None) -> Path:
    """A copy of every package's ``src`` folder, made afresh at the start of each run in
    one fixed folder per results file (``.mutation/src-results``): kernels carry ``#line``
    directives naming the module's path, so a path that changed from run to run would
    change every kernel's source, and its cache key, in every run."""
    if results is None:
        base = Path(tempfile.mkdtemp(prefix="thork-mutation-"))
    else:
        base = results.parent / f"src-{results.stem}"
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
    for src in sorted((ROOT / "packages").glob("*/src")):
        shutil.copytree(src, base / src.parent.name / "src",
                        ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    return base


_TREES: dict[str, tuple[list[ast.AST], dict[int, ast.AST]]] = {}


def mutant_lines(m: Mutant) -> list[int]:
    """The source lines whose execution shows that the mutated node ran: the innermost
    statement around it (for a compound statement only its header: ``if``/``while`` test,
    ``for`` iterable, ``def`` line with decorators and defaults, an ``except`` clause's
    type). Not the node's own line alone: Python folds constant tuples into one load
    attributed to the tuple's first line, so a constant on a later line of a multi-line
    literal never fires a line event of its own."""
    if m.path not in _TREES:
        tree = ast.parse(_source(m.path))
        parents = {id(child): node for node in ast.walk(tree)
                   for child in ast.iter_child_nodes(node)}
        _TREES[m.path] = ([node for node, _, _ in _candidates(tree)], parents)
    nodes, parents = _TREES[m.path]
    node: ast.AST = nodes[m.index]
    while not isinstance(node, (ast.stmt, ast.excepthandler, ast.match_case)):
        node = parents[id(node)]
    first = min([node.lineno if not isinstance(node, ast.match_case)  # type: ignore[attr-defined]
                 else node.pattern.lineno]
                + [d.lineno for d in getattr(node, "decorator_list", [])])
    body = getattr(node, "body", None)
    if isinstance(body, list) and body:  # compound: the header only
        last = max(first, body[0].lineno - 1)
    else:
        last = getattr(node, "end_lineno", None) or first
    return list(range(first, last + 1))


class CoverageMap:
    """Which tests execute which lines of the target modules: one run of every module's
    test selection under ``coverage`` with one context per test (:func:`build_coverage`),
    stored in ``.mutation/coverage.json`` with a fingerprint of the modules, the tests and
    their helpers (a changed file rebuilds it). A mutant then runs only the tests that
    executed its lines (:meth:`tests_for`)."""

    def __init__(self, data: dict[str, object]) -> None:
        self.tests: list[str] = data["tests"]  # type: ignore[assignment]
        self.seconds: list[float] = data["seconds"]  # type: ignore[assignment]
        self.lines: dict[str, dict[str, list[int]]] = data["lines"]  # type: ignore[assignment]

    def tests_for(self, m: Mutant) -> list[str] | None:
        """The node ids of the module's selection that executed the mutant's lines,
        fastest first; None (the whole selection) for a line run only outside any test
        (at import, in a session fixture's teardown); ``[]`` when nothing executed it."""
        by_line = self.lines.get(m.path, {})
        hit: set[int] = set()
        outside = False
        for line in mutant_lines(m):
            for k in by_line.get(str(line), []):
                if k < 0:
                    outside = True
                else:
                    hit.add(k)
        files = set(TARGETS[m.path])
        ids = [k for k in hit if self.tests[k].split("::")[0] in files]
        if not ids:
            return None if (outside or hit) else []
        return [self.tests[k] for k in sorted(ids, key=lambda k: (self.seconds[k], k))]


def _fingerprint(modules: list[str]) -> str:
    h = hashlib.sha256()
    files = sorted({t for mod in modules for t in TARGETS[mod]})
    helpers = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "tests").glob("conftest.py"))
               + sorted((ROOT / "tests" / "helpers").glob("*.py"))]
    for mod in modules:
        h.update(f"{mod}\0{_source(mod)}\0".encode())
    for name in files + helpers + ["noxfile_mutation.py"]:  # this file is the plugin
        path = ROOT / name
        h.update(name.encode() + b"\0" + (path.read_bytes() if path.exists() else b"") + b"\0")
    return h.hexdigest()


def build_coverage(modules: list[str], scratch: Path, out: Path) -> CoverageMap:
    """Run the union of ``modules``' selections once, unmutated, under ``coverage`` with
    this file as a pytest plugin that names each test's context (its node id), and store
    the line -> tests map in ``out``. Reused while the fingerprint matches."""
    fp = _fingerprint(modules)
    if out.exists():
        data = json.loads(out.read_text())
        if data.get("fingerprint") == fp and set(modules) <= set(data["lines"]):
            return CoverageMap(data)
    import importlib.util

    if importlib.util.find_spec("coverage") is None:
        raise SystemExit("the per-line test selection needs coverage (pip install coverage, "
                         "requirements-dev.txt); --no-coverage runs whole selections")
    tests = sorted({t for mod in modules for t in TARGETS[mod] if (ROOT / t).exists()})
    files = {str(scratch / Path(mod).relative_to("packages")): mod for mod in modules}
    out.parent.mkdir(parents=True, exist_ok=True)
    raw = out.with_suffix(".sqlite")
    timing = out.with_suffix(".times")
    for f in (raw, timing):
        f.unlink(missing_ok=True)
    env = _env(scratch)
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(ROOT)])
    env["THORK_MUTATION_TIMES"] = str(timing)
    print(f"coverage run of {len(tests)} test files (once per change of modules or tests)",
          flush=True)
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "coverage", "run", f"--data-file={raw}",
         f"--include={','.join(files)}", "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-p", "no:randomly", "-p", "no:xdist", "-p", "noxfile_mutation", *tests],
        cwd=ROOT, env=env, capture_output=True, text=True)
    tail = proc.stdout.strip().splitlines()[-1:] if proc.stdout else [proc.stderr[-2000:]]
    print(f"coverage run: {round(time.monotonic() - start)} s, {tail}", flush=True)
    if proc.returncode != 0:
        raise RuntimeError(f"the unmutated tests fail (rc {proc.returncode}): "
                           f"{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
    import coverage

    cov = coverage.CoverageData(basename=str(raw))
    cov.read()
    seconds = json.loads(timing.read_text())
    names = sorted(seconds)
    index = {name: k for k, name in enumerate(names)}
    lines: dict[str, dict[str, list[int]]] = {mod: {} for mod in modules}
    for measured in cov.measured_files():
        mod = files.get(measured)
        if mod is None:
            continue
        for line, contexts in cov.contexts_by_lineno(measured).items():
            lines[mod][str(line)] = sorted({index.get(c, -1) for c in contexts})
    data = {"fingerprint": fp, "tests": names, "seconds": [seconds[n] for n in names],
            "lines": lines}
    out.write_text(json.dumps(data))
    raw.unlink(missing_ok=True)
    timing.unlink(missing_ok=True)
    return CoverageMap(data)


# As a pytest plugin (``-p noxfile_mutation``, only in build_coverage's run): each test
# runs in its own coverage context, its node id, and its duration is recorded.
_TIMES: dict[str, float] = {}
_STARTED: list[float] = []


def pytest_runtest_logstart(nodeid: str, location: object) -> None:
    import coverage

    fkl_kernels = sys.modules.get("fkl._kernels")
    if fkl_kernels is not None:  # each test traces its own fkl kernels (not a cached one)
        fkl_kernels.reset_stats(clear_cache=True)

    current = coverage.Coverage.current()
    if current is not None:
        current.switch_context(nodeid)
    _STARTED[:] = [time.perf_counter()]


def pytest_runtest_logfinish(nodeid: str, location: object) -> None:
    import coverage

    _TIMES[nodeid] = round(time.perf_counter() - _STARTED[0], 4)
    current = coverage.Coverage.current()
    if current is not None:
        current.switch_context("")


def pytest_unconfigure(config: object) -> None:
    out = os.environ.get("THORK_MUTATION_TIMES")
    if out:
        Path(out).write_text(json.dumps(_TIMES))


_PYTEST = ["-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
           "-p", "no:xdist"]


def _env(scratch: Path) -> dict[str, str]:
    """The environment of a mutant's (and the coverage run's) pytest: the scratch ``src``
    folders first on ``PYTHONPATH`` and the run's shared kernel cache."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(p) for p in sorted(scratch.glob("*/src"))] + [str(ROOT / "tests")])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["THORK_MUTATION"] = "1"  # tests may shorten their budgets
    # One warm cache for every mutant and run: the disk cache's key is a hash of the
    # generated source (and the compiler), so a mutant that changes generated code
    # compiles its own kernels, and one that does not reuses the artifact the same source
    # gave before (byte for byte what it would compile).
    env["THORK_CACHE_DIR"] = str(RESULTS.parent / "cache")
    return env


def _pytest(tests: list[str], scratch: Path, timeout: float) -> tuple[str, list[str]]:
    """(status, last output line) of ``pytest -x`` over ``tests`` against the scratch."""
    try:
        proc = subprocess.run([sys.executable, *_PYTEST, *tests], cwd=ROOT, env=_env(scratch),
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        # Not a verdict: on a loaded machine a surviving run can be merely slow.
        return "timeout", ["timeout"]
    status = "survived" if proc.returncode == 0 else "killed"
    if proc.returncode in (4, 5):  # usage error / nothing collected: not a verdict
        status = "error"
    tail = proc.stdout.strip().splitlines()[-1:] if proc.stdout else []
    if status == "killed":  # which test killed it
        tail = [ln for ln in proc.stdout.splitlines() if ln.startswith("FAILED ")][:1] + tail
    return status, tail


def run_one(m: Mutant, scratch: Path, timeout: float, cov: CoverageMap | None = None,
            confirm: bool = True) -> dict[str, object]:
    """Run one mutant. With ``cov`` only the tests that executed its lines run (cheapest
    first); a mutant no test executes is recorded ``survived`` without a run; with
    ``confirm`` one that survives its tests is run again on the module's whole selection
    (as is, always, one whose per-line run could not start)."""
    rel = Path(m.path).relative_to("packages")
    target = scratch / rel
    original = _source(m.path)
    selection = [t for t in TARGETS[m.path] if (ROOT / t).exists()]
    tests: list[str] | None = cov.tests_for(m) if cov is not None else None
    start = time.monotonic()
    rec: dict[str, object] = {"id": m.id}
    if tests == []:
        lines = mutant_lines(m)
        rec.update(status="survived", seconds=0.0, tests=0,
                   tail=[f"no test of the selection executes line {min(lines)}-{max(lines)}"
                         if len(lines) > 1 else
                         f"no test of the selection executes line {lines[0]}"])
        return rec
    target.write_text(mutated_source(m))
    try:
        status, tail = _pytest(tests if tests is not None else selection, scratch, timeout)
        rec["tests"] = len(tests) if tests is not None else "all"
        if tests is not None and (status == "error" or (status == "survived" and confirm)):
            again = time.monotonic()
            status, tail = _pytest(selection, scratch, timeout)
            rec["confirmed"] = round(time.monotonic() - again, 1)  # seconds of the rerun
    finally:
        target.write_text(original)
    rec.update(status=status, seconds=round(time.monotonic() - start, 1), tail=tail)
    return {k: rec[k] for k in ("id", "status", "seconds", "tail", "tests", "confirmed")
            if k in rec}


def _load(results: Path) -> dict[str, dict[str, object]]:
    """The records of ``results`` and of its siblings ``<stem>-*.jsonl`` (other processes
    of the same run); a later record of a mutant wins."""
    out: dict[str, dict[str, object]] = {}
    for path in [results, *sorted(results.parent.glob(f"{results.stem}-*.jsonl"))]:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                out[rec["id"]] = rec
    return out


def select(modules: list[str], sample: int | None, seed: int,
           per_module: int | None = None) -> list[Mutant]:
    """The mutants to run: all of ``modules``, a seeded random ``sample`` of them, or
    (``per_module``) a seeded random sample of that many from *each* module (all of a
    smaller module), interleaved module by module so that a run stopped early is still a
    stratified sample."""
    if per_module is not None:
        rng = random.Random(seed)
        strata = []
        for path in modules:
            every = mutants_of(path)
            strata.append(rng.sample(every, min(per_module, len(every))))
        return [s[k] for k in range(max(map(len, strata), default=0))
                for s in strata if k < len(s)]
    pool = [m for path in modules for m in mutants_of(path)]
    if sample is not None and sample < len(pool):
        pool = random.Random(seed).sample(pool, sample)
    return pool


def estimate(per: dict[str, dict[str, int]]) -> dict[str, object]:
    """The mutation score over *every* mutant of the modules, estimated from a stratified
    sample: each module's kill rate (killed / (killed + survived) among its sampled,
    non-equivalent mutants) weighted by its number of mutants, with a 95 % normal interval
    whose variance adds each stratum's (with the finite-population correction, so a module
    run in full contributes no sampling error). A stratum's variance uses the
    Agresti-Coull rate (killed + 2) / (n + 4) over n + 4, so that a small sample with no
    survivor does not claim certainty. Weights count every mutant of a module, equivalent
    ones included (their share is not known for unsampled mutants)."""
    total = 0
    rate = 0.0
    var = 0.0
    for path, row in per.items():
        big_n = len(mutants_of(path))
        n = row["killed"] + row["survived"]
        if n == 0:
            continue
        p = row["killed"] / n
        total += big_n
        rate += big_n * p
        fpc = max(0.0, (big_n - n) / (big_n - 1)) if big_n > 1 else 0.0
        q = (row["killed"] + 2) / (n + 4)
        var += big_n ** 2 * fpc * q * (1 - q) / (n + 4)
    if not total:
        return {}
    est = rate / total
    half = 1.96 * (var ** 0.5) / total
    return {"estimate": round(100 * est, 1), "ci95": [round(100 * max(0.0, est - half), 1),
                                                      round(100 * min(1.0, est + half), 1)],
            "population": total}


def report(results: Path, modules: list[str] | None = None) -> dict[str, object]:
    recs = _load(results)
    eq = equivalent_ids()
    per: dict[str, dict[str, int]] = {}
    for ident, rec in recs.items():
        path = ident.split(":")[0]
        if modules and path not in modules:
            continue
        row = per.setdefault(path, {"killed": 0, "survived": 0, "equivalent": 0, "error": 0,
                                    "timeout": 0})
        key = "equivalent" if ident in eq else str(rec["status"])
        if rec.get("tail") == ["timeout"]:
            key = "timeout"
        row[key] += 1
    killed = sum(r["killed"] for r in per.values())
    survived = sum(r["survived"] for r in per.values())
    scored = killed + survived
    for path, row in per.items():
        row["mutants"] = len(mutants_of(path))
        row["ran"] = row["killed"] + row["survived"] + row["equivalent"] + row["timeout"] + row[
            "error"]
    return {"modules": per, "killed": killed, "survived": survived,
            "stratified": estimate(per),
            "equivalent": sum(r["equivalent"] for r in per.values()),
            "timeout": sum(r["timeout"] for r in per.values()),
            "score": round(100.0 * killed / scored, 1) if scored else None,
            "survivors": sorted(i for i, r in recs.items()
                                if r["status"] == "survived" and i not in eq
                                and (not modules or i.split(":")[0] in modules))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=["list", "run", "report"])
    ap.add_argument("--module", action="append", help="a key of TARGETS (default: all)")
    ap.add_argument("--sample", type=int, help="run a seeded random sample of N mutants")
    ap.add_argument("--per-module", type=int,
                    help="a seeded random sample of N mutants from each module (stratified)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=900.0,
                    help="seconds per mutant (a timeout is reported, not scored)")
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--only-survivors", action="store_true")
    ap.add_argument("--limit", type=int, help="stop after N mutants (a chunk)")
    ap.add_argument("--match", help="only mutants whose id contains this text")
    ap.add_argument("--ids", type=Path,
                    help="only the mutants listed in this file (one id a line), e.g. the "
                         "survivors of another results file, re-run after new tests")
    ap.add_argument("--reverse", action="store_true",
                    help="run the selection from its end (a second process shares a sample)")
    ap.add_argument("--no-coverage", action="store_true",
                    help="run every mutant on its module's whole test selection (no per-line "
                         "selection from the coverage map)")
    ap.add_argument("--no-confirm", action="store_true",
                    help="record a survivor of its per-line tests without re-running it on "
                         "the module's whole selection")
    args = ap.parse_args(argv)
    # Absolute: the coverage map matches measured files by their absolute scratch path.
    args.results = args.results.resolve()
    modules = args.module or list(TARGETS)
    for mod in modules:
        if mod not in TARGETS:
            ap.error(f"unknown module {mod!r}; one of {sorted(TARGETS)}")
    if args.command == "list":
        for m in select(modules, args.sample, args.seed, args.per_module):
            print(m.id)
        return 0
    if args.command == "report":
        print(json.dumps(report(args.results, modules), indent=1))
        return 0
    done = _load(args.results)
    eq = equivalent_ids()
    todo = select(modules, args.sample, args.seed, args.per_module)
    if args.match:
        todo = [m for m in select(modules, None, args.seed) if args.match in m.id]
    if args.ids is not None:
        wanted = {line.split(" #")[0].strip() for line in args.ids.read_text().splitlines()}
        todo = [m for m in select(modules, None, args.seed) if m.id in wanted]
        done = {k: v for k, v in done.items() if k not in wanted}  # re-run them
    if args.only_survivors:
        todo = [m for m in todo if done.get(m.id, {}).get("status") == "survived"]
    else:
        todo = [m for m in todo if m.id not in done]
    todo = [m for m in todo if m.id not in eq]
    if args.reverse:
        todo.reverse()
    if args.limit is not None:
        todo = todo[:args.limit]
    args.results.parent.mkdir(parents=True, exist_ok=True)
    scratch = _scratch(args.results)
    for path in modules:  # the scratch copy is what the mutants are made from
        _SOURCES[path] = (scratch / Path(path).relative_to("packages")).read_text()
    print(f"{len(todo)} mutants to run", flush=True)
    try:
        cov = None
        if todo and not args.no_coverage:
            cov = build_coverage(sorted({m.path for m in todo}), scratch,
                                 args.results.parent / "coverage.json")
        for k, m in enumerate(todo, 1):
            rec = run_one(m, scratch, args.timeout, cov, confirm=not args.no_confirm)
            with args.results.open("a") as f:
                f.write(json.dumps(rec) + "\n")
            print(f"[{k}/{len(todo)}] {rec['status']:8} {rec['seconds']:6}s "
                  f"{rec.get('tests', '-')!s:>4} tests {m.id}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    summary = report(args.results, modules)
    print(json.dumps({k: v for k, v in summary.items() if k != "survivors"}, indent=1))
    for s in summary["survivors"]:  # type: ignore[union-attr]
        print("survived:", s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
