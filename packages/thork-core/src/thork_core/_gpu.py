"""The GPU target: load cubin/PTX through the CUDA driver and launch with cuLaunchKernel.

A launch binds the caller's arguments into a list of values (one per parameter, built per
call) and hands it to the kernel's launcher (:mod:`thork_core._launch`), which converts
them on its own stack and makes one driver call. NumPy arguments are staged through
pinned memory and the pool.
"""

from __future__ import annotations

import ctypes
import operator
import threading
from collections.abc import Sequence
from typing import Any, cast

from . import _cuda, _memory
from ._adapter import ArrayView
from ._arch import gpu_arch
from ._artifact import Artifact
from ._binding import array_view, check_array, scalar_value
from ._device_array import DeviceArray
from ._dtype import DType, input_typestr
from ._errors import ArgumentError, LaunchError
from ._graph import capture_relaxed
from ._ir import KernelIR, PointerType
from ._launch import CONV_CU, PreparedLaunch, PyLauncher, make_launcher, param_kinds
from ._memory import PinnedBlock as _PinnedBlock
from ._probe import KINDS, cai_pointer, follow, implied_stream, sync_native
from ._renderer import CudaRenderer, Renderer
from ._target import Dim3, Executable, Target

__all__ = ["GpuTarget", "GpuExecutable", "CudaExecutable", "visible_device"]


