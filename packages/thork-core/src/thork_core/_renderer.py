"""Renderers: kernel IR → C++ source text.

:class:`Renderer` prints statements and expressions, which are the same for every
target. :class:`CudaRenderer` adds the CUDA prelude and ``extern "C" __global__`` entry;
the CPU target subclasses :class:`Renderer` for host C++. The CUDA output is
self-contained (no ``#include``) so NVRTC, nvcc and clang accept the same text.
"""

from __future__ import annotations

import math
import struct

from ._dtype import DType, dt
from ._hopper import cuda_hopper_helpers, helper_name
from ._ir import (
    LDMATRIX_OPS,
    MMA_OPS,
    Assign,
    AsyncCopy,
    AsyncGroup,
    Atomic,
    Binary,
    BlockReduce,
    Break,
    Call,
    CallFunc,
    Cast,
    Const,
    Continue,
    Eval,
    Expr,
    Field,
    For,
    Function,
    GlobalDecl,
    Hopper,
    If,
    KernelIR,
    Let,
    Load,
    Loc,
    LocalDecl,
    Offset,
    Pack,
    Param,
    PointerType,
    Print,
    Return,
    Select,
    SharedDecl,
    Special,
    Stmt,
    Store,
    StructType,
    Sync,
    Type,
    Unary,
    Var,
    VecLoad,
    VecStore,
    VectorType,
    Warp,
    While,
    split_hint,
    stmt_exprs,
    walk_exprs,
    walk_stmts,
)

__all__ = ["Renderer", "CudaRenderer", "CODEGEN_VERSION", "CUDA_DEBUG_PRELUDE", "CUDA_FAST_MATH",
           "HALF_CONVERSIONS", "INT_ARITHMETIC", "PRELUDE_MARK", "RECORD_STRUCT", "c_string",
           "fast_math_helpers", "uses_mma"]

# Bumped whenever generated code changes meaning; part of every disk-cache key.
CODEGEN_VERSION = "5"

_BINARY_C = {
    "add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "/", "mod": "%",
    "and": "&", "or": "|", "xor": "^", "shl": "<<", "shr": ">>",
    "land": "&&", "lor": "||",
    "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=",
}
_UNARY_C = {"neg": "-", "invert": "~", "not": "!"}
# Generic math function → C spelling for double (float adds an 'f' suffix).
_MATH_NAMES = {
    "sqrt": "sqrt", "rsqrt": "rsqrt", "exp": "exp", "exp2": "exp2", "log": "log",
    "log2": "log2", "log10": "log10", "sin": "sin", "cos": "cos", "tan": "tan",
    "tanh": "tanh", "pow": "pow", "fma": "fma", "floor": "floor", "ceil": "ceil",
    "round": "round", "rint": "rint", "trunc": "trunc", "abs": "fabs", "copysign": "copysign",
    "atan2": "atan2", "fmod": "fmod", "erf": "erf", "expm1": "expm1", "log1p": "log1p",
    "asin": "asin", "acos": "acos", "atan": "atan", "sinh": "sinh", "cosh": "cosh",
    "cbrt": "cbrt", "hypot": "hypot", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh",
    "erfc": "erfc", "exp10": "exp10", "fmin": "fmin", "fmax": "fmax",
}
_COMPARISONS = frozenset({"lt", "le", "gt", "ge", "eq", "ne"})


# tk.fast (thork/fast.py): float32 approximations as the PTX instructions under CUDA's fast
# intrinsics, the same text for NVRTC, nvcc and clang (inline PTX: no -use_fast_math or
# -ftz needed, nor a libdevice that may differ). .ftz: subnormal inputs and results are
# sign-preserving zeros. Not volatile: the compiler may merge or hoist them as any math.
# Emitted only where a kernel uses them (Renderer._fast), after the prelude.
def _ptx1(op: str, arg: str = "x") -> str:
    return f'float r; asm("{op} %0, %1;" : "=f"(r) : "f"({arg})); return r;'


_LOG2E, _LOG2_10, _LN2, _LOG10_2 = ("1.44269504088896341f", "3.32192809488736235f",
                                    "0.693147180559945309f", "0.301029995663981195f")
CUDA_FAST_MATH: dict[str, str] = {
    "fast_exp2": f"(float x) {{ {_ptx1('ex2.approx.ftz.f32')} }}",
    "fast_exp": f"(float x) {{ {_ptx1('ex2.approx.ftz.f32', 'x * ' + _LOG2E)} }}",
    "fast_exp10": f"(float x) {{ {_ptx1('ex2.approx.ftz.f32', 'x * ' + _LOG2_10)} }}",
    "fast_log2": f"(float x) {{ {_ptx1('lg2.approx.ftz.f32')} }}",
    "fast_log": (f'(float x) {{ float r; asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(r) : '
                 f'"f"(x)); return r * {_LN2}; }}'),
    "fast_log10": (f'(float x) {{ float r; asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(r) : '
                   f'"f"(x)); return r * {_LOG10_2}; }}'),
    "fast_sin": f"(float x) {{ {_ptx1('sin.approx.ftz.f32')} }}",
    "fast_cos": f"(float x) {{ {_ptx1('cos.approx.ftz.f32')} }}",
    "fast_tan": ('(float x) { float s, c, r; asm("sin.approx.ftz.f32 %0, %1;" : "=f"(s) : '
                 '"f"(x)); asm("cos.approx.ftz.f32 %0, %1;" : "=f"(c) : "f"(x)); '
                 'asm("div.approx.ftz.f32 %0, %1, %2;" : "=f"(r) : "f"(s), "f"(c)); '
                 'return r; }'),
    "fast_tanh": f"(float x) {{ {_ptx1('tanh.approx.f32')} }}",
    "fast_pow": ('(float x, float y) { float l, r; asm("lg2.approx.ftz.f32 %0, %1;" : '
                 '"=f"(l) : "f"(x)); asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : '
                 '"f"(y * l)); return r; }'),
    "fast_div": ('(float a, float b) { float r; asm("div.approx.ftz.f32 %0, %1, %2;" : '
                 '"=f"(r) : "f"(a), "f"(b)); return r; }'),
    "fast_rcp": f"(float x) {{ {_ptx1('rcp.approx.ftz.f32')} }}",
    "fast_sqrt": f"(float x) {{ {_ptx1('sqrt.approx.ftz.f32')} }}",
    "fast_rsqrt": f"(float x) {{ {_ptx1('rsqrt.approx.ftz.f32')} }}",
}


def fast_math_helpers(defs: dict[str, str], used: set[str]) -> str:
    """The definitions (``THORK_FN float thork_fast_<name>(...)``) of the ``tk.fast``
    functions in ``used``, in a fixed order, from ``defs`` (the target's spellings)."""
    return "".join(f"THORK_FN float thork_{f}{defs[f]}\n" for f in sorted(used))


