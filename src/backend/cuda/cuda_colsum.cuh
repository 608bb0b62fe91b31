// Deterministic column sums over rows, without workspace or atomics: out[j] = beta*out[j] +
// Σ_t term(t, j) over t < M. Used by bias_grad (term = dy) and the RMSNorm weight gradient
// (term = dy * rounded normalised x). Include from .cu files only.
//
// Mapping: one block per slice of kColsumCols = 16 columns (gridDim.x = ceil(N/16)), kColsumThreads
// threads. A thread owns VEC consecutive columns of the slice (VEC = 8: 16-byte vector loads, 2
// threads per row; VEC = 1: 16 threads per row) and a row slot r of R = threads/(16/VEC) slots; it
// adds the terms of rows r, r+R, r+2R, … in increasing order into fp32 registers (kColsumUnroll
// rows loaded before they are added). The R slot partials then meet in shared memory and are added
// by a pairwise tree with fixed pairs (slot s += slot s+w for w = R/2, R/4, …, 1).
// Determinism: the set of rows per slot, their order and the tree depend only on M, N and the
// constants here — not on scheduling, the grid placement or the device.
// Traffic: every input element is read once (a warp reads 32-byte row pieces of 16 rows (VEC 8) or
// 2 rows (VEC 1)); N floats are read and written at the end.
#pragma once

#include "backend/cuda/cuda_device.cuh"

namespace zt::cuda {

constexpr int kColsumCols = 16;
constexpr int kColsumThreads = 512;
constexpr int kColsumUnroll = 4;

// F: `__device__ void operator()(int64_t t, int64_t j, float (&v)[VEC]) const` returning the terms
// of row t, columns j..j+VEC (all inside the matrix).
template <int VEC, class F>
__global__ void __launch_bounds__(kColsumThreads)
    colsum_kernel(float* out, float beta, int64_t M, int64_t N, F term) {
  constexpr int kTpr = kColsumCols / VEC;        // threads per row of the slice
  constexpr int kSlots = kColsumThreads / kTpr;  // row slots R
  __shared__ float part[kSlots][kColsumCols];
  const int c = threadIdx.x % kTpr, r = threadIdx.x / kTpr;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kColsumCols + c * VEC;
  float acc[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) acc[e] = 0.0f;
  if (j < N) {
    for (int64_t t0 = r; t0 < M; t0 += static_cast<int64_t>(kSlots) * kColsumUnroll) {
      float v[kColsumUnroll][VEC];
#pragma unroll
      for (int u = 0; u < kColsumUnroll; ++u) {
        const int64_t t = t0 + static_cast<int64_t>(u) * kSlots;
        if (t < M) term(t, j, v[u]);
      }
#pragma unroll
      for (int u = 0; u < kColsumUnroll; ++u)
        if (t0 + static_cast<int64_t>(u) * kSlots < M)
#pragma unroll
          for (int e = 0; e < VEC; ++e) acc[e] += v[u][e];
    }
  }
#pragma unroll
  for (int e = 0; e < VEC; ++e) part[r][c * VEC + e] = acc[e];
  __syncthreads();
  for (int w = kSlots / 2; w >= 1; w /= 2) {
    for (int i = threadIdx.x; i < w * kColsumCols; i += kColsumThreads)
      part[i / kColsumCols][i % kColsumCols] += part[i / kColsumCols + w][i % kColsumCols];
    __syncthreads();
  }
  if (threadIdx.x < kColsumCols) {
    const int64_t jj = static_cast<int64_t>(blockIdx.x) * kColsumCols + threadIdx.x;
    if (jj < N) out[jj] = (beta == 0.0f ? 0.0f : beta * out[jj]) + part[0][threadIdx.x];
  }
}

// Runs colsum_kernel with VEC = 8 when `vec` (N % 8 == 0 and 16-byte aligned inputs), else 1.
// F8 / F1 are the term functors for the two widths.
template <class F8, class F1>
void colsum(float* out, float beta, int64_t M, int64_t N, bool vec, F8 f8, F1 f1,
            cudaStream_t stream) {
  const unsigned grid = static_cast<unsigned>((N + kColsumCols - 1) / kColsumCols);
  if (vec)
    colsum_kernel<8, F8><<<grid, kColsumThreads, 0, stream>>>(out, beta, M, N, f8);
  else
    colsum_kernel<1, F1><<<grid, kColsumThreads, 0, stream>>>(out, beta, M, N, f1);
}

// The terms of a row, VEC = 8 or 1, from storage type T.
template <int VEC, class T>
__device__ __forceinline__ void ldn(const T* p, int64_t i, float (&v)[VEC]) {
  if constexpr (VEC == kVec)
    ld8(p, i, v);
  else
    v[0] = ld(p, i);
}

}  // namespace zt::cuda
