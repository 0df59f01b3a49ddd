"""Memory access hints: PTX cache operators and L2 eviction priorities, checked and joined
as the IR writes them. Used by ``Memory.load``/``store``/``vload``/``vstore`` (``_trace``)
and ``tk.load_vec``/``tk.store_vec`` (``_vector``); below both, it imports only core."""

from __future__ import annotations

from typing import Any

from thork_core import TraceError
from thork_core.ir import EVICT_PRIORITIES, LOAD_CACHE_OPS, STORE_CACHE_OPS, join_hint

__all__ = ["cache_op"]


def cache_op(array: Any, cache: str | None, store: bool, what: str,
             evict: str | None = None) -> str:
    """Check the ``cache=`` and ``evict=`` hints of an access and return them as the IR
    writes them (:func:`thork_core.ir.join_hint`; ``""`` for neither).

    ``cache``: loads take ``"ca"`` (cache at all levels: the default), ``"cg"`` (L2 only),
    ``"cs"`` (streaming: evict first, for data read once), ``"lu"`` (last use) or ``"cv"``
    (fetch again, cache nothing); stores ``"wb"`` (write back: the default), ``"cg"``,
    ``"cs"`` (streaming) or ``"wt"`` (write through): PTX's ``ld.global.<op>`` /
    ``st.global.<op>``.

    ``evict``: the L2 eviction priority of the lines the access allocates, ``"first"``
    (evicted before any other line: data used once that should not push out other lines),
    ``"last"`` (kept longest), ``"normal"`` or ``"unchanged"``: an L2 cache policy
    (``createpolicy.fractional.L2::evict_<p>.b64``, computed once per kernel) named by the
    access's ``.L2::cache_hint`` qualifier. Needs sm_80 or newer; combines with ``cache``.

    A hint changes where data is cached, never a value: the CPU target ignores it. Only
    global arrays (kernel parameters and views of them) take one."""
    if cache is None and evict is None:
        return ""
    ops = STORE_CACHE_OPS if store else LOAD_CACHE_OPS
    if cache is not None and (not isinstance(cache, str) or cache not in ops):
        raise TraceError(f"{what}: cache must be None or one of {', '.join(map(repr, ops))} "
                         f"(PTX {'store' if store else 'load'} cache operators), got {cache!r}")
    if evict is not None and (not isinstance(evict, str) or evict not in EVICT_PRIORITIES):
        raise TraceError(f"{what}: evict must be None or one of "
                         f"{', '.join(map(repr, EVICT_PRIORITIES))} (L2 eviction "
                         f"priorities), got {evict!r}")
    if array.space != "global":
        hint = f"cache={cache!r}" if cache is not None else f"evict={evict!r}"
        raise TraceError(f"{what}: {hint} applies to global memory; "
                         f"'{array.label}' is a {array.space} array")
    return join_hint(cache or "", evict or "")
