// Device-side helpers shared by the CUDA kernels (include from .cu files only): fp32 / bf16-storage
// element access with the CPU backend's rounding (backend/cpu/cpu_common.h), 8-element vector
// access, fixed-order warp sums and the out-of-vocabulary record.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_kernels.h"

namespace zt::cuda {

// bf16 storage element (raw bits), as cpu::bf16_t: arithmetic always happens on the fp32 value.
struct bf16s {
  uint16_t bits;
};

__device__ __forceinline__ float bf16_to_f32(uint16_t h) {
  return __uint_as_float(static_cast<uint32_t>(h) << 16);
}
// fp32 -> bf16 round to nearest even, NaN kept quiet: the same bits as zt::f32_to_bf16
// (core/dtype.h) for every input, NaN payloads included (cuda_bf16.h's conversion canonicalises NaN
// instead).
__device__ __forceinline__ uint16_t f32_to_bf16(float f) {
  const uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

__device__ __forceinline__ float ld(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float ld(const bf16s* p, int64_t i) { return bf16_to_f32(p[i].bits); }
__device__ __forceinline__ void st(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void st(bf16s* p, int64_t i, float v) { p[i].bits = f32_to_bf16(v); }

// v rounded to the precision of storage type T (identity for fp32, RNE to bf16 and back).
template <class T>
__device__ __forceinline__ float round_to(float v) {
  if constexpr (sizeof(T) == 2) {
    return bf16_to_f32(f32_to_bf16(v));
  } else {
    return v;
  }
}

// Elements per vector access: 8 (one 16-byte load for bf16, two for fp32).
constexpr int kVec = 8;

// v[0..8) = p[i..i+8) widened to fp32; p + i must be 16-byte aligned.
__device__ __forceinline__ void ld8(const float* p, int64_t i, float (&v)[kVec]) {
  const float4 a = *reinterpret_cast<const float4*>(p + i);
  const float4 b = *reinterpret_cast<const float4*>(p + i + 4);
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
__device__ __forceinline__ void ld8(const bf16s* p, int64_t i, float (&v)[kVec]) {
  const uint4 a = *reinterpret_cast<const uint4*>(p + i);
  const uint32_t w[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    v[2 * k] = __uint_as_float(w[k] << 16);
    v[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
  }
}
// p[i..i+8) = v rounded to the storage type; p + i must be 16-byte aligned.
__device__ __forceinline__ void st8(float* p, int64_t i, const float (&v)[kVec]) {
  *reinterpret_cast<float4*>(p + i) = make_float4(v[0], v[1], v[2], v[3]);
  *reinterpret_cast<float4*>(p + i + 4) = make_float4(v[4], v[5], v[6], v[7]);
}
__device__ __forceinline__ void st8(bf16s* p, int64_t i, const float (&v)[kVec]) {
  uint32_t w[4];
#pragma unroll
  for (int k = 0; k < 4; ++k)
    w[k] = static_cast<uint32_t>(f32_to_bf16(v[2 * k])) |
           (static_cast<uint32_t>(f32_to_bf16(v[2 * k + 1])) << 16);
  *reinterpret_cast<uint4*>(p + i) = make_uint4(w[0], w[1], w[2], w[3]);
}

// Sum of v over the 32 lanes of a warp by an xor butterfly (offsets 16, 8, 4, 2, 1). Every lane
// gets the same bits: each level adds a pair in both orders, and IEEE addition is commutative. The
// tree is fixed, so the result depends on the lane values only. All 32 lanes must call it.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o >= 1; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Records an out-of-vocabulary id in the status record (layout in cuda_kernels.h): the first op
// to record since the last reset owns the record (later ops leave it alone), and within that op
// the smallest position wins (64-bit atomicMin on (position, value)) — so the reported id does not
// depend on thread scheduling. Integer atomics only.
__device__ __forceinline__ void record_bad_id(int32_t* status, StatusOp op, int64_t pos,
                                              int32_t value, int64_t vocab) {
  const int32_t prev = atomicCAS(&status[kStatusOp], 0, static_cast<int32_t>(op));
  if (prev != 0 && prev != static_cast<int32_t>(op)) return;
  const unsigned long long key =
      (static_cast<unsigned long long>(pos) << 32) | static_cast<uint32_t>(value);
  atomicMin(reinterpret_cast<unsigned long long*>(status + kStatusKey), key);
  status[kStatusVocab] = static_cast<int32_t>(vocab);
}

// Calls fn(T{}) with T = float for kF32, bf16s otherwise (the caller checked the dtype).
template <class Fn>
void by_dtype(DType t, Fn&& fn) {
  if (t == DType::kF32)
    fn(float{});
  else
    fn(bf16s{});
}

// Blocks for `n` work items of `threads` per block (at least 1).
inline unsigned blocks_for(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : b);
}

// True when p is 16-byte aligned (vector loads allowed).
inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace zt::cuda