# Integer division and remainder with a defined result for every input, the same on every
# target and compiler (docs/guarantees.md): x / 0 = 0, x % 0 = x, MIN / -1 = MIN (wraps),
# MIN % -1 = 0. Truncating otherwise, as C++. C++ leaves these undefined (x86 traps).
INT_ARITHMETIC = r"""
// T's unsigned type of at least 32 bits: wrapping arithmetic on T.
template <class T> struct thork_uwide { typedef unsigned int type; };
template <> struct thork_uwide<long long> { typedef unsigned long long type; };
template <> struct thork_uwide<unsigned long long> { typedef unsigned long long type; };
// One unconditional division (its divisor d is never 0 or -1) and the special cases as a
// factor m of b alone: a // b = (a / d) * m with (d, m) = (1, 0) for b = 0, (1, -1) for
// b = -1, else (b, 1); a % b = a - (a // b) * b (wrapping). The compiler sees one a / d for
// a // b and a % b (one division, as C++'s k / w, k % w), and no select on the quotient:
// one there was unswitched into three copies of a grid-stride loop, which then unrolled
// half as far and scheduled its loads worse (session 9, bench_lang's Jacobi).
template <class T> THORK_FN T thork_idiv(T a, T b) {
  typedef typename thork_uwide<T>::type U;
  const bool neg1 = (T)-1 < (T)0 && b == (T)-1;
  const T d = (b == (T)0 || neg1) ? (T)1 : b;
  const U m = b == (T)0 ? (U)0 : neg1 ? (U)0 - (U)1 : (U)1;
  return (T)((U)(a / d) * m);
}
template <class T> THORK_FN T thork_imod(T a, T b) {
  typedef typename thork_uwide<T>::type U;
  return (T)((U)a - (U)thork_idiv<T>(a, b) * (U)b);
}
// The trip count of for (i = start; step > 0 ? i < stop : i > stop; i += step) with a
// run-time step (0 for a zero step): a counted loop the compiler can unroll.
template <class T> THORK_FN typename thork_uwide<T>::type thork_trips(T start, T stop, T step) {
  typedef typename thork_uwide<T>::type U;
  if (step > (T)0)
    return start < stop ? ((U)stop - (U)start - 1u) / (U)step + 1u : (U)0;
  if (step < (T)0)
    return start > stop ? ((U)start - (U)stop - 1u) / ((U)0 - (U)step) + 1u : (U)0;
  return (U)0;
}
// Shifts by any count, as NumPy defines them (h-debug, issue 13): a count outside
// [0, bits) shifts every bit out: << gives 0, >> gives -1 for a negative signed value and
// 0 otherwise. T is the promoted operand type (32 or 64 bits); << wraps (unsigned).
template <class T, class S> THORK_FN T thork_shl(T a, S b) {
  typedef typename thork_uwide<T>::type U;
  if ((unsigned long long)(long long)b >= sizeof(T) * 8u) return (T)0;
  return (T)((U)a << (unsigned int)b);
}
template <class T, class S> THORK_FN T thork_shr(T a, S b) {
  if ((unsigned long long)(long long)b >= sizeof(T) * 8u)
    return ((T)-1 < (T)0 && a < (T)0) ? (T)-1 : (T)0;
  return (T)(a >> (unsigned int)b);
}
"""

# float16/bfloat16 conversions written once in portable C++; a target's prelude defines
# THORK_FN (function qualifiers), thork_f2u/thork_u2f (bit casts) and may override the
# float16 pair with hardware instructions by defining THORK_HW_HALF.
HALF_CONVERSIONS = r"""
struct alignas(2) thork_half { unsigned short bits; };
struct alignas(2) thork_bfloat16 { unsigned short bits; };
#ifndef THORK_HW_HALF
THORK_FN float thork_h2f(thork_half h) {
  unsigned int sign = ((unsigned int)h.bits & 0x8000u) << 16;
  unsigned int e = ((unsigned int)h.bits >> 10) & 0x1fu, m = (unsigned int)h.bits & 0x3ffu;
  if (e == 0u) { float v = (float)m * 5.9604644775390625e-08f; return sign ? -v : v; }
  if (e == 0x1fu) return thork_u2f(sign | 0x7f800000u | (m << 13));
  return thork_u2f(sign | ((e + 112u) << 23) | (m << 13));
}
THORK_FN thork_half thork_f2h(float f) {
  unsigned int x = thork_f2u(f);
  unsigned int sign = (x >> 16) & 0x8000u, ex = (x >> 23) & 0xffu, m = x & 0x7fffffu;
  thork_half r;
  if (ex == 0xffu) { r.bits = (unsigned short)(sign | 0x7c00u | (m ? 0x200u : 0u)); return r; }
  int e = (int)ex - 112;
  if (e >= 0x1f) { r.bits = (unsigned short)(sign | 0x7c00u); return r; }
  if (e <= 0) {
    if (e < -10) { r.bits = (unsigned short)sign; return r; }
    m |= 0x800000u;
    unsigned int shift = (unsigned int)(14 - e), h = m >> shift;
    unsigned int rem = m & ((1u << shift) - 1u), mid = 1u << (shift - 1u);
    if (rem > mid || (rem == mid && (h & 1u))) h++;
    r.bits = (unsigned short)(sign | h); return r;
  }
  unsigned int h = sign | ((unsigned int)e << 10) | (m >> 13), rem = m & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
  r.bits = (unsigned short)h; return r;
}
#endif
THORK_FN float thork_b2f(thork_bfloat16 b) { return thork_u2f(((unsigned int)b.bits) << 16); }
THORK_FN thork_bfloat16 thork_f2b(float f) {
  unsigned int x = thork_f2u(f);
  thork_bfloat16 r;
  if ((x & 0x7fffffffu) > 0x7f800000u) { r.bits = (unsigned short)((x >> 16) | 0x40u); return r; }
  x += 0x7fffu + ((x >> 16) & 1u);
  r.bits = (unsigned short)(x >> 16); return r;
}
// float32 -> bfloat16 to nearest even with every NaN as the canonical 0x7FFF
// (tk.cast(x, bfloat16, nan="canonical")): the GPU's cvt.rn.bf16.f32 from sm_80 on (ptxas
// packs two beside each other into one cvt.rn.bf16x2.f32), the same bits in software
// elsewhere (the CPU target, older GPUs).
THORK_FN thork_bfloat16 thork_f2b_rn(float f) {
  thork_bfloat16 r;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r.bits) : "f"(f));
#else
  unsigned int x = thork_f2u(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) { r.bits = 0x7fffu; return r; }
  x += 0x7fffu + ((x >> 16) & 1u);
  r.bits = (unsigned short)(x >> 16);
#endif
  return r;
}
// float64 and wide integers reach the 16-bit types through float32 rounded *to odd*
// (truncate, then set the lowest bit when anything was lost): float32 keeps more than two
// bits beyond any 16-bit float, so the final round to nearest even is the one and only
// rounding (a plain (float) cast first rounds twice: 1 + 2**-8 + 2**-40 would go to 1).
THORK_FN float thork_d2f_odd(double d) {
  float f = (float)d;
  if ((double)f != d && f == f) {
    unsigned int u = thork_f2u(f);
    if (d > 0.0 ? (double)f > d : (double)f < d) u -= 1u;  // round toward zero
    f = thork_u2f(u | 1u);
  }
  return f;
}
// |x| >= 2**53 keeps bits 63..11 (exact in a double) and folds the rest into bit 11.
THORK_FN double thork_u64_odd(unsigned long long u) {
  if (u < (1ull << 53)) return (double)u;
  return (double)((u & ~0x7ffull) | ((u & 0x7ffull) ? 0x800ull : 0ull));
}
THORK_FN double thork_i64_odd(long long x) {
  return x < 0 ? -thork_u64_odd(0ull - (unsigned long long)x) : thork_u64_odd((unsigned long long)x);
}
// n elements moved as one aligned access (float4, int2...): ld/st.v4 on the GPU. Sizes
// that are no power of two (wgmma's 96 accumulators of n = 192) keep T's alignment.
template <class T, int N> struct alignas((sizeof(T) * N) & (sizeof(T) * N - 1) ? alignof(T)
                                         : sizeof(T) * N) thork_vec { T v[N]; };
"""

_CUDA_PRELUDE = r"""// Generated by Thork (codegen %(version)s). Self-contained: no #include needed.
#ifndef __global__
#define __global__ __attribute__((global))
#endif
#ifndef __device__
#define __device__ __attribute__((device))
#endif
#ifndef __shared__
#define __shared__ __attribute__((shared))
#endif
#define THORK_FN static __device__ inline __attribute__((unused))
THORK_FN unsigned int thork_f2u(float f) { unsigned int u; asm("mov.b32 %%0, %%1;" : "=r"(u) : "f"(f)); return u; }
THORK_FN float thork_u2f(unsigned int u) { float f; asm("mov.b32 %%0, %%1;" : "=f"(f) : "r"(u)); return f; }
THORK_FN unsigned long long thork_d2u(double d) { unsigned long long u; asm("mov.b64 %%0, %%1;" : "=l"(u) : "d"(d)); return u; }
THORK_FN double thork_u2d(unsigned long long u) { double d; asm("mov.b64 %%0, %%1;" : "=d"(d) : "l"(u)); return d; }
#define THORK_HW_HALF 1
"""

