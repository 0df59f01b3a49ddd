"""A Thork kernel launch or fkl pipe as a ``torch.library`` custom op.

The op's real implementation allocates its outputs with torch (so they come from the
caching allocator, and from the graph pool under ``torch.cuda.graph`` capture) and runs the
kernel on torch's current stream; its fake (meta) implementation only makes empty tensors
of the output shapes, which is all ``torch.compile`` needs to trace through it without a
graph break.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from thork_core import ArgumentError, DType, PointerType

from ._call import TorchCall, is_pipe
from ._dtypes import to_thork, to_torch

__all__ = ["custom_op", "pipe_output_specs"]

#: ``outputs(*inputs)`` gives the shape and dtype of every output.
OutputSpecs = Callable[..., Sequence[tuple[Sequence[int], Any]]]


def pipe_output_specs(pipe: Any, *shapes_dtypes: tuple[Sequence[int], Any]
                      ) -> list[tuple[tuple[int, ...], DType]]:
    """Shape and dtype of each output of ``pipe`` for inputs of the given (shape, dtype),
    computed on the host the way the pipe computes them when it runs (no kernel built)."""
    return pipe.output_specs(  # type: ignore[no-any-return]
        [(shape, to_thork(d) if not isinstance(d, DType) else d) for shape, d in shapes_dtypes])


def custom_op(name: str, fn: Any, *, outputs: OutputSpecs | int | None = None,
              config: Callable[..., tuple[Any, Any]] | None = None,
              schema: str | None = None) -> Any:
    """Register ``fn`` as the torch custom op ``name`` (``"namespace::op"``); return it.

    ``fn`` is an fkl pipe, a launch ``kernel[grid, block]``, or a kernel together with
    ``config(*inputs) -> (grid, block)``.

    * A pipe's op is ``(Tensor, ...) -> Tensor`` (a tuple of tensors for several outputs);
      the output shapes come from the pipe itself.
    * A kernel's op takes the kernel's leading parameters (pointers as tensors, scalars as
      float/int/bool) and returns its trailing ``outputs`` parameters (default 1), which
      the op allocates: ``outputs`` is their count, or ``outputs(*inputs)`` a list of
      (shape, dtype) per output; by default each output is shaped like the first tensor.
      ``schema`` overrides the derived input signature (e.g. kernels with constants).

    The op runs on torch's current stream; CPU tensors run on the CPU target.
    """
    import torch

    if not isinstance(name, str) or name.count("::") != 1:
        raise ArgumentError(f"thork_torch.custom_op: name must be 'namespace::op', got "
                            f"{name!r}")
    specs: Callable[..., Any] | None
    if is_pipe(fn):
        n_in = fn.chain.read.inputs
        n_out, specs = _pipe_outputs(fn, n_in)
        in_schema = ", ".join(f"Tensor x{i}" for i in range(n_in))
    else:
        launch, kernel = _launch_of(fn, config)
        params = kernel.params
        if isinstance(outputs, int) and not isinstance(outputs, bool):
            n_out = outputs
        elif callable(outputs):
            n_out = _count(kernel, params)
        else:
            n_out = 1
        if n_out < 1 or n_out > len(params):
            raise ArgumentError(f"thork_torch.custom_op {name}: outputs must name 1 to "
                                f"{len(params)} trailing parameters of {kernel.name}, got "
                                f"{n_out}")
        for p in params[len(params) - n_out:]:
            if not isinstance(p.type, PointerType):
                raise ArgumentError(f"thork_torch.custom_op {name}: output parameter "
                                    f"'{p.name}' of {kernel.name} is a scalar, not an array")
        in_params = params[:len(params) - n_out]
        in_schema = ", ".join(f"{_schema_type(p)} {p.name}" for p in in_params)
        specs = outputs if callable(outputs) else None
    out_schema = "Tensor" if n_out == 1 else "(" + ", ".join(["Tensor"] * n_out) + ")"
    full_schema = schema if schema is not None else f"({in_schema}) -> {out_schema}"

    def allocate(inputs: tuple[Any, ...]) -> list[Any]:
        first = next(a for a in inputs if isinstance(a, torch.Tensor))
        if specs is None:
            return [torch.empty_like(first) for _ in range(n_out)]
        got = specs(*inputs)
        return [torch.empty(tuple(int(s) for s in shape), dtype=to_torch(d),
                            device=first.device) for shape, d in got]

    def result(outs: list[Any]) -> Any:
        return outs[0] if n_out == 1 else tuple(outs)

    def fake(*inputs: Any) -> Any:
        return result(allocate(inputs))

    if is_pipe(fn):
        call = TorchCall(fn)

        def impl(*inputs: Any) -> Any:
            outs = allocate(inputs)
            call(*inputs, out=outs if n_out > 1 else outs[0])
            return result(outs)
    else:
        fixed = TorchCall(launch) if launch is not None else None

        def impl(*inputs: Any) -> Any:
            outs = allocate(inputs)
            if fixed is not None:
                fixed(*inputs, *outs)
            else:
                assert config is not None
                grid, block = config(*inputs)
                TorchCall(fn[grid, block])(*inputs, *outs)
            return result(outs)

    op = torch.library.custom_op(name, impl, mutates_args=(), schema=full_schema)
    op.register_fake(fake)
    return op


#: Input signatures remembered per op before the memo starts over (a bound, not a tuning).
_SPECS_MEMO = 64


def _pipe_outputs(pipe: Any, n_in: int) -> tuple[int, Callable[..., Any]]:
    # Output shapes are a function of the inputs' shapes and dtypes; computing them plans
    # the chain on the host (~20 us), so each op remembers them per input signature.
    memo: dict[tuple[Any, ...], list[tuple[tuple[int, ...], DType]]] = {}

    def specs(*inputs: Any) -> list[tuple[tuple[int, ...], DType]]:
        key = tuple((tuple(x.shape), x.dtype) for x in inputs[:n_in])
        hit = memo.get(key)
        if hit is None:
            hit = pipe_output_specs(pipe, *key)
            if len(memo) >= _SPECS_MEMO:
                memo.clear()
            memo[key] = hit
        return hit

    # The count of outputs is a property of the chain (MidWrites, split writes): ask
    # with a small image of the read's dtype-independent shape.
    n_out = sum(1 for op in pipe.chain.middle if op.kind == "midwrite") + 1
    split = getattr(pipe.chain.write, "name", "") == "SplitWrite"
    if split:
        raise ArgumentError("thork_torch.custom_op: pipes ending in SplitWrite return one "
                            "array per channel; end with TensorWrite/TensorSplit instead")
    return n_out, specs


def _launch_of(fn: Any, config: Any) -> tuple[Any, Any]:
    """``(launch or None, kernel)`` of a launch ``kernel[g, b]`` or a kernel + config."""
    kernel = getattr(fn, "kernel", None)
    if kernel is not None and hasattr(fn, "grid"):  # a Launch
        if config is not None:
            raise ArgumentError("thork_torch.custom_op: config= is for a kernel; a launch "
                                "kernel[grid, block] has its own")
        return fn, kernel
    if not hasattr(fn, "params") or not hasattr(fn, "__getitem__"):
        raise ArgumentError(f"thork_torch.custom_op: expected an fkl pipe, a launch "
                            f"kernel[grid, block] or a @tk.jit kernel, got {type(fn).__name__}")
    if config is None:
        raise ArgumentError(f"thork_torch.custom_op: kernel {fn.name} needs config="
                            f"lambda *inputs: (grid, block), or pass fn[grid, block]")
    return None, fn


def _count(kernel: Any, params: Any) -> int:
    """How many outputs an ``outputs(*inputs)`` function describes: the trailing run of
    pointer parameters that the kernel writes and never reads."""
    n = 0
    for p in reversed(params):
        if not isinstance(p.type, PointerType) or p.reads or not p.writes:
            break
        n += 1
    if n == 0:
        raise ArgumentError(f"thork_torch.custom_op: {kernel.name} has no trailing write-only "
                            "array parameters; pass outputs=<count>")
    return n


def _schema_type(p: Any) -> str:
    if isinstance(p.type, PointerType):
        return "Tensor"
    t = p.type
    if t.name == "bool":
        return "bool"
    return "int" if t.is_int else "float"
