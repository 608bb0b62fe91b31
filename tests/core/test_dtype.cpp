// dtype conversions against torch (tests/data/io/convert_edges.json, tools/make_io_goldens.py).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/file_util.h"
#include "io/json.h"
#include "zt_test_util.h"

namespace {

using zt::DType;

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

zt::Json edges() {
  return zt::Json::parse(zt::read_file(std::string(ZT_TEST_DATA) + "/io/convert_edges.json"));
}

TEST(DType, Bf16RoundToNearestEvenMatchesTorch) {
  const zt::Json g = edges();
  const auto& in = g["f32_bits"];
  const auto& want = g["bf16_bits"];
  ASSERT_EQ(in.size(), want.size());
  ASSERT_GT(in.size(), 200u);
  for (size_t i = 0; i < in.size(); ++i) {
    const uint32_t u = in[i].get<uint32_t>();
    EXPECT_EQ(zt::f32_to_bf16(from_bits(u)), want[i].get<uint16_t>()) << std::hex << "f32 0x" << u;
  }
  // Hand-checked anchors: a tie rounds to even (down and up), fp32 max overflows to inf.
  EXPECT_EQ(zt::f32_to_bf16(from_bits(0x3F808000u)), 0x3F80);
  EXPECT_EQ(zt::f32_to_bf16(from_bits(0x3F818000u)), 0x3F82);
  EXPECT_EQ(zt::f32_to_bf16(from_bits(0x7F7FFFFFu)), 0x7F80);
  EXPECT_EQ(zt::f32_to_bf16(from_bits(0x7F7F7FFFu)), 0x7F7F);
}

TEST(DType, F16RoundToNearestEvenMatchesTorch) {
  const zt::Json g = edges();
  const auto& in = g["f32_bits"];
  const auto& want = g["f16_bits"];
  ASSERT_EQ(in.size(), want.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const uint32_t u = in[i].get<uint32_t>();
    EXPECT_EQ(zt::f32_to_f16(from_bits(u)), want[i].get<uint16_t>()) << std::hex << "f32 0x" << u;
  }
  EXPECT_EQ(zt::f32_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(zt::f32_to_f16(65520.0f), 0x7C00);               // tie above max rounds to inf
  EXPECT_EQ(zt::f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // tie to even: 0
  EXPECT_EQ(zt::f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);
}

TEST(DType, NanStaysNanWithSign) {
  const zt::Json g = edges();
  for (const auto& b : g["nan_f32_bits"]) {
    const uint32_t u = b.get<uint32_t>();
    const float x = from_bits(u);
    const uint16_t h = zt::f32_to_bf16(x);
    EXPECT_TRUE(std::isnan(zt::bf16_to_f32(h))) << std::hex << u;
    EXPECT_EQ(h >> 15, u >> 31);
    const uint16_t f = zt::f32_to_f16(x);
    EXPECT_TRUE(std::isnan(zt::f16_to_f32(f))) << std::hex << u;
    EXPECT_EQ(f >> 15, u >> 31);
  }
}

TEST(DType, EveryHalfPrecisionValueRoundTrips) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const auto v = static_cast<uint16_t>(h);
    const float b = zt::bf16_to_f32(v);
    const float f = zt::f16_to_f32(v);
    if (!std::isnan(b)) {
      EXPECT_EQ(zt::f32_to_bf16(b), v) << std::hex << h;
    }
    if (!std::isnan(f)) {
      EXPECT_EQ(zt::f32_to_f16(f), v) << std::hex << h;
    } else {
      EXPECT_EQ(zt::f32_to_f16(f), v | 0x0200u) << std::hex << h;  // quieted, payload kept
    }
  }
  EXPECT_EQ(zt::f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(zt::f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(zt::f16_to_f32(0xFC00), -INFINITY);
}

TEST(DType, VectorConversionsEqualScalar) {
  const zt::Json g = edges();
  std::vector<float> x;
  for (const auto& b : g["f32_bits"]) x.push_back(from_bits(b.get<uint32_t>()));
  std::vector<uint16_t> bf(x.size()), hf(x.size());
  zt::f32_to_bf16(x, bf);
  zt::f32_to_f16(x, hf);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(bf[i], g["bf16_bits"][i].get<uint16_t>());
    EXPECT_EQ(hf[i], g["f16_bits"][i].get<uint16_t>());
  }
  std::vector<float> back(x.size()), back16(x.size());
  zt::bf16_to_f32(bf, back);
  zt::f16_to_f32(hf, back16);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(to_bits(back[i]), static_cast<uint32_t>(bf[i]) << 16);
    EXPECT_EQ(to_bits(back16[i]), to_bits(zt::f16_to_f32(hf[i])));
  }
  std::vector<uint16_t> short_dst(3);
  zt::testing::expect_error(
      [&] { zt::f32_to_bf16(x, short_dst); },
      {"f32_to_bf16", std::to_string(x.size()) + " elements", "destination 3"});
}

TEST(DType, ConvertDtypeGoesThroughFp32) {
  // bf16 -> f16 is one rounding of the exact value: bf16 0x3F81 = 1.0078125 is exact in f16
  // (0x3C08).
  const uint16_t b[3] = {0x3F81, 0xC2F7, 0x7F80};  // 1.0078125, -123.5, inf
  uint16_t h[3];
  zt::convert_dtype(b, DType::kBF16, h, DType::kF16, 3);
  EXPECT_EQ(h[0], 0x3C08);
  EXPECT_EQ(h[1], zt::f32_to_f16(-123.5f));
  EXPECT_EQ(h[2], 0x7C00);
  float f[3];
  zt::convert_dtype(h, DType::kF16, f, DType::kF32, 3);
  EXPECT_EQ(f[0], 1.0078125f);
  EXPECT_EQ(f[1], -123.5f);
  const int32_t ints[2] = {7, -9};
  int32_t ints2[2] = {0, 0};
  zt::convert_dtype(ints, DType::kI32, ints2, DType::kI32, 2);
  EXPECT_EQ(ints2[1], -9);
  EXPECT_TRUE(zt::can_convert(DType::kF16, DType::kBF16));
  EXPECT_FALSE(zt::can_convert(DType::kI32, DType::kF32));
  zt::testing::expect_error([&] { zt::convert_dtype(ints, DType::kI32, f, DType::kF32, 2); },
                            {"cannot convert i32 to f32"});
}

}  // namespace
