"""``fkl.compose``: a lazy chain of ops, and :class:`Pipe`, which runs it as one kernel.

Two cache levels (SPEC §3.6): each pipe maps the input pixel type to its built kernel, and
a process-wide table maps the full *type signature* (op types, pixel type, target,
compiler, arch) to the built executable, so a second pipe that differs only in values
(factors, rects, sizes, matrices...) reuses the first one's kernel. Per input shape a pipe
keeps the packed runtime values, the grid and the output shapes, so a hot call is: look
up the shape, take the array pointers, one launch.

A chain has up to two kernel *variants* (part of the kernel identity): ``"flat"``, the
vectorized 1-D kernel of :mod:`fkl._flat` for chains without geometry ops, and ``"grid"``,
the general 2-D kernel. A flat kernel is *channel-folded* when the chain allows it (every
op channel-uniform, packed reads and writes): it then runs as a 1-channel chain over the
N * C elements — also part of the identity. The flat one needs aligned base addresses, a
runtime property, so every call checks the array addresses and runs the grid variant
(built on first need) for misaligned arrays.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from thork_core import (
    ArgumentError,
    ArrayView,
    CompileInfo,
    DType,
    Executable,
    Target,
    build_kernel,
    choose,
    compile_artifact,
    dt,
    parse_arch,
    plugins,
)

from ._flat import FlatSpec, flat_spec, lower_flat
from ._launcher import Launcher, make_launcher
from ._lowering import Chain, Lowered, host_plan, kernel_name, lower, type_chain
from ._ops import Op
from ._pixel import PixType
from ._tensor import Layout, ReadOp, ReadSet, WriteOp

__all__ = ["compose", "Pipe", "stats", "reset_stats"]

_INT32_LIMIT = 2**31


@dataclass
class _Built:
    lowered: Lowered
    exe: Executable
    info: CompileInfo


@dataclass
class _Plan:
    """Everything a call with one input shape needs, computed once: the arguments with
    the scalars filled in, where the arrays go, the grid and block, the outputs' shapes
    and dtypes, whether the arrays live on the device, and the pre-packed launcher.

    ``align_mask`` is nonzero for the flat variant: an array address with any of those
    bits set makes the call use ``fallback``, the grid variant's plan (made on first
    need from ``source``, the pixel type, geometry and layout)."""

    args: list[Any]
    pointer_slots: list[tuple[int, str, int]]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    outs: list[tuple[tuple[int, ...], DType]]
    device: bool
    order: list[int]
    built: _Built
    source: tuple[PixType, Any, Layout]
    align_mask: int = 0
    fallback: _Plan | None = None
    launcher: Launcher | None = None


_BUILT: dict[tuple[Any, ...], _Built] = {}
_LOCK = threading.Lock()
_STATS = {"builds": 0, "reuses": 0}


def stats() -> dict[str, int]:
    """Process-wide counters: ``builds`` (kernels traced and built — a compile or a
    disk-cache load) and ``reuses`` (a pipe found its kernel already built)."""
    return dict(_STATS)


def reset_stats(clear_cache: bool = False) -> None:
    """Zero the counters; ``clear_cache`` also forgets every built kernel."""
    _STATS.update(builds=0, reuses=0)
    if clear_cache:
        _BUILT.clear()


def compose(*ops: Op, target: str | None = None, compiler: str | None = None,
            thread_fusion: bool = False) -> Pipe:
    """Chain ``ops`` (a read, then compute/geometry ops, then a write) into a lazy
    :class:`Pipe`. Nothing is compiled until the first call, when the input's type is
    known. ``target`` is ``"gpu"``, ``"cpu"`` or None (the best available)."""
    return Pipe(ops, target=target, compiler=compiler, thread_fusion=thread_fusion)


class Pipe:
    """A composed chain; ``pipe(x, out=None, stream=None)`` runs it as one kernel.

    A pipe for the GPU (or any target but ``"cpu"``) is made an instance of a subclass
    whose first base is core's native ``GuardedCall`` where that module is available: the
    hot call ``pipe(x, out=y[, stream=s])`` is then tried in C (core's guard checks and
    launches) before any Python runs, and everything else comes to :meth:`__call__` here.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Pipe:
        if cls is Pipe and kwargs.get("target") != "cpu":
            guarded = _guarded_pipe()
            if guarded is not None:
                return guarded.__new__(guarded)  # type: ignore[no-any-return]
        return super().__new__(cls)

    def __init__(self, ops: Sequence[Op], *, target: str | None = None,
                 compiler: str | None = None, thread_fusion: bool = False) -> None:
        ops = tuple(ops)
        for i, op in enumerate(ops):
            if not isinstance(op, Op):
                raise ArgumentError(f"fkl.compose: argument {i} is not an fkl operation: "
                                    f"{op!r}")
        if len(ops) < 2 or not isinstance(ops[0], ReadOp):
            first = ops[0].name if ops else "nothing"
            raise ArgumentError(f"fkl.compose: a chain starts with a read op such as "
                                f"fkl.TensorRead(), got {first}")
        if not isinstance(ops[-1], WriteOp) or ops[-1].kind != "write":
            raise ArgumentError(f"fkl.compose: a chain ends with a write op such as "
                                f"fkl.TensorWrite(), got {ops[-1].name}")
        for op in ops[1:-1]:
            if op.kind not in ("compute", "readback", "midwrite"):
                raise ArgumentError(f"fkl.compose: {op.name} ({op.kind}) can only start or end "
                                    "a chain")
        if thread_fusion and target == "cpu":
            raise ArgumentError("fkl.compose thread_fusion: only the GPU target has thread "
                                "fusion; use thread_fusion=False with target='cpu'")
        self.ops = ops
        self.chain = Chain(ops[0], ops[1:-1], ops[-1])  # type: ignore[arg-type]
        self.target = target
        self.compiler = compiler
        # Thread fusion (several pixels per thread, vector accesses) is the flat variant.
        # Its results are bit-identical; which is faster was measured: on the CPU target
        # the flat kernel, unfolded (1080p 6-op chain: grid 8.2, flat 4.3, flat folded
        # 5.3 ms on 2 cores), on the H200 the 2-D kernel for the unfolded 3-channel
        # layout (22.2 vs 28.9 us, bench/bench_fkl.py: three float4 per thread at a
        # 48-byte stride). A channel-folded or coalesced flat kernel has a copy's access
        # pattern, so the GPU uses it by default there (H200: 1080p 6-op chain 20.0 us,
        # 94% of a copy; uint8 HWC -> float CHW at 8K 91% of copy bandwidth, grid 72%);
        # other chains keep the 2-D kernel there unless `thread_fusion=True` asks for
        # the flat one, as in FKL. docs/fkl-fusion.md.
        self.thread_fusion = thread_fusion
        #: Force the flat (True) or the 2-D (False) kernel where the chain allows the
        #: flat one; None chooses by target as above.
        self.flat: bool | None = None
        #: Channel-fold flat kernels whose chain allows it (True), never (False), or
        #: None: by target (the GPU folds, the CPU does not; see :meth:`folds`). Like
        #: ``flat``, read when a kernel is first chosen for an input shape.
        self.fold: bool | None = None
        #: Pixel groups per thread of the flat kernel (1, 2, 4 or 8); None: the default
        #: (fkl._flat.FOLD_VECTORS for folded kernels, else 1).
        self.vectors: int | None = None
        self._target: Target | None = None
        self._built: dict[tuple[Any, ...], _Built] = {}
        self._specs: dict[tuple[Any, ...], FlatSpec | None] = {}
        self._plans: dict[Any, _Plan] = {}
        # Hot path: (shape, dtype, device) of each input -> (plan, launcher).
        self._hot: dict[Any, tuple[_Plan, Launcher]] = {}
        # One-in, one-out device hot path: a core guard per input kind (checks + launch in
        # one call, C where core built its native module), and the last one that hit
        # (tried first; in C, before any Python runs, where the pipe is a _GuardedPipe).
        self._hot1: dict[Any, Any] = {}
        self._hot_guard: Any = None
        self._n_inputs = self.chain.read.inputs

    def __repr__(self) -> str:
        return f"<fkl pipe {' -> '.join(op.name for op in self.ops)}>"

    def __reduce__(self) -> tuple[Any, ...]:
        """A pipe pickles (and copies) as its recipe: the ops and the settings. Kernels
        and launch state stay behind; the new pipe builds them, or finds them in the
        caches, on its first call."""
        return (_restore, (self.ops, self.target, self.compiler, self.thread_fusion,
                           self.flat, self.fold, self.vectors))

    # -- building ----------------------------------------------------------------------
    def _resolve(self) -> Target:
        if self._target is None:
            self._target = choose(self.target, self.compiler)[0]
        return self._target

    def _target_name(self, target: str | None) -> str:
        """``target``, or this pipe's target's name (resolving it)."""
        return target if target is not None else self._resolve().name

    def folds(self, target: str | None = None) -> bool:
        """Whether flat kernels are channel-folded where the chain allows it: ``fold``
        when set, else by target — the GPU folds, the CPU keeps the pixels' channels
        (measured faster there, docs/fkl-fusion.md). ``target`` as in :meth:`variant`."""
        if self.fold is not None:
            return bool(self.fold)
        return self._target_name(target) != "cpu"

    def flat_spec(self, t: PixType, target: str | None = None) -> FlatSpec | None:
        """How the chain runs as the flat kernel for input pixels ``t`` (None: it
        cannot, and always uses the 2-D grid kernel); ``.folded`` says whether it is
        channel-folded. ``target`` as in :meth:`variant`."""
        return self._flat_spec(t, self.folds(target))

    def _flat_spec(self, t: PixType, fold: bool) -> FlatSpec | None:
        key = (t, fold, self.vectors)
        if key not in self._specs:
            type_chain(self.chain, t)
            self._specs[key] = flat_spec(self.chain, t, fold=fold, vectors=self.vectors)
        return self._specs[key]

    def _has_flat(self, t: PixType) -> bool:
        """Whether the chain has a flat kernel for ``t`` (folded or not: a chain that
        folds has one either way), without looking for a target."""
        return self._flat_spec(t, False) is not None

    def variant(self, t: PixType, target: str | None = None) -> str:
        """The preferred kernel variant for ``t``: ``"flat"`` or ``"grid"``. ``target``
        (``"gpu"`` or ``"cpu"``) gives that target's choice without looking for one;
        None: this pipe's target (resolved when the choice depends on it).

        ``flat`` forces either; else the flat kernel where the chain has one on the CPU
        and with ``thread_fusion``, and on the GPU where it is channel-folded or its
        accesses are coalesced (:attr:`~fkl._flat.FlatSpec.coalesced`, e.g. uint8 HWC
        to planar float CHW)."""
        flat = self.flat
        if flat is None:
            if self.thread_fusion or self._target_name(target) == "cpu":
                flat = True
            else:  # the GPU: the flat kernel when warps access contiguous runs
                spec = self.flat_spec(t, target)
                flat = spec is not None and (spec.folded or spec.coalesced)
        return "flat" if flat and self._has_flat(t) else "grid"

    def _check_variant(self, t: PixType, variant: str | None,
                       target: str | None = None) -> str:
        if variant is None:
            return self.variant(t, target)
        if variant == "grid" or (variant == "flat" and self._has_flat(t)):
            return variant
        if variant == "flat":
            raise ArgumentError(
                f"fkl pipe: {self!r} has no flat kernel for {t} pixels (a geometry op, or "
                "a read/write without a flat form); use variant='grid'")
        raise ArgumentError(f"fkl pipe variant: expected 'flat', 'grid' or None, got "
                            f"{variant!r}")

    def _form(self, t: PixType, variant: str, target: str | None = None) -> Any:
        """The kernel's shape within (chain, pixel type): ``"grid"``, or ``("flat",
        fold, vectors)`` (see :class:`~fkl._flat.FlatSpec`)."""
        if variant == "flat":
            spec = self.flat_spec(t, target)
            assert spec is not None
            return ("flat", spec.fold, spec.vectors)
        return "grid"

    def signature(self, t: PixType, variant: str | None = None) -> tuple[Any, ...]:
        """The kernel identity for input pixels ``t``: types only, never values."""
        variant = self._check_variant(t, variant)
        tgt, comp = choose(self._resolve(), self.compiler)
        return (self.chain.key(), t, self._form(t, variant), tgt.name, comp.name,
                tgt.arch())

    def lowered(self, t: PixType, variant: str | None = None) -> Lowered:
        """The traced kernel for input pixels of type ``t`` (no compilation); by default
        the variant a call with aligned arrays runs. ``.variant`` and ``.fold`` (C for a
        channel-folded flat kernel) say which kernel it is."""
        return self._lowered(t, self._check_variant(t, variant))

    def _lowered(self, t: PixType, variant: str, target: str | None = None) -> Lowered:
        form = self._form(t, variant, target)
        type_chain(self.chain, t)
        return self._lower(t, variant, kernel_name((self.chain.key(), t, form)), target)

    def _lower(self, t: PixType, variant: str, name: str,
               target: str | None = None) -> Lowered:
        if variant == "flat":
            spec = self.flat_spec(t, target)
            assert spec is not None
            return lower_flat(self.chain, t, name, spec)
        return lower(self.chain, t, name)

    def _build(self, t: PixType, variant: str) -> _Built:
        local = (t, self._form(t, variant))
        built = self._built.get(local)
        if built is not None:
            return built
        key = self.signature(t, variant)
        with _LOCK:
            built = _BUILT.get(key)
            if built is None:
                type_chain(self.chain, t)
                lowered = self._lower(t, variant, kernel_name(key[:3]))
                exe, info = build_kernel(lowered.ir, self._resolve(), self.compiler)
                built = _Built(lowered, exe, info)
                _BUILT[key] = built
                _STATS["builds"] += 1
            else:
                _STATS["reuses"] += 1
        self._built[local] = built
        return built

    def source(self, x: Any = None, *, dtype: Any = None, channels: int = 1,
               variant: str | None = None) -> str:
        """The generated source for this pipe's target, for input ``x`` (or the given
        pixel dtype and channel count); ``variant`` as in :meth:`lowered`. A pipe
        composed with ``target="gpu"`` gives its CUDA source without needing a GPU."""
        t = self._pixtype(x, dtype, channels)
        if self.target == "gpu" and self._target is None:
            from thork_core import CudaRenderer

            lowered = self._lowered(t, self._check_variant(t, variant, "gpu"), "gpu")
            return CudaRenderer().render(lowered.ir)
        return self._resolve().renderer().render(self.lowered(t, variant).ir)

    def artifact(self, x: Any = None, *, dtype: Any = None, channels: int = 1,
                 arch: str = "sm_90", compiler: str | None = None, kind: str = "cubin",
                 variant: str | None = None) -> Any:
        """Compile the CUDA source for ``arch`` without loading it (no GPU needed);
        ``variant`` as in :meth:`lowered`, by default the kernel the GPU runs (whatever
        this pipe's target)."""
        from thork_core import CudaRenderer
        from thork_core.plugin import GpuTarget

        t = self._pixtype(x, dtype, channels)
        lowered = self._lowered(t, self._check_variant(t, variant, "gpu"), "gpu")
        comp = plugins().compiler(compiler or self.compiler, GpuTarget())
        source = CudaRenderer().render(lowered.ir)
        art, _, _ = compile_artifact(lowered.ir, source, comp, kind, parse_arch(arch))
        return art

    def _pixtype(self, x: Any, dtype: Any, channels: int) -> PixType:
        if x is not None:
            views = [_view(a, f"input {i}") for i, a in enumerate(
                x if isinstance(x, (list, tuple)) else [x])]
            return self.chain.read.host_type(views)[0]
        if isinstance(self.chain.read, ReadSet):
            return self.chain.read.host_type([])[0]
        from ._pixel import as_dtype

        return PixType(as_dtype(dtype or "float32", "dtype"), channels,
                       pair=self.chain.read.inputs == 2)

    def compile_info(self, t: PixType | None = None) -> CompileInfo | None:
        """How the kernel for ``t`` (default: the most recent) was built."""
        if t is None:
            return next(reversed(self._built.values())).info if self._built else None
        for variant in (self.variant(t), "grid", "flat"):
            if variant == "flat" and not self._has_flat(t):
                continue
            built = self._built.get((t, self._form(t, variant)))
            if built is not None:
                return built.info
        return None

    # -- running -----------------------------------------------------------------------
    def __call__(self, *inputs: Any, out: Any = None, stream: Any = None) -> Any:
        """Run the chain on ``inputs`` (one array; two for DualRead; none for ReadSet).

        Host (NumPy) inputs give host outputs (the GPU target copies in and out and
        synchronizes); device inputs give :class:`fkl.DeviceBuffer` outputs on the same
        device, queued on ``stream`` without synchronization. ``out`` (an array, or a
        list for several outputs) is written instead of allocating.
        """
        # The hottest case first: one DeviceBuffer in, a DeviceBuffer of exactly the
        # output's kind given as out=, both ready on the launch stream, vector-aligned.
        # One guard call: core checks all that and launches (False: it launched nothing).
        if len(inputs) == 1:
            guard = self._hot_guard
            if guard is not None and guard(inputs[0], out, stream):
                return out
            if self._hot1:
                x = inputs[0]
                guard = self._hot1.get((type(x), getattr(x, "shape", None),
                                        getattr(x, "dtype", None), getattr(x, "device", None)))
                if guard is not None and guard(x, out, stream):
                    self._hot_guard = guard
                    return out
        if len(inputs) != self._n_inputs:
            read = self.chain.read
            raise ArgumentError(
                f"fkl pipe: {read.name} reads {read.inputs} array(s), got {len(inputs)}")
        ptrs: list[int] = []
        key: list[Any] = []
        producers: list[tuple[int, int]] = []
        for x in inputs:
            fast = _fast_info(x)
            if fast is None:
                key = None  # type: ignore[assignment]
                break
            ptrs.append(fast[0])
            key.append(fast[1])
            if fast[2]:
                producers.append((fast[2], fast[3]))
        hot = self._hot.get(tuple(key)) if key is not None else None
        if hot is None:
            return self._call_slow(inputs, out, stream, key)
        plan, launcher = hot
        handle = _stream(stream) if stream is not None else 0
        for producer, device in producers:  # CAI-v3-like: order after the producer stream
            if producer != handle:
                _wait(producer, handle, device)
        if out is None:
            outs = _allocate(plan, self._on_device(plan), inputs, handle)
            for o in outs:
                ptrs.append(_pointer(o))
        else:
            # The common hot cases: one device array of exactly the output's kind.
            optr = _fast_out(out, plan) if plan.device and len(plan.outs) == 1 else None
            if optr is not None:
                outs = [out]
                ptrs.append(optr)
            else:
                outs = self._check_out(plan, out, plan.device)
                for o in outs:
                    ptrs.append(_pointer(o))
        if plan.align_mask:
            bits = 0
            for p in ptrs:
                bits |= p
            if bits & plan.align_mask:  # a misaligned array: the flat kernel cannot run
                plan = self._fallback(plan)
                launcher = plan.launcher  # type: ignore[assignment]
        launcher.launch(_order(plan, ptrs), handle)
        return outs[0] if len(outs) == 1 else tuple(outs)

    # What core's GuardedCall base calls for every call it did not launch itself (a
    # _GuardedPipe): the same Python path (a guard that missed in C is tried once more
    # here: one more check on the general path, never a second launch).
    _miss = __call__

    @staticmethod
    def _on_device(plan: _Plan) -> bool:
        return plan.device

    def _call_slow(self, inputs: tuple[Any, ...], out: Any, stream: Any,
                   key: list[Any] | None) -> Any:
        """First call for an input type/shape (or an input without a fast path)."""
        read = self.chain.read
        views = [_view(x, f"input {i}") for i, x in enumerate(inputs)]
        t, g, lay = read.host_type(views)
        tgt = self._resolve()
        on_device = any(v.device == "cuda" for v in views)
        if tgt.name == "cpu" and on_device:
            raise ArgumentError(
                "fkl pipe (target='cpu'): inputs must be NumPy arrays on the host; got a "
                "device array (copy it to the host, or compose with target='gpu')")
        if on_device and not all(v.device == "cuda" for v in views):
            raise ArgumentError("fkl pipe: inputs mix host and device arrays")
        shape_key = (t, tuple(v.shape for v in views), on_device)
        plan = self._plans.get(shape_key)
        if plan is None:
            variant = self.variant(t)
            spec = self.flat_spec(t) if variant == "flat" else None
            if spec is not None and not spec.fits(g):
                variant = "grid"  # planes whose starts are not vector-aligned
            plan = self._plan(t, g, lay, on_device, variant)
            self._plans[shape_key] = plan
        outs = self._check_out(plan, out, on_device) if out is not None else \
            _allocate(plan, on_device, inputs, _stream(stream) if stream is not None else 0)
        ptrs = [v.ptr for v in views] + [_pointer(o) for o in outs]
        # Device arrays (and host arrays on the CPU target) get the pre-packed hot path.
        direct = on_device or tgt.name == "cpu"
        if direct and plan.launcher is None:
            plan.launcher = make_launcher(plan.built.exe, plan.built.lowered.ir, plan.args,
                                          plan.grid, plan.block)
        run = plan
        if plan.align_mask and any(p & plan.align_mask for p in ptrs):
            run = self._fallback(plan)
        if direct and plan.launcher is not None and run.launcher is not None:
            handle = _stream(stream) if stream is not None else 0
            for v in views:
                if v.stream is not None and v.stream != handle:
                    _wait(v.stream, handle, v.device_id)
            run.launcher.launch(_order(run, ptrs), handle)
            if key is not None:
                self._hot[tuple(key)] = (plan, plan.launcher)
                if len(inputs) == 1 and plan.device and len(outs) == 1 \
                        and len(plan.order) == 2 and type(inputs[0]) is _TYPES[1]:
                    x = inputs[0]
                    out_shape, out_dtype = plan.outs[0]
                    guard = plan.launcher.prepared.guard(
                        _TYPES[1], [(x.shape, x.dtype, x.device),
                                    (out_shape, out_dtype, x.device)],
                        plan.order, plan.align_mask, _stream)
                    self._hot1[(type(x), x.shape, x.dtype, x.device)] = guard
                    self._hot_guard = guard
        else:
            args = list(run.args)
            for pos, role, idx in run.pointer_slots:
                args[pos] = inputs[idx] if role == "in" else outs[idx]
            run.built.exe.launch(run.grid, run.block, args, stream=stream)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _fallback(self, plan: _Plan) -> _Plan:
        """The grid-variant plan that stands in for the flat ``plan`` on misaligned
        arrays (built, with its launcher, on first need)."""
        if plan.fallback is None:
            fb = self._plan(*plan.source, plan.device, "grid")
            if plan.launcher is not None:
                fb.launcher = make_launcher(fb.built.exe, fb.built.lowered.ir, fb.args,
                                            fb.grid, fb.block)
            plan.fallback = fb
        return plan.fallback

    def _plan(self, t: PixType, g: Any, lay: Layout, device: bool, variant: str) -> _Plan:
        built = self._build(t, variant)
        values, og, outs = host_plan(self.chain, t, g, lay)
        lowered = built.lowered
        spec = self.flat_spec(t) if variant == "flat" else None
        if spec is not None:
            if spec.folded:  # the kernel's values are those of the 1-channel chain
                values = host_plan(self.chain, spec.traced(t), spec.host_geom(g), lay)[0]
            values = [*values, spec.segments(og)[0]]  # the flat kernel's extra scalar
        args: list[Any] = [None] * len(lowered.slots)
        pointer_slots = []
        for pos, (role, idx) in enumerate(lowered.slots):
            if role == "scalar":
                args[pos] = _scalar(values[idx], lowered.scalar_types[idx], self.ops)
            else:
                pointer_slots.append((pos, role, idx))
        for shape, _ in outs:
            _check_size(shape, "output")
        block = lowered.block
        if og.batch > 65535:
            raise ArgumentError(f"fkl pipe: batch of {og.batch} planes exceeds the CUDA grid "
                                "limit of 65535")
        if spec is not None:
            grid = spec.grid(og)
        else:
            grid = (-(-og.w // block[0]), -(-og.h // block[1]), og.batch)
        n_in = sum(1 for _, role, _ in pointer_slots if role == "in")
        order = [idx if role == "in" else n_in + idx for _, role, idx in pointer_slots]
        return _Plan(args, pointer_slots, grid, block, outs, device, order, built, (t, g, lay),
                     align_mask=spec.align - 1 if spec is not None else 0)

    def _check_out(self, plan: _Plan, out: Any, on_device: bool) -> list[Any]:
        given = list(out) if isinstance(out, (list, tuple)) else [out]
        if len(given) != len(plan.outs):
            raise ArgumentError(f"fkl pipe out: the chain writes {len(plan.outs)} array(s), "
                                f"got {len(given)}")
        for i, (o, (shape, d)) in enumerate(zip(given, plan.outs, strict=False)):
            what = f"out[{i}]" if len(given) > 1 else "out"
            v = _view(o, what)
            if v.dtype != d or not _same_shape(v.shape, shape):
                raise ArgumentError(
                    f"fkl pipe {what}: expected shape {shape} and dtype {d.name}, got "
                    f"{v.shape} {v.dtype.name}")
            if v.readonly:
                raise ArgumentError(f"fkl pipe {what}: the output array is read-only")
            if on_device != (v.device == "cuda"):
                raise ArgumentError(
                    f"fkl pipe {what}: inputs and outputs must all be host arrays or all be "
                    "device arrays")
        return given


def _allocate(plan: _Plan, on_device: bool, inputs: tuple[Any, ...], handle: int) -> list[Any]:
    if on_device:
        from thork_core.runtime import DeviceArray

        dev = _device_of(inputs[0]) if inputs else 0
        return [DeviceArray(shape, d, device=dev, stream=handle) for shape, d in plan.outs]
    return [_host_empty(shape, d) for shape, d in plan.outs]


def _order(plan: _Plan, ptrs: list[int]) -> list[int]:
    """Input and output addresses (inputs first) in kernel-parameter order."""
    return [ptrs[i] for i in plan.order]


def _device_of(x: Any) -> int:
    dev = getattr(x, "device", 0)
    if isinstance(dev, int):
        return dev
    idx = getattr(dev, "index", None)  # torch.device
    if isinstance(idx, int):
        return idx
    return _view(x, "input").device_id


_TYPES: list[type] = []


def _array_types() -> list[type]:
    """``[numpy.ndarray, DeviceArray]``, imported on first use (keeps ``import fkl`` fast)."""
    if not _TYPES:
        import numpy as np
        from thork_core.runtime import DeviceArray

        _TYPES.extend((np.ndarray, DeviceArray))
    return _TYPES


def _fast_info(x: Any) -> tuple[int, Any, int, int] | None:
    """``(address, hot-path key, producer stream, device)`` for arrays that can skip the
    adapters, else None. The producer stream is 0 when no wait can be needed: host
    arrays, and CAI v3's absent/legacy/per-thread default streams (as core's launch)."""
    nd, da = _TYPES or _array_types()
    tx = type(x)
    if tx is da:
        return x.ptr, (x.shape, x.dtype, x.device), x.stream, x.device
    if tx is nd:
        if not x.flags.c_contiguous:
            return None
        return x.__array_interface__["data"][0], (x.shape, x.dtype, -1), 0, -1
    # CuPy, torch, Numba...: __cuda_array_interface__, C-contiguous (no strides), on the
    # one GPU (with several, the owning device needs the adapter's pointer query).
    try:
        cai = x.__cuda_array_interface__
    except Exception:  # noqa: BLE001 - e.g. torch raises for a CPU tensor
        return None
    if cai.get("strides") is not None or cai.get("mask") is not None or not _one_gpu():
        return None
    stream = cai.get("stream")
    return (cai["data"][0], (tx, tuple(cai["shape"]), cai["typestr"]),
            0 if stream in (None, 1, 2) else stream, 0)


def _fast_out(out: Any, plan: _Plan) -> int | None:
    """The address of ``out`` when it is a device array of exactly the plan's single
    output (shape, dtype, writable, C-contiguous), else None (the full check runs)."""
    shape, d = plan.outs[0]
    if type(out) is _TYPES[1]:
        return out.ptr if out.shape == shape and out.dtype is d else None
    try:
        cai = out.__cuda_array_interface__
    except Exception:  # noqa: BLE001
        return None
    ptr, readonly = cai["data"]
    if readonly or cai.get("strides") is not None or cai.get("mask") is not None or \
            cai["typestr"] != _typestr(d) or tuple(cai["shape"]) != shape or \
            cai.get("stream") not in (None, 1, 2) or not _one_gpu():
        return None
    return ptr


_ONE_GPU: list[bool] = []


def _one_gpu() -> bool:
    """Whether exactly one GPU is visible (asked once)."""
    if not _ONE_GPU:
        from thork_core.runtime import device_count

        try:
            _ONE_GPU.append(device_count() == 1)
        except Exception:  # noqa: BLE001 - no driver: no device arrays either
            _ONE_GPU.append(False)
    return _ONE_GPU[0]


def _typestr(d: DType) -> str | None:
    from thork_core.runtime import typestr

    return typestr(d)


def _pointer(o: Any) -> int:
    nd, da = _TYPES or _array_types()
    if type(o) is da:
        return o.ptr
    if type(o) is nd:
        return o.__array_interface__["data"][0]
    return _view(o, "out").ptr


def _stream(stream: Any) -> int:
    from thork_core.runtime import stream_handle

    return stream_handle(stream)


def _wait(producer: int, consumer: int, device: int) -> None:
    from thork_core.runtime import stream_wait

    stream_wait(device, producer, consumer)


def _same_shape(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    def strip(s: tuple[int, ...]) -> tuple[int, ...]:
        return s[:-1] if s and s[-1] == 1 else s

    return a == b or strip(a) == strip(b)


def _host_empty(shape: tuple[int, ...], d: DType) -> Any:
    import numpy as np

    return np.empty(shape, dtype=d.numpy)


def _check_size(shape: tuple[int, ...], what: str) -> None:
    n = 1
    for s in shape:
        n *= s
    if n >= _INT32_LIMIT:
        raise ArgumentError(f"fkl pipe {what}: {n} elements; fkl kernels index with int32, "
                            f"so arrays must have fewer than 2**31 elements")


def _view(x: Any, what: str) -> ArrayView:
    """Adapt an input/output array and check what every fkl kernel needs."""
    for adapter in plugins().array_adapters():
        v = adapter.view(x, None)
        if v is not None:
            break
    else:
        raise ArgumentError(
            f"fkl pipe {what}: expected an array (NumPy, __cuda_array_interface__ or DLPack), "
            f"got {type(x).__name__}")
    if not v.contiguous:
        raise ArgumentError(
            f"fkl pipe {what}: needs a C-contiguous array, got shape {v.shape} with strides "
            f"{v.strides} (use numpy.ascontiguousarray / .contiguous())")
    _check_size(v.shape, what)
    return v


def _scalar(value: Any, t: DType, ops: Sequence[Op]) -> Any:
    """A runtime value converted for its parameter slot (range-checked for integers)."""
    if t.is_int or t == dt.bool:
        iv = int(value)
        if iv != value:
            raise ArgumentError(f"fkl pipe: value {value!r} is not an integer but the "
                                f"parameter is {t.name}")
        lo, hi = (0, 2**t.bits - 1) if t.kind == "u" else (-(2 ** (t.bits - 1)),
                                                            2 ** (t.bits - 1) - 1)
        if t == dt.bool:
            lo, hi = 0, 1
        if not lo <= iv <= hi:
            raise ArgumentError(f"fkl pipe: value {value!r} does not fit the {t.name} "
                                "parameter it feeds (pixel dtype); cast the pixel first")
        return bool(iv) if t == dt.bool else iv
    return float(value)


_GUARDED: list[type[Pipe] | None] = []


def _guarded_pipe() -> type[Pipe] | None:
    """Pipe with core's native ``GuardedCall`` first among its bases (it then takes the
    call), made once; None where the native module is not available."""
    if not _GUARDED:
        with _LOCK:
            if not _GUARDED:
                from thork_core import guarded_call_base

                base = guarded_call_base()
                _GUARDED.append(None if base is None else type(
                    "_GuardedPipe", (base, Pipe), {"__module__": Pipe.__module__,
                                                   "__doc__": Pipe.__doc__}))
    return _GUARDED[0]


def _restore(ops: Sequence[Op], target: str | None, compiler: str | None,
             thread_fusion: bool, flat: bool | None, fold: bool | None,
             vectors: int | None) -> Pipe:
    """A pipe from what :meth:`Pipe.__reduce__` kept."""
    pipe = Pipe(ops, target=target, compiler=compiler, thread_fusion=thread_fusion)
    pipe.flat, pipe.fold, pipe.vectors = flat, fold, vectors
    return pipe