_LAUNCH_BOUNDS = """#ifndef __launch_bounds__
#define __launch_bounds__(t, b) __attribute__((launch_bounds(t, b)))
#endif
#ifndef __cluster_dims__
#define __cluster_dims__(x, y, z) __attribute__((cluster_dims(x, y, z)))
#endif
"""

# Atomics CUDA has no instruction for (float min/max, double exch/cas...), as CAS loops.
_CUDA_ATOMICS = r"""
THORK_FN float thork_atomic_min(float* p, float v) {
  unsigned int* a = (unsigned int*)p; unsigned int old = *a, assumed;
  do { assumed = old; if (!(v < thork_u2f(assumed))) break;
       old = atomicCAS(a, assumed, thork_f2u(v)); } while (old != assumed);
  return thork_u2f(old);
}
THORK_FN float thork_atomic_max(float* p, float v) {
  unsigned int* a = (unsigned int*)p; unsigned int old = *a, assumed;
  do { assumed = old; if (!(thork_u2f(assumed) < v)) break;
       old = atomicCAS(a, assumed, thork_f2u(v)); } while (old != assumed);
  return thork_u2f(old);
}
THORK_FN double thork_atomic_min(double* p, double v) {
  unsigned long long* a = (unsigned long long*)p; unsigned long long old = *a, assumed;
  do { assumed = old; if (!(v < thork_u2d(assumed))) break;
       old = atomicCAS(a, assumed, thork_d2u(v)); } while (old != assumed);
  return thork_u2d(old);
}
THORK_FN double thork_atomic_max(double* p, double v) {
  unsigned long long* a = (unsigned long long*)p; unsigned long long old = *a, assumed;
  do { assumed = old; if (!(thork_u2d(assumed) < v)) break;
       old = atomicCAS(a, assumed, thork_d2u(v)); } while (old != assumed);
  return thork_u2d(old);
}
"""

# The grid-wide barrier of cooperative kernels. One thread per block arrives; block 0 adds
# 2**31 - (nblocks - 1), the others 1, so the top bit of the count flips when the last
# block arrives: each waits for its flip (no reset, no generation counter). The arrival is
# a gpu-scope release (after __syncthreads, it publishes the whole block's writes) and the
# wait a gpu-scope acquire: cheaper than two __threadfence() (fence.sc) around a relaxed
# atomic and a volatile load, the same protocol as cooperative groups' grid.sync().
_CUDA_GRID_BARRIER = r"""__device__ unsigned int thork_grid_arrived;
THORK_FN void thork_grid_sync() {
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
    const unsigned int nblocks = gridDim.x * gridDim.y * gridDim.z;
    const bool first = (blockIdx.x | blockIdx.y | blockIdx.z) == 0u;
    const unsigned int add = first ? 0x80000000u - (nblocks - 1u) : 1u;
    unsigned int old, now;
    asm volatile("atom.add.release.gpu.u32 %0, [%1], %2;"
                 : "=r"(old) : "l"(&thork_grid_arrived), "r"(add) : "memory");
    do {
      asm volatile("ld.acquire.gpu.u32 %0, [%1];"
                   : "=r"(now) : "l"(&thork_grid_arrived) : "memory");
    } while (((old ^ now) & 0x80000000u) == 0u);
  }
  __syncthreads();
}
"""

# Tensor-core and asynchronous-copy helpers (PTX through inline asm, so that NVRTC, nvcc
# and clang need no header), added to kernels that use them. sm_80+ (ldmatrix: sm_75+).
_CUDA_MMA_HEAD = r"""
// The 32-bit shared-memory address of p. Through the compiler's own conversion where
// there is one, so that it sees the shared base and computes addresses in 32 bits, with
// constant offsets folded into the instruction (an asm cvta hides the base: every
// ldmatrix / cp.async then costs a 64-bit generic address computation).
THORK_FN unsigned int thork_smem_addr(const void* p) {
#if defined(__NVCC__) || defined(__CUDACC_RTC__)
  return (unsigned int)__cvta_generic_to_shared(p);
#elif defined(__clang__)
  return (unsigned int)(unsigned long long)(const __attribute__((address_space(3))) void*)p;
#else
  unsigned int a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
#endif
}
THORK_FN unsigned long long thork_gmem_addr(const void* p) {
  unsigned long long a; asm("cvta.to.global.u64 %0, %1;" : "=l"(a) : "l"(p)); return a;
}
"""


def _cuda_mma_helpers() -> str:
    out = [_CUDA_MMA_HEAD]
    for name in ("f16", "bf16"):
        out.append(
            f"THORK_FN thork_vec<float, 4> thork_mma_{name}(unsigned int a0, unsigned int a1, "
            "unsigned int a2, unsigned int a3, unsigned int b0, unsigned int b1, float c0, "
            "float c1, float c2, float c3) {\n"
            "  thork_vec<float, 4> d;\n"
            f'  asm("mma.sync.aligned.m16n8k16.row.col.f32.{name}.{name}.f32 '
            '{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"\n'
            '      : "=f"(d.v[0]), "=f"(d.v[1]), "=f"(d.v[2]), "=f"(d.v[3])\n'
            '      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1),\n'
            '        "f"(c0), "f"(c1), "f"(c2), "f"(c3));\n'
            "  return d;\n}\n")
    for n in (1, 2, 4):
        for trans in ("", ".trans"):
            regs = ", ".join(f"%{i}" for i in range(n))
            outs = ", ".join(f'"=r"(r.v[{i}])' for i in range(n))
            out.append(
                f"THORK_FN thork_vec<unsigned int, {n}> thork_ldmatrix_x{n}"
                f"{trans.replace('.', '_')}(const void* p) {{\n"
                f"  thork_vec<unsigned int, {n}> r;\n"
                f'  asm volatile("ldmatrix.sync.aligned.m8n8.x{n}{trans}.shared.b16 '
                f'{{{regs}}}, [%{n}];"\n'
                f'      : {outs} : "r"(thork_smem_addr(p)) : "memory");\n'
                "  return r;\n}\n")
    for nbytes in (4, 8, 16):
        cache = "cg" if nbytes == 16 else "ca"  # .cg (L2 only) exists for 16 bytes only
        out.append(
            f"THORK_FN void thork_cp_async_{nbytes}(void* dst, const void* src, "
            "unsigned int src_bytes) {\n"
            f'  asm volatile("cp.async.{cache}.shared.global [%0], [%1], {nbytes}, %2;"\n'
            '      :: "r"(thork_smem_addr(dst)), "l"(thork_gmem_addr(src)), "r"(src_bytes)\n'
            '      : "memory");\n}\n')
    return "".join(out)


def uses_mma(kernel: KernelIR) -> bool:
    """Whether the kernel (or a device function it calls) uses ``mma``, ``ldmatrix`` or
    ``cp.async`` (its source then carries their helpers). A :class:`KernelIR` answers
    from its one cached walk (``_scan``; an IR pickled before it held four answers walks
    here)."""
    if isinstance(kernel, KernelIR):
        scan = kernel._scan
        if len(scan) == 4:
            return scan[3]
    for body in [kernel.body] + [f.body for f in kernel.functions]:
        for s in walk_stmts(body):
            if isinstance(s, (AsyncCopy, AsyncGroup)):
                return True
            for top in stmt_exprs(s):
                for e in walk_exprs(top):
                    if isinstance(e, Warp) and (e.op in MMA_OPS or e.op in LDMATRIX_OPS):
                        return True
    return False


_CUDA_HW_HALF = r"""THORK_FN float thork_h2f(thork_half h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits)); return f; }
THORK_FN thork_half thork_f2h(float f) { thork_half h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f)); return h; }
"""


