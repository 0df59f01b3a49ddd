"""The launcher: the one mechanism every target launches kernels through.

A :class:`Launcher`-shaped object (the native module's ``Launcher`` where
``_native_launch.c`` could be built, else :class:`PyLauncher`, same interface and
behaviour) belongs to one loaded kernel. It knows how to call that kernel's entry (a
calling convention: ``cuLaunchKernel``, an nvcc host library's entry, the CPU target's
entry) and the kind of each parameter. It offers two calls:

- ``run(grid, block, shared_mem, stream, values)``: one launch; ``values`` holds one entry
  per parameter (an address for a pointer, a :func:`~thork_core._binding.scalar_value`
  result for a scalar). Targets' ``Executable.launch`` binds the caller's arguments and
  calls this.
- ``prepare(grid, block, shared_mem, values)``: geometry and scalars fixed once; the result
  launches with nothing but addresses and a stream (:class:`PreparedLaunch` wraps it:
  fkl's hot path, replay loops).

Thread safety: a launch never writes shared state. The native launcher builds each
call's argument values and ``void*`` array on its own C stack; the Python launcher in
per-thread buffers. A GPU launcher makes the kernel's context current on the calling
thread when it is not. Any number of threads may launch one kernel at once.
"""

from __future__ import annotations

import ctypes
import math
import os
import struct
import threading
import types
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._dtype import DType
from ._ir import Param, PointerType
from ._probe import DLPACK

if TYPE_CHECKING:
    from ._target import Dim3, Executable

__all__ = [
    "ArrayGuard", "CONV_CU", "CONV_HOST", "CONV_HOST_STREAM", "PreparedLaunch",
    "PyLauncher", "guarded_call_base", "launch_call_base", "make_launcher", "out_maker",
    "param_kinds",
]

#: Calling conventions (``_native_launch.c`` has the same numbers).
#: ``cuLaunchKernel(function, gx, gy, gz, bx, by, bz, shared, stream, params, NULL)``
CONV_CU = 0
#: ``fn(params, grid[3], block[3], unsigned shared, stream)`` (nvcc host library)
CONV_HOST_STREAM = 1
#: ``fn(params, grid[3], block[3], unsigned long long shared)`` (CPU target)
CONV_HOST = 2

#: The struct-module code of each scalar dtype's slot (16-bit floats travel as raw bits).
_KIND = {
    "bool": "?", "int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint8": "B",
    "uint16": "H", "uint32": "I", "uint64": "Q", "float16": "H", "bfloat16": "H",
    "float32": "f", "float64": "d",
}
# Each slot is 8 bytes: the value's bytes, then padding ('<': no alignment, little-endian).
_SLOT = {"P": "Q", "?": "?7x", "b": "b7x", "B": "B7x", "h": "h6x", "H": "H6x", "i": "i4x",
         "I": "I4x", "q": "q", "Q": "Q", "f": "f4x", "d": "d"}

#: What a guard's ``specs`` holds per array: (shape, dtype, device ordinal[, typestr, writes[,
#: DLPack code << 8 | bits]]) (see :meth:`PreparedLaunch.guard`).
ArraySpec = tuple[tuple[int, ...], Any, int] | tuple[tuple[int, ...], Any, int, str | None, bool] \
    | tuple[tuple[int, ...], Any, int, str | None, bool, int | None]


def param_kinds(params: Sequence[Param]) -> str:
    """One kind code per parameter: ``P`` for a pointer, else the struct code of its slot."""
    out = []
    for p in params:
        if isinstance(p.type, PointerType):
            out.append("P")
        else:
            assert isinstance(p.type, DType)
            out.append(_KIND[p.type.name])
    return "".join(out)


#: The values ``THORK_LAUNCHER`` accepts (``ctypes`` is a synonym of ``python``).
LAUNCHERS = ("native", "python", "ctypes")


