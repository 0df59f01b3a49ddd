"""Measure the C-level ``cuLaunchKernel`` floor for comparison with Python launchers.

The measurement itself lives in ``launch_floor.c`` next to this module: a
standalone program that opens ``libcuda.so.1`` with ``dlopen`` and times
back-to-back launches of a trivial kernel. This module compiles it with the
system C compiler (once per process), runs it and parses its output.

Only the standard library is used, so this works without any CUDA Python
bindings installed; it needs a C compiler and an NVIDIA driver.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["KERNEL_SOURCE", "build_libtorch_ideal", "declare_burst", "floor_kernel",
           "graph_burst", "ideal_launcher", "ideal_libtorch", "ideal_torch", "launch_burst",
           "measure_graph_floor", "measure_launch_floor"]

#: The floor's kernel written in Thork (seed 000's matrix_add): bench_core writes it as
#: ``seedkernel.py`` for its child processes, bench_fkl loads it through
#: :func:`floor_kernel`. Its own module, so that the annotations are real objects.
KERNEL_SOURCE = """\
import thork as tk


@tk.jit
def matrix_add(
    out: tk.DevicePointer[tk.dt.float32],
    A: tk.DevicePointer[tk.dt.float32],
    B: tk.DevicePointer[tk.dt.float32],
    bid: tk.Uint[tk.BlockIdx],
    tid: tk.Uint[tk.ThreadIdx],
    bdm: tk.Uint[tk.BlockDim],
):
    i = bid * bdm + tid
    out[i] = A[i] + B[i]
