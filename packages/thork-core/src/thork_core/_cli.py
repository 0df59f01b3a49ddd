"""The ``thork`` command: ``thork info`` and ``thork cache [list|size|clear]``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

__all__ = ["main", "info_text"]


def info_text() -> str:
    """What ``thork info`` prints: plugins, compilers, targets, GPUs, cache."""
    from . import _cuda
    from ._cache import disk_cache
    from ._plugins import plugins

    reg = plugins()
    lines = ["plugins:"]
    for p in reg.info.values():
        what = "; ".join(f"{k}: {', '.join(v)}" for k, v in p.registered.items() if v)
        lines.append(f"  {p.name:<10} {p.distribution} {p.version}  ({what or 'nothing'})")
    if reg.blocked:
        lines.append(f"  blocked by THORK_DISABLE_PLUGINS: {', '.join(sorted(reg.blocked))}")
    lines.append("compilers:")
    for c in reg.compilers():
        ok, why = c.available()
        try:
            ident = c.identity() if ok else c.name
        except Exception as exc:  # a broken toolchain must not break `thork info`
            ok, why, ident = False, f"{type(exc).__name__}: {exc}", c.name
        state = "works here" if ok else f"not usable: {why}"
        extra = ""
        describe = getattr(c, "describe", None)
        if ok and callable(describe):
            extra = f"  {describe()}"
        lines.append(f"  {c.name:<10} {ident}  [{c.language} -> {', '.join(c.produces)}, "
                     f"priority {c.priority}]  {state}{extra}")
    lines.append("targets:")
    for t in reg.targets():
        lines.append(f"  {t.describe()}")
    lines.append("gpus:")
    ok, why = _cuda.gpu_status()
    if ok:
        for i in range(_cuda.device_count()):
            major, minor = _cuda.compute_capability(i)
            lines.append(f"  cuda:{i} {_cuda.device_name(i)} sm_{major}{minor}")
    else:
        lines.append(f"  none ({why})")
    from ._native import native_status

    launcher = os.environ.get("THORK_LAUNCHER", "native")
    lines.append(f"launcher: {launcher} (THORK_LAUNCHER); native module: {native_status()}")
    cache = disk_cache()
    lines.append(f"cache: {cache.root} ({len(cache.entries())} entries, {cache.size()} bytes)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="thork", description="Thork: GPU kernels in Python")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="plugins, compilers, targets and GPUs found here")
    cache = sub.add_parser("cache", help="inspect or clear the compiled-kernel cache")
    cache.add_argument("action", nargs="?", default="list", choices=["list", "size", "clear"])
    args = parser.parse_args(argv)

    if args.command == "info":
        print(info_text())
        return 0
    from ._cache import disk_cache

    c = disk_cache()
    if args.action == "list":
        entries = c.entries()
        for e in entries:
            print(f"{e.key[:16]}  {e.size:>9}  {e.kind:<7} {e.arch:<14} {e.entry:<24} {e.compiler}")
        print(f"{len(entries)} entries, {c.size()} bytes in {c.root}")
    elif args.action == "size":
        print(f"{c.size()} bytes in {c.root}")
    else:
        print(f"removed {c.clear()} entries from {c.root}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
