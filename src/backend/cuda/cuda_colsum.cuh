// Deterministic column sums over rows, without workspace or atomics: out[j] = beta*out[j] +
// Σ_t term(t, j) over t < M. Used by bias_grad (term = dy) and the RMSNorm weight gradient
// (term = dy * rounded normalised x). Include from .cu files only.
//
// Mapping: a block of 256 threads (8 warps) takes a column slice of P·VEC columns, P threads to a
// row (colsum_threads_per_row: VEC = 8, 16-byte loads of bf16 (two of fp32): P = 8, 4 or 2, i.e.
// 64, 32 or 16 columns, the widest whose grid still has kColsumMinBlocks blocks; VEC = 1: P = 32),
// and one of S consecutive row ranges of ceil(M/S) rows (blockIdx.y; S = colsum_row_splits(M): 1,
// or with thread-block clusters (compute capability 9 and later) M/256 clamped to [1, 8], the S
// blocks of a column slice forming one cluster). A thread owns VEC consecutive columns and a row
// slot r of R = 256/P; it adds the terms of rows r, r+R, r+2R, … of its range in increasing order
// into fp32 registers, loading kColsumUnroll = 8 rows before adding them. Then, each in a fixed
// order: the 32/P slots of a warp by an xor butterfly of shuffles (offsets 16, 8, …, P); the 8 warp
// sums of a block, added in warp order by one thread a column; with S > 1 the S range sums, which
// every block of the cluster writes into the rank-0 block's shared memory (distributed shared
// memory) between two cluster barriers (a relaxed arrive at the start, waited on before the writes:
// rank 0 runs; a full one after: the writes are seen), added there in range order. No workspace, no
// atomics.
// Determinism: the row ranges, the rows of a slot and their order, the butterfly and the warp and
// range orders depend only on M, N, S, VEC and the constants here (P is a function of VEC, N, S) —
// not on scheduling or the grid placement. S depends on M and on whether the device has clusters
// (compute capability >= 9), so sm_89 and sm_90 GPUs may differ in the last bits, each repeatable.
// Traffic: every input element is read once (rows past a range or columns past N load an element
// again, from cache); with P = 8 a warp's load covers 4 rows of a 64-column slice (bf16: whole
// 128-byte lines). N floats are read and written at the end. Grids at M = 8192 (S = 8): N = 1536,
// 24 × 8 = 192 blocks (64 columns, 32 rows a thread); N = 256, 16 × 8 = 128 blocks (16 columns, 8
// rows a thread); M = 32768, N = 1536: 192 blocks, 128 rows a thread. The bf16 kernels take at most
// 118 registers, so 2 blocks fit an SM and such grids are resident at once (fp32 dw: 184). The
// previous mapping (16 columns, 512 threads, 4 rows a thread at M = 8192, an 8-level shared tree,
// 768 blocks: ~1.45 waves) left most of the bandwidth unused. bench_cuda_ops on one H200 (this
// mapping at aae9ddf; the old one in the bcfbb7e call): rmsnorm_bwd [8192, 1536] bf16 (this dw
// kernel + the dx kernel) 83.7 → 56.2 µs; bias_grad [8192, 1536] 15.9 → 12.4 µs, [8192, 256]
// 15.6 → 9.8 µs; [32768, 1536] 33.0 µs (3.05 TB/s). A training step: +0.7 % (Qwen2.5-1.5B 4 × 2k),
// +1.0 % (1.5B 8k GC), ±0.1 % (Llama-3.2-1B, no biases) — bench/results.
#pragma once

#include <cooperative_groups.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.cuh"

