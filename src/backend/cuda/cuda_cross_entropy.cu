// Kernels of the fused LM-head cross-entropy (declared and described in
// cuda_cross_entropy_kernels.h; the driver is cuda_cross_entropy.cpp, the CPU reference
// backend/cpu/cpu_cross_entropy.cpp).
//
// Determinism: every reduction here has a fixed tree that depends only on the shapes — per-thread
// partials over a fixed index set, then a warp butterfly and one warp over the warp partials
// (the merge is commutative bit for bit, so the butterfly leaves every lane with the same bits), or
// a fixed shared-memory tree. No atomics.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_cross_entropy_kernels.h"

namespace zt::cuda {
namespace {

constexpr int kCompactThreads = 1024;
constexpr int kCopyThreads = 256;
constexpr int kStatsThreads = 256;
// Vectors each thread loads before using any of them (memory-level parallelism in the row passes).
constexpr int kRowUnroll = 4;

__device__ __forceinline__ float load_f(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load_f(const __nv_bfloat16* p, int64_t i) {
  return __bfloat162float(p[i]);
}
__device__ __forceinline__ void store_f(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store_f(__nv_bfloat16* p, int64_t i, float v) {
  p[i] = __float2bfloat16_rn(v);
}

// ---- target compaction: one block; thread i owns the contiguous positions
// [i·per, (i+1)·per), counts its targets, an inclusive scan of the counts gives each thread its
// output offset, and the lowest thread with an invalid target names the first one.
__global__ void __launch_bounds__(kCompactThreads)
    compact_kernel(const int32_t* targets, int64_t T, int64_t V, int32_t* rows, int64_t* info) {
  __shared__ int64_t scan[kCompactThreads];
  __shared__ int64_t first_bad[kCompactThreads];
  const int tid = threadIdx.x;
  const int64_t per = (T + kCompactThreads - 1) / kCompactThreads;
  const int64_t t0 = min(T, tid * per), t1 = min(T, t0 + per);
  int64_t cnt = 0, bad = -1;
  for (int64_t t = t0; t < t1; ++t) {
    const int32_t y = targets[t];
    if (y == -100) continue;
    if ((y < 0 || y >= V) && bad < 0) bad = t;
    ++cnt;
  }
  scan[tid] = cnt;
  first_bad[tid] = bad;
  __syncthreads();
  for (int off = 1; off < kCompactThreads; off <<= 1) {
    const int64_t add = tid >= off ? scan[tid - off] : 0;
    __syncthreads();
    scan[tid] += add;
    __syncthreads();
  }
  int64_t pos = scan[tid] - cnt;
  for (int64_t t = t0; t < t1; ++t)
    if (targets[t] != -100) rows[pos++] = static_cast<int32_t>(t);
  if (tid == 0) {
    int64_t b = -1;
    for (int i = 0; i < kCompactThreads && b < 0; ++i) b = first_bad[i];
    info[0] = scan[kCompactThreads - 1];
    info[1] = b;
    info[2] = b >= 0 ? targets[b] : 0;
  }
}

// ---- row gather / scatter: one block per row, threads over the H columns.
template <class D, class S>
__global__ void __launch_bounds__(kCopyThreads)
    gather_kernel(D* dst, const S* src, const int32_t* rows, int64_t H) {
  const S* in = src + static_cast<int64_t>(rows[blockIdx.x]) * H;
  D* out = dst + static_cast<int64_t>(blockIdx.x) * H;
  for (int64_t j = threadIdx.x; j < H; j += kCopyThreads) store_f(out, j, load_f(in, j));
}

// dst row rows[r] = Σ_p src[p][r] over the `parts` partials (stride part_stride floats), added
// in p order.
template <class D>
__global__ void __launch_bounds__(kCopyThreads)
    scatter_kernel(D* dst, const float* src, int parts, int64_t part_stride, const int32_t* rows,
                   int64_t H) {
  const float* in = src + static_cast<int64_t>(blockIdx.x) * H;
  D* out = dst + static_cast<int64_t>(rows[blockIdx.x]) * H;
  for (int64_t j = threadIdx.x; j < H; j += kCopyThreads) {
    float v = in[j];
    for (int p = 1; p < parts; ++p) v = __fadd_rn(v, in[p * part_stride + j]);
    store_f(out, j, v);
  }
}

// ---- per-row softmax statistics (online over the row: max m, s = Σ e^{x-m},
// d = Σ e^{x-m}(m - x), first argmax idx).
struct RowAcc {
  float m, s, d;
  int idx;
};

// a ∪ b. Commutative bit for bit (max, sums of two products, min on ties). An accumulator with
// s == 0 is empty (m = -inf); a NaN s propagates.
__device__ __forceinline__ RowAcc merge(const RowAcc& a, const RowAcc& b) {
  RowAcc r;
  r.m = fmaxf(a.m, b.m);
  const float ca = a.s != 0.0f ? expf(a.m - r.m) : 0.0f;
  const float cb = b.s != 0.0f ? expf(b.m - r.m) : 0.0f;
  r.s = ca * a.s + cb * b.s;
  r.d = (a.s != 0.0f ? ca * (a.d + (r.m - a.m) * a.s) : 0.0f) +
        (b.s != 0.0f ? cb * (b.d + (r.m - b.m) * b.s) : 0.0f);
  r.idx = a.m > b.m ? a.idx : (b.m > a.m ? b.idx : min(a.idx, b.idx));
  return r;
}

// Adds the kVec consecutive elements v (indices j0, j0+1, …) to a thread's accumulator. Strict
// comparisons keep the first maximum (a thread sees its indices in increasing order).
template <int kVec>
__device__ __forceinline__ void add_vec(RowAcc& a, const float (&v)[kVec], int j0) {
  float mx = v[0];
  int ix = 0;
#pragma unroll
  for (int k = 1; k < kVec; ++k)
    if (v[k] > mx) {
      mx = v[k];
      ix = k;
    }
  if (mx > a.m) {
    if (a.s != 0.0f) {
      const float c = expf(a.m - mx);
      a.d = c * (a.d + (mx - a.m) * a.s);
      a.s = c * a.s;
    }
    a.m = mx;
    a.idx = j0 + ix;
  }
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    const float e = expf(v[k] - a.m);
    a.s += e;
    a.d += e * (a.m - v[k]);
  }
}

__device__ __forceinline__ RowAcc shfl_merge(const RowAcc& a, int lane_mask) {
  RowAcc b;
  b.m = __shfl_xor_sync(0xffffffffu, a.m, lane_mask);
  b.s = __shfl_xor_sync(0xffffffffu, a.s, lane_mask);
  b.d = __shfl_xor_sync(0xffffffffu, a.d, lane_mask);
  b.idx = __shfl_xor_sync(0xffffffffu, a.idx, lane_mask);
  return merge(a, b);
}

// The block's merged accumulator, returned to every thread.
__device__ RowAcc block_merge(RowAcc a, RowAcc* part) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  constexpr int kWarps = kCeRowThreads / 32;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) a = shfl_merge(a, off);
  if (lane == 0) part[warp] = a;
  __syncthreads();
  if (warp == 0) {
    a = lane < kWarps ? part[lane] : RowAcc{-INFINITY, 0.0f, 0.0f, INT_MAX};
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) a = shfl_merge(a, off);
    if (lane == 0) part[kWarps] = a;
  }
  __syncthreads();
  return part[kWarps];
}