def launcher_choice() -> str:
    """``THORK_LAUNCHER``: ``native`` (default: the C launcher where it can be built) or
    ``python`` (``ctypes`` is accepted as a synonym): :class:`PyLauncher` always. Any
    other value raises :class:`~thork_core.LaunchError` (a typo must not silently pick
    the slow path)."""
    raw = os.environ.get("THORK_LAUNCHER", "native")
    choice = raw.strip().lower() or "native"
    if choice not in LAUNCHERS:
        from ._errors import LaunchError

        raise LaunchError(f"THORK_LAUNCHER={raw!r}: expected one of {', '.join(LAUNCHERS)}")
    return "python" if choice == "ctypes" else choice


def make_launcher(conv: int, fn: int, function: int, params: Sequence[Param],
                  on_error: Callable[[int, Dim3, Dim3], None], *, ctx: int = 0,
                  ctx_get: int = 0, ctx_set: int = 0) -> Any:
    """The launcher for one loaded kernel: native where possible, else :class:`PyLauncher`.

    ``conv``: one of the ``CONV_*`` conventions; ``fn``: the entry's address;
    ``function``: the ``CUfunction`` (``CONV_CU``; else ignored); ``on_error(code, grid,
    block)`` is called when the entry returns non-zero and raises; ``ctx`` (with
    ``ctx_get``/``ctx_set``, the addresses of ``cuCtxGetCurrent``/``cuCtxSetCurrent``) is
    made current on the calling thread before a launch when it is not.
    """
    kinds = param_kinds(params)
    on_error = _weakly(on_error)
    if launcher_choice() == "native" and len(kinds) <= 1024:  # (the C module's limit)
        from ._native import native_module

        mod = native_module()
        if mod is not None:
            return mod.Launcher(conv, fn, function, kinds, on_error, ctx, ctx_get, ctx_set)
    return PyLauncher(conv, fn, function, kinds, on_error, ctx, ctx_get, ctx_set)


def _weakly(on_error: Callable[..., None]) -> Callable[..., None]:
    """``on_error`` without a strong reference to its object when it is a bound method:
    an executable that owns its launcher and passes its own method would otherwise form
    a cycle through the native launcher, which the garbage collector cannot see into, and
    never be freed (nor its kernel library unloaded)."""
    if not isinstance(on_error, types.MethodType):
        return on_error
    ref = weakref.WeakMethod(on_error)

    def call(code: int, grid: Dim3, block: Dim3) -> None:
        method = ref()
        if method is None:  # pragma: no cover - the executable is being collected
            from ._errors import LaunchError

            raise LaunchError(f"a launch failed (code {code}) after its kernel was freed")
        method(code, grid, block)

    return call


_PROTOTYPES: dict[int, Any] = {}


def _prototypes() -> dict[int, Any]:
    """The entries' ctypes prototypes per convention (made on first use: only the Python
    launcher needs them, and ``import thork`` should not pay for them)."""
    if not _PROTOTYPES:
        _PROTOTYPES.update({
            CONV_CU: ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *([ctypes.c_uint] * 7),
                                      ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p),
            CONV_HOST_STREAM: ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p,
                                               ctypes.c_void_p, ctypes.c_void_p,
                                               ctypes.c_uint, ctypes.c_void_p),
            CONV_HOST: ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                        ctypes.c_void_p, ctypes.c_ulonglong),
            -1: ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)),
            -2: ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p),
        })
    return _PROTOTYPES


def _dims3(values: Sequence[int]) -> Any:
    return (ctypes.c_uint * 3)(*values)


