"""Core's own plugin: the GPU target and the NumPy, CUDA-array-interface and DLPack
adapters. Registered first, under the name ``core``; it cannot be blocked."""

from __future__ import annotations

from ._adapter import ArrayAdapter, CudaArrayInterfaceAdapter, DLPackAdapter, NumpyAdapter
from ._hookspecs import hookimpl
from ._target import Target


@hookimpl
def thork_register_targets() -> list[Target]:
    from ._gpu import GpuTarget

    return [GpuTarget()]


@hookimpl
def thork_register_array_adapters() -> list[ArrayAdapter]:
    return [NumpyAdapter(), CudaArrayInterfaceAdapter(), DLPackAdapter()]
