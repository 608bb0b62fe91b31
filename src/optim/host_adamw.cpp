// HostAdamW (optim/host_adamw.h): a worker pool that runs adamw_cpu_range() on pieces of chunks.
#include "optim/host_adamw.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "core/cpu_affinity.h"
#include "core/error.h"

namespace zt::optim {

namespace {

// Piece bounds are multiples of this many elements from the chunk start: 64 bytes of fp32, so
// pieces of an aligned chunk start on cache lines (no line shared by two workers' stores).
constexpr size_t kAlign = 16;
// No piece is cut smaller than this (elements; 64 KiB of each fp32 array): below it, handing the
// piece to another thread costs more than it saves (the size adamw_cpu gives one OpenMP item).
constexpr size_t kMinPiece = size_t{1} << 14;
// The most threads ZT_HOST_ADAM_THREADS may ask for (a guard against typos like 80000).
constexpr int kMaxThreads = 1024;

}  // namespace

HostAdamWThreads host_adamw_threads(int requested, int local_world_size, const char* env_value,
                                    unsigned hardware_threads, unsigned affinity_cpus) {
  if (requested < 0) fail("host AdamW: thread count {} is negative (0 = automatic)", requested);
  if (local_world_size < 1)
    fail("host AdamW: local world size {} (expected at least 1)", local_world_size);
  if (requested > 0) return {requested, "requested"};
  if (env_value != nullptr && *env_value != '\0') {
    const std::string_view s(env_value);
    int t = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), t);
    if (ec != std::errc{} || end != s.data() + s.size() || t < 1 || t > kMaxThreads)
      fail("{}='{}': expected a positive integer (a thread count from 1 to {})",
           kHostAdamThreadsEnv, s, kMaxThreads);
    return {t, fmt::format("{}={}", kHostAdamThreadsEnv, t)};
  }
  const unsigned hw = std::max(1u, hardware_threads);
  const int share = std::max(1, static_cast<int>(hw / static_cast<unsigned>(local_world_size)));
  std::string reason = fmt::format("automatic: {} hardware threads / {} local rank{}", hw,
                                   local_world_size, local_world_size == 1 ? "" : "s");
  if (affinity_cpus > 0 && static_cast<int>(affinity_cpus) < share) {
    reason += fmt::format(", capped by the CPU affinity mask: {} CPU{}", affinity_cpus,
                          affinity_cpus == 1 ? "" : "s");
    return {static_cast<int>(affinity_cpus), reason};
  }
  return {share, reason};
}

HostAdamW::HostAdamW(int threads, int local_world_size)
    : config_(host_adamw_threads(threads, local_world_size, std::getenv(kHostAdamThreadsEnv),
                                 std::thread::hardware_concurrency(), affinity_cpu_count())) {
  workers_.reserve(static_cast<size_t>(config_.threads));
  for (int i = 0; i < config_.threads; ++i) workers_.emplace_back([this] { worker(); });
}

HostAdamW::~HostAdamW() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();  // workers drain the queue before they exit
}

std::string HostAdamW::describe() const {
  std::string s = fmt::format("host AdamW: {} thread{} ({}", threads(), threads() == 1 ? "" : "s",
                              config_.reason);
  if (const char* omp = std::getenv("OMP_NUM_THREADS"); omp != nullptr && *omp != '\0')
    s += fmt::format("; OMP_NUM_THREADS={} does not apply", omp);
  return s + ")";
}

HostAdamW::Ticket HostAdamW::submit(const AdamWStep& st, float* master, float* m, float* v,
                                    const float* grad, size_t n, uint16_t* bf16_out) {
  return enqueue(st, master, nullptr, m, v, grad, n, bf16_out);
}

HostAdamW::Ticket HostAdamW::submit_split(const AdamWStep& st, uint16_t* hi, uint16_t* lo, float* m,
                                          float* v, const float* grad, size_t n) {
  return enqueue(st, nullptr, lo, m, v, grad, n, hi);
}

HostAdamW::Ticket HostAdamW::enqueue(const AdamWStep& st, float* master, uint16_t* lo_half,
                                     float* m, float* v, const float* grad, size_t n,
                                     uint16_t* bf16_out) {
  // Pieces: as many as threads, none below kMinPiece, lengths rounded up to kAlign (the last one
  // takes the rest).
  const size_t want = std::clamp<size_t>((n + kMinPiece - 1) / kMinPiece, 1, workers_.size());
  const size_t len = ((n + want - 1) / want + kAlign - 1) / kAlign * kAlign;
  int pieces = 0;
  Ticket t;
  {
    std::lock_guard<std::mutex> lk(mu_);
    t.id = next_id_++;
    for (size_t lo = 0; lo < n; lo += len, ++pieces) {
      const size_t k = std::min(len, n - lo);
      queue_.push_back(Piece{t.id, st, master != nullptr ? master + lo : nullptr, m + lo, v + lo,
                             grad + lo, k, bf16_out != nullptr ? bf16_out + lo : nullptr,
                             lo_half != nullptr ? lo_half + lo : nullptr});
    }
    remaining_.push_back(pieces);
    while (!remaining_.empty() && remaining_.front() == 0) {  // n == 0 at the front: done now
      remaining_.pop_front();
      ++first_id_;
    }
  }
  if (pieces == 1)
    work_cv_.notify_one();
  else if (pieces > 1)
    work_cv_.notify_all();
  return t;
}

bool HostAdamW::done_locked(uint64_t id) const {
  return id < first_id_ || remaining_[id - first_id_] == 0;
}

void HostAdamW::wait(Ticket t) {
  std::unique_lock<std::mutex> lk(mu_);
  if (t.id >= next_id_)
    fail("HostAdamW::wait: ticket {} was not issued by this pool (next is {})", t.id, next_id_);
  done_cv_.wait(lk, [&] { return done_locked(t.id); });
}

void HostAdamW::wait_all() {
  std::unique_lock<std::mutex> lk(mu_);
  const uint64_t last = next_id_;  // chunks submitted so far: ids below `last`
  done_cv_.wait(lk, [&] { return first_id_ >= last; });
}

void HostAdamW::run(const AdamWStep& st, float* master, float* m, float* v, const float* grad,
                    size_t n, uint16_t* bf16_out) {
  wait(submit(st, master, m, v, grad, n, bf16_out));
}

void HostAdamW::worker() {
  for (;;) {
    Piece pc;
    {
      std::unique_lock<std::mutex> lk(mu_);
      work_cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and nothing left
      pc = queue_.front();
      queue_.pop_front();
    }
    if (pc.lo != nullptr)
      adamw_split_cpu_range(pc.st, pc.pb, pc.lo, pc.m, pc.v, pc.g, pc.n);
    else
      adamw_cpu_range(pc.st, pc.p, pc.m, pc.v, pc.g, pc.n, pc.pb);
    bool finished = false;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (--remaining_[pc.id - first_id_] == 0) {
        finished = true;
        while (!remaining_.empty() && remaining_.front() == 0) {
          remaining_.pop_front();
          ++first_id_;
        }
      }
    }
    if (finished) done_cv_.notify_all();
  }
}

}  // namespace zt::optim
