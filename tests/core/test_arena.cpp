#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/arena.h"
#include "zt_test_util.h"

namespace {

using zt::Arena;
using zt::DType;
using zt::testing::expect_error;

TEST(Arena, PlansAlignedOffsetsAndCarvesViews) {
  zt::HostMemory host;
  Arena a("parameters", host);
  const auto s0 = a.reserve("embed", DType::kF32, {10, 3});       // 120 B at 0
  const auto s1 = a.reserve("bias", 4);                           // 4 B at 128
  const auto s2 = a.reserve("empty", 0);                          // 0 B at 192
  const auto s3 = a.reserve("norm", DType::kBF16, {2, 2, 2, 2});  // 32 B at 192
  EXPECT_EQ(a.offset(s0), 0u);
  EXPECT_EQ(a.offset(s1), 128u);
  EXPECT_EQ(a.offset(s2), 192u);
  EXPECT_EQ(a.offset(s3), 192u);
  EXPECT_EQ(a.bytes(s0), 120u);
  EXPECT_EQ(a.planned_bytes(), 256u);
  EXPECT_EQ(a.size(), 4u);
  EXPECT_FALSE(a.allocated());
  expect_error([&] { a.ptr(s0); }, {"arena 'parameters'", "view 'embed' used before allocate()"});

  a.allocate();
  ASSERT_TRUE(a.allocated());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.base()) % Arena::kAlignment, 0u);
  for (Arena::Slot s : {s0, s1, s2, s3})
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.ptr(s)) % Arena::kAlignment, 0u);
  const zt::Tensor t = a.tensor(s0);
  EXPECT_EQ(t.describe(), "[10, 3] f32");
  EXPECT_EQ(t.data, a.base());
  EXPECT_EQ(t.device, zt::Device::kCPU);
  EXPECT_EQ(a.tensor(s1).describe(), "[4] u8");
  EXPECT_EQ(a.tensor(s3).describe(), "[2, 2, 2, 2] bf16");
  EXPECT_EQ(static_cast<char*>(a.ptr(s1)) - static_cast<char*>(a.base()), 128);
  EXPECT_EQ(a.find("norm"), s3);
  EXPECT_EQ(a.name(s1), "bias");

  a.zero_host();
  float* e = t.as<float>();
  for (int i = 0; i < 30; ++i) EXPECT_EQ(e[i], 0.0f);
  e[29] = 1.5f;
  EXPECT_EQ(a.view(s0, DType::kF32, {30}).as<float>()[29], 1.5f);
  EXPECT_EQ(a.view(s0, DType::kBF16, {60}).describe(), "[60] bf16");
  expect_error(
      [&] { a.view(s0, DType::kF32, {31}); },
      {"arena 'parameters'", "view 'embed' reserved 120 bytes", "[31] f32 needs 124 bytes"});
  expect_error(
      [&] { a.reserve("late", 8); },
      {"arena 'parameters'", "cannot reserve 'late' (8 bytes) after the pool was allocated"});
  expect_error([&] { a.find("nope"); }, {"arena 'parameters': no view named 'nope'"});
  expect_error([&] { a.tensor(7); }, {"slot 7 out of range (4 views)"});
}

TEST(Arena, OutOfMemoryNamesPoolAndBytes) {
  zt::HostMemory small(1000);
  Arena a("activations", small);
  a.reserve("x", DType::kF32, {100});      // 400 B
  a.reserve("big", DType::kBF16, {1000});  // 2000 B at 448
  EXPECT_EQ(a.planned_bytes(), 2496u);
  expect_error([&] { a.allocate(); },
               {"out of memory: pool 'activations' needs 2496 bytes (2.4 KiB) on host",
                "2 views; largest 'big' 2000 bytes"});
  EXPECT_THROW(a.allocate(), zt::OutOfMemoryError);  // the type a caller catches to name a setting
  EXPECT_FALSE(a.allocated());
}

TEST(Arena, RejectsDuplicateNamesAndBadShapes) {
  zt::HostMemory host;
  Arena a("gradients", host);
  a.reserve("w", 16);
  expect_error([&] { a.reserve("w", 32); }, {"arena 'gradients': view 'w' reserved twice"});
  expect_error(
      [&] {
        a.reserve("neg", DType::kF32, {2, -3});
      },
      {"view 'neg'", "negative dimension"});
  expect_error(
      [&] {
        a.reserve("five", DType::kF32, std::vector<int64_t>{1, 2, 3, 4, 5});
      },
      {"view 'five' has 5 dimensions, at most 4"});
}

TEST(Arena, AdoptsCallerMemory) {
  alignas(64) static std::byte slab[256];
  Arena a("device-like");
  const auto s = a.reserve("w", DType::kF32, {8});
  const auto t = a.reserve("v", DType::kF32, {8});
  expect_error([&] { a.allocate(); }, {"arena 'device-like': no memory resource"});
  expect_error([&] { a.adopt(slab, 64, zt::Device::kCUDA); },
               {"adopted memory holds 64 bytes, the plan needs 128 bytes"});
  expect_error([&] { a.adopt(slab + 8, 200, zt::Device::kCUDA); }, {"not 64-byte aligned"});
  a.adopt(slab, sizeof slab, zt::Device::kCUDA);
  EXPECT_EQ(a.ptr(s), static_cast<void*>(slab));
  EXPECT_EQ(a.ptr(t), static_cast<void*>(slab + 64));
  EXPECT_EQ(a.tensor(t).device, zt::Device::kCUDA);
  expect_error([&] { a.zero_host(); }, {"zero_host() on device memory"});
  a.release();  // must not free the caller's slab
  EXPECT_FALSE(a.allocated());
}

TEST(Arena, MovesOwnership) {
  zt::HostMemory host;
  Arena a("parameters", host);
  const auto s = a.reserve("w", DType::kF32, {4});
  a.allocate();
  void* p = a.ptr(s);
  Arena b = std::move(a);
  EXPECT_EQ(b.ptr(s), p);
  EXPECT_EQ(b.pool(), "parameters");
  EXPECT_FALSE(a.allocated());  // NOLINT(bugprone-use-after-move): moved-from is empty
  b.release();
  b.allocate();  // planning kept: can allocate again
  EXPECT_EQ(b.tensor(s).describe(), "[4] f32");
}

TEST(Arena, FormatsBytes) {
  EXPECT_EQ(zt::format_bytes(0), "0 B");
  EXPECT_EQ(zt::format_bytes(1023), "1023 B");
  EXPECT_EQ(zt::format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(zt::format_bytes(size_t{3} << 30), "3.0 GiB");
}

}  // namespace
