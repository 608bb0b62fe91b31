#include "zero/host_grad_accumulator.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "backend/cpu/cpu_common.h"

namespace zt::zero {

namespace {

Tensor host_f32(float* p, int64_t n) { return Tensor(p, DType::kF32, {n}, Device::kCPU); }

}  // namespace

HostGradAccumulator::HostGradAccumulator(Ops& ops, MemoryResource& host_memory, float* shard,
                                         int64_t shard_elems, float* device_slots, int64_t chunk,
                                         int threads)
    : ops_(ops),
      host_("zero gradients (host)", host_memory),
      shard_(shard),
      shard_elems_(shard_elems),
      dev_slots_(device_slots),
      chunk_(chunk) {
  const Arena::Slot s_stage =
      host_.reserve("gradient staging (host)", static_cast<size_t>(kSlots * chunk) * 4);
  const size_t ws_bytes = cpu_.sumsq_workspace_bytes(host_f32(nullptr, shard_elems));
  const Arena::Slot s_ws = host_.reserve("norm workspace (host)", ws_bytes);
  host_.allocate();
  host_.zero_host();
  host_slots_ = static_cast<float*>(host_.ptr(s_stage));
  ws_ = Tensor(host_.ptr(s_ws), DType::kU8, {static_cast<int64_t>(std::max<size_t>(ws_bytes, 1))},
               Device::kCPU);
  copy_ = OwnedStream(ops_);  // a refused one throws: the members made destroy theirs
  ev_ready_ = OwnedEvent(ops_);
  for (OwnedEvent& e : ev_landed_) e = OwnedEvent(ops_);
  try {
    worker_ = std::thread([this] { run_worker(); });
    for (int i = 1; i < std::max(threads, 1); ++i) team_.emplace_back([this, i] { run_helper(i); });
  } catch (...) {  // a thread could not start: stop the ones that did
    stop_threads();
    throw;
  }
}

void HostGradAccumulator::stop_threads() {
  {
    const std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  {
    const std::lock_guard lk(team_mu_);
    team_stop_ = true;
  }
  team_cv_.notify_all();
  for (std::thread& t : team_) t.join();
  team_.clear();
}

HostGradAccumulator::~HostGradAccumulator() {
  try {  // no copy or add may outlive the buffers
    drain();
  } catch (...) {
  }
  try {  // drain() may have rethrown a worker error before waiting for the copies
    ops_.synchronize(copy_);
  } catch (...) {
  }
  stop_threads();
}  // then the members: the events and the copy stream

void HostGradAccumulator::rethrow_locked() {
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void HostGradAccumulator::acquire(int k, Stream s) {
  {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return !busy_[k] || error_; });
    rethrow_locked();
  }
  ops_.wait_event(s, ev_landed_[k]);  // the D2H that last read device slot k has completed
}

void HostGradAccumulator::land(int k, int64_t j0, int64_t n, bool first, Stream s) {
  ops_.record_event(ev_ready_, s);
  ops_.wait_event(copy_, ev_ready_);
  ops_.copy_to_host(first ? shard_ + j0 : host_slot(k),
                    Tensor(slot(k), DType::kF32, {n}, ops_.device()), copy_);
  ops_.record_event(ev_landed_[k], copy_);
  if (first) return;  // landed in place; drain() waits for the copy stream
  {
    const std::lock_guard lk(mu_);
    busy_[k] = true;
    tasks_.push_back({k, j0, n});
  }
  cv_.notify_all();
}

void HostGradAccumulator::run_worker() {
  bool bound = false;
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stop_
    const Task t = tasks_.front();
    tasks_.pop_front();
    lk.unlock();
    std::exception_ptr err;
    try {
      if (!bound) ops_.bind_thread();
      bound = true;
      ops_.synchronize_event(ev_landed_[t.k]);           // the chunk is in host staging slot k
      parallel_add(shard_ + t.j0, host_slot(t.k), t.n);  // shard + s, fp32
    } catch (...) {
      err = std::current_exception();
    }
    lk.lock();
    if (err && !error_) error_ = err;
    busy_[t.k] = false;
    cv_.notify_all();
  }
}

namespace {

// The part [lo, hi) of n elements that piece `index` of `pieces` adds.
void piece_range(int64_t n, int pieces, int index, int64_t* lo, int64_t* hi) {
  *lo = n * index / pieces;
  *hi = n * (index + 1) / pieces;
}

void add_range(float* dst, const float* src, int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi; ++i) dst[i] = dst[i] + src[i];
}

}  // namespace

void HostGradAccumulator::run_team(const std::function<void(int, int)>& job) {
  const int pieces = static_cast<int>(team_.size()) + 1;
  if (pieces == 1) {
    job(0, 1);
    return;
  }
  {
    const std::lock_guard lk(team_mu_);
    job_ = &job;
    job_pieces_ = pieces;
    job_left_ = pieces - 1;
    ++job_gen_;
  }
  team_cv_.notify_all();
  job(0, pieces);
  std::unique_lock lk(team_mu_);
  team_done_.wait(lk, [&] { return job_left_ == 0; });
  job_ = nullptr;
}

void HostGradAccumulator::parallel_add(float* dst, const float* src, int64_t n) {
  if (n < int64_t{1} << 16) {  // small chunks: not worth waking the team
    add_range(dst, src, 0, n);
    return;
  }
  run_team([&](int piece, int pieces) {
    int64_t lo = 0, hi = 0;
    piece_range(n, pieces, piece, &lo, &hi);
    add_range(dst, src, lo, hi);
  });
}

void HostGradAccumulator::run_helper(int index) {
  uint64_t seen = 0;
  std::unique_lock lk(team_mu_);
  for (;;) {
    team_cv_.wait(lk, [&] { return team_stop_ || job_gen_ != seen; });
    if (team_stop_) return;
    seen = job_gen_;
    const std::function<void(int, int)>* job = job_;
    const int pieces = job_pieces_;
    lk.unlock();
    (*job)(index, pieces);
    lk.lock();
    if (--job_left_ == 0) team_done_.notify_all();
  }
}

void HostGradAccumulator::drain() {
  {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] {
      return std::none_of(busy_, busy_ + kSlots, [](bool b) { return b; }) || error_;
    });
    rethrow_locked();
  }
  ops_.synchronize(copy_);  // the first reductions' copies straight into the shard
}

double HostGradAccumulator::sumsq() {
  drain();
  const int64_t n = shard_elems_, nblk = (n + Ops::kSumsqBlock - 1) / Ops::kSumsqBlock;
  double* part = static_cast<double*>(ws_.data);  // [nblk] (sumsq_workspace_bytes)
  run_team([&](int piece, int pieces) {
    int64_t b0 = 0, b1 = 0;
    piece_range(nblk, pieces, piece, &b0, &b1);
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t i0 = b * Ops::kSumsqBlock;
      part[b] = cpu::sumsq_block(shard_, i0, std::min(n, i0 + Ops::kSumsqBlock));
    }
  });
  double total = 0.0;
  for (int64_t b = 0; b < nblk; ++b) total += part[b];
  return total;
}

void HostGradAccumulator::zero() {
  drain();
  std::memset(shard_, 0, static_cast<size_t>(shard_elems_) * 4);
}

void HostGradAccumulator::append_pools(std::vector<PoolBytes>& out) const {
  zero::append_pools(host_, true, out);
}

}  // namespace zt::zero
