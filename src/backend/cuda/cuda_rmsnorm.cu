// RMSNorm forward and backward on CUDA (HF LlamaRMSNorm / Olmo2RMSNorm / Gemma3RMSNorm by
// RmsNormStyle, ops.h). The style is a template argument: the statistics, the row mapping and the
// sums are the same for every style; only the per-element output, weight and dw term differ
// (norm_out, eff_w, dw_n below).
// CPU reference: CpuOps::rmsnorm_fwd / rmsnorm_bwd (backend/cpu/cpu_rmsnorm.cpp); the per-element
// arithmetic is the CPU's, only the order of the row and column sums differs (fixed trees here).
//
// Backward, bf16 with H % 8 == 0, 1024 <= H <= 2048, aligned, given the workspace: one pass
// (rmsnorm_bwd_fused_kernel): a warp per row loads the row's dy and x once into registers, forms
// the row sum, writes dx and adds the row's dw terms into its own fp32 row of shared memory; the
// block then adds its warps' rows in warp order into one [H] partial per block (the workspace), and
// rmsnorm_dw_sum_kernel adds the partials in a fixed order into dw. Otherwise (f32, odd widths, no
// workspace) two passes: (1) dw from dy and x by the column-sum kernel (cuda_colsum.cuh), run
// before (2) overwrites anything, since dx may alias dy; (2) dx row by row (rmsnorm_dx_kernel).
// dx is computed by the same per-lane arithmetic in the same order on both paths (the same bits);
// dw's rows are summed in a different fixed order.
#include <algorithm>
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

// ---- one-pass backward (bf16)

constexpr int kFusedMaxChunks = 8;                     // 16-byte chunks a lane holds of a row
constexpr int64_t kFusedMaxH = kFusedMaxChunks * 256;  // 2048: 32 lanes × 8 chunks × 8 elements
// Narrower rows (the per-head q/k norms, H = head_dim) keep the two-pass path: a warp would walk
// many short rows one after the other (each a memory latency), where the dx kernel's warp a row
// spreads them over the whole GPU.
constexpr int64_t kFusedMinH = 1024;
constexpr int kFusedMaxWarps = 16;
constexpr size_t kFusedSmemBytes = size_t{96}
                                   << 10;  // the warps' fp32 dw rows, at most (sm_89: 99 KiB)
constexpr int64_t kFusedMaxBlocks = 256;   // partial rows in the workspace, at most
constexpr int64_t kFusedRowsPerWarp = 4;   // a warp's rows at least, before more blocks

// The fused kernel's launch shape, a function of T and H only (so are the bits): W warps a block
// (as many as 16 whose fp32 [W, H] rows fit kFusedSmemBytes), G blocks of R consecutive rows
// (G = min(256, ceil(T / 4W)), R = ceil(T / G)).
struct FusedShape {
  int warps;
  int64_t blocks, rows_per_block;
};
FusedShape fused_shape(int64_t T, int64_t H) {
  const int w = static_cast<int>(
      std::min<int64_t>(kFusedMaxWarps, static_cast<int64_t>(kFusedSmemBytes / (4 * H))));
  const int64_t g =
      std::min<int64_t>(kFusedMaxBlocks, (T + kFusedRowsPerWarp * w - 1) / (kFusedRowsPerWarp * w));
  return {w, g, (T + g - 1) / g};
}