# -- debug mode (h-debug): the device side of the error record ----------------------------
#: The record both targets write: the first violation of a launch (flag set atomically);
#: :class:`~thork_core._debug.DebugRecord` mirrors it.
RECORD_STRUCT = r"""struct thork_dbg_rec {
  unsigned int flag; int site; long long index, lo, hi;
  unsigned int block[3], thread[3];
};
"""

#: CUDA debug prelude: the record (found by name with cuModuleGetGlobal), the scratch cell
#: failed accesses use, ``thork_at`` and the dynamic shared memory bound.
CUDA_DEBUG_PRELUDE = RECORD_STRUCT + r"""// At global scope: the symbol is not mangled.
__device__ thork_dbg_rec thork_dbg_record;
__device__ __attribute__((aligned(16))) unsigned long long thork_dbg_scratch[8];
THORK_FN long long thork_dyn_count(long long offset, long long size) {
  unsigned int n; asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(n));
  return ((long long)n - offset) / size;
}
THORK_FN void thork_dbg_fail(int site, long long i, long long lo, long long hi) {
  if (atomicCAS(&thork_dbg_record.flag, 0u, 1u) == 0u) {
    thork_dbg_record.site = site; thork_dbg_record.index = i;
    thork_dbg_record.lo = lo; thork_dbg_record.hi = hi;
    thork_dbg_record.block[0] = blockIdx.x; thork_dbg_record.block[1] = blockIdx.y;
    thork_dbg_record.block[2] = blockIdx.z; thork_dbg_record.thread[0] = threadIdx.x;
    thork_dbg_record.thread[1] = threadIdx.y; thork_dbg_record.thread[2] = threadIdx.z;
    __threadfence();
  }
}
THORK_FN bool thork_ok(long long i, long long lo, long long hi, int site) {
  if (i >= lo && i < hi) return true;
  thork_dbg_fail(site, i, lo, hi);
  return false;
}
template <class T>
THORK_FN T* thork_at(T* p, long long i, long long lo, long long hi, int site) {
  if (i >= lo && i < hi) return p + i;
  thork_dbg_fail(site, i, lo, hi);
  return (T*)(void*)thork_dbg_scratch;
}
"""


