"""NVRTC through cuda-python: CUDA C++ → cubin (or PTX) in-process, no GPU needed."""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Sequence
from typing import Any

from thork_core import Artifact, CompileError, Compiler

__all__ = ["NvrtcCompiler"]


@functools.cache
def _nvrtc() -> Any:
    from cuda.bindings import nvrtc

    return nvrtc


def _check(result: Any, what: str) -> Any:
    err = result[0]
    if int(err) != 0:
        _, msg = _nvrtc().nvrtcGetErrorString(err)
        text = msg.decode() if isinstance(msg, bytes) else msg
        raise CompileError(f"NVRTC {what} failed: {text}")
    return result[1] if len(result) == 2 else None


def _query_version() -> str:
    err, major, minor = _nvrtc().nvrtcVersion()
    if int(err) != 0:
        raise CompileError(f"nvrtcVersion failed: {err}")
    return f"{major}.{minor}"


#: The environment variables that steer which NVRTC library cuda.bindings loads.
_VARIABLES = ("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH")


def _environment() -> list[str]:
    from thork_core.plugin import installed_fingerprint

    return [installed_fingerprint(), *(os.environ.get(v, "") for v in _VARIABLES)]


def _loaded_path() -> str:
    """The NVRTC library file this process loaded (loading it): from the process's
    memory map ("" where that cannot be read)."""
    _nvrtc().nvrtcVersion()  # cuda.bindings opens the library on its first call
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and os.path.basename(parts[5].strip()).startswith(
                        "libnvrtc.so"):
                    return parts[5].strip()
    except OSError:
        pass
    return ""


def _library(base: list[str]) -> str:
    """The NVRTC library file, memoized against ``base`` (:func:`_environment`): a disk-
    cache hit learns it without loading NVRTC."""
    from thork_core.plugin import memo

    return str(memo("nvrtc_library", base, _loaded_path))