template <int kVec>
__device__ __forceinline__ void load_vec(const float* x, int64_t q, float (&v)[kVec]) {
  if constexpr (kVec == 4) {
    const float4 t = reinterpret_cast<const float4*>(x)[q];
    v[0] = t.x;
    v[1] = t.y;
    v[2] = t.z;
    v[3] = t.w;
  } else {
    static_assert(kVec == 1);
    v[0] = x[q];
  }
}

template <int kVec>
__device__ __forceinline__ void load_vec(const __nv_bfloat16* x, int64_t q, float (&v)[kVec]) {
  if constexpr (kVec == 8) {
    const uint4 t = reinterpret_cast<const uint4*>(x)[q];
    const uint32_t w[4] = {t.x, t.y, t.z, t.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      __nv_bfloat162 b;
      memcpy(&b, &w[k], 4);
      const float2 f = __bfloat1622float2(b);
      v[2 * k] = f.x;
      v[2 * k + 1] = f.y;
    }
  } else {
    static_assert(kVec == 1);
    v[0] = __bfloat162float(x[q]);
  }
}

template <int kVec>
__device__ __forceinline__ void store_vec(float* g, int64_t q, const float (&o)[kVec]) {
  if constexpr (kVec == 4)
    reinterpret_cast<float4*>(g)[q] = make_float4(o[0], o[1], o[2], o[3]);
  else
    g[q] = o[0];
}

template <int kVec>
__device__ __forceinline__ void store_vec(__nv_bfloat16* g, int64_t q, const float (&o)[kVec]) {
  if constexpr (kVec == 8) {
    uint32_t w[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const __nv_bfloat162 b = __floats2bfloat162_rn(o[2 * k], o[2 * k + 1]);
      memcpy(&w[k], &b, 4);
    }
    reinterpret_cast<uint4*>(g)[q] = make_uint4(w[0], w[1], w[2], w[3]);
  } else {
    g[q] = __float2bfloat16_rn(o[0]);
  }
}

