"""Torch tensors as launch arguments: a zero-copy :class:`~thork_core.ArrayView` of the
tensor's storage, with torch's current stream as the producer stream.

The adapter never imports torch: a caller holding a tensor has imported it, so the adapter
looks it up in ``sys.modules`` and declines everything else at the cost of one dict lookup.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from thork_core import ArgumentError, ArrayAdapter, ArrayView, dt

from ._dtypes import to_thork

__all__ = ["TorchAdapter", "tensor_view", "torch_stream", "raw_stream_reader", "record",
           "is_tensor"]


def is_tensor(obj: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


class TorchAdapter(ArrayAdapter):
    """``torch.Tensor`` (CPU and CUDA, strided layout, every Thork dtype).

    Ahead of the ``__cuda_array_interface__`` adapter (priority 90): torch's interface is
    v2 (no producer stream) and refuses bfloat16 and CPU tensors."""

    name = "torch"
    priority = 95
    follows = "torch"

    def launch_stream(self, obj: Any) -> int | None:
        """Torch's current stream on a CUDA tensor's device: a launch given no ``stream=``
        runs there, in order with torch's own work (no event, no ``record_stream``)."""
        # is_cuda and get_device() are plain attribute reads; obj.device builds a
        # torch.device per call (this runs once per torch array per hot call)
        if not is_tensor(obj) or not obj.is_cuda:
            return None
        return torch_stream(obj.get_device())

    def claims(self, tx: type) -> bool:
        torch = sys.modules.get("torch")
        tensor = getattr(torch, "Tensor", None)
        return isinstance(tensor, type) and issubclass(tx, tensor)

    def fast(self, obj: Any) -> tuple[int, Any, int, int] | None:
        """A C-contiguous CUDA tensor of a Thork dtype: its address, the key ``(type,
        shape, Thork DType, device index)``, torch's current stream on its device (raw
        handle, one C call) and the index; else None (CPU, strided, other dtypes, the
        adapter's full path)."""
        try:
            if not obj.is_cuda or not obj.is_contiguous():
                return None
            d = _FAST_DTYPES.get(obj.dtype)
            if d is None:
                return None
            index = obj.get_device()
            return (obj.data_ptr(), (type(obj), obj.shape, d, index), torch_stream(index),
                    index)
        except Exception:  # noqa: BLE001 - anything unusual: the adapter's path says why
            return None

    def native_reader(self, tx: type) -> tuple[int, Any, dict[Any, Any]] | None:
        """How core's native Binder and Guard read exact ``torch.Tensor`` arguments
        (``_native_launch.c``, "Foreign readers", style 2): ``is_cuda``, ``dtype`` (mapped
        to Thork's through the returned table), ``is_contiguous()``, ``data_ptr()`` and the
        shape, every one re-read per call (``set_``, ``resize_`` and ``.data =`` change
        any of them), and torch's current stream on the device, read once per call
        through :func:`raw_stream_reader`; or (session 19) the same reads in C++, the
        capsule of thork_torch's array reader where it is built (:mod:`._reader`). None
        for subclasses (``nn.Parameter``: the Python path) and where torch is not
        imported."""
        torch = sys.modules.get("torch")
        if torch is None or tx is not getattr(torch, "Tensor", None):
            return None
        from ._dtypes import torch_dtypes
        from ._reader import reader_capsule

        # (session 19) the same reads in C++ where the reader is built (_reader.py)
        current = reader_capsule()
        return (2, raw_stream_reader() if current is None else current,
                {d: to_thork(d) for d in torch_dtypes()})

    def used_on(self, obj: Any, stream: int) -> None:
        """``record_stream`` on the launch stream (see :func:`record`)."""
        record(obj, stream)

    def describe(self) -> str:
        """(session 20) For ``thork info``: which reader core's hot paths use for CUDA
        tensors here (thork_torch's C++ reader or torch's Python API) and why."""
        from ._reader import reader_report

        return f"hot paths read CUDA tensors: {reader_report()}"

    def view(self, obj: Any, stream: int | None) -> ArrayView | None:
        if not is_tensor(obj):
            return None
        v = tensor_view(obj)
        if v.device == "cuda" and stream is not None and v.stream != stream:
            record(obj, stream)
        return v


