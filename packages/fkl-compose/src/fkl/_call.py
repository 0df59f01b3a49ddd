"""The call path of a pipe: one dictionary lookup when hot, planning on first sight.

A call reads each input's hot-path key (:func:`fkl._arrays.fast_info`) and looks the tuple
of keys up once in the pipe's ``_hot`` table. An entry holds the plan for that input
shape, its prepared launcher and, for one device array in and one out, core's guard (the
check-and-launch of :meth:`thork_core.PreparedLaunch.guard`). A miss — a new shape, or an
input without a fast path — takes :meth:`CallPath._call_slow`, which adapts the arrays
with core's adapters, plans, launches and fills the table.

Where core's native ``GuardedCall`` is the pipe's first base (:func:`fkl._pipe.compose`
picks that class), the most recent guard is tried in C before any Python runs.

A strided ``out=`` (a pitched frame a WriteYUV or TensorWrite stores into in place) has
plans of its own: their entries live in ``_hot_strided``, keyed by the inputs' keys and
the output's (its strides included), so a call writing a pitched output is one lookup
too, not a new plan per call (h-pitch7).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from thork_core import ArgumentError, DeviceError, dtype_of
from thork_core.launch import (
    CAI,
    DLPACK,
    dlpack_code,
    dlpack_probe,
    foreign_reader,
    kind_of,
    no_max_version,
    one_gpu,
    typestr,
)

from ._alias import (
    check_out_aliasing,
    in_place_safe,
    known_ranges,
    overlaps,
    relative_spans,
    view_range,
)
from ._arrays import (
    array_types,
    fast_info,
    fast_out,
    follow,
    followers,
    implied_stream,
    out_info,
    out_pointers,
    pointer,
    row_span,
    stack,
    stream_handle,
    view,
    wait,
)
from ._launcher import Launcher
from ._plan import Plan, add_spans, allocate, check_out, extent_bytes, make_plan, same_shape

if TYPE_CHECKING:
    from ._kernels import Kernels
    from ._lowering import Chain
    from ._ops import Op
    from ._variant import Variants

__all__ = ["CallPath", "Hot"]

#: Per pipe class: whether it has core's GuardedCall base (its ``_hot_out`` member makes
#: the allocating call in C).
_C_OUT: dict[type, bool] = {}


class Hot:
    """One entry of the hot table: the plan of an input shape, its launcher, core's guard
    for the one-device-array-in, one-out call (None where that does not apply) and, once
    such a call allocated its output, core's maker of that output (``out_maker``).
    ``spans``: the bytes each input and the output cover (:func:`fkl._alias.
    relative_spans`: a strided ``out=``'s for its entry, else the contiguous output's);
    None: every call runs the full aliasing check."""

    __slots__ = ("plan", "launcher", "guard", "maker", "spans", "out_keys")

    def __init__(self, plan: Plan, launcher: Launcher, guard: Any,
                 spans: list[tuple[int, int]] | None = None) -> None:
        self.plan = plan
        self.launcher = launcher
        self.guard = guard
        self.maker: Any = None
        self.spans = spans
        #: The probe keys of ``out=`` arrays the full check accepted for this entry (a
        #: torch tensor, a CAI array on a stream of its own): an ``out=`` with one of
        #: these keys is exactly such an array again (the key holds shape, dtype,
        #: device and layout), so later calls read only its address and stream.
        self.out_keys: set[Any] = set()


class CallPath:
    """What makes a pipe callable (a base of :class:`fkl.Pipe`)."""

    ops: tuple[Op, ...]
    chain: Chain
    kernels: Kernels
    variants: Variants
    _plans: dict[Any, Plan]
    _hot: dict[Any, Hot]
    _hot_strided: dict[Any, Hot]
    _hot_guard: Any
    _n_inputs: int
    _in_place: bool

    def _copy_pipe(self) -> Any:
        """The pipe that copies one image into a batch (a list of device images stacked
        by :func:`fkl._arrays.stack`): :class:`fkl.Pipe` gives it (it sits above this
        module)."""
        raise NotImplementedError

    def _init_calls(self) -> None:
        cls = type(self)
        if cls not in _C_OUT:
            _C_OUT[cls] = hasattr(cls, "_hot_out")
        self._plans = {}
        self._hot = {}
        #: (inputs' keys, out's key) -> Hot, for a strided out= (h-pitch7)
        self._hot_strided = {}
        #: The guard that last launched (tried first, in C where the pipe's class has
        #: core's GuardedCall base).
        self._hot_guard = None
        self._n_inputs = self.chain.read.inputs
        self._in_place = in_place_safe(self.chain)  # out= may be exactly an input

    def __call__(self, *inputs: Any, out: Any = None, stream: Any = None,
                 active_batch: int | None = None, default: Any = 0, device: Any = None) -> Any:
        """Run the chain on ``inputs`` (one array; two for DualRead; none for ReadSet).

        Host (NumPy) inputs give host outputs (the GPU target copies in and out and
        synchronizes); device inputs give :class:`fkl.DeviceBuffer` outputs on the same
        device, queued on ``stream`` without synchronization. ``out`` (an array, or a
        list for several outputs) is written instead of allocating. An input may be a
        list of same-size images: a batch (the output has the batch axis).

        ``active_batch=k``: only the first ``k`` batch items are computed; the others are
        filled with ``default`` (a number or one per output channel) and read nothing.
        Both are runtime values (the first such call builds one more kernel).

        The call runs on the CUDA device its device arrays live on (inputs and ``out`` on
        one device, else DeviceError); ``device`` (an ordinal or ``"cuda:N"``) names it,
        which host inputs need to run anywhere but device 0 on the GPU target.
        """
        if active_batch is not None or device is not None:  # (h-multi: device=)
            if stream is None:  # CUDA tensors given no stream: torch's current stream
                stream = implied_stream(inputs) or None
            return self._call_slow(inputs, out, stream, None,
                                   None if active_batch is None else (active_batch, default),
                                   device)
        # The hottest case first: one DeviceBuffer in, one of exactly the output's kind as
        # out=, both ready on the launch stream, vector-aligned. One guard call: core
        # checks all that and launches (False: it launched nothing).
        guard = self._hot_guard
        if guard is not None and len(inputs) == 1 and guard(inputs[0], out, stream):
            return out
        if len(inputs) != self._n_inputs:
            read = self.chain.read
            raise ArgumentError(
                f"fkl pipe: {read.name} reads {read.inputs} array(s), got {len(inputs)}")
        ptrs: list[int] = []
        key: list[Any] | None = []
        producers: list[tuple[int, int]] = []
        followed: list[tuple[Any, Any, int]] | None = None
        device = 0
        # DLPack-only producers (session 8): read with the launch stream (the protocol's
        # handshake); their capsules hold the memory until the launch is queued.
        dl_handle: int | None = None
        keep: list[Any] = []
        for x in inputs:
            fast = fast_info(x)
            if fast is None:
                if kind_of(type(x)) is DLPACK:
                    if dl_handle is None:
                        dl_handle = stream_handle(stream) if stream is not None else 0
                    got = dlpack_probe(x, dl_handle)
                    if got is not None:
                        ptrs.append(got[0])
                        key.append(got[1])  # type: ignore[union-attr]
                        device = got[2]
                        keep.append(got[4])
                        continue
                key = None
                break
            ptrs.append(fast[0])
            key.append(fast[1])  # type: ignore[union-attr]
            device = fast[3]
            if fast[4] is not None:  # a library with a current stream (torch): h-interop
                if followed is None:
                    followed = []
                followed.append((x, fast[4], fast[2]))
            elif fast[2]:
                producers.append((fast[2], fast[3]))
        hot = self._hot.get(tuple(key)) if key is not None else None
        strided_out = None
        if self._hot_strided and out is not None and key is not None:
            strided_out = out_info(out)  # h-pitch7: a strided out= seen before
            if strided_out is not None:
                found = self._hot_strided.get((tuple(key), strided_out[1]))
                if found is None:
                    strided_out = None
                else:
                    hot = found
        if hot is None:
            if stream is None:  # CUDA tensors given no stream: torch's current stream
                stream = implied_stream(inputs) or None
            return self._call_slow(inputs, out, stream, key)
        if hot.guard is not None and out is not None and hot.guard is not guard and \
                hot.guard(inputs[0], out, stream):
            self._use(hot)
            return out
        if out is None and hot.guard is not None and _C_OUT.get(type(self)) and \
                (hot.guard is not guard or hot.maker is None):
            if hot.maker is None:
                hot.maker = self._maker(hot.plan, hot.plan.ordinal)
            self._use(hot)  # the next allocating call of this shape runs in C
        plan, launcher = hot.plan, hot.launcher
        if plan.table_ptrs:
            ptrs += plan.table_ptrs
        if stream is not None:
            handle = stream_handle(stream)
        elif followed is not None:  # given no stream: the first tensor's current stream
            handle = followed[0][2]
        else:
            handle = 0
        if dl_handle is not None and dl_handle != handle:  # read for another stream
            wait(dl_handle, handle, device)
        for producer, dev in producers:  # CAI-v3-like: order after the producer stream
            if producer != handle:
                wait(producer, handle, dev)
        if followed is not None:
            follow(followed, handle, device)
        if out is None:
            outs = allocate(plan, device, handle)
            for o in outs:
                ptrs.append(pointer(o))
        elif strided_out is not None:  # its plan writes exactly this layout
            outs = [out]
            ptrs.append(strided_out[0])
            spans = hot.spans  # the full check only where the address ranges meet
            if spans is None or overlaps(ptrs, spans, len(inputs)):
                check_out_aliasing(inputs, outs, self._in_place,
                                   self._known(inputs, out, ptrs, spans, plan))
            if strided_out[4] is not None:  # a library with a current stream
                follow([(out, strided_out[4], strided_out[2])], handle, device)
        else:
            # The common hot cases: one device array of exactly the output's kind.
            optr = None
            #: a follower's out= whose current stream the probe read (torch), so it is
            #: not read twice (followers() below)
            out_followed: list[tuple[Any, Any, int]] | None = None
            if plan.device and len(plan.outs) == 1:
                shape, d = plan.outs[0]
                # (h-multi) only an out= on the plan's device: the rest is checked below
                optr = fast_out(out, shape, d, plan.out_codes[0], plan.ordinal)
            if optr is None and hot.out_keys:
                # An out= of a kind the full check accepted before (a torch tensor: its
                # current stream is followed below, as for any out=)
                if kind_of(type(out)) is DLPACK:
                    dl = dlpack_probe(out, handle)
                    if dl is not None and not dl[3] and dl[1] in hot.out_keys:
                        optr = dl[0]
                        keep.append(dl[4])
                else:
                    info = out_info(out)
                    if info is not None and info[1] in hot.out_keys:
                        optr = info[0]
                        if info[4] is not None:  # the probe read its current stream
                            out_followed = [(out, info[4], info[2])]
                        elif info[2] and info[2] != handle:
                            wait(info[2], handle, info[3])  # a CAI producer's own stream
            if optr is not None:
                outs = [out]
                ptrs.append(optr)
                spans = hot.spans  # (h-pitch7) the full check only where ranges meet
                if spans is None or overlaps(ptrs, spans, len(inputs)):
                    check_out_aliasing(inputs, outs, self._in_place,
                                       self._known(inputs, out, ptrs, spans, plan))
            else:
                try:
                    outs = check_out(plan.outs, out, plan.device)
                except ArgumentError:
                    if self.chain.write.pitched:  # h-video: maybe a strided out=
                        # (h-pitch7: with the inputs' key, so it gets its hot entry)
                        return self._call_slow(inputs, out, stream, key)
                    raise
                if plan.device and not one_gpu():  # (h-multi) a hot call's out= too
                    outs_on_device(outs, plan.ordinal)
                n = len(inputs)
                known = self._known(inputs, None, ptrs[:n], hot.spans[:n], plan) \
                    if hot.spans is not None else None
                ptrs += out_pointers(outs, handle, device) if plan.device else \
                    [pointer(o) for o in outs]
                check_out_aliasing(inputs, outs, self._in_place, known)
                self._learn_out(hot, outs, out, handle)
            outs_followed = out_followed if out_followed is not None else followers(outs)
            if outs_followed is not None:  # torch out=: ordered after torch's stream
                follow(outs_followed, handle, device)
        if plan.align_mask:
            bits = 0
            for p in ptrs:
                bits |= p
            if bits & plan.align_mask:  # a misaligned array: the flat kernel cannot run
                plan = self._fallback(plan)
                launcher = plan.launcher  # type: ignore[assignment]
        launcher.launch(plan.arrange(ptrs), handle)
        del keep  # the DLPack capsules (queued: the producers' memory is the caller's)
        return outs[0] if len(outs) == 1 else tuple(outs)

    # What core's GuardedCall base calls for every call it did not launch itself: the
    # same Python path (a guard that missed in C is tried once more here: one more check
    # on the general path, never a second launch).
    _miss = __call__

    def _call_slow(self, inputs: tuple[Any, ...], out: Any, stream: Any,
                   key: list[Any] | None, active: tuple[int, Any] | None = None,
                   device: Any = None) -> Any:
        """First call for an input type/shape (or an input without a fast path, or with
        an active batch: ``(k, default)``, or an explicit ``device``)."""
        read = self.chain.read
        if any(isinstance(x, (list, tuple)) for x in inputs):  # a batch given as a list
            handle = stream_handle(stream) if stream is not None else 0
            inputs = tuple(stack(x, f"input {i}", handle, self._copy_pipe)
                           if isinstance(x, (list, tuple))
                           else x for i, x in enumerate(inputs))
        handle = stream_handle(stream) if stream is not None else 0
        # The launch stream goes to the adapters: a DLPack producer orders it after its
        # own work (the protocol's handshake; __cuda_array_interface__ names its stream).
        # h-video (issue 18): a pitched read (fkl.ReadYUV) takes views with a row stride;
        # the strides key the plan (the pitch is a runtime value of the same kernel).
        pitched = getattr(read, "pitched", False)
        views = [view(x, f"input {i}", handle, pitched) for i, x in enumerate(inputs)]
        t, g, lay = read.host_type(views)
        tgt = self.kernels.resolve()
        on_device = any(v.device == "cuda" for v in views)
        if tgt.name == "cpu" and on_device:
            raise ArgumentError(
                "fkl pipe (target='cpu'): inputs must be NumPy arrays on the host; got a "
                "device array (copy it to the host, or compose with target='gpu')")
        if on_device and not all(v.device == "cuda" for v in views):
            raise ArgumentError("fkl pipe: inputs mix host and device arrays")
        ordinal = _call_device(views, out, device, tgt.name)
        shape_key: tuple[Any, ...] = (t, tuple(v.shape for v in views), on_device)
        if pitched:
            shape_key = (*shape_key, tuple(v.strides for v in views))
        if ordinal:  # (h-multi) a plan per device: its kernel and tables live there
            shape_key = (*shape_key, ordinal)
        if active is not None:
            shape_key = (*shape_key, active[0], repr(active[1]))
        if active is not None or device is not None:
            key = None  # active and explicit-device calls keep to this path
        strided = read.pitch_variant and bool(g.strides)  # h-video: a strided input
        out_strides = self._out_strides(out, t, g, lay, handle) \
            if out is not None and self.chain.write.pitched else None
        out_key, out_ptr = None, 0
        if out_strides is not None:  # h-video: a strided out=, written in place
            shape_key = (*shape_key, "out", out_strides)
            # h-pitch7: its hot entry keys the inputs and the out= (None: an out the
            # probe cannot key, e.g. a list or a read-only array; it stays on this path)
            got = out_info(out) if key is not None else None
            if got is None:
                key = None
            else:
                out_ptr, out_key = got[0], got[1]
        plan = self._plans.get(shape_key)
        if plan is None:
            if strided or out_strides is not None:
                if active is not None:
                    raise ArgumentError("fkl pipe active_batch: needs contiguous inputs and "
                                        "outputs, got a strided view")
                variant = "pitched-out" if not strided else \
                    "pitched-both" if out_strides is not None else "pitched"
            elif active is not None:
                variant = "active"
            else:
                variant = self.variants.choose(t)
                spec = self.variants.flat_spec(t) if variant == "flat" else None
                if spec is not None and not spec.fits(g):
                    variant = "grid"  # planes whose starts are not vector-aligned
            plan = make_plan(self.kernels, t, g, lay, on_device, variant, self.ops, active,
                             out_strides, ordinal)
            if self.kernels.debug:  # (h-debug) the arrays' extents fill the span params
                add_spans(plan, [extent_bytes(v) for v in views]
                          + [extent_bytes(view(a, "table")) for a in plan.tables]
                          + ([d.itemsize * math.prod(s) for s, d in plan.outs]
                             if out_strides is None else  # a strided out=: its extent
                             [extent_bytes(view(o, "out", None, True)) for o in
                              (out if isinstance(out, (list, tuple)) else [out])]))
            if active is None or len(self._plans) < 256:  # per (k, default): bounded
                self._plans[shape_key] = plan
        outs = check_out(plan.outs, out, on_device, out_strides is not None) \
            if out is not None else \
            allocate(plan, ordinal, handle)
        if out is not None:  # (DLPack-only inputs: their ranges from their views)
            check_out_aliasing(inputs, outs, self._in_place,
                               {id(x): view_range(v) for x, v in zip(inputs, views)})
        ptrs = [v.ptr for v in views] + plan.table_ptrs + (
            out_pointers(outs, handle, ordinal) if out is not None and on_device else
            [pointer(o) for o in outs])
        # Device arrays (and host arrays on the CPU target) get the pre-packed hot path.
        direct = on_device or tgt.name == "cpu"
        launcher = plan.prepare() if direct else None
        run = plan
        if plan.align_mask and any(p & plan.align_mask for p in ptrs):
            run = self._fallback(plan)
        if launcher is not None and run.launcher is not None:
            for v in views:
                if v.stream is not None and v.stream != handle:
                    wait(v.stream, handle, v.device_id)
            outs_followed = followers(outs) if out is not None and on_device else None
            if outs_followed is not None:  # torch out=: ordered after torch's stream
                follow(outs_followed, handle, ordinal)
            run.launcher.launch(run.arrange(ptrs), handle)
            if key is not None and out_key is not None:  # h-pitch7: a strided out=
                self._hot_strided[(tuple(key), out_key)] = Hot(
                    plan, launcher, None,
                    relative_spans([*inputs, out], [*(v.ptr for v in views), out_ptr],
                                   views))
            elif key is not None:
                # (h-pitch7) the inputs' spans and a contiguous output's, for the cheap
                # aliasing test of a hot call whose out= is exactly the output's kind
                spans = relative_spans(inputs, [v.ptr for v in views], views) \
                    if len(plan.outs) == 1 else None
                if spans is not None:
                    shape, d = plan.outs[0]
                    spans.append((0, d.itemsize * math.prod(shape)))
                hot = Hot(plan, launcher, self._guard(plan, inputs, self._in_place, views),
                          spans)
                self._hot[tuple(key)] = hot
                if out is not None:
                    self._learn_out(hot, outs, out, handle)
                if hot.guard is not None:
                    # The next identical call is decided in C (GuardedCall) straight away;
                    # an allocating one makes its output there too (GuardedCall's
                    # _hot_out, kept paired with the guard it was made for).
                    if out is None and _C_OUT.get(type(self)):
                        hot.maker = self._maker(plan, ordinal)
                    self._use(hot)
        else:
            args = list(run.args)
            n = len(inputs)
            if pitched:  # h-video: a pitched host frame travels as its row span
                inputs = tuple(row_span(x, v) for x, v in zip(inputs, views, strict=True))
            targets = outs if out_strides is None else [  # ... and a strided host out=
                row_span(o, view(o, "out", None, True), writeable=True) for o in outs]
            for pos, role, idx in run.pointer_slots:
                if role == "in":
                    args[pos] = inputs[idx] if idx < n else run.tables[idx - n]
                else:
                    args[pos] = targets[idx]
            run.built.exe.launch(run.grid, run.block, args, stream=stream)
        return outs[0] if len(outs) == 1 else tuple(outs)

    @staticmethod
    def _known(inputs: tuple[Any, ...], out: Any, ptrs: list[int],
               spans: list[tuple[int, int]] | None, plan: Plan) -> dict[Any, Any] | None:
        """The ranges of this call's inputs (and ``out`` unless None: the last of
        ``ptrs``) from a hot entry's spans, for :func:`check_out_aliasing` (arrays that
        expose no range themselves: DLPack-only producers)."""
        if spans is None:
            return None
        n = len(inputs)
        arrays = [*inputs] if out is None else [*inputs, out]
        at = ptrs[:n] if out is None else [*ptrs[:n], ptrs[-1]]
        return known_ranges(arrays, at, spans, "cuda" if plan.device else "cpu")

    @staticmethod
    def _learn_out(hot: Hot, outs: list[Any], out: Any, handle: int) -> None:
        """Remember the probe key of ``out``, one array the full check (``check_out``)
        just accepted as ``hot``'s output, when it has one and the entry has a single
        contiguous output (bounded: a few kinds of out= per entry). A DLPack-only
        ``out`` is read once more for it (on the launch stream ``handle``)."""
        if len(hot.plan.outs) != 1 or len(outs) != 1 or outs[0] is not out or \
                len(hot.out_keys) >= 8:
            return
        if kind_of(type(out)) is DLPACK:
            dl = dlpack_probe(out, handle)
            if dl is not None and not dl[3]:
                hot.out_keys.add(dl[1])
            return
        got = out_info(out)
        if got is not None:
            hot.out_keys.add(got[1])

    def _use(self, hot: Hot) -> None:
        """Make ``hot``'s guard (and its output maker) the ones tried first."""
        self._hot_guard = hot.guard
        if _C_OUT.get(type(self)):
            self._hot_out = hot.maker

    @staticmethod
    def _maker(plan: Plan, device: int) -> Any:
        """Core's maker of ``plan``'s one device output (None: not available)."""
        from thork_core.launch import out_maker

        shape, dtype = plan.outs[0]
        return out_maker(array_types()[1], tuple(shape), dtype, device)

    def _out_strides(self, out: Any, t: Any, g: Any, lay: Any,
                     handle: int) -> tuple[int, ...] | None:
        """The strides in elements of a strided ``out=`` (an array, or the list of a
        multi-output chain) the final write can store into in place (the write's
        :meth:`~fkl._tensor.WriteOp.out_strides`), else None (h-video, issue 18; a
        mismatching ``out`` is left to :func:`check_out`, which reports it). A
        MidWrite's outputs must stay C-contiguous."""
        from ._lowering import final_type, host_plan, write_dtypes

        given = list(out) if isinstance(out, (list, tuple)) else [out]
        specs = host_plan(self.chain, t, g, lay)[2]
        if len(given) != len(specs):
            return None
        names = [f"out[{i}]" if isinstance(out, (list, tuple)) else "out"
                 for i in range(len(given))]
        views = [view(o, what, handle, pitched=True) for o, what in zip(given, names)]
        if all(v.contiguous for v in views):
            return None
        ft = final_type(self.chain, t)
        first = len(specs) - len(write_dtypes(self.chain.write, ft))  # the final write's
        for i in range(first):  # a MidWrite's outputs have no strided form
            if not views[i].contiguous:
                view(given[i], names[i], handle)  # raises: needs a C-contiguous array
        for v, what, (shape, d) in zip(views[first:], names[first:], specs[first:]):
            if v.dtype != d or not same_shape(v.shape, shape):  # the shape, not layout
                raise ArgumentError(f"fkl pipe {what}: expected shape {shape} and dtype "
                                    f"{d.name}, got {v.shape} {v.dtype.name}")
            if v.shape != shape or len(shape) == 1:
                return None  # check_out reports the layout
        return self.chain.write.out_strides(views[first:], ft)

    @staticmethod
    def _guard(plan: Plan, inputs: tuple[Any, ...], in_place: bool,
               views: list[Any]) -> Any:
        """Core's guard for one DeviceArray in and one out, else None. The guard does
        not compare addresses, so it serves only where the output cannot alias the input
        wrongly: a per-pixel chain (in place is correct), or input and output of
        different byte sizes (a DeviceArray, views included, covers its whole buffer).
        A CuPy (plain CAI) input on the one GPU, or a DLPack-only producer's compact
        input on the plan's device (session 10), gets a guard that reads such arrays in C
        and checks the output's overlap with the input itself (``views``: the inputs'
        views of this first call)."""
        da = array_types()[1]
        if len(inputs) != 1 or not plan.device or len(plan.outs) != 1 \
                or len(plan.order) != 2 or plan.launcher is None:
            return None
        x: Any = inputs[0]
        out_shape, out_dtype = plan.outs[0]
        if type(x) is not da:
            code = plan.out_codes[0]
            kind = kind_of(type(x))
            if kind is DLPACK:
                # (session 10) read in C: __dlpack_device__, __dlpack__ with the launch
                # stream, the capsule's fields; also takes a DLPack-only or DeviceArray
                # out= (and, on the one GPU, a CAI one)
                v = views[0]
                if not v.contiguous or v.device_id != plan.ordinal or \
                        no_max_version(type(x)):
                    return None
                shape, dtype = tuple(v.shape), v.dtype
                ts = typestr(dtype)
            elif kind is CAI and one_gpu() and code is not None:
                # (session 8) a plain CAI producer's array (CuPy) on the one GPU: the
                # guard reads its interface in C, checks typestrs, shapes and the overlap
                # of the output with the input itself; DeviceArrays of the same layout
                # pass too.
                cai = x.__cuda_array_interface__
                if cai.get("strides") is not None or cai.get("mask") is not None:
                    return None
                shape, dtype = tuple(cai["shape"]), dtype_of(cai["typestr"])
                ts = cai["typestr"]
            elif kind.__class__ is not str and one_gpu() and code is not None and \
                    foreign_reader(type(x), kind) is not None:
                # (session 11) a follower's tensor (torch) on the one GPU: the guard reads
                # it in C through its own attributes, on torch's current stream when the
                # call names none (a call on another stream misses to the path below,
                # which waits for torch's stream and records the use)
                v = views[0]
                if not v.contiguous or v.device_id != plan.ordinal:
                    return None
                shape, dtype = tuple(v.shape), v.dtype
                ts = typestr(dtype)
                if ts is None:
                    return None
            else:
                return None
            gpu1 = one_gpu()
            return plan.launcher.prepared.guard(
                da, [(shape, dtype, plan.ordinal, ts if gpu1 else None, False,
                      _dl(dtype)),
                     (tuple(out_shape), out_dtype, plan.ordinal, code if gpu1 else None,
                      True, _dl(out_dtype))],
                plan.order, plan.align_mask, stream_handle, cai=True, in_place=in_place)
        out_bytes = out_dtype.itemsize
        for n in out_shape:
            out_bytes *= n
        if not in_place and out_bytes == x.nbytes:
            return None
        return plan.launcher.prepared.guard(
            da, [(x.shape, x.dtype, x.device), (out_shape, out_dtype, x.device)],
            plan.order, plan.align_mask, stream_handle)

    def _fallback(self, plan: Plan) -> Plan:
        """The plan that stands in for ``plan`` on misaligned arrays: the grid variant's
        for a flat plan, the scalar one's for a grid kernel with whole-word accesses
        (made, with its launcher where ``plan`` has one, on first need)."""
        if plan.fallback is None:
            fb = make_plan(self.kernels, *plan.source, plan.device, plan.fallback_variant,
                           self.ops, ordinal=plan.ordinal)
            if plan.span_bytes is not None:  # (h-debug) the same arrays: the same spans
                add_spans(fb, plan.span_bytes)
            if plan.launcher is not None:
                fb.prepare()
            plan.fallback = fb
        return plan.fallback


