"""The CPU model of Hopper's operations (docs/language-wgmma.md#the-cpu-model).

* ``wgmma``: each thread computes its own N/2 accumulators from shared memory, reading A
  and B through the descriptors decoded as the PTX ISA lays them out (K-major canonical
  layouts, the swizzle applied to the absolute shared address), D's fragment per PTX's
  m64nNk16 figure; products exact, added in float32 in k order after the accumulator —
  the same arithmetic as the warp-level ``mma`` model. It is carried out at issue (the
  earliest moment), fences and wait_group are no-ops.
* ``mbarrier``: expected count, pending count, transaction bytes and phase bit in the
  barrier's 8 bytes; ``mbarrier_wait`` yields the fiber until the phase completes (a wait
  that never can ends the launch as a deadlock).
* TMA: the copy is carried out at issue, element by element into the swizzled shared
  layout, zeros outside the array, then its bytes complete on the barrier.
"""

from __future__ import annotations

__all__ = ["CPU_HOPPER", "BAD_TENSOR_MAP", "PARTIAL_WARPGROUP", "BAD_CLUSTER_RANK",
           "CLUSTER_DEADLOCK"]

#: Return code when tk.wgmma ran in a warpgroup missing threads.
PARTIAL_WARPGROUP = 6
#: Return code when tk.tma_load was given something that is not a CPU tensor map.
BAD_TENSOR_MAP = 7
#: Return code when a cluster operation named a rank outside the cluster.
BAD_CLUSTER_RANK = 8
#: Return code when tk.cluster_sync waited for a block of the cluster that had ended.
CLUSTER_DEADLOCK = 9