class Renderer:
    """Prints kernel IR as C++. Subclasses supply the prelude and the entry point."""

    #: Suffix-free name of the language, for error messages.
    language = "C++"

    def __init__(self, *, line_directives: bool = True) -> None:
        self.line_directives = line_directives
        self._lines: list[str] = []
        self._last_loc: Loc | None = None
        self._indent = 1
        self._cache_ops: set[tuple[str, str]] = set()  # ("ld" | "st", PTX cache operator)
        self._fast: set[str] = set()  # tk.fast functions used ("fast_exp2"...)

    # -- entry points -------------------------------------------------------------------
    def render(self, kernel: KernelIR) -> str:
        """Return the complete translation unit for ``kernel``."""
        self._kernel = kernel
        self._cache_ops = set()
        self._fast = set()
        self.functions_text = self._definitions(kernel)
        body = self._body(kernel.body, kernel.mutable)
        return self.translation_unit(kernel, body)

    def _definitions(self, kernel: KernelIR) -> str:
        """Module-level arrays, the grid barrier (cooperative kernels), device functions."""
        grid = self.grid_barrier() if kernel.cooperative else ""
        return grid + "".join(self.global_decl(g) for g in kernel.globals) \
            + "".join(self.function(f) for f in kernel.functions)

    def grid_barrier(self) -> str:
        """Definitions behind a ``grid`` :class:`Sync` (the CUDA version: one word in
        device memory, one atomic per block; correct because a cooperative launch makes
        every block resident). Every block adds 1 but block 0, which adds
        2^31 - (blocks - 1): the grid's sum is 2^31, so the top bit flips exactly when the
        last block arrives and the low bits are back where they were — no reset between
        barriers or launches."""
        return _CUDA_GRID_BARRIER

    def _body(self, stmts: list[Stmt], mutable: set[str]) -> str:
        self._lines = []
        self._last_loc = None
        self._indent = 1
        self._mutable = mutable
        for stmt in stmts:
            self._stmt(stmt)
        return "\n".join(self._lines)

    #: Qualifiers of a device function; the extra parameters every function receives
    #: (the CPU target passes its thread context) and the arguments that forward them.
    function_prefix = "static __device__"
    hidden_params: tuple[str, ...] = ()
    hidden_args: tuple[str, ...] = ()

    #: Qualifiers of module-level arrays by space (the CPU target: plain statics).
    global_qualifiers = {"constant": "__constant__", "global": "__device__"}

    def global_decl(self, g: GlobalDecl) -> str:
        """The definition of a module-level array (with its initial values)."""
        t = g.var.type
        assert isinstance(t, PointerType)
        qual = self.global_qualifiers[t.space]
        if g.init is None:
            return f"{qual} {t.elem.ctype} {g.var.name}[{g.count}];\n"
        if t.elem.is_half:  # raw bits (the front-end's): initializers must be constant
            vals = [f"{{{int(v)}u}}" for v in g.init]
        else:
            vals = [self.const(v, t.elem) for v in g.init]
        rows = ",\n  ".join(", ".join(vals[i:i + 8]) for i in range(0, len(vals), 8))
        return f"{qual} {t.elem.ctype} {g.var.name}[{g.count}] = {{\n  {rows}\n}};\n"

    def function(self, f: Function) -> str:
        """The definition of one device function."""
        body = self._body(f.body, f.mutable)
        params = ", ".join([self._param(p) for p in f.params] + list(self.hidden_params))
        result = "void" if f.result is None else self.ctype(f.result)
        struct = ""
        if isinstance(f.result, StructType):  # several results: an aggregate
            fields = " ".join(f"{self.ctype(t)} r{k};" for k, t in enumerate(f.result.fields))
            struct = f"struct {f.result.name} {{ {fields} }};\n"
        return (f"{struct}{self.function_prefix} {result} {f.name}({params})\n"
                f"{{\n{body}\n}}\n\n")

    def translation_unit(self, kernel: KernelIR, body: str) -> str:  # pragma: no cover
        raise NotImplementedError

    # -- types ----------------------------------------------------------------------------
    def ctype(self, t: Type) -> str:
        if isinstance(t, PointerType):
            return f"{t.elem.ctype}*"
        if isinstance(t, VectorType):
            return f"thork_vec<{t.elem.ctype}, {t.n}>"
        if isinstance(t, StructType):
            return t.name
        return t.ctype

    def param_decl(self, kernel: KernelIR) -> list[str]:
        """Declarations of the kernel's parameters, in order."""
        return [self._param(p) for p in kernel.params]

    def _param(self, p: Param) -> str:
        if isinstance(p.type, PointerType):
            const = "" if p.writes else "const "
            return f"{const}{p.type.elem.ctype}* {p.name}"
        return f"{self.ctype(p.type)} {p.name}"

    # -- statements -----------------------------------------------------------------------
    def _emit(self, text: str, loc: Loc | None) -> None:
        if self.line_directives and loc is not None and loc != self._last_loc:
            self._lines.append(f'#line {loc.line} "{_escape(loc.file)}"')
            self._last_loc = loc
        self._lines.append("  " * self._indent + text)

    def _stmt(self, s: Stmt) -> None:
        if isinstance(s, Let):
            # Only built-ins and pointers are declared const. A const scalar local is one
            # clang's front end tries to evaluate as a constant, recursively through the
            # locals of its initializer and without remembering failures: a min/max chain
            # (a median's sorting network, each value read twice) then takes exponential
            # time: over 10 minutes for a 5x5 median, 0.15 s with plain locals.
            const = "const " if s.var.name not in self._mutable and (
                isinstance(s.value, Special) or isinstance(s.var.type, PointerType)) else ""
            self._emit(f"{const}{self.ctype(s.var.type)} {s.var.name} = {self.expr(s.value)};", s.loc)
        elif isinstance(s, Assign):
            self._emit(f"{s.var.name} = {self.expr(s.value)};", s.loc)
        elif isinstance(s, Store):
            if s.cache:
                ptr = f"({self.expr(s.pointer)} + {self.expr(s.index)})"
                self._emit(f"{self.hinted_store(s.cache, ptr, self.expr(s.value))};", s.loc)
            else:
                self._emit(
                    f"{self.expr(s.pointer)}[{self.expr(s.index)}] = {self.expr(s.value)};",
                    s.loc)
        elif isinstance(s, If):
            self._emit(f"if ({self.expr(s.cond)}) {{", s.loc)
            self._block(s.then)
            if s.orelse:
                self._emit("} else {", None)
                self._block(s.orelse)
            self._emit("}", None)
        elif isinstance(s, Return):
            value = "" if s.value is None else " " + self.expr(s.value)
            self._emit(f"return{value};", s.loc)
        elif isinstance(s, For):
            self._for(s)
        elif isinstance(s, While):
            if s.head:
                self._emit("while (true) {", s.loc)
                self._indent += 1
                for h in s.head:
                    self._stmt(h)
                self._emit(f"if (!({self.expr(s.cond)})) break;", None)
                self._indent -= 1
            else:
                self._emit(f"while ({self.expr(s.cond)}) {{", s.loc)
            self._block(s.body)
            self._emit("}", None)
        elif isinstance(s, Break):
            self._emit("break;", s.loc)
        elif isinstance(s, Continue):
            self._emit("continue;", s.loc)
        elif isinstance(s, VecStore):
            assert isinstance(s.pointer.type, PointerType)
            vt = VectorType(s.pointer.type.elem, len(s.values))
            vals = ", ".join(self.expr(v) for v in s.values)
            ptr = f"({self.expr(s.pointer)} + {self.expr(s.index)})"
            if s.cache:
                value = f"{self.ctype(vt)}{{{{{vals}}}}}"
                self._emit(f"{self.hinted_store(s.cache, f'({self.ctype(vt)}*){ptr}', value)};",
                           s.loc)
            else:
                self._emit(f"*({self.ctype(vt)}*){ptr} = {self.ctype(vt)}{{{{{vals}}}}};",
                           s.loc)
        elif isinstance(s, Eval):
            self._emit(f"{self.expr(s.value)};", s.loc)
        elif isinstance(s, SharedDecl):
            self.shared_decl(s)
        elif isinstance(s, Sync):
            self.sync(s)
        elif isinstance(s, LocalDecl):
            t = s.var.type
            assert isinstance(t, PointerType)
            self._emit(f"{t.elem.ctype} {s.var.name}[{s.count}];", s.loc)
        elif isinstance(s, Print):
            self._emit(self.print_call(c_string(s.fmt), self.print_args(s.args)), s.loc)
        elif isinstance(s, AsyncCopy):
            self._emit(self.async_copy(s), s.loc)
        elif isinstance(s, AsyncGroup):
            self._emit(self.async_group(s), s.loc)
        else:
            self.stmt_extension(s)

    def _for(self, s: For) -> None:
        v, t = s.var.name, self.ctype(s.var.type)
        start, stop, step = self.expr(s.start), self.expr(s.stop), self.expr(s.step)
        if isinstance(s.step, Const):
            cond = f"{v} < {stop}" if s.step.value > 0 else f"{v} > {stop}"
            if s.unroll:
                self._emit(self.unroll_pragma(s.unroll), s.loc)
            self._emit(f"for ({t} {v} = {start}; {cond}; {v} += {step}) {{", s.loc)
            self._block(s.body)
            self._emit("}", None)
            return
        # A run-time step (a grid-stride loop): the direction is known only at run time, so
        # the loop counts its trips (computed once) instead of testing step > 0 ? i < stop
        # : i > stop every iteration, a condition compilers cannot unroll. Zero step: no
        # trips. The index is declared in the enclosing braces; the body's scope is as
        # before.
        n = f"{v}_n"
        self._emit(f"{{ {t} {v} = {start};", s.loc)
        if s.unroll:
            self._emit(self.unroll_pragma(s.unroll), s.loc)
        self._emit(f"for (thork_uwide<{t}>::type {n} = thork_trips<{t}>({v}, {stop}, {step}); "
                   f"{n} != 0u; --{n}, {v} += {step}) {{", s.loc)
        self._block(s.body)
        self._emit("}}", None)

    def unroll_pragma(self, n: int) -> str:
        return f"#pragma unroll {n}"

    # -- target-specific statements (CUDA spellings; the CPU target overrides) ----------
    def shared_decl(self, s: SharedDecl) -> None:
        t = s.var.type
        assert isinstance(t, PointerType)
        if s.dynamic:
            self._emit(f"{t.elem.ctype}* const {s.var.name} = "
                       f"({t.elem.ctype}*)(thork_dynamic_smem + {s.offset});", s.loc)
        else:
            self._emit(f"__shared__ __attribute__((aligned({self.shared_align}))) "
                       f"{t.elem.ctype} {s.var.name}[{s.count}];", s.loc)

    @property
    def shared_align(self) -> int:
        """Alignment in bytes of shared arrays: 1024 in kernels using Hopper operations
        (a 128-byte swizzle pattern repeats every 1024 bytes of address), else 16."""
        kernel = getattr(self, "_kernel", None)
        return 1024 if kernel is not None and kernel.hopper_feature else 16

    def sync(self, s: Sync) -> None:
        text = {
            "syncthreads": "__syncthreads();", "fence_block": "__threadfence_block();",
            "fence": "__threadfence();", "fence_system": "__threadfence_system();",
        }.get(s.kind)
        if s.kind == "syncwarp":
            text = f"__syncwarp({self.expr(s.mask) if s.mask is not None else '0xffffffffu'});"
        if s.kind == "grid":
            text = "thork_grid_sync();"
        if text is None:
            raise TypeError(f"unknown synchronization {s.kind!r}")
        self._emit(text, s.loc)

    def print_args(self, args: tuple[Expr, ...]) -> list[str]:
        """printf arguments for ``args``, converted to what :class:`Print`'s conversions
        read (bool as a string, floats as double, integers at their conversion's width)."""
        out = []
        for a in args:
            t = a.type
            assert isinstance(t, DType)
            text = self.expr(a)
            if t == dt.bool:
                out.append(f'(({text}) ? "True" : "False")')
            elif t.is_float:
                out.append(f"((double)({self.to_float(text, t) if t.is_half else text}))")
            elif t.bits == 64:
                out.append(f"(({'unsigned ' if t.kind == 'u' else ''}long long)({text}))")
            else:
                out.append(f"(({'unsigned ' if t.kind == 'u' else ''}int)({text}))")
        return out

    def print_call(self, fmt: str, args: list[str]) -> str:
        """The statement printing ``fmt`` (a C string literal) with ``args``."""
        return f"printf({', '.join([fmt, *args])});"

    def async_copy(self, s: AsyncCopy) -> str:
        """The statement starting one ``cp.async`` copy (PTX; the CPU target overrides)."""
        dst = f"({self.expr(s.dst)} + {self.expr(s.dst_index)})"
        src = f"({self.expr(s.src)} + {self.expr(s.src_index)})"
        return f"thork_cp_async_{s.nbytes}({dst}, {src}, {self.expr(s.src_bytes)});"

    def async_group(self, s: AsyncGroup) -> str:
        """``cp.async.commit_group`` / ``cp.async.wait_group n``."""
        if s.op == "commit":
            return 'asm volatile("cp.async.commit_group;" ::: "memory");'
        return f'asm volatile("cp.async.wait_group {int(s.n)};" ::: "memory");'

    def stmt_extension(self, s: Stmt) -> None:
        """Hook for statements a subclass adds; the base knows none."""
        raise TypeError(f"{type(self).__name__} cannot render {type(s).__name__}")

    def _block(self, stmts: list[Stmt]) -> None:
        self._indent += 1
        for s in stmts:
            self._stmt(s)
        self._indent -= 1

    # -- expressions ----------------------------------------------------------------------
    def expr(self, e: Expr) -> str:
        if isinstance(e, Var):
            return e.name
        if isinstance(e, Const):
            return self.const(e.value, e.type)  # type: ignore[arg-type]
        if isinstance(e, Special):
            return e.name
        if isinstance(e, Load):
            if e.cache:
                return self.hinted_load(e.cache,
                                        f"({self.expr(e.pointer)} + {self.expr(e.index)})")
            return f"{self.expr(e.pointer)}[{self.expr(e.index)}]"
        if isinstance(e, Cast):
            return self.cast(self.expr(e.operand), e.operand.type, e.type)  # type: ignore[arg-type]
        if isinstance(e, Binary):
            return self.binary(e)
        if isinstance(e, Unary):
            t = e.type
            assert isinstance(t, DType)
            if t.is_half:
                return self.from_float(f"(-{self.to_float(self.expr(e.operand), t)})", t)
            if e.op == "neg" and t.is_int:
                # -MIN wraps to MIN (unsigned negation), never signed overflow.
                u = "unsigned long long" if t.bits > 32 else "unsigned int"
                return f"(({t.ctype})(0u - ({u})({self.expr(e.operand)})))"
            return f"({_UNARY_C[e.op]}({self.expr(e.operand)}))"
        if isinstance(e, Select):
            return f"({self.expr(e.cond)} ? {self.expr(e.if_true)} : {self.expr(e.if_false)})"
        if isinstance(e, Call):
            return self.call(e)
        if isinstance(e, Field):
            if isinstance(e.vector.type, StructType):
                return f"{self.expr(e.vector)}.r{e.lane}"
            return f"{self.expr(e.vector)}.v[{e.lane}]"
        if isinstance(e, Pack):
            return f"{self.ctype(e.type)}{{{', '.join(self.expr(a) for a in e.items)}}}"
        if isinstance(e, VecLoad):
            ptr = f"({self.expr(e.pointer)} + {self.expr(e.index)})"
            if e.cache:
                return self.hinted_load(e.cache, f"(const {self.ctype(e.type)}*){ptr}")
            return f"*(const {self.ctype(e.type)}*){ptr}"
        if isinstance(e, CallFunc):
            args = [self.expr(a) for a in e.args] + list(self.hidden_args)
            return f"{e.name}({', '.join(args)})"
        if isinstance(e, Offset):
            return f"({self.expr(e.pointer)} + {self.expr(e.offset)})"
        if isinstance(e, Atomic):
            return self.atomic(e)
        if isinstance(e, Warp):
            return self.warp(e)
        if isinstance(e, BlockReduce):
            return self.block_reduce(e)
        if isinstance(e, Hopper):
            return self.hopper(e)
        raise TypeError(f"{type(self).__name__} cannot render {type(e).__name__}")

    #: Leading arguments of every Hopper helper call (the CPU model passes its block).
    hopper_context: tuple[str, ...] = ()

    def hinted_load(self, cache: str, ptr: str) -> str:
        """``*ptr`` with the PTX cache operator ``cache`` (``"cs"``...). Targets without
        such caches (the CPU) load plainly: a hint never changes a value."""
        return f"(*{ptr})"

    def hinted_store(self, cache: str, ptr: str, value: str) -> str:
        """``*ptr = value`` with the PTX cache operator ``cache``; plain here."""
        return f"*{ptr} = {value}"

    def hopper(self, e: Hopper) -> str:
        """A call of the helper implementing a Hopper operation (docs/language-wgmma.md);
        wgmma's accumulators travel as one ``thork_vec``."""
        args = [self.expr(a) for a in e.args]
        if e.op.startswith("wgmma.m64n"):
            acc = f"thork_vec<float, {len(args) - 3}>{{{{{', '.join(args[3:])}}}}}"
            args = [*args[:3], acc]
        return f"{self.hopper_helper(e.op)}({', '.join([*self.hopper_context, *args])})"

    def hopper_helper(self, op: str) -> str:
        """The name of the helper implementing Hopper operation ``op``."""
        return helper_name(op)

    def binary(self, e: Binary) -> str:
        operand_t = e.lhs.type
        assert isinstance(operand_t, DType)
        op = _BINARY_C[e.op]
        lhs, rhs = self.expr(e.lhs), self.expr(e.rhs)
        if operand_t.is_half:
            # Half types are storage only: compute in float, round back (CUDA's __half does).
            text = f"({self.to_float(lhs, operand_t)} {op} {self.to_float(rhs, operand_t)})"
            return text if e.op in _COMPARISONS else self.from_float(text, operand_t)
        if operand_t.is_int:
            defined = self.int_binary(e.op, operand_t, lhs, rhs)
            if defined is not None:
                return defined
        if e.op in ("shl", "shr") and isinstance(e.type, DType) and e.type.bits < 32:
            # Shifting promotes to int in C++; narrower shift results cast back explicitly.
            return f"(({e.type.ctype})({lhs} {op} {rhs}))"
        return f"({lhs} {op} {rhs})"

    def int_binary(self, op: str, t: DType, lhs: str, rhs: str) -> str | None:
        """Integer ``op`` with the defined results of docs/guarantees.md, or None where
        plain C++ already defines every input. ``+ - * <<`` wrap: computed in the unsigned
        type of at least 32 bits (C++ promotes narrower types to ``int``, where
        ``uint16 * uint16`` can overflow) and cast back, so no signed overflow exists
        for the optimizer to assume away (a user's overflow guard stays)."""
        if op in ("floordiv", "mod"):
            fn = "thork_idiv" if op == "floordiv" else "thork_imod"
            return f"{fn}<{t.ctype}>({lhs}, {rhs})"
        if op in ("shl", "shr"):  # any count defined (thork_shl/shr)
            if t.bits >= 32:
                return f"thork_{op}<{t.ctype}>({lhs}, {rhs})"
            # Narrower types shift as int (C++ promotion), the result cast back.
            return f"(({t.ctype})thork_{op}<int>((int)({lhs}), {rhs}))"
        if op in ("add", "sub", "mul", "shl"):
            u = "unsigned long long" if t.bits > 32 else "unsigned int"
            return f"(({t.ctype})(({u})({lhs}) {_BINARY_C[op]} ({u})({rhs})))"
        return None

    def atomic(self, e: Atomic) -> str:
        """CUDA ``atomicAdd`` & co.; 64-bit signed integers go through the unsigned
        overloads (two's complement), float ops without an instruction through CAS."""
        t = e.type
        assert isinstance(t, DType)
        addr = f"&{self.expr(e.pointer)}[{self.expr(e.index)}]"
        args = [self.expr(a) for a in e.args]
        op = e.op
        if t.is_float:
            bits = "unsigned int" if t == dt.float32 else "unsigned long long"
            to_u = "thork_f2u" if t == dt.float32 else "thork_d2u"
            from_u = "thork_u2f" if t == dt.float32 else "thork_u2d"
            if op == "add":
                return f"atomicAdd({addr}, {args[0]})"
            if op == "sub":
                return f"atomicAdd({addr}, -({args[0]}))"
            if op in ("min", "max"):
                return f"thork_atomic_{op}({addr}, {args[0]})"
            if op == "exch" and t == dt.float32:
                return f"atomicExch({addr}, {args[0]})"
            if op == "exch":
                return f"{from_u}(atomicExch(({bits}*){addr}, {to_u}({args[0]})))"
            if op == "cas":
                return (f"{from_u}(atomicCAS(({bits}*){addr}, {to_u}({args[0]}), "
                        f"{to_u}({args[1]})))")
            raise TypeError(f"atomic {op} is not defined for {t.name}")
        fn = {"add": "atomicAdd", "sub": "atomicSub", "min": "atomicMin", "max": "atomicMax",
              "exch": "atomicExch", "cas": "atomicCAS", "and": "atomicAnd", "or": "atomicOr",
              "xor": "atomicXor", "inc": "atomicInc", "dec": "atomicDec"}[op]
        if t.bits == 64 and (op not in ("min", "max") or t == dt.uint64):
            # CUDA's 64-bit overloads are unsigned (min/max also have signed ones).
            if op == "sub":
                fn, args = "atomicAdd", [f"(0ull - (unsigned long long)({args[0]}))"]
            u = "unsigned long long"
            call = f"{fn}(({u}*){addr}, {', '.join(f'({u})({a})' for a in args)})"
            return call if t == dt.uint64 else f"((long long){call})"
        return f"{fn}({addr}, {', '.join(args)})"

    def mulhi(self, a: str, b: str, t: DType) -> str:
        """The high half of the full product of two uint32 or uint64 values."""
        if t.bits == 64:
            return f"__umul64hi({a}, {b})"
        return f"__umulhi({a}, {b})"

    def warp(self, e: Warp) -> str:
        """CUDA ``__shfl_*_sync``/``__ballot_sync``...; small types travel as int."""
        if e.op == "activemask":
            return "__activemask()"
        args = [self.expr(a) for a in e.args]
        if e.op in MMA_OPS:
            return f"thork_mma_{e.op.rsplit('.', 1)[1]}({', '.join(args)})"
        if e.op in LDMATRIX_OPS:
            return f"thork_{e.op.replace('.', '_')}({args[0]})"
        if e.op in ("ballot", "any", "all"):
            call = f"__{e.op}_sync({args[0]}, {args[1]})"
            return call if e.op == "ballot" else f"({call} != 0)"
        t = e.type
        assert isinstance(t, DType)
        fn = {"shfl_idx": "__shfl_sync", "shfl_up": "__shfl_up_sync",
              "shfl_down": "__shfl_down_sync", "shfl_xor": "__shfl_xor_sync"}[e.op]
        mask, value, lane, width = args
        if t.is_half:
            return (f"{t.ctype}{{(unsigned short){fn}({mask}, (int)({value}).bits, {lane}, "
                    f"{width})}}")
        if t.bits < 32:
            return f"(({t.ctype}){fn}({mask}, (int)({value}), {lane}, {width}))"
        return f"{fn}({mask}, {value}, {lane}, {width})"

    def block_reduce(self, e: BlockReduce) -> str:
        call = f"__syncthreads_{e.op}({self.expr(e.pred)})"
        return call if e.op == "count" else f"({call} != 0)"

    #: Spelling of float32 math functions; the float64 name drops the ``f`` suffix.
    #: Host C++ uses the GCC/Clang builtins so that no header is needed.
    math_prefix = ""

    def call(self, e: Call) -> str:
        """Render a math intrinsic. float16/bfloat16 compute in float32 and round back."""
        t = e.type
        assert isinstance(t, DType)
        if e.func == "mulhi":
            return self.mulhi(self.expr(e.args[0]), self.expr(e.args[1]), t)
        if e.func == "bf16_rn":  # tk.cast(x, bfloat16, nan="canonical"); x is float32
            return f"thork_f2b_rn({self.expr(e.args[0])})"
        arg_t = e.args[0].type if e.args else t
        assert isinstance(arg_t, DType)
        args = [self.expr(a) for a in e.args]
        if arg_t.is_half:
            args = [self.to_float(a, arg_t) for a in args]
            text = self._math(e.func, dt.float32, args)
            return text if t == dt.bool else self.from_float(text, arg_t)
        return self._math(e.func, arg_t, args)

    def _math(self, func: str, t: DType, args: list[str]) -> str:
        a = args[0] if args else ""
        if func == "min":
            return f"(({args[1]}) < ({a}) ? ({args[1]}) : ({a}))"
        if func == "max":
            return f"(({a}) < ({args[1]}) ? ({args[1]}) : ({a}))"
        if func == "isnan":
            return f"(({a}) != ({a}))"
        if func == "isfinite":
            if not t.is_float:
                return "true"
            return f"(!{self._math('isinf', t, [a])} && !{self._math('isnan', t, [a])})"
        if not t.is_float:
            if func == "abs":
                return f"(({a}) < 0 ? -({a}) : ({a}))" if t.is_signed else a
            raise TypeError(f"{func} is not defined for {t.name}")
        if func == "isinf":
            inf = "thork_u2f(0x7f800000u)" if t == dt.float32 else "thork_u2d(0x7ff0000000000000ull)"
            return f"({self._math('abs', t, [a])} == {inf})"
        if func == "signbit":
            bits = f"(thork_f2u({a}) >> 31)" if t == dt.float32 else f"(thork_d2u({a}) >> 63)"
            return f"({bits} != 0)"
        if func.startswith("fast_"):  # tk.fast: a helper of the target's (float32 only)
            self._fast.add(func)
            return f"thork_{func}({', '.join(args)})"
        if func == "rsqrt" and not self.has_rsqrt:
            one = "1.0f" if t == dt.float32 else "1.0"
            return f"({one} / {self._math('sqrt', t, [a])})"
        name = _MATH_NAMES[func]
        suffix = "f" if t == dt.float32 else ""
        return f"{self.math_prefix}{name}{suffix}({', '.join(args)})"

    #: Whether the target has a native reciprocal square root (CUDA does).
    has_rsqrt = False

    def to_float(self, text: str, t: DType) -> str:
        return f"thork_h2f({text})" if t == dt.float16 else f"thork_b2f({text})"

    def from_float(self, text: str, t: DType) -> str:
        return f"thork_f2h({text})" if t == dt.float16 else f"thork_f2b({text})"

    def cast(self, text: str, src: DType, dst: DType) -> str:
        if src == dst:
            return text
        if src.is_half:
            text, src = self.to_float(text, src), dt.float32
            if dst == dt.float32:
                return text
        if dst.is_half:
            if src == dt.float32:
                inner = text
            elif src == dt.int64:
                inner = f"thork_d2f_odd(thork_i64_odd({text}))"
            elif src == dt.uint64:
                inner = f"thork_d2f_odd(thork_u64_odd({text}))"
            else:  # float64, and 32-bit or narrower integers (exact in a double)
                inner = f"thork_d2f_odd((double)({text}))"
            return self.from_float(inner, dst)
        return f"(({dst.ctype})({text}))"

    def const(self, value: object, t: DType) -> str:
        if t == dt.bool:
            return "true" if value else "false"
        if t.is_float:
            v = float(value)  # type: ignore[arg-type]
            if t == dt.float64:
                if math.isfinite(v):
                    text = repr(v) if ("." in repr(v) or "e" in repr(v)) else repr(v) + ".0"
                    return f"({text})" if text.startswith("-") else text
                bits = struct.unpack("<Q", struct.pack("<d", v))[0]
                return f"thork_u2d({bits}ull)"
            f32 = struct.unpack("<f", struct.pack("<f", v))[0] if math.isfinite(v) else v
            if math.isfinite(f32):
                text = repr(f32)
                if "." not in text and "e" not in text:
                    text += ".0"
                text += "f"
                if text.startswith("-"):
                    text = f"({text})"
            else:
                bits = struct.unpack("<I", struct.pack("<f", f32))[0]
                text = f"thork_u2f({bits}u)"
            return text if t == dt.float32 else self.from_float(text, t)
        iv = int(value)  # type: ignore[call-overload]
        suffix = {"int32": "", "int64": "LL", "uint32": "u", "uint64": "ull"}.get(t.name)
        if suffix is None:
            return f"(({t.ctype}){iv})"
        if t == dt.int64 and iv == -(2**63):
            return "(-9223372036854775807LL - 1LL)"
        if t == dt.int32 and iv == -(2**31):
            return "(-2147483647 - 1)"
        return f"{iv}{suffix}" if iv >= 0 else f"({iv}{suffix})"