"""


def floor_kernel() -> object:
    """``matrix_add`` from :data:`KERNEL_SOURCE`, imported from a temporary module."""
    import importlib.util

    folder = Path(tempfile.mkdtemp(prefix="thork_floor_kernel_"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = folder / "floor_kernel.py"
    path.write_text(KERNEL_SOURCE)
    spec = importlib.util.spec_from_file_location("floor_kernel", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.matrix_add

_SOURCE = Path(__file__).resolve().with_name("launch_floor.c")
_GRAPH_SOURCE = Path(__file__).resolve().with_name("graph_floor.c")
_BURST_SOURCE = Path(__file__).resolve().with_name("burst_loop.c")
_IDEAL_SOURCE = Path(__file__).resolve().with_name("ideal_launcher.c")
_IDEAL_TORCH_SOURCE = Path(__file__).resolve().with_name("ideal_torch.cpp")

# Output keys printed by launch_floor.c, mapped to the keys returned here.
_KEYS = {
    "launch_floor_us_enqueue": "enqueue_us",
    "launch_floor_us_with_sync": "with_sync_us",
}

# Generous upper bound for one run: the default 20 rounds x 10000 launches
# take well under a second on a healthy GPU; this only guards against hangs.
_RUN_TIMEOUT_S = 600.0
_COMPILE_TIMEOUT_S = 120.0

_lock = threading.Lock()
_binaries: dict[Path, Path] = {}


def _find_compiler() -> str:
    """Return the path of a C compiler, preferring ``$CC``, then ``cc``, then ``gcc``."""
    candidates = [os.environ.get("CC", ""), "cc", "gcc"]
    for name in candidates:
        if name:
            path = shutil.which(name)
            if path is not None:
                return path
    raise RuntimeError("no C compiler found (tried $CC, cc, gcc)")


def _build(source: Path = _SOURCE, shared: bool = False, python: bool = False) -> Path:
    """Compile ``source`` (a C program next to this module; ``shared``: a shared library;
    ``python``: a CPython extension module named for the file, built against this
    interpreter's headers) into a per-process temp dir and return the binary.

    The result is cached for the life of the process; the temp dir is removed
    at interpreter exit.
    """
    with _lock:
        hit = _binaries.get(source)
        if hit is not None and hit.exists():
            return hit
        if not source.is_file():
            raise RuntimeError(f"missing benchmark source {source}")
        tmpdir = Path(tempfile.mkdtemp(prefix="thork_floor_"))
        atexit.register(shutil.rmtree, tmpdir, ignore_errors=True)
        if python:
            import sysconfig

            shared = True
            exe = tmpdir / (source.stem + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))
            include = ["-I", sysconfig.get_paths()["include"]]
        else:
            exe = tmpdir / (source.stem + (".so" if shared else ""))
            include = []
        cmd = [_find_compiler(), "-O2", *(["-shared", "-fPIC"] if shared else []), *include,
               "-o", str(exe), str(source), "-ldl"]
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=_COMPILE_TIMEOUT_S
            )
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"compiling {source} timed out: {' '.join(cmd)}") from exc
        if proc.returncode != 0:
            raise RuntimeError(
                f"compiling {source} failed (exit {proc.returncode}): "
                f"{' '.join(cmd)}\n{proc.stderr.strip()}"
            )
        _binaries[source] = exe
        return exe


def _parse(stdout: str) -> dict[str, float]:
    """Extract the ``key=value`` result lines printed by ``launch_floor``."""
    result: dict[str, float] = {}
    for line in stdout.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key in _KEYS:
            result[_KEYS[key]] = float(value)
    return result


def measure_launch_floor(
    cubin_path: str, kernel_name: str, n: int = 1024, rounds: int = 20,
    launches: int = 10000, stream: str = "legacy",
) -> dict[str, float]:
    """Measure the per-launch host cost of ``cuLaunchKernel`` from C.

    Args:
        cubin_path: Path to a cubin or PTX image containing the kernel.
        kernel_name: Name of a kernel taking ``(float* out, const float* a,
            const float* b)``; it is launched with grid ``n // 128``, block 128.
        n: Floats per device buffer; must be a positive multiple of 128.
        rounds: Timed rounds of ``launches`` back-to-back launches each.
        launches: Launches per round: 10000 (sustained: once the driver's queue
            is full the figure follows the GPU), or a few hundred (a burst below
            the queue depth: host cost alone).
        stream: ``legacy`` (the NULL stream) or ``created`` (a non-blocking stream).

    Returns:
        ``{"enqueue_us": ..., "with_sync_us": ...}``: the median over rounds
        of microseconds per launch, timing the launches alone and the launches
        plus the final ``cuCtxSynchronize`` respectively.

    Raises:
        RuntimeError: If compiling or running the program fails (the message
            carries its stderr), or its output lacks the expected lines.
    """
    exe = _build()
    cmd = [str(exe), os.fspath(cubin_path), kernel_name, str(n), str(rounds), str(launches), stream]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=_RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"launch_floor timed out after {_RUN_TIMEOUT_S:.0f}s") from exc
    if proc.returncode != 0:
        raise RuntimeError(
            f"launch_floor failed (exit {proc.returncode}): {proc.stderr.strip()}"
        )
    result = _parse(proc.stdout)
    missing = sorted(set(_KEYS.values()) - result.keys())
    if missing:
        raise RuntimeError(
            f"launch_floor output lacks {missing}:\n{proc.stdout}{proc.stderr}"
        )
    return result


def measure_graph_floor(cubin_path: str, kernel_name: str, nodes: int, rounds: int = 201,
                        launches: int = 200) -> float:
    """Median microseconds per ``cuGraphLaunch`` from C of a graph of ``nodes`` captured
    launches of ``kernel_name`` (``graph_floor.c``; same kernel signature as
    :func:`measure_launch_floor`, grid 8 x block 128), in bursts of ``launches``."""
    exe = _build(_GRAPH_SOURCE)
    cmd = [str(exe), os.fspath(cubin_path), kernel_name, str(nodes), str(rounds),
           str(launches)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=_RUN_TIMEOUT_S)
    if proc.returncode != 0:
        raise RuntimeError(f"graph_floor failed (exit {proc.returncode}): "
                           f"{proc.stderr.strip()}")
    for line in proc.stdout.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key == "graph_floor_us_enqueue":
            return float(value)
    raise RuntimeError(f"graph_floor output lacks its result:\n{proc.stdout}")


def declare_burst(lib: Any) -> Any:
    """``lib`` (``burst_loop.c`` loaded with ctypes) with every function's argument and
    result types declared (burst_loop.c's head lists them); returns ``lib``."""
    import ctypes

    head = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p,
            ctypes.c_ulonglong, ctypes.c_ulonglong, ctypes.c_ulonglong]
    tails: dict[str, list[Any]] = {
        "launch_burst": [], "launch_burst_extra": [], "launch_burst_ctx": [ctypes.c_void_p],
        "launch_burst_sweep": [ctypes.c_void_p, ctypes.c_size_t]}
    for name, tail in tails.items():
        f = getattr(lib, name)
        f.restype = ctypes.c_double
        f.argtypes = [*head, *tail, ctypes.c_int]
    lib.graph_burst.restype = lib.sweep_burst.restype = ctypes.c_double
    lib.graph_burst.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int]
    lib.sweep_burst.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return lib


