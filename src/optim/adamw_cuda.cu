// The CUDA AdamW kernel (adamw_cuda, adamw.h): adamw_element() per element, as adamw_cpu.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.cuh"
#include "optim/adamw.h"
#include "optim/master_split.h"

namespace zt::optim {
namespace {

constexpr int kThreads = 256;
constexpr int kPer = 4;  // elements per thread

// p, m, v updated in place from g; pb = bf16(p) when kBf16. One thread per kPer consecutive
// elements (16-byte loads/stores of p, m, v, g and an 8-byte store of pb when every pointer is
// aligned, else element by element). Traffic: 16 bytes read + 12 (+2) written per element.
// Elementwise: nothing depends on the grid, and adamw_element_t's __f*_rn intrinsics round every
// operation exactly as the CPU's IEEE operations do (no contraction), hence adamw_cpu's bits.
template <bool kFromM, bool kBf16>
__global__ void __launch_bounds__(kThreads)
    adamw_kernel(const AdamWStep s, float* p, float* m, float* v, const float* g, int64_t n,
                 uint16_t* pb, bool vec) {
  const int64_t i0 = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) * kPer;
  if (i0 >= n) return;
  if (vec && i0 + kPer <= n) {
    float4 P = *reinterpret_cast<const float4*>(p + i0);
    float4 M = *reinterpret_cast<const float4*>(m + i0);
    float4 V = *reinterpret_cast<const float4*>(v + i0);
    const float4 G = *reinterpret_cast<const float4*>(g + i0);
    adamw_element_t<kFromM>(s, P.x, M.x, V.x, G.x);
    adamw_element_t<kFromM>(s, P.y, M.y, V.y, G.y);
    adamw_element_t<kFromM>(s, P.z, M.z, V.z, G.z);
    adamw_element_t<kFromM>(s, P.w, M.w, V.w, G.w);
    *reinterpret_cast<float4*>(p + i0) = P;
    *reinterpret_cast<float4*>(m + i0) = M;
    *reinterpret_cast<float4*>(v + i0) = V;
    if constexpr (kBf16) {
      const uint2 b = make_uint2(master_hi(P.x) | (static_cast<uint32_t>(master_hi(P.y)) << 16),
                                 master_hi(P.z) | (static_cast<uint32_t>(master_hi(P.w)) << 16));
      *reinterpret_cast<uint2*>(pb + i0) = b;
    }
  } else {
    const int64_t i1 = i0 + kPer < n ? i0 + kPer : n;
    for (int64_t i = i0; i < i1; ++i) {
      adamw_element_t<kFromM>(s, p[i], m[i], v[i], g[i]);
      if constexpr (kBf16) pb[i] = master_hi(p[i]);
    }
  }
}

// The split master (optim/master_split.h): p joined from hi / lo, updated, split back. kPer
// consecutive elements per thread (8-byte loads/stores of hi and lo, 16-byte of m, v, g when every
// pointer is aligned). Traffic: 16 bytes read + 12 written per element.
template <bool kFromM>
__global__ void __launch_bounds__(kThreads)
    adamw_split_kernel(const AdamWStep s, uint16_t* hi, uint16_t* lo, float* m, float* v,
                       const float* g, int64_t n, bool vec) {
  const int64_t i0 = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) * kPer;
  if (i0 >= n) return;
  if (vec && i0 + kPer <= n) {
    const uint2 H = *reinterpret_cast<const uint2*>(hi + i0);
    const uint2 L = *reinterpret_cast<const uint2*>(lo + i0);
    float4 M = *reinterpret_cast<const float4*>(m + i0);
    float4 V = *reinterpret_cast<const float4*>(v + i0);
    const float4 G = *reinterpret_cast<const float4*>(g + i0);
    float P[4] = {master_join(H.x & 0xffffu, L.x & 0xffffu), master_join(H.x >> 16, L.x >> 16),
                  master_join(H.y & 0xffffu, L.y & 0xffffu), master_join(H.y >> 16, L.y >> 16)};
    adamw_element_t<kFromM>(s, P[0], M.x, V.x, G.x);
    adamw_element_t<kFromM>(s, P[1], M.y, V.y, G.y);
    adamw_element_t<kFromM>(s, P[2], M.z, V.z, G.z);
    adamw_element_t<kFromM>(s, P[3], M.w, V.w, G.w);
    const auto pack = [](uint16_t a, uint16_t b) {
      return static_cast<uint32_t>(a) | (static_cast<uint32_t>(b) << 16);
    };
    *reinterpret_cast<uint2*>(hi + i0) =
        make_uint2(pack(master_hi(P[0]), master_hi(P[1])), pack(master_hi(P[2]), master_hi(P[3])));
    *reinterpret_cast<uint2*>(lo + i0) =
        make_uint2(pack(master_lo(P[0]), master_lo(P[1])), pack(master_lo(P[2]), master_lo(P[3])));
    *reinterpret_cast<float4*>(m + i0) = M;
    *reinterpret_cast<float4*>(v + i0) = V;
  } else {
    const int64_t i1 = i0 + kPer < n ? i0 + kPer : n;
    for (int64_t i = i0; i < i1; ++i) {
      float p = master_join(hi[i], lo[i]);
      adamw_element_t<kFromM>(s, p, m[i], v[i], g[i]);
      hi[i] = master_hi(p);
      lo[i] = master_lo(p);
    }
  }
}

}  // namespace