namespace zt::cuda {

// Chosen by the arithmetic above (fill an H200's 132 SMs, 8 loads in flight a thread) and measured
// as a whole (above), not tuned one by one: bench_cuda_ops's bias_grad and rmsnorm_bwd rows are the
// ones to tune them by.
constexpr int kColsumThreads = 256;
constexpr int kColsumWarps = kColsumThreads / 32;
constexpr int kColsumUnroll = 8;              // rows a thread loads before adding them
constexpr int kColsumMaxCols = 64;            // the widest slice: 8 threads × 8 columns
constexpr int kColsumMaxSplits = 8;           // the portable cluster size
constexpr int64_t kColsumRowsPerSplit = 256;  // a block's rows at least, before splitting more
constexpr int kColsumMinBlocks = 128;         // narrower slices below this many blocks

// F: `__device__ void operator()(int64_t t, int64_t j, float (&v)[VEC]) const` returning the terms
// of row t, columns j..j+VEC (all inside the matrix). tpr: threads per row P (a power of 2, VEC·P
// <= kColsumMaxCols).
template <int VEC, class F>
__global__ void __launch_bounds__(kColsumThreads, 1)
    colsum_kernel(float* out, float beta, int64_t M, int64_t N, int tpr, F term) {
  __shared__ float part[kColsumWarps][kColsumMaxCols];  // a warp's slot sum per column
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // The blocks of a cluster must all run before one writes another's shared memory: arrive now,
  // wait after the rows (by then the wait is free).
  if (gridDim.y > 1) __cluster_barrier_arrive_relaxed();
#endif
  const int slots = kColsumThreads / tpr, cols = tpr * VEC;
  const int c = threadIdx.x % tpr, r = threadIdx.x / tpr;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * cols + c * VEC;
  const int64_t per = (M + gridDim.y - 1) / gridDim.y;  // rows of a range
  const int64_t row0 = per * blockIdx.y, row1 = row0 + per < M ? row0 + per : M;
  float acc[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) acc[e] = 0.0f;
  // The loop is uniform in a warp (its first slot's rows decide the trip count; lanes past the
  // range load its last row again and do not add it; lanes past N load the last columns again and
  // add them into their own column slots, which are never stored), so __syncwarp can part
  // the loads from the adds. Without it, or without the launch bound's minimum of 1 block, ptxas
  // (nvcc 13.0) issues as few as 2 of the 8 rows' loads before the first add (seen in the SASS).
  const int64_t jl = j < N ? j : N - VEC;
  const int64_t first = row0 + (r & ~(32 / tpr - 1));  // the warp's first slot
  const int64_t step = static_cast<int64_t>(slots) * kColsumUnroll;
  for (int64_t k = 0; first + k < row1; k += step) {
    float v[kColsumUnroll][VEC];
#pragma unroll
    for (int u = 0; u < kColsumUnroll; ++u) {
      const int64_t t = row0 + r + k + static_cast<int64_t>(u) * slots;
      term(t < row1 ? t : row1 - 1, jl, v[u]);
    }
    __syncwarp();
#pragma unroll
    for (int u = 0; u < kColsumUnroll; ++u)
      if (row0 + r + k + static_cast<int64_t>(u) * slots < row1)
#pragma unroll
        for (int e = 0; e < VEC; ++e) acc[e] += v[u][e];
  }
  // Lanes l and l^o (o >= P) share the column: after the butterfly, lanes 0..P-1 hold the warp's
  // sums of their VEC columns.
  for (int o = 16; o >= tpr; o /= 2)
#pragma unroll
    for (int e = 0; e < VEC; ++e) acc[e] += __shfl_xor_sync(0xffffffffu, acc[e], o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane < tpr)
#pragma unroll
    for (int e = 0; e < VEC; ++e) part[warp][lane * VEC + e] = acc[e];
  __syncthreads();
  float sum = 0.0f;
  if (threadIdx.x < cols) {
    sum = part[0][threadIdx.x];
#pragma unroll
    for (int w = 1; w < kColsumWarps; ++w) sum += part[w][threadIdx.x];
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (gridDim.y > 1) {  // the cluster: S blocks of one column slice, rank = blockIdx.y
    namespace cg = cooperative_groups;
    __shared__ float ranges[kColsumMaxSplits][kColsumMaxCols];  // rank 0's: the range sums
    cg::cluster_group cluster = cg::this_cluster();
    __cluster_barrier_wait();  // the arrive above: every block of the cluster runs
    if (threadIdx.x < cols)
      cluster.map_shared_rank(&ranges[0][0], 0)[blockIdx.y * kColsumMaxCols + threadIdx.x] = sum;
    cluster.sync();  // release / acquire: rank 0 sees every range sum
    if (blockIdx.y != 0) return;
    if (threadIdx.x < cols) {
      sum = ranges[0][threadIdx.x];
      for (unsigned y = 1; y < gridDim.y; ++y) sum += ranges[y][threadIdx.x];
    }
  }
#else
  // Compiled for a GPU before sm_90 (no clusters) but launched with row ranges: a build for an
  // older architecture JIT-run on a Hopper GPU, where colsum_row_splits sees clusters. The ranges
  // cannot be combined here; stop the kernel rather than store one range's sum as the column's.
  if (gridDim.y > 1) __trap();
#endif
  if (threadIdx.x < cols) {
    const int64_t jj = static_cast<int64_t>(blockIdx.x) * cols + threadIdx.x;
    if (jj < N) out[jj] = (beta == 0.0f ? 0.0f : beta * out[jj]) + sum;
  }
}

// Row ranges S for M rows: 1 on devices without thread-block clusters (compute capability < 9),
// else M / 256 clamped to [1, 8].
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

// Threads per row P of a column slice of P·VEC columns, a function of VEC, N and S only: VEC = 1:
// 32. VEC = 8: the largest of 8, 4, 2 whose grid ceil(N / 8P) × S has kColsumMinBlocks blocks, else
// 2 — wide slices (whole 128-byte lines of bf16) where N is large, more SMs where it is small.
inline int colsum_threads_per_row(int vec, int64_t N, int S) {
  if (vec == 1) return 32;
  int tpr = kColsumMaxCols / vec;
  while (tpr > 2 && (N + tpr * vec - 1) / (tpr * vec) * S < kColsumMinBlocks) tpr /= 2;
  return tpr;
}

template <int VEC, class F>
void colsum_launch(float* out, float beta, int64_t M, int64_t N, F f, cudaStream_t stream) {
  const int S = colsum_row_splits(M);
  const int tpr = colsum_threads_per_row(VEC, N, S), cols = tpr * VEC;
  const unsigned grid = static_cast<unsigned>((N + cols - 1) / cols);
  if (S == 1) {
    colsum_kernel<VEC, F><<<grid, kColsumThreads, 0, stream>>>(out, beta, M, N, tpr, f);
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
  check(cudaLaunchKernelEx(&cfg, colsum_kernel<VEC, F>, out, beta, M, N, tpr, f), "colsum");
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
