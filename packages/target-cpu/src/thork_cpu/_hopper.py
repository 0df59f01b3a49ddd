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

__all__ = ["CPU_HOPPER", "BAD_TENSOR_MAP", "PARTIAL_WARPGROUP"]

#: Return code when tk.wgmma ran in a warpgroup missing threads.
PARTIAL_WARPGROUP = 6
#: Return code when tk.tma_load was given something that is not a CPU tensor map.
BAD_TENSOR_MAP = 7

CPU_HOPPER = f"""
#define THORK_PARTIAL_WARPGROUP {PARTIAL_WARPGROUP}
#define THORK_BAD_TENSOR_MAP {BAD_TENSOR_MAP}
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
// mbarrier: 20-bit expected and pending arrival counts, the phase bit, signed tx bytes.
struct thork_mbar { unsigned long long expected : 20, pending : 20, phase : 1; long long tx : 23; };
static_assert(sizeof(thork_mbar) == 8, "an mbarrier is 8 bytes");
THORK_FN void thork_mbar_check(thork_block* b, thork_mbar* m) {
  b->progress = 1;
  if (m->pending == 0 && m->tx == 0) { m->phase ^= 1u; m->pending = m->expected; }
}
THORK_FN void thork_mbarrier_init(thork_block* b, void* p, unsigned int count) {
  thork_mbar* m = (thork_mbar*)p;
  m->expected = count; m->pending = count; m->phase = 0; m->tx = 0; b->progress = 1;
}
THORK_FN void thork_mbarrier_arrive(thork_block* b, void* p) {
  thork_mbar* m = (thork_mbar*)p; m->pending -= 1; thork_mbar_check(b, m);
}
THORK_FN void thork_mbarrier_expect_tx(thork_block* b, void* p, unsigned int bytes) {
  thork_mbar* m = (thork_mbar*)p;
  m->tx += (long long)bytes; m->pending -= 1; thork_mbar_check(b, m);
}
THORK_FN void thork_mbarrier_wait(thork_block* b, void* p, unsigned int parity) {
  thork_mbar* m = (thork_mbar*)p;
  while (m->phase == (parity & 1u)) thork_yield(b, b->cur);  // phase 'parity' not done yet
}
// A failed try lets the other threads run (so a spin loop around it makes progress, and one
// that never can is found by the deadlock check).
THORK_FN bool thork_mbarrier_try_wait(thork_block* b, void* p, unsigned int parity) {
  thork_mbar* m = (thork_mbar*)p;
  if (m->phase != (parity & 1u)) return true;
  thork_yield(b, b->cur);
  return m->phase != (parity & 1u);
}
// TMA: the CPU tensor map (tk.tensor_map of a NumPy array): magic, base, width, height,
// row stride (bytes), box cols, box rows, element size, swizzle (bytes).
THORK_FN void thork_tma_load_2d(thork_block* b, void* dst, const unsigned long long* map,
                                int c0, int c1, void* bar) {
  if (map[0] != 0x414d544b524f4854ull) { b->err = THORK_BAD_TENSOR_MAP; return; }
  const unsigned char* base = (const unsigned char*)map[1];
  const long long width = (long long)map[2], height = (long long)map[3];
  const unsigned long long stride = map[4];
  const int cols = (int)map[5], rows = (int)map[6], es = (int)map[7];
  const unsigned int swz = (unsigned int)map[8];
  const unsigned int d0 = thork_smem_addr32(b, dst);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const long long x = (long long)c0 + c, y = (long long)c1 + r;
      unsigned char* out = b->smem + thork_swizzle(d0 + (unsigned int)((r * cols + c) * es), swz);
      if (x < 0 || y < 0 || x >= width || y >= height) memset(out, 0, (size_t)es);
      else memcpy(out, base + (unsigned long long)y * stride + (unsigned long long)x * es,
                  (size_t)es);
    }
  thork_mbar* m = (thork_mbar*)bar;
  m->tx -= (long long)rows * cols * es;
  thork_mbar_check(b, m);
}
"""
