#include "core/dtype.h"

#include "core/error.h"

namespace zt {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
    case DType::kI32:
      return "i32";
    case DType::kI64:
      return "i64";
    case DType::kU8:
      return "u8";
  }
  return "?";
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13);  // inf / NaN
  } else if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while ((man & 0x400u) == 0);
      u = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (man & 0x3ffu) << 13;
    }
  } else {
    u = sign | (exp + 112) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {               // below the smallest f16 normal (2^-14): subnormal or zero
    if (abs < 0x33000000u) return sign;  // < 2^-25: rounds to 0 (2^-25 itself is a tie to even 0)
    const uint32_t exp = abs >> 23;      // 102..112
    const uint32_t man = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // value = man * 2^(exp-150); f16 unit = 2^-24
    const uint32_t q = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    const uint32_t r = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
    return static_cast<uint16_t>(sign | r);  // r == 0x400 carries into the smallest normal
  }
  // normal: rebias exponent (127 -> 15), round 23-bit mantissa to 10 bits, carry may bump exponent
  uint32_t v = abs - (112u << 23);
  v += 0xfffu + ((v >> 13) & 1u);
  return static_cast<uint16_t>(sign | (v >> 13));
}

namespace {
template <typename S, typename D>
void check_sizes(std::span<S> src, std::span<D> dst, const char* what) {
  if (src.size() != dst.size())
    fail("{}: source has {} elements, destination {}", what, src.size(), dst.size());
}
}  // namespace

void f32_to_bf16(std::span<const float> src, std::span<uint16_t> dst) {
  check_sizes(src, dst, "f32_to_bf16");
  for (size_t i = 0; i < src.size(); ++i) dst[i] = f32_to_bf16(src[i]);
}

void bf16_to_f32(std::span<const uint16_t> src, std::span<float> dst) {
  check_sizes(src, dst, "bf16_to_f32");
  for (size_t i = 0; i < src.size(); ++i) dst[i] = bf16_to_f32(src[i]);
}

void f16_to_f32(std::span<const uint16_t> src, std::span<float> dst) {
  check_sizes(src, dst, "f16_to_f32");
  for (size_t i = 0; i < src.size(); ++i) dst[i] = f16_to_f32(src[i]);
}

void f32_to_f16(std::span<const float> src, std::span<uint16_t> dst) {
  check_sizes(src, dst, "f32_to_f16");
  for (size_t i = 0; i < src.size(); ++i) dst[i] = f32_to_f16(src[i]);
}

namespace {
bool is_float(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16; }

// Element i of a float buffer widened to fp32 (exact), per storage dtype.
template <DType T>
inline float widen(const void* src, size_t i) {
  if constexpr (T == DType::kF32) return static_cast<const float*>(src)[i];
  if constexpr (T == DType::kBF16) return bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
  if constexpr (T == DType::kF16) return f16_to_f32(static_cast<const uint16_t*>(src)[i]);
}

// One tight loop per (from, to) pair: widen exactly, round once (RNE) to the destination.
template <DType From>
void convert_from(const void* src, void* dst, DType to, size_t n) {
  if (to == DType::kF32) {
    float* d = static_cast<float*>(dst);
    for (size_t i = 0; i < n; ++i) d[i] = widen<From>(src, i);
  } else if (to == DType::kBF16) {
    uint16_t* d = static_cast<uint16_t*>(dst);
    for (size_t i = 0; i < n; ++i) d[i] = f32_to_bf16(widen<From>(src, i));
  } else {
    uint16_t* d = static_cast<uint16_t*>(dst);
    for (size_t i = 0; i < n; ++i) d[i] = f32_to_f16(widen<From>(src, i));
  }
}
}  // namespace

bool can_convert(DType from, DType to) { return from == to || (is_float(from) && is_float(to)); }

void convert_dtype(const void* src, DType from, void* dst, DType to, size_t n) {
  if (from == to) {
    if (n) std::memcpy(dst, src, n * dtype_size(from));
    return;
  }
  if (!can_convert(from, to))
    fail("cannot convert {} to {}: only f32/bf16/f16 convert into one another", dtype_name(from),
         dtype_name(to));
  switch (from) {
    case DType::kF32:
      return convert_from<DType::kF32>(src, dst, to, n);
    case DType::kBF16:
      return convert_from<DType::kBF16>(src, dst, to, n);
    default:
      return convert_from<DType::kF16>(src, dst, to, n);
  }
}

}  // namespace zt