class CudaExecutable(Executable):
    """A kernel on one CUDA device, launched through its launcher: what every CUDA target
    shares (argument binding, the fast paths for device arrays, stream waits, NumPy
    staging). Subclasses load the kernel and call :meth:`_setup` with its launcher."""

    ordinal: int

    def _setup(self, kernel: KernelIR, ordinal: int, launcher: Any) -> None:
        """What :meth:`launch` needs, once per loaded kernel."""
        self.kernel = kernel
        self.ordinal = ordinal
        self.routes = _cuda.device_count() > 1  # (h-multi) front-ends pick the device
        self.launcher = launcher
        params = kernel.params
        self._pointer = [isinstance(p.type, PointerType) for p in params]
        self._elem = [p.type.elem if isinstance(p.type, PointerType) else None
                      for p in params]
        # Expected __cuda_array_interface__ typestr per pointer parameter, for the fast
        # path; disabled with several devices (the owning device must then be checked).
        self._fast: list[str | None] | None = [
            input_typestr(e) if e is not None else None for e in self._elem
        ] if _cuda.device_count() == 1 else None
        self._dynamic_limit = 48 * 1024  # CUDA's default cap on dynamic shared memory
        self._lock = threading.Lock()
        #: NumPy dtype per pointer parameter for :meth:`_numpy_arg` (made on first use;
        #: an empty list: that path is off).
        self._np_dtypes: list[Any] | None = None
        #: The driver's copy calls and this device's pool, for NumPy round trips (made on
        #: first use: :meth:`_driver_parts`).
        self._copies: Any = None
        self._pool: Any = None
        #: The native checked launch of the common argument kinds (None: Python only).
        self._binder = _binder(launcher, kernel, ordinal, self._fast is not None)

    def _allow_dynamic_shared(self, nbytes: int) -> None:
        """A launch asking for more than 48 KiB of dynamic shared memory must opt in
        (a kernel attribute: raised once, under a lock, never lowered)."""
        with self._lock:
            if nbytes > self._dynamic_limit:
                self._set_dynamic_shared(nbytes)
                self._dynamic_limit = nbytes

    def _set_dynamic_shared(self, nbytes: int) -> None:
        raise LaunchError(f"{self.kernel.name}: this target cannot raise the dynamic shared "
                          f"memory limit to {nbytes} bytes")

    def _failed(self, err: int, grid: Dim3, block: Dim3) -> None:
        """The launcher's ``on_error``: raise LaunchError for driver code ``err``."""
        _cuda.check((_cuda.driver().CUresult(int(err)),),
                    f"launching {self.kernel.name} (grid={tuple(grid)}, block={tuple(block)})")

    def launch(
        self, grid: Dim3, block: Dim3, args: Sequence[Any], *, stream: Any = None,
        shared_mem: int = 0,
    ) -> None:
        handle = implied_stream(args) if stream is None else stream if type(stream) is int \
            else _cuda.stream_handle(stream)
        binder = self._binder
        if binder is not None and shared_mem <= self._dynamic_limit \
                and binder(grid, block, shared_mem, handle, args):
            return  # every argument was a common kind: checked and launched in C
        kernel = self.kernel
        host: list[tuple[int, ArrayView | _HostArray]] | None = None
        followed: list[tuple[Any, Any, int]] | None = None
        values = list(args)  # this call's own values: threads never share them
        fast = self._fast
        # Page-locked NumPy arrays bound by the fast path have their copy in queued as soon
        # as each is bound (issue 11, session 13): the DMA runs while the other arguments
        # are bound and the launch is prepared. Should anything after fail, those copies are
        # waited for and their device memory freed before the error propagates.
        queued: list[Any] | None = None
        try:
            for i, arg in enumerate(args):
                param = kernel.params[i]
                if not self._pointer[i]:
                    values[i] = scalar_value(arg, param, kernel)
                    continue
                # Fast paths: Thork's own DeviceArray, or a device array whose interface needs
                # no check beyond a few lookups (the common hot-loop cases). Anything unusual
                # takes the full path below, which also produces the error messages.
                if type(arg) is DeviceArray and arg.dtype is self._elem[i] \
                        and arg.device == self.ordinal and arg.stream in (0, handle) \
                        and (param.ndim is None or len(arg.shape) == param.ndim):
                    values[i] = arg.ptr
                    continue
                if type(arg) is _NDARRAY[0]:  # a plain NumPy array: its facts read directly
                    got_host = self._numpy_arg(arg, i, param)
                    if got_host is not None:
                        if got_host.pinned:  # page-locked: its copy in is queued now
                            if queued is None:
                                queued = []
                            elif _overlapping([(i, got_host)], queued):
                                host = [] if host is None else host
                                host.append((i, got_host))  # bound below with its alias
                                continue
                            values[i] = self._queue_in(got_host, param.writes, handle, queued)
                            continue
                        host = [] if host is None else host
                        host.append((i, got_host))
                        continue
                kind = KINDS.get(type(arg))
                if kind is not None and kind.__class__ is not str:  # a torch tensor (h-interop)
                    got = kind.fast(arg)  # (address, (type, shape, DType, device), current, device)
                    if got is not None and got[1][2] is self._elem[i] \
                            and got[3] == self.ordinal \
                            and (param.ndim is None or len(got[1][1]) == param.ndim):
                        if got[2] != handle:  # another stream: wait for torch's, record
                            followed = [] if followed is None else followed
                            followed.append((arg, kind, got[2]))
                        values[i] = got[0]
                        continue
                if fast is not None:
                    ptr = cai_pointer(arg, fast[i], ndim=-1 if param.ndim is None else param.ndim,
                                      writable=param.writes, device=self.ordinal)
                    if ptr is not None:
                        values[i] = ptr
                        continue
                view = array_view(arg, param, kernel, handle)
                check_array(view, param, kernel)
                if view.device == "cpu":
                    if self._np_dtypes is None and view.host is not None:
                        self._np_dtypes = _numpy_dtypes(self._elem)  # the next call's fast path
                    if view.host is None:
                        raise ArgumentError(
                            f"{kernel.name}(): parameter '{param.name}' is host memory that "
                            "Thork cannot copy (not a NumPy array)"
                        )
                    if host is None:
                        host = []
                    host.append((i, view))
                    continue
                if view.device_id != self.ordinal:
                    raise ArgumentError(
                        f"{kernel.name}(): parameter '{param.name}' lives on cuda:{view.device_id} "
                        f"but the kernel is loaded on cuda:{self.ordinal}"
                    )
                if view.stream is not None and view.stream != handle:
                    _cuda.stream_wait(self.ordinal, view.stream, handle)
                values[i] = view.ptr
            if followed is not None:
                follow(followed, handle, self.ordinal)
            if shared_mem > self._dynamic_limit:
                self._allow_dynamic_shared(shared_mem)
        except BaseException:
            if queued:
                self._abandon(queued, handle)
            raise
        if queued:
            self._launch_staged(grid, block, values, host or [], handle, shared_mem, queued)
            return
        if host:
            self._launch_staged(grid, block, values, host, handle, shared_mem)
            return
        self.launcher.run(grid, block, shared_mem, handle, values)

    def _numpy_arg(self, arg: Any, i: int, param: Any) -> _HostArray | None:
        """A plain ``numpy.ndarray`` argument bound without the adapter lookup: what
        :func:`~thork_core._binding.array_view` and :func:`check_array` would find and
        accept (dtype, dimensions, C order, writable where written), read from the array
        itself (~1.5 us instead of ~10 on the dev machine); None for anything else, which
        the full path then binds or rejects with its error. Used only while the NumPy
        adapter is the one that takes ``numpy.ndarray`` (a plugin may register another)."""
        np_dtypes = self._np_dtypes
        if np_dtypes is None:
            np_dtypes = self._np_dtypes = _numpy_dtypes(self._elem)
        want = np_dtypes[i] if np_dtypes else None
        if want is None or arg.dtype != want or not arg.nbytes \
                or (param.ndim is not None and arg.ndim != param.ndim):
            return None
        flags = arg.flags
        if not flags.c_contiguous:
            return None
        if flags.writeable:  # the buffer protocol's address: cheaper than .ctypes
            ptr = ctypes.addressof(ctypes.c_char.from_buffer(arg))
        elif param.writes:
            return None
        else:
            ptr = arg.ctypes.data
        # Page-locked (a pinned_empty array or a view of one)? NumPy links every view to
        # the array over the PinnedBlock (whose base is the block): two type checks.
        base: Any = arg.base
        pinned = False
        if base is not None:
            block = cast(Any, base).base if type(base) is _NDARRAY[0] else base
            if type(block) is _PinnedBlock:
                pinned = block.address != 0
            elif block is not None:  # any other chain: walked
                pinned = _memory.pinned_base(block) is not None
        return _HostArray(ptr, arg.nbytes, arg, pinned)

    def _queue_in(self, h: _HostArray, back: bool, handle: int, queued: list[Any]) -> int:
        """Allocate device memory for page-locked array ``h`` and queue its copy in on
        stream ``handle`` now; record it in ``queued`` (a :class:`~thork_core._staging.
        Transfer` marked as queued); return the device address."""
        copies, pool = self._copies, self._pool
        if copies is None or pool is None:
            copies, pool = self._driver_parts()
        if not queued:
            _cuda.make_current(self.ordinal)  # once per call, before its first allocation
        nbytes = h.nbytes
        dev = pool.alloc(nbytes, handle)
        err = copies.htod(dev, h.ptr, nbytes, handle)  # first: the DMA starts, then the rest
        if err:
            pool.free(dev, handle)
            raise copies.fail(err, "cuMemcpyHtoDAsync")
        queued.append(_transfer()(h.ptr, dev, nbytes, True, back, True))
        return dev

    def _driver_parts(self) -> tuple[Any, Any]:
        """The process's driver copy calls and this device's pool (made on first use)."""
        from . import _staging

        _cuda.make_current(self.ordinal)
        self._copies = _staging.driver_copies()
        self._pool = _memory.device_pool(self.ordinal)
        return self._copies, self._pool

    def _abandon(self, queued: list[Any], handle: int) -> None:
        """A launch failed after queuing copies in: give their device memory back and wait
        for the copies (they read the caller's arrays), keeping the launch's own error."""
        copies, pool = self._driver_parts()
        try:
            for t in queued:
                pool.free(t.device, handle)
        finally:
            copies.stream_sync(handle)

    def prepare(
        self, grid: Dim3, block: Dim3, values: Sequence[Any], *, shared_mem: int = 0,
    ) -> PreparedLaunch:
        if shared_mem > self._dynamic_limit:
            self._allow_dynamic_shared(shared_mem)
        return PreparedLaunch(self, grid, block, values, shared_mem)

    def _launch_staged(
        self, grid: Dim3, block: Dim3, values: list[Any],
        host: list[tuple[int, ArrayView | _HostArray]], handle: int, shared_mem: int,
        queued: Sequence[Any] = (),
    ) -> None:
        """Copy NumPy arrays in, launch, copy written arrays back, synchronize once
        (:func:`~thork_core._staging.round_trip`).

        Arrays from :func:`~thork_core.pinned_empty` are copied to and from directly
        (``queued``: those whose copy in :meth:`launch` queued already, their device
        addresses in ``values``); pageable ones go through a staging buffer lent to this
        call alone (:func:`~thork_core._memory.staging`), so concurrent launches never
        share one. The device memory goes back to the pool in stream order right after the
        last copy is queued, before the synchronization."""
        from . import _staging

        copies, pool = self._copies, self._pool
        if copies is None or pool is None:
            copies, pool = self._driver_parts()  # (makes the device's context current)
        elif not queued:  # (queuing made it current)
            _cuda.make_current(self.ordinal)
        params = self.kernel.params
        pinned_base = _memory.pinned_base
        transfers: list[_staging.Transfer] = list(queued)
        owned = list(map(_DEVICE, queued))  # device memory not yet given back
        try:
            if host and _overlapping(host, queued):
                self._bind_aliased(values, host, transfers, owned, pool, handle)
            else:
                for i, view in host:
                    nbytes = view.nbytes
                    direct = pinned_base(view.host) is not None
                    ptr = pool.alloc(nbytes, handle)
                    owned.append(ptr)
                    transfers.append(_staging.Transfer(view.ptr, ptr, nbytes, direct,
                                                       params[i].writes))
                    values[i] = ptr

            def run() -> None:
                self.launcher.run(grid, block, shared_mem, handle, values)

            def release() -> None:  # after the last queued copy, in stream order
                while owned:
                    pool.free(owned.pop(), handle)

            name = self.kernel.name
            staged = _staging.staged_bytes(transfers)
            if not staged:  # page-locked arrays only: no staging buffer, no lanes
                _staging.round_trip(copies, None, handle, transfers, run,
                                    key=self.ordinal, what=name, before_sync=release)
                return
            with _memory.staging(staged) as stage:
                _staging.round_trip(copies, stage, handle, transfers, run,
                                    key=self.ordinal, what=name, before_sync=release)
        finally:
            for ptr in owned:
                pool.free(ptr, handle)

    def _bind_aliased(
        self, values: list[Any], host: Sequence[tuple[int, ArrayView | _HostArray]],
        transfers: list[Any], owned: list[int], pool: Any, handle: int,
    ) -> None:
        """Bind host arrays of which some share memory (:func:`_overlapping` said so):
        the kernel must see one memory, as on the CPU target and with device arrays.

        The arrays and the queued page-locked copies (``transfers`` holds them on entry)
        are grouped by overlapping byte ranges. An array alone is copied as usual. A group
        is one device copy of the union of its ranges, copied in once (a queued copy that
        already spans the union is reused), each parameter's pointer at its own offset
        into it; what comes back is the union of the written parameters' ranges (nothing
        when none writes). The copy keeps each host address's alignment (modulo 256
        bytes), so a parameter's device pointer is aligned as its array is. Appends to
        ``transfers`` and the device allocations to ``owned``; sets ``values``."""
        Transfer = _transfer()
        params = self.kernel.params
        pointer = self._pointer
        # (start, end, parameter, written, page-locked, its queued Transfer or None)
        members: list[tuple[int, int, int, bool, bool, Any]] = []
        groups: list[list[tuple[int, int, int, bool, bool, Any]]] = []
        for i, view in host:
            ptr, nbytes = view.ptr, view.nbytes
            direct = view.pinned if type(view) is _HostArray \
                else _memory.pinned_base(view.host) is not None
            m = (ptr, ptr + nbytes, i, params[i].writes, direct, None)
            if nbytes:
                members.append(m)
            else:  # empty: shares no byte, bound alone
                groups.append([m])
        for t in transfers:  # queued page-locked arrays: one parameter each
            dev = t.device
            for j, v in enumerate(values):
                if type(v) is int and v == dev and pointer[j]:
                    members.append((t.host, t.host + t.nbytes, j, t.back, True, t))
                    break
            else:  # (launch() set it: cannot happen)
                raise LaunchError(f"{self.kernel.name}: a queued copy's parameter is lost")
        members.sort(key=_start)
        end = -1
        for m in members:
            if m[0] < end:  # overlaps the group being built
                groups[-1].append(m)
                if m[1] > end:
                    end = m[1]
            else:
                groups.append([m])
                end = m[1]
        for g in groups:
            lo, hi, i, writes, direct, q = g[0]
            if len(g) == 1:
                if q is None:  # an array alone (a queued one stays as it is)
                    ptr = pool.alloc(hi - lo, handle)
                    owned.append(ptr)
                    transfers.append(Transfer(lo, ptr, hi - lo, direct, writes))
                    values[i] = ptr
                continue
            back, keeps = writes, True  # (the first member is at offset 0)
            for start, stop, _, writes, pinned, t in g[1:]:
                hi = stop if stop > hi else hi
                back = back or writes
                direct = direct and pinned
                q = q or t
                if keeps and (start - lo) % _alignment(start):
                    keeps = False  # this member's device pointer would be less aligned
            spans = _written_spans(g, lo, hi) if back else ()
            if q is not None and q.host == lo and q.nbytes == hi - lo and keeps:
                dev = q.device  # its copy in (the union) is queued already
                transfers[transfers.index(q)] = Transfer(lo, dev, hi - lo, True, back,
                                                         True, spans)
            else:
                if q is not None:  # a queued copy of part of it: superseded (its block
                    transfers.remove(q)  # is freed with the others, in stream order)
                pad = 0 if keeps else lo % 256
                block = pool.alloc(hi - lo + pad, handle)
                owned.append(block)
                dev = block + pad
                transfers.append(Transfer(lo, dev, hi - lo, direct, back, False, spans))
            for m in g:
                values[m[2]] = dev + (m[0] - lo)


