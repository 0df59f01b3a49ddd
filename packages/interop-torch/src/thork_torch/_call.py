"""Calling a Thork kernel launch or an fkl pipe with torch tensors, on torch's stream.

``wrap(fn)`` returns a :class:`TorchCall`; its call resolves the launch stream (the
``stream=`` given, else torch's current stream on the tensors' device), runs ``fn`` with
the tensors zero-copy on it, and converts what Thork allocated when ``output="like_input"``
asks for torch tensors. Ordering after torch's current stream and telling torch's caching
allocator about the cross-stream use (``record_stream``) are the direct call's own (core's
follower path, docs/torch.md): one mechanism for wrapped and direct calls.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from thork_core import ArgumentError

from ._adapter import is_tensor, torch_stream

__all__ = ["TorchCall", "wrap", "OUTPUTS", "is_pipe", "pipe_on"]

#: What ``output=`` accepts: Thork's own arrays (DeviceArray/DeviceBuffer on the GPU,
#: NumPy on the host), or torch tensors on the inputs' device.
OUTPUTS = ("thork", "like_input")


def is_pipe(fn: Any) -> bool:
    fkl = sys.modules.get("fkl")
    return fkl is not None and isinstance(fn, fkl.Pipe)


_CPU_PIPES: dict[int, Any] = {}
_CPU_LOCK = threading.Lock()


def pipe_on(pipe: Any, device: str) -> Any:
    """``pipe`` itself, or for CPU tensors a CPU-target copy of it (same ops and settings:
    the kernel tables find its kernels by signature), so host tensors run on the CPU
    target rather than being staged through the GPU."""
    if device != "cpu" or pipe.target == "cpu":
        return pipe
    with _CPU_LOCK:
        hit = _CPU_PIPES.get(id(pipe))
        if hit is None or hit[0] is not pipe:
            import fkl

            clone = fkl.compose(*pipe.ops, target="cpu", compiler=None)
            clone.flat, clone.fold, clone.vectors = pipe.flat, pipe.fold, pipe.vectors
            hit = (pipe, clone)
            _CPU_PIPES[id(pipe)] = hit
    return hit[1]


class TorchCall:
    """``fn`` (a ``kernel[grid, block]`` launch or an fkl pipe) taking torch tensors.

    ``call(*args, stream=None, out=None, **kw)``: ``stream`` is anything naming a CUDA
    stream (torch/CuPy stream objects, raw handles); None means torch's current stream on
    the first tensor's device. CPU tensors run on the CPU target. The result is the pipe's
    (Thork arrays, or torch tensors with ``output="like_input"``); a launch returns None.
    """

    def __init__(self, fn: Any, *, output: str = "thork") -> None:
        if output not in OUTPUTS:
            raise ArgumentError(f"thork_torch: output must be one of {OUTPUTS}, got "
                                f"{output!r}")
        if not is_pipe(fn) and not callable(fn):
            raise ArgumentError(f"thork_torch: expected a kernel launch (kernel[grid, block]) "
                                f"or an fkl pipe, got {type(fn).__name__}")
        self.fn = fn
        self.output = output

    def __call__(self, *args: Any, stream: Any = None, out: Any = None, **kw: Any) -> Any:
        tensors = [a for a in args if is_tensor(a)]
        if out is not None:
            tensors += [o for o in (out if isinstance(out, (list, tuple)) else [out])
                        if is_tensor(o)]
        device = tensors[0].device if tensors else None
        if device is not None and any(t.device != device for t in tensors):
            raise ArgumentError(f"thork_torch: all tensors must be on one device, got "
                                f"{sorted({str(t.device) for t in tensors})}")
        if device is None or device.type == "cpu":
            return self._run(args, out, None, kw, "cpu" if device is not None else None)
        index = device.index if device.index is not None else 0
        if stream is None:
            handle = torch_stream(index)
        else:
            from thork_core.runtime import stream_handle

            handle = stream_handle(stream)
        # The call waits for torch's current stream and records the tensors when handle
        # is another stream (core's follower path: thork_core._probe.follow).
        return self._run(args, out, handle, kw, "cuda")

    def _run(self, args: tuple[Any, ...], out: Any, handle: int | None, kw: dict[str, Any],
             device: str | None) -> Any:
        fn = self.fn
        if is_pipe(fn):
            result = pipe_on(fn, device or "")(*args, out=out, stream=handle)
            if self.output == "like_input" and out is None:
                return _to_torch(result, handle)
            return result
        if out is not None:
            raise ArgumentError("thork_torch: out= is for fkl pipes; a kernel launch "
                                "writes the arrays it is given")
        if device == "cpu":
            kw.setdefault("target", "cpu")
        fn(*args, stream=handle, **kw)
        return None


def wrap(fn: Any, *, output: str = "thork") -> TorchCall:
    """A :class:`TorchCall` of ``fn`` (see there)."""
    return TorchCall(fn, output=output)


def _to_torch(result: Any, handle: int | None) -> Any:
    """Torch tensors sharing the memory of what a pipe allocated (NumPy on the host,
    DeviceArray on the GPU, imported through DLPack on the launch stream)."""
    import torch

    if isinstance(result, tuple):
        return tuple(_to_torch(r, handle) for r in result)
    if hasattr(result, "__array_interface__"):
        if result.dtype.name == "bfloat16":  # ml_dtypes' type: torch reads its bits
            return torch.from_numpy(result.view("int16")).view(torch.bfloat16)
        return torch.from_numpy(result)
    return torch.from_dlpack(result)