class PyLauncher:
    """The launcher in Python (ctypes): the native ``Launcher``'s interface and behaviour,
    used where the C module cannot be built or ``THORK_LAUNCHER=python``.

    Per-thread argument buffers keep concurrent launches apart; ctypes releases the GIL
    around the foreign call.
    """

    __slots__ = ("conv", "nparams", "_fn", "_function", "_kinds", "_format", "_on_error",
                 "_ctx", "_ctx_get", "_ctx_set", "_tls")

    def __init__(self, conv: int, fn: int, function: int, kinds: str,
                 on_error: Callable[..., None], ctx: int = 0, ctx_get: int = 0,
                 ctx_set: int = 0) -> None:
        protos = _prototypes()
        if conv not in (CONV_CU, CONV_HOST_STREAM, CONV_HOST):
            raise ValueError(f"conv: 0, 1 or 2, got {conv}")
        if not fn:
            raise ValueError("fn: a non-null function address is required")
        bad = [k for k in kinds if k not in _SLOT]
        if bad:
            raise ValueError(f"kinds: unknown parameter kind {bad[0]!r}")
        if not callable(on_error):
            raise TypeError("on_error must be callable")
        if ctx and not (ctx_get and ctx_set):
            raise ValueError("ctx needs ctx_get and ctx_set")
        self.conv = conv
        self.nparams = len(kinds)
        self._fn = protos[conv](fn)
        self._function = ctypes.c_void_p(function or None)
        self._kinds = kinds
        self._format = "<" + "".join(_SLOT[k] for k in kinds)
        self._on_error = on_error
        self._ctx = ctx
        self._ctx_get = protos[-1](ctx_get) if ctx else None
        self._ctx_set = protos[-2](ctx_set) if ctx else None
        self._tls = threading.local()

    def _buffers(self) -> tuple[Any, Any]:
        """This thread's value slots and the ``void*`` array pointing at them."""
        tls = self._tls
        try:
            return tls.buf, tls.argv  # type: ignore[no-any-return]
        except AttributeError:
            n = max(self.nparams, 1)
            buf = (ctypes.c_uint64 * n)()
            base = ctypes.addressof(buf)
            argv = (ctypes.c_void_p * n)(*[base + 8 * i for i in range(n)])
            tls.buf, tls.argv = buf, argv
            return buf, argv

    def run(self, grid: Sequence[int], block: Sequence[int], shared: int, stream: int | None,
            values: Sequence[Any]) -> None:
        """One launch with ``values`` (one per parameter) on ``stream`` (0/None: legacy)."""
        if len(values) != self.nparams:
            raise ValueError(f"values: {self.nparams} expected (one per parameter), got "
                             f"{len(values)}")
        dims = _dims(grid, "grid"), _dims(block, "block")
        buf, argv = self._buffers()
        try:
            struct.pack_into(self._format, buf, 0, *values)
        except struct.error as exc:
            raise OverflowError(str(exc)) from None
        self._call(*dims, shared, stream, argv)

    def _call(self, grid: Dim3, block: Dim3, shared: int, stream: int | None,
              argv: Any) -> None:
        if self._ctx:
            cur = ctypes.c_void_p()
            if self._ctx_get(ctypes.byref(cur)) != 0 or cur.value != self._ctx:  # type: ignore[misc]
                err = self._ctx_set(self._ctx)  # type: ignore[misc]
                if err:
                    self._on_error(err, grid, block)
                    return
        if self.conv == CONV_CU:
            err = self._fn(self._function, *grid, *block, shared, stream or None, argv, None)
        elif self.conv == CONV_HOST_STREAM:
            err = self._fn(argv, _dims3(grid), _dims3(block), shared, stream or None)
        else:
            err = self._fn(argv, _dims3(grid), _dims3(block), shared)
        if err:
            self._on_error(err, grid, block)

    def prepare(self, grid: Sequence[int], block: Sequence[int], shared: int,
                values: Sequence[Any]) -> PyPrepared:
        """Geometry and scalars fixed; see :class:`PyPrepared`."""
        return PyPrepared(self, grid, block, shared, values)


