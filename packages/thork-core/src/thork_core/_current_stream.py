"""The stream a GPU launch runs on when the caller gives none.

Arrays of a library with a current stream (torch: ``torch.cuda.current_stream()``) name
it through their adapter's :meth:`~thork_core.ArrayAdapter.launch_stream`: a launch given
such an array and no ``stream=`` runs on that stream, ordered with the library's own work
and with no event wait. Otherwise the launch runs on the legacy default stream (0).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["implied_stream"]

#: (the adapter list it was computed from, the adapters that follow a stream)
_FOLLOWERS: list[Any] = [None, ()]


def implied_stream(args: Sequence[Any]) -> int:
    """The raw stream handle for a launch of ``args`` given no stream: the first argument
    whose adapter names a current stream, else 0. Costs one dict lookup per following
    adapter while its library is not imported."""
    from ._plugins import plugins

    adapters = plugins().array_adapters()
    if _FOLLOWERS[0] is not adapters:
        _FOLLOWERS[:] = [adapters, tuple(a for a in adapters if a.follows)]
    for adapter in _FOLLOWERS[1]:
        if adapter.follows not in sys.modules:
            continue
        for arg in args:
            handle = adapter.launch_stream(arg)
            if handle is not None:
                return handle
    return 0