def _start(member: tuple[int, ...]) -> int:
    """A member's first byte (the sort key of :meth:`CudaExecutable._bind_aliased`)."""
    return member[0]


def _overlapping(host: Sequence[tuple[int, Any]], queued: Sequence[Any]) -> bool:
    """Whether any two of this call's host arrays (``host``'s views and the ``queued``
    page-locked transfers) share a byte: the non-empty ranges sorted by start, each
    compared with the end of the one before (a call has a few; empty arrays share
    nothing)."""
    ranges = [(v.ptr, v.ptr + v.nbytes) for _, v in host if v.nbytes]
    ranges += [(t.host, t.host + t.nbytes) for t in queued if t.nbytes]
    if len(ranges) < 2:
        return False
    ranges.sort()
    end = -1
    for start, stop in ranges:
        if start < end:
            return True
        end = stop  # disjoint so far: the ends rise with the starts
    return False


def _alignment(address: int) -> int:
    """The largest power of two up to 256 dividing ``address`` (bytes)."""
    return address & -address if address & 255 else 256


def _written_spans(group: Sequence[tuple[int, int, int, bool, bool, Any]], lo: int,
                   hi: int) -> tuple[tuple[int, int], ...]:
    """The ``(offset, nbytes)`` ranges of ``[lo, hi)`` that the written members of an
    aliasing group cover, merged; ``()`` when that is all of it or nothing."""
    written = []
    for m in group:
        if m[3]:
            if m[0] == lo and m[1] == hi:
                return ()  # one written member covers it all (the same array twice)
            written.append((m[0], m[1]))
    written.sort()
    merged: list[list[int]] = []
    for start, end in written:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    if not merged or (len(merged) == 1 and merged[0] == [lo, hi]):
        return ()
    return tuple((start - lo, end - start) for start, end in merged)


