// Kernels of the fused LM-head cross-entropy (cuda_cross_entropy.cu), driven by
// CudaOps::linear_cross_entropy_fwd_bwd (cuda_cross_entropy.cpp). Each launcher enqueues on the
// stream given, never synchronises, and throws zt::Error (through cuda::check_launch) when the
// launch fails. Row indices are i32 positions into the micro-batch's [T, …] tensors.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace zt::cuda {

// Threads per block of the per-row softmax kernel (one block per logits row).
constexpr int kCeRowThreads = 512;

// Reduced statistics of one call, written by ce_reduce_stats (device memory, copied to the host).
struct CeDeviceStats {
  double loss_sum;     // Σ loss_t, nats
  double entropy_sum;  // Σ H(softmax(logits_t)), nats
  int64_t correct;     // rows whose argmax is the target
  int64_t count;       // rows with a target
};

// rows[0..n) = the positions t (ascending) with targets[t] != -100, targets [T] i32;
// info[0] = n, info[1] = the first position whose target is neither -100 nor in [0, V) (-1 if
// none), info[2] = that target. One block; O(T) work.
void ce_compact_targets(const int32_t* targets, int64_t T, int64_t V, int32_t* rows, int64_t* info,
                        cudaStream_t s);

// dst[r, :] = src[rows[r], :] for r < n, rows of H elements, converting between the storage types
// (f32 or bf16 each; bf16 -> f32 exact, f32 -> bf16 round-to-nearest-even).
void ce_gather_rows(void* dst, bool dst_bf16, const void* src, bool src_bf16, const int32_t* rows,
                    int64_t n, int64_t H, cudaStream_t s);
// dst[rows[r], :] = Σ_p src[p][r, :] for r < n: `parts` f32 [n, H] partials part_stride floats
// apart, added in p order (fp32), stored as f32 or bf16 (RNE).
void ce_scatter_rows(void* dst, bool dst_bf16, const float* src, int parts, int64_t part_stride,
                     const int32_t* rows, int64_t n, int64_t H, cudaStream_t s);

// Per row r < n of logits [n, V] (row stride V; f32, or bf16 when `bf16`), whose target is
// y = targets[rows[r]]: m = max, lse = m + log Σ exp(x - m), loss[r] = lse - x[y],
// hit[r] = (first argmax == y), entropy[r] = lse - Σ softmax·x (computed as
// log s + Σ e^{x-m}(m - x) / s, no cancellation), all in fp32 (loss and entropy finished in fp64);
// when `grad`, G[r, j] = grad_scale·(softmax_j - [j == y]) over the logits, in their type.
void ce_softmax_rows(void* logits, bool bf16, int64_t n, int64_t V, const int32_t* rows,
                     const int32_t* targets, float grad_scale, bool grad, double* loss,
                     double* entropy, int32_t* hit, cudaStream_t s);

// out = {Σ loss[0..n), Σ entropy[0..n), Σ hit[0..n), n}, summed in a fixed order (fp64 / int64).
void ce_reduce_stats(const double* loss, const double* entropy, const int32_t* hit, int64_t n,
                     CeDeviceStats* out, cudaStream_t s);

// x[0..n) *= beta (f32).
void ce_scale(float* x, int64_t n, float beta, cudaStream_t s);

}  // namespace zt::cuda
