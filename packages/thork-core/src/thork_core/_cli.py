"""The ``thork`` command (also ``python -m thork`` and ``python -m thork_core``).

``thork`` alone prints help; ``thork --version``; ``thork info [--json]`` (versions,
plugins, compilers, targets, GPUs, the ``THORK_*`` variables in effect, cache);
``thork plugins [--json]``; ``thork cache [list|size|dir|clear] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._env import BOOL_VALUES as _BOOL
from ._errors import ThorkError

__all__ = ["main", "info", "info_text", "environment", "cache_report", "clear_cache",
           "human_size", "ENVIRONMENT"]


# -- THORK_* variables ---------------------------------------------------------------------

def _is_bool(value: str) -> str | None:
    return None if value.strip().lower() in _BOOL else f"expected one of {', '.join(_BOOL)}"


def _is_launcher(value: str) -> str | None:
    from ._launch import LAUNCHERS as ok

    return None if value.strip().lower() in ok else f"expected one of {', '.join(ok)}"


def _is_torch_reader(value: str) -> str | None:
    # (thork_torch/_reader.py reads it: auto, build, or an on/off spelling for build and 0)
    ok = value.strip().lower() in ("", "auto", "build", *_BOOL)
    return None if ok else "expected auto, build or 0"


def _is_arch(value: str) -> str | None:
    from ._arch import parse_arch

    try:
        parse_arch(value)
    except ValueError as exc:
        return str(exc)
    return None


def _is_file(value: str) -> str | None:
    import shutil

    if os.path.isfile(value) or shutil.which(value):
        return None
    return "no such file or command"


def _is_folder(value: str) -> str | None:
    p = Path(value)
    if p.exists() and not p.is_dir():
        return "exists and is not a folder"
    return None


def _is_compiler(value: str) -> str | None:
    from ._plugins import plugins

    names = sorted({i.name for i in plugins()._items("compilers")})
    return None if value in names else f"no compiler of that name; installed: {', '.join(names)}"


def _is_target(value: str) -> str | None:
    from ._plugins import plugins

    names = sorted({i.name for i in plugins()._items("targets")})
    return None if value in names else f"no target of that name; installed: {', '.join(names)}"


def _is_cache_size(value: str) -> str | None:
    from ._cache import max_bytes_error

    return max_bytes_error(value)


def _is_name_list(value: str) -> str | None:
    names = [n.strip() for n in value.split(",")]
    if not all(n.isidentifier() for n in names):
        return "expected comma-separated names (address,undefined,...)"
    return None


def _is_plugin_list(value: str) -> str | None:
    names = [n.strip() for n in value.split(",")]
    if any(not n for n in names) and value.strip():
        return "expected comma-separated entry-point names (an empty name is in the list)"
    return None


#: Every ``THORK_*`` variable Thork reads: what it does and how its value is checked.
ENVIRONMENT: dict[str, tuple[str, Callable[[str], str | None]]] = {
    "THORK_TARGET": ("default target (gpu, cpu, ...)", _is_target),
    "THORK_COMPILER": ("default compiler where it fits the target", _is_compiler),
    "THORK_ARCH": ("GPU architecture to compile for (sm_90, 9.0)", _is_arch),
    "THORK_CACHE_DIR": ("the cache folder", _is_folder),
    "THORK_DISABLE_PLUGINS": ("entry-point names of plugins not to load", _is_plugin_list),
    "THORK_PLUGINS_AUTOLOAD": ("0: load no plugin from entry points", _is_bool),
    "THORK_PLUGIN_DEFAULTS": ("entry-point names of third-party plugins allowed to become "
                              "the default target or compiler by priority",
                              _is_plugin_list),
    "THORK_LAUNCHER": ("GPU launch path: native, python (or ctypes)", _is_launcher),
    "THORK_NATIVE": ("0: do not build the native launch module", _is_bool),
    "THORK_TORCH_READER": ("thork_torch's C++ reader of torch tensors: auto (built in the "
                           "background once), build (in the process that needs it), 0 "
                           "(torch's Python API)", _is_torch_reader),
    "THORK_NVCC": ("the nvcc to use", _is_file),
    "THORK_CLANG": ("the clang++ to use", _is_file),
    "THORK_CLANG_FALLBACK": ("0: no nvcc fallback when clang fails", _is_bool),
    "THORK_NVRTC_PCH": ("0: NVRTC compiles the whole text, without its precompiled "
                        "prelude", _is_bool),
    "THORK_CACHE_MAX_BYTES": ("the size the cache is kept below by eviction, in bytes "
                              "(default 2 GiB)", _is_cache_size),
    "THORK_DEBUG": ("1: build every kernel and pipe in debug mode (bounds checks)", _is_bool),
    "THORK_CPU_SANITIZE": ("CPU target: build with these sanitizers (address,undefined,"
                           "thread,leak)", _is_name_list),
    "THORK_CACHE_BUNDLE": ("an ahead-of-time bundle (`thork precompile`) consulted before "
                           "the disk cache", _is_folder),
    "THORK_SELECTION_RECORD": ("0: a cache hit in a fresh process builds the plugin "
                               "registry instead of reading the recorded selection",
                               _is_bool),
    "THORK_TRACED_RECORD": ("0: a kernel's first launch in a fresh process traces and "
                            "renders instead of taking the IR and artifact its "
                            "fingerprint names in the cache", _is_bool),
}


#: Prefixes of variables read by Thork's own tests, benches and CI, not by the library.
_HARNESS = ("THORK_TEST_", "THORK_BENCH_", "THORK_FUZZ_", "THORK_CI_", "THORK_SANITIZER_",
            "THORK_MUTATION")


def environment(env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The ``THORK_*`` variables set in ``env`` (default: this process), each with its
    value, what it does, and ``error`` (None, or why the value is invalid). Variables
    Thork does not know are listed with ``known: False`` (a typo is the usual cause)."""
    env = dict(os.environ if env is None else env)
    out = []
    for name in sorted(k for k in env if k.startswith("THORK_")):
        value = env[name]
        if name in ENVIRONMENT:
            what, check = ENVIRONMENT[name]
            try:
                error = check(value)
            except Exception as exc:  # a broken plugin must not break the check
                error = f"cannot check: {type(exc).__name__}: {exc}"
            out.append({"name": name, "value": value, "known": True, "what": what,
                        "error": error})
        else:
            out.append({"name": name, "value": value, "known": False, "what": "",
                        "error": None if name.startswith(_HARNESS) else
                        "not a variable Thork reads"})
    return out