class _HostArray:
    """A NumPy argument bound by :meth:`CudaExecutable._numpy_arg`: what the round trip
    reads of an :class:`ArrayView` (``ptr``, ``nbytes``, ``host``), and whether its memory
    is page-locked (``pinned``: copied in place, no staging)."""

    __slots__ = ("ptr", "nbytes", "host", "pinned")

    def __init__(self, ptr: int, nbytes: int, host: Any, pinned: bool = False) -> None:
        self.ptr, self.nbytes, self.host, self.pinned = ptr, nbytes, host, pinned


def _transfer() -> Any:
    """:class:`~thork_core._staging.Transfer` (its module loads on the first round trip)."""
    if not _TRANSFER:
        from ._staging import Transfer

        _TRANSFER.append(Transfer)
    return _TRANSFER[0]


_TRANSFER: list[Any] = []
_DEVICE = operator.attrgetter("device")


class _NoType:
    """Stands for ``numpy.ndarray`` until NumPy is imported (no object has this type)."""


#: ``numpy.ndarray`` once NumPy is imported and its adapter is the lead for it.
_NDARRAY: list[type] = [_NoType]


def _numpy_dtypes(elems: Sequence[Any]) -> list[Any]:
    """NumPy dtypes of the pointer parameters' element types (None where NumPy has none,
    or for scalars); an empty list where the NumPy fast path must stay off."""
    import numpy as np

    from ._adapter import NumpyAdapter
    from ._binding import _registry
    from ._dtype import from_numpy

    # (set by the adapter lookup once it has taken a NumPy array: the first NumPy
    # argument of a process goes the full way)
    if type(_registry().lead_adapter.get(np.ndarray)) is not NumpyAdapter:
        return []
    _NDARRAY[0] = np.ndarray
    out: list[Any] = []
    for e in elems:
        try:
            d = None if e is None else np.dtype(input_typestr(e))
            out.append(d if d is not None and from_numpy(d) is e else None)
        except (TypeError, ValueError):
            out.append(None)
    return out


