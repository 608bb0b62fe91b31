// HostAdamW: the CPU AdamW of the optimizer offload as a pool of its own worker threads, fed chunk
// by chunk so the ZeRO engine can pipeline (gradient chunk D2H -> AdamW on that chunk -> bf16 H2D).
//
// The workers are std::threads, not OpenMP: OMP_NUM_THREADS (often 1 in the users' launch scripts)
// does not limit them. Each submitted chunk is split into at most `threads()` pieces whose bounds
// are multiples of 16 elements (64 bytes of fp32) from the chunk start, and each piece runs
// adamw_cpu_range() (optim/adamw.h) on one worker. AdamW is element-wise, so the result is bitwise
// equal to adamw_cpu() on the same arrays whatever the split, thread count or order of completion.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "optim/adamw.h"

namespace zt::optim {

// The environment variable that sets the thread count when the caller asks for the automatic one.
inline constexpr const char* kHostAdamThreadsEnv = "ZT_HOST_ADAM_THREADS";

// A thread count and the reason for it (for the start-up log).
struct HostAdamWThreads {
  int threads = 1;
  std::string reason;  // e.g. "automatic: 16 hardware threads / 2 local ranks"
};

// Resolves the pool size. requested > 0 wins; requested == 0 means: env_value (the text of
// ZT_HOST_ADAM_THREADS, null or empty = unset) when set, else automatic =
// max(1, hardware_threads / local_world_size), further capped by affinity_cpus (the CPUs this
// process may run on; a launcher that binds each rank to its own cores has already divided them).
// Throws zt::Error naming ZT_HOST_ADAM_THREADS and its value unless it is an integer in [1, 1024];
// zt::Error for requested < 0 or local_world_size < 1. Pure (reads no environment): testable.
HostAdamWThreads host_adamw_threads(int requested, int local_world_size, const char* env_value,
                                    unsigned hardware_threads, unsigned affinity_cpus);

class HostAdamW {
 public:
  // Identifies one submitted chunk. Ticket{} (id 0) is never issued and counts as done.
  struct Ticket {
    uint64_t id = 0;
  };

  // Starts the worker threads. threads > 0: that many; 0: host_adamw_threads() with the process's
  // environment (ZT_HOST_ADAM_THREADS), std::thread::hardware_concurrency() and the CPU affinity
  // mask. local_world_size: ranks of this job on this host (they share its cores). Throws
  // zt::Error as host_adamw_threads() does.
  explicit HostAdamW(int threads = 0, int local_world_size = 1);
  // Finishes every submitted chunk, then joins the workers.
  ~HostAdamW();
  HostAdamW(const HostAdamW&) = delete;
  HostAdamW& operator=(const HostAdamW&) = delete;

  int threads() const { return static_cast<int>(workers_.size()); }

  // One line for the start-up log, e.g. "host AdamW: 8 threads (automatic: 16 hardware threads /
  // 2 local ranks; OMP_NUM_THREADS=1 does not apply)".
  std::string describe() const;

  // Enqueues AdamW (adamw_cpu's arithmetic and arguments) on one chunk of n elements: master, m,
  // v [n] fp32 updated in place, grad [n] fp32 raw gradient, bf16_out [n] (null = none) receives
  // bf16(master). Returns at once; the arrays must stay valid and untouched by the caller until
  // wait() on the returned ticket (or wait_all()) returns, and must not overlap each other or
  // another in-flight chunk's. `st` is copied. n == 0 gives a ticket that is already done. Chunks
  // may finish in any order. Thread-safe (any thread may submit and wait).
  Ticket submit(const AdamWStep& st, float* master, float* m, float* v, const float* grad, size_t n,
                uint16_t* bf16_out);
  // submit() for a split master (optim/master_split.h): hi [n] (the bf16 weights) and lo [n] hold
  // it and are rewritten in place (adamw_split_cpu's arithmetic and arguments); the same rules.
  Ticket submit_split(const AdamWStep& st, uint16_t* hi, uint16_t* lo, float* m, float* v,
                      const float* grad, size_t n);
  // Blocks (no spinning) until the chunk of `t` is done; returns at once if it already is. Throws
  // zt::Error for a ticket this pool has not issued (waiting on it could never end).
  void wait(Ticket t);
  // Blocks until every chunk submitted so far is done.
  void wait_all();
  // submit() + wait(): the blocking form.
  void run(const AdamWStep& st, float* master, float* m, float* v, const float* grad, size_t n,
           uint16_t* bf16_out);

 private:
  // One piece of a chunk: the work of one worker. A split master: p null, pb the high halves,
  // lo the low halves.
  struct Piece {
    uint64_t id;  // the chunk's ticket
    AdamWStep st;
    float* p;
    float* m;
    float* v;
    const float* g;
    size_t n;
    uint16_t* pb;
    uint16_t* lo;
  };
  Ticket enqueue(const AdamWStep& st, float* master, uint16_t* lo, float* m, float* v,
                 const float* grad, size_t n, uint16_t* bf16_out);

  void worker();
  bool done_locked(uint64_t id) const;  // caller holds mu_

  HostAdamWThreads config_;
  std::mutex mu_;
  std::condition_variable work_cv_;  // workers: queue_ not empty, or stop_
  std::condition_variable done_cv_;  // waiters: some chunk finished
  std::deque<Piece> queue_;          // pieces not yet taken, in submission order
  // Pieces still running or queued of chunks first_id_, first_id_+1, ...; the front is popped
  // while it is 0, so every id below first_id_ is done.
  std::deque<int> remaining_;
  uint64_t first_id_ = 1;
  uint64_t next_id_ = 1;  // the id the next submit() returns
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace zt::optim
