"""``fkl.CircularTensor``: the last B preprocessed frames, kept on the target's memory.

An update is **one** kernel with two branches per plane (divergent fusion): the plane
that receives the new frame runs the frame through ``ops``; every other plane copies its
neighbour of the previous window. The window is double-buffered — the kernel reads one
buffer and writes the other (an in-place shift would race between planes) — and the two
swap after each update.
"""

from __future__ import annotations

import threading
from typing import Any

from thork.tracing import Trace, Value, cast, if_, return_, set_current
from thork_core import ArgumentError, BoundsError, DeviceError, choose, debug_default, dt
from thork_core.ir import Special
from thork_core.runtime import check_device

from ._arrays import pointer, stream_handle, view, wait
from ._bounds import restated
from ._divergent import chain_body, thread_xyz
from ._kernels import Built, build_cached, checked, target_key
from ._lowering import (
    BLOCK,
    Chain,
    Lowered,
    Params,
    host_plan,
    kernel_name,
    type_chain,
    write_dtypes,
)
from ._ops import Op
from ._pixel import Geom, PixType, as_dtype
from ._plan import Plan, add_spans, extent_bytes, fill_args
from ._tensor import Layout, TensorPack, TensorRead, TensorSplit, TensorWrite

__all__ = ["CircularTensor"]

_ORDERS = ("newest_first", "oldest_first")
_LAYOUTS = ("packed", "planar")