def _binder(launcher: Any, kernel: KernelIR, ordinal: int, cai: bool) -> Any:
    """The native module's ``Binder`` for a native launcher (see ``_native_launch.c``):
    the same decisions as :meth:`CudaExecutable.launch`'s fast paths, made in C."""
    if isinstance(launcher, PyLauncher):
        return None
    from ._native import native_module

    mod = native_module()
    if mod is None:
        return None
    from ._device_array import use_native_finalizer

    use_native_finalizer(mod)  # DeviceArrays then go back to the pool without Python
    if cai:  # CuPy and torch arrays read through their own attributes (session 11)
        sync_native(mod)
    specs: list[tuple[Any, ...]] = []
    for p in kernel.params:
        if isinstance(p.type, PointerType):
            specs.append((p.type.elem, input_typestr(p.type.elem),
                          -1 if p.ndim is None else p.ndim, p.writes))
        elif isinstance(p.type, DType):
            specs.append((p.type.is_float,))
        else:  # vector or struct values: the checked path in Python binds them
            return None
    # The binder reads __cuda_array_interface__ only of the types the probe's table lists
    # as plain producers: never a torch tensor (its stream is torch's, see _probe), and a
    # type seen for the first time goes to the Python path once, which decides its kind.
    return mod.Binder(launcher, DeviceArray, ordinal, specs, KINDS if cai else False)


