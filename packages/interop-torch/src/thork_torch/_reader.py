"""torch.Tensor's C array reader for Thork's native launcher (``_reader.cpp``).

Core's native launcher reads a torch tensor through torch's Python API by default
(``is_cuda``, ``dtype``, ``is_contiguous()``, ``data_ptr()``, the current stream): about
0.4x of a kernel launch's own time on the H200, which keeps ``kernel[grid, block](...)``
with torch tensors above 1.15x the C launch floor however little the launcher adds
(docs/benchmarks.md, "Session 18"). This module builds ``_reader.cpp`` against the
installed torch (a C++ compiler, torch's headers and libraries, CUDA's runtime header)
through :func:`thork_core.build.host_extension`, once per torch and Python (the disk cache
keeps it), and hands its capsule to the launcher (``thork_array_reader.h``): the same
reads in C++, no Python call.

``THORK_TORCH_READER`` says when it is built:

* ``auto`` (default): a process that needs it and finds it cached loads it; one that does
  not find it starts the build in a separate process and keeps torch's Python API until
  the build is done (then the reader is registered: :func:`thork_core.launch.refresh_readers`);
* ``build``: built in the process that first needs it (that call waits, ~15-40 s once);
* ``0``: never (torch's Python API).

:func:`build_reader` builds and loads it now; :func:`reader_status` says what this process
uses and why (``thork info`` prints :func:`reader_report`, the same without building).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from types import ModuleType
from typing import Any

__all__ = ["build_reader", "reader_capsule", "reader_report", "reader_status"]

_NAME = "_thork_torch_reader"
_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_reader.cpp")
_LOCK = threading.Lock()
#: "module": the loaded reader; "status": what this process uses and why (set once the
#: process has looked: at most one background build per process).
_STATE: dict[str, Any] = {}
_POLICIES = ("auto", "build", "0")


def _policy() -> str:
    raw = os.environ.get("THORK_TORCH_READER", "auto").strip().lower()
    if raw in ("", "auto"):
        return "auto"
    if raw in ("build", "1", "on", "yes", "true"):
        return "build"
    if raw in ("0", "off", "no", "false"):
        return "0"
    from thork_core import PluginError

    raise PluginError(f"THORK_TORCH_READER: one of {', '.join(_POLICIES)} expected, "
                      f"got {raw!r}")


def _cuda_include() -> str | None:
    """A folder holding ``cuda_runtime_api.h`` (torch's CUDA headers include it): the
    toolkit's ($CUDA_HOME, $CUDA_PATH, /usr/local/cuda, nvcc's) or the
    nvidia-cuda-runtime wheel's that CUDA builds of torch install; None if none."""
    import importlib.util

    roots = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""),
             "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    for name in ("nvidia.cuda_runtime", "nvidia.cu13", "nvidia.cu12"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.submodule_search_locations:
            roots += list(spec.submodule_search_locations)
    for root in roots:
        if root and os.path.isfile(os.path.join(root, "include", "cuda_runtime_api.h")):
            return os.path.join(root, "include")
    return None


def build_recipe(torch: Any, std: str = "c++20") -> dict[str, Any]:
    """How to build a C++ extension against ``torch`` (the imported module): the
    compiler, the flags (this Python's headers, torch's headers and libraries with an
    rpath to them, its C++ ABI, ``std``, CUDA's runtime header and ``-DTHORK_TORCH_CUDA``
    for a CUDA build of torch) and what else the library depends on (torch's version
    and folder). The benchmark's libtorch bound (bench/_floor.py) builds with it too.

    Raises:
        thork_core.CompileError: This Python has no headers.
        thork_core.PluginError: No C++ compiler, or a CUDA build of torch without
            CUDA's runtime header.
    """
    from thork_core import PluginError
    from thork_core.build import python_flags
    from thork_core.launch import array_reader_include

    cxx = os.environ.get("CXX") or "c++"
    if shutil.which(cxx.split()[0]) is None:
        raise PluginError(f"no C++ compiler {cxx.split()[0]!r} (set CXX)")
    tdir = os.path.dirname(os.path.abspath(torch.__file__))
    lib = os.path.join(tdir, "lib")
    abi = int(bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)))
    cuda = getattr(torch.version, "cuda", None) is not None
    flags = [f"-std={std}", *python_flags(), f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
             "-I", os.path.join(tdir, "include"),
             "-I", os.path.join(tdir, "include", "torch", "csrc", "api", "include"),
             "-I", array_reader_include()]
    libs = ["-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python"]
    if cuda:
        inc = _cuda_include()
        if inc is None:
            raise PluginError("torch is a CUDA build but no cuda_runtime_api.h was found "
                              "(set CUDA_HOME)")
        flags += ["-DTHORK_TORCH_CUDA", "-I", inc]
        libs.append("-lc10_cuda")
    return {"compiler": cxx, "flags": flags, "libs": ["-L", lib, *libs, f"-Wl,-rpath,{lib}"],
            "extra": [torch.__version__, tdir], "cuda": cuda}


