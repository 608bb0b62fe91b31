// RMSNorm forward and backward on CUDA (HF LlamaRMSNorm / Olmo2RMSNorm / Gemma3RMSNorm by
// RmsNormStyle, ops.h). The style is a template argument: the statistics, the row mapping and the
// sums are the same for every style; only the per-element output, weight and dw term differ
// (norm_out, eff_w, dw_n below).
// CPU reference: CpuOps::rmsnorm_fwd / rmsnorm_bwd (backend/cpu/cpu_rmsnorm.cpp); the per-element
// arithmetic is the CPU's, only the order of the row and column sums differs (fixed trees here).
//
// Backward in two passes, so that the op needs no workspace: (1) dw from dy and x by the column-sum
// kernel (cuda_colsum.cuh: per-column partials over fixed row slots, then fixed-order sums over
// the slots of a warp, the warps of a block and the row ranges of a cluster), run before
// (2) overwrites anything, since dx may alias dy; (2) dx row by row. The price is one extra read of
// dy and x ([T, H] each) against a fused kernel with a [T/rows, H] partials workspace. That one
// was built and measured on an H200 (8f2d7e2, reverted: dy and x held in registers, dw rows in
// shared memory, the partials in the model's workspace): no gain end to end (-0.5 % on
// Qwen2.5-1.5B and Llama-3.2-1B 4 × 2k, bench/results/rmsnorm_onepass_ab_h200_8f2d7e2.txt).
#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_colsum.cuh"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_kernels.h"

namespace zt::cuda {
namespace {

constexpr int kWarps = 8;  // rows per block of the row kernels (one warp per row)

// y element from the weight w and the fp32 normalised value n (rounded to T by the store):
// kLlama w·to_dtype(n), kOlmo2 w·n, kGemma (1 + w)·n — the CPU's products.
template <class T, RmsNormStyle S>
__device__ __forceinline__ float norm_out(float w, float n) {
  if constexpr (S == RmsNormStyle::kLlama) {
    return w * round_to<T>(n);
  } else if constexpr (S == RmsNormStyle::kOlmo2) {
    return w * n;
  } else {
    return (1.0f + w) * n;
  }
}
// The weight the backward's g = dy·w' uses: w, or 1 + w for kGemma.
template <RmsNormStyle S>
__device__ __forceinline__ float eff_w(float w) {
  if constexpr (S == RmsNormStyle::kGemma) {
    return 1.0f + w;
  } else {
    return w;
  }
}
// The normalised value dw multiplies dy by: rounded to T for kLlama (as the forward used it).
template <class T, RmsNormStyle S>
__device__ __forceinline__ float dw_n(float n) {
  if constexpr (S == RmsNormStyle::kLlama) {
    return round_to<T>(n);
  } else {
    return n;
  }
}

// Calls fn(std::integral_constant<RmsNormStyle, style>{}).
template <class Fn>
void by_style(RmsNormStyle style, Fn&& fn) {
  switch (style) {
    case RmsNormStyle::kOlmo2:
      fn(std::integral_constant<RmsNormStyle, RmsNormStyle::kOlmo2>{});
      break;
    case RmsNormStyle::kGemma:
      fn(std::integral_constant<RmsNormStyle, RmsNormStyle::kGemma>{});
      break;
    default:
      fn(std::integral_constant<RmsNormStyle, RmsNormStyle::kLlama>{});
  }
}

// y[t, :] = norm_out<T, S>(w, x[t, :] * rstd[t]), rstd[t] = 1/sqrt(mean_j x² + eps).
// Grid: one warp per row, kWarps rows per block. Lanes stride over the row by 8-element 16-byte
// vectors (H % 8 == 0, aligned) or single elements; the row is read twice (the second time from
// L1/L2) and y written once. Row sum: per-lane sequential fp32 sums, then the fixed warp butterfly.
template <class T, RmsNormStyle S>
__global__ void __launch_bounds__(kWarps * 32)
    rmsnorm_fwd_kernel(T* y, float* rstd, const T* x, const T* w, int64_t rows, int64_t H,
                       float eps, bool vec) {
  const int lane = threadIdx.x % 32;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (t >= rows) return;  // the whole warp leaves together
  const T* xr = x + t * H;
  T* yr = y + t * H;
  float ss = 0.0f;
  if (vec) {
    for (int64_t g = lane * kVec; g < H; g += 32 * kVec) {
      float v[kVec];
      ld8(xr, g, v);
#pragma unroll
      for (int e = 0; e < kVec; ++e) ss += v[e] * v[e];
    }
  } else {
    for (int64_t j = lane; j < H; j += 32) {
      const float v = ld(xr, j);
      ss += v * v;
    }
  }
  ss = warp_sum(ss);
  const float r = 1.0f / sqrtf(ss / static_cast<float>(H) + eps);
  if (lane == 0) rstd[t] = r;
  if (vec) {
    for (int64_t g = lane * kVec; g < H; g += 32 * kVec) {
      float v[kVec], wv[kVec], o[kVec];
      ld8(xr, g, v);
      ld8(w, g, wv);
#pragma unroll
      for (int e = 0; e < kVec; ++e) o[e] = norm_out<T, S>(wv[e], v[e] * r);
      st8(yr, g, o);
    }
  } else {
    for (int64_t j = lane; j < H; j += 32) st(yr, j, norm_out<T, S>(ld(w, j), ld(xr, j) * r));
  }
}

// dx[t, :] = (accumulate ? dx : 0) + r*(g - (x*r)*mean_j(g*(x*r))), g = dy*eff_w<S>(w),
// r = rstd[t].
// Same mapping as the forward: one warp per row; pass 1 reads dy, x, w for the row sum (fixed
// per-lane order + butterfly), pass 2 re-reads them (cache) and reads/writes dx. Every lane has
// read its dy elements before the butterfly, and a lane writes only elements it read itself, so dx
// may alias dy.
template <class T, RmsNormStyle S>
__global__ void __launch_bounds__(kWarps * 32)
    rmsnorm_dx_kernel(T* dx, bool accumulate, const T* dy, const T* x, const T* w,
                      const float* rstd, int64_t rows, int64_t H, bool vec) {
  const int lane = threadIdx.x % 32;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (t >= rows) return;
  const T* xr = x + t * H;
  const T* gr = dy + t * H;
  T* dxr = dx + t * H;
  const float r = rstd[t];
  float dot = 0.0f;
  if (vec) {
    for (int64_t g = lane * kVec; g < H; g += 32 * kVec) {
      float xv[kVec], gv[kVec], wv[kVec];
      ld8(xr, g, xv);
      ld8(gr, g, gv);
      ld8(w, g, wv);
#pragma unroll
      for (int e = 0; e < kVec; ++e) dot += (gv[e] * eff_w<S>(wv[e])) * (xv[e] * r);
    }
  } else {
    for (int64_t j = lane; j < H; j += 32)
      dot += (ld(gr, j) * eff_w<S>(ld(w, j))) * (ld(xr, j) * r);
  }
  const float mean = warp_sum(dot) / static_cast<float>(H);
  if (vec) {
    for (int64_t g = lane * kVec; g < H; g += 32 * kVec) {
      float xv[kVec], gv[kVec], wv[kVec], o[kVec];
      ld8(xr, g, xv);
      ld8(gr, g, gv);
      ld8(w, g, wv);
      if (accumulate) ld8(dxr, g, o);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const float v = r * (gv[e] * eff_w<S>(wv[e]) - (xv[e] * r) * mean);
        o[e] = accumulate ? o[e] + v : v;
      }
      st8(dxr, g, o);
    }
  } else {
    for (int64_t j = lane; j < H; j += 32) {
      const float v = r * (ld(gr, j) * eff_w<S>(ld(w, j)) - (ld(xr, j) * r) * mean);
      st(dxr, j, accumulate ? ld(dxr, j) + v : v);
    }
  }
}

// dw term: dy[t, j] * dw_n<T, S>(x[t, j] * rstd[t]) (the CPU's product).
template <class T, RmsNormStyle S, int VEC>
struct DwTerm {
  const T* dy;
  const T* x;
  const float* rstd;
  int64_t H;
  __device__ void operator()(int64_t t, int64_t j, float (&v)[VEC]) const {
    float xv[VEC];
    ldn<VEC>(dy, t * H + j, v);
    ldn<VEC>(x, t * H + j, xv);
    const float r = rstd[t];
#pragma unroll
    for (int e = 0; e < VEC; ++e) v[e] = v[e] * dw_n<T, S>(xv[e] * r);
  }
};

}  // namespace