class GpuExecutable(CudaExecutable):
    """A kernel loaded into a CUDA module on one device, launched with ``cuLaunchKernel``."""

    def __init__(self, artifact: Artifact, kernel: KernelIR, ordinal: int = 0) -> None:
        drv = _cuda.driver()
        ctx = _cuda.make_current(ordinal)
        data = artifact.data + (b"\0" if artifact.kind == "ptx" else b"")
        with capture_relaxed():  # a first call inside a capture loads here (h-interop)
            self._module = _cuda.check(drv.cuModuleLoadData(data), "cuModuleLoadData")
            self._function = _cuda.check(
                drv.cuModuleGetFunction(self._module, artifact.entry.encode()),
                "cuModuleGetFunction",
            )
            # reading attributes loads the function now (lazy loading would otherwise
            # load it at its first launch, which may be inside a capture)
            attributes = self._read_attributes()
        make = _cooperative_launcher if kernel.cooperative else make_launcher  # (h-lang)
        launcher = make(
            CONV_CU, _cuda.function_address("cuLaunchKernel"), int(self._function),
            kernel.params, self._failed, ctx=int(ctx),
            ctx_get=_cuda.function_address("cuCtxGetCurrent"),
            ctx_set=_cuda.function_address("cuCtxSetCurrent"))
        self._setup(kernel, ordinal, launcher)
        self.attributes = attributes
        # CUDA's 48 KiB default cap counts static and dynamic shared memory together: a
        # kernel with static shared arrays must opt in for less dynamic memory.
        self._dynamic_limit -= attributes.get("shared_bytes", 0)

    # -- debug mode (h-debug): the error record of a debug build ---------------------------
    def _debug_global(self) -> tuple[int, int]:
        from ._debug import RECORD_SYMBOL

        ptr, size = _cuda.check(
            _cuda.driver().cuModuleGetGlobal(self._module, RECORD_SYMBOL.encode()),
            "cuModuleGetGlobal(thork_dbg_record)")
        return int(ptr), int(size)

    def debug_read(self, stream: Any = None) -> Any:
        """Wait for the launch's stream, then copy the module's error record to the host."""
        from ._debug import DebugRecord

        drv = _cuda.driver()
        _cuda.make_current(self.ordinal)
        handle = 0 if stream is None else stream if type(stream) is int \
            else _cuda.stream_handle(stream)
        _cuda.check(drv.cuStreamSynchronize(handle), f"running {self.kernel.name} (debug)")
        ptr, size = self._debug_global()
        record = DebugRecord()
        _cuda.check(drv.cuMemcpyDtoH(ctypes.addressof(record), ptr,
                                     min(size, ctypes.sizeof(record))), "cuMemcpyDtoH")
        return record

    def debug_clear(self) -> None:
        """Zero the module's error record (before a launch, after a reported one)."""
        drv = _cuda.driver()
        _cuda.make_current(self.ordinal)
        ptr, size = self._debug_global()
        _cuda.check(drv.cuMemsetD8(ptr, 0, size), "cuMemsetD8")
    # -- end debug mode

    def max_coresident_blocks(self, block: Dim3, shared_mem: int = 0) -> int:
        """How many blocks of this kernel with ``block`` threads and ``shared_mem``
        dynamic shared bytes the device holds at once (the limit of a cooperative
        launch): the occupancy calculator's blocks per SM times the SMs."""
        drv = _cuda.driver()
        per_sm = _cuda.check(drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(
            self._function, block[0] * block[1] * block[2], shared_mem),
            "cuOccupancyMaxActiveBlocksPerMultiprocessor")
        dev = _cuda.check(drv.cuDeviceGet(self.ordinal), "cuDeviceGet")
        sms = _cuda.check(drv.cuDeviceGetAttribute(
            drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev),
            "cuDeviceGetAttribute")
        return int(per_sm) * int(sms)

    def _set_dynamic_shared(self, nbytes: int) -> None:
        drv = _cuda.driver()
        attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        _cuda.check(drv.cuFuncSetAttribute(self._function, attr, nbytes),
                    f"{self.kernel.name}: allowing {nbytes} bytes of dynamic shared memory")

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


