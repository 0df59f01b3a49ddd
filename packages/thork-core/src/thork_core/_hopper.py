"""CUDA spellings of Hopper's operations (:data:`~thork_core.ir.HOPPER_OPS`): inline PTX
helpers added to kernels that use them, so NVRTC, nvcc and clang need no header.

All of them are sm_90a instructions (``wgmma`` exists on sm_90a only; the others from
sm_90): :func:`thork_core._build.resolve_arch` compiles such kernels for ``sm_90a``.
"""

from __future__ import annotations

from ._ir import KernelIR, hopper_ops

__all__ = ["cuda_hopper_helpers", "helper_name"]

_COMMON = r"""
THORK_FN void thork_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
THORK_FN void thork_wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N> THORK_FN void thork_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory");
}
// setmaxnreg: every thread of the warpgroup; takes effect under __launch_bounds__.
template <int N> THORK_FN void thork_setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(N));
}
template <int N> THORK_FN void thork_setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(N));
}
THORK_FN void thork_fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
THORK_FN unsigned int thork_smem_addr32(const void* p) {
  unsigned int a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}
THORK_FN void thork_mbarrier_init(const void* bar, unsigned int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;"
               :: "r"(thork_smem_addr32(bar)), "r"(count) : "memory");
}
THORK_FN void thork_mbarrier_arrive(const void* bar) {
  asm volatile("{ .reg .b64 st; mbarrier.arrive.shared::cta.b64 st, [%0]; }"
               :: "r"(thork_smem_addr32(bar)) : "memory");
}
THORK_FN void thork_mbarrier_expect_tx(const void* bar, unsigned int bytes) {
  asm volatile("{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1; }"
               :: "r"(thork_smem_addr32(bar)), "r"(bytes) : "memory");
}
THORK_FN bool thork_mbarrier_try_wait(const void* bar, unsigned int parity) {
  unsigned int done;
  asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; "
               "selp.u32 %0, 1, 0, p; }"
               : "=r"(done) : "r"(thork_smem_addr32(bar)), "r"(parity) : "memory");
  return done != 0u;
}
THORK_FN void thork_mbarrier_wait(const void* bar, unsigned int parity) {
  while (!thork_mbarrier_try_wait(bar, parity)) { }
}
// Thread-block clusters (sm_90): the block's rank, a barrier over the cluster's threads,
// the fence that publishes mbarrier inits to the cluster, an arrival on the barrier at the
// same offset in block 'cta' of the cluster (mapa; release at CTA scope, as CUTLASS's
// ClusterBarrier: cluster scope would add a GPU-wide MEMBAR before every arrival).
THORK_FN unsigned int thork_cluster_rank() {
  unsigned int r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
THORK_FN void thork_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
}
THORK_FN void thork_fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
THORK_FN void thork_mbarrier_arrive_cluster(const void* bar, unsigned int cta) {
  asm volatile("{ .reg .b32 ra; mapa.shared::cluster.u32 ra, %0, %1; "
               "mbarrier.arrive.shared::cluster.b64 _, [ra]; }"
               :: "r"(thork_smem_addr32(bar)), "r"(cta) : "memory");
}
// A 2-D TMA tile load; the tensor map lives in global memory (built on the host, copied
// before the launch, so no tensormap proxy fence is needed).
THORK_FN void thork_tma_load_2d(void* dst, const unsigned long long* tmap, int c0, int c1,
                                const void* bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
               "[%0], [%1, {%2, %3}], [%4];"
               :: "r"(thork_smem_addr32(dst)), "l"(tmap), "r"(c0), "r"(c1),
                  "r"(thork_smem_addr32(bar)) : "memory");
}
// TMA store: the box at 'src' (laid out as a load of the same map puts it) to (c1, c0) of
// the map's array, skipping elements outside it; a bulk async-group per commit.
THORK_FN void thork_tma_store_2d(const void* src, const unsigned long long* tmap, int c0,
                                 int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
               :: "l"(tmap), "r"(c0), "r"(c1), "r"(thork_smem_addr32(src)) : "memory");
}
THORK_FN void thork_tma_store_commit() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
template <int N> THORK_FN void thork_tma_store_wait() {
  asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory");
}
// The same box into every block of the cluster whose rank bit is set in 'mask'.
THORK_FN void thork_tma_load_2d_multicast(void* dst, const unsigned long long* tmap, int c0,
                                          int c1, const void* bar, unsigned int mask) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;"
               :: "r"(thork_smem_addr32(dst)), "l"(tmap), "r"(c0), "r"(c1),
                  "r"(thork_smem_addr32(bar)), "h"((unsigned short)mask) : "memory");
}
"""


def _wgmma_helper(n: int, name: str) -> str:
    """``thork_wgmma_m64n{n}k16_{name}(desc_a, desc_b, scale_d, acc)``: acc in-out."""
    r = n // 2
    regs = ", ".join(f"%{i}" for i in range(r))
    outs = ", ".join(f'"+f"(d.v[{i}])' for i in range(r))
    return (
        f"THORK_FN thork_vec<float, {r}> thork_wgmma_m64n{n}k16_{name}(unsigned long long da, "
        f"unsigned long long db, int scale_d, thork_vec<float, {r}> d) {{\n"
        f'  asm volatile("{{ .reg .pred p; setp.ne.b32 p, %{r + 2}, 0; '
        f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{name}.{name} "
        f'{{{regs}}}, %{r}, %{r + 1}, p, 1, 1, 0, 0; }}"\n'
        f'      : {outs}\n'
        '      : "l"(da), "l"(db), "r"(scale_d) : "memory");\n'
        "  return d;\n}\n")


def helper_name(op: str) -> str:
    """The C name of the helper implementing ``op`` (both targets use the same names)."""
    if op.startswith(("wgmma.wait.", "setmaxnreg.", "tma.store.wait.")):
        head, n = op.rsplit(".", 1)
        return f"thork_{head.replace('.', '_')}<{n}>"
    if op == "smem_addr":
        return "thork_smem_addr32"
    return "thork_" + op.replace(".", "_")


def cuda_hopper_helpers(kernel: KernelIR) -> str:
    """The helpers for the Hopper operations ``kernel`` uses ('' when none)."""
    ops = hopper_ops(kernel)
    if not ops:
        return ""
    out = [_COMMON]
    for op in sorted(ops):
        if op.startswith("wgmma.m64n"):
            shape, name = op.split(".")[1:]
            out.append(_wgmma_helper(int(shape[4:-3]), name))
    return "".join(out)