# -- the cache folder ----------------------------------------------------------------------

@dataclass(frozen=True)
class _Part:
    """A kind of file Thork writes under the cache folder."""

    name: str
    what: str
    matches: Callable[[Path], bool]


# The cache's layout (``_cache``): ``<key[:2]>/<key>.art`` entries (the native launch
# module's among them, named ``native-*``), ``lib/<sha256>.so`` loadable copies,
# ``lock/*.lock`` build locks, ``secret`` (the entries' HMAC key), ``memo.json``.
def _is_kernel(rel: Path) -> bool:
    return len(rel.parts) == 2 and rel.suffix == ".art" and not rel.name.startswith("native")


def _is_library(rel: Path) -> bool:
    # lib/<sha256>.so (docs/cache.md); cpu-so/ and nvcc-so/ from before.
    return len(rel.parts) == 2 and rel.suffix == ".so" and (
        rel.parts[0] == "lib" or rel.parts[0].endswith("-so"))


def _is_lock(rel: Path) -> bool:
    return len(rel.parts) == 2 and rel.parts[0] == "lock" and rel.suffix == ".lock"


def _is_secret(rel: Path) -> bool:
    return len(rel.parts) == 1 and rel.name == "secret"


def _is_native(rel: Path) -> bool:
    return rel.parts[0] == "native" or (len(rel.parts) == 2 and rel.suffix == ".art"
                                        and rel.name.startswith("native"))


def _is_memo(rel: Path) -> bool:
    return len(rel.parts) == 1 and rel.name == "memo.json"


def _is_leftover(rel: Path) -> bool:
    return rel.name.startswith((".tmp", ".probe-"))


_PARTS = (
    _Part("kernels", "compiled kernels (cubin, PTX, host code)", _is_kernel),
    _Part("libraries", "loadable copies of CPU-target and nvcc host libraries (.so)",
          _is_library),
    _Part("native", "the native launch module, built once per Python", _is_native),
    _Part("memo", "memo of slow facts (plugin index, compiler versions)", _is_memo),
    _Part("locks", "build locks (concurrent processes compile a kernel once)", _is_lock),
    _Part("secret", "the key entries are signed with (docs/cache.md)", _is_secret),
    _Part("leftovers", "temporary files of interrupted writes", _is_leftover),
)


