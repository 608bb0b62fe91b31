// Deterministic column sums over rows, without workspace or atomics: out[j] = beta*out[j] +
// Σ_t term(t, j) over t < M. Used by bias_grad (term = dy) and the RMSNorm weight gradient
// (term = dy * rounded normalised x). Include from .cu files only.
//
// Mapping: blockIdx.x takes a slice of kColsumCols = 16 columns (gridDim.x = ceil(N/16)),
// blockIdx.y one of S consecutive row ranges of ceil(M/S) rows (S = colsum_row_splits: 1, or on
// Hopper up to 8, the S blocks of a column slice forming one thread-block cluster). In a block, a
// thread owns VEC consecutive columns of the slice (VEC = 8: 16-byte vector loads, 2 threads per
// row; VEC = 1: 16 threads per row) and a row slot r of R = threads/(16/VEC) slots; it adds the
// terms of rows r, r+R, r+2R, … of its range in increasing order into fp32 registers
// (kColsumUnroll rows loaded before they are added). The R slot partials then meet in shared
// memory and are added by a pairwise tree with fixed pairs (slot s += slot s+w for w = R/2, R/4,
// …, 1). With S > 1 the cluster's rank-0 block then adds the S range sums in range order, reading
// the other blocks' shared memory (distributed shared memory), before any block exits.
// Determinism: the row ranges, the set of rows per slot, their order, the tree and the range
// order depend only on M, N, S and the constants here — not on scheduling or the grid placement;
// S depends on M and on whether the device has clusters (compute capability 9), so sm_89 and
// sm_90 GPUs may differ in the last bits, each one repeatable.
// Traffic: every input element is read once (a warp reads 32-byte row pieces of 16 rows (VEC 8) or
// 2 rows (VEC 1)); N floats are read and written at the end. Before the row split (S = 1 always)
// a [8192, 256] bias gradient ran on 16 blocks: a few percent of an H200 step went here.
#pragma once

#include <cooperative_groups.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.cuh"

namespace zt::cuda {

constexpr int kColsumCols = 16;
constexpr int kColsumThreads = 512;
constexpr int kColsumUnroll = 4;
constexpr int kColsumMaxSplits = 8;            // the portable cluster size
constexpr int64_t kColsumRowsPerSplit = 1024;  // a block's rows at least, before splitting more

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
  const int64_t per = (M + gridDim.y - 1) / gridDim.y;  // rows of a range
  const int64_t row0 = per * blockIdx.y, row1 = row0 + per < M ? row0 + per : M;
  float acc[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) acc[e] = 0.0f;
  if (j < N) {
    for (int64_t t0 = row0 + r; t0 < row1; t0 += static_cast<int64_t>(kSlots) * kColsumUnroll) {
      float v[kColsumUnroll][VEC];
#pragma unroll
      for (int u = 0; u < kColsumUnroll; ++u) {
        const int64_t t = t0 + static_cast<int64_t>(u) * kSlots;
        if (t < row1) term(t, j, v[u]);
      }
#pragma unroll
      for (int u = 0; u < kColsumUnroll; ++u)
        if (t0 + static_cast<int64_t>(u) * kSlots < row1)
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
  float sum = threadIdx.x < kColsumCols ? part[0][threadIdx.x] : 0.0f;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (gridDim.y > 1) {  // the cluster: S blocks of one column slice, rank = blockIdx.y
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();  // every range sum is in its block's part[0]
    if (blockIdx.y == 0 && threadIdx.x < kColsumCols)
      for (unsigned y = 1; y < gridDim.y; ++y)
        sum += cluster.map_shared_rank(&part[0][0], y)[threadIdx.x];
    cluster.sync();  // the other blocks' shared memory stays until rank 0 has read it
    if (blockIdx.y != 0) return;
  }
#endif
  if (threadIdx.x < kColsumCols) {
    const int64_t jj = static_cast<int64_t>(blockIdx.x) * kColsumCols + threadIdx.x;
    if (jj < N) out[jj] = (beta == 0.0f ? 0.0f : beta * out[jj]) + sum;
  }
}

// Row ranges S for M rows: 1 on devices without thread-block clusters (compute capability < 9),
// else M / 1024 clamped to [1, 8].
inline int colsum_row_splits(int64_t M) {
  static const bool clusters = [] {
    int dev = 0, major = 0;
    return cudaGetDevice(&dev) == cudaSuccess &&
           cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
           major >= 9;
  }();
  if (!clusters) return 1;
  const int64_t s = M / kColsumRowsPerSplit;
  return static_cast<int>(s < 1 ? 1 : (s > kColsumMaxSplits ? kColsumMaxSplits : s));
}

template <int VEC, class F>
void colsum_launch(float* out, float beta, int64_t M, int64_t N, F f, cudaStream_t stream) {
  const int S = colsum_row_splits(M);
  const unsigned grid = static_cast<unsigned>((N + kColsumCols - 1) / kColsumCols);
  if (S == 1) {
    colsum_kernel<VEC, F><<<grid, kColsumThreads, 0, stream>>>(out, beta, M, N, f);
    return;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid, static_cast<unsigned>(S), 1);
  cfg.blockDim = dim3(kColsumThreads, 1, 1);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 1;
  attr[0].val.clusterDim.y = static_cast<unsigned>(S);
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  check(cudaLaunchKernelEx(&cfg, colsum_kernel<VEC, F>, out, beta, M, N, f), "colsum");
}

// Runs colsum_kernel with VEC = 8 when `vec` (N % 8 == 0 and 16-byte aligned inputs), else 1.
// F8 / F1 are the term functors for the two widths.
template <class F8, class F1>
void colsum(float* out, float beta, int64_t M, int64_t N, bool vec, F8 f8, F1 f1,
            cudaStream_t stream) {
  if (vec)
    colsum_launch<8>(out, beta, M, N, f8, stream);
  else
    colsum_launch<1>(out, beta, M, N, f1, stream);
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
