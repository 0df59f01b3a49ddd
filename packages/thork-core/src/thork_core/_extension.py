"""Host extensions: a CPython extension module compiled from one C or C++ source on this
machine, kept in the disk cache, loaded from there.

Core's own launcher (:mod:`thork_core._native`) and plugins' native parts (thork_torch's
array reader, ``_reader.cpp``) are built the same way: the source, the compiler command,
its flags and whatever else the caller names form the key; the library goes into the
disk cache as a signed ``hostlib`` entry whose content is compared with its recorded hash
before it is loaded (docs/guarantees.md), so nothing is loaded that Thork did not write.
A build runs under the cache's per-key lock: concurrent processes build once.

Only loading happens in a process that finds its libraries built (core's launcher in every
fresh process): the compiler's tools (subprocess, tempfile, hashlib: ~25 ms of imports)
are imported by the functions that build or key, not here.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
from collections.abc import Callable, Sequence
from types import ModuleType

from ._errors import CompileError

__all__ = ["build_library", "cached_library", "extension_key", "host_extension",
           "load_extension", "python_flags"]

#: The extension suffix of this Python (``sysconfig``'s ``EXT_SUFFIX``, without importing
#: sysconfig).
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]
#: A compile longer than this is stopped (seconds): C++ against large headers (torch's)
#: takes ~15-40 s.
BUILD_TIMEOUT_S = 300


def extension_key(source: bytes, compiler: str, flags: Sequence[str] = (),
                  extra: Sequence[str] = ()) -> str:
    """The cache key of an extension: the source's bytes, this Python (version and ABI
    suffix), the compiler command, the flags and ``extra`` (what else the library
    depends on, e.g. a library's version). 20 hex digits."""
    import hashlib

    h = hashlib.sha256(source)
    for part in (sys.version, SUFFIX, compiler, *flags, "\0extra", *extra):
        h.update(b"\0" + part.encode())
    return h.hexdigest()[:20]


def build_library(source: str, compiler: str, flags: Sequence[str], out: str,
                  libs: Sequence[str] = ()) -> None:
    """Compile ``source`` with ``compiler`` (a command line, split on spaces) and
    ``flags`` into the shared library ``out``, linked with ``libs`` (after the source: a
    linker reads in order); written atomically (a temporary name in the same folder,
    then renamed).

    Raises:
        CompileError: The compiler failed or took longer than :data:`BUILD_TIMEOUT_S`; the
            message ends with its last output.
    """
    import subprocess
    import tempfile

    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=os.path.dirname(out) or ".")
    os.close(fd)
    cmd = [*compiler.split(), *flags, source, *libs, "-o", tmp]
    try:
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True,
                                  timeout=BUILD_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise CompileError(f"building {os.path.basename(source)}: {cmd[0]} could not "
                               f"run: {exc}") from exc
        if proc.returncode != 0:
            raise CompileError(f"building {os.path.basename(source)}: {cmd[0]} failed: "
                               f"{(proc.stderr or proc.stdout).strip()[-1200:]}")
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def cached_library(key: str, name: str, source: str, compiler: str,
                   flags: Sequence[str] | Callable[[], Sequence[str]],
                   build: bool = True, libs: Sequence[str] = ()) -> str | None:
    """The path of extension ``name``'s library for ``key`` through the disk cache: the
    signed entry ``native-<key>`` (content compared before use), else, with ``build``,
    compiled now (:func:`build_library`; ``flags`` may be a function giving them, asked
    only for a build) and stored; without ``build``, None when there is no entry.

    Raises:
        CompileError: The build failed.
    """
    from ._artifact import Artifact
    from ._cache import disk_cache, library_file

    cache = disk_cache()
    ckey = f"native-{key}"
    art = cache.get(ckey)
    if art is None:
        if not build:
            return None
        with cache.lock(ckey):
            art = cache.get(ckey)
            if art is None:
                import tempfile

                with tempfile.TemporaryDirectory(prefix="thork-native-") as d:
                    out = os.path.join(d, f"{name}{SUFFIX}")
                    build_library(source, compiler,
                                  flags() if callable(flags) else flags, out, libs)
                    with open(out, "rb") as f:
                        data = f.read()
                art = Artifact(kind="hostlib", data=data, entry=name, compiler=compiler,
                               arch=sys.implementation.cache_tag or "")
                cache.put(ckey, art)
    return library_file(art)


def load_extension(name: str, path: str) -> ModuleType:
    """Import the extension module ``name`` (its ``PyInit_<name>``) from ``path``; the
    module is not added to ``sys.modules``."""
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.machinery.ModuleSpec(name, loader, origin=path)
    mod = loader.create_module(spec)
    loader.exec_module(mod)
    return mod


def host_extension(name: str, source: str, *, compiler: str, flags: Sequence[str] = (),
                   libs: Sequence[str] = (), extra_key: Sequence[str] = (),
                   build: bool = True,
                   load: bool = True) -> ModuleType | None:
    """Extension module ``name`` compiled from the C or C++ file ``source``, through the
    disk cache (see the module's head).

    Args:
        name: The module's name: the source defines ``PyInit_<name>``.
        source: Path of the ``.c`` or ``.cpp`` file.
        compiler: The compiler command (``"cc"``, ``"c++"``, ``"g++ -std=c++17"``).
        flags: Everything else on its command line (``-shared -fPIC`` and this Python's
            headers are the caller's to give: see :func:`python_flags`).
        libs: What the library links against (``-L``, ``-l``, ``-Wl,-rpath``), placed
            after the source.
        extra_key: What else the library depends on (a library's version, its install
            folder), part of the cache key.
        build: Compile when the cache has no such library; False: return None then.
        load: Import the module; False: only make sure the cache holds it (a build in
            a helper process that lacks what the library links against at import).

    Returns:
        The loaded module (each call loads it again: keep it), or None (``build`` False
        and nothing cached, or ``load`` False).

    Raises:
        CompileError: The compiler failed, or the library could not be loaded.
        OSError: The source cannot be read.
    """
    with open(source, "rb") as f:
        key = extension_key(f.read(), compiler, [*flags, "\0libs", *libs], extra_key)
    path = cached_library(key, name, source, compiler, flags, build=build, libs=libs)
    if path is None or not load:
        return None
    try:
        return load_extension(name, path)
    except ImportError as exc:
        raise CompileError(f"{name}: the library built from {os.path.basename(source)} "
                           f"could not be loaded: {exc}") from exc


def python_flags() -> list[str]:
    """The flags every extension needs: a position-independent shared library, hidden
    symbols by default, this Python's headers.

    Raises:
        CompileError: This Python has no ``Python.h`` (the headers package is missing).
    """
    import sysconfig

    include = sysconfig.get_paths().get("include", "")
    if not os.path.exists(os.path.join(include, "Python.h")):
        raise CompileError(f"no Python.h in {include!r} (install the Python headers)")
    return ["-O2", "-shared", "-fPIC", "-fvisibility=hidden", f"-I{include}"]
