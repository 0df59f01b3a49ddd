"""Thread-block clusters (sm_90): blocks launched together on one GPC, which can arrive
on each other's mbarriers and receive one TMA copy in several blocks' shared memory.

``tk.cluster_dims(2)`` in a kernel body makes every launch group its blocks in clusters
of 2 along x (the grid must be a multiple: a :class:`~thork.LaunchError` otherwise);
``tk.cluster_ctarank()`` is the block's rank in its cluster and ``tk.cluster_sync()`` a
barrier over all the cluster's threads. ``tk.mbarrier_arrive(bar, i, cta=r)`` arrives on
block ``r``'s barrier and ``tk.tma_load(..., multicast=mask)`` copies one box into every
block of the mask (docs/language-wgmma.md, "Clusters"). GPU: sm_90a (Thork's Hopper set);
the CPU target runs a clustered launch's blocks at once, one OS thread each.
"""

from __future__ import annotations

from thork_core import TraceError, dt
from thork_core.ir import Eval, Hopper

from ._trace import Value, current

__all__ = ["cluster_dims", "cluster_ctarank", "cluster_sync", "fence_mbarrier_init",
           "MAX_CLUSTER"]

#: Blocks per cluster every sm_90 GPU supports (the "portable" size; 16 needs an opt-in).
MAX_CLUSTER = 8


def cluster_dims(x: int, y: int = 1, z: int = 1) -> None:
    """Declare that the kernel runs in thread-block clusters of ``x * y * z`` blocks (at
    most 8; CUDA's ``__cluster_dims__``). Called once, in the kernel body, with Python
    ints. Launches need a grid that is a multiple of the cluster along each axis."""
    trace = current()
    who = "tk.cluster_dims()"
    if trace.is_function:
        raise TraceError(f"{who}: declare clusters in the kernel body, not in a device "
                         "function")
    dims = (x, y, z)
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in dims):
        raise TraceError(f"{who}: the dimensions must be positive Python ints, got {dims}")
    if x * y * z > MAX_CLUSTER:
        raise TraceError(f"{who}: at most {MAX_CLUSTER} blocks per cluster, got "
                         f"{x} x {y} x {z} = {x * y * z}")
    old = trace.root.cluster_dims
    if old is not None and old != dims:
        raise TraceError(f"{who}: the kernel already declared clusters of {old}, now {dims}")
    trace.root.cluster_dims = dims


def cluster_ctarank() -> Value:
    """This block's rank in its cluster (uint32, 0 .. blocks per cluster - 1: x first,
    then y, then z; PTX ``%cluster_ctarank``)."""
    return Value(current().temp(Hopper(dt.uint32, "cluster.rank", ()), "rank"))


def cluster_sync() -> None:
    """A barrier over every thread of the cluster, with release/acquire ordering (PTX
    ``barrier.cluster.arrive.release`` + ``barrier.cluster.wait.acquire``): after it, what
    any of them wrote to shared memory — mbarrier inits included — is visible to all.
    Every thread of every block of the cluster must reach it (none may have returned)."""
    current().emit(Eval(Hopper(None, "cluster.sync", ())))  # type: ignore[arg-type]


def fence_mbarrier_init() -> None:
    """Make this thread's ``tk.mbarrier_init``s visible to the other blocks of the cluster
    (PTX ``fence.mbarrier_init.release.cluster``), before the ``tk.cluster_sync`` after
    which they arrive on them or multicast into them."""
    current().emit(Eval(Hopper(None, "fence.mbarrier_init", ())))  # type: ignore[arg-type]


def check_clusters(name: str, ops: set[str], dims: tuple[int, int, int] | None) -> None:
    """TraceError when a kernel uses cluster operations without ``tk.cluster_dims``."""
    if dims is None and (ops & {"cluster.sync", "mbarrier.arrive.cluster",
                                "tma.load.2d.multicast"}):
        raise TraceError(f"{name}(): tk.cluster_sync, tk.mbarrier_arrive(cta=...) and "
                         "tk.tma_load(multicast=...) need thread-block clusters: declare "
                         "tk.cluster_dims(...) in the kernel body")
