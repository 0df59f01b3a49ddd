"""Launch plans: what a pipe call with one input shape needs, computed once, and the
checks and allocation of the output arrays."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from thork_core import ArgumentError, DType, dt
from thork_core.ir import int_range
from thork_core.launch import float_scalar
from thork_core.runtime import typestr

from ._arrays import array_types, check_size, pointer, view
from ._kernels import Built, Kernels
from ._launcher import Launcher, make_launcher
from ._lowering import Lowered, final_type, host_plan, host_tables, whole_steps, write_block
from ._ops import Op
from ._pixel import PixType, per_channel
from ._tensor import Layout
from ._variant import with_one_tap

__all__ = ["Plan", "add_spans", "allocate", "check_out", "extent_bytes", "fill_args",
           "make_plan", "same_shape"]


@dataclass
class Plan:
    """Everything a call with one input shape needs: the arguments with the scalars
    filled in, where the arrays go (``pointer_slots``, and ``order``: kernel pointer
    parameter k takes array ``order[k]`` of inputs-then-outputs), the grid and block, the
    outputs' shapes and dtypes (``out_codes``: their typestrs), whether the arrays live on
    the device, and the pre-packed launcher.

    ``align_mask`` is nonzero for the flat variant and for a grid kernel with whole-word
    accesses (``Lowered.align``): an array address with any of those bits set makes the
    call use ``fallback``, the plan of variant ``fallback_variant`` (``"grid"`` for a
    flat plan, ``"scalar"`` for a grid one), made on first need from ``source``, the
    pixel type, geometry and layout."""

    args: list[Any]
    pointer_slots: list[tuple[int, str, int]]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    outs: list[tuple[tuple[int, ...], DType]]
    device: bool
    order: list[int]
    built: Built
    source: tuple[PixType, Any, Layout]
    align_mask: int = 0
    fallback: Plan | None = None
    fallback_variant: str = "grid"
    launcher: Launcher | None = None
    out_codes: list[str | None] = field(default_factory=list)
    #: The ops' value tables (:meth:`fkl.Op.table_types`): arrays in the inputs' memory,
    #: passed after the inputs; ``table_ptrs`` their addresses.
    tables: list[Any] = field(default_factory=list)
    table_ptrs: list[int] = field(default_factory=list)
    #: Debug mode: the byte extent of each array (inputs, tables, outputs), whose element
    #: counts fill the kernel's hidden span parameters (:func:`add_spans`).
    span_bytes: list[int] | None = None
    #: The CUDA device the plan's kernel and tables are on (0 for host calls).
    ordinal: int = 0

    def prepare(self) -> Launcher | None:
        """This plan's launcher, made on first need."""
        if self.launcher is None:
            self.launcher = make_launcher(self.built.exe, self.built.lowered.ir, self.args,
                                          self.grid, self.block)
        return self.launcher

    def arrange(self, ptrs: list[int]) -> list[int]:
        """Input and output addresses (inputs first) in kernel-parameter order."""
        return [ptrs[i] for i in self.order]