class CudaRenderer(Renderer):
    """CUDA C++ for NVRTC, nvcc and clang: one ``extern "C" __global__`` function."""

    language = "CUDA C++"
    has_rsqrt = True

    def prelude(self) -> str:
        # The hardware float16 conversions must follow the struct definition.
        common = HALF_CONVERSIONS.replace(
            "#ifndef THORK_HW_HALF", _CUDA_HW_HALF + "#ifndef THORK_HW_HALF", 1
        )
        return (_CUDA_PRELUDE % {"version": CODEGEN_VERSION} + common + INT_ARITHMETIC
                + _CUDA_ATOMICS)

    def translation_unit(self, kernel: KernelIR, body: str) -> str:
        return self._head() + self._code(kernel, body)

    def _head(self) -> str:
        dyn = (f"extern __shared__ __attribute__((aligned({self.shared_align}))) unsigned char "
               "thork_dynamic_smem[];\n")
        # -- debug mode (h-debug): the error record and thork_at, for instrumented IR only
        if getattr(self, "_kernel", None) is not None and self._kernel.debug_sites is not None:
            dyn += CUDA_DEBUG_PRELUDE
        # -- end debug mode
        mma = (_cuda_mma_helpers() if uses_mma(self._kernel) else "") \
            + cuda_hopper_helpers(self._kernel)
        if self._kernel is not None and (self._kernel.launch_bounds
                                         or self._kernel.cluster_dims):
            mma += _LAUNCH_BOUNDS  # clang's -nocudainc headers lack the macros
        policies = sorted({split_hint(op)[1] for _, op in self._cache_ops} - {""})
        mma += "".join(_policy_helper(p) for p in policies)
        mma += "".join(_cache_helper(kind, op) for kind, op in sorted(self._cache_ops))
        mma += fast_math_helpers(CUDA_FAST_MATH, self._fast)
        return f"{self.prelude()}{mma}{dyn}\n"

    def _code(self, kernel: KernelIR, body: str) -> str:
        params = ", ".join(self.param_decl(kernel))
        bounds, cluster = kernel.launch_bounds, kernel.cluster_dims
        lb = f"__launch_bounds__({bounds[0]}, {bounds[1]}) " if bounds else ""
        if cluster:
            lb = f"__cluster_dims__({cluster[0]}, {cluster[1]}, {cluster[2]}) {lb}"
        return (f"{self.functions_text}"
                f'extern "C" __global__ void {lb}{kernel.name}({params})\n'
                f"{{\n{body}\n}}\n")

    def hinted_load(self, cache: str, ptr: str) -> str:
        self._cache_ops.add(("ld", cache))
        return f"thork_ld_{_hint_name(cache)}({ptr})"

    def hinted_store(self, cache: str, ptr: str, value: str) -> str:
        self._cache_ops.add(("st", cache))
        return f"thork_st_{_hint_name(cache)}({ptr}, {value})"

    def listing(self, kernel: KernelIR) -> str:
        """The translation unit for reading: the kernel (after its device functions)
        first, then, under :data:`PRELUDE_MARK`, the prelude that compilers see before
        it. :meth:`render` is the text compilers receive."""
        self._kernel = kernel
        self._cache_ops = set()
        self._fast = set()
        self.functions_text = self._definitions(kernel)
        body = self._body(kernel.body, kernel.mutable)
        return f"{self._code(kernel, body)}\n{PRELUDE_MARK}\n{self._head()}"


