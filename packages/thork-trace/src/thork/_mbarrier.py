"""Shared-memory ``mbarrier`` objects: barriers that count arrivals *and* bytes.

An mbarrier is one uint64 in shared memory (``tk.shared_array(tk.dt.uint64, (n,))``). It
is initialised with an arrival count; a *phase* completes when that many threads arrived
and every byte a transaction (a TMA copy) announced by ``tk.mbarrier_expect_tx`` has
landed; it then flips to the next phase. Threads wait for a phase by its parity (0, 1,
0, ...). GPU: sm_90a (part of Thork's Hopper set); the CPU target models it exactly.
"""

from __future__ import annotations

from typing import Any

from thork_core import TraceError, dt
from thork_core.ir import Eval, Hopper, Offset, PointerType

from ._trace import Memory, Value, _to, as_value, current

__all__ = ["mbarrier_init", "mbarrier_arrive", "mbarrier_expect_tx", "mbarrier_wait",
           "mbarrier_try_wait", "barrier_operand"]


def barrier_operand(who: str, bar: Any, index: Any) -> Offset:
    """The :class:`Offset` of mbarrier ``bar[index]``, checked: a shared uint64 array."""
    if not isinstance(bar, Memory) or bar.space != "shared" or bar.dtype != dt.uint64:
        raise TraceError(f"{who}: the barrier must be a shared uint64 array "
                         f"(tk.shared_array(tk.dt.uint64, ...)), got {bar!r}")
    t = bar.expr.type
    assert isinstance(t, PointerType)
    bar.mark_written()
    return Offset(t, bar.expr, bar.index_expr(index))


def _u32(who: str, what: str, v: Any) -> Any:
    x = as_value(v)
    if not x.dtype.is_int:
        raise TraceError(f"{who}: {what} must be an integer, got {x.dtype.name}")
    return _to(x, dt.uint32)


def mbarrier_init(bar: Any, index: Any, count: Any) -> None:
    """Initialise mbarrier ``bar[index]`` for ``count`` arrivals per phase (1 to 2**20-1),
    phase 0 (PTX ``mbarrier.init.shared::cta.b64``). One thread initialises; a
    ``tk.syncthreads()`` must follow before other threads use it."""
    if isinstance(count, int) and not 1 <= count < 1 << 20:
        raise TraceError(f"tk.mbarrier_init(): count must be from 1 to {(1 << 20) - 1}, "
                         f"got {count!r}")
    op = barrier_operand("tk.mbarrier_init()", bar, index)
    current().emit(Eval(Hopper(None, "mbarrier.init",  # type: ignore[arg-type]
                               (op, _u32("tk.mbarrier_init()", "count", count)))))


def mbarrier_arrive(bar: Any, index: Any, cta: Any = None) -> None:
    """This thread arrives on ``bar[index]`` (PTX ``mbarrier.arrive.shared::cta.b64``,
    release semantics: its earlier writes are visible to threads that then see the phase
    complete). ``cta``: arrive instead on the barrier at the same place in the block of
    that rank in this block's cluster (``mapa`` + ``mbarrier.arrive.shared::cluster``,
    release at CTA scope: for handing back buffers that were only read; needs
    ``tk.cluster_dims``)."""
    op = barrier_operand("tk.mbarrier_arrive()", bar, index)
    if cta is None:
        current().emit(Eval(Hopper(None, "mbarrier.arrive", (op,))))  # type: ignore[arg-type]
        return
    rank = _u32("tk.mbarrier_arrive()", "cta", cta)
    current().emit(Eval(Hopper(None, "mbarrier.arrive.cluster",  # type: ignore[arg-type]
                               (op, rank))))


def mbarrier_expect_tx(bar: Any, index: Any, nbytes: Any) -> None:
    """This thread arrives on ``bar[index]`` and announces ``nbytes`` more bytes that
    transactions (``tk.tma_load``) will deliver before the phase completes (PTX
    ``mbarrier.arrive.expect_tx.shared::cta.b64``)."""
    op = barrier_operand("tk.mbarrier_expect_tx()", bar, index)
    n = _u32("tk.mbarrier_expect_tx()", "nbytes", nbytes)
    current().emit(Eval(Hopper(None, "mbarrier.expect_tx", (op, n))))  # type: ignore[arg-type]


def mbarrier_wait(bar: Any, index: Any, parity: Any) -> None:
    """Block until the phase of ``bar[index]`` with parity ``parity`` (0 or 1) completed
    (PTX ``mbarrier.try_wait.parity.shared::cta.b64`` in a loop; acquire semantics)."""
    op = barrier_operand("tk.mbarrier_wait()", bar, index)
    p = _u32("tk.mbarrier_wait()", "parity", parity)
    current().emit(Eval(Hopper(None, "mbarrier.wait", (op, p))))  # type: ignore[arg-type]


def mbarrier_try_wait(bar: Any, index: Any, parity: Any) -> Value:
    """Whether the phase of ``bar[index]`` with parity ``parity`` completed (bool), waiting
    a hardware-chosen while first (PTX ``mbarrier.try_wait.parity.shared::cta.b64``): for
    loops that do other work between tries. :func:`mbarrier_wait` is the plain loop."""
    op = barrier_operand("tk.mbarrier_try_wait()", bar, index)
    p = _u32("tk.mbarrier_try_wait()", "parity", parity)
    return Value(current().temp(Hopper(dt.bool, "mbarrier.try_wait", (op, p)), "ready"))
