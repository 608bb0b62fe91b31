// Reductions on CUDA: sumsq (fp64, the CPU's exact order) and bias_grad (column sums).
// CPU reference: CpuOps::sumsq / bias_grad (backend/cpu/cpu_reduce.cpp).
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_colsum.cuh"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/ops.h"

namespace zt::cuda {
namespace {

constexpr int64_t kBlock = Ops::kSumsqBlock;  // elements per partial (16384)
constexpr int kLanes = 8;                     // interleaved fp64 accumulators per partial
constexpr int kSumsqThreads = 256;            // = 32 partials x 8 lanes per block
constexpr int kTotalThreads = 1024;

size_t region(int64_t count, size_t elem) {
  return (static_cast<size_t>(count) * elem + 63) & ~size_t{63};
}

// part[b] = Σ x_i² over block b = [b*kBlock, (b+1)*kBlock) ∩ [0, n), in the CPU's order: lane k
// sums i ≡ k (mod 8) in increasing i in fp64 (v*v of an fp32 value is exact in fp64), and the 8
// lanes combine as ((l0+l4)+(l1+l5)) + ((l2+l6)+(l3+l7)) — shuffles xor 4, then 1, then 2.
// Grid: 8 consecutive threads per block b (kSumsqThreads per CUDA block). Each group of 8 threads
// reads 8 consecutive elements per step (32 contiguous bytes in fp32): full sectors, every element
// read once; 8 loads are issued before they are added. The result is the CPU's bit for bit, so it
// cannot depend on scheduling.
template <class T>
__global__ void __launch_bounds__(kSumsqThreads)
    sumsq_partials_kernel(double* part, const T* x, int64_t n, int64_t nblk) {
  const int64_t g = static_cast<int64_t>(blockIdx.x) * kSumsqThreads + threadIdx.x;
  const int64_t b = g / kLanes;
  const int k = static_cast<int>(g % kLanes);
  double acc = 0.0;
  if (b < nblk) {
    const int64_t i0 = b * kBlock, len = (n - i0 < kBlock ? n - i0 : kBlock);
    const int64_t cnt = len > k ? (len - k + kLanes - 1) / kLanes : 0;
    const T* p = x + i0 + k;
    int64_t s = 0;
    for (; s + 8 <= cnt; s += 8) {
      double v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) v[u] = ld(p, (s + u) * kLanes);
#pragma unroll
      for (int u = 0; u < 8; ++u) acc += v[u] * v[u];
    }
    for (; s < cnt; ++s) {
      const double v = ld(p, s * kLanes);
      acc += v * v;
    }
  }
  double c = acc + __shfl_xor_sync(0xffffffffu, acc, 4);
  c = c + __shfl_xor_sync(0xffffffffu, c, 1);
  c = c + __shfl_xor_sync(0xffffffffu, c, 2);
  if (k == 0 && b < nblk) part[b] = c;
}

// *total = part[0] + part[1] + … in block order (the CPU's sequential loop). One block: the
// partials are staged through shared memory kTotalThreads at a time (coalesced loads), and thread 0
// adds them one after the other — a fixed order by construction.
__global__ void __launch_bounds__(kTotalThreads)
    sumsq_total_kernel(double* total, const double* part, int64_t nblk) {
  __shared__ double buf[kTotalThreads];
  double s = 0.0;
  for (int64_t b0 = 0; b0 < nblk; b0 += kTotalThreads) {
    if (b0 + threadIdx.x < nblk) buf[threadIdx.x] = part[b0 + threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) {
      const int m = static_cast<int>(nblk - b0 < kTotalThreads ? nblk - b0 : kTotalThreads);
      for (int i = 0; i < m; ++i) s += buf[i];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) *total = s;
}

// bias_grad term: dy[t, j..j+VEC).
template <class T, int VEC>
struct BiasTerm {
  const T* dy;
  int64_t N;
  __device__ void operator()(int64_t t, int64_t j, float (&v)[VEC]) const {
    ldn<VEC>(dy, t * N + j, v);
  }
};

}  // namespace

size_t sumsq_workspace_bytes(int64_t n) {
  return region((n + kBlock - 1) / kBlock, sizeof(double)) + region(1, sizeof(double));
}

void launch_sumsq(double* out, const void* x, DType t, int64_t n, void* workspace,
                  cudaStream_t stream) {
  const int64_t nblk = (n + kBlock - 1) / kBlock;
  auto* part = static_cast<double*>(workspace);
  double* total =
      reinterpret_cast<double*>(static_cast<char*>(workspace) + region(nblk, sizeof(double)));
  if (nblk > 0) {
    const unsigned grid = blocks_for(nblk * kLanes, kSumsqThreads);
    by_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      sumsq_partials_kernel<T>
          <<<grid, kSumsqThreads, 0, stream>>>(part, static_cast<const T*>(x), n, nblk);
    });
    check_launch("sumsq");
  }
  sumsq_total_kernel<<<1, kTotalThreads, 0, stream>>>(total, part, nblk);
  check_launch("sumsq");
  check(cudaMemcpyAsync(out, total, sizeof(double), cudaMemcpyDeviceToHost, stream), "sumsq");
}

void launch_bias_grad(float* db, const void* dy, DType t, int64_t M, int64_t N, float beta,
                      cudaStream_t stream) {
  if (N == 0) return;
  const bool vec = N % kVec == 0 && aligned16(dy);
  by_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    const auto* p = static_cast<const T*>(dy);
    colsum(db, beta, M, N, vec, BiasTerm<T, 8>{p, N}, BiasTerm<T, 1>{p, N}, stream);
  });
  check_launch("bias_grad");
}

}  // namespace zt::cuda
