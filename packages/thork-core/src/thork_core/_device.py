"""Device routing: which CUDA device a launch runs on.

A launch runs where its arrays are: every device array argument must live on one device
(Thork's :class:`~thork_core.DeviceArray`, anything with ``__dlpack_device__`` or
``__cuda_array_interface__``), and the kernel is loaded there (one module and prepared
launch per device, built for that device's architecture). ``device=`` names the device
explicitly; arrays elsewhere are then an error too. Host arrays (NumPy) follow the launch:
they are copied to whichever device runs it (device 0 when nothing else decides).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from . import _cuda
from ._errors import DeviceError

__all__ = ["array_device", "check_device", "route"]

# DLPack device types (dlpack.h): CUDA memory and managed memory live on a CUDA device;
# kDLCUDAHost (pinned host memory) and the CPU are host memory.
_DL_CUDA = 2
_DL_CUDA_MANAGED = 13


def check_device(device: Any, who: str) -> int:
    """``device`` as a CUDA ordinal (an int >= 0, or ``"cuda:N"``); DeviceError naming
    ``who`` otherwise."""
    if isinstance(device, str) and device.startswith("cuda:") and device[5:].isdecimal():
        return int(device[5:])
    if isinstance(device, bool) or not isinstance(device, int) or device < 0:
        try:
            import numpy as np

            if isinstance(device, np.integer) and device >= 0:
                return int(device)
        except ImportError:  # pragma: no cover
            pass
        raise DeviceError(f"{who}: device must be a CUDA ordinal (an int >= 0, or "
                          f"'cuda:N'), got {device!r}")
    return device


def array_device(obj: Any) -> int | None:
    """The CUDA ordinal ``obj`` lives on; None for host memory and non-arrays.

    Asks, in order: a ``device`` ordinal on Thork's own arrays, ``__dlpack_device__``
    (PyTorch, CuPy, JAX...), then the driver for the pointer of a
    ``__cuda_array_interface__`` (which carries no device of its own)."""
    from ._device_array import DeviceArray

    if type(obj) is DeviceArray:
        return obj.device
    if hasattr(type(obj), "__dlpack_device__"):
        try:
            kind, ordinal = obj.__dlpack_device__()
        except Exception:  # noqa: BLE001 - a producer that cannot say: ask the pointer
            kind = None
        else:
            if int(kind) in (_DL_CUDA, _DL_CUDA_MANAGED):
                return int(ordinal)
            return None
    try:
        cai = obj.__cuda_array_interface__
    except Exception:  # noqa: BLE001 - absent, or torch refusing for a CPU tensor
        return None
    ptr = cai["data"][0]
    return _cuda.pointer_device(ptr) if ptr else None


def route(who: str, named: Iterable[tuple[str, Any]], device: int | None = None) -> int:
    """The device a launch of ``who`` (a kernel or pipe name) runs on.

    ``named``: (parameter name, argument) pairs of its array arguments. ``device``: the
    explicit choice, or None to follow the arrays (device 0 when none is on a device).
    Raises DeviceError naming ``who``, the parameters and both devices when arrays sit on
    different devices, or on another device than ``device``."""
    found: int | None = None
    first = ""
    for name, arg in named:
        d = array_device(arg)
        if d is None:
            continue
        if device is not None and d != device:
            raise DeviceError(f"{who}: parameter '{name}' is on cuda:{d} but the launch "
                              f"runs on cuda:{device} (device={device})")
        if found is None:
            found, first = d, name
        elif d != found:
            raise DeviceError(f"{who}: arguments on different devices: parameter "
                              f"'{first}' is on cuda:{found}, parameter '{name}' on "
                              f"cuda:{d} (copy one of them across first)")
    if device is not None:
        return device
    return 0 if found is None else found