class _Dtypes:
    """torch dtype -> Thork DType for the dtypes Thork has (``get``), made on first use:
    the adapter never imports torch itself."""

    def __init__(self) -> None:
        self._map: dict[Any, Any] | None = None

    def get(self, dtype: Any) -> Any:
        known = self._map
        if known is None:
            from ._dtypes import torch_dtypes

            known = self._map = {d: to_thork(d) for d in torch_dtypes()}
        return known.get(dtype)


_FAST_DTYPES = _Dtypes()


def tensor_view(t: Any, what: str = "tensor") -> ArrayView:
    """The storage of tensor ``t`` as an ArrayView (no copy). ``stream`` is torch's
    current stream on the tensor's device: work queued there may still be writing it."""
    if t.layout is not sys.modules["torch"].strided:
        raise ArgumentError(f"{what}: only strided (dense) torch tensors can be used, got "
                            f"layout {t.layout}")
    d = to_thork(t.dtype, what)
    item = d.itemsize
    shape = tuple(t.shape)
    strides = None if t.is_contiguous() else tuple(s * item for s in t.stride())
    ptr = t.data_ptr() if t.numel() else 0
    if t.device.type == "cpu":
        return ArrayView(ptr=ptr, shape=shape, strides=strides, dtype=d, device="cpu",
                         host=_numpy_of(t, d), keepalive=t)
    if t.device.type != "cuda":
        raise ArgumentError(f"{what}: torch device {t.device} is not supported (cpu or cuda)")
    index = t.device.index if t.device.index is not None else 0
    return ArrayView(ptr=ptr, shape=shape, strides=strides, dtype=d, device="cuda",
                     device_id=index, stream=torch_stream(index), keepalive=t)


def _numpy_of(t: Any, d: Any) -> Any:
    """A NumPy view of a CPU tensor (what the GPU target stages), or None where NumPy has
    no such dtype (bfloat16 without ml_dtypes)."""
    base = t.detach()
    try:
        if d == dt.bfloat16:
            import torch

            return base.view(torch.int16).numpy().view(d.numpy)
        return base.numpy()
    except Exception:  # noqa: BLE001 - ml_dtypes missing, or an unsigned type torch cannot export
        return None


def torch_stream(device: int) -> int:
    """The raw handle of torch's current CUDA stream on ``device`` (0: legacy default).

    Through ``torch._C._cuda_getCurrentRawStream`` where torch has it (what torch's own
    compiled code calls: no Stream object per call), else ``torch.cuda.current_stream``."""
    raw = _RAW_STREAM[0] if _RAW_STREAM else _raw_stream()
    if raw is not None:
        return int(raw(device))
    import torch

    return int(torch.cuda.current_stream(device).cuda_stream)


_RAW_STREAM: list[Any] = []


def raw_stream_reader() -> Any:
    """A callable ``f(device) -> int``: the raw handle of torch's current CUDA stream on
    ``device``. ``torch._C._cuda_getCurrentRawStream`` itself where torch has it (private,
    what torch's own compiled code calls: one C call, no Stream object), else
    :func:`torch_stream` (``torch.cuda.current_stream(device).cuda_stream``: public,
    ~4 us; tests/interop/test_torch_native.py runs both)."""
    raw = _RAW_STREAM[0] if _RAW_STREAM else _raw_stream()
    return raw if raw is not None else torch_stream


def _raw_stream() -> Any:
    import torch

    _RAW_STREAM[:] = [getattr(torch._C, "_cuda_getCurrentRawStream", None)]
    return _RAW_STREAM[0]


_EXTERNAL: dict[tuple[int, int], Any] = {}
_EXTERNAL_LOCK = threading.Lock()


def record(t: Any, stream: int) -> None:
    """``t.record_stream`` for a raw stream handle: torch's caching allocator then keeps
    the block until the work queued so far on ``stream`` is done, even when the tensor is
    freed first (its own current stream sees nothing of Thork's launch)."""
    import torch

    index = t.device.index if t.device.index is not None else 0
    key = (stream, index)
    with _EXTERNAL_LOCK:
        ext = _EXTERNAL.get(key)
        if ext is None:
            ext = torch.cuda.ExternalStream(stream, device=t.device)
            _EXTERNAL[key] = ext
    t.record_stream(ext)