_STDS = ("c++20", "c++17")


def _extension(recipe: dict[str, Any], build: bool, load: bool = True) -> ModuleType | None:
    from thork_core.build import host_extension

    return host_extension(_NAME, _SOURCE, compiler=recipe["compiler"],
                          flags=recipe["flags"], libs=recipe["libs"],
                          extra_key=recipe["extra"], build=build, load=load)


def _lookup(torch: Any, build: bool) -> ModuleType | None:
    """The reader module for ``torch``: cached under either C++ standard, else (``build``)
    built now, C++20 first and C++17 where the compiler refuses it."""
    for std in _STDS:
        mod = _extension(build_recipe(torch, std), build=False)
        if mod is not None:
            return mod
    if not build:
        return None
    return _build_first([build_recipe(torch, std) for std in _STDS])


def _build_first(recipes: list[dict[str, Any]], load: bool = True) -> ModuleType | None:
    """Build with the first recipe the compiler accepts (into the cache; loaded with
    ``load``); the last recipe's CompileError when none is."""
    from thork_core import CompileError

    last: CompileError | None = None
    for recipe in recipes:
        try:
            return _extension(recipe, build=True, load=load)
        except CompileError as exc:
            last = exc
    assert last is not None
    raise last


def build_reader() -> ModuleType:
    """Build (or find cached) and load the reader now, and register it with the native
    launcher for torch tensors (whatever ``THORK_TORCH_READER`` says, but ``0``).

    Returns:
        The extension module (``reader``, ``read(obj)``, ``current_stream(device)``).

    Raises:
        thork_core.PluginError: ``THORK_TORCH_READER=0``, or no C++ compiler or CUDA
            header.
        thork_core.CompileError: The build failed (the compiler's last lines).
    """
    from thork_core import PluginError

    if _policy() == "0":
        raise PluginError("THORK_TORCH_READER=0: the C reader is off")
    import torch

    with _LOCK:
        mod = _STATE.get("module")
        if mod is None:
            mod = _lookup(torch, build=True)
            assert mod is not None
            _use(mod)
    _refresh()
    return mod


def reader_capsule() -> Any | None:
    """The reader's capsule for core's launcher where it can read CUDA tensors here now
    (loaded, found in the cache, or built as ``THORK_TORCH_READER`` says), else None
    (torch's Python API serves; a background build may be under way). Never raises."""
    mod = _STATE.get("module")
    if mod is None and "status" not in _STATE:
        mod = _first_look()
    return mod.reader if mod is not None and mod.cuda else None