CPU_HOPPER = f"""
#define THORK_PARTIAL_WARPGROUP {PARTIAL_WARPGROUP}
#define THORK_BAD_TENSOR_MAP {BAD_TENSOR_MAP}
#define THORK_BAD_CLUSTER_RANK {BAD_CLUSTER_RANK}
#define THORK_CLUSTER_DEADLOCK {CLUSTER_DEADLOCK}
""" + r"""THORK_FN void thork_wgmma_fence(thork_block*) {}
THORK_FN void thork_wgmma_commit(thork_block*) {}
template <int N> THORK_FN void thork_wgmma_wait(thork_block*) {}
template <int N> THORK_FN void thork_setmaxnreg_inc(thork_block*) {}  // no register file
template <int N> THORK_FN void thork_setmaxnreg_dec(thork_block*) {}
THORK_FN void thork_fence_proxy_async(thork_block*) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
THORK_FN unsigned int thork_smem_addr32(thork_block* b, const void* p) {
  return (unsigned int)((const unsigned char*)p - b->smem);
}
// The swizzle: the 16-byte chunk index (bits 4..) XOR the row in the 8-row atom (bits 7..).
THORK_FN unsigned int thork_swizzle(unsigned int a, unsigned int width) {
  return width ? a ^ (((a >> 7) & (width / 16u - 1u)) << 4) : a;
}
// Byte address of element (r, k) (r: row in M or N, k: 0..15) of a K-major 16-bit operand.
THORK_FN unsigned int thork_desc_addr(unsigned long long d, int r, int k) {
  const unsigned int start = (unsigned int)(d & 0x3fffull) << 4;
  const unsigned int lbo = (unsigned int)((d >> 16) & 0x3fffull) << 4;
  const unsigned int sbo = (unsigned int)((d >> 32) & 0x3fffull) << 4;
  const unsigned int mode = (unsigned int)(d >> 62);
  if (mode == 0)  // core matrices of 8 rows x 16 bytes: rows 16 B apart, K-chunks LBO apart
    return start + (r & 7) * 16u + (r >> 3) * sbo + (k >> 3) * lbo + (k & 7) * 2u;
  const unsigned int w = mode == 1 ? 128u : mode == 2 ? 64u : 32u;  // rows w bytes apart
  return thork_swizzle(start + (r & 7) * w + (r >> 3) * sbo + (k >> 3) * 16u + (k & 7) * 2u, w);
}
template <int N, int BF>
THORK_FN thork_vec<float, N / 2> thork_wgmma(thork_block* b, unsigned long long da,
    unsigned long long db, int scale_d, thork_vec<float, N / 2> c) {
  const int me = b->cur, wg = me & ~127;
  // .sync.aligned: the warpgroup's 128 threads meet (a missing one fails the launch).
  if (wg + 128 > b->nthreads) { b->err = THORK_PARTIAL_WARPGROUP; return c; }
  if (b->fibers) {
    int live = 0;
    for (int w = 0; w < 4; ++w) live += thork_popc(b->warp_alive[(wg >> 5) + w]);
    if (live < 128) { b->err = THORK_PARTIAL_WARPGROUP; return c; }
    const unsigned int gen = b->wg_gen[wg >> 7];
    b->progress = 1;
    if (++b->wg_arrived[wg >> 7] >= 128u) { b->wg_arrived[wg >> 7] = 0; b->wg_gen[wg >> 7]++; }
    else while (b->wg_gen[wg >> 7] == gen) thork_yield(b, me);
  }
  const int warp = (me >> 5) & 3, lane = me & 31, g = lane >> 2, t = lane & 3;
  thork_vec<float, N / 2> d;
  for (int i = 0; i < N / 2; ++i) {
    // D fragment: register i of lane (g, t) in warp w is row 16w + g (+8 for i % 4 >= 2),
    // column 8 (i / 4) + 2t + i % 2.
    const int row = 16 * warp + g + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * t + (i & 1);
    float acc = scale_d ? c.v[i] : 0.0f;
    for (int k = 0; k < 16; ++k) {
      unsigned short xa, xb;
      __builtin_memcpy(&xa, b->smem + thork_desc_addr(da, row, k), 2);
      __builtin_memcpy(&xb, b->smem + thork_desc_addr(db, col, k), 2);
      const float p = thork_mma_in(xa, 0, BF) * thork_mma_in(xb, 0, BF);  // exact
      acc = acc + p;
    }
    d.v[i] = acc;
  }
  return d;
}
// mbarrier: 20-bit expected and pending arrival counts, the phase bit, signed tx bytes. Every
// change is one compare-and-swap of the 8 bytes: in a clustered launch other blocks (OS
// threads) arrive on it and complete transactions on it too.
struct thork_mbar { unsigned long long expected : 20, pending : 20, phase : 1; long long tx : 23; };
static_assert(sizeof(thork_mbar) == 8, "an mbarrier is 8 bytes");
THORK_FN thork_mbar thork_mbar_read(const void* p) {
  unsigned long long w = __atomic_load_n((const unsigned long long*)p, __ATOMIC_SEQ_CST);
  thork_mbar m; __builtin_memcpy(&m, &w, 8); return m;
}
// 'arrivals' arrive and 'tx' bytes are announced (> 0) or delivered (< 0); the phase
// completes when no arrival is pending and no byte is outstanding.
THORK_FN void thork_mbar_update(thork_block* b, void* p, unsigned int arrivals, long long tx) {
  unsigned long long* w = (unsigned long long*)p;
  unsigned long long old = __atomic_load_n(w, __ATOMIC_SEQ_CST), nw;
  do {
    thork_mbar m; __builtin_memcpy(&m, &old, 8);
    m.tx += tx; m.pending -= arrivals;
    if (m.pending == 0 && m.tx == 0) { m.phase ^= 1u; m.pending = m.expected; }
    __builtin_memcpy(&nw, &m, 8);
  } while (!__atomic_compare_exchange_n(w, &old, nw, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
  b->progress = 1;
}
THORK_FN void thork_mbarrier_init(thork_block* b, void* p, unsigned int count) {
  thork_mbar m; m.expected = count; m.pending = count; m.phase = 0; m.tx = 0;
  unsigned long long w; __builtin_memcpy(&w, &m, 8);
  __atomic_store_n((unsigned long long*)p, w, __ATOMIC_SEQ_CST);
  b->progress = 1;
}
THORK_FN void thork_mbarrier_arrive(thork_block* b, void* p) { thork_mbar_update(b, p, 1u, 0); }
THORK_FN void thork_mbarrier_expect_tx(thork_block* b, void* p, unsigned int bytes) {
  thork_mbar_update(b, p, 1u, (long long)bytes);
}
// A wait that completes may have been completed by another block (a remote arrival, a
// multicast): the block runs again, whatever it waited for before.
THORK_FN void thork_mbarrier_wait(thork_block* b, void* p, unsigned int parity) {
  while (thork_mbar_read(p).phase == (parity & 1u)) thork_yield(b, b->cur);  // not done yet
  thork_wait_mark(b, 0);
}
// A failed try lets the other threads run (so a spin loop around it makes progress, and one
// that never can is found by the deadlock check).
THORK_FN bool thork_mbarrier_try_wait(thork_block* b, void* p, unsigned int parity) {
  bool done = thork_mbar_read(p).phase != (parity & 1u);
  if (!done) {
    thork_yield(b, b->cur);
    done = thork_mbar_read(p).phase != (parity & 1u);
  }
  if (done) thork_wait_mark(b, 0);
  return done;
}
// TMA: the CPU tensor map (tk.tensor_map of a NumPy array): magic, base, width, height,
// row stride (bytes), box cols, box rows, element size, swizzle (bytes). The box goes to
// byte d0 of the shared memory at 'smem' (this block's, or a cluster peer's); returns its
// bytes, or -1 (and the launch fails) for something that is not a CPU tensor map.
THORK_FN long long thork_tma_copy(thork_block* b, unsigned char* smem, unsigned int d0,
                                  const unsigned long long* map, int c0, int c1) {
  if (map[0] != 0x414d544b524f4854ull) { b->err = THORK_BAD_TENSOR_MAP; return -1; }
  const unsigned char* base = (const unsigned char*)map[1];
  const long long width = (long long)map[2], height = (long long)map[3];
  const unsigned long long stride = map[4];
  const int cols = (int)map[5], rows = (int)map[6], es = (int)map[7];
  const unsigned int swz = (unsigned int)map[8];
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const long long x = (long long)c0 + c, y = (long long)c1 + r;
      unsigned char* out = smem + thork_swizzle(d0 + (unsigned int)((r * cols + c) * es), swz);
      if (x < 0 || y < 0 || x >= width || y >= height) memset(out, 0, (size_t)es);
      else memcpy(out, base + (unsigned long long)y * stride + (unsigned long long)x * es,
                  (size_t)es);
    }
  return (long long)rows * cols * es;
}
THORK_FN void thork_tma_load_2d(thork_block* b, void* dst, const unsigned long long* map,
                                int c0, int c1, void* bar) {
  const long long n = thork_tma_copy(b, b->smem, thork_smem_addr32(b, dst), map, c0, c1);
  if (n >= 0) thork_mbar_update(b, bar, 0u, -n);
}
// TMA store: the box at 'src' (the layout a load of the map writes) to the array, elements
// outside it skipped; carried out at issue, so commit and wait have nothing to do.
THORK_FN void thork_tma_store_2d(thork_block* b, const void* src, const unsigned long long* map,
                                 int c0, int c1) {
  if (map[0] != 0x414d544b524f4854ull) { b->err = THORK_BAD_TENSOR_MAP; return; }
  unsigned char* base = (unsigned char*)map[1];
  const long long width = (long long)map[2], height = (long long)map[3];
  const unsigned long long stride = map[4];
  const int cols = (int)map[5], rows = (int)map[6], es = (int)map[7];
  const unsigned int swz = (unsigned int)map[8], s0 = thork_smem_addr32(b, src);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const long long x = (long long)c0 + c, y = (long long)c1 + r;
      if (x < 0 || y < 0 || x >= width || y >= height) continue;
      memcpy(base + (unsigned long long)y * stride + (unsigned long long)x * es,
             b->smem + thork_swizzle(s0 + (unsigned int)((r * cols + c) * es), swz), (size_t)es);
    }
}
THORK_FN void thork_tma_store_commit(thork_block*) {}
template <int N> THORK_FN void thork_tma_store_wait(thork_block*) {}
// Thread-block clusters: the blocks of a cluster run at once (one OS thread each); rank r
// is the block at offset (r % X, r / X % Y, r / (X Y)) from the cluster's first block.
THORK_FN unsigned int thork_cluster_rank(thork_block* b) {
  return b->bid.x % THORK_CLUSTER_X + THORK_CLUSTER_X * (b->bid.y % THORK_CLUSTER_Y
         + THORK_CLUSTER_Y * (b->bid.z % THORK_CLUSTER_Z));
}
THORK_FN long long thork_cluster_block(thork_block* b, unsigned int rank) {
  const unsigned int x = b->bid.x - b->bid.x % THORK_CLUSTER_X + rank % THORK_CLUSTER_X;
  const unsigned int y = b->bid.y - b->bid.y % THORK_CLUSTER_Y
                         + rank / THORK_CLUSTER_X % THORK_CLUSTER_Y;
  const unsigned int z = b->bid.z - b->bid.z % THORK_CLUSTER_Z
                         + rank / (THORK_CLUSTER_X * THORK_CLUSTER_Y);
  return x + (long long)b->gdim.x * (y + (long long)b->gdim.y * z);
}
// The shared memory of cluster rank 'rank' (null, and the launch fails, for a rank outside
// the cluster or a launch without clusters).
THORK_FN unsigned char* thork_peer_smem(thork_block* b, unsigned int rank) {
  if (!b->grid || !b->grid->smem_of
      || rank >= THORK_CLUSTER_X * THORK_CLUSTER_Y * THORK_CLUSTER_Z) {
    b->err = THORK_BAD_CLUSTER_RANK; return 0;
  }
  return b->grid->smem_of[thork_cluster_block(b, rank)];
}
THORK_FN void thork_fence_mbarrier_init(thork_block*) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
THORK_FN void thork_mbarrier_arrive_cluster(thork_block* b, void* bar, unsigned int cta) {
  unsigned char* peer = thork_peer_smem(b, cta);
  if (peer) thork_mbar_update(b, peer + thork_smem_addr32(b, bar), 1u, 0);
}
THORK_FN void thork_tma_load_2d_multicast(thork_block* b, void* dst, const unsigned long long* map,
                                          int c0, int c1, void* bar, unsigned int mask) {
  const unsigned int n = THORK_CLUSTER_X * THORK_CLUSTER_Y * THORK_CLUSTER_Z;
  if (mask >> n) { b->err = THORK_BAD_CLUSTER_RANK; return; }
  for (unsigned int r = 0; r < n; ++r) {
    if (!(mask >> r & 1u)) continue;
    unsigned char* peer = thork_peer_smem(b, r);
    if (!peer) return;
    const long long bytes = thork_tma_copy(b, peer, thork_smem_addr32(b, dst), map, c0, c1);
    if (bytes < 0) return;
    thork_mbar_update(b, peer + thork_smem_addr32(b, bar), 0u, -bytes);
  }
}
// A barrier over the cluster's threads: the block's threads meet, its first one meets the
// other blocks (spinning: they are all at the barrier), then the threads go on together.
// A block of the cluster that ended can never come: a deadlock, as on a GPU.
THORK_FN void thork_cluster_sync(thork_block* b) {
  const int me = b->cur;
  thork_syncthreads(b);
  if (b->cl_seen[me] == b->cl_done) {
    struct thork_grid* g = b->grid;
    const unsigned int n = THORK_CLUSTER_X * THORK_CLUSTER_Y * THORK_CLUSTER_Z;
    const long long first = thork_cluster_block(b, 0u);
    long long cid = 0;  // the cluster's index: its first block's, in clusters
    {
      const long long fx = first % b->gdim.x, fy = first / b->gdim.x % b->gdim.y,
                      fz = first / ((long long)b->gdim.x * b->gdim.y);
      const long long ncx = b->gdim.x / THORK_CLUSTER_X, ncy = b->gdim.y / THORK_CLUSTER_Y;
      cid = fx / THORK_CLUSTER_X
            + ncx * (fy / THORK_CLUSTER_Y + ncy * (fz / THORK_CLUSTER_Z));
    }
    const unsigned int gen = __atomic_load_n(&g->cl_gen[cid], __ATOMIC_SEQ_CST);
    if (__atomic_add_fetch(&g->cl_arrived[cid], 1u, __ATOMIC_SEQ_CST) >= n) {
      __atomic_store_n(&g->cl_arrived[cid], 0u, __ATOMIC_SEQ_CST);
      __atomic_add_fetch(&g->cl_gen[cid], 1u, __ATOMIC_SEQ_CST);
    } else {
      thork_wait_mark(b, 1);  // waiting on the other blocks: not a running block
      // The ended flags are read before the generation: the last block to arrive moves the
      // generation on before it can end, so a block seen ended with the generation still
      // unmoved never arrived. (Read the other way round, a peer could pass the barrier
      // and end between the two reads: a deadlock reported for a barrier that opened.)
      for (;;) {
        int ended = 0;
        for (unsigned int r = 0; r < n; ++r)
          ended |= __atomic_load_n(&g->bdone[thork_cluster_block(b, r)], __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&g->cl_gen[cid], __ATOMIC_SEQ_CST) != gen) break;
        if (ended) { b->err = THORK_CLUSTER_DEADLOCK; break; }
        sched_yield();
      }
      thork_wait_mark(b, 0);  // past the barrier (or failing): running again
    }
    b->cl_done++;
  }
  b->cl_seen[me]++;
  thork_syncthreads(b);
}
"""