class NvrtcCompiler(Compiler):
    """The default compiler: fast, in-process, cubin for the exact arch."""

    name = "nvrtc"
    priority = 100
    produces = ("cubin", "ptx")
    language = "cuda"
    package = "thork-backend-nvrtc"

    @functools.cache  # noqa: B019 - one instance per process
    def version(self) -> str:
        # Loading NVRTC costs ~40 ms; a disk-cache hit should not pay it. The version is
        # memoized against the installed distributions (a wheel upgrade changes their
        # metadata folders; a script folder gaining files does not), the variables that
        # steer where a system NVRTC is found, and the size and modification time of the
        # library file that answered (a toolkit upgraded in place changes them).
        from thork_core.plugin import memo, path_fingerprint

        base = _environment()
        fp = [*base, path_fingerprint([_library(base)])]
        return str(memo("nvrtc_version", fp, _query_version))

    def key_inputs(self) -> tuple[list[str], list[str]] | None:
        """The variables steering where NVRTC is found and the library file that is
        loaded (see :meth:`Compiler.key_inputs`)."""
        return list(_VARIABLES), [_library(_environment())]

    def available(self) -> tuple[bool, str]:
        # The version comes from cuda.bindings' NVRTC (asked, or memoized against the
        # installed distributions: removing cuda-bindings changes them), so a version
        # says the bindings import; looking for them again would cost a disk-cache hit
        # ~0.3 ms (a search of every sys.path folder for the ``cuda`` namespace).
        try:
            self.version()
        except Exception as exc:
            return False, f"NVRTC cannot be loaded ({type(exc).__name__}: {exc})"
        return True, ""

    @functools.cache  # noqa: B019
    def supported_archs(self) -> tuple[str, ...]:
        nv = _nvrtc()
        archs = _check(nv.nvrtcGetSupportedArchs(), "nvrtcGetSupportedArchs")
        return tuple(f"sm_{a}" for a in archs)

    def flags(self, kind: str, arch: str) -> list[str]:
        """``-minimal`` (NVRTC 12.4+) leaves out what Thork's self-contained source never
        uses (texture and surface functions, the device runtime's ``cuda*`` functions and
        types, launches from device code): NVRTC's own time drops by ~20% for a small
        kernel (session 13: 56.4 -> 44.9 ms on the dev machine) and the cubin is the same,
        byte for byte (every module-level kernel of the tests, examples and benches)."""
        virtual = arch.replace("sm_", "compute_")
        gpu = arch if kind == "cubin" else virtual
        out = [f"--gpu-architecture={gpu}", "-std=c++17", "-lineinfo"]
        if self._minimal():
            out.append("-minimal")
        return out

    @functools.cache  # noqa: B019 - one instance per process
    def _minimal(self) -> bool:
        """Whether this NVRTC takes ``-minimal`` (added in CUDA 12.4)."""
        try:
            major, minor = (int(x) for x in self.version().split(".")[:2])
        except Exception:  # noqa: BLE001 - an unknown version: the plain flags
            return False
        return (major, minor) >= (12, 4)

    @functools.cache  # noqa: B019 - one instance per process
    def _pch_supported(self) -> bool:
        """Whether this NVRTC has automatic precompiled headers (CUDA 12.8+) and the
        bindings expose ``nvrtcGetPCHCreateStatus``."""
        try:
            major, minor = (int(x) for x in self.version().split(".")[:2])
        except Exception:  # noqa: BLE001 - an unknown version: no PCH
            return False
        return (major, minor) >= (12, 8) and hasattr(_nvrtc(), "nvrtcGetPCHCreateStatus")

    def compile(
        self, source: str, *, entry: str, kind: str, arch: str, options: Sequence[str] = ()
    ) -> Artifact:
        if kind not in self.produces:
            raise CompileError(f"NVRTC cannot produce {kind!r} artifacts (only cubin, ptx)")
        base = arch.rstrip("af")
        if base not in self.supported_archs():
            raise CompileError(
                f"NVRTC {self.version()} cannot compile for {arch}; it supports "
                f"{', '.join(self.supported_archs())}")
        from thork_core.plugin import env_flag

        flags = [*self.flags(kind, arch), *options]
        out = None
        if env_flag("THORK_NVRTC_PCH", True) and self._pch_supported():
            out = _compile_with_pch(source, entry, kind, flags)
        if out is None:  # no PCH, or the PCH compile failed: the whole text, as one file
            out = _run(source, entry, kind, flags)
        err, log, data = out
        if err:
            raise CompileError(f"NVRTC failed to compile kernel {entry!r} for {arch}",
                               log=log, source=source)
        return Artifact(kind=kind, data=data, entry=entry, compiler=self.identity(),
                        arch=arch, log=log)