def _first_look(build_missing: bool = True) -> ModuleType | None:
    """Decide once per process what reads tensors (the status says what and why): the
    cached reader, or (``build_missing``) a build as the policy says. Nothing is decided
    while torch is not imported (no tensor can reach the launcher yet), nor without
    ``build_missing`` when the reader would have to be built."""
    with _LOCK:
        if "module" in _STATE or "status" in _STATE:
            return _STATE.get("module")
        torch = sys.modules.get("torch")
        if torch is None:
            return None
        try:
            policy = _policy()
            if policy == "0":
                _STATE["status"] = "off (THORK_TORCH_READER=0)"
                return None
            if getattr(torch.version, "cuda", None) is None:
                _STATE["status"] = "not used (torch has no CUDA here)"
                return None
            if not torch.cuda.is_available():  # no CUDA tensor will reach the hot paths
                _STATE["status"] = "not used (torch sees no GPU here)"
                return None
            mod = _lookup(torch, build=build_missing and policy == "build")
        except Exception as exc:  # noqa: BLE001 - the Python API serves; status says why
            _STATE["status"] = f"unavailable: {exc}"
            return None
        if mod is not None:
            _use(mod)
            return mod
        if not build_missing:
            return None
        if getattr(sys, "frozen", False):  # sys.executable is the application, not Python
            _STATE["status"] = ("not built (a frozen application cannot build it in the "
                                "background: call thork_torch.build_reader())")
            return None
        _STATE["status"] = "building in the background (torch's Python API until then)"
        _start_background(torch)
        return None


def _start_background(torch: Any) -> None:
    """Build in a separate process (this one keeps running; the build outlives it if it
    exits first); when it ends here, load and register the reader."""
    try:
        spec = json.dumps({"recipes": [build_recipe(torch, std) for std in _STDS]})
    except Exception as exc:  # noqa: BLE001
        _STATE["status"] = f"unavailable: {exc}"
        return
    try:
        proc = subprocess.Popen([sys.executable, "-m", "thork_torch._reader", spec],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        _STATE["status"] = f"unavailable: the build could not start: {exc}"
        return

    def wait() -> None:
        _, err = proc.communicate()
        with _LOCK:
            if proc.returncode != 0:
                _STATE["status"] = ("unavailable: the background build failed: "
                                    f"{err.decode(errors='replace').strip()[-600:]}")
                return
            try:
                mod = _lookup(torch, build=False)
            except Exception as exc:  # noqa: BLE001
                _STATE["status"] = f"unavailable: {exc}"
                return
            if mod is None:
                _STATE["status"] = "unavailable: the background build left no library"
                return
            _use(mod, "; built in the background")
        _refresh()

    threading.Thread(target=wait, name="thork-torch-reader-build", daemon=True).start()


def _use(mod: ModuleType, how: str = "") -> None:
    """Serve with ``mod`` from now on (the caller holds the lock)."""
    _STATE["module"] = mod
    _STATE["status"] = f"ready ({'C++, CUDA' if mod.cuda else 'C++, CPU only'}{how})"


def _refresh() -> None:
    """Register the reader with core's launcher (types already decided are asked again)."""
    from thork_core.launch import refresh_readers

    refresh_readers()


def reader_status() -> str:
    """What this process uses to read torch tensors on the native path, and why (it
    decides now where nothing was decided yet: see ``THORK_TORCH_READER``)."""
    reader_capsule()
    return str(_STATE.get("status", "not decided yet (torch is not imported)"))


def reader_report() -> str:
    """What :func:`reader_status` says, for ``thork info``: torch imported if installed,
    the cached reader loaded if there is one; nothing is built or started."""
    if "status" not in _STATE:
        try:
            import torch  # noqa: F401 - what the status depends on
        except ImportError:
            return "torch is not installed"
        _first_look(build_missing=False)
    if "status" not in _STATE:
        how = ("built by the first launch with a CUDA tensor, which waits"
               if _policy() == "build" else
               "built in the background by the first launch with a CUDA tensor")
        return (f"C++ reader not built yet ({how}; thork_torch.build_reader() builds it "
                "now); torch's Python API until then")
    return str(_STATE["status"])


def _reset() -> None:
    """Forget the loaded reader (tests)."""
    with _LOCK:
        _STATE.clear()


def _build_main(spec: str) -> int:
    """The background build (``python -m thork_torch._reader SPEC``): the recipes the
    parent computed; this process neither imports torch nor loads the library."""
    from thork_core import CompileError

    try:
        _build_first(json.loads(spec)["recipes"], load=False)
    except CompileError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_build_main(sys.argv[1]))
