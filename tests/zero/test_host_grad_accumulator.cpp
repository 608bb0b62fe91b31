// HostGradAccumulator on the CPU backend: chunks landed through the two staging slots overwrite
// (first micro-step) and then add into the host shard in fp32, in the order the device path adds
// (shard + incoming), with the adds on the worker thread; sumsq is CpuOps::sumsq of the shard.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "core/arena.h"
#include "zero/host_grad_accumulator.h"
#include "zero_test_util.h"

namespace zt::zero {
namespace {

using test::bits;

TEST(HostGradAccumulator, OverwritesThenAddsEveryChunkInOrder) {
  CpuOps ops;
  HostMemory mem;
  constexpr int64_t S = 96, C = 16;
  std::vector<float> shard(S, -7.0f), slots(HostGradAccumulator::kSlots * C), ref(S);
  HostGradAccumulator acc(ops, mem, shard.data(), S, slots.data(), C);
  int i = 0;
  for (int micro = 0; micro < 6; ++micro)
    for (int64_t j0 = 0; j0 < S; j0 += C, ++i) {
      const int k = i % HostGradAccumulator::kSlots;
      acc.acquire(k, {});  // slot k's previous add is done: it may be rewritten
      const int64_t n = j0 + C <= S - 8 ? C : C - 8;  // a short chunk too
      for (int64_t j = 0; j < n; ++j) {
        const float v = 0.1f * static_cast<float>(micro + 1) + 1e-3f * static_cast<float>(j0 + j);
        acc.slot(k)[j] = v;
        ref[static_cast<size_t>(j0 + j)] =
            micro == 0 ? v : ref[static_cast<size_t>(j0 + j)] + v;  // the device's association
      }
      if (n < C)  // columns no chunk covers keep the first micro-step's value of the previous run
        for (int64_t j = n; j < C; ++j) ref[static_cast<size_t>(j0 + j)] = -7.0f;
      acc.land(k, j0, n, micro == 0, {});
    }
  acc.drain();
  EXPECT_EQ(bits(shard), bits(ref));
  double want = 0.0;
  std::vector<double> ws(ops.sumsq_workspace_bytes(Tensor(nullptr, DType::kF32, {S})) / 8 + 1);
  ops.sumsq(&want, Tensor(ref.data(), DType::kF32, {S}, Device::kCPU),
            Tensor(ws.data(), DType::kU8, {static_cast<int64_t>(ws.size() * 8)}, Device::kCPU), {});
  EXPECT_EQ(acc.sumsq(), want);
  acc.zero();
  EXPECT_EQ(bits(shard), bits(std::vector<float>(S, 0.0f)));
  std::vector<PoolBytes> pools;
  acc.append_pools(pools);
  ASSERT_EQ(pools.size(), 2u);
  EXPECT_EQ(pools[0].name, "gradient staging (host)");
  EXPECT_EQ(pools[0].bytes, static_cast<size_t>(HostGradAccumulator::kSlots * C * 4));
  EXPECT_TRUE(pools[0].host);
}

// The adds split over a team of host threads (chunks of 2^17 columns: above the size below which
// the worker adds alone, and not a multiple of the team's 3 pieces): bitwise the serial sums, for
// every thread count; so is the team's sum of squares against CpuOps::sumsq.
TEST(HostGradAccumulator, TeamAddsAreBitwiseTheSerialOnes) {
  CpuOps ops;
  constexpr int64_t C = int64_t{1} << 17, S = 3 * C - 5;
  std::vector<float> want;
  for (int threads : {1, 3, 4}) {
    SCOPED_TRACE(threads);
    HostMemory mem;
    std::vector<float> shard(S), slots(HostGradAccumulator::kSlots * C), ref(S);
    HostGradAccumulator acc(ops, mem, shard.data(), S, slots.data(), C, threads);
    int i = 0;
    for (int micro = 0; micro < 3; ++micro)
      for (int64_t j0 = 0; j0 < S; j0 += C, ++i) {
        const int k = i % HostGradAccumulator::kSlots;
        acc.acquire(k, {});
        const int64_t n = std::min(C, S - j0);
        for (int64_t j = 0; j < n; ++j) {
          const float v = 1.0f / static_cast<float>(1 + ((j0 + j) * 7 + micro * 13) % 1009);
          acc.slot(k)[j] = v;
          float& r = ref[static_cast<size_t>(j0 + j)];
          r = micro == 0 ? v : r + v;
        }
        acc.land(k, j0, n, micro == 0, {});
      }
    acc.drain();
    EXPECT_EQ(bits(shard), bits(ref));
    if (want.empty()) want = shard;
    EXPECT_EQ(bits(shard), bits(want)) << "differs from the 1-thread run";
    // The team's sum of squares (24 blocks, the last one short) is bitwise CpuOps::sumsq's.
    double cpu = 0.0;
    std::vector<double> ws(ops.sumsq_workspace_bytes(Tensor(nullptr, DType::kF32, {S})) / 8 + 1);
    ops.sumsq(&cpu, Tensor(ref.data(), DType::kF32, {S}, Device::kCPU),
              Tensor(ws.data(), DType::kU8, {static_cast<int64_t>(ws.size() * 8)}, Device::kCPU),
              {});
    const double team = acc.sumsq();
    EXPECT_EQ(std::memcmp(&team, &cpu, sizeof(double)), 0) << team << " vs " << cpu;
  }
}

}  // namespace
}  // namespace zt::zero
