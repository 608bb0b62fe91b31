// The device Comm (DESIGN §6–7, issue 9): collectives on CUDA device memory over NCCL, one process
// per GPU, on a communication stream of its own.
//
// Construction. NcclComm wraps a host Comm (MPI, TCP or single — the one bootstrap.h makes), which
// carries the ncclUniqueId from rank 0 to every rank and keeps serving the small host collectives.
// It selects the CUDA device (LOCAL_RANK), creates a non-blocking communication stream, sets
// NCCL_NVLS_ENABLE=0 unless the environment set it (NVLink multicast stays off), initialises a
// non-blocking NCCL communicator (ncclConfig_t.blocking = 0: no NCCL call can block the process
// forever), and allocates the reduce-scatter scratch: [max_bucket_elems] fp32, once. World size 1
// creates no NCCL communicator and no scratch: every collective is a copy or the add kernel.
//
// Buffers. Each collective looks at its pointers (cudaPointerGetAttributes): device (or managed)
// memory goes to NCCL; host memory (pageable or pinned) goes to the host Comm, synchronously —
// that is how the small all_reduce / all_gather_f64 / sum_in_rank_order of the base class, and a
// broadcast of a host value, keep working unchanged. A collective mixing host and device buffers
// is an error. barrier() is the host Comm's.
//
// Ordering. A device collective with stream s is enqueued so that it runs after the work already
// on s and before the work enqueued on s afterwards: an event recorded on s, the comm stream waits
// for it, runs the collective, records a completion event, and s waits for that. The call returns
// at once (asynchronous for the host). To overlap communication with compute, pass a side stream
// of your own as s (ordered after compute by an event) and make compute wait for it when the
// result is needed. World size 1 enqueues directly on s.
//
// Determinism. reduce_scatter_sum never uses NCCL's reduction: a grouped ncclSend/ncclRecv
// all-to-all moves rank q's block of this rank's shard into scratch [W][n/W] (the bytes a ring
// reduce-scatter moves), then rank_order_sum adds the W blocks in rank order 0..W-1 — bitwise the
// CPU Comms' fold_rank_order, whatever NCCL's algorithm or protocol. all_gather and broadcast move
// bytes only. reduce_scatter_native (ncclReduceScatter) exists for the benchmark alone.
//
// Failure. A watchdog thread (W > 1) polls, every kWatchdogPeriod:
//   - ncclCommGetAsyncError (an error NCCL saw: network, remote, internal);
//   - the host Comm's lost_peer() (the TCP Comm sees a dead peer's sockets close at once) — when a
//     peer is gone and a device collective stays incomplete for peer_gone_grace_s;
//   - the age of the oldest incomplete collective against timeout_s (ZT_COMM_TIMEOUT_S).
// On any of them it records the failure (naming the collective, its size, call number and the
// cause), aborts the communicator (ncclCommAbort makes the NCCL kernels in flight return, so
// streams waiting on them drain), and from then on every call of this Comm — collectives, barrier,
// synchronize — throws zt::Error with that message on the calling thread. If the main thread does
// not come back to the Comm within exit_grace_s, or having raised the error does not unwind to
// this Comm's destructor within 30 s (stuck in a stream synchronisation or a cudaFree that the
// abort did not release), the watchdog prints the message and ends the process with status 1.
// So a killed rank makes every survivor exit non-zero within about peer_gone_grace_s + 0.1 s
// (then exit_grace_s at worst: 15 s by default) under the TCP host Comm; under MPI, mpirun ends the
// job, and NCCL's own errors and the timeout remain. Waits inside the Comm (communicator set-up, a
// non-blocking call still in progress, synchronize) poll the same conditions and throw directly.
// Data a collective received when it was aborted is garbage: nothing may be saved after a
// failure, which the throwing calls (barrier before a checkpoint included) ensure. Every
// ncclCommAbort runs on a detached thread (an abort that blocks, NVIDIA/nccl#863, cannot stop
// the deadlines above).
//
// Teardown: the destructor of a Comm that did not fail (and is not destroyed by an exception)
// calls ncclCommFinalize — which waits until no peer still needs this rank's buffers; bounded by
// timeout_s and by the peer-gone grace — then ncclCommDestroy; otherwise it aborts. End a job with
// synchronize() and barrier() before the Comm goes (the trainer's final barrier does).
//
// Threads: one thread makes the calls (as for every Comm); the watchdog is internal.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dist/comm.h"

namespace zt::dist {

struct NcclCommOptions {
  // Reduce-scatter scratch, fp32 elements: the largest n reduce_scatter_sum will be called with
  // (the ZeRO engine's W × max group shard). Allocated once at construction (W > 1 only); a
  // larger call throws.
  size_t max_bucket_elems = 0;
  // Seconds a device collective may stay incomplete (and set-up may take) before it counts as
  // hung (ZT_COMM_TIMEOUT_S).
  double timeout_s = 1800.0;
  // Seconds an incomplete collective may wait once the host Comm reports a peer gone.
  double peer_gone_grace_s = 5.0;
  // Seconds the watchdog waits, after aborting, for the main thread to raise the failure before
  // it ends the process itself.
  double exit_grace_s = 10.0;
};

class NcclComm final : public Comm {
 public:
  // host: the job's host Comm (its rank / world size / local rank become this Comm's). device:
  // CUDA device index (LOCAL_RANK). Throws zt::Error naming the device (no such device, fewer
  // devices than local ranks), the NCCL call that failed, a peer that vanished during set-up, or
  // the set-up timeout.
  NcclComm(std::unique_ptr<Comm> host, int device, const NcclCommOptions& options);
  ~NcclComm() override;