def make_plan(kernels: Kernels, t: PixType, g: Any, lay: Layout, device: bool,
              variant: str, ops: Sequence[Op], active: tuple[int, Any] | None = None,
              out_strides: tuple[int, ...] | None = None, ordinal: int = 0) -> Plan:
    """The plan of ``variant`` for inputs of pixel type ``t``, geometry ``g``;
    ``active`` is ``(k, default)`` for the ``"active"`` variant, ``out_strides`` the
    output's strides in elements for ``"pitched-out"``/``"-both"`` (the final write's
    :meth:`~fkl._tensor.WriteOp.out_strides`);
    ``ordinal`` the CUDA device the call runs on."""
    chain = kernels.chain
    values, og, outs = host_plan(chain, t, g, lay)
    if variant in ("pitched", "pitched-both"):  # the read's strides follow its scalars
        n = len(chain.read.values(t, g))
        values = [*values[:n], *g.strides, *values[n:]]
    if variant in ("pitched-out", "pitched-both"):  # the write's, after the ops'
        assert out_strides is not None
        values = [*values, *out_strides]
    if active is not None:
        k, default = active
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= og.batch:
            raise ArgumentError(f"fkl pipe active_batch: expected an int from 0 to the "
                                f"batch of {og.batch}, got {k!r}")
        ft = final_type(chain, t)
        values = [*values, k, *per_channel(default, ft.channels, "fkl pipe default")]
    if variant in ("grid", "scalar"):  # several pixels per thread for large outputs
        cols, rows = kernels.variants.grid_shape(t, og.w * og.h * og.batch,
                                                 kernels.target_name())
        if rows > 1:
            variant = f"{variant}:{cols}x{rows}"
        elif cols > 1:
            variant = f"{variant}:{cols}"
        if whole_steps(chain, t, g):  # FKL's linear Resize by whole factors: 1 tap
            variant = with_one_tap(variant)
    built = kernels.get(t, variant, ordinal)
    tables = _tables(host_tables(chain, t, g), device, ops, ordinal)
    lowered = built.lowered
    spec = kernels.variants.flat_spec(t) if variant == "flat" else None
    if spec is not None:
        if spec.folded:  # the kernel's values are those of the 1-channel chain
            values = host_plan(chain, spec.traced(t), spec.host_geom(g), lay)[0]
        values = [*values, spec.segments(og)[0]]  # the flat kernel's extra scalar
    args, pointer_slots = fill_args(lowered, values, ops)
    for shape, _ in outs:
        check_size(shape, "output")
    block = lowered.block
    if og.batch > 65535:
        raise ArgumentError(f"fkl pipe: batch of {og.batch} planes exceeds the CUDA grid "
                            "limit of 65535")
    if spec is not None:
        grid = spec.grid(og)
    else:
        bw, bh = write_block(chain.write)  # a block write: one thread per block
        grid = (-(-og.w // (block[0] * bw * lowered.cols)),
                -(-og.h // (block[1] * bh * lowered.rows)), og.batch)
    n_in = sum(1 for _, role, _ in pointer_slots if role == "in")
    order = [idx if role == "in" else n_in + idx for _, role, idx in pointer_slots]
    align = spec.align if spec is not None else lowered.align
    return Plan(args, pointer_slots, grid, block, outs, device, order, built, (t, g, lay),
                align_mask=align - 1 if align else 0,
                fallback_variant="grid" if spec is not None else
                "scalar" + variant[len("grid"):] if variant.startswith("grid") else "scalar",
                out_codes=[typestr(d) for _, d in outs], tables=tables,
                table_ptrs=[pointer(a, "table") for a in tables], ordinal=ordinal)


def extent_bytes(v: Any) -> int:
    """Bytes from an array view's first element to the end of its last (pitched rows
    included): what a debug kernel may address through it."""
    shape = tuple(v.shape)
    if not shape or 0 in shape:
        return 0 if shape else v.dtype.itemsize
    if v.strides is None:
        return v.dtype.itemsize * _prod(shape)
    return sum((n - 1) * s for n, s in zip(shape, v.strides)) + v.dtype.itemsize


def _prod(shape: Sequence[int]) -> int:
    out = 1
    for n in shape:
        out *= int(n)
    return out


def add_spans(plan: Plan, span_bytes: list[int]) -> None:
    """Debug mode: append the values of the instrumented kernel's span parameters (one per
    pointer parameter, in parameter order: the elements its array holds)."""
    plan.span_bytes = span_bytes
    ptrs = [p for p in plan.built.lowered.ir.params if p.derived is None
            and hasattr(p.type, "elem")]
    plan.args = [*plan.args, *(span_bytes[i] // p.type.elem.itemsize  # type: ignore[union-attr]
                               for i, p in zip(plan.order, ptrs))]


def _tables(tables: list[tuple[DType, list[Any]]], device: bool, ops: Sequence[Op],
            ordinal: int = 0) -> list[Any]:
    """The value tables as arrays: NumPy (host calls), or uploaded once (device calls)."""
    import numpy as np

    out: list[Any] = []
    for d, vals in tables:
        host = np.array([_scalar(v, d, ops) for v in vals], dtype=d.numpy)
        if device:
            from thork_core.runtime import DeviceArray

            out.append(DeviceArray.from_host(host, device=ordinal))
        else:
            out.append(host)
    return out


def fill_args(lowered: Lowered, values: list[Any], ops: Sequence[Op]) -> tuple[
        list[Any], list[tuple[int, str, int]]]:
    """The kernel's argument list with every scalar slot converted from ``values`` (None
    in the pointer slots), and the pointer slots as ``(position, role, index)``."""
    args: list[Any] = [None] * len(lowered.slots)
    pointer_slots = []
    for pos, (role, idx) in enumerate(lowered.slots):
        if role == "scalar":
            args[pos] = _scalar(values[idx], lowered.scalar_types[idx], ops)
        else:
            pointer_slots.append((pos, role, idx))
    return args, pointer_slots


def check_out(specs: list[tuple[tuple[int, ...], DType]], out: Any,
              on_device: bool, strided: bool = False) -> list[Any]:
    """``out`` (an array or a list of them) checked against the outputs' ``specs``
    (shape and dtype of each); ``strided``: the plan writes a strided ``out``."""
    given = list(out) if isinstance(out, (list, tuple)) else [out]
    if len(given) != len(specs):
        raise ArgumentError(f"fkl pipe out: the chain writes {len(specs)} array(s), "
                            f"got {len(given)}")
    for i, (o, (shape, d)) in enumerate(zip(given, specs, strict=False)):
        what = f"out[{i}]" if len(given) > 1 else "out"
        v = view(o, what, None, strided)
        if v.dtype != d or not same_shape(v.shape, shape):
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


def allocate(plan: Plan, device: int, handle: int) -> list[Any]:
    """New output arrays for ``plan``: DeviceArrays on CUDA device ``device``, queued on
    stream ``handle``, for device inputs; NumPy arrays for host inputs."""
    if plan.device:
        da = array_types()[1]  # DeviceArray, without an import statement per call
        return [da(shape, d, device=device, stream=handle) for shape, d in plan.outs]
    import numpy as np

    return [np.empty(shape, dtype=d.numpy) for shape, d in plan.outs]


def same_shape(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Whether an ``out=`` of shape ``a`` fits an output of shape ``b`` (a trailing axis
    of one channel may be there or not)."""
    def strip(s: tuple[int, ...]) -> tuple[int, ...]:
        return s[:-1] if s and s[-1] == 1 else s

    return a == b or strip(a) == strip(b)


def _scalar(value: Any, t: DType, ops: Sequence[Op]) -> Any:
    """A runtime value converted for its parameter slot (range-checked for integers)."""
    if t.is_int or t == dt.bool:
        iv = int(value)
        if iv != value:
            raise ArgumentError(f"fkl pipe: value {value!r} is not an integer but the "
                                f"parameter is {t.name}")
        lo, hi = int_range(t)
        if not lo <= iv <= hi:
            raise ArgumentError(f"fkl pipe: value {value!r} does not fit the {t.name} "
                                "parameter it feeds (pixel dtype); cast the pixel first")
        return bool(iv) if t == dt.bool else iv
    # A finite value that would round to inf in its parameter's type is an error.
    return float_scalar(float(value), t, f"fkl pipe: value {value!r} feeds a parameter that")