__device__ __forceinline__ void unpack8(const uint4& a, float (&v)[kVec]) {
  const uint32_t w[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    v[2 * k] = __uint_as_float(w[k] << 16);
    v[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
  }
}

// One pass (file comment). Block b takes rows [b·R, min((b+1)·R, T)); warp k of W its rows b·R + k,
// b·R + k + W, …, in increasing order. A lane holds the row's 16-byte chunks g = lane·8 + c·256
// (c < 8, g < H) of dy and x in registers: the row sum runs over them in the order of
// rmsnorm_dx_kernel (so dx has its bits), dx is stored after every dy chunk of the lane was read
// (dx may alias dy), and the dw term dy·dw_n(x·r) of each element is added into the warp's own
// shared fp32 row at that element — each element by one lane, rows in increasing order. After the
// rows: partial[b, j] = Σ_k row_k[j] in warp order. Shared memory: W·H fp32 (dynamic).
template <RmsNormStyle S>
__global__ void __launch_bounds__(kFusedMaxWarps * 32)
    rmsnorm_bwd_fused_kernel(bf16s* dx, bool accumulate, const bf16s* dy, const bf16s* x,
                             const bf16s* w, const float* rstd, int64_t rows, int64_t H,
                             int64_t rows_per_block, float* partial) {
  extern __shared__ float sdw[];  // [W][H]
  const int warps = static_cast<int>(blockDim.x / 32), warp = static_cast<int>(threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  float* mine = sdw + static_cast<int64_t>(warp) * H;
#pragma unroll
  for (int c = 0; c < kFusedMaxChunks; ++c) {
    const int64_t g = lane * kVec + c * 256;
    if (g < H)
#pragma unroll
      for (int e = 0; e < kVec; ++e) mine[g + e] = 0.0f;
  }
  const int64_t t0 = static_cast<int64_t>(blockIdx.x) * rows_per_block;
  const int64_t t1 = t0 + rows_per_block < rows ? t0 + rows_per_block : rows;
  for (int64_t t = t0 + warp; t < t1; t += warps) {  // uniform in the warp
    const float r = rstd[t];
    const bf16s* xr = x + t * H;
    const bf16s* gr = dy + t * H;
    bf16s* dxr = dx + t * H;
    uint4 xc[kFusedMaxChunks], gc[kFusedMaxChunks];
#pragma unroll
    for (int c = 0; c < kFusedMaxChunks; ++c) {
      const int64_t g = lane * kVec + c * 256;
      if (g < H) {
        xc[c] = *reinterpret_cast<const uint4*>(xr + g);
        gc[c] = *reinterpret_cast<const uint4*>(gr + g);
      }
    }
    float dot = 0.0f;
#pragma unroll
    for (int c = 0; c < kFusedMaxChunks; ++c) {
      const int64_t g = lane * kVec + c * 256;
      if (g < H) {
        float xv[kVec], gv[kVec], wv[kVec];
        unpack8(xc[c], xv);
        unpack8(gc[c], gv);
        ld8(w, g, wv);
#pragma unroll
        for (int e = 0; e < kVec; ++e) dot += (gv[e] * eff_w<S>(wv[e])) * (xv[e] * r);
      }
    }
    const float mean = warp_sum(dot) / static_cast<float>(H);
#pragma unroll
    for (int c = 0; c < kFusedMaxChunks; ++c) {
      const int64_t g = lane * kVec + c * 256;
      if (g < H) {
        float xv[kVec], gv[kVec], wv[kVec], o[kVec];
        unpack8(xc[c], xv);
        unpack8(gc[c], gv);
        ld8(w, g, wv);
        if (accumulate) ld8(dxr, g, o);
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          const float v = r * (gv[e] * eff_w<S>(wv[e]) - (xv[e] * r) * mean);
          o[e] = accumulate ? o[e] + v : v;
          mine[g + e] += gv[e] * dw_n<bf16s, S>(xv[e] * r);
        }
        st8(dxr, g, o);
      }
    }
  }
  __syncthreads();
  float* out = partial + static_cast<int64_t>(blockIdx.x) * H;
  for (int64_t j = threadIdx.x; j < H; j += blockDim.x) {
    float s = sdw[j];
    for (int k = 1; k < warps; ++k) s += sdw[static_cast<int64_t>(k) * H + j];
    out[j] = s;
  }
}

// dw[j] = (beta == 0 ? 0 : beta·dw[j]) + Σ_b partial[b, j]: a block takes 32 columns; its 8 warps
// sum the partials b ≡ warp (mod 8) in increasing b, then thread (0, j) adds the 8 in warp order.
__global__ void __launch_bounds__(256)
    rmsnorm_dw_sum_kernel(float* dw, float beta, const float* partial, int64_t blocks, int64_t H) {
  __shared__ float s[8][32];
  const int col = static_cast<int>(threadIdx.x % 32), grp = static_cast<int>(threadIdx.x / 32);
  const int64_t j = static_cast<int64_t>(blockIdx.x) * 32 + col;
  float acc = 0.0f;
  if (j < H)
    for (int64_t b = grp; b < blocks; b += 8) acc += partial[b * H + j];
  s[grp][col] = acc;
  __syncthreads();
  if (grp == 0 && j < H) {
    float t = s[0][col];
#pragma unroll
    for (int k = 1; k < 8; ++k) t += s[k][col];
    dw[j] = (beta == 0.0f ? 0.0f : beta * dw[j]) + t;
  }
}

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

size_t rmsnorm_bwd_workspace_bytes(DType t, int64_t T, int64_t H) {
  if (t != DType::kBF16 || T <= 0 || H < kFusedMinH || H % kVec != 0 || H > kFusedMaxH) return 0;
  const FusedShape f = fused_shape(T, H);
  return static_cast<size_t>(f.blocks * H) * 4;
}

void launch_rmsnorm_bwd(void* dx, bool accumulate_dx, float* dw, float beta_dw, const void* dy,
                        const void* x, const void* w, const float* rstd, DType t, int64_t T,
                        int64_t H, RmsNormStyle style, void* workspace, size_t workspace_bytes,
                        cudaStream_t stream) {
  if (H == 0) return;
  const bool vec = H % kVec == 0 && aligned16(dx) && aligned16(dy) && aligned16(x) && aligned16(w);
  const size_t need = rmsnorm_bwd_workspace_bytes(t, T, H);
  if (vec && need > 0 && workspace != nullptr && workspace_bytes >= need && aligned16(workspace)) {
    const FusedShape f = fused_shape(T, H);
    const size_t smem = static_cast<size_t>(f.warps) * static_cast<size_t>(H) * 4;
    auto* partial = static_cast<float*>(workspace);
    by_style(style, [&](auto sty) {
      constexpr RmsNormStyle S = decltype(sty)::value;
      static const bool attr_set = [] {  // once per style: up to kFusedSmemBytes of dynamic smem
        check(cudaFuncSetAttribute(rmsnorm_bwd_fused_kernel<S>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(kFusedSmemBytes)),
              "rmsnorm_bwd");
        return true;
      }();
      (void)attr_set;
      rmsnorm_bwd_fused_kernel<S>
          <<<static_cast<unsigned>(f.blocks), static_cast<unsigned>(f.warps * 32), smem, stream>>>(
              static_cast<bf16s*>(dx), accumulate_dx, static_cast<const bf16s*>(dy),
              static_cast<const bf16s*>(x), static_cast<const bf16s*>(w), rstd, T, H,
              f.rows_per_block, partial);
    });
    check_launch("rmsnorm_bwd");
    rmsnorm_dw_sum_kernel<<<static_cast<unsigned>((H + 31) / 32), 256, 0, stream>>>(
        dw, beta_dw, partial, f.blocks, H);
    check_launch("rmsnorm_bwd");
    return;
  }
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
