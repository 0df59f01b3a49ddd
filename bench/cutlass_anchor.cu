// An outside anchor for bench_mma: CUTLASS 2.x's own warp-level (mma.sync, Sm80) GEMM
// kernels, compiled for sm_90, on the problems bench_mma times (n x n x n, fp16 / bf16
// inputs, float32 accumulation and output, row-major a, b and c). It answers "what does a
// best-known CUDA C++ mma.sync GEMM reach on this GPU": the ceiling the Thork GEMM is
// measured against is the bare instruction's, with no operand traffic at all.
//
// Not part of Thork: it needs CUTLASS's headers (not shipped here). Build (no GPU needed):
//   nvcc -O3 -std=c++17 -arch=sm_90 -I$CUTLASS/include --cudart static \
//        bench/cutlass_anchor.cu -o cutlass_anchor
//   ./cutlass_anchor            # prints one line per (dtype, n, tile): TFLOP/s, check
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <random>
#include <algorithm>

#include "cutlass/cutlass.h"
#include "cutlass/numeric_types.h"
#include "cutlass/gemm/device/gemm.h"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/gemm/threadblock/threadblock_swizzle.h"

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
  std::exit(1); } } while (0)

// Inputs: a fixed hash of the index mapped to [-1, 1) (no zeros-only data).
template <class T>
__global__ void fill(T* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = T(float(h & 0xffff) / 32768.0f - 1.0f);
  }
}

template <class Elt, int BM, int BN, int BK, int WM, int WN, int STAGES>
struct Config {
  using Gemm = cutlass::gemm::device::Gemm<
      Elt, cutlass::layout::RowMajor, Elt, cutlass::layout::RowMajor,
      float, cutlass::layout::RowMajor, float, cutlass::arch::OpClassTensorOp,
      cutlass::arch::Sm80, cutlass::gemm::GemmShape<BM, BN, BK>,
      cutlass::gemm::GemmShape<WM, WN, BK>, cutlass::gemm::GemmShape<16, 8, 16>,
      cutlass::epilogue::thread::LinearCombination<float, 4, float, float>,
      cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<8>, STAGES>;
};

template <class Gemm, class Elt>
void run(const char* dtype, const char* tile, int n) {
  size_t nn = (size_t)n * n;
  Elt *a, *b;
  float* c;
  CHECK(cudaMalloc(&a, nn * sizeof(Elt)));
  CHECK(cudaMalloc(&b, nn * sizeof(Elt)));
  CHECK(cudaMalloc(&c, nn * sizeof(float)));
  fill<<<1024, 256>>>(a, nn, 17u);
  fill<<<1024, 256>>>(b, nn, 91u);
  CHECK(cudaMemset(c, 0xff, nn * sizeof(float)));  // NaN poison
  CHECK(cudaDeviceSynchronize());
  Gemm gemm;
  typename Gemm::Arguments args({n, n, n}, {a, n}, {b, n}, {c, n}, {c, n}, {1.0f, 0.0f});
  if (gemm.can_implement(args) != cutlass::Status::kSuccess ||
      gemm.initialize(args) != cutlass::Status::kSuccess) {
    std::printf("%s %d^3 cutlass %s: cannot run\n", dtype, n, tile);
    return;
  }
  for (int i = 0; i < 3; ++i) gemm();
  CHECK(cudaDeviceSynchronize());
  // Check 64 elements against a double-precision dot product on the host.
  std::vector<Elt> ha(nn), hb(nn);
  std::vector<float> hc(nn);
  CHECK(cudaMemcpy(ha.data(), a, nn * sizeof(Elt), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hb.data(), b, nn * sizeof(Elt), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hc.data(), c, nn * sizeof(float), cudaMemcpyDeviceToHost));
  std::mt19937 rng(5);
  bool ok = true;
  for (int s = 0; s < 64; ++s) {
    int i = rng() % n, j = rng() % n;
    double ref = 0, mag = 0;
    for (int k = 0; k < n; ++k) {
      double p = double(float(ha[(size_t)i * n + k])) * double(float(hb[(size_t)k * n + j]));
      ref += p;
      mag += std::fabs(p);
    }
    double got = hc[(size_t)i * n + j];
    if (!(std::fabs(got - ref) <= n * std::ldexp(1.0, -22) * mag + 1e-6)) ok = false;
  }
  // Median of 15 timed runs of 5 launches each (CUDA events).
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int r = 0; r < 15; ++r) {
    CHECK(cudaEventRecord(e0));
    for (int i = 0; i < 5; ++i) gemm();
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float t;
    CHECK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t / 5);
  }
  CHECK(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  double tf = 2.0 * n * (double)n * n / (ms[ms.size() / 2] * 1e-3) / 1e12;
  std::printf("cutlass-sm80 %s %d^3 %s: %8.1f TFLOP/s %s\n", dtype, n, tile, tf,
              ok ? "ok" : "MISMATCH");
  std::fflush(stdout);
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  CHECK(cudaFree(c));
}

template <class Elt>
void all(const char* dtype) {
  for (int n : {4096, 8192}) {
    run<typename Config<Elt, 128, 256, 64, 64, 64, 3>::Gemm, Elt>(dtype, "128x256x64/3", n);
    run<typename Config<Elt, 256, 128, 64, 64, 64, 3>::Gemm, Elt>(dtype, "256x128x64/3", n);
    run<typename Config<Elt, 128, 256, 32, 64, 64, 4>::Gemm, Elt>(dtype, "128x256x32/4", n);
    run<typename Config<Elt, 128, 128, 64, 64, 64, 4>::Gemm, Elt>(dtype, "128x128x64/4", n);
  }
}

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  all<cutlass::half_t>("float16");
  all<cutlass::bfloat16_t>("bfloat16");
  return 0;
}