  std::string_view backend() const override { return world_size() > 1 ? "nccl" : "cuda"; }
  void synchronize(Stream stream) override;
  int lost_peer() const override { return host_->lost_peer(); }

  // ncclReduceScatter (fp32 sum, NCCL's own order): send [n] device, out [n/W] device. For the
  // benchmark's comparison only — its bits may depend on NCCL's algorithm and protocol.
  void reduce_scatter_native(const float* send, float* out, size_t n, Stream stream = nullptr);

  int device() const { return device_; }
  // Device bytes this Comm allocated itself (the reduce-scatter scratch), for the memory report.
  size_t scratch_bytes() const { return scratch_elems_ * sizeof(float); }
  // The host Comm carrying the small collectives.
  Comm& host() { return *host_; }

 protected:
  void do_reduce_scatter_sum(const float* send, float* out, size_t n, bool accumulate,
                             Stream stream) override;
  void do_all_gather_bytes(const void* send, void* out, size_t bytes, Stream stream) override;
  void do_broadcast(void* data, size_t bytes, int root, Stream stream) override;
  void do_barrier() override;

 private:
  // An enqueued device collective, until its completion event fires.
  struct InFlight {
    const char* op = "";
    size_t bytes = 0;
    uint64_t call = 0;
    double enqueued_s = 0;
  };

  void init_nccl();
  // Stops the watchdog, ends the communicator (finalize + destroy, or when `failing` an abort),
  // frees what the constructor made.
  void release(bool failing);
  // Runs `calls(ncclComm_t*)` (NCCL calls returning the first ncclResult_t that failed) under the
  // NCCL lock; an error records the failure, aborts and throws naming `what`; then waits until
  // the non-blocking communicator has taken the calls (wait_ready).
  template <typename Calls>
  void enqueue(const char* what, Calls&& calls);
  // Throws the recorded failure, if any.
  void raise_if_failed();
  // Records `message` as the failure (the first one wins) and aborts the NCCL communicator.
  void fail_and_abort(const std::string& message);
  // Takes the communicator out (nccl_ = null) and runs ncclCommAbort on a detached thread; returns
  // the flag that thread sets when the abort returned (null if the NCCL lock was not free).
  std::shared_ptr<std::atomic<bool>> start_abort();
  // ncclCommFinalize, then waits (bounded: timeout, peer gone) until it completed; nccl_mu_ held.
  bool finalize_locked();
  // Waits until the non-blocking communicator has finished the last call (ncclInProgress →
  // ncclSuccess), checking the failure conditions; throws naming `what`.
  void wait_ready(const char* what);
  // Ordering around a device collective on the comm stream (see the file comment).
  void begin_on(cudaStream_t caller);
  void end_on(cudaStream_t caller, const char* op, size_t bytes);
  // Retires completed collectives; returns the oldest incomplete one (false if none).
  bool oldest_in_flight(InFlight* out);
  void watchdog();
  // One watchdog round: the failure to record (empty if none). gone_since: when a lost peer was
  // first seen while a collective was in flight (-1: not).
  std::string find_problem(double* gone_since);
  std::string describe(const InFlight& f) const;

  std::unique_ptr<Comm> host_;
  int device_ = 0;
  NcclCommOptions opt_;
  cudaStream_t comm_stream_ = nullptr;
  cudaEvent_t caller_ready_ = nullptr;  // recorded on the caller's stream before each collective
  cudaEvent_t sync_event_ = nullptr;    // synchronize()'s marker
  float* scratch_ = nullptr;            // [scratch_elems_] fp32, the all-to-all's receive buffer
  size_t scratch_elems_ = 0;

  // NCCL handle: every NCCL call (either thread) holds nccl_mu_; the abort sets it to null.
  std::timed_mutex nccl_mu_;
  ncclComm_t nccl_ = nullptr;
  bool aborted_ = false;                           // set once nccl_ is gone for good
  std::shared_ptr<std::atomic<bool>> abort_done_;  // the detached abort finished

  // Completion events of the enqueued collectives, a ring [kRing] (guarded by ring_mu_).
  std::mutex ring_mu_;
  std::vector<cudaEvent_t> ring_;
  std::vector<InFlight> ring_info_;
  uint64_t ring_head_ = 0, ring_tail_ = 0;
  uint64_t calls_ = 0;

  // Failure state.
  std::atomic<bool> failed_{false};
  std::atomic<bool> raised_{false};
  std::mutex error_mu_;
  std::string error_;

  // Watchdog thread.
  std::mutex wd_mu_;
  std::condition_variable wd_cv_;
  bool wd_stop_ = false;
  std::thread wd_;
};

}  // namespace zt::dist