def graph_burst() -> Callable[[int, int, int], float]:
    """``burst(exec, stream, k)``: ``k`` back-to-back ``cuGraphLaunch`` calls on the raw
    handles ``exec`` and ``stream``, looped in C inside this process (``burst_loop.c``,
    built once), in microseconds per call. ctypes releases the GIL around the loop.

    Raises:
        RuntimeError: If the library cannot be built, or a launch fails (its code).
    """
    import ctypes

    from thork_core._cuda import function_address

    lib = declare_burst(ctypes.CDLL(str(_build(_BURST_SOURCE, shared=True))))
    fn = function_address("cuGraphLaunch")

    def burst(exec_: int, stream: int, k: int) -> float:
        us = float(lib.graph_burst(fn, exec_, stream, k))
        if us < 0:
            raise RuntimeError(f"cuGraphLaunch failed with driver code {int(-us)}")
        return us

    return burst


def _loaded_function(launch: Any) -> tuple[int, int]:
    """``cuLaunchKernel``'s address and the CUfunction Thork loaded for ``launch`` (a
    ``kernel[grid, block]`` that has run once on the GPU).

    Raises:
        RuntimeError: If the kernel has no loaded GPU function.
    """
    from thork_core._cuda import function_address

    exes = [e for e, _ in launch.kernel._exes.values() if hasattr(e, "_function")]
    if not exes:
        raise RuntimeError("the kernel has no loaded GPU function: launch it once first")
    return function_address("cuLaunchKernel"), int(exes[0]._function)


def _load_extension(name: str, path: Path) -> Any:
    """The CPython extension module ``name`` built at ``path``, imported."""
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.ExtensionFileLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def launch_burst(launch: Any, pointers: tuple[int, int, int]) -> Callable[[int], float]:
    """``burst(k)``: ``k`` back-to-back ``cuLaunchKernel`` calls looped in C inside this
    process (``burst_loop.c``) of the very function Thork loaded for ``launch`` (a
    ``matrix_add[grid, block]`` of :func:`floor_kernel` that has run once on device
    arrays), with its grid and block, on the legacy stream (where DeviceArray launches
    run), with ``pointers`` as out, A, B; microseconds per call. The C floor measured in
    the process, context and thread state of the rows it anchors (the separate program,
    :func:`measure_launch_floor`, runs in a process of its own).

    Raises:
        RuntimeError: If the library cannot be built, the kernel has no loaded GPU
            function, or a launch fails (its code).
    """
    import ctypes

    fn, function = _loaded_function(launch)
    lib = declare_burst(ctypes.CDLL(str(_build(_BURST_SOURCE, shared=True))))
    gx, bx = launch.grid[0], launch.block[0]

    def burst(k: int) -> float:
        us = float(lib.launch_burst(fn, function, gx, bx, None, *pointers, k))
        if us < 0:
            raise RuntimeError(f"cuLaunchKernel failed with driver code {int(-us)}")
        return us

    return burst


