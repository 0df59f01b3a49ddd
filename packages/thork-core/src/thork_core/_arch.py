"""Which GPU architecture to compile for: ``THORK_ARCH`` > the device > a stated default."""

from __future__ import annotations

import os

__all__ = ["DEFAULT_ARCH", "gpu_arch", "parse_arch"]

#: Used when no GPU is visible and THORK_ARCH is unset: the oldest arch Thork supports.
DEFAULT_ARCH = "sm_75"


def parse_arch(value: str) -> str:
    """Normalize ``sm_90``, ``90``, ``9.0`` or ``compute_90`` (an ``a`` or ``f`` suffix
    kept: ``sm_90a``) to ``sm_90``. Read without a regular expression: compiling one cost
    a fresh process's first launch ~0.1 ms."""
    v = value.strip().lower()
    got = _split_arch(v.removeprefix("sm_") if v.startswith("sm_")
                      else v.removeprefix("compute_"))
    if got is None:
        raise ValueError(f"THORK_ARCH/arch must look like 'sm_90' or '9.0', got {value!r}")
    digits, suffix = got
    if int(digits) < 75:
        raise ValueError(f"arch {value!r} is older than sm_75, the oldest Thork supports")
    return f"sm_{digits}{suffix}"


def _split_arch(v: str) -> tuple[str, str] | None:
    """``(digits, suffix)`` of ``90a``, ``9.0`` or ``90`` (digits, an optional dot with at
    most one digit after it, an optional ``a``/``f``); None for anything else."""
    suffix = v[-1:] if v[-1:] in ("a", "f") else ""
    body = v[:len(v) - len(suffix)]
    major, _, minor = body.partition(".")
    if not (major.isdecimal() and major.isascii()) or len(minor) > 1 \
            or (minor and not (minor.isdecimal() and minor.isascii())):
        return None
    return major + minor, suffix


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