def _cooperative_launcher(conv: int, fn: int, function: int, params: Any, on_error: Any,
                          **ctx: int) -> PyLauncher:
    """A launcher calling ``cuLaunchCooperativeKernel`` (every block resident at once, as a
    grid barrier needs): the Python launcher, whose ``cuLaunchKernel`` call drops the
    trailing ``extra`` argument that the cooperative entry does not take."""
    launcher = PyLauncher(conv, fn, function, param_kinds(params), on_error, **ctx)
    coop = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *([ctypes.c_uint] * 7),
                            ctypes.c_void_p, ctypes.c_void_p)(
        _cuda.function_address("cuLaunchCooperativeKernel"))
    launcher._fn = lambda *args: coop(*args[:-1])  # the same arguments but 'extra'
    return launcher


def visible_device(who: str, device: int) -> int:
    """``device`` when it is a visible CUDA device; DeviceError naming ``who`` otherwise."""
    n = _cuda.device_count()
    if not 0 <= device < max(n, 1):
        from ._errors import DeviceError

        raise DeviceError(f"{who}: cuda:{device} does not exist ({n} CUDA device(s) "
                          "visible)")
    return device


class GpuTarget(Target):
    """NVIDIA GPUs through cuda-python's driver API."""

    name = "gpu"
    consumes: tuple[str, ...] = ("cubin", "ptx")
    language = "cuda"
    priority = 100

    def available(self) -> tuple[bool, str]:
        return _cuda.gpu_status()

    def renderer(self) -> Renderer:
        return CudaRenderer()

    def arch(self) -> str:
        return gpu_arch(0)

    def load(self, artifact: Artifact, kernel: KernelIR) -> Executable:
        return self.load_on(artifact, kernel, 0)

    def arch_on(self, device: int) -> str:
        return gpu_arch(device)

    def load_on(self, artifact: Artifact, kernel: KernelIR, device: int) -> Executable:
        if artifact.kind not in self.consumes:
            raise LaunchError(f"the GPU target cannot load a {artifact.kind!r} artifact")
        return GpuExecutable(artifact, kernel, visible_device(kernel.name, device))

    def describe(self) -> str:
        ok, why = self.available()
        if not ok:
            return f"gpu: unavailable ({why})"
        names = [
            f"cuda:{i} {_cuda.device_name(i)} (sm_{''.join(map(str, _cuda.compute_capability(i)))})"
            for i in range(_cuda.device_count())
        ]
        return "gpu: " + ", ".join(names)