def ideal_launcher(launch: Any, arrays: tuple[Any, Any, Any], fixed: tuple[int, int, int],
                   current: Any = None, launch_fn: int | None = None) -> Any:
    """(session 18) ``bench/ideal_launcher.c`` built, imported and set up for ``launch``
    (a ``matrix_add[grid, block]`` of :func:`floor_kernel` that has run once): its
    ``fixed(a, b, c)`` launches with the addresses ``fixed`` and reads nothing; its
    ``arrays(a, b, c)`` does the least any launcher that re-checks each call must do with
    arrays of the type of ``arrays`` (CuPy's: ``_c_contiguous``, ``dtype``, ``data`` and
    the data's ``ptr``, through their C getters; CuPy's stream through ``current``, a
    capsule of ``intptr_t (void)``; default: CuPy's own, when CuPy is imported). The
    launch goes to the legacy stream, with the kernel's grid and block. ``launch_fn``
    stands in for ``cuLaunchKernel`` (tests); then no GPU function is needed.

    Raises:
        RuntimeError: If the module cannot be built or the kernel was never loaded.
    """
    module = _load_extension("ideal_launcher", _build(_IDEAL_SOURCE, python=True))
    launch_fn, function = _loaded_function(launch) if launch_fn is None else (launch_fn, 0)
    if current is None and "cupy" in sys.modules:
        from cupy_backends.cuda import stream as cupy_stream

        current = cupy_stream.__pyx_capi__["get_current_stream_ptr"]
    kind = type(arrays[0])
    data = arrays[0].data
    module.setup(launch_fn, function, launch.grid[0], launch.block[0], 0, current, kind,
                 _descriptor(kind, "_c_contiguous"), _descriptor(kind, "dtype"),
                 _descriptor(kind, "data"), _descriptor(type(data), "ptr"), arrays[0].dtype,
                 tuple(fixed))
    return module


def _descriptor(tp: type, name: str) -> Any:
    """The descriptor ``name`` of type ``tp`` (the first in its MRO that defines it)."""
    for base in tp.__mro__:
        if name in vars(base):
            return vars(base)[name]
    raise RuntimeError(f"{tp.__name__} has no attribute {name!r}")


def ideal_torch(ideal: Any, tensors: tuple[Any, Any, Any], current: Any = None,
                device: int = 0) -> Any:
    """(session 18) ``ideal`` (from :func:`ideal_launcher`) set up for torch tensors of the
    type and dtype of ``tensors``: its ``tensors(a, b, c)`` reads them through torch's
    Python API from C (``is_cuda``, ``dtype``, ``is_contiguous()``, ``data_ptr()``) and asks
    torch's current stream once through ``current(device)`` (default: torch's
    ``torch._C._cuda_getCurrentRawStream``), then launches as ``ideal.arrays`` does.
    Returns ``ideal``."""
    kind = type(tensors[0])
    if current is None:
        import torch

        current = torch._C._cuda_getCurrentRawStream
    ideal.setup_torch(current, device, kind, _descriptor(kind, "is_cuda"),
                      _descriptor(kind, "dtype"), tensors[0].dtype)
    return ideal


def build_libtorch_ideal() -> Any:
    """(session 18) ``bench/ideal_torch.cpp`` built against the installed torch and
    loaded: (session 20) through thork_torch's recipe (``build_recipe``: its headers and
    libraries, its C++ ABI, C++20 else C++17, CUDA's runtime header, this interpreter's
    headers) and core's one build path for host extensions
    (``thork_core.build.host_extension``: the disk cache keeps it for later processes),
    as thork_torch's own reader is built. The module.

    Raises:
        RuntimeError: If no C++ compiler or CUDA header is found, or the build fails (the
            compiler's last lines).
        ImportError: If torch or thork_torch is not installed.
    """
    import torch
    from thork_core import CompileError, PluginError
    from thork_core.build import host_extension
    from thork_torch._reader import build_recipe

    last: Exception | None = None
    for std in ("c++20", "c++17"):
        try:
            r = build_recipe(torch, std)
            return host_extension("ideal_torch", str(_IDEAL_TORCH_SOURCE),
                                  compiler=r["compiler"], flags=r["flags"], libs=r["libs"],
                                  extra_key=r["extra"])
        except PluginError as exc:  # no compiler or header: the other standard is no help
            raise RuntimeError(str(exc)) from exc
        except CompileError as exc:
            last = exc
    raise RuntimeError(f"building {_IDEAL_TORCH_SOURCE.name} failed: {last}")


def ideal_libtorch(launch: Any, device: int = 0) -> Any:
    """(session 18) The extension of :func:`build_libtorch_ideal`, imported and set up for
    ``launch`` (as :func:`ideal_launcher`) on CUDA device ``device``: its
    ``tensors(a, b, c)`` reads the tensors' C++ objects and torch's current stream in C++,
    as a torch C++ extension would, then launches.

    Raises:
        RuntimeError: If the build fails or the kernel was never loaded.
        ImportError: If torch is not installed.
    """
    module = build_libtorch_ideal()
    module.setup(*_loaded_function(launch), launch.grid[0], launch.block[0], 0, device)
    return module
