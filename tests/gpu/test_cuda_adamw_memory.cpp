// adamw_cuda against adamw_cpu bit for bit, and the CUDA memory resources (device / pinned) with
// the Arena's out-of-memory report.
#include <gtest/gtest.h>

#include <random>

#include "backend/op_test_util.h"
#include "core/arena.h"
#include "core/error.h"
#include "gpu_test_util.h"
#include "optim/adamw.h"
#include "optim/master_split.h"

namespace zt::gputest {
namespace {

// n random elements through one AdamW step on both sides; every output bit compared.
void check_adamw(const optim::AdamWStep& s, size_t n, bool bf16, int64_t mis, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> p(n), m(n), v(n), g(n);
  for (size_t i = 0; i < n; ++i) {
    p[i] = nd(gen), m[i] = 0.1f * nd(gen), v[i] = std::fabs(0.01f * nd(gen)), g[i] = nd(gen);
  }
  if (n > 4) v[0] = 0.0f, g[1] = 0.0f, g[2] = 1e30f, g[3] = -1e-30f;  // v = inf, tiny g
  const auto N = static_cast<int64_t>(n);
  HostT hp(DType::kF32, {N}, p), hm(DType::kF32, {N}, m), hv(DType::kF32, {N}, v),
      hg(DType::kF32, {N}, g);
  DevT dp(hp, mis), dm(hm, mis), dv(hv, mis), dg(hg, mis), db(DType::kBF16, {N}, mis);
  std::vector<uint16_t> pb(n);
  optim::adamw_cpu(s, p.data(), m.data(), v.data(), g.data(), n, bf16 ? pb.data() : nullptr);
  optim::adamw_cuda(s, static_cast<float*>(dp.ptr), static_cast<float*>(dm.ptr),
                    static_cast<float*>(dv.ptr), static_cast<const float*>(dg.ptr), n,
                    bf16 ? static_cast<uint16_t*>(db.ptr) : nullptr, test_stream().handle);
  const std::string l = "adamw n=" + std::to_string(n) + " bf16 " + std::to_string(bf16) +
                        " from_m " + std::to_string(s.lerp_from_m) + " misalign " +
                        std::to_string(mis);
  expect_bitwise(dp.download(), HostT(DType::kF32, {N}, p), l + " p");
  expect_bitwise(dm.download(), HostT(DType::kF32, {N}, m), l + " m");
  expect_bitwise(dv.download(), HostT(DType::kF32, {N}, v), l + " v");
  if (bf16) {
    HostT want = HostT::empty(DType::kBF16, {N});
    std::memcpy(want.data(), pb.data(), n * 2);
    expect_bitwise(db.download(), want, l + " p_bf16");
  }
}

TEST(CudaAdamW, BitwiseEqualToCpu) {
  ZT_REQUIRE_GPU();
  uint32_t seed = 1;
  // beta1 0.9: lerp weight 0.1 (the FMA adds to m); beta1 0.3: weight 0.7 (adds to g).
  for (double beta1 : {0.9, 0.3})
    for (double wd : {0.0, 0.1})
      for (bool bf16 : {false, true}) {
        optim::AdamWParams hp;
        hp.beta1 = beta1;
        hp.weight_decay = wd;
        const optim::AdamWStep s = optim::adamw_step(hp, 3e-4, 7, wd > 0 ? 0.37f : 1.0f);
        ASSERT_EQ(s.lerp_from_m, beta1 == 0.9);
        check_adamw(s, 1000003, bf16, 0, seed++);  // vectors of 4, then a tail of 3
        check_adamw(s, 1003, bf16, 1, seed++);     // misaligned: the element-by-element path
      }
}

// adamw_split_cuda against adamw_split_cpu: random compute weights and low halves (ties included),
// every output bit of hi, lo, m, v compared; aligned (vectors of 4 plus a tail) and misaligned.
void check_adamw_split(const optim::AdamWStep& s, size_t n, int64_t mis, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<uint16_t> hi(n), lo(n);
  std::vector<float> m(n), v(n), g(n);
  for (size_t i = 0; i < n; ++i) {
    hi[i] = optim::master_hi(nd(gen));
    lo[i] = i % 97 == 0 ? 0x8000 : static_cast<uint16_t>(gen());
    m[i] = 0.1f * nd(gen), v[i] = std::fabs(0.01f * nd(gen)), g[i] = nd(gen);
  }
  const auto N = static_cast<int64_t>(n);
  const auto u16 = [&](const std::vector<uint16_t>& x) {
    HostT t = HostT::empty(DType::kBF16, {N});
    std::memcpy(t.data(), x.data(), n * 2);
    return t;
  };
  DevT dh(u16(hi), mis), dl(u16(lo), mis), dm(HostT(DType::kF32, {N}, m), mis),
      dv(HostT(DType::kF32, {N}, v), mis), dg(HostT(DType::kF32, {N}, g), mis);
  optim::adamw_split_cpu(s, hi.data(), lo.data(), m.data(), v.data(), g.data(), n);
  optim::adamw_split_cuda(s, static_cast<uint16_t*>(dh.ptr), static_cast<uint16_t*>(dl.ptr),
                          static_cast<float*>(dm.ptr), static_cast<float*>(dv.ptr),
                          static_cast<const float*>(dg.ptr), n, test_stream().handle);
  const std::string l = "adamw_split n=" + std::to_string(n) + " from_m " +
                        std::to_string(s.lerp_from_m) + " misalign " + std::to_string(mis);
  expect_bitwise(dh.download(), u16(hi), l + " hi");
  expect_bitwise(dl.download(), u16(lo), l + " lo");
  expect_bitwise(dm.download(), HostT(DType::kF32, {N}, m), l + " m");
  expect_bitwise(dv.download(), HostT(DType::kF32, {N}, v), l + " v");
}

TEST(CudaAdamW, SplitMasterBitwiseEqualToCpu) {
  ZT_REQUIRE_GPU();
  uint32_t seed = 100;
  for (double beta1 : {0.9, 0.3}) {
    optim::AdamWParams hp;
    hp.beta1 = beta1;
    hp.weight_decay = 0.1;
    const optim::AdamWStep s = optim::adamw_step(hp, 3e-4, 7, 0.37f);
    check_adamw_split(s, 1000003, 0, seed++);
    check_adamw_split(s, 1003, 1, seed++);
  }
}

TEST(CudaMemory, DeviceAndPinnedResources) {
  ZT_REQUIRE_GPU();
  CudaDeviceMemory dev(0);
  EXPECT_EQ(dev.device(), Device::kCUDA);
  EXPECT_GT(dev.total_bytes(), dev.free_bytes() / 2);
  EXPECT_NE(dev.name().find("cuda:0 ("), std::string::npos) << dev.name();
  EXPECT_NE(dev.name().find(" free)"), std::string::npos) << dev.name();
  void* p = dev.allocate(1 << 20, 64);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
  dev.deallocate(p, 1 << 20);
  EXPECT_EQ(dev.allocate(size_t{1} << 52, 64), nullptr);  // 4 PiB: refused, not thrown
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);             // and no error left behind
  Arena arena("activations", dev);
  arena.reserve("huge", size_t{1} << 52);
  const std::string e = error_of([&] { arena.allocate(); });
  EXPECT_NE(e.find("pool 'activations' needs 4503599627370496 bytes"), std::string::npos) << e;
  EXPECT_NE(e.find(" free)"), std::string::npos) << e;  // the bytes free on the device
  CudaPinnedMemory pinned;
  void* h = pinned.allocate(4096, 64);
  ASSERT_NE(h, nullptr);
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, h), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeHost);
  pinned.deallocate(h, 4096);
}

}  // namespace
}  // namespace zt::gputest