void launch_rmsnorm_fwd(void* y, float* rstd, const void* x, const void* w, DType t, int64_t T,
                        int64_t H, float eps, RmsNormStyle style, cudaStream_t stream) {
  if (T == 0) return;
  const bool vec = H % kVec == 0 && aligned16(y) && aligned16(x) && aligned16(w);
  by_dtype(t, [&](auto tag) {
    using T_ = decltype(tag);
    by_style(style, [&](auto sty) {
      rmsnorm_fwd_kernel<T_, decltype(sty)::value>
          <<<blocks_for(T, kWarps), kWarps * 32, 0, stream>>>(
              static_cast<T_*>(y), rstd, static_cast<const T_*>(x), static_cast<const T_*>(w), T, H,
              eps, vec);
    });
  });
  check_launch("rmsnorm_fwd");
}

void launch_rmsnorm_bwd(void* dx, bool accumulate_dx, float* dw, float beta_dw, const void* dy,
                        const void* x, const void* w, const float* rstd, DType t, int64_t T,
                        int64_t H, RmsNormStyle style, cudaStream_t stream) {
  if (H == 0) return;
  const bool vec = H % kVec == 0 && aligned16(dx) && aligned16(dy) && aligned16(x) && aligned16(w);
  by_dtype(t, [&](auto tag) {
    using T_ = decltype(tag);
    const auto* pdy = static_cast<const T_*>(dy);
    const auto* px = static_cast<const T_*>(x);
    by_style(style, [&](auto sty) {
      constexpr RmsNormStyle S = decltype(sty)::value;
      colsum(dw, beta_dw, T, H, vec, DwTerm<T_, S, 8>{pdy, px, rstd, H},
             DwTerm<T_, S, 1>{pdy, px, rstd, H}, stream);
      check_launch("rmsnorm_bwd");
      if (T > 0)
        rmsnorm_dx_kernel<T_, S><<<blocks_for(T, kWarps), kWarps * 32, 0, stream>>>(
            static_cast<T_*>(dx), accumulate_dx, pdy, px, static_cast<const T_*>(w), rstd, T, H,
            vec);
    });
  });
  check_launch("rmsnorm_bwd");
}

}  // namespace zt::cuda
