"""``fkl.compose``: a lazy chain of ops, and :class:`Pipe`, which runs it as one kernel.

A pipe is thin: it checks the chain and holds the three parts that do the work —
:class:`~fkl._variant.Variants` (which kernel form runs), :class:`~fkl._kernels.Kernels`
(kernel identity, tracing and the build cache) and :class:`~fkl._call.CallPath` (planning
per input shape and the hot call). :func:`compose` is the factory: for the GPU it makes
the pipe an instance of a class whose first base is core's native ``GuardedCall`` where
that module is available, so the hot call ``pipe(x, out=y[, stream=s])`` is decided in C.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from thork_core import ArgumentError, CompileInfo, Target, debug_default

from ._call import CallPath
from ._flat import FlatSpec
from ._kernels import Kernels, reset_stats, stats
from ._lowering import Chain, Lowered
from ._ops import Op
from ._pixel import PixType
from ._tensor import ReadOp, ReadSet, TensorRead, TensorWrite, WriteOp
from ._variant import Variants

__all__ = ["compose", "Pipe", "stats", "reset_stats"]


def compose(*ops: Op, target: str | None = None, compiler: str | None = None,
            thread_fusion: bool = False, debug: bool | None = None) -> Pipe:
    """Chain ``ops`` (a read, then compute/geometry ops, then a write) into a lazy
    :class:`Pipe`. Nothing is compiled until the first call, when the input's type is
    known. ``target`` is ``"gpu"``, ``"cpu"`` or None (the best available). ``debug=True``
    (or ``THORK_DEBUG=1`` when ``debug`` is not given) bounds-checks every array access of
    the pipe's kernel and raises :class:`~thork_core.BoundsError` (docs/debug-mode.md)."""
    if debug is None:
        debug = debug_default()
    cls = Pipe if debug else pipe_class(target)  # debug: every call on the checked path
    return cls(ops, target=target, compiler=compiler, thread_fusion=thread_fusion,
               debug=debug)