def _cache_files(root: Path) -> dict[str, list[tuple[Path, int]]]:
    """Every file under ``root`` by part; files Thork did not write go under ``other``."""
    out: dict[str, list[tuple[Path, int]]] = {p.name: [] for p in _PARTS}
    out["other"] = []
    if not root.is_dir():
        return out
    for folder, _dirs, files in os.walk(root):
        for f in files:
            path = Path(folder) / f
            rel = path.relative_to(root)
            try:
                size = path.lstat().st_size
            except OSError:
                continue
            part = next((p.name for p in _PARTS if p.matches(rel)), "other")
            out[part].append((path, size))
    return out


def cache_report(root: Path | None = None) -> dict[str, Any]:
    """What the cache folder holds: per part, files and bytes (``other``: files Thork did
    not write, never removed)."""
    from ._cache import cache_dir

    root = cache_dir() if root is None else root
    files = _cache_files(root)
    whats = {p.name: p.what for p in _PARTS} | {"other": "files Thork did not write (kept)"}
    parts: dict[str, dict[str, Any]] = {
        name: {"files": len(fs), "bytes": sum(s for _, s in fs), "what": whats[name]}
        for name, fs in files.items()}
    thork_bytes = sum(v["bytes"] for k, v in parts.items() if k != "other")
    return {"dir": str(root), "exists": root.is_dir(), "parts": parts, "bytes": thork_bytes,
            "files": sum(v["files"] for k, v in parts.items() if k != "other")}


def clear_cache(root: Path | None = None) -> dict[str, Any]:
    """Remove every file Thork wrote under the cache folder and the folders left empty;
    files Thork did not write stay. Returns what was removed and what could not be."""
    from . import _memo
    from ._cache import cache_dir

    root = cache_dir() if root is None else root
    removed = {"files": 0, "bytes": 0, "folders": 0}
    failed: list[str] = []
    for part, files in _cache_files(root).items():
        if part == "other":
            continue
        for path, size in files:
            try:
                path.unlink()
                removed["files"] += 1
                removed["bytes"] += size
            except OSError as exc:
                failed.append(f"{path}: {exc.strerror or exc}")
    _memo.reset()
    from ._cache import _reset

    _reset()  # the secret may be gone: read (or make) it again
    if root.is_dir():
        for folder, _dirs, _files in sorted(os.walk(root), key=lambda w: -len(w[0])):
            if Path(folder) == root:
                continue
            try:
                os.rmdir(folder)  # only succeeds when empty
                removed["folders"] += 1
            except OSError:
                pass
    return {"dir": str(root), "removed": removed, "failed": failed}


