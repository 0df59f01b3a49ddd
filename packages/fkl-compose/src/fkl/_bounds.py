"""Debug mode's reports for fkl kernels: a :class:`~thork_core.BoundsError` of a pipe's
kernel restated with the pipe and what the offending parameter is (``in1`` means little
to whoever composed the pipe; "chain 1's input (the batch)" does)."""

from __future__ import annotations

from collections.abc import Mapping

from thork_core import BoundsError

__all__ = ["restated"]

_FIELDS = ("kernel", "array", "param_index", "index", "lo", "hi", "file", "line", "block",
           "thread")


def restated(e: BoundsError, pipe: str, roles: Mapping[str, str]) -> BoundsError:
    """``e`` with ``pipe`` (the pipe's repr) and the role of its array (from ``roles``:
    kernel parameter name -> what it holds) prefixed to the message; the fields are
    kept, and ``pipe`` added."""
    role = roles.get(str(e.array))
    what = f"{pipe}" + (f", parameter '{e.array}' = {role}" if role else "")
    out = BoundsError(f"{what}: {e}", **{k: getattr(e, k) for k in _FIELDS})
    out.pipe = pipe  # type: ignore[attr-defined]
    return out