def _dims(value: Sequence[int], what: str) -> Dim3:
    """(x, y, z) with each in 1..2**32-1 (the native launcher's check and messages)."""
    dims = tuple(value)
    if len(dims) != 3:
        raise ValueError(f"{what}: expected 3 dimensions")
    if not all(type(d) is int and 0 < d < 2**32 for d in dims):
        raise ValueError(f"{what}: dimensions must be 1..2**32-1")
    return dims  # type: ignore[return-value]


class PyPrepared:
    """The native ``Prepared`` in Python: ``run(pointers, stream=0)``."""

    __slots__ = ("launcher", "grid", "block", "shared", "values", "_pointer_index")

    def __init__(self, launcher: PyLauncher, grid: Sequence[int], block: Sequence[int],
                 shared: int, values: Sequence[Any]) -> None:
        if len(values) != launcher.nparams:
            raise ValueError(f"values: {launcher.nparams} expected (one per parameter), got "
                             f"{len(values)}")
        self.launcher = launcher
        self.grid, self.block, self.shared = _dims(grid, "grid"), _dims(block, "block"), shared
        kinds = launcher._kinds
        self._pointer_index = [i for i, k in enumerate(kinds) if k == "P"]
        self.values = [0 if k == "P" else v for k, v in zip(kinds, values)]
        struct.pack(launcher._format, *self.values)  # the scalars fit: checked once here

    def run(self, pointers: Sequence[int], stream: int | None = 0) -> None:
        if len(pointers) != len(self._pointer_index):
            raise ValueError(f"pointers: {len(self._pointer_index)} addresses expected, got "
                             f"{len(pointers)}")
        values = list(self.values)
        for i, p in zip(self._pointer_index, pointers):
            values[i] = p
        self.launcher.run(self.grid, self.block, self.shared, stream, values)