def _dl(dtype: Any) -> int | None:
    """DLPack's ``code << 8 | bits`` of ``dtype`` for core's guard (None: none)."""
    try:
        code, bits = dlpack_code(dtype)
    except (KeyError, AttributeError):
        return None
    return code << 8 | bits


def _call_device(views: list[Any], out: Any, device: Any, target: str) -> int:
    """The CUDA device a pipe call runs on (h-multi): its device inputs' and ``out``'s
    (all on one device, else DeviceError), or ``device`` when given (which they must then
    be on); 0 for host-only calls without ``device``."""
    from thork_core.runtime import check_device

    if device is not None:
        device = check_device(device, "fkl pipe")
        if target == "cpu" and device:
            raise DeviceError(f"fkl pipe: the cpu target has no CUDA device {device} "
                              "(device= applies to GPU targets)")
    ordinal, first = device, f"device={device}"
    for i, v in enumerate(views):
        if v.device != "cuda":
            continue
        if ordinal is None:
            ordinal, first = v.device_id, f"input {i}"
        elif v.device_id != ordinal:
            raise DeviceError(f"fkl pipe: arguments on different devices: input {i} is on "
                              f"cuda:{v.device_id}, {first} on cuda:{ordinal}")
    ordinal = 0 if ordinal is None else ordinal
    if out is not None:
        outs_on_device(list(out) if isinstance(out, (list, tuple)) else [out], ordinal)
    return ordinal


def outs_on_device(outs: list[Any], ordinal: int) -> None:
    """DeviceError unless every device array in ``outs`` is on CUDA device ``ordinal``
    (host arrays pass: the output checks refuse a host/device mix)."""
    from thork_core.runtime import array_device

    for j, o in enumerate(outs):
        d = array_device(o)
        if d is not None and d != ordinal:
            raise DeviceError(f"fkl pipe: arguments on different devices: out[{j}] is "
                              f"on cuda:{d}, the call runs on cuda:{ordinal}")