def _run(text: str, entry: str, kind: str, flags: Sequence[str],
         headers: tuple[tuple[str, str], ...] = (), pch: list[int] | None = None,
         ) -> tuple[bool, str, bytes]:
    """One NVRTC program: ``text`` as ``<entry>.cu`` with the in-memory ``headers``
    ((include name, text) pairs) and ``flags``. Returns (failed, log, artifact bytes;
    empty where it failed); ``pch``, where given, receives the PCH creation status."""
    nv = _nvrtc()
    opts = [o.encode() for o in flags]
    prog = _check(nv.nvrtcCreateProgram(text.encode(), f"{entry}.cu".encode(), len(headers),
                                        [h[1].encode() for h in headers],
                                        [h[0].encode() for h in headers]),
                  "nvrtcCreateProgram")
    try:
        (err,) = nv.nvrtcCompileProgram(prog, len(opts), opts)
        size = _check(nv.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
        buf = b" " * size
        nv.nvrtcGetProgramLog(prog, buf)
        log = buf.rstrip(b"\0 ").decode(errors="replace")
        if int(err) != 0:
            return True, log, b""
        if pch is not None:
            (status,) = nv.nvrtcGetPCHCreateStatus(prog)
            pch.append(int(status))
        if kind == "cubin":
            n = _check(nv.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
            data = b" " * n
            _check(nv.nvrtcGetCUBIN(prog, data), "nvrtcGetCUBIN")
        else:
            n = _check(nv.nvrtcGetPTXSize(prog), "nvrtcGetPTXSize")
            data = b" " * n
            _check(nv.nvrtcGetPTX(prog, data), "nvrtcGetPTX")
            data = data.rstrip(b"\0")
    finally:
        nv.nvrtcDestroyProgram(prog)
    return False, log, bytes(data)


# -- NVRTC's automatic precompiled headers (session 13) ---------------------------------
#
# Every translation unit CudaRenderer.render() prints starts with the same prelude
# (CudaRenderer.prelude(): ~8.6 KB, fixed for a Thork version); the kernel-dependent
# helpers (_head's mma, cache-hint and tk.fast helpers, the dynamic shared memory) follow it
# in the body. NVRTC (12.8+) with ``-pch`` saves its parse state after the leading
# #includes of the main file (its own implicit declarations included) and reuses it in
# every later compile of the process whose leading #includes match: the prelude is passed as
# an in-memory header and the main file includes it, so every compile after the first in a
# process skips that work (session 13, dev machine: NVRTC 49.0 -> 44.7 ms a small kernel).
#
# Safety, each point checked on NVRTC 13 (tests/compilers/test_nvrtc_pch.py):
# * NVRTC matches a PCH by the include *name* only, not the header's content: a header of
#   the same name with other text reuses the old PCH and compiles the old code (seen:
#   another cubin). The name is therefore a digest of the prelude text *and* every option
#   (arch, -D macros, -minimal...): a PCH is only used for the exact header and options it
#   was made from.
# * Line numbers: the main file is ``#include "<name>"`` then ``;`` and blank lines up to
#   the prelude's length, so every line of the body has the number it has in the whole
#   text (the log's ``<entry>.cu(N)``, the line table). The ``;`` (an empty declaration)
#   ends the main file's leading directives: a body that begins with directives
#   (``#ifndef __launch_bounds__``...) would otherwise make NVRTC create one more PCH for
#   each kernel, and a ``#line`` there would stop PCH creation.
# * The code is the same: the cubin's code, constants, symbols and attributes are byte for
#   byte those of the whole text compiled as one file; the debug line table (and the PTX
#   kept beside it) names the header instead of ``<entry>.cu`` for lines of prelude
#   helpers inlined into the kernel (float16 conversions...). The cache key is unchanged:
#   the same source, compiler and flags give the same code either way (and the line table
#   already records the compiling process's working directory, which no key holds).
# * Threads: NVRTC's documentation calls its API thread-safe for distinct programs and
#   says nothing of PCH; the PCH heap and the PCH files are process-wide. Creation is
#   therefore serialized: one thread at a time creates (a lock taken without waiting);
#   threads arriving meanwhile compile the whole text without PCH. Once a header's PCH
#   exists, compiles use it concurrently (8 threads: the cubins of a serial run).
# * Fallbacks: any failure of the PCH compile (a compile error, an NVRTC refusing the
#   options) compiles the whole text again without PCH, and that result is the one
#   reported: an error's log is exactly the one without PCH. A PCH that cannot be made
#   (heap exhausted, creation failed, declined 3 times) is not tried again in the process;
#   the heap is never resized (it is process-wide: resizing frees the PCHs of every other
#   NVRTC user in the process, and would race their compiles). A forked child whose parent
#   made or was making a PCH does not use PCH (NVRTC's PCH files are the parent's).
# * When: making the PCH costs its compile ~8 ms more (thread CPU, session 13, dev machine:
#   the first compile of a fresh process 54.4 against 45.9 ms; every later one ~4 ms less).
#   So a header's first compile in a process is the whole text, without PCH (a process
#   that compiles one kernel pays nothing), the second makes the PCH, the rest use it.
# * ``THORK_NVRTC_PCH=0`` turns it off; NVRTC before 12.8 never gets the options.

#: The options of a compile through a precompiled prelude: automatic PCH, no messages in
#: the log (a user's log stays as without PCH).
_PCH_FLAGS = ("-pch", "-pch-messages=false", "-pch-verbose=false")

#: NVRTC's PCH creation statuses (nvrtcGetPCHCreateStatus).
_PCH_CREATED, _PCH_NOT_ATTEMPTED = 0, 13

_pch_lock = threading.Lock()
#: Header name -> True (its PCH exists in this process) or False (not to be tried again).
_pch_state: dict[str, bool] = {}
#: Header name -> compiles that tried to create its PCH and got "not attempted".
_pch_declined: dict[str, int] = {}
#: Header names compiled once (without PCH) in this process.
_pch_seen: set[str] = set()
_pch_forked = False


def _after_fork() -> None:
    global _pch_lock, _pch_forked
    if _pch_state or _pch_lock.locked():
        _pch_forked = True
    _pch_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def pch_state() -> dict[str, bool]:
    """A copy of this process's precompiled preludes: header name -> True (made and used)
    or False (could not be made; not tried again). For tests and diagnostics."""
    return dict(_pch_state)


def prelude_header(source: str, flags: Sequence[str]) -> tuple[str, str, str] | None:
    """``source`` as (header name, header text, main text) where it begins with
    :meth:`CudaRenderer.prelude` (None where it does not): the header is the prelude,
    named ``thork_prelude_<digest>.h`` by the SHA-256 of the prelude and ``flags``; the main
    file includes it and keeps every line of the rest at its number in ``source``."""
    from thork_core.ir import CudaRenderer
    from thork_core.plugin import sha256_hex

    prelude = CudaRenderer().prelude()
    lines = prelude.count("\n")
    if lines < 2 or not prelude.endswith("\n") or not source.startswith(prelude):
        return None
    digest = sha256_hex("\0".join((prelude, *flags)).encode())[:16]
    name = f"thork_prelude_{digest}.h"
    return name, prelude, f'#include "{name}"\n;' + "\n" * (lines - 1) + source[len(prelude):]


def _compile_with_pch(source: str, entry: str, kind: str, flags: Sequence[str],
                      ) -> tuple[bool, str, bytes] | None:
    """Compile ``source`` through its precompiled prelude (see above); None where it is
    not to be used or its compile failed (the caller compiles the whole text)."""
    if _pch_forked or any("pch" in f for f in flags):  # the caller's own PCH options
        return None
    split = prelude_header(source, flags)
    if split is None:
        return None
    name, header, main = split
    state = _pch_state.get(name)
    if state is False:
        return None
    creator = False
    if state is None:
        if name not in _pch_seen:  # a process's first compile: no PCH to make yet
            _pch_seen.add(name)
            return None
        if not _pch_lock.acquire(blocking=False):
            return None  # another thread is creating a PCH: the whole text, no waiting
        creator = True
        if name in _pch_state:  # made (or given up) while this thread looked
            _pch_lock.release()
            creator = False
            if not _pch_state[name]:
                return None
    status: list[int] = []
    try:
        try:
            out = _run(main, entry, kind, [*flags, *_PCH_FLAGS], ((name, header),),
                       status if creator else None)
        except Exception:  # noqa: BLE001 - an NVRTC refusing the options: the whole text
            if creator:
                _pch_state[name] = False
            return None
        if creator and not out[0]:
            if status and status[0] == _PCH_CREATED:
                _pch_state[name] = True
            elif status and status[0] == _PCH_NOT_ATTEMPTED:
                _pch_declined[name] = _pch_declined.get(name, 0) + 1
                if _pch_declined[name] >= 3:
                    _pch_state[name] = False
            else:  # heap exhausted, creation failed: not again in this process
                _pch_state[name] = False
    finally:
        if creator:
            _pch_lock.release()
    return None if out[0] else out
