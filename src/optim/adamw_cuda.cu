// The CUDA AdamW kernel (adamw_cuda, adamw.h): adamw_element() per element, as adamw_cpu.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.cuh"
#include "optim/adamw.h"

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
      const uint2 b = make_uint2(
          cuda::f32_to_bf16(P.x) | (static_cast<uint32_t>(cuda::f32_to_bf16(P.y)) << 16),
          cuda::f32_to_bf16(P.z) | (static_cast<uint32_t>(cuda::f32_to_bf16(P.w)) << 16));
      *reinterpret_cast<uint2*>(pb + i0) = b;
    }
  } else {
    const int64_t i1 = i0 + kPer < n ? i0 + kPer : n;
    for (int64_t i = i0; i < i1; ++i) {
      adamw_element_t<kFromM>(s, p[i], m[i], v[i], g[i]);
      if constexpr (kBf16) pb[i] = cuda::f32_to_bf16(p[i]);
    }
  }
}

}  // namespace

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