def human_size(n: int) -> str:
    """``n`` bytes as people read it: ``512 B``, ``1.5 KiB``, ``12.0 MiB``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


# -- thork info ----------------------------------------------------------------------------

def _driver_version() -> str | None:
    from . import _cuda

    try:
        drv = _cuda.driver()
        err, v = drv.cuDriverGetVersion()
        if int(err) != 0:
            return None
        return f"{int(v) // 1000}.{int(v) % 1000 // 10}"
    except Exception:  # no cuda-python, no libcuda
        return None


def _safe(fn: Callable[[], Any]) -> tuple[Any, str | None]:
    try:
        return fn(), None
    except Exception as exc:  # one broken plugin must not break `thork info`
        return None, f"{type(exc).__name__}: {exc}"


def info() -> dict[str, Any]:
    """Everything ``thork info --json`` prints, as a dict."""
    import numpy

    from . import __version__, _cuda
    from ._plugins import plugins

    reg = plugins()
    out: dict[str, Any] = {
        "thork_core": __version__,
        "plugin_api": _plugin_api_version(),
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "platform": platform.platform(),
        "numpy": numpy.__version__,
        "cuda_driver": _driver_version(),
    }
    out["plugins"] = plugin_list()
    out["blocked_plugins"] = sorted(reg.blocked)
    compilers = []
    for c in reg.compilers():
        (ok, why), err = _safe(c.available)  # type: ignore[misc]
        version = ident = None
        if err is not None:
            ok, why = False, err
        if ok:
            version, err = _safe(c.version)
            ident, err2 = _safe(c.identity)
            if err or err2:
                ok, why = False, err or err2
        describe = getattr(c, "describe", None)
        compilers.append({
            "name": c.name, "version": version, "identity": ident, "language": c.language,
            "produces": list(c.produces), "priority": c.priority, "usable": bool(ok),
            "why_not": None if ok else why,
            "describe": _safe(describe)[0] if ok and callable(describe) else None,
        })
    out["compilers"] = compilers
    out["targets"] = [{"name": t.name, "describe": _safe(t.describe)[0] or t.name,
                       "usable": bool((_safe(t.available)[0] or (False,))[0])}
                      for t in reg.targets()]
    out["array_adapters"] = [
        {"name": a.name, "priority": a.priority,
         "describe": _describe(a)} for a in reg.array_adapters()]
    target, err = _safe(reg.target)
    out["default_target"] = target.name if target is not None else None
    out["default_compiler"] = None
    if target is not None:
        comp, err = _safe(lambda: reg.compiler(None, target))
        out["default_compiler"] = comp.name if comp is not None else None
    if err is not None:
        out["default_error"] = err
    ok, why = _cuda.gpu_status()
    gpus = []
    if ok:
        for i in range(_cuda.device_count()):
            major, minor = _cuda.compute_capability(i)
            gpus.append({"ordinal": i, "name": _cuda.device_name(i), "arch": f"sm_{major}{minor}"})
    out["gpus"] = gpus
    out["gpus_why_none"] = None if ok else why
    from ._native import native_status

    out["launcher"] = os.environ.get("THORK_LAUNCHER", "native")
    out["native_module"] = native_status()
    out["environment"] = environment()
    out["cache"] = cache_report()
    return out


def _describe(adapter: Any) -> str | None:
    """An adapter's ``describe()`` line, or what it raised (never raises; an adapter
    not derived from ArrayAdapter may have none)."""
    fn = getattr(adapter, "describe", None)
    if not callable(fn):
        return None
    line, err = _safe(fn)
    if err is not None:
        return f"describe() failed: {err}"
    return None if line is None else str(line)


def _plugin_api_version() -> str | None:
    try:
        from ._plugin_api import PLUGIN_API_VERSION
    except ImportError:
        return None
    return PLUGIN_API_VERSION


def plugin_list() -> list[dict[str, Any]]:
    """Each plugin: entry-point name, distribution, version and what each hook registered."""
    from ._plugins import plugins

    reg = plugins()
    out: list[dict[str, Any]] = [
        {"name": p.name, "distribution": p.distribution, "version": p.version,
         "registered": {k: list(v) for k, v in p.registered.items() if v}}
        for p in reg.info.values()]
    # Plugins of a front-end's own (fkl's op plugins), listed under that front-end.
    for fe in reg.frontends():
        if fe.extensions is None:
            continue
        try:
            found = fe.extensions()
        except Exception as exc:  # a broken front-end never breaks the listing
            found = [{"name": f"{fe.name} extensions", "distribution": "", "version": "",
                      "registered": {}, "error": f"{type(exc).__name__}: {exc}"}]
        out.extend(dict(e, via=fe.name) for e in found)
    return out


def info_text(data: dict[str, Any] | None = None) -> str:
    """What ``thork info`` prints."""
    d = info() if data is None else data
    lines = [
        f"thork-core {d['thork_core']} (plugin API {d['plugin_api']}); "
        f"Python {d['python']}; NumPy {d['numpy']}; "
        f"CUDA driver {d['cuda_driver'] or 'none'}",
        f"default: target {d['default_target'] or 'none'}, "
        f"compiler {d['default_compiler'] or 'none'}"
        + (f" ({d['default_error']})" if d.get("default_error") else ""),
        "plugins:",
    ]
    for p in d["plugins"]:
        what = "; ".join(f"{k}: {', '.join(v)}" for k, v in p["registered"].items())
        via = f" [{p['via']} plugin]" if p.get("via") else ""
        lines.append(f"  {p['name']:<10} {p['distribution']} {p['version']}{via}  "
                     f"({what or p.get('error') or 'nothing'})")
    if d["blocked_plugins"]:
        lines.append(f"  blocked by THORK_DISABLE_PLUGINS: {', '.join(d['blocked_plugins'])}")
    lines.append("compilers:")
    for c in d["compilers"]:
        state = "works here" if c["usable"] else f"not usable: {c['why_not']}"
        extra = f"  {c['describe']}" if c["describe"] else ""
        lines.append(f"  {c['name']:<10} {c['identity'] or c['name']}  [{c['language']} -> "
                     f"{', '.join(c['produces'])}, priority {c['priority']}]  {state}{extra}")
    lines.append("targets:")
    lines.extend(f"  {t['describe']}" for t in d["targets"])
    lines.append("array adapters:")
    lines.extend(f"  {a['name']:<20} priority {a['priority']:<4}"
                 + (f"  {a['describe']}" if a["describe"] else "")
                 for a in d.get("array_adapters", ()))
    lines.append("gpus:")
    if d["gpus"]:
        lines.extend(f"  cuda:{g['ordinal']} {g['name']} {g['arch']}" for g in d["gpus"])
    else:
        lines.append(f"  none ({d['gpus_why_none']})")
    lines.append(f"launcher: {d['launcher']} (THORK_LAUNCHER); native module: "
                 f"{d['native_module']}")
    lines.append("environment:" if d["environment"] else "environment: no THORK_* variable set")
    for e in d["environment"]:
        flag = f"  INVALID: {e['error']}" if e["error"] else ""
        lines.append(f"  {e['name']}={e['value']}{flag}")
    c = d["cache"]
    lines.append(f"cache: {c['dir']} ({c['files']} files, {human_size(c['bytes'])})")
    return "\n".join(lines)


# -- the command ---------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="thork", description="Thork: write GPU kernels in Python, run them on the GPU "
        "or the CPU. Run `thork COMMAND --help` for a command's options.")
    parser.add_argument("--version", action="version",
                        version=f"thork-core {__version__} (plugin API "
                        f"{_plugin_api_version()}; Python {platform.python_version()})")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("info", help="versions, plugins, compilers, targets, GPUs, THORK_* "
                       "variables and the cache", description="Versions (Python, NumPy, CUDA "
                       "driver, each compiler's toolkit), plugins, compilers, targets, GPUs, "
                       "the default target and compiler, the THORK_* variables in effect "
                       "(invalid values flagged) and the cache.")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p = sub.add_parser("plugins", help="installed plugins and what each registered",
                       description="Each plugin's entry point, distribution, version and "
                       "what each of its hooks registered.")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p = sub.add_parser("cache", help="list, size, locate or clear what Thork wrote to disk",
                       description="The cache folder (THORK_CACHE_DIR, else "
                       "$XDG_CACHE_HOME/thork, else ~/.cache/thork) holds compiled kernels, "
                       "CPU-target and host libraries, the native launch module and a memo. "
                       "`list` shows the kernels and a summary (the default), `size` the "
                       "bytes per part, `dir` the folder, `clear` removes everything Thork "
                       "wrote there and the folders left empty.")
    p.add_argument("action", nargs="?", default="list",
                   choices=["list", "size", "dir", "clear"], help="default: list")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p = sub.add_parser(
        "precompile", help="compile listed kernels and pipes into an ahead-of-time bundle",
        description="Compile kernels and pipes ahead of time into a bundle folder with a "
        "manifest (key -> SHA-256 of each entry). Each MODULE:ATTR names a thork "
        "kernel, a (pipe, sample input) pair, a list of those, or a function returning "
        "one. A process uses the bundle only when THORK_CACHE_BUNDLE names it "
        "(docs/scale-out.md).")
    p.add_argument("specs", nargs="+", metavar="MODULE:ATTR",
                   help="what to compile (see the description)")
    p.add_argument("--arch", action="append", default=[], metavar="ARCH",
                   help="a GPU architecture (sm_90, 90, 9.0...); repeat for several; "
                   "implies --target gpu")
    p.add_argument("--target", action="append", default=[], metavar="TARGET",
                   help="gpu or cpu (repeatable; default: the default target, or gpu "
                   "when --arch is given)")
    p.add_argument("--compiler", default=None, help="compiler plugin (default: the "
                   "selection rules)")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="bundle folder")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    return parser


def _load_spec(spec: str) -> Any:
    """The object ``module:attr`` names (``attr`` may be dotted); the working folder is
    importable, as with ``python -m``."""
    import importlib

    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise ThorkError(f"{spec!r} is not module:attr")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as exc:
        raise ThorkError(f"cannot import {module!r} ({exc})") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ThorkError(f"{module} has no {attr!r}") from None
    return obj


def precompile_items(obj: Any, where: str) -> list[tuple[Any, tuple[Any, ...]]]:
    """What ``thork precompile`` compiles for ``obj``: ``(object, sample inputs)`` pairs."""
    if callable(getattr(obj, "precompile", None)):
        return [(obj, ())]
    if isinstance(obj, tuple) and obj and callable(getattr(obj[0], "precompile", None)):
        return [(obj[0], tuple(obj[1:]))]
    if isinstance(obj, (list, tuple)):
        return [item for o in obj for item in precompile_items(o, where)]
    if callable(obj):
        return precompile_items(obj(), where)
    raise ThorkError(f"{where} is a {type(obj).__name__}; expected a thork "
                     "kernel, a (pipe, sample input) pair, a list of those or a function "
                     "returning one")


def _precompile(args: argparse.Namespace) -> int:
    from ._bundle import make_bundle

    targets: list[tuple[str, str | None]] = [("gpu", a) for a in args.arch]
    for t in args.target:
        if t == "gpu" and args.arch:
            continue  # the archs named it
        targets.append((t, None))
    if not targets:
        from ._plugins import plugins

        targets.append((plugins().target(None).name, None))
    items = [item for spec in args.specs for item in precompile_items(_load_spec(spec), spec)]
    done = make_bundle(items, args.output, targets, args.compiler)
    if args.json:
        print(json.dumps(done, indent=2))
    else:
        for d in done["items"]:
            where = d["target"] + (f" {d['arch']}" if d["arch"] else "")
            print(f"{d['item']:<40} {where:<10} {len(d['keys'])} kernel(s)")
        print(f"bundle {done['bundle']}: {done['entries']} entries "
              f"({done['written']} written now)")
    return 0


def _print_cache(action: str, as_json: bool) -> int:
    from ._cache import cache_dir, disk_cache

    if action == "dir":
        print(json.dumps({"dir": str(cache_dir())}) if as_json else cache_dir())
        return 0
    if action == "clear":
        done = clear_cache()
        if as_json:
            print(json.dumps(done, indent=2))
        else:
            r = done["removed"]
            print(f"removed {r['files']} files ({human_size(r['bytes'])}) and "
                  f"{r['folders']} empty folders from {done['dir']}")
            for f in done["failed"]:
                print(f"  could not remove {f}", file=sys.stderr)
        return 1 if done["failed"] else 0
    report = cache_report()
    if action == "list":
        entries = disk_cache().entries()
        if as_json:
            report["kernels"] = [{"key": e.key, "bytes": e.size, "kind": e.kind,
                                  "arch": e.arch, "entry": e.entry, "compiler": e.compiler}
                                 for e in entries]
        else:
            for e in entries:
                print(f"{e.key[:16]}  {human_size(e.size):>9}  {e.kind:<7} {e.arch:<14} "
                      f"{e.entry:<24} {e.compiler}")
    if as_json:
        print(json.dumps(report, indent=2))
        return 0
    for name, part in report["parts"].items():
        if part["files"] or name != "other":
            print(f"{name:<10} {part['files']:>6} files {human_size(part['bytes']):>10}  "
                  f"{part['what']}")
    print(f"total      {report['files']:>6} files {human_size(report['bytes']):>10}  "
          f"in {report['dir']}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``thork`` command; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "info":
        data = info()
        print(json.dumps(data, indent=2) if args.json else info_text(data))
        return 0
    if args.command == "plugins":
        plist = plugin_list()
        if args.json:
            print(json.dumps(plist, indent=2))
        else:
            for p in plist:
                via = f"  ({p['via']} plugin)" if p.get("via") else ""
                print(f"{p['name']:<10} {p['distribution']} {p['version']}{via}")
                for hook, names in p["registered"].items():
                    print(f"  {hook}: {', '.join(names)}")
                if p.get("error"):
                    print(f"  skipped: {p['error']}")
        return 0
    if args.command == "precompile":
        try:
            return _precompile(args)
        except ThorkError as exc:
            print(f"thork precompile: {exc}", file=sys.stderr)
            return 2
    return _print_cache(args.action, args.json)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