void adamw_split_cuda(const AdamWStep& s, uint16_t* hi, uint16_t* lo, float* m, float* v,
                      const float* g, size_t n, void* stream) {
  if (n == 0) return;
  const auto N = static_cast<int64_t>(n);
  const auto a8 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 7u) == 0; };
  const bool vec =
      a8(hi) && a8(lo) && cuda::aligned16(m) && cuda::aligned16(v) && cuda::aligned16(g);
  const unsigned grid = cuda::blocks_for((N + kPer - 1) / kPer, kThreads);
  const auto st = static_cast<cudaStream_t>(stream);
  if (s.lerp_from_m)
    adamw_split_kernel<true><<<grid, kThreads, 0, st>>>(s, hi, lo, m, v, g, N, vec);
  else
    adamw_split_kernel<false><<<grid, kThreads, 0, st>>>(s, hi, lo, m, v, g, N, vec);
  cuda::check_launch("adamw_split_cuda");
}

void adamw_cuda(const AdamWStep& s, float* p, float* m, float* v, const float* g, size_t n,
                uint16_t* p_bf16, void* stream) {
  if (n == 0) return;
  const auto N = static_cast<int64_t>(n);
  const bool vec = cuda::aligned16(p) && cuda::aligned16(m) && cuda::aligned16(v) &&
                   cuda::aligned16(g) && (reinterpret_cast<uintptr_t>(p_bf16) & 7u) == 0;
  const unsigned grid = cuda::blocks_for((N + kPer - 1) / kPer, kThreads);
  const auto st = static_cast<cudaStream_t>(stream);
  if (s.lerp_from_m) {
    if (p_bf16)
      adamw_kernel<true, true><<<grid, kThreads, 0, st>>>(s, p, m, v, g, N, p_bf16, vec);
    else
      adamw_kernel<true, false><<<grid, kThreads, 0, st>>>(s, p, m, v, g, N, p_bf16, vec);
  } else {
    if (p_bf16)
      adamw_kernel<false, true><<<grid, kThreads, 0, st>>>(s, p, m, v, g, N, p_bf16, vec);
    else
      adamw_kernel<false, false><<<grid, kThreads, 0, st>>>(s, p, m, v, g, N, p_bf16, vec);
  }
  cuda::check_launch("adamw_cuda");
}

}  // namespace zt::optim