// One block per row r of logits [n, V] (row stride V elements of type L: f32, or bf16 when the
// LM head computes in bf16); thread t handles the kVec-element vectors t, t + B, t + 2B, …
// (coalesced). Pass 1 reads the row once (online max / sum / entropy term / argmax); with kGrad,
// pass 2 reads it again and writes G over it in the same type: each thread stores exactly the
// vectors it has just loaded, so no barrier is needed (x[y] is read before block_merge's barrier).
// 2·sizeof(L) bytes read and sizeof(L) written per logit.
template <int kVec, bool kGrad, class L>
__global__ void __launch_bounds__(kCeRowThreads)
    softmax_rows_kernel(L* logits, int64_t V, const int32_t* rows, const int32_t* targets,
                        float grad_scale, double* loss, double* entropy, int32_t* hit) {
  __shared__ RowAcc part[kCeRowThreads / 32 + 1];
  const int tid = threadIdx.x;
  const int64_t r = blockIdx.x;
  L* x = logits + r * V;
  const int y = targets[rows[r]];
  const float xy = load_f(x, y);  // read before the barrier that precedes any store
  const int64_t nv = V / kVec;
  constexpr int64_t kStep = static_cast<int64_t>(kRowUnroll) * kCeRowThreads;

  RowAcc acc{-INFINITY, 0.0f, 0.0f, INT_MAX};
  for (int64_t q0 = 0; q0 < nv; q0 += kStep) {
    float v[kRowUnroll][kVec];
#pragma unroll
    for (int u = 0; u < kRowUnroll; ++u) {
      const int64_t q = q0 + u * kCeRowThreads + tid;
      if (q < nv) load_vec<kVec>(x, q, v[u]);
    }
#pragma unroll
    for (int u = 0; u < kRowUnroll; ++u) {
      const int64_t q = q0 + u * kCeRowThreads + tid;
      if (q < nv) add_vec<kVec>(acc, v[u], static_cast<int>(q * kVec));
    }
  }
  acc = block_merge(acc, part);
  if (tid == 0) {
    const double log_s = log(static_cast<double>(acc.s));
    loss[r] = static_cast<double>(acc.m) + log_s - static_cast<double>(xy);
    entropy[r] = log_s + static_cast<double>(acc.d) / static_cast<double>(acc.s);
    hit[r] = acc.idx == y ? 1 : 0;
  }
  if constexpr (kGrad) {
    // As the CPU: p_j = e^{x_j - m}·(fl(1/s)·grad_scale), then the target's grad_scale off.
    const float scale = static_cast<float>(1.0 / static_cast<double>(acc.s)) * grad_scale;
    for (int64_t q0 = 0; q0 < nv; q0 += kStep) {
      float v[kRowUnroll][kVec];
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) {
        const int64_t q = q0 + u * kCeRowThreads + tid;
        if (q < nv) load_vec<kVec>(x, q, v[u]);
      }
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) {
        const int64_t q = q0 + u * kCeRowThreads + tid;
        if (q >= nv) continue;
        float o[kVec];
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          o[k] = expf(v[u][k] - acc.m) * scale;
          if (q * kVec + k == y) o[k] -= grad_scale;
        }
        store_vec<kVec>(x, q, o);
      }
    }
  }
}

template <int kVec, class L>
void launch_rows(L* logits, int64_t n, int64_t V, const int32_t* rows, const int32_t* targets,
                 float grad_scale, bool grad, double* loss, double* entropy, int32_t* hit,
                 cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(n));
  if (grad)
    softmax_rows_kernel<kVec, true, L>
        <<<grid, kCeRowThreads, 0, s>>>(logits, V, rows, targets, grad_scale, loss, entropy, hit);
  else
    softmax_rows_kernel<kVec, false, L>
        <<<grid, kCeRowThreads, 0, s>>>(logits, V, rows, targets, grad_scale, loss, entropy, hit);
}

// ---- statistics: one block; thread i sums the contiguous rows [i·per, (i+1)·per), then a fixed
// shared-memory tree.
__global__ void __launch_bounds__(kStatsThreads)
    reduce_stats_kernel(const double* loss, const double* entropy, const int32_t* hit, int64_t n,
                        CeDeviceStats* out) {
  __shared__ double sl[kStatsThreads], se[kStatsThreads];
  __shared__ int64_t sh[kStatsThreads];
  const int tid = threadIdx.x;
  const int64_t per = (n + kStatsThreads - 1) / kStatsThreads;
  const int64_t i0 = min(n, tid * per), i1 = min(n, i0 + per);
  double a = 0.0, b = 0.0;
  int64_t c = 0;
  for (int64_t i = i0; i < i1; ++i) {
    a += loss[i];
    b += entropy[i];
    c += hit[i];
  }
  sl[tid] = a;
  se[tid] = b;
  sh[tid] = c;
  __syncthreads();
  for (int stride = kStatsThreads / 2; stride > 0; stride >>= 1) {
    if (tid < stride) {
      sl[tid] += sl[tid + stride];
      se[tid] += se[tid + stride];
      sh[tid] += sh[tid + stride];
    }
    __syncthreads();
  }
  if (tid == 0) *out = CeDeviceStats{sl[0], se[0], sh[0], n};
}