class Pipe(CallPath):
    """A composed chain; ``pipe(x, out=None, stream=None)`` runs it as one kernel.

    Made by :func:`fkl.compose` (which picks the class: see :func:`pipe_class`).
    ``flat``, ``fold`` and ``vectors`` steer the kernel form (:class:`fkl._variant.Variants`)
    and are read when a kernel is first chosen for an input shape.
    """

    def __init__(self, ops: Sequence[Op], *, target: str | None = None,
                 compiler: str | None = None, thread_fusion: bool = False,
                 debug: bool = False) -> None:
        ops = tuple(ops)
        _check_chain(ops, target, thread_fusion)
        self.ops = ops
        self.chain = Chain(ops[0], ops[1:-1], ops[-1])  # type: ignore[arg-type]
        self.target = target
        self.compiler = compiler
        self.thread_fusion = thread_fusion
        self.variants = Variants(self.chain, thread_fusion, self._target_name)
        self.kernels = Kernels(self.chain, self.variants, target, compiler, debug=debug)
        self._init_calls()

    def __repr__(self) -> str:
        return f"<fkl pipe {' -> '.join(op.name for op in self.ops)}>"

    def __reduce__(self) -> tuple[Any, ...]:
        """A pipe pickles (and copies) as its recipe: the ops and the settings. Kernels
        and launch state stay behind; the new pipe builds them, or finds them in the
        caches, on its first call."""
        return (_restore, (self.ops, self.target, self.compiler, self.thread_fusion,
                           self.flat, self.fold, self.vectors))

    # -- settings (kept by the variant policy) ------------------------------------------
    @property
    def flat(self) -> bool | None:
        """Force the flat (True) or the 2-D (False) kernel; None: by target."""
        return self.variants.flat

    @flat.setter
    def flat(self, value: bool | None) -> None:
        self.variants.flat = value

    @property
    def fold(self) -> bool | None:
        """Channel-fold flat kernels (True), never (False), or None: by target."""
        return self.variants.fold

    @fold.setter
    def fold(self, value: bool | None) -> None:
        self.variants.fold = value

    @property
    def vectors(self) -> int | None:
        """Pixel groups per thread of the flat kernel (1, 2, 4 or 8); None: default."""
        return self.variants.vectors

    @vectors.setter
    def vectors(self, value: int | None) -> None:
        self.variants.vectors = value

    # -- introspection -------------------------------------------------------------------
    @property
    def _target(self) -> Target | None:
        """The resolved target, None while nothing needed it."""
        return self.kernels.resolved

    def _resolve(self) -> Target:
        return self.kernels.resolve()

    def _target_name(self) -> str:
        return self.kernels.resolve().name

    def folds(self, target: str | None = None) -> bool:
        """Whether flat kernels are channel-folded where the chain allows it: ``fold``
        when set, else by target — the GPU folds, the CPU keeps the pixels' channels."""
        return self.variants.folds(target)

    def flat_spec(self, t: PixType, target: str | None = None) -> FlatSpec | None:
        """How the chain runs as the flat kernel for input pixels ``t`` (None: it
        cannot); ``.folded`` says whether it is channel-folded."""
        return self.variants.flat_spec(t, target)

    def variant(self, t: PixType, target: str | None = None) -> str:
        """The preferred kernel variant for ``t``: ``"flat"`` or ``"grid"``. ``target``
        (``"gpu"`` or ``"cpu"``) gives that target's choice without looking for one."""
        return self.variants.choose(t, target)

    def signature(self, t: PixType, variant: str | None = None) -> tuple[Any, ...]:
        """The kernel identity for input pixels ``t``: types only, never values."""
        return self.kernels.signature(t, self.variants.check(t, variant, repr(self)))

    def lowered(self, t: PixType, variant: str | None = None,
                target: str | None = None) -> Lowered:
        """The traced kernel for input pixels of type ``t`` (no compilation); by default
        the variant a call with aligned arrays runs (for ``target`` when given).
        ``.variant`` and ``.fold`` say which kernel it is."""
        return self.kernels.lowered(
            t, self.variants.check(t, variant, repr(self), target), target)

    def source(self, x: Any = None, *, dtype: Any = None, channels: int = 1,
               variant: str | None = None) -> str:
        """The generated source for this pipe's target, for input ``x`` (or the given
        pixel dtype and channel count); ``variant`` as in :meth:`lowered`. A pipe
        composed with ``target="gpu"`` gives its CUDA source without needing a GPU."""
        return self.kernels.source(self._pixtype(x, dtype, channels), variant, repr(self))

    def artifact(self, x: Any = None, *, dtype: Any = None, channels: int = 1,
                 arch: str = "sm_90", compiler: str | None = None, kind: str = "cubin",
                 variant: str | None = None) -> Any:
        """Compile the CUDA source for ``arch`` without loading it (no GPU needed);
        ``variant`` as in :meth:`lowered`, by default the kernel the GPU runs."""
        return self.kernels.artifact(self._pixtype(x, dtype, channels), variant, repr(self),
                                     arch, compiler, kind)

    def precompile(self, x: Any = None, *, dtype: Any = None, channels: int = 1,
                   target: str = "gpu", arch: str | None = None,
                   compiler: str | None = None) -> list[str]:
        """Compile (without loading or running) the kernels a call on input ``x`` (or
        the given pixel dtype and channel count) builds on ``target``: the variant it
        prefers and the ones misaligned arrays fall back to (the grid kernel, and its
        scalar form where it has whole-word accesses). ``arch`` as in
        :meth:`thork.Kernel.precompile`; no GPU needed. Returns the cache keys;
        ``thork precompile`` collects the artifacts into a bundle (docs/scale-out.md)."""
        from thork_core.build import precompile

        t = self._pixtype(x, dtype, channels)
        keys = []
        todo = list(dict.fromkeys((self.variants.choose(t, target), "grid")))
        while todo:
            variant = todo.pop(0)
            lowered = self.kernels.lowered(t, variant, target)
            keys.append(precompile(lowered.ir, target, compiler or self.compiler, arch))
            if variant == "grid" and lowered.align:
                todo.append("scalar")
        return keys

    def _copy_pipe(self) -> Pipe:
        return copy_pipe()

    def compile_info(self, t: PixType | None = None) -> CompileInfo | None:
        """How the kernel for ``t`` (default: the most recent) was built."""
        return self.kernels.compile_info(t)

    def output_specs(self, inputs: Sequence[tuple[Sequence[int], Any]]
                     ) -> list[tuple[tuple[int, ...], Any]]:
        """The ``(shape, dtype)`` of every output (MidWrites first) for inputs of the given
        ``(shape, dtype)``, computed on the host as a call computes them; builds no kernel
        (what a torch fake/meta implementation needs)."""
        from thork_core import ArrayView, dtype_of

        from ._lowering import host_plan

        views = [ArrayView(ptr=0, shape=tuple(int(s) for s in shape), strides=None,
                           dtype=dtype_of(d), device="cpu") for shape, d in inputs]
        t, g, lay = self.chain.read.host_type(views)
        return host_plan(self.chain, t, g, lay)[2]

    def _pixtype(self, x: Any, dtype: Any, channels: int) -> PixType:
        """The input pixel type of ``x`` (an array or a list of them), or of ``dtype``
        and ``channels``."""
        from ._arrays import view

        if x is not None:
            views = [view(a, f"input {i}", None, self.chain.read.pitched)  # views too
                     for i, a in enumerate(x if isinstance(x, (list, tuple)) else [x])]
            return self.chain.read.host_type(views)[0]
        if isinstance(self.chain.read, ReadSet):
            return self.chain.read.host_type([])[0]
        from ._pixel import as_dtype

        return PixType(as_dtype(dtype or "float32", "dtype"), channels,
                       sources=self.chain.read.inputs)