def _hint_name(hint: str) -> str:
    """The helper-name suffix of a hint (:func:`join_hint`): ``cs``, ``L2first``,
    ``cs_L2last``."""
    cache, evict = split_hint(hint)
    return "_".join(part for part in (cache, evict and f"L2{evict}") if part)


def _policy_helper(evict: str) -> str:
    """``thork_l2_policy_<evict>()``: the 64-bit L2 cache policy giving every line an access
    allocates the eviction priority ``evict`` (``createpolicy.fractional``, fraction 1.0;
    sm_80). Not volatile: the compiler computes it once and hoists it out of loops."""
    return (f"THORK_FN unsigned long long thork_l2_policy_{evict}() {{\n"
            "  unsigned long long p;\n"
            f'  asm("createpolicy.fractional.L2::evict_{evict}.b64 %0, 1.0;" : "=l"(p));\n'
            "  return p;\n}\n")


def _cache_helper(kind: str, hint: str) -> str:
    """``thork_ld_<name>(p)`` / ``thork_st_<name>(p, v)``: one global access of a 1, 2, 4, 8
    or 16-byte ``T`` with the PTX cache operator and the L2 eviction priority of ``hint``
    (:func:`join_hint`: ``ld.global.cs.v4.u32``, ``ld.global.L2::cache_hint.v4.u32`` with
    the policy of :func:`_policy_helper`...), its bits moved through a union (``asm
    volatile`` with a memory clobber: the compiler never moves it past other accesses)."""
    op, evict = split_hint(hint)
    quals = "".join(f".{q}" for q in (op, evict and "L2::cache_hint") if q)
    name = _hint_name(hint)
    forms = ((16, "v4.u32", "{%s, %s, %s, %s}", ("r.u[0]", "r.u[1]", "r.u[2]", "r.u[3]"), "r"),
             (8, "v2.u32", "{%s, %s}", ("r.u[0]", "r.u[1]"), "r"),
             (4, "u32", "%s", ("r.u[0]",), "r"),
             (2, "u16", "%s", ("r.h",), "h"),
             (1, "u8", "%s", ("r.h",), "h"))
    lines = []
    for size, ptx, regs, fields, con in forms:
        n = len(fields)
        if kind == "ld":
            ops = regs % tuple(f"%{k}" for k in range(n))
            outs = ", ".join(f'"={con}"({f})' for f in fields)
            pol, pin = (f", %{n + 1}", ', "l"(pol)') if evict else ("", "")
            asm = (f'asm volatile("ld.global{quals}.{ptx} {ops}, [%{n}]{pol};" : {outs} : '
                   f'"l"(p){pin} : "memory");')
        else:
            ops = regs % tuple(f"%{k + 1}" for k in range(n))
            ins = ", ".join(f'"{con}"({f})' for f in fields)
            pol, pin = (f", %{n + 1}", ', "l"(pol)') if evict else ("", "")
            asm = (f'asm volatile("st.global{quals}.{ptx} [%0], {ops}{pol};" : : "l"(p), '
                   f'{ins}{pin} : "memory");')
        cond = f"if (sizeof(T) == {size}) " if size > 1 else ""
        lines.append(f"  {'else ' if size < 16 else ''}{cond}{asm}")
    body = "\n".join(lines)
    get = f"  const unsigned long long pol = thork_l2_policy_{evict}();\n" if evict else ""
    if kind == "ld":
        return (f"template <class T> THORK_FN T thork_ld_{name}(const T* p) {{\n"
                f"{get}  union {{ T t; unsigned int u[4]; unsigned short h; }} r;\n"
                f"{body}\n  return r.t;\n}}\n")
    return (f"template <class T> THORK_FN void thork_st_{name}(T* p, T v) {{\n"
            f"{get}  union {{ T t; unsigned int u[4]; unsigned short h; }} r;\n"
            f"  r.t = v;\n{body}\n}}\n")


#: The line separating the code from the prelude in :meth:`CudaRenderer.listing`.
PRELUDE_MARK = ("// ---- Thork's prelude: compiled *before* the code above (the order "
                "render() gives compilers) ----")


def c_string(text: str) -> str:
    """``text`` as a C string literal (UTF-8; non-printable bytes as octal escapes)."""
    out = []
    for byte in text.encode("utf-8"):
        c = chr(byte)
        if c in "\\\"":
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif 32 <= byte < 127 and c != "?":  # '?' could start a trigraph
            out.append(c)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def _escape(path: str) -> str:
    return path.replace("\\", "\\\\").replace('"', '\\"')