__global__ void scale_kernel(float* x, int64_t n, float beta) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    x[i] *= beta;
}

}  // namespace

void ce_compact_targets(const int32_t* targets, int64_t T, int64_t V, int32_t* rows, int64_t* info,
                        cudaStream_t s) {
  compact_kernel<<<1, kCompactThreads, 0, s>>>(targets, T, V, rows, info);
  check_launch("linear_cross_entropy (target compaction)");
}

void ce_gather_rows(void* dst, bool dst_bf16, const void* src, bool src_bf16, const int32_t* rows,
                    int64_t n, int64_t H, cudaStream_t s) {
  if (n == 0 || H == 0) return;
  const dim3 grid(static_cast<unsigned>(n));
  using bf = __nv_bfloat16;
  if (dst_bf16 && src_bf16)
    gather_kernel<<<grid, kCopyThreads, 0, s>>>(static_cast<bf*>(dst), static_cast<const bf*>(src),
                                                rows, H);
  else if (dst_bf16)
    gather_kernel<<<grid, kCopyThreads, 0, s>>>(static_cast<bf*>(dst),
                                                static_cast<const float*>(src), rows, H);
  else if (src_bf16)
    gather_kernel<<<grid, kCopyThreads, 0, s>>>(static_cast<float*>(dst),
                                                static_cast<const bf*>(src), rows, H);
  else
    gather_kernel<<<grid, kCopyThreads, 0, s>>>(static_cast<float*>(dst),
                                                static_cast<const float*>(src), rows, H);
  check_launch("linear_cross_entropy (gather rows)");
}

void ce_scatter_rows(void* dst, bool dst_bf16, const float* src, int parts, int64_t part_stride,
                     const int32_t* rows, int64_t n, int64_t H, cudaStream_t s) {
  if (n == 0 || H == 0) return;
  const dim3 grid(static_cast<unsigned>(n));
  if (dst_bf16)
    scatter_kernel<<<grid, kCopyThreads, 0, s>>>(static_cast<__nv_bfloat16*>(dst), src, parts,
                                                 part_stride, rows, H);
  else
    scatter_kernel<<<grid, kCopyThreads, 0, s>>>(static_cast<float*>(dst), src, parts, part_stride,
                                                 rows, H);
  check_launch("linear_cross_entropy (scatter rows)");
}

void ce_softmax_rows(void* logits, bool bf16, int64_t n, int64_t V, const int32_t* rows,
                     const int32_t* targets, float grad_scale, bool grad, double* loss,
                     double* entropy, int32_t* hit, cudaStream_t s) {
  if (n == 0) return;
  const bool aligned = (reinterpret_cast<uintptr_t>(logits) & 15u) == 0;
  if (bf16) {
    auto* x = static_cast<__nv_bfloat16*>(logits);
    if (V % 8 == 0 && aligned)
      launch_rows<8>(x, n, V, rows, targets, grad_scale, grad, loss, entropy, hit, s);
    else
      launch_rows<1>(x, n, V, rows, targets, grad_scale, grad, loss, entropy, hit, s);
  } else {
    auto* x = static_cast<float*>(logits);
    if (V % 4 == 0 && aligned)
      launch_rows<4>(x, n, V, rows, targets, grad_scale, grad, loss, entropy, hit, s);
    else
      launch_rows<1>(x, n, V, rows, targets, grad_scale, grad, loss, entropy, hit, s);
  }
  check_launch("linear_cross_entropy (softmax rows)");
}

void ce_reduce_stats(const double* loss, const double* entropy, const int32_t* hit, int64_t n,
                     CeDeviceStats* out, cudaStream_t s) {
  reduce_stats_kernel<<<1, kStatsThreads, 0, s>>>(loss, entropy, hit, n, out);
  check_launch("linear_cross_entropy (statistics)");
}

void ce_scale(float* x, int64_t n, float beta, cudaStream_t s) {
  if (n == 0) return;
  const int64_t blocks = std::min<int64_t>((n + 255) / 256, 4096);
  scale_kernel<<<static_cast<unsigned>(blocks), 256, 0, s>>>(x, n, beta);
  check_launch("linear_cross_entropy (scale dweight)");
}

}  // namespace zt::cuda
