"""The device runtime: arrays in GPU memory, streams, devices and memory pools.

:class:`DeviceArray` is Thork's own device array (``__cuda_array_interface__`` and DLPack
both ways). :func:`stream_handle` turns a stream object (CuPy, torch, cuda-python, an int)
into a raw ``CUstream``; :func:`stream_wait` orders one stream after another's queued
work; :func:`implied_stream` is the stream a launch given none runs on (torch's current
stream for CUDA tensors, else the legacy default); :class:`Graph` records launches and
replays them as one. :func:`device_pool` is the stream-ordered allocator behind device
arrays; :func:`staging` lends the pinned host buffers behind NumPy transfers;
:func:`pinned_empty` gives users pinned NumPy arrays that launches copy directly;
:func:`configure_staging` sets the threads and chunk size of pageable NumPy transfers.
Everything loads the CUDA driver on first use, so importing this module needs no GPU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._cuda import (
    at_first_context,
    check,
    compute_capability,
    context,
    device_count,
    device_name,
    driver,
    function_address,
    gpu_status,
    make_current,
    pointer_device,
    stream_handle,
    stream_wait,
)
from ._device import array_device, check_device, route
from ._device_array import DeviceArray
from ._dtype import DType, input_typestr
from ._graph import Graph, GraphNode
from ._memory import (
    DevicePool,
    PinnedBlock,
    PinnedStaging,
    device_pool,
    pinned_base,
    pinned_empty,
    staging,
)
from ._pitched_array import PITCH_ALIGN, PitchedArray
from ._probe import implied_stream

__all__ = [
    "DeviceArray", "DevicePool", "PITCH_ALIGN", "PitchedArray", "Graph", "GraphNode",
    "PinnedBlock", "PinnedStaging",
    "array_device", "at_first_context", "check", "check_device", "compute_capability",
    "configure_staging",
    "context",
    "device_count", "device_name", "device_pool", "driver", "function_address",
    "gpu_status", "implied_stream", "make_current", "pinned_base", "pinned_empty",
    "pointer_device", "route",
    "staging", "stream_handle", "stream_wait", "typestr",
]


def typestr(dtype: DType) -> str | None:
    """The ``__cuda_array_interface__`` typestr a conforming producer uses for ``dtype``,
    or None where there is none (bfloat16): such arrays take the full checking path."""
    return input_typestr(dtype)


if TYPE_CHECKING:
    from ._staging import configure_staging


def __getattr__(name: str) -> Any:
    # The staging lanes' module loads on first use: ``import thork`` never copies.
    if name == "configure_staging":
        from ._staging import configure_staging
        return configure_staging
    raise AttributeError(f"module 'thork_core.runtime' has no attribute {name!r}")
