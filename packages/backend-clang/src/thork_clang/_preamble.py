"""What clang needs in front of Thork's CUDA source when it compiles without CUDA headers.

With ``-nocudainc`` clang knows CUDA's attributes but not the CUDA runtime's device API:
``threadIdx`` & co., the math library, atomics, warp shuffles and votes, barriers. This
preamble defines exactly what core's CUDA renderer emits, on top of clang's NVPTX
builtins (``__nvvm_*``) and libdevice (``__nv_*``, linked as bitcode) so the numerics are
the ones nvcc and NVRTC produce. Everything is ``static inline``: unused parts cost nothing.

It comes first in the translation unit, before the generated prelude defines
``__device__``, so it spells attributes out. A ``#line 1`` at its end keeps the generated
text's own line numbers in diagnostics.
"""

from __future__ import annotations

__all__ = ["PREAMBLE", "MATH_FUNCTIONS", "preamble"]

#: Math functions of the CUDA renderer; float takes an ``f`` suffix, double none.
#: (name, arity)
MATH_FUNCTIONS: tuple[tuple[str, int], ...] = (
    ("sqrt", 1), ("rsqrt", 1), ("exp", 1), ("exp2", 1), ("log", 1), ("log2", 1),
    ("log10", 1), ("sin", 1), ("cos", 1), ("tan", 1), ("tanh", 1), ("pow", 2), ("fma", 3),
    ("floor", 1), ("ceil", 1), ("round", 1), ("rint", 1), ("trunc", 1), ("fabs", 1),
    ("copysign", 2), ("atan2", 2), ("fmod", 2), ("erf", 1), ("expm1", 1), ("log1p", 1),
    ("asin", 1), ("acos", 1), ("atan", 1), ("sinh", 1), ("cosh", 1), ("cbrt", 1),
    ("hypot", 2), ("fmin", 2), ("fmax", 2), ("exp10", 1), ("erfc", 1), ("asinh", 1),
    ("acosh", 1), ("atanh", 1), ("lgamma", 1), ("tgamma", 1), ("remainder", 2),
)

