"""Divergent horizontal fusion: one kernel whose batch planes run different chains.

``fkl.compose_divergent(plane_map, chain_0, chain_1, ...)``: plane ``z`` of the input
batch runs ``chains[plane_map[z]]`` (0-based). The grid covers the largest chain output
(x, y) and every plane (z); a thread first picks its plane's chain and its rank among that
chain's planes, then bounds-checks against *its chain's* output extent and writes only
that chain's output, at that rank — never past an output (FKL once sized grid z as the sum
of the chains' extents and wrote out of bounds, its issue #250).

The plane map is runtime values: a new map of the same length reuses the kernel (the
chains' output sizes follow it); a new length compiles one more.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from thork.tracing import Trace, Value, cast, if_, return_, set_current
from thork_core import ArgumentError, BoundsError, choose, debug_default, dt
from thork_core.ir import Special

from ._arrays import array_types, pointer, stack, stream_handle, view, wait
from ._bounds import restated
from ._call import _call_device
from ._kernels import Built, build_cached, checked, target_key
from ._lowering import (
    BLOCK,
    Chain,
    Lowered,
    Params,
    _fused,
    host_plan,
    host_tables,
    kernel_name,
    write_dtypes,
)
from ._pipe import Pipe, _check_chain, copy_pipe
from ._pixel import Geom, PixType, Stage
from ._plan import Plan, _tables, add_spans, check_out, extent_bytes, fill_args
from ._tensor import Layout, WriteOp

__all__ = ["Divergent", "chain_body", "compose_divergent", "thread_xyz"]


@dataclass
class DivergentPlan(Plan):
    """A :class:`~fkl._plan.Plan` whose input parameters are the batch (``ins`` entry
    -1: each chain reads it) or a value table (its index); ``cpu``: the CPU target."""

    ins: list[int] = field(default_factory=list)
    cpu: bool = False


def compose_divergent(plane_map: Any, *chains: Any, target: str | None = None,
                      compiler: str | None = None, debug: bool | None = None) -> Divergent:
    """One kernel in which plane ``z`` of the input batch runs ``chains[plane_map[z]]``.

    ``plane_map``: a sequence (or 1-D integer array) of chain indices, 0-based, one per
    batch plane; every chain gets at least one plane. ``chains``: pipes from
    :func:`fkl.compose` or sequences of ops (a one-input read, then ops, then a write);
    their ``target``/``compiler``/``debug`` are not used — the divergent kernel's are.
    ``debug=True`` (or ``THORK_DEBUG=1`` when ``debug`` is not given) bounds-checks every
    array access of the kernel and raises :class:`~thork_core.BoundsError`
    (docs/debug-mode.md)."""
    return Divergent(plane_map, chains, target=target, compiler=compiler, debug=debug)


class Divergent:
    """``div(x, out=None, stream=None)``: ``x`` is a batch of ``len(plane_map)`` images (an
    ``(N, H, W[, C])`` array or a list of N same-size images). Returns a tuple with one
    output per chain — chain ``c``'s output holds its planes, in plane order
    (``div.planes(c)`` lists them): shape ``(n_c, ...)`` as that chain gives for a batch
    of ``n_c`` images, so chains of different geometries give arrays of different
    shapes. ``out``: such a tuple (or list) to write instead."""

    def __init__(self, plane_map: Any, chains: Sequence[Any], *, target: str | None = None,
                 compiler: str | None = None, debug: bool | None = None) -> None:
        if not chains:
            raise ArgumentError("fkl.compose_divergent: expected at least one chain after "
                                "plane_map")
        self.chains: list[Chain] = []
        for i, c in enumerate(chains):
            ops = c.ops if isinstance(c, Pipe) else tuple(c) if isinstance(
                c, (list, tuple)) else None
            if ops is None:
                raise ArgumentError(f"fkl.compose_divergent chain {i}: expected a pipe from "
                                    f"fkl.compose or a list of ops, got {type(c).__name__}")
            _check_chain(ops, target, False)
            chain = Chain(ops[0], ops[1:-1], ops[-1])  # type: ignore[arg-type]
            if chain.read.inputs != 1:
                raise ArgumentError(f"fkl.compose_divergent chain {i}: {chain.read.name} "
                                    "reads no single input; every chain reads the batch")
            self.chains.append(chain)
        self.plane_map = _plane_map(plane_map, len(self.chains))
        self.target, self.compiler = target, compiler
        #: Debug mode (h-mut): the kernel is bounds-checked (docs/debug-mode.md).
        self.debug = debug_default() if debug is None else bool(debug)
        self._built: dict[Any, Built] = {}
        self._plans: dict[Any, DivergentPlan] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<fkl divergent pipe: {len(self.chains)} chains over " \
               f"{len(self.plane_map)} planes>"

    def planes(self, c: int) -> list[int]:
        """The batch planes chain ``c`` runs, in order (its output's items)."""
        return [z for z, m in enumerate(self.plane_map) if m == c]

    def key(self) -> tuple[Any, ...]:
        """Type-level identity: the chains' keys and the plane count."""
        return ("divergent", len(self.plane_map), tuple(c.key() for c in self.chains))

    def lowered(self, t: PixType) -> Lowered:
        """The traced divergent kernel for input pixels ``t``."""
        return checked(lower_divergent(self.chains, t, len(self.plane_map),
                                       kernel_name((self.key(), t))), self.debug)

    def _build(self, t: PixType, device: int = 0) -> Built:
        """The divergent kernel for input pixels ``t``, loaded on CUDA device ``device``
        (compiled for that device's architecture)."""
        built = self._built.get((t, device))
        if built is not None:
            return built
        tgt, tail = target_key(self.target, self.compiler)
        if device:
            tail = (*tail[:-1], tgt.arch_on(device))
        built = build_cached((self.key(), t, "divergent", *tail)
                             + (("debug",) if self.debug else ()), lambda: self.lowered(t),
                             tgt, self.compiler, device)
        self._built[(t, device)] = built
        return built

    def __call__(self, x: Any, *, out: Any = None, stream: Any = None) -> tuple[Any, ...]:
        handle = stream_handle(stream) if stream is not None else 0
        da = array_types()[1]
        if type(x) is da and out is not None:
            done = self._hot(x, out, handle, da)
            if done is not None:
                return done
        if isinstance(x, (list, tuple)):
            x = stack(x, "input", handle, copy_pipe)
        v = view(x, "input")
        # The input's device runs the call (its kernel and tables live there); an out= on
        # another device is a DeviceError naming it.
        ordinal = _call_device([v], out, None, "")
        key = (v.shape, v.dtype, v.device, v.device_id)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plan(v, x, ordinal)
            with self._lock:
                self._plans[key] = plan
        on_device = v.device == "cuda"
        outs = self._outs(out, plan.outs, on_device, v.device_id, handle)
        if plan.launcher is not None and (on_device or plan.cpu):
            # The prepared launch: addresses only (x for each chain's read, the tables).
            if v.stream is not None and v.stream != handle:
                wait(v.stream, handle, v.device_id)
            ptrs = [v.ptr if k < 0 else plan.table_ptrs[k] for k in plan.ins]
            ptrs += [pointer(o) for o in outs]
            plan.launcher.launch(plan.arrange(ptrs), handle)
        else:  # host arrays on the GPU: core's checked launch copies them in and out
            args = list(plan.args)
            for pos, role, idx in plan.pointer_slots:
                if role == "in":
                    k = plan.ins[idx]
                    args[pos] = x if k < 0 else plan.tables[k]
                else:
                    args[pos] = outs[idx]
            try:
                plan.built.exe.launch(plan.grid, plan.block, args, stream=stream)
            except BoundsError as e:  # (h-mut) debug mode: name the pipe and the array
                raise restated(e, repr(self), self._roles(plan)) from None
        return tuple(outs)

    def _roles(self, plan: DivergentPlan) -> dict[str, str]:
        """Debug mode's names for the kernel's pointer parameters (``in<k>``, ``out<k>``)."""
        roles, k = {}, 0
        for c, chain in enumerate(self.chains):
            n_tables = len(host_tables(chain, *plan.source[:2]))
            roles[f"in{k}"] = f"chain {c}'s input (the batch)"
            for j in range(n_tables):
                roles[f"in{k + 1 + j}"] = f"chain {c}'s value table {j}"
            k += 1 + n_tables
        roles[f"in{k}"] = "the plane map (chain and rank of each plane)"
        for j in range(len(plan.outs)):
            roles[f"out{j}"] = f"output {j}"
        return roles

    def _hot(self, x: Any, out: Any, handle: int, da: Any) -> tuple[Any, ...] | None:
        """The steady-state call: a DeviceArray batch whose plan exists and ``out`` a
        tuple/list of DeviceArrays of exactly the outputs' shapes and dtypes on the same
        device: a few attribute checks and the prepared launch, no adapter lookups (the
        general path costs ~10x more host time, which bounded the GPU time of a stream
        of small divergent calls). None: anything else, which the general path handles
        (and explains when it is wrong)."""
        plan = self._plans.get((x.shape, x.dtype, "cuda", x.device))
        if plan is None or plan.launcher is None or type(out) not in (tuple, list) \
                or len(out) != len(plan.outs):
            return None
        dev = x.device
        for o, (shape, d) in zip(out, plan.outs):
            if type(o) is not da or o.shape != shape or o.dtype != d or o.device != dev:
                return None
        if x.stream not in (0, handle):
            wait(x.stream, handle, dev)
        ptrs = [x.ptr if k < 0 else plan.table_ptrs[k] for k in plan.ins]
        ptrs += [o.ptr for o in out]
        plan.launcher.launch(plan.arrange(ptrs), handle)
        return tuple(out)

    def _plan(self, v: Any, x: Any, ordinal: int = 0) -> DivergentPlan:
        """Everything a call with inputs like ``v`` needs, made once per input kind, on
        CUDA device ``ordinal`` for device inputs."""
        n = len(self.plane_map)
        t, g, lay = self.chains[0].read.host_type([v])
        if g.batch != n or not lay.batch:
            raise ArgumentError(
                f"fkl divergent pipe input: plane_map has {n} planes, so the input must be a "
                f"batch of {n} images, got shape {v.shape}")
        tgt = choose(self.target, self.compiler)[0]
        if tgt.name == "cpu" and v.device == "cuda":
            raise ArgumentError("fkl divergent pipe (target='cpu'): the input must be a "
                                "NumPy array on the host")
        counts = [self.plane_map.count(c) for c in range(len(self.chains))]
        on_device = v.device == "cuda"
        values: list[Any] = []
        ins: list[int] = []  # each input parameter: -1 for x, else its table's index
        tables: list[Any] = []
        outs_spec: list[tuple[tuple[int, ...], Any]] = []
        width = height = 0
        for c, chain in enumerate(self.chains):
            vals, _, _ = host_plan(chain, t, g, lay)
            # The chain's own output: a batch of its n_c planes.
            _, og, specs = host_plan(chain, t, Geom(g.w, g.h, counts[c], g.unbounded),
                                     Layout(True, lay.channel_axis))
            values += vals
            own = _tables(host_tables(chain, t, g), on_device, chain.middle, ordinal)
            ins += [-1, *range(len(tables), len(tables) + len(own))]
            tables += own
            outs_spec += specs
            width, height = max(width, og.w), max(height, og.h)
        rank = [self.planes(m).index(z) for z, m in enumerate(self.plane_map)]
        ins.append(len(tables))
        tables += _tables([(dt.int32, [*self.plane_map, *rank])], on_device, [], ordinal)
        values += counts
        built = self._build(t, ordinal)
        args, pointer_slots = fill_args(built.lowered, values, [])
        n_in = len(ins)
        order = [idx if role == "in" else n_in + idx for _, role, idx in pointer_slots]
        grid = (-(-width // BLOCK[0]), -(-height // BLOCK[1]), n)
        plan = DivergentPlan(args, pointer_slots, grid, BLOCK, outs_spec, on_device, order,
                             built, (t, g, lay), tables=tables,
                             table_ptrs=[pointer(a, "table") for a in tables], ins=ins,
                             cpu=tgt.name == "cpu", ordinal=ordinal)
        if self.debug:  # (h-mut) the arrays' extents fill the span params: x, tables, outs
            add_spans(plan, [extent_bytes(v) if k < 0 else extent_bytes(view(tables[k], "table"))
                             for k in ins] + [d.itemsize * math.prod(s) for s, d in outs_spec])
        plan.prepare()
        return plan

    def _outs(self, out: Any, specs: list[tuple[tuple[int, ...], Any]], device: bool,
              device_id: int, handle: int) -> list[Any]:
        if out is not None:
            return check_out(specs, out, device)
        if device:
            from thork_core.runtime import DeviceArray

            return [DeviceArray(s, d, device=device_id, stream=handle) for s, d in specs]
        import numpy as np

        return [np.empty(s, dtype=d.numpy) for s, d in specs]


def _plane_map(plane_map: Any, n_chains: int) -> list[int]:
    try:
        raw = plane_map.tolist() if hasattr(plane_map, "tolist") else list(plane_map)
    except TypeError:
        raise ArgumentError(f"fkl.compose_divergent plane_map: expected a sequence of chain "
                            f"indices, got {type(plane_map).__name__}") from None
    if not raw:
        raise ArgumentError("fkl.compose_divergent plane_map: expected at least one plane")
    if len(raw) > 65535:
        raise ArgumentError(f"fkl.compose_divergent plane_map: {len(raw)} planes exceed the "
                            "CUDA grid limit of 65535")
    for z, m in enumerate(raw):
        if isinstance(m, bool) or not isinstance(m, int):
            raise ArgumentError(f"fkl.compose_divergent plane_map[{z}]: expected an int "
                                f"chain index, got {m!r}")
        if not 0 <= m < n_chains:
            raise ArgumentError(
                f"fkl.compose_divergent plane_map[{z}] = {m}: out of range for {n_chains} "
                f"chain(s); indices are 0-based, 0 to {n_chains - 1}")
    for c in range(n_chains):
        if c not in raw:
            raise ArgumentError(f"fkl.compose_divergent plane_map: chain {c} runs no plane; "
                                "drop it or map a plane to it")
    return list(raw)


def lower_divergent(chains: list[Chain], t: PixType, n: int, name: str) -> Lowered:
    """Trace the divergent kernel: per chain its input pointer, read and op parameters;
    then a table of the plane → chain and plane → rank maps (``n`` planes) and each
    chain's plane count; then every chain's outputs. Each chain's body sits in its own
    branch."""
    b = Params()
    trace = Trace(name, b.params)
    prev = set_current(trace)
    try:
        parts = []
        for chain in chains:
            in_ptrs = b.inputs(chain.read.input_dtypes(t))
            read_p = b.scalars(chain.read.scalar_types(t))
            parts.append((in_ptrs, read_p, b.op_scalars(chain, t)))
        maps = b.inputs([dt.int32])[0]  # [chain of plane 0..n-1, rank of plane 0..n-1]
        counts = b.scalars([dt.int32] * len(chains))
        x, y, z = thread_xyz()
        which = maps[z]
        j = maps[z + n]
        for c, chain in enumerate(chains):
            in_ptrs, read_p, op_params = parts[c]
            with if_(which == c):
                chain_body(b, chain, t, in_ptrs, read_p, op_params, x, y, z, j, counts[c])
                return_()
    finally:
        set_current(prev)
    return b.finish(name, trace, BLOCK)


def thread_xyz() -> tuple[Value, Value, Value]:
    """The thread's pixel (x, y) and plane z in the 2-D kernel, int32."""
    bx, by, bz = (Value(Special(dt.uint32, f"blockIdx.{a}")) for a in "xyz")
    tx, ty_ = (Value(Special(dt.uint32, f"threadIdx.{a}")) for a in "xy")
    dx, dy = (Value(Special(dt.uint32, f"blockDim.{a}")) for a in "xy")
    return (cast(bx * dx + tx, dt.int32), cast(by * dy + ty_, dt.int32), cast(bz, dt.int32))


def chain_body(b: Params, chain: Chain, t: PixType, in_ptrs: Any, read_p: list[Value],
               op_params: list[list[Value]], x: Value, y: Value, z: Value, j: Value,
               nb: Value, outs: Any = None) -> None:
    """One chain on plane ``z`` (its input plane), writing item ``j`` of its output (to
    ``outs``, pointers declared by the caller, or to new output parameters)."""
    stage: Stage = chain.read.stage(in_ptrs, read_p, t)
    last = chain.last_readback
    ty = t
    for i, op in enumerate(chain.middle[: last + 1]):
        if op.kind == "readback":
            stage = op.sample(stage, op_params[i])
        elif op.kind == "compute":
            stage = _fused(stage, op, op_params[i], ty)
        else:
            raise ArgumentError(f"{op.name} sits before the chain's last geometry op; move it "
                                "after the last Crop/Resize/Warping/...")
        ty = op.out_type(ty)
    with if_((x >= stage.w) | (y >= stage.h)):  # this chain's own extent
        return_()
    px = stage.read(x, y, z)
    for i, op in enumerate(chain.middle[last + 1:], start=last + 1):
        if op.kind == "midwrite":
            assert isinstance(op, WriteOp)
            op.store(b.outputs(write_dtypes(op, ty)), px, x, y, j, stage.w, stage.h, nb, ty)
        else:
            px = op.apply(px, op_params[i], ty)
        ty = op.out_type(ty)
    if outs is None:
        outs = b.outputs(write_dtypes(chain.write, ty))
    chain.write.store(outs, px, x, y, j, stage.w, stage.h, nb, ty)