class PreparedLaunch:
    """``launch(pointers, stream)``: a launch with fixed geometry and scalar values; the
    pointer arguments come with each call; no checks.

    ``values`` holds one entry per kernel parameter: a
    :func:`~thork_core._binding.scalar_value` result for each scalar (converted once,
    here) and anything for each pointer. ``pointers`` are device (or, on the CPU target,
    host) addresses in parameter order; ``stream`` a raw CUDA stream handle (0: the legacy
    default stream; ignored by the CPU target). Safe to call from many threads at once.
    """

    __slots__ = ("exe", "grid", "block", "shared_mem", "values", "prepared", "call", "_count")

    def __init__(self, exe: Executable, grid: Dim3, block: Dim3, values: Sequence[Any],
                 shared_mem: int = 0) -> None:
        params = exe.kernel.params
        if len(values) != len(params):
            raise ValueError(f"{exe.kernel.name}: {len(params)} values expected for a "
                             f"prepared launch, got {len(values)}")
        self.exe = exe
        self.grid = grid
        self.block = block
        self.shared_mem = shared_mem
        self.values = list(values)
        #: The launcher's prepared call (native ``Prepared`` or :class:`PyPrepared`).
        self.prepared = exe.launcher.prepare(grid, block, shared_mem, values)
        self._count = sum(isinstance(p.type, PointerType) for p in params)
        #: The fastest callable with :meth:`__call__`'s contract (a C function where the
        #: native module was built): hot loops call this.
        self.call: Callable[[Sequence[int], int], None] = self.prepared.run

    def __call__(self, pointers: Sequence[int], stream: int = 0) -> None:
        self.prepared.run(pointers, stream)

    @property
    def native(self) -> bool:
        """Whether calls run in the native module."""
        return not isinstance(self.prepared, PyPrepared)

    @property
    def pointer_count(self) -> int:
        """How many pointer parameters a call supplies."""
        return self._count

    def guard(self, array_type: type, specs: Sequence[ArraySpec], order: Sequence[int],
              align_mask: int = 0, to_handle: Callable[[Any], int] | None = None,
              cai: bool = False, in_place: bool = False) -> Callable[..., bool]:
        """A checked launch for device arrays: ``guard(*arrays, stream) -> bool``.

        True when every array is exactly ``array_type`` (objects with ``ptr``, ``shape``,
        ``dtype``, ``device`` and ``stream`` attributes, as :class:`~thork_core.DeviceArray`)
        with its spec's shape, dtype (the same object) and the first spec's device; was
        produced on the launch stream or the legacy stream (``.stream`` 0 or None); and no
        address has a bit of ``align_mask``: the kernel was then launched, pointer slot
        ``k`` taking ``arrays[order[k]]``. False otherwise, with nothing launched: the
        caller takes its general path (which waits on producers, converts, raises).
        ``stream``: None (the legacy stream), an int handle, or what ``to_handle`` (default
        :func:`thork_core._cuda.stream_handle`) turns into one.

        ``cai`` (one visible GPU: the interface names no device): an array of a plain
        ``__cuda_array_interface__`` producer (CuPy, Numba; not a follower's) is taken too
        when its spec is ``(shape, dtype, device, typestr, writes)`` and its interface names
        that typestr and exactly that shape, no strides or mask, a default stream or the
        launch stream, and a writable buffer where ``writes``. Such a guard also refuses
        (False) a written array sharing a byte with another one, except, with
        ``in_place``, one that is exactly it (same address and size).

        With ``cai``, a spec ``(shape, dtype, device, typestr, writes, dlcode)`` whose
        ``dlcode`` is DLPack's ``code << 8 | bits`` of ``dtype`` (None: not taken) takes
        a DLPack-only producer's array too (a type :data:`~thork_core._probe.KINDS` maps
        to ``"dlpack"``, on any number of GPUs): its ``__dlpack_device__()`` names CUDA
        memory on the first spec's device, and the capsule of ``__dlpack__(stream=<the
        launch stream>, max_version=(1, 0))`` (the protocol's handshake) holds exactly
        ``shape`` in the compact layout with that dtype, writable where ``writes``. The
        capsules are dropped (their deleters run) once the launch is queued.
        """
        if len(order) != self.pointer_count or any(not 0 <= j < len(specs) for j in order):
            raise ValueError(f"{self.exe.kernel.name}: order must name one of the "
                             f"{len(specs)} arrays for each of the {self.pointer_count} "
                             f"pointer parameters, got {list(order)}")
        if to_handle is None:
            from ._cuda import stream_handle

            to_handle = stream_handle
        kinds: dict[type, Any] | None = None
        if cai:
            from ._probe import KINDS

            kinds = KINDS
        if self.native and self.pointer_count <= 32:  # (the C guard's limit)
            extra = (kinds, in_place) if kinds is not None else ()
            if kinds is not None:  # CuPy and torch arrays read in C (session 11)
                from ._native import native_module
                from ._probe import sync_native

                mod = native_module()
                if mod is not None:
                    sync_native(mod)
            return self.prepared.guard(  # type: ignore[no-any-return]
                array_type, [tuple(s) for s in specs], list(order), align_mask, to_handle,
                *extra)
        return ArrayGuard(self, array_type, [tuple(s) for s in specs], list(order),
                          align_mask, to_handle, kinds, in_place)


