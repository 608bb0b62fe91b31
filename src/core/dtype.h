// Element types and the bf16 <-> fp32 conversions every backend uses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

namespace zt {

// Storage element type of a Tensor. bf16/f16 are 2-byte storage types; arithmetic is fp32.
enum class DType : uint8_t { kF32, kBF16, kF16, kI32, kI64, kU8 };

// Size of one element in bytes.
constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32:
      return 4;
    case DType::kBF16:
      return 2;
    case DType::kF16:
      return 2;
    case DType::kI32:
      return 4;
    case DType::kI64:
      return 8;
    case DType::kU8:
      return 1;
  }
  return 0;
}

// Short lowercase name ("f32", "bf16", …) for messages.
std::string_view dtype_name(DType t);

// fp32 -> bf16 with round-to-nearest-even (torch's `.to(torch.bfloat16)`); NaN stays a quiet NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// bf16 -> fp32, exact.
inline float bf16_to_f32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// IEEE binary16 -> fp32, exact (subnormals, inf and NaN included).
float f16_to_f32(uint16_t h);

// fp32 -> IEEE binary16 with round-to-nearest-even (torch's `.to(torch.float16)`): overflow gives
// ±inf, tiny values round to subnormals / ±0, NaN stays a quiet NaN (sign and top payload bits
// kept, as x86 F16C `vcvtps2ph` does).
uint16_t f32_to_f16(float f);

// ---- Vector conversions (element i of dst from element i of src; src.size() must equal
// dst.size(), else zt::Error). Bit-exact with the scalar functions above; safe to call on
// non-overlapping host buffers only.

// fp32 [n] -> bf16 [n], round-to-nearest-even (f32_to_bf16 per element).
void f32_to_bf16(std::span<const float> src, std::span<uint16_t> dst);
// bf16 [n] -> fp32 [n], exact.
void bf16_to_f32(std::span<const uint16_t> src, std::span<float> dst);
// f16 [n] -> fp32 [n], exact.
void f16_to_f32(std::span<const uint16_t> src, std::span<float> dst);
// fp32 [n] -> f16 [n], round-to-nearest-even.
void f32_to_f16(std::span<const float> src, std::span<uint16_t> dst);

// True when convert_dtype() can turn `from` into `to`: any of F32/BF16/F16 into any of F32/BF16/F16
// (through exact fp32 widening, then one RNE rounding), and any dtype into itself (a byte copy).
bool can_convert(DType from, DType to);

// Converts `n` elements at host pointer `src` (dtype `from`) into `dst` (dtype `to`). Float
// conversions go through fp32: bf16/f16 -> f32 exact, f32 -> bf16/f16 RNE, so bf16 -> f16 is
// rounded once from the exact value. Same dtype is memcpy. Throws zt::Error naming both dtypes when
// !can_convert(from, to). Buffers must not overlap.
void convert_dtype(const void* src, DType from, void* dst, DType to, size_t n);

}  // namespace zt