class CircularTensor:
    """A rolling window of the last ``batch`` frames of ``w`` x ``h`` pixels.

    ``dtype``/``channels``: the frames' pixels; ``out_dtype``: the window's element type
    (what ``ops`` produce; default ``dtype``). ``layout="packed"``: the window is
    ``(B, H, W, C)``; ``"planar"``: ``(B*C, H, W)``. ``order="newest_first"``: plane 0 is
    the newest frame; ``"oldest_first"``: plane B-1 is. Planes never filled keep
    ``fill``. ``target``: ``"gpu"`` (the window in device memory, on ``device``) or
    ``"cpu"`` (NumPy); None: the best available. ``debug=True`` (or ``THORK_DEBUG=1``
    when ``debug`` is not given) bounds-checks every array access of the update kernel
    and raises :class:`~thork_core.BoundsError` (docs/debug-mode.md).
    """

    def __init__(self, w: int, h: int, *, batch: int, dtype: Any = "uint8",
                 channels: int = 3, layout: str = "packed", out_dtype: Any = None,
                 order: str = "newest_first", device: int | None = None,
                 target: str | None = None, compiler: str | None = None,
                 fill: float = 0, debug: bool | None = None) -> None:
        for name, v in (("w", w), ("h", h), ("batch", batch)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ArgumentError(f"fkl.CircularTensor {name}: expected a positive int, "
                                    f"got {v!r}")
        if batch > 65535:
            raise ArgumentError(f"fkl.CircularTensor batch: {batch} planes exceed the CUDA "
                                "grid limit of 65535")
        if isinstance(channels, bool) or channels not in (1, 2, 3, 4):
            raise ArgumentError(f"fkl.CircularTensor channels: expected 1 to 4, got "
                                f"{channels!r}")
        if layout not in _LAYOUTS:
            raise ArgumentError(f"fkl.CircularTensor layout: expected 'packed' or 'planar', "
                                f"got {layout!r}")
        if order not in _ORDERS:
            raise ArgumentError(f"fkl.CircularTensor order: expected 'newest_first' or "
                                f"'oldest_first', got {order!r}")
        self.w, self.h, self.batch, self.channels = w, h, batch, channels
        self.dtype = as_dtype(dtype, "fkl.CircularTensor dtype")
        self.out_dtype = as_dtype(out_dtype if out_dtype is not None else dtype,
                                  "fkl.CircularTensor out_dtype")
        self.layout, self.order = layout, order
        self.target, self.compiler = target, compiler
        #: Debug mode (h-mut): the update kernel is bounds-checked (docs/debug-mode.md).
        self.debug = debug_default() if debug is None else bool(debug)
        self._target = choose(target, compiler)[0]
        self.device = check_device(device, "fkl.CircularTensor") if device is not None else 0
        if self.device and self._target.name == "cpu":
            raise DeviceError(f"fkl.CircularTensor: the cpu target has no CUDA device "
                              f"{self.device} (device= applies to GPU targets)")
        self.on_device = self._target.name != "cpu"
        shape = (batch, h, w, channels) if layout == "packed" else (batch, channels, h, w)
        self._buffers = [self._alloc(shape, fill), self._alloc(shape, fill)]
        self._current = 0
        self._lock = threading.Lock()
        self._built: dict[Any, Built] = {}
        self._plans: dict[Any, Plan] = {}
        #: How many updates ran.
        self.updates = 0

    def _alloc(self, shape: tuple[int, ...], fill: float) -> Any:
        import numpy as np

        host = np.full(shape, fill, dtype=self.out_dtype.numpy)
        if not self.on_device:
            return host
        from thork_core.runtime import DeviceArray

        return DeviceArray.from_host(host, device=self.device)

    def __repr__(self) -> str:
        return (f"<fkl.CircularTensor {self.batch} x {self.w}x{self.h}x{self.channels} "
                f"{self.out_dtype.name} {self.layout} {self.order}>")

    def _write(self) -> Any:
        return TensorWrite() if self.layout == "packed" else TensorSplit()

    def _shift_read(self) -> Any:
        return TensorRead(batch=True) if self.layout == "packed" else TensorPack()

    def _chains(self, ops: tuple[Op, ...]) -> tuple[Chain, Chain]:
        return (Chain(TensorRead(), ops, self._write()),
                Chain(self._shift_read(), (), self._write()))

    def _build(self, ops: tuple[Op, ...], t: PixType) -> tuple[Built, Chain, Chain]:
        new, shift = self._chains(ops)
        window = PixType(self.out_dtype, self.channels)
        got = type_chain(new, t)[-1]
        if got != window:
            raise ArgumentError(
                f"fkl.CircularTensor.update ops: they turn {t} pixels into {got}, but the "
                f"window holds {window} (out_dtype, channels); end the ops with e.g. "
                f"fkl.Cast('{self.out_dtype.name}')")
        key: tuple[Any, ...] = ("circular", new.key(), shift.key(), t, self.batch, self.order)
        if self.debug:  # (h-mut) the checked kernel: its own identity
            key = (*key, "debug")
        built = self._built.get(key)
        if built is None:
            tgt, tail = target_key(self._target, self.compiler)
            if self.device:  # compiled for the window's device (h-multi)
                tail = (*tail[:-1], tgt.arch_on(self.device))
            built = build_cached((*key, *tail), lambda: checked(lower_circular(
                new, shift, t, window, self.order, kernel_name(key)), self.debug), tgt,
                self.compiler, self.device)
            self._built[key] = built
        return built, new, shift

    def update(self, frame: Any, ops: Any = (), *, stream: Any = None) -> None:
        """Preprocess ``frame`` (``(H, W[, C])`` of ``dtype``, host or device) with
        ``ops`` (compute ops; their result must be ``out_dtype`` with ``channels``) and
        rotate the window, in one kernel queued on ``stream``."""
        ops = tuple(ops)
        for i, op in enumerate(ops):
            if not isinstance(op, Op) or op.kind != "compute":
                raise ArgumentError(f"fkl.CircularTensor.update ops[{i}]: expected a compute "
                                    f"op such as fkl.Mul(2.0), got {op!r}")
            if op.items():
                raise ArgumentError(f"fkl.CircularTensor.update ops[{i}]: per-item values "
                                    "(fkl.PerItem) do not apply to a single frame")
        v = view(frame, "fkl.CircularTensor.update frame")
        want = (self.h, self.w, self.channels) if self.channels > 1 else (self.h, self.w)
        if v.shape not in (want, (self.h, self.w, 1) if self.channels == 1 else want) \
                or v.dtype != self.dtype:
            raise ArgumentError(
                f"fkl.CircularTensor.update frame: expected shape {want} {self.dtype.name}, "
                f"got {v.shape} {v.dtype.name}")
        if not self.on_device and v.device == "cuda":
            raise ArgumentError("fkl.CircularTensor.update frame: a device array for a "
                                "CPU-target window; pass a NumPy array")
        if v.device == "cuda" and v.device_id != self.device:
            raise DeviceError(f"fkl.CircularTensor.update: arguments on different devices: "
                              f"frame is on cuda:{v.device_id}, the window on "
                              f"cuda:{self.device}")
        t, g, lay = TensorRead().host_type([v])
        new, _ = self._chains(ops)
        values = host_plan(new, t, g, lay)[0]
        key = (new.key(), t, tuple(values), v.device)
        with self._lock:
            plan = self._plans.get(key)
            if plan is None:
                plan = self._plan(ops, t, g, lay, values, extent_bytes(v))
                if len(self._plans) < 64:  # per chain and values: bounded
                    self._plans[key] = plan
            src, dst = self._buffers[self._current], self._buffers[1 - self._current]
            handle = stream_handle(stream) if stream is not None else 0
            if plan.launcher is not None and (v.device == "cuda" or not self.on_device):
                if v.stream is not None and v.stream != handle:
                    wait(v.stream, handle, v.device_id)
                plan.launcher.launch(plan.arrange([v.ptr, pointer(src), pointer(dst)]),
                                     handle)
            else:  # a host frame for a device window: core's checked launch copies it in
                args = list(plan.args)
                arrays = [frame, src, dst]
                for (pos, _, _), k in zip(plan.pointer_slots, plan.order, strict=True):
                    args[pos] = arrays[k]
                try:
                    plan.built.exe.launch(plan.grid, plan.block, args, stream=stream)
                except BoundsError as e:  # (h-mut) debug mode: name the tensor and array
                    raise restated(e, repr(self), {"in0": "the frame", "in1": "the window "
                                                   "before the update", "out0": "the window "
                                                   "after the update"}) from None
            self._current = 1 - self._current
            self.updates += 1

    def _plan(self, ops: tuple[Op, ...], t: PixType, g: Geom, lay: Layout,
              values: list[Any], frame_bytes: int) -> Plan:
        """The prepared update for frames of pixel type ``t`` and these op values
        (``frame_bytes``: the frame's extent, for debug mode's bounds)."""
        built, _, shift = self._build(ops, t)
        sv = view(self._buffers[0], "window")
        wt, wg, wlay = shift.read.host_type([sv])
        values = values + host_plan(shift, wt, wg, wlay)[0]
        args, pointer_slots = fill_args(built.lowered, values, ops)
        # Arrays: the frame (in0), the previous window (in1), the next window (out0).
        order = [idx if role == "in" else 2 + idx for _, role, idx in pointer_slots]
        grid = (-(-self.w // BLOCK[0]), -(-self.h // BLOCK[1]), self.batch)
        plan = Plan(args, pointer_slots, grid, BLOCK, [], self.on_device, order, built,
                    (t, g, lay))
        if self.debug:  # (h-mut) the span params: the frame, the previous and next window
            window = extent_bytes(sv)
            add_spans(plan, [frame_bytes, window, window])
        plan.prepare()
        return plan

    def snapshot(self) -> Any:
        """The window without a copy: ``(B*C, H, W)`` planar or ``(B, H, W, C)`` packed —
        a DeviceBuffer (``__cuda_array_interface__`` and DLPack) on the GPU target, a
        NumPy array on the CPU target. It is this window's memory: the update after the
        next one overwrites it (copy it to keep it)."""
        buf = self._buffers[self._current]
        if self.layout == "planar":
            return buf.reshape(self.batch * self.channels, self.h, self.w)
        return buf


def lower_circular(new: Chain, shift: Chain, t: PixType, window: PixType, order: str,
                   name: str) -> Lowered:
    """The update kernel: the newest plane runs ``new`` on the frame, every other plane
    runs ``shift`` on its neighbour in the previous window; both write plane z."""
    b = Params()
    trace = Trace(name, b.params)
    prev = set_current(trace)
    try:
        parts = []
        for chain, ty in ((new, t), (shift, window)):
            in_ptrs = b.inputs(chain.read.input_dtypes(ty))
            parts.append((in_ptrs, b.scalars(chain.read.scalar_types(ty)),
                          b.op_scalars(chain, ty)))
        outs = b.outputs(write_dtypes(new.write, window))
        x, y, z = thread_xyz()
        nb = cast(Value(Special(dt.uint32, "gridDim.z")), dt.int32)
        newest = 0 if order == "newest_first" else nb - 1
        step = -1 if order == "newest_first" else 1
        with if_(z == newest):
            chain_body(b, new, t, *parts[0], x, y, z * 0, z, nb, outs)  # frame: plane 0
            return_()
        chain_body(b, shift, window, *parts[1], x, y, z + step, z, nb, outs)
    finally:
        set_current(prev)
    return b.finish(name, trace, BLOCK)