class ArrayGuard:
    """:meth:`PreparedLaunch.guard` in Python (the native module's ``Guard`` does the same
    in C; tests hold the two to one behaviour)."""

    __slots__ = ("launch", "array_type", "specs", "order", "mask", "to_handle", "device",
                 "kinds", "in_place", "nbytes")

    def __init__(self, launch: Any, array_type: type[Any], specs: list[Any],
                 order: list[int], mask: int, to_handle: Callable[[Any], int],
                 kinds: dict[type, Any] | None = None, in_place: bool = False) -> None:
        self.launch = launch
        self.array_type = array_type
        self.specs = [(*s, None, False, None)[:6] if len(s) == 3 else (*s, None)[:6]
                      for s in specs]
        self.order = order
        self.mask = mask
        self.to_handle = to_handle
        self.device = specs[0][2]
        self.kinds = kinds
        self.in_place = in_place
        self.nbytes = [s[1].itemsize * math.prod(s[0]) for s in specs]

    def __call__(self, *args: Any) -> bool:
        if len(args) != len(self.specs) + 1:
            raise TypeError(f"guard: {len(self.specs)} arrays and a stream expected")
        stream = args[-1]
        handle = 0 if stream is None else stream if type(stream) is int \
            else self.to_handle(stream)
        ptrs = []
        bits = 0
        keep: list[Any] = []  # DLPack capsules: held until the launch is queued
        for a, (shape, dtype, _, typestr, writes, dlcode) in zip(args, self.specs):
            if type(a) is not self.array_type:
                if dlcode is not None and self.kinds is not None and \
                        self.kinds.get(type(a)) == DLPACK:
                    p = self._dlpack(a, shape, dtype, writes, handle, keep)
                else:
                    p = self._cai(a, shape, typestr, writes, handle)
                if p is None:
                    return False
            else:
                if a.shape != shape or a.dtype is not dtype or a.device != self.device:
                    return False
                produced = a.stream
                if produced and produced != handle:
                    return False
                p = a.ptr
            bits |= p
            ptrs.append(p)
        if bits & self.mask:
            return False
        if self.kinds is not None and self._overlap(ptrs):
            return False
        self.launch.call([ptrs[j] for j in self.order], handle)
        del keep  # queued: the capsules release the producers' memory
        return True

    def _dlpack(self, a: Any, shape: Any, dtype: Any, writes: bool, handle: int,
                keep: list[Any]) -> int | None:
        """The address of a DLPack-only producer's array as the spec asks (its capsule,
        read for the launch stream, appended to ``keep``), else None."""
        from ._probe import dlpack_probe, no_max_version

        if no_max_version(type(a)):  # a DLPack 0.x producer: the caller's path (as in C)
            return None
        got = dlpack_probe(a, handle, self.device)
        if got is None:
            return None
        keep.append(got[4])
        if (got[3] and writes) or no_max_version(type(a)):
            return None
        _, got_shape, got_dtype, _, strides = got[1]
        if got_shape != tuple(shape) or got_dtype is not dtype or strides is not None:
            return None
        return int(got[0])

    def _cai(self, a: Any, shape: Any, typestr: str | None, writes: bool,
             handle: int) -> int | None:
        """The address of a plain CAI producer's array as the spec asks, else None."""
        from ._probe import CAI, DEFAULT_STREAMS

        if self.kinds is None or typestr is None or self.kinds.get(type(a)) != CAI:
            return None
        try:
            cai = a.__cuda_array_interface__
        except Exception:  # noqa: BLE001 - the caller's path says why
            return None
        stream = cai.get("stream")
        if cai.get("typestr") != typestr or cai.get("strides") is not None or \
                cai.get("mask") is not None or cai.get("shape") != shape or \
                (stream not in DEFAULT_STREAMS and stream != handle):
            return None
        ptr, readonly = cai["data"]
        return None if readonly and writes else int(ptr)

    def _overlap(self, ptrs: list[int]) -> bool:
        """Whether a written array shares a byte with another one (other than being
        exactly it, in place)."""
        for w, (spec, nw) in enumerate(zip(self.specs, self.nbytes)):
            if not spec[4] or not nw:
                continue
            for j, nj in enumerate(self.nbytes):
                if j != w and nj and ptrs[w] < ptrs[j] + nj and ptrs[j] < ptrs[w] + nw and \
                        not (self.in_place and ptrs[w] == ptrs[j] and nw == nj):
                    return True
        return False


