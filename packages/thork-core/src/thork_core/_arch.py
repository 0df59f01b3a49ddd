"""Which GPU architecture to compile for: ``THORK_ARCH`` > the device > a stated default."""

from __future__ import annotations

import os
import re

__all__ = ["DEFAULT_ARCH", "gpu_arch", "parse_arch"]

#: Used when no GPU is visible and THORK_ARCH is unset: the oldest arch Thork supports.
DEFAULT_ARCH = "sm_75"


def parse_arch(value: str) -> str:
    """Normalize ``sm_90``, ``90``, ``9.0`` or ``compute_90`` to ``sm_90``."""
    v = value.strip().lower()
    m = re.fullmatch(r"(?:sm_|compute_)?(\d+)\.?(\d)?([af]?)", v)
    if not m:
        raise ValueError(f"THORK_ARCH/arch must look like 'sm_90' or '9.0', got {value!r}")
    major, minor, suffix = m.groups()
    digits = major + (minor or "") if minor is not None else major
    if int(digits) < 75:
        raise ValueError(f"arch {value!r} is older than sm_75, the oldest Thork supports")
    return f"sm_{digits}{suffix}"


def gpu_arch(ordinal: int = 0) -> str:
    """The arch for device ``ordinal``, honouring ``THORK_ARCH``."""
    env = os.environ.get("THORK_ARCH")
    if env:
        return parse_arch(env)
    from . import _cuda

    ok, _ = _cuda.gpu_status()
    if ok:
        major, minor = _cuda.compute_capability(ordinal)
        return f"sm_{major}{minor}"
    return DEFAULT_ARCH