_HEAD = r"""// --- Thork clang preamble: CUDA device API on NVVM builtins and libdevice ---------------
#define THORK_CL static __attribute__((device)) inline
struct thork_sreg3 { unsigned int x, y, z; };
THORK_CL thork_sreg3 thork_tid() { return {(unsigned int)__nvvm_read_ptx_sreg_tid_x(), (unsigned int)__nvvm_read_ptx_sreg_tid_y(), (unsigned int)__nvvm_read_ptx_sreg_tid_z()}; }
THORK_CL thork_sreg3 thork_ctaid() { return {(unsigned int)__nvvm_read_ptx_sreg_ctaid_x(), (unsigned int)__nvvm_read_ptx_sreg_ctaid_y(), (unsigned int)__nvvm_read_ptx_sreg_ctaid_z()}; }
THORK_CL thork_sreg3 thork_ntid() { return {(unsigned int)__nvvm_read_ptx_sreg_ntid_x(), (unsigned int)__nvvm_read_ptx_sreg_ntid_y(), (unsigned int)__nvvm_read_ptx_sreg_ntid_z()}; }
THORK_CL thork_sreg3 thork_nctaid() { return {(unsigned int)__nvvm_read_ptx_sreg_nctaid_x(), (unsigned int)__nvvm_read_ptx_sreg_nctaid_y(), (unsigned int)__nvvm_read_ptx_sreg_nctaid_z()}; }
#define threadIdx (thork_tid())
#define blockIdx (thork_ctaid())
#define blockDim (thork_ntid())
#define gridDim (thork_nctaid())
#define warpSize 32

// Bit casts used below (CUDA's __int_as_float & co., renamed to stay out of its way).
THORK_CL float __int_as_float_thork(int i) { float f; asm("mov.b32 %0, %1;" : "=f"(f) : "r"(i)); return f; }
THORK_CL int __float_as_int_thork(float f) { int i; asm("mov.b32 %0, %1;" : "=r"(i) : "f"(f)); return i; }
THORK_CL double __longlong_as_double_thork(long long i) { double d; asm("mov.b64 %0, %1;" : "=d"(d) : "l"(i)); return d; }
THORK_CL long long __double_as_longlong_thork(double d) { long long i; asm("mov.b64 %0, %1;" : "=l"(i) : "d"(d)); return i; }

// Barriers and fences.
THORK_CL void __syncwarp(unsigned int mask = 0xffffffffu) { __nvvm_bar_warp_sync(mask); }
THORK_CL int __syncthreads_count(int p) { return __nvvm_bar0_popc(p); }
THORK_CL int __syncthreads_and(int p) { return __nvvm_bar0_and(p); }
THORK_CL int __syncthreads_or(int p) { return __nvvm_bar0_or(p); }
THORK_CL void __threadfence_block() { __nvvm_membar_cta(); }
THORK_CL void __threadfence() { __nvvm_membar_gl(); }
THORK_CL void __threadfence_system() { __nvvm_membar_sys(); }

// Atomics: CUDA's overload set; unsigned forms share the signed instructions.
#define THORK_ATOM(NAME, OP, T, S, SFX) \
  THORK_CL T NAME(T* p, T v) { return (T)__nvvm_atom_##OP##_gen_##SFX((S*)p, (S)v); }
THORK_ATOM(atomicAdd, add, int, int, i)
THORK_ATOM(atomicAdd, add, unsigned int, int, i)
THORK_ATOM(atomicAdd, add, unsigned long long, long long, ll)
THORK_CL float atomicAdd(float* p, float v) { return __nvvm_atom_add_gen_f(p, v); }
THORK_CL double atomicAdd(double* p, double v) { return __nvvm_atom_add_gen_d(p, v); }
THORK_CL int atomicSub(int* p, int v) { return __nvvm_atom_add_gen_i(p, -v); }
THORK_CL unsigned int atomicSub(unsigned int* p, unsigned int v) { return (unsigned int)__nvvm_atom_add_gen_i((int*)p, (int)(0u - v)); }
THORK_ATOM(atomicMin, min, int, int, i)
THORK_ATOM(atomicMin, min, unsigned int, unsigned int, ui)
THORK_ATOM(atomicMin, min, long long, long long, ll)
THORK_ATOM(atomicMin, min, unsigned long long, unsigned long long, ull)
THORK_ATOM(atomicMax, max, int, int, i)
THORK_ATOM(atomicMax, max, unsigned int, unsigned int, ui)
THORK_ATOM(atomicMax, max, long long, long long, ll)
THORK_ATOM(atomicMax, max, unsigned long long, unsigned long long, ull)
THORK_ATOM(atomicExch, xchg, int, int, i)
THORK_ATOM(atomicExch, xchg, unsigned int, int, i)
THORK_ATOM(atomicExch, xchg, unsigned long long, long long, ll)
THORK_CL float atomicExch(float* p, float v) { return __int_as_float_thork(__nvvm_atom_xchg_gen_i((int*)p, __float_as_int_thork(v))); }
THORK_ATOM(atomicAnd, and, int, int, i)
THORK_ATOM(atomicAnd, and, unsigned int, int, i)
THORK_ATOM(atomicAnd, and, unsigned long long, long long, ll)
THORK_ATOM(atomicOr, or, int, int, i)
THORK_ATOM(atomicOr, or, unsigned int, int, i)
THORK_ATOM(atomicOr, or, unsigned long long, long long, ll)
THORK_ATOM(atomicXor, xor, int, int, i)
THORK_ATOM(atomicXor, xor, unsigned int, int, i)
THORK_ATOM(atomicXor, xor, unsigned long long, long long, ll)
#undef THORK_ATOM
THORK_CL int atomicCAS(int* p, int c, int v) { return __nvvm_atom_cas_gen_i(p, c, v); }
THORK_CL unsigned int atomicCAS(unsigned int* p, unsigned int c, unsigned int v) { return (unsigned int)__nvvm_atom_cas_gen_i((int*)p, (int)c, (int)v); }
THORK_CL unsigned long long atomicCAS(unsigned long long* p, unsigned long long c, unsigned long long v) { return (unsigned long long)__nvvm_atom_cas_gen_ll((long long*)p, (long long)c, (long long)v); }

// Warp votes and shuffles (64-bit values travel as two 32-bit halves, as in CUDA).
THORK_CL unsigned int __activemask() { unsigned int m; asm volatile("activemask.b32 %0;" : "=r"(m)); return m; }
THORK_CL unsigned int __ballot_sync(unsigned int mask, int p) { return __nvvm_vote_ballot_sync(mask, p); }
THORK_CL int __any_sync(unsigned int mask, int p) { return __nvvm_vote_any_sync(mask, p); }
THORK_CL int __all_sync(unsigned int mask, int p) { return __nvvm_vote_all_sync(mask, p); }
#define THORK_SHFL(NAME, KIND, CLAMP) \
  THORK_CL int NAME(unsigned int m, int v, int l, int w = 32) { return __nvvm_shfl_sync_##KIND##_i32(m, v, l, CLAMP); } \
  THORK_CL unsigned int NAME(unsigned int m, unsigned int v, int l, int w = 32) { return (unsigned int)__nvvm_shfl_sync_##KIND##_i32(m, (int)v, l, CLAMP); } \
  THORK_CL float NAME(unsigned int m, float v, int l, int w = 32) { return __nvvm_shfl_sync_##KIND##_f32(m, v, l, CLAMP); } \
  THORK_CL long long NAME(unsigned int m, long long v, int l, int w = 32) { \
    int lo = __nvvm_shfl_sync_##KIND##_i32(m, (int)(unsigned int)v, l, CLAMP); \
    int hi = __nvvm_shfl_sync_##KIND##_i32(m, (int)((unsigned long long)v >> 32), l, CLAMP); \
    return (long long)(((unsigned long long)(unsigned int)hi << 32) | (unsigned int)lo); } \
  THORK_CL unsigned long long NAME(unsigned int m, unsigned long long v, int l, int w = 32) { return (unsigned long long)NAME(m, (long long)v, l, w); } \
  THORK_CL double NAME(unsigned int m, double v, int l, int w = 32) { return __longlong_as_double_thork(NAME(m, __double_as_longlong_thork(v), l, w)); }
THORK_SHFL(__shfl_sync, idx, ((32 - w) << 8) | 0x1f)
THORK_SHFL(__shfl_down_sync, down, ((32 - w) << 8) | 0x1f)
THORK_SHFL(__shfl_xor_sync, bfly, ((32 - w) << 8) | 0x1f)
THORK_SHFL(__shfl_up_sync, up, (32 - w) << 8)
#undef THORK_SHFL
"""


