// The device Comm (dist/nccl): world size 1 in this process (exact collectives on device buffers,
// host buffers routed to the host Comm, the rank-order add kernel against the host fold), and —
// with two or more GPUs — `zerotune comm-check --device cuda` as 2 ranks: the self-test bitwise
// equal to the host's rank-order sums, and a killed or failing rank ending the survivor non-zero
// within 60 s. Skips without a device.
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "dist/bootstrap.h"
#include "dist/child_process.h"
#include "dist/comm.h"
#include "dist/local_launch.h"
#include "dist/selftest.h"

#ifdef ZT_HAVE_NCCL
#include "dist/nccl/comm_nccl.h"
#include "dist/nccl/device_selftest.h"
#include "dist/nccl/rank_order_sum.h"
#endif

namespace zt::dist {
namespace {

#ifdef ZT_HAVE_NCCL

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

#define REQUIRE_GPUS(n)                                                             \
  do {                                                                              \
    if (device_count() < (n)) GTEST_SKIP() << "needs " << (n) << " CUDA device(s)"; \
  } while (0)

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// A device buffer of T, freed at scope end.
template <typename T>
class DeviceVec {
 public:
  explicit DeviceVec(size_t n) : n_(n) {
    if (cudaMalloc(&p_, std::max<size_t>(n, 1) * sizeof(T)) != cudaSuccess) std::abort();
  }
  DeviceVec(const std::vector<T>& host) : DeviceVec(host.size()) { put(host); }
  ~DeviceVec() { cudaFree(p_); }
  DeviceVec(const DeviceVec&) = delete;
  DeviceVec& operator=(const DeviceVec&) = delete;
  T* get() const { return p_; }
  void put(const std::vector<T>& host) {
    ASSERT_EQ(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<T> take() const {
    std::vector<T> h(n_);
    EXPECT_EQ(cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

std::vector<float> values(int salt, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = selftest_value(salt, i);
  return v;
}

size_t bit_differences(const std::vector<float>& a, const std::vector<float>& b) {
  size_t d = a.size() != b.size() ? 1 : 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d += bits(a[i]) != bits(b[i]);
  return d;
}

std::unique_ptr<NcclComm> single_device_comm() {
  return std::make_unique<NcclComm>(std::make_unique<SingleComm>(), 0, NcclCommOptions{});
}

class CudaStream {
 public:
  CudaStream() { cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking); }
  ~CudaStream() { cudaStreamDestroy(s_); }
  cudaStream_t get() const { return s_; }
  zt::Stream zt() const { return {s_}; }

 private:
  cudaStream_t s_ = nullptr;
};

TEST(NcclCommSingle, IdentityAndBackend) {
  REQUIRE_GPUS(1);
  auto c = single_device_comm();
  EXPECT_EQ(c->rank(), 0);
  EXPECT_EQ(c->world_size(), 1);
  EXPECT_EQ(c->backend(), "cuda");
  EXPECT_EQ(c->device(), 0);
  EXPECT_EQ(c->scratch_bytes(), 0u);  // world size 1 needs no all-to-all buffer
}

TEST(NcclCommSingle, ReduceScatterIsACopyOrAnExactAdd) {
  REQUIRE_GPUS(1);
  auto c = single_device_comm();
  CudaStream s;
  for (size_t n : {size_t{1}, size_t{1237}, size_t{4096}}) {  // scalar and float4 kernel paths
    const std::vector<float> send = values(1, n), base = values(2, n);
    DeviceVec<float> d_send(send), d_out(base);
    c->reduce_scatter_sum(d_send.get(), d_out.get(), n, /*accumulate=*/false, s.zt());
    c->synchronize(s.zt());
    EXPECT_EQ(bit_differences(d_out.take(), send), 0u) << "n=" << n;
    d_out.put(base);
    c->reduce_scatter_sum(d_send.get(), d_out.get(), n, /*accumulate=*/true, s.zt());
    c->synchronize(s.zt());
    std::vector<float> want = base;
    const float* parts[] = {send.data()};
    fold_rank_order(parts, 1, n, want.data(), /*accumulate=*/true);
    EXPECT_EQ(bit_differences(d_out.take(), want), 0u) << "n=" << n;
  }
}

TEST(NcclCommSingle, AllGatherAndBroadcastMoveBytesExactly) {
  REQUIRE_GPUS(1);
  auto c = single_device_comm();
  CudaStream s;
  const std::vector<float> src = values(3, 777);
  DeviceVec<float> d_src(src), d_dst(std::vector<float>(777, 0.0f));
  c->all_gather(d_src.get(), d_dst.get(), 777, s.zt());
  c->synchronize(s.zt());
  EXPECT_EQ(bit_differences(d_dst.take(), src), 0u);
  std::vector<uint16_t> b = {0x3f80, 0xffff, 0x0001, 0x7fc0};
  DeviceVec<uint16_t> d_b(b), d_bo(std::vector<uint16_t>(4, 0));
  c->all_gather_bf16(d_b.get(), d_bo.get(), 4, s.zt());
  c->all_gather_bf16(d_b.get(), d_b.get(), 4, s.zt());  // in place: nothing to move
  c->broadcast(d_b.get(), 8, 0, s.zt());                // world size 1: unchanged
  c->synchronize(s.zt());
  EXPECT_EQ(d_bo.take(), b);
  EXPECT_EQ(d_b.take(), b);
}

TEST(NcclCommSingle, HostBuffersGoThroughTheHostComm) {
  REQUIRE_GPUS(1);
  auto c = single_device_comm();
  double d[2] = {1.5, -2.0};
  c->all_reduce(d, 2, ReduceOp::kSum);
  EXPECT_EQ(d[0], 1.5);
  EXPECT_EQ(c->all_gather_f64(0.25), std::vector<double>{0.25});
  EXPECT_EQ(c->sum_in_rank_order(3.0), 3.0);
  int64_t pid = 42;
  c->broadcast(&pid, sizeof(pid), 0);
  std::vector<float> hs = {1.0f, 2.0f}, ho = {10.0f, 20.0f};
  c->reduce_scatter_sum(hs.data(), ho.data(), 2, /*accumulate=*/true);
  EXPECT_EQ(ho, (std::vector<float>{11.0f, 22.0f}));
  c->barrier();
  // Mixing host and device buffers is refused with a message naming both.
  DeviceVec<float> d_out(2);
  try {
    c->reduce_scatter_sum(hs.data(), d_out.get(), 2);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("send is host memory but out is device memory"),
              std::string::npos)
        << e.what();
  }
}

TEST(NcclCommSingle, SelftestOnDeviceBuffers) {
  REQUIRE_GPUS(1);
  auto c = single_device_comm();
  auto mem = make_device_selftest_memory(*c);
  EXPECT_EQ(run_comm_selftest(*c, 1001, mem.get()), selftest_expected_digest(1, 1001));
}

TEST(RankOrderSum, BitwiseEqualToTheHostFoldForEveryOwnRankAndLayout) {
  // The kernel alone, for world sizes the single GPU cannot form: W blocks laid out as after the
  // all-to-all (own block read from the send buffer), against fold_rank_order on the host.
  REQUIRE_GPUS(1);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  CudaStream s;
  for (int w : {2, 3, 5}) {
    for (size_t shard : {size_t{1}, size_t{7}, size_t{1000}, size_t{4096}}) {
      for (size_t own_offset : {size_t{0}, size_t{1}}) {  // 1: a misaligned own block (scalar path)
        for (int r = 0; r < w; ++r) {
          const size_t n = static_cast<size_t>(w) * shard;
          std::vector<float> recv(n), own_buf(shard + own_offset, 0.0f);
          std::vector<std::vector<float>> parts(static_cast<size_t>(w));
          for (int q = 0; q < w; ++q) {
            parts[static_cast<size_t>(q)] = values(q + 10 * w, shard);
            if (q != r)
              std::copy(parts[static_cast<size_t>(q)].begin(), parts[static_cast<size_t>(q)].end(),
                        recv.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(q) * shard));
          }
          std::copy(parts[static_cast<size_t>(r)].begin(), parts[static_cast<size_t>(r)].end(),
                    own_buf.begin() + static_cast<std::ptrdiff_t>(own_offset));
          std::vector<const float*> ptrs;
          for (const auto& p : parts) ptrs.push_back(p.data());
          for (bool accumulate : {false, true}) {
            const std::vector<float> base = values(99, shard);
            std::vector<float> want = base;
            fold_rank_order(ptrs.data(), w, shard, want.data(), accumulate);
            DeviceVec<float> d_recv(recv), d_own(own_buf), d_out(base);
            nccl::rank_order_sum(d_out.get(), d_recv.get(), d_own.get() + own_offset, r, w, shard,
                                 accumulate, s.get());
            ASSERT_EQ(cudaStreamSynchronize(s.get()), cudaSuccess);
            EXPECT_EQ(bit_differences(d_out.take(), want), 0u)
                << "W=" << w << " shard=" << shard << " own rank " << r << " offset " << own_offset
                << " accumulate " << accumulate;
          }
        }
      }
    }
  }
}

// ---- two or more GPUs: separate processes ----

std::string zerotune_binary() {
  if (const char* b = std::getenv("ZT_BINARY"); b && *b) return b;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto beside = self.parent_path() / "zerotune";
    if (std::filesystem::exists(beside)) return beside.string();
  }
  return ZT_BINARY;
}

constexpr double kDeathBound = 60.0;  // issue 9: every rank gone within 60 s of a peer's death
constexpr double kHangGuard = 180.0;

std::vector<std::string> clean_env() {
  return {"RANK=",        "WORLD_SIZE=",  "LOCAL_RANK=",           "LOCAL_WORLD_SIZE=",
          "MASTER_ADDR=", "MASTER_PORT=", "OMPI_COMM_WORLD_SIZE=", "PMIX_RANK="};
}

// Rank r of a torchrun-style W-rank job on this host (no launcher that would stop the others).
std::vector<std::string> rank_env(int r, int w, int port) {
  std::vector<std::string> e = clean_env();
  e.push_back(fmt::format("RANK={}", r));
  e.push_back(fmt::format("LOCAL_RANK={}", r));
  e.push_back(fmt::format("WORLD_SIZE={}", w));
  e.push_back(fmt::format("LOCAL_WORLD_SIZE={}", w));
  e.push_back("MASTER_ADDR=127.0.0.1");
  e.push_back(fmt::format("MASTER_PORT={}", port));
  return e;
}

std::string digest_line(int rank, int world, size_t shard) {
  return fmt::format("comm-check: rank {} ok digest {:016x}", rank,
                     selftest_expected_digest(world, shard));
}

TEST(NcclCommMultiGpu, LaunchSelftestIsBitwiseTheHostRankOrderSum) {
  REQUIRE_GPUS(2);
  const std::string bin = zerotune_binary();
  std::vector<int> worlds = {2};
  if (device_count() >= 4) worlds.push_back(4);
  for (int w : worlds) {
    test::Child c({bin, "launch", "--num_processes", std::to_string(w), "comm-check", "--device",
                   "cuda", "--elements", "4099", "--rounds", "2"},
                  clean_env());
    ASSERT_EQ(c.wait(kHangGuard), 0) << c.output();
    EXPECT_EQ(test::count_of(c.output(), "backend nccl"), static_cast<size_t>(w)) << c.output();
    for (int r = 0; r < w; ++r)
      EXPECT_NE(c.output().find(digest_line(r, w, 4099)), std::string::npos) << c.output();
  }
}

TEST(NcclCommMultiGpu, UnderMpirun) {
  REQUIRE_GPUS(2);
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) GTEST_SKIP() << "no mpirun";
  test::Child c({"mpirun", "--oversubscribe", "--allow-run-as-root", "-np", "2", zerotune_binary(),
                 "comm-check", "--device", "cuda", "--elements", "3001"},
                clean_env());
  ASSERT_EQ(c.wait(kHangGuard), 0) << c.output();
  for (int r = 0; r < 2; ++r)
    EXPECT_NE(c.output().find(digest_line(r, 2, 3001)), std::string::npos) << c.output();
}

// Runs a 2-rank torchrun-style job where rank 1 misbehaves (`how`, its output then shows
// `rank1_status`) and checks that rank 0 exits non-zero within kDeathBound of rank 1's end.
void expect_survivor_fails(const std::vector<std::string>& how, const std::string& rank1_status) {
  const std::string bin = zerotune_binary();
  const int port = pick_free_port("127.0.0.1");
  std::vector<std::string> args = {bin,          "comm-check", "--device", "cuda",
                                   "--elements", "4099",       "--rounds", "1000000"};
  args.insert(args.end(), how.begin(), how.end());
  test::Child r0(args, rank_env(0, 2, port)), r1(args, rank_env(1, 2, port));
  const int s1 = r1.wait(kHangGuard);
  EXPECT_NE(r1.output().find(rank1_status), std::string::npos) << r1.output();
  const int s0 = r0.wait(kDeathBound);
  EXPECT_NE(s0, -1) << "rank 0 still running " << kDeathBound << " s after rank 1 ended (status "
                    << s1 << ")\n"
                    << r0.output();
  EXPECT_NE(s0, 0) << r0.output();
  // The error names the peer that is gone or the NCCL failure.
  EXPECT_TRUE(r0.output().find("rank 1") != std::string::npos ||
              r0.output().find("NCCL") != std::string::npos)
      << r0.output();
}

TEST(NcclCommMultiGpu, KilledRankMakesTheSurvivorExitNonZeroWithin60s) {
  REQUIRE_GPUS(2);
  expect_survivor_fails({"--die-rank", "1"}, "dies (SIGKILL)");
}

TEST(NcclCommMultiGpu, FailingRankMakesTheSurvivorExitNonZeroWithin60s) {
  REQUIRE_GPUS(2);
  expect_survivor_fails({"--fail-rank", "1"}, "fails as asked");
}

#else  // no NCCL in this build

TEST(NcclComm, NotBuilt) {
  EXPECT_FALSE(have_device_comm());
  GTEST_SKIP() << "built without NCCL";
}

#endif

}  // namespace
}  // namespace zt::dist
