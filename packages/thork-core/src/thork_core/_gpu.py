"""The GPU target: load cubin/PTX through the CUDA driver and launch with cuLaunchKernel.

Launch arguments are pre-packed: each executable owns one ctypes slot per parameter and a
``void*`` array pointing at them, so a launch with device arrays writes the slots and
makes one driver call. NumPy arguments are staged through pinned memory and the pool.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

from . import _cuda
from ._adapter import ArrayView
from ._arch import gpu_arch
from ._artifact import Artifact
from ._binding import array_view, check_array, scalar_value
from ._device_array import DeviceArray
from ._errors import ArgumentError, LaunchError
from ._ir import KernelIR, PointerType
from ._launch import PreparedLaunch
from ._renderer import CudaRenderer, Renderer
from ._target import ArgumentPack, Dim3, Executable, Target

__all__ = ["GpuTarget", "GpuExecutable"]


class GpuExecutable(Executable):
    """A kernel loaded into a CUDA module on one device."""

    def __init__(self, artifact: Artifact, kernel: KernelIR, ordinal: int = 0) -> None:
        drv = _cuda.driver()
        _cuda.make_current(ordinal)
        self.ordinal = ordinal
        self.kernel = kernel
        data = artifact.data + (b"\0" if artifact.kind == "ptx" else b"")
        self._module = _cuda.check(drv.cuModuleLoadData(data), "cuModuleLoadData")
        self._function = _cuda.check(
            drv.cuModuleGetFunction(self._module, artifact.entry.encode()),
            "cuModuleGetFunction",
        )
        self._launch_fn, self._by_ctypes = _launcher()
        if kernel.cooperative:  # a grid barrier: launched cooperatively (h-lang)
            self._launch_fn, self._by_ctypes = _cooperative_launcher(), False
        # ctypes takes the raw handle (pre-converted once); cuda-bindings its own object.
        self._function_arg = (ctypes.c_void_p(int(self._function)) if self._by_ctypes
                              else self._function)
        self._setup_args(kernel)
        self.attributes = self._read_attributes()

    def _setup_args(self, kernel: KernelIR) -> None:
        """The argument pack, and what the fast path of :meth:`launch` needs."""
        self.args = ArgumentPack(kernel.params)
        self._slots = self.args.slots
        self._argv_addr = self.args.address
        self._pointer = self.args.pointer
        # Expected __cuda_array_interface__ typestr per pointer parameter, for the fast
        # path; disabled with several devices (the owning device must then be checked).
        self._fast: list[str | None] | None = [
            _TYPESTR.get(p.type.elem.name) if isinstance(p.type, PointerType) else None
            for p in kernel.params
        ] if _cuda.device_count() == 1 else None
        self._elem = [p.type.elem if isinstance(p.type, PointerType) else None
                      for p in kernel.params]
        self._dynamic_limit = 48 * 1024  # CUDA's default cap on dynamic shared memory

    def _allow_dynamic_shared(self, nbytes: int) -> None:
        """A launch asking for more than 48 KiB of dynamic shared memory must opt in."""
        drv = _cuda.driver()
        attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        _cuda.check(drv.cuFuncSetAttribute(self._function, attr, nbytes),
                    f"{self.kernel.name}: allowing {nbytes} bytes of dynamic shared memory")
        self._dynamic_limit = nbytes

    def max_coresident_blocks(self, block: Dim3, shared_mem: int = 0) -> int:
        """How many blocks of this kernel with ``block`` threads and ``shared_mem``
        dynamic shared bytes the device holds at once (the limit of a cooperative
        launch): the occupancy calculator's blocks per SM times the SMs."""
        function = getattr(self, "_function", None)
        if function is None or type(self)._run is not GpuExecutable._run:
            raise LaunchError(
                f"{self.kernel.name}: uses tk.grid_sync(), which needs a cooperative launch "
                f"(cuLaunchCooperativeKernel); {type(self).__name__} cannot make one: run it "
                "on the 'gpu' or 'cpu' target")
        drv = _cuda.driver()
        per_sm = _cuda.check(drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(
            function, block[0] * block[1] * block[2], shared_mem),
            "cuOccupancyMaxActiveBlocksPerMultiprocessor")
        dev = _cuda.check(drv.cuDeviceGet(self.ordinal), "cuDeviceGet")
        sms = _cuda.check(drv.cuDeviceGetAttribute(
            drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev),
            "cuDeviceGetAttribute")
        return int(per_sm) * int(sms)

    def _read_attributes(self) -> dict[str, int]:
        drv = _cuda.driver()
        a = drv.CUfunction_attribute
        out = {}
        for key, attr in (
            ("registers", a.CU_FUNC_ATTRIBUTE_NUM_REGS),
            ("shared_bytes", a.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
            ("local_bytes", a.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES),
            ("max_threads_per_block", a.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
        ):
            err, v = drv.cuFuncGetAttribute(attr, self._function)
            if int(err) == 0:
                out[key] = int(v)
        return out

    def launch(
        self, grid: Dim3, block: Dim3, args: Sequence[Any], *, stream: Any = None,
        shared_mem: int = 0,
    ) -> None:
        handle = 0 if stream is None else _cuda.stream_handle(stream)
        kernel = self.kernel
        host: list[tuple[int, ArrayView]] = []
        slots = self._slots
        fast = self._fast
        for i, arg in enumerate(args):
            param = kernel.params[i]
            if not self._pointer[i]:
                slots[i].value = scalar_value(arg, param, kernel)
                continue
            # Fast paths: Thork's own DeviceArray, or a device array whose interface needs
            # no check beyond a few lookups (the common hot-loop cases). Anything unusual
            # takes the full path below, which also produces the error messages.
            if type(arg) is DeviceArray and arg.dtype is self._elem[i] \
                    and arg.device == self.ordinal and arg.stream in (0, handle) \
                    and (param.ndim is None or len(arg.shape) == param.ndim):
                slots[i].value = arg.ptr
                continue
            cai = getattr(arg, "__cuda_array_interface__", None) if fast else None
            if cai is not None and cai["typestr"] == fast[i] and not cai.get("strides") \
                    and cai.get("stream") in _DEFAULT_STREAMS:
                ptr, readonly = cai["data"]
                if not (readonly and param.writes) and (
                        param.ndim is None or len(cai["shape"]) == param.ndim):
                    slots[i].value = ptr
                    continue
            view = array_view(arg, param, kernel, handle)
            check_array(view, param, kernel)
            if view.device == "cpu":
                if view.host is None:
                    raise ArgumentError(
                        f"{kernel.name}(): parameter '{param.name}' is host memory that "
                        "Thork cannot copy (not a NumPy array)"
                    )
                host.append((i, view))
                continue
            if view.device_id != self.ordinal:
                raise ArgumentError(
                    f"{kernel.name}(): parameter '{param.name}' lives on cuda:{view.device_id} "
                    f"but the kernel is loaded on cuda:{self.ordinal}"
                )
            if view.stream is not None and view.stream != handle:
                _wait_on(view.stream, handle)
            slots[i].value = view.ptr
        if host:
            self._launch_staged(grid, block, host, handle, shared_mem)
            return
        self._run(grid, block, handle, shared_mem, self._argv_addr)

    def _run(self, grid: Dim3, block: Dim3, handle: int, shared_mem: int, argv: int) -> None:
        if shared_mem > self._dynamic_limit:
            self._allow_dynamic_shared(shared_mem)
        if self._by_ctypes:
            # No argtypes: ints go as C int (grid and block fit), the rest pre-converted.
            err = self._launch_fn(
                self._function_arg, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                shared_mem, ctypes.c_void_p(handle) if handle else None,
                ctypes.c_void_p(argv), None)
        else:
            err = self._launch_fn(
                self._function_arg, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                shared_mem, handle, argv, 0)[0]
        if err:
            self._failed(err, grid, block)

    def _failed(self, err: Any, grid: Dim3, block: Dim3) -> None:
        _cuda.check((_cuda.driver().CUresult(int(err)),),
                    f"launching {self.kernel.name} (grid={grid}, block={block})")

    def prepare(
        self, grid: Dim3, block: Dim3, values: Sequence[Any], *, shared_mem: int = 0,
    ) -> PreparedLaunch:
        if shared_mem > self._dynamic_limit:
            self._allow_dynamic_shared(shared_mem)
        if type(self)._run is GpuExecutable._run and not self.kernel.cooperative:
            return _GpuLaunch(self, grid, block, values, shared_mem)
        return super().prepare(grid, block, values, shared_mem=shared_mem)

    def _launch_staged(
        self, grid: Dim3, block: Dim3, host: list[tuple[int, ArrayView]], handle: int,
        shared_mem: int,
    ) -> None:
        """Copy NumPy arrays in, launch, copy written arrays back, synchronize."""
        from ._memory import device_pool, pinned_staging

        drv = _cuda.driver()
        pool, staging = device_pool(self.ordinal), pinned_staging()
        total = sum(v.nbytes for _, v in host)
        pinned = staging.buffer(total)
        offsets, ptrs = [], []
        try:
            off = 0
            for i, view in host:
                ptr = pool.alloc(view.nbytes, handle)
                ptrs.append(ptr)
                offsets.append(off)
                self._slots[i].value = ptr
                # Every array goes in (unwritten elements must keep their host values).
                staging.upload(view.host, pinned + off, ptr, handle)
                off += view.nbytes
            self._run(grid, block, handle, shared_mem, self._argv_addr)
            event = 0
            pending = []
            for (i, view), ptr, off in zip(host, ptrs, offsets):
                if self.kernel.params[i].writes and view.nbytes:
                    count = staging.download_start(ptr, pinned + off, view.nbytes, handle, event)
                    pending.append((view, off, event))
                    event += count
            for view, off, first in pending:
                staging.download_finish(view.host, pinned + off, first)
            _cuda.check(drv.cuStreamSynchronize(handle), f"running {self.kernel.name}")
        finally:
            for ptr in ptrs:
                pool.free(ptr, handle)


# Typestrs a conforming producer uses for each dtype (bfloat16 has none: full path).
_TYPESTR = {
    "bool": "|b1", "int8": "|i1", "int16": "<i2", "int32": "<i4", "int64": "<i8",
    "uint8": "|u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8", "float16": "<f2",
    "float32": "<f4", "float64": "<f8",
}
# CAI v3 'stream' values needing no synchronization (absent, legacy, per-thread default).
_DEFAULT_STREAMS = (None, 0, 1, 2)


class _GpuLaunch(PreparedLaunch):
    """A prepared GPU launch: every argument of the driver call but the stream is built
    once. A call is one C call into the native module where it could be built
    (:mod:`thork_core._native`, the default launcher), else the pointer-slot writes and one
    foreign call through ctypes or cuda-bindings (the executable's launcher)."""

    __slots__ = ("_fn", "_head", "_argv", "_by_ctypes", "native")

    def __init__(self, exe: GpuExecutable, grid: Dim3, block: Dim3, values: Sequence[Any],
                 shared_mem: int) -> None:
        super().__init__(exe, grid, block, values, shared_mem)
        self._fn = exe._launch_fn
        self._by_ctypes = exe._by_ctypes
        self._head = (exe._function_arg, *grid, *block, shared_mem)
        self._argv = ctypes.c_void_p(self.pack.address) if self._by_ctypes \
            else self.pack.address
        #: The native module's ``Launch`` (None: the ctypes/cuda-bindings path serves).
        self.native: Any = None
        mod = _native_for_launch()
        if mod is not None and len(self.pack.slots) <= 1024 and len(self._pointer_slots) <= 32:
            # (the C module's limits; larger kernels keep the ctypes path)
            self.native = mod.Launch(
                ctypes.cast(_LIBCUDA.cuLaunchKernel, ctypes.c_void_p).value,
                int(exe._function), grid, block, shared_mem, self.pack.address,
                len(self.pack.slots), [ctypes.addressof(s) for s in self._pointer_slots],
                self._on_error)
            self.call = self.native.run

    def _on_error(self, err: int) -> None:
        self.exe._failed(err, self.grid, self.block)  # type: ignore[attr-defined]

    def __call__(self, pointers: Sequence[int], stream: int = 0) -> None:
        if self.native is not None:
            self.native.run(pointers, stream)
            return
        for slot, ptr in zip(self._pointer_slots, pointers):
            slot.value = ptr
        if self._by_ctypes:
            err = self._fn(*self._head, ctypes.c_void_p(stream) if stream else None,
                           self._argv, None)
        else:
            err = self._fn(*self._head, stream, self._argv, 0)[0]
        if err:
            self.exe._failed(err, self.grid, self.block)  # type: ignore[attr-defined]

    def _guard(self, array_type: type, specs: list[Any], order: list[int], align_mask: int,
               to_handle: Any) -> Any:
        if self.native is None:
            return super()._guard(array_type, specs, order, align_mask, to_handle)
        return self.native.guard(array_type, specs, order, align_mask, to_handle)


_LIBCUDA: Any = None


def _launcher_choice() -> str:
    import os

    return os.environ.get("THORK_LAUNCHER", "native").strip().lower() or "native"


def _native_for_launch() -> Any:
    """The native module when it is the launcher (the default) and libcuda is open."""
    if _LIBCUDA is None or _launcher_choice() != "native":
        return None
    from ._native import native_module

    return native_module()


def _cooperative_launcher() -> Any:
    """``cuLaunchCooperativeKernel`` (cuda-bindings) with ``cuLaunchKernel``'s argument list:
    every block of the grid is resident at once, as a grid barrier needs."""
    drv = _cuda.driver()

    def launch(f: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, shared: int,
               stream: int, argv: int, extra: Any) -> Any:
        return drv.cuLaunchCooperativeKernel(f, gx, gy, gz, bx, by, bz, shared, stream, argv)

    return launch


def _launcher() -> tuple[Any, bool]:
    """``cuLaunchKernel`` and whether it is the ctypes binding.

    ``THORK_LAUNCHER``: ``native`` (default) prepares launches in C
    (:mod:`thork_core._native`) and otherwise calls libcuda's ``cuLaunchKernel`` through
    ctypes *without* argument types, as ``ctypes`` does everywhere: the caller passes
    pre-converted pointers and small ints, which ctypes forwards with the least work,
    releasing the GIL. ``bindings`` selects cuda-bindings (returns a tuple).
    ``bench/bench_core.py`` measures the three, interleaved. Falls back to cuda-bindings
    where libcuda cannot be opened by name.
    """
    global _LIBCUDA
    if _launcher_choice() != "bindings":
        try:
            if _LIBCUDA is None:
                _LIBCUDA = ctypes.CDLL("libcuda.so.1")
            fn = _LIBCUDA.cuLaunchKernel
            fn.restype = ctypes.c_int
            return fn, True
        except (OSError, AttributeError):
            pass
    return _cuda.driver().cuLaunchKernel, False


def _wait_on(producer: int, consumer: int) -> None:
    """Order ``consumer`` after the work queued so far on ``producer`` (CAI v3 stream)."""
    drv = _cuda.driver()
    ev = _cuda.check(drv.cuEventCreate(drv.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
    _cuda.check(drv.cuEventRecord(ev, producer), "cuEventRecord")
    _cuda.check(drv.cuStreamWaitEvent(consumer, ev, 0), "cuStreamWaitEvent")
    _cuda.check(drv.cuEventDestroy(ev), "cuEventDestroy")


class GpuTarget(Target):
    """NVIDIA GPUs through cuda-python's driver API."""

    name = "gpu"
    consumes = ("cubin", "ptx")
    language = "cuda"
    priority = 100

    def available(self) -> tuple[bool, str]:
        return _cuda.gpu_status()

    def renderer(self) -> Renderer:
        return CudaRenderer()

    def arch(self) -> str:
        return gpu_arch(0)

    def load(self, artifact: Artifact, kernel: KernelIR) -> Executable:
        if artifact.kind not in self.consumes:
            raise LaunchError(f"the GPU target cannot load a {artifact.kind!r} artifact")
        return GpuExecutable(artifact, kernel, 0)

    def describe(self) -> str:
        ok, why = self.available()
        if not ok:
            return f"gpu: unavailable ({why})"
        names = [
            f"cuda:{i} {_cuda.device_name(i)} (sm_{''.join(map(str, _cuda.compute_capability(i)))})"
            for i in range(_cuda.device_count())
        ]
        return "gpu: " + ", ".join(names)
