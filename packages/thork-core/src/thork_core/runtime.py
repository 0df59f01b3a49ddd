"""The device runtime: arrays in GPU memory, streams, devices and memory pools.

:class:`DeviceArray` is Thork's own device array (``__cuda_array_interface__`` and DLPack
both ways). :func:`stream_handle` turns a stream object (CuPy, torch, cuda-python, an int)
into a raw ``CUstream``; :func:`stream_wait` orders one stream after another's queued
work; :class:`Graph` records launches and replays them as one. :func:`device_pool` is the
stream-ordered allocator behind device arrays; :func:`pinned_staging` the pinned host
buffers behind NumPy transfers. Everything loads the CUDA driver on first use, so
importing this module needs no GPU.
"""

from __future__ import annotations

from ._cuda import (
    check,
    compute_capability,
    context,
    device_count,
    device_name,
    driver,
    gpu_status,
    make_current,
    pointer_device,
    stream_handle,
)
from ._device_array import DeviceArray
from ._device_array import _stream_wait as stream_wait
from ._dtype import DType
from ._graph import Graph, GraphNode
from ._memory import DevicePool, PinnedStaging, device_pool, pinned_staging

__all__ = [
    "DeviceArray", "DevicePool", "Graph", "GraphNode", "PinnedStaging", "check",
    "compute_capability", "context",
    "device_count", "device_name", "device_pool", "driver", "gpu_status", "make_current",
    "pinned_staging", "pointer_device", "stream_handle", "stream_wait", "typestr",
]


def typestr(dtype: DType) -> str | None:
    """The ``__cuda_array_interface__`` typestr a conforming producer uses for ``dtype``,
    or None where there is none (bfloat16): such arrays take the full checking path."""
    from ._gpu import _TYPESTR

    return _TYPESTR.get(dtype.name)
