// HostAdamW (optim/host_adamw.h): bit for bit adamw_cpu, however chunks are submitted and waited
// for; the thread count and its ZT_HOST_ADAM_THREADS override.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/zt_test_util.h"
#include "optim/adamw.h"
#include "optim/host_adamw.h"
#include "optim/master_split.h"

namespace zt::optim {
namespace {

using zt::testing::expect_error;

// An AdamW state of n elements with varied values (a few zeros in v, NaN and Inf included).
struct State {
  std::vector<float> p, m, v, g;
  std::vector<uint16_t> pb;
  explicit State(size_t n) : p(n), m(n), v(n), g(n), pb(n, 0xdeadU) {
    uint32_t x = 12345;
    auto next = [&] {  // xorshift32, uniform in [-1, 1)
      x ^= x << 13;
      x ^= x >> 17;
      x ^= x << 5;
      return static_cast<float>(x >> 8) / static_cast<float>(1 << 23) - 1.0f;
    };
    for (size_t i = 0; i < n; ++i) {
      p[i] = next() * 0.5f;
      m[i] = next() * 1e-3f;
      v[i] = i % 7 == 0 ? 0.0f : (next() + 1.0f) * 1e-6f;
      g[i] = next() * 1e-2f;
    }
    if (n > 5) p[5] = NAN;
    if (n > 9) g[9] = INFINITY;
  }
};

// Index of the first element whose bits differ, or -1.
template <typename T>
long first_diff(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return static_cast<long>(i);
  return -1;
}

void expect_same(const State& got, const State& want) {
  EXPECT_EQ(first_diff(got.p, want.p), -1);
  EXPECT_EQ(first_diff(got.m, want.m), -1);
  EXPECT_EQ(first_diff(got.v, want.v), -1);
  EXPECT_EQ(first_diff(got.pb, want.pb), -1);
}

// Steps with weight decay, clipping and each lerp branch (beta1 0.9: FMA onto m; 0.3: onto g).
std::vector<AdamWStep> steps() {
  return {adamw_step(AdamWParams{0.9, 0.95, 1e-8, 0.01}, 3e-4, 7, 0.75f),
          adamw_step(AdamWParams{0.3, 0.999, 1e-6, 0.0}, 1e-3, 1, 1.0f)};
}

TEST(HostAdamW, EqualsAdamwCpuBitwise) {
  for (const size_t n : {size_t{0}, size_t{1}, size_t{17}, size_t{1000}, (size_t{1} << 20) + 3}) {
    const State init(n);
    for (const AdamWStep& s : steps()) {
      for (const bool bf16 : {true, false}) {
        State want = init;
        adamw_cpu(s, want.p.data(), want.m.data(), want.v.data(), want.g.data(), n,
                  bf16 ? want.pb.data() : nullptr);
        if (n > 0) {
          EXPECT_NE(first_diff(want.p, init.p), -1);  // the step changed something
        }
        for (const int threads : {1, 4}) {
          SCOPED_TRACE("n " + std::to_string(n) + " bf16 " + std::to_string(bf16) + " threads " +
                       std::to_string(threads) + " lerp_from_m " + std::to_string(s.lerp_from_m));
          HostAdamW pool(threads);
          ASSERT_EQ(pool.threads(), threads);
          State got = init;
          pool.run(s, got.p.data(), got.m.data(), got.v.data(), got.g.data(), n,
                   bf16 ? got.pb.data() : nullptr);
          expect_same(got, want);
        }
      }
    }
  }
}

// A split master (submit_split): chunks in several pieces on several threads give adamw_split_cpu's
// bits, which join to adamw_cpu's master (master_split.h).
TEST(HostAdamW, SplitMasterEqualsAdamwSplitCpuBitwise) {
  const size_t n = (size_t{1} << 18) + 5;
  const State init(n);
  std::vector<uint16_t> hi0(n), lo0(n);
  for (size_t i = 0; i < n; ++i) {
    hi0[i] = master_hi(init.p[i]);
    lo0[i] = master_lo(init.p[i]);
  }
  for (const AdamWStep& s : steps()) {
    std::vector<uint16_t> hi_want = hi0, lo_want = lo0;
    State want = init;
    adamw_split_cpu(s, hi_want.data(), lo_want.data(), want.m.data(), want.v.data(), want.g.data(),
                    n);
    for (const int threads : {1, 4}) {
      SCOPED_TRACE("threads " + std::to_string(threads));
      HostAdamW pool(threads);
      std::vector<uint16_t> hi = hi0, lo = lo0;
      State got = init;
      std::vector<HostAdamW::Ticket> tickets;
      for (size_t a = 0; a < n; a += 100000)  // chunks of several pieces
        tickets.push_back(pool.submit_split(s, hi.data() + a, lo.data() + a, got.m.data() + a,
                                            got.v.data() + a, got.g.data() + a,
                                            std::min<size_t>(100000, n - a)));
      for (const HostAdamW::Ticket& t : tickets) pool.wait(t);
      EXPECT_EQ(first_diff(hi, hi_want), -1);
      EXPECT_EQ(first_diff(lo, lo_want), -1);
      EXPECT_EQ(first_diff(got.m, want.m), -1);
      EXPECT_EQ(first_diff(got.v, want.v), -1);
      EXPECT_NE(first_diff(hi, hi0), -1);  // the step changed something
    }
  }
}

// Many chunks (sizes 0 to 40000, odd offsets, some split into several pieces) all submitted before
// any wait, then waited for in reverse order: the same bits as one adamw_cpu over the whole array.
TEST(HostAdamW, ManyChunksSubmittedBeforeAnyWait) {
  const size_t n = 600000;
  const State init(n);
  const AdamWStep s = steps()[0];
  State want = init;
  adamw_cpu(s, want.p.data(), want.m.data(), want.v.data(), want.g.data(), n, want.pb.data());
  HostAdamW pool(4);
  State got = init;
  std::vector<HostAdamW::Ticket> tickets;
  uint32_t x = 7;
  int empty = 0, split = 0;
  for (size_t lo = 0; lo < n;) {
    x = x * 1664525U + 1013904223U;
    const size_t r = (x >> 8) % 100;
    const size_t len = std::min<size_t>(n - lo, r < 5 ? 0 : r < 8 ? 40000 : (x >> 12) % 3001);
    empty += len == 0;
    split += len > 20000;  // more than one piece (HostAdamW cuts none below 16384 elements)
    tickets.push_back(pool.submit(s, got.p.data() + lo, got.m.data() + lo, got.v.data() + lo,
                                  got.g.data() + lo, len, got.pb.data() + lo));
    lo += len;
  }
  ASSERT_GT(tickets.size(), 200u);
  ASSERT_GT(empty, 5);
  ASSERT_GT(split, 5);
  for (size_t i = tickets.size(); i-- > 0;) pool.wait(tickets[i]);
  expect_same(got, want);
  pool.wait(tickets[0]);  // waiting again on a finished chunk returns at once
  pool.wait(HostAdamW::Ticket{});
  pool.wait_all();
}

// Two threads submit into one pool; wait_all() covers both; the destructor finishes queued work.
TEST(HostAdamW, ConcurrentSubmittersAndDestructorDrains) {
  const size_t n = 200000;
  const State init(n);
  const AdamWStep s = steps()[1];
  State want = init;
  adamw_cpu(s, want.p.data(), want.m.data(), want.v.data(), want.g.data(), n, want.pb.data());
  State got = init;
  {
    HostAdamW pool(3);
    auto submit_half = [&](size_t lo, size_t hi) {
      for (size_t a = lo; a < hi; a += 5000)
        pool.submit(s, got.p.data() + a, got.m.data() + a, got.v.data() + a, got.g.data() + a,
                    std::min<size_t>(5000, hi - a), got.pb.data() + a);
    };
    std::thread other(submit_half, n / 2, n);
    submit_half(0, n / 2);
    other.join();
    pool.wait_all();
    expect_same(got, want);
  }
  State later = init;
  {
    HostAdamW pool(2);
    pool.submit(s, later.p.data(), later.m.data(), later.v.data(), later.g.data(), n,
                later.pb.data());
  }  // no wait: the destructor completes the chunk before joining
  expect_same(later, want);
}

TEST(HostAdamW, WaitOnTicketNotIssuedIsAnError) {
  HostAdamW pool(1);
  expect_error([&] { pool.wait(HostAdamW::Ticket{5}); },
               {"HostAdamW::wait: ticket 5 was not issued by this pool"});
}

TEST(HostAdamW, ThreadCountResolution) {
  // Explicit request wins over everything.
  HostAdamWThreads t = host_adamw_threads(3, 2, "6", 16, 16);
  EXPECT_EQ(t.threads, 3);
  EXPECT_EQ(t.reason, "requested");
  // The environment variable, when the caller asks for automatic.
  t = host_adamw_threads(0, 2, "6", 16, 16);
  EXPECT_EQ(t.threads, 6);
  EXPECT_EQ(t.reason, "ZT_HOST_ADAM_THREADS=6");
  // Automatic: hardware threads shared by the local ranks, at least 1.
  t = host_adamw_threads(0, 2, nullptr, 16, 16);
  EXPECT_EQ(t.threads, 8);
  EXPECT_EQ(t.reason, "automatic: 16 hardware threads / 2 local ranks");
  t = host_adamw_threads(0, 1, "", 12, 12);  // empty = unset
  EXPECT_EQ(t.threads, 12);
  EXPECT_EQ(t.reason, "automatic: 12 hardware threads / 1 local rank");
  EXPECT_EQ(host_adamw_threads(0, 4, nullptr, 2, 2).threads, 1);
  EXPECT_EQ(host_adamw_threads(0, 1, nullptr, 0, 0).threads, 1);  // hardware_concurrency unknown
  // A launcher that bound the rank to fewer CPUs than its share.
  t = host_adamw_threads(0, 2, nullptr, 16, 3);
  EXPECT_EQ(t.threads, 3);
  EXPECT_EQ(
      t.reason,
      "automatic: 16 hardware threads / 2 local ranks, capped by the CPU affinity mask: 3 CPUs");
}

TEST(HostAdamW, EnvOverrideRejectsWhatIsNotAPositiveInteger) {
  for (const char* bad : {"0", "abc", "-2", "8x", " 8", "4096", "99999999999"})
    expect_error([&] { host_adamw_threads(0, 1, bad, 16, 16); },
                 {std::string("ZT_HOST_ADAM_THREADS='") + bad + "'",
                  "expected a positive integer (a thread count from 1 to 1024)"});
  expect_error([] { host_adamw_threads(-1, 1, nullptr, 16, 16); }, {"thread count -1"});
  expect_error([] { host_adamw_threads(0, 0, nullptr, 16, 16); }, {"local world size 0"});
}

// Sets an environment variable for the scope, restoring the old value after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(HostAdamW, ConstructorReadsTheEnvironment) {
  {
    ScopedEnv env("ZT_HOST_ADAM_THREADS", "3");
    HostAdamW pool(0, 1);
    EXPECT_EQ(pool.threads(), 3);
    HostAdamW explicit_pool(2, 1);  // an explicit count is not overridden
    EXPECT_EQ(explicit_pool.threads(), 2);
  }
  {
    ScopedEnv env("ZT_HOST_ADAM_THREADS", "abc");
    expect_error([] { HostAdamW pool(0, 1); }, {"ZT_HOST_ADAM_THREADS='abc'"});
  }
}

TEST(HostAdamW, DescribeNamesTheThreadCountAndWhyOmpDoesNotApply) {
  ScopedEnv omp("OMP_NUM_THREADS", "1");
  HostAdamW pool(3);
  EXPECT_EQ(pool.describe(), "host AdamW: 3 threads (requested; OMP_NUM_THREADS=1 does not apply)");
  ScopedEnv env("ZT_HOST_ADAM_THREADS", "1");
  HostAdamW one(0, 1);
  EXPECT_EQ(one.describe(),
            "host AdamW: 1 thread (ZT_HOST_ADAM_THREADS=1; OMP_NUM_THREADS=1 does not apply)");
}

}  // namespace
}  // namespace zt::optim
