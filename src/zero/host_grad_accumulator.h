// HostGradAccumulator: under optimizer offload, this rank's fp32 gradient shard [S] lives in
// (pinned) host memory and is accumulated there (DESIGN §6 "Offload"; DeepSpeed's CPU offload
// also accumulates on the CPU), so no [S] gradient buffer stays on the device.
//
// Data flow of one chunk (C shard columns of a group, GradReducer::reduce):
//   the reducer writes the chunk's reduced sum s (reduce-scatter, accumulate off; at W = 1 the
//   packed gradient) into device staging slot k of a ring of kSlots = 2 [C] fp32 buffers on stream
//   `s`; land() enqueues its D2H on this object's copy stream (after s's work so far):
//     first reduction of the step: straight into the host shard [j0, j0 + n) (an overwrite);
//     later micro-steps: into host staging slot k [C], and a worker thread then adds it:
//       shard[j] = shard[j] + s[j] (fp32, split over `threads` host threads: the worker and a
//       fork-join team of threads − 1, as many as the host AdamW's pool, so OMP_NUM_THREADS=1 in
//       the users' launch scripts does not serialise it) — the association of the device path
//       (Comm's accumulate is out + Σ ranks in rank order; at W = 1 shard + packed gradient), so
//       offload on and off agree bitwise. -ffp-contract=off (CMakeLists) keeps the host exact;
//       an add has nothing to contract anyway.
// Synchronisation: the worker waits for the chunk's D2H (its slot's event, synchronize_event;
//   it binds itself to the Ops device first) and then adds, so the thread that enqueues GPU work
//   does not wait for copies or adds as they happen. acquire(k, s) before slot k is rewritten:
//   (host) waits until the worker has finished slot k's previous add — so at most kSlots chunks
//   are in flight, and the host staging slot and its event are never reused early — and (device)
//   makes `s` wait for slot k's previous D2H. Only micro-steps after the first can block the
//   enqueuing thread there (the first micro-step's chunks have no add), and only until the chunk
//   two back (a layer two back in the backward) has been added: the GPU keeps the work already
//   enqueued. drain() waits for everything landed so far: the host shard is complete after it.
// On the CPU backend the copies are synchronous and the events no-ops: only the worker runs
// concurrently, under the same slot protocol.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/ops.h"
#include "core/arena.h"
#include "zero/zero_memory.h"

namespace zt::zero {

class HostGradAccumulator {
 public:
  static constexpr int kSlots = 2;  // staging ring: chunk i reuses chunk i − 2's slot

  // shard: [shard_elems] fp32 host memory (this rank's block of the offloaded optimizer's host
  // gradient), device_slots: [kSlots][chunk] fp32 on the Ops device; both outlive this object.
  // Allocates the host staging [kSlots][chunk] and the norm workspace from host_memory (zt::Error
  // naming the pool on an out-of-memory) and starts the worker thread and threads − 1 helpers
  // for the adds (threads ≥ 1).
  HostGradAccumulator(Ops& ops, MemoryResource& host_memory, float* shard, int64_t shard_elems,
                      float* device_slots, int64_t chunk, int threads = 1);
  // Waits for every landed chunk (errors swallowed), then stops the worker.
  ~HostGradAccumulator();
  HostGradAccumulator(const HostGradAccumulator&) = delete;
  HostGradAccumulator& operator=(const HostGradAccumulator&) = delete;

  // Device staging slot k, [chunk] fp32.
  float* slot(int k) const { return dev_slots_ + k * chunk_; }
  // Before slot k is written on stream s: waits until the worker has added slot k's previous
  // chunk, and makes s wait for slot k's previous D2H. Rethrows a worker's error.
  void acquire(int k, Stream s);
  // Slot k holds (on stream s) the reduced sum of shard columns [j0, j0 + n), n <= chunk: copies it
  // D2H and overwrites (first) or adds into the host shard, as the file comment says.
  void land(int k, int64_t j0, int64_t n, bool first, Stream s);
  // Returns when every chunk landed so far is in the host shard. Rethrows a worker's error.
  void drain();
  // Σ x² (fp64) over the host shard after drain(): Ops::sumsq's blocks (cpu::sumsq_block) split
  // over the team, their partials added in block order — bitwise CpuOps::sumsq and the device's.
  double sumsq();
  // drain(), then zeroes the host shard.
  void zero();
  float* shard() const { return shard_; }
  void append_pools(std::vector<PoolBytes>& out) const;

 private:
  struct Task {
    int k;
    int64_t j0, n;
  };
  float* host_slot(int k) const { return host_slots_ + k * chunk_; }
  void run_worker();
  // Runs job(piece, pieces) for piece = 0 .. pieces − 1 on the calling thread (piece 0) and the
  // helpers (fork-join; pieces = helpers + 1). Called by one thread at a time (the worker's adds,
  // or sumsq/zero after drain()).
  void run_team(const std::function<void(int, int)>& job);
  // dst[i] = dst[i] + src[i] for i < n, split over the team.
  void parallel_add(float* dst, const float* src, int64_t n);
  void run_helper(int index);
  void stop_threads();
  // Rethrows (once) an error the worker met; call with mu_ held.
  void rethrow_locked();

  Ops& ops_;
  CpuOps cpu_;  // the host arithmetic: add and sumsq, the CPU reference of the device kernels
  Arena host_;
  float* shard_;
  int64_t shard_elems_;
  float* dev_slots_;
  int64_t chunk_;
  float* host_slots_ = nullptr;
  Tensor ws_;  // sumsq workspace (host)
  OwnedStream copy_;
  OwnedEvent ev_ready_;           // the reducer's stream → the copy stream
  OwnedEvent ev_landed_[kSlots];  // slot k's last D2H has completed

  // Worker state, guarded by mu_.
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> tasks_;
  bool busy_[kSlots] = {};  // slot k has an add queued or running
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread worker_;

  // Fork-join team of the adds, guarded by team_mu_: job_gen_ counts jobs, job_left_ the helpers
  // still working on the current one.
  std::mutex team_mu_;
  std::condition_variable team_cv_, team_done_;
  uint64_t job_gen_ = 0;
  int job_left_ = 0;
  bool team_stop_ = false;
  const std::function<void(int, int)>* job_ = nullptr;
  int job_pieces_ = 1;
  std::vector<std::thread> team_;
};

}  // namespace zt::zero