def _math() -> str:
    """Declarations of the libdevice functions and CUDA-named wrappers around them."""
    lines = ["// Math: CUDA's names on libdevice's implementations."]
    for name, arity in MATH_FUNCTIONS:
        if name == "sqrt":
            # Correctly rounded, as NVRTC and nvcc give by default (-prec-sqrt=true);
            # libdevice picks sqrt.approx unless told otherwise through NVVM reflection.
            lines.append('THORK_CL float sqrtf(float a) { float r; '
                         'asm("sqrt.rn.f32 %0, %1;" : "=f"(r) : "f"(a)); return r; }')
            lines.append('THORK_CL double sqrt(double a) { double r; '
                         'asm("sqrt.rn.f64 %0, %1;" : "=d"(r) : "d"(a)); return r; }')
            continue
        if name == "rint":
            # Round half to even with the PTX instruction itself: some clang builds lower
            # libdevice's rint to a half-away-from-zero sequence (seen with Ubuntu's
            # clang 16 on the lent H200), which breaks rint and saturating casts.
            lines.append('THORK_CL float rintf(float a) { float r; '
                         'asm("cvt.rni.f32.f32 %0, %1;" : "=f"(r) : "f"(a)); return r; }')
            lines.append('THORK_CL double rint(double a) { double r; '
                         'asm("cvt.rni.f64.f64 %0, %1;" : "=d"(r) : "d"(a)); return r; }')
            continue
        for ctype, suffix in (("float", "f"), ("double", "")):
            params = ", ".join(f"{ctype} a{i}" for i in range(arity))
            names = ", ".join(f"a{i}" for i in range(arity))
            lines.append(f'extern "C" __attribute__((device)) {ctype} __nv_{name}{suffix}'
                         f"({', '.join([ctype] * arity)});")
            lines.append(f"THORK_CL {ctype} {name}{suffix}({params}) "
                         f"{{ return __nv_{name}{suffix}({names}); }}")
    return "\n".join(lines) + "\n"


def preamble(filename: str) -> str:
    """The preamble, ending with a ``#line`` that restarts numbering in ``filename``."""
    return PREAMBLE + f'#line 1 "{filename}"\n'


PREAMBLE = _HEAD + _math()