def copy_pipe() -> Pipe:
    """A GPU pipe copying one image (TensorRead, TensorWrite): what a list of device images
    given as one input is stacked into a batch with (:func:`fkl._arrays.stack`)."""
    return compose(TensorRead(), TensorWrite(), target="gpu")


def _check_chain(ops: tuple[Any, ...], target: str | None, thread_fusion: bool) -> None:
    for i, op in enumerate(ops):
        if not isinstance(op, Op):
            raise ArgumentError(f"fkl.compose: argument {i} is not an fkl operation: {op!r}")
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


_GUARDED: list[type[Pipe] | None] = []
_GUARDED_LOCK = threading.Lock()


def pipe_class(target: str | None) -> type[Pipe]:
    """The class :func:`compose` makes for ``target``: :class:`Pipe` for the CPU target
    and where core's native module is unavailable, else ``_GuardedPipe`` — core's
    ``GuardedCall`` first among its bases (it then takes the call), made once."""
    if target == "cpu":
        return Pipe
    if not _GUARDED:
        with _GUARDED_LOCK:
            if not _GUARDED:
                from thork_core import guarded_call_base

                base = guarded_call_base()
                _GUARDED.append(None if base is None else type(
                    "_GuardedPipe", (base, Pipe), {"__module__": Pipe.__module__,
                                                   "__doc__": Pipe.__doc__}))
    return _GUARDED[0] or Pipe


def _restore(ops: Sequence[Op], target: str | None, compiler: str | None,
             thread_fusion: bool, flat: bool | None, fold: bool | None,
             vectors: int | None) -> Pipe:
    """A pipe from what :meth:`Pipe.__reduce__` kept."""
    pipe = compose(*ops, target=target, compiler=compiler, thread_fusion=thread_fusion)
    pipe.flat, pipe.fold, pipe.vectors = flat, fold, vectors
    return pipe