def out_maker(array_type: type, shape: tuple[int, ...], dtype: DType, device: int) -> Any:
    """What a ``GuardedCall`` object's ``_hot_out`` holds: ``maker(stream) -> array`` makes
    a ``DeviceArray`` (``array_type``) of ``shape`` and ``dtype`` on ``device`` in C, from
    the stream-ordered pool on the launch stream (None when the pool refused; the caller's
    path then allocates and reports). With it and a ``_hot_guard`` over (input, output),
    the call ``obj(x)`` / ``obj(x, stream=s)`` allocates and launches without running
    Python. None where the native module is not available."""
    from ._native import native_module

    mod = native_module()
    if mod is None:
        return None
    from ._cuda import function_address, make_current
    from ._memory import device_pool

    ctx = int(make_current(device))
    device_pool(device)  # the pool DeviceArrays use, set up (kept, not trimmed) before use
    from ._device_array import use_native_finalizer

    use_native_finalizer(mod)  # each output this makes is freed by the next call, in C
    nbytes = dtype.itemsize
    for s in shape:
        nbytes *= s
    return mod.OutMaker(array_type, tuple(shape), dtype, device, nbytes,
                        function_address("cuMemAllocAsync"), function_address("cuMemFreeAsync"),
                        ctx, function_address("cuCtxGetCurrent"),
                        function_address("cuCtxSetCurrent"))


def launch_call_base() -> type | None:
    """The native module's ``LaunchCall`` base type (``kernel[grid, block]`` objects); None
    where that module is not available or ``THORK_LAUNCHER=python`` (the Python call path
    then serves every call)."""
    if launcher_choice() != "native":
        return None
    from ._native import native_module

    mod = native_module()
    return None if mod is None else getattr(mod, "LaunchCall", None)


def subscript_memo(attr: str, fallback: Callable[[Any, Any], Any]) -> Any:
    """A ``__getitem__`` for a class whose subscripts are memoized in the dict
    ``obj.<attr>`` keyed by plain launch configurations (a tuple of 2 or 3 entries, each
    an exact ``int`` or a tuple of exact ``int``): the native module's ``Subscript``,
    which answers such a key from that dict in C and calls ``fallback(obj, key)`` for
    every other subscript (a miss, equal floats, bools or NumPy ints, a list); None
    where the native launcher is not in use (:func:`launch_call_base` is None).

    Install it with ``memo.install(cls)`` (``cls.__getitem__`` set, and the class's
    mapping slot pointed at it: no type look-up per subscript). Values found in the dict
    are also kept, weakly, in a table of 8 recent (object, key) entries compared by
    identity and by value with no hashing (session 12: ~60 instead of ~520 instructions
    a subscript); so the dict must be add-only for plain keys while its values live,
    as ``Kernel._launches`` is."""
    if launch_call_base() is None:
        return None
    from ._native import native_module

    mod = native_module()
    kind = None if mod is None else getattr(mod, "Subscript", None)
    return None if kind is None else kind(attr, fallback)


def guarded_call_base() -> type | None:
    """The native module's ``GuardedCall`` base type; None where that module is not
    available (:func:`~thork_core._native.native_status` says why; builds it on first use).

    A Python class that lists it first among its bases and does not define ``__call__``
    has the call ``obj(x, out=y)`` / ``obj(x, out=y, stream=s)`` decided in C: the guard in
    ``obj._hot_guard`` (a :meth:`PreparedLaunch.guard` over one input and one output) is
    tried and ``y`` returned when it launched; every other call, and a miss, goes to
    ``obj._miss(*args, **kwargs)``. With an :func:`out_maker` in ``obj._hot_out``, the
    allocating call ``obj(x)`` / ``obj(x, stream=s)`` makes its output there and tries the
    same guard (returning the output when it launched). On Python 3.12+ such a call is a
    vectorcall: no
    argument tuple, keyword dict or Python frame (0.3 us less per call than a Python
    ``__call__`` on the dev machine, 0.5 us on the H200's host: ``python
    bench/bench_call_entry.py``, docs/targets.md)."""
    from ._native import native_module

    mod = native_module()
    return None if mod is None else mod.GuardedCall  # type: ignore[no-any-return]
