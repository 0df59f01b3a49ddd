"""fkl-ops-extra: three fkl operations shipped as a plugin — :class:`Gamma`, :class:`LUT`
and :class:`Clamp`.

Installed, they are found as ``fkl.ops.Gamma`` (and ``fkl.Gamma``: fkl has no op of those
names) through the ``fkl.ops`` entry point; ``from fkl_ops_extra import Gamma`` works too.
Each fuses into a pipe like a built-in op: values (exponent, table, bounds) are runtime
parameters, so changing them never recompiles.
"""

from __future__ import annotations

from ._ops import LUT, Clamp, Gamma

#: What the ``fkl.ops`` entry point names: every op class of the pack.
OPS = [Gamma, LUT, Clamp]

__all__ = ["LUT", "OPS", "Clamp", "Gamma"]
__version__ = "0.1.0"
