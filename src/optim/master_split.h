// The fp32 master weight of a bf16 model stored as two 16-bit halves: the bf16 compute weight (hi)
// and 16 low bits (lo) beside it, so a GPU holds 2 bytes of master state per parameter instead of
// 4 beside the 2-byte compute copy (DESIGN §6 "AdamW").
//
// The compute weight is the master rounded to bf16 to NEAREST, TIES AWAY FROM ZERO: on the fp32
// bits u (sign | magnitude), hi = (u + 0x8000) >> 16 — the carry out of the low half rounds the
// magnitude up exactly when the dropped bits are ≥ half an ulp. Then u's high half is hi, or hi − 1
// when the low half lo = u & 0xffff has its top bit set (the carry happened), so
//   u = ((hi − (lo >> 15)) << 16) | lo
// gives the master back bit for bit from (hi, lo) for every non-NaN u (±0, subnormals, ±inf and
// the overflow of the largest finite values to ±inf included). Round-to-nearest-EVEN — torch's
// `.to(torch.bfloat16)` — cannot be split this way: an even hi has 2^16 + 1 fp32 preimages (both
// ties round to it), one more than 16 low bits can tell apart. The two roundings differ only when
// the dropped half is exactly 0x8000 (after an AdamW update, about one element in 2^16 per step),
// and then by one bf16 ulp. Every path that rounds master weights to compute weights uses this
// rounding (device and host AdamW, the offloaded update, a resumed checkpoint), so offload on/off
// and the ZeRO stages stay bitwise equal.
//
// NaN: the compute weight is the quiet NaN f32_to_bf16 (core/dtype.h) gives, and lo drops its top
// bit, so (hi, lo) decodes to a NaN again (its payload may differ from the master's).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define ZT_SPLIT_HD __host__ __device__ __forceinline__
#else
#define ZT_SPLIT_HD [[gnu::always_inline]] inline
#endif

namespace zt::optim {

ZT_SPLIT_HD uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

ZT_SPLIT_HD float f32_from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

ZT_SPLIT_HD bool f32_bits_nan(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }

// The compute weight of master weight f: bf16 round to nearest, ties away from zero (written with
// selects so that CPU loops vectorise).
ZT_SPLIT_HD uint16_t master_hi(float f) {
  const uint32_t u = f32_bits(f);
  return static_cast<uint16_t>(f32_bits_nan(u) ? (u >> 16) | 0x40u : (u + 0x8000u) >> 16);
}

// The low half stored beside master_hi(f).
ZT_SPLIT_HD uint16_t master_lo(float f) {
  const uint32_t u = f32_bits(f);
  return static_cast<uint16_t>(f32_bits_nan(u) ? u & 0x7fffu : u & 0xffffu);
}

// The master weight from its two halves: exact inverse of (master_hi, master_lo) for non-NaN f.
ZT_SPLIT_HD float master_join(uint16_t hi, uint16_t lo) {
  const uint32_t top = static_cast<uint16_t>(hi - (lo >> 15));
  return f32_from_bits((top << 16) | lo);
}

}  // namespace zt::optim
