// NcclComm: set-up, the collectives, stream ordering, the watchdog (see comm_nccl.h).
#include "dist/nccl/comm_nccl.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "core/error.h"
#include "core/log.h"
#include "dist/nccl/nccl_check.h"
#include "dist/nccl/rank_order_sum.h"

namespace zt::dist {

using nccl::check;

namespace {

// Completion events kept for the watchdog; a 257th collective in flight waits for the oldest.
constexpr size_t kRing = 256;
constexpr auto kWatchdogPeriod = std::chrono::milliseconds(100);
// Host-side polling of a wait (set-up, synchronize): short spins first, then short sleeps.
constexpr int kSpinPolls = 200;
constexpr auto kPollSleep = std::chrono::microseconds(50);
// How long an abort waits for the NCCL lock (the main thread holds it only while enqueueing).
constexpr auto kAbortLockWait = std::chrono::seconds(5);
// How long the destructor waits for an abort before it leaves it running and goes on.
constexpr double kAbortWaitS = 10.0;
// After a failure was raised, how long the process may take to unwind to this Comm's destructor.
constexpr double kUnwindGraceS = 30.0;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void poll_pause(int polls) {
  if (polls < kSpinPolls)
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(kPollSleep);
}

cudaStream_t cuda_stream(Stream s) { return static_cast<cudaStream_t>(s); }

bool is_bad(ncclResult_t r) { return r != ncclSuccess && r != ncclInProgress; }

// Device (or managed) memory goes to NCCL; host memory (pageable or pinned) to the host Comm.
bool on_device(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();  // not a pointer CUDA knows: host memory
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

// True when both buffers are device memory, false when both are host memory; throws otherwise.
bool both_on_device(const void* a, const char* a_name, const void* b, const char* b_name,
                    const char* op) {
  const bool da = on_device(a), db = on_device(b);
  if (da != db)
    fail(
        "{}: {} is {} memory but {} is {} memory (expected both on the device or both on the "
        "host)",
        op, a_name, da ? "device" : "host", b_name, db ? "device" : "host");
  return da;
}

}  // namespace

NcclComm::NcclComm(std::unique_ptr<Comm> host, int device, const NcclCommOptions& options)
    : host_(std::move(host)), device_(device), opt_(options) {
  if (!host_) fail("device comm: no host Comm given");
  set_identity(host_->rank(), host_->world_size(), host_->local_rank(), host_->local_world_size());
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    fail("device comm: no CUDA device is visible ({})",
         e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
  }
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (device_ < 0 || device_ >= count)
    fail(
        "device comm: rank {} wants CUDA device {} (LOCAL_RANK) but {} device(s) are visible "
        "(CUDA_VISIBLE_DEVICES={})",
        rank(), device_, count, visible ? visible : "unset");
  if (world_size() > 1 && local_world_size() > count)
    fail(
        "device comm: {} ranks on this host but {} CUDA device(s) visible (CUDA_VISIBLE_DEVICES="
        "{}); NCCL needs one GPU per rank",
        local_world_size(), count, visible ? visible : "unset");
  try {
    check(cudaSetDevice(device_), "cudaSetDevice (device comm)");
    check(cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking),
          "cudaStreamCreateWithFlags (comm stream)");
    check(cudaEventCreateWithFlags(&caller_ready_, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventCreateWithFlags(&sync_event_, cudaEventDisableTiming), "cudaEventCreate");
    if (world_size() == 1) return;
    ring_.assign(kRing, nullptr);
    ring_info_.assign(kRing, InFlight{});
    for (cudaEvent_t& ev : ring_)
      check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
    if (opt_.max_bucket_elems > 0) {
      const size_t bytes = opt_.max_bucket_elems * sizeof(float);
      if (cudaMalloc(&scratch_, bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        (void)cudaMemGetInfo(&free_b, &total_b);
        scratch_ = nullptr;
        fail(
            "device comm: cannot allocate the reduce-scatter scratch ({} fp32 elements, {} bytes) "
            "on CUDA device {}: {} bytes free",
            opt_.max_bucket_elems, bytes, device_, free_b);
      }
      scratch_elems_ = opt_.max_bucket_elems;
    }
    init_nccl();
    wd_ = std::thread([this] { watchdog(); });
  } catch (...) {
    release(/*failing=*/true);
    throw;
  }
}

NcclComm::~NcclComm() { release(failed_.load() || std::uncaught_exceptions() > 0); }

void NcclComm::release(bool failing) {
  {
    std::lock_guard lk(wd_mu_);
    wd_stop_ = true;
  }
  wd_cv_.notify_all();
  if (wd_.joinable()) wd_.join();
  // A clean end finalizes (waits until no peer still needs this rank's buffers, bounded like any
  // wait here) and destroys; a failing one aborts, on a helper thread so that an abort that hangs
  // cannot hang the process.
  bool clean = !failing;
  {
    std::lock_guard lk(nccl_mu_);
    if (nccl_ && clean) clean = finalize_locked();
    if (nccl_ && clean) {
      (void)ncclCommDestroy(nccl_);
      nccl_ = nullptr;
      aborted_ = true;
    }
  }
  const std::shared_ptr<std::atomic<bool>> done = nccl_ ? start_abort() : abort_done_;
  const double until = now_s() + kAbortWaitS;
  while (done && !done->load() && now_s() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const bool drained = !done || done->load();
  // cudaFree waits for the device: skip it while an abort may leave NCCL kernels running (the
  // process is failing; the driver reclaims the memory at exit).
  if (scratch_ && drained) (void)cudaFree(scratch_);
  scratch_ = nullptr;
  for (cudaEvent_t& ev : ring_)
    if (ev) (void)cudaEventDestroy(ev);
  ring_.clear();
  if (sync_event_) (void)cudaEventDestroy(sync_event_);
  if (caller_ready_) (void)cudaEventDestroy(caller_ready_);
  if (comm_stream_) (void)cudaStreamDestroy(comm_stream_);
  sync_event_ = caller_ready_ = nullptr;
  comm_stream_ = nullptr;
}

bool NcclComm::finalize_locked() {
  if (is_bad(ncclCommFinalize(nccl_))) return false;
  const double t0 = now_s();
  double gone_since = -1.0;
  for (int polls = 0;; ++polls) {
    ncclResult_t st = ncclSuccess;
    (void)ncclCommGetAsyncError(nccl_, &st);
    if (st == ncclSuccess) return true;
    if (is_bad(st)) return false;
    const double t = now_s();
    if (host_->lost_peer() >= 0) {
      if (gone_since < 0) gone_since = t;
      if (t - gone_since > opt_.peer_gone_grace_s) return false;
    }
    if (t - t0 > opt_.timeout_s) return false;
    poll_pause(polls);
  }
}

std::shared_ptr<std::atomic<bool>> NcclComm::start_abort() {
  std::unique_lock lk(nccl_mu_, std::defer_lock);
  if (!lk.try_lock_for(kAbortLockWait)) return nullptr;  // the watchdog's exit path remains
  aborted_ = true;
  if (!nccl_) return abort_done_;
  const ncclComm_t comm = nccl_;
  nccl_ = nullptr;
  abort_done_ = std::make_shared<std::atomic<bool>>(false);
  // ncclCommAbort makes the NCCL kernels in flight return and frees the communicator; it runs
  // detached so that the caller's deadlines hold even if it blocks (NVIDIA/nccl#863, #992).
  std::thread([comm, done = abort_done_] {
    (void)ncclCommAbort(comm);
    done->store(true);
  }).detach();
  return abort_done_;
}

void NcclComm::init_nccl() {
  // NVLink multicast (NVLS) stays off unless the environment asks (the users' machines run
  // without it); must be set before the first communicator reads NCCL's parameters.
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  ncclUniqueId id{};
  if (rank() == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  host_->broadcast(&id, sizeof(id), 0);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = "zerotune";
  enqueue("ncclCommInitRankConfig (communicator set-up)", [&](ncclComm_t* c) {
    return ncclCommInitRankConfig(c, world_size(), id, rank(), &config);
  });
  log::debug("device comm: rank {}/{} on CUDA device {}, NCCL communicator ready", rank(),
             world_size(), device_);
}

// ---- failure state ----

void NcclComm::raise_if_failed() {
  if (!failed_.load()) return;
  std::string msg;
  {
    std::lock_guard lk(error_mu_);
    msg = error_;
  }
  {
    std::lock_guard lk(wd_mu_);
    raised_ = true;
  }
  wd_cv_.notify_all();
  throw Error(msg);
}

void NcclComm::fail_and_abort(const std::string& message) {
  {
    std::lock_guard lk(error_mu_);
    if (!failed_.load()) {
      error_ = message;
      failed_.store(true);
    }
  }
  (void)start_abort();
}

std::string NcclComm::describe(const InFlight& f) const {
  return fmt::format("NCCL {} of {} bytes (call #{}, enqueued {:.1f} s ago)", f.op, f.bytes, f.call,
                     now_s() - f.enqueued_s);
}

// ---- enqueueing ----

template <typename Calls>
void NcclComm::enqueue(const char* what, Calls&& calls) {
  raise_if_failed();
  std::string err;
  {
    std::lock_guard lk(nccl_mu_);
    if (aborted_) {
      err = fmt::format("{} on rank {}: the NCCL communicator was aborted", what, rank());
    } else {
      const ncclResult_t r = calls(&nccl_);
      if (is_bad(r))
        err = fmt::format("{} failed on rank {}: NCCL {} ({})", what, rank(), ncclGetErrorString(r),
                          ncclGetLastError(nccl_));
    }
  }
  if (!err.empty()) {
    fail_and_abort(err);
    raise_if_failed();
  }
  wait_ready(what);
}

void NcclComm::wait_ready(const char* what) {
  const double t0 = now_s();
  double gone_since = -1.0;
  for (int polls = 0;; ++polls) {
    raise_if_failed();
    ncclResult_t st = ncclSuccess;
    std::string last;
    {
      std::lock_guard lk(nccl_mu_);
      if (!nccl_) break;  // aborted meanwhile: raise_if_failed below
      (void)ncclCommGetAsyncError(nccl_, &st);
      if (is_bad(st)) last = ncclGetLastError(nccl_);
    }
    if (st == ncclSuccess) return;
    std::string problem;
    const double t = now_s();
    const int lost = host_->lost_peer();
    if (lost >= 0 && gone_since < 0) gone_since = t;
    if (is_bad(st))
      problem = fmt::format("{} failed on rank {}: NCCL {} ({})", what, rank(),
                            ncclGetErrorString(st), last);
    else if (lost >= 0 && t - gone_since > opt_.peer_gone_grace_s)
      problem = fmt::format("{} did not finish on rank {}: rank {}'s process is gone", what, rank(),
                            lost);
    else if (t - t0 > opt_.timeout_s)
      problem = fmt::format(
          "{} did not finish on rank {} within {:g} s (trainer.ddp_timeout / ZT_COMM_TIMEOUT_S)",
          what, rank(), opt_.timeout_s);
    if (!problem.empty()) {
      fail_and_abort(problem);
      break;
    }
    poll_pause(polls);
  }
  raise_if_failed();
  fail("{} on rank {}: the NCCL communicator was aborted", what, rank());
}

void NcclComm::begin_on(cudaStream_t caller) {
  check(cudaEventRecord(caller_ready_, caller), "cudaEventRecord (before a collective)");
  check(cudaStreamWaitEvent(comm_stream_, caller_ready_, 0), "cudaStreamWaitEvent (comm stream)");
}

void NcclComm::end_on(cudaStream_t caller, const char* op, size_t bytes) {
  std::unique_lock lk(ring_mu_);
  for (int polls = 0; ring_head_ - ring_tail_ == kRing; ++polls) {
    lk.unlock();
    InFlight ignored;
    oldest_in_flight(&ignored);  // retires what completed
    raise_if_failed();
    poll_pause(polls);
    lk.lock();
  }
  const size_t slot = ring_head_ % kRing;
  check(cudaEventRecord(ring_[slot], comm_stream_), "cudaEventRecord (after a collective)");
  ring_info_[slot] = InFlight{op, bytes, ++calls_, now_s()};
  ++ring_head_;
  lk.unlock();
  check(cudaStreamWaitEvent(caller, ring_[slot], 0), "cudaStreamWaitEvent (caller stream)");
}

bool NcclComm::oldest_in_flight(InFlight* out) {
  std::lock_guard lk(ring_mu_);
  while (ring_tail_ < ring_head_) {
    const cudaError_t e = cudaEventQuery(ring_[ring_tail_ % kRing]);
    if (e == cudaErrorNotReady) break;
    if (e != cudaSuccess) {
      // A sticky CUDA error: the collective never completes. It stays the oldest in flight (the
      // timeout ends the run) while the caller's own CUDA calls fail with the error.
      (void)cudaGetLastError();
      *out = ring_info_[ring_tail_ % kRing];
      return true;
    }
    ++ring_tail_;
  }
  if (ring_tail_ == ring_head_) return false;
  *out = ring_info_[ring_tail_ % kRing];
  return true;
}

// ---- collectives ----

void NcclComm::do_reduce_scatter_sum(const float* send, float* out, size_t n, bool accumulate,
                                     Stream stream) {
  raise_if_failed();
  if (!both_on_device(send, "send", out, "out", "reduce_scatter")) {
    host_->reduce_scatter_sum(send, out, n, accumulate);
    return;
  }
  const cudaStream_t s = cuda_stream(stream);
  const int w = world_size(), r = rank();
  if (w == 1) {
    if (accumulate)
      nccl::rank_order_sum(out, nullptr, send, 0, 1, n, true, s);
    else
      check(cudaMemcpyAsync(out, send, n * sizeof(float), cudaMemcpyDeviceToDevice, s),
            "cudaMemcpyAsync (reduce_scatter, world size 1)");
    return;
  }
  if (n > scratch_elems_)
    fail(
        "reduce_scatter: {} elements exceed the device Comm's scratch of {} elements "
        "(NcclCommOptions::max_bucket_elems, sized at start-up from the largest bucket)",
        n, scratch_elems_);
  const size_t shard = n / static_cast<size_t>(w);
  begin_on(s);
  // All-to-all: block q of `send` goes to rank q, rank q's block r lands in scratch_[q].
  enqueue("reduce_scatter_sum (all-to-all)", [&](ncclComm_t* c) {
    ncclResult_t res = ncclGroupStart();
    for (int k = 1; k < w && !is_bad(res); ++k) {
      const int q = (r + k) % w;
      res =
          ncclSend(send + static_cast<size_t>(q) * shard, shard, ncclFloat32, q, *c, comm_stream_);
      if (!is_bad(res))
        res = ncclRecv(scratch_ + static_cast<size_t>(q) * shard, shard, ncclFloat32, q, *c,
                       comm_stream_);
    }
    const ncclResult_t end = ncclGroupEnd();
    return is_bad(res) ? res : end;
  });
  nccl::rank_order_sum(out, scratch_, send + static_cast<size_t>(r) * shard, r, w, shard,
                       accumulate, comm_stream_);
  end_on(s, "reduce_scatter_sum", n * sizeof(float));
}

void NcclComm::reduce_scatter_native(const float* send, float* out, size_t n, Stream stream) {
  raise_if_failed();
  const auto w = static_cast<size_t>(world_size());
  if (n % w != 0)
    fail("reduce_scatter_native: {} elements is not a multiple of the world size {}", n, w);
  if (!both_on_device(send, "send", out, "out", "reduce_scatter_native") || n == 0)
    fail("reduce_scatter_native: expected non-empty device buffers");
  const cudaStream_t s = cuda_stream(stream);
  if (w == 1) {
    check(cudaMemcpyAsync(out, send, n * sizeof(float), cudaMemcpyDeviceToDevice, s),
          "cudaMemcpyAsync (reduce_scatter_native, world size 1)");
    return;
  }
  begin_on(s);
  enqueue("ncclReduceScatter", [&](ncclComm_t* c) {
    return ncclReduceScatter(send, out, n / w, ncclFloat32, ncclSum, *c, comm_stream_);
  });
  end_on(s, "ncclReduceScatter", n * sizeof(float));
}

void NcclComm::do_all_gather_bytes(const void* send, void* out, size_t bytes, Stream stream) {
  raise_if_failed();
  if (!both_on_device(send, "send", out, "out", "all_gather")) {
    host_->all_gather_bytes(send, out, bytes);
    return;
  }
  const cudaStream_t s = cuda_stream(stream);
  if (world_size() == 1) {
    if (send != out)
      check(cudaMemcpyAsync(out, send, bytes, cudaMemcpyDeviceToDevice, s),
            "cudaMemcpyAsync (all_gather, world size 1)");
    return;
  }
  begin_on(s);
  enqueue("ncclAllGather", [&](ncclComm_t* c) {
    return ncclAllGather(send, out, bytes, ncclUint8, *c, comm_stream_);
  });
  end_on(s, "all_gather", bytes * static_cast<size_t>(world_size()));
}

void NcclComm::do_broadcast(void* data, size_t bytes, int root, Stream stream) {
  raise_if_failed();
  if (!on_device(data)) {
    host_->broadcast(data, bytes, root);
    return;
  }
  const cudaStream_t s = cuda_stream(stream);
  begin_on(s);
  enqueue("ncclBroadcast", [&](ncclComm_t* c) {
    return ncclBroadcast(data, data, bytes, ncclUint8, root, *c, comm_stream_);
  });
  end_on(s, "broadcast", bytes);
}

void NcclComm::do_barrier() {
  raise_if_failed();
  host_->barrier();
}

void NcclComm::synchronize(Stream stream) {
  raise_if_failed();
  const cudaStream_t s = cuda_stream(stream);
  if (world_size() == 1) {
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize (Comm::synchronize)");
    return;
  }
  check(cudaEventRecord(sync_event_, s), "cudaEventRecord (Comm::synchronize)");
  for (int polls = 0;; ++polls) {
    const cudaError_t e = cudaEventQuery(sync_event_);
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) nccl::throw_cuda_error(e, "Comm::synchronize");
    raise_if_failed();
    poll_pause(polls);
  }
  raise_if_failed();  // an abort lets the stream drain with garbage: never report success then
}

// ---- watchdog ----

void NcclComm::watchdog() {
  (void)cudaSetDevice(device_);
  double gone_since = -1.0;
  std::unique_lock lk(wd_mu_);
  while (!wd_stop_ && !failed_.load()) {
    wd_cv_.wait_for(lk, kWatchdogPeriod, [&] { return wd_stop_; });
    if (wd_stop_ || failed_.load()) break;
    lk.unlock();
    const std::string problem = find_problem(&gone_since);
    if (!problem.empty()) fail_and_abort(problem);
    lk.lock();
  }
  if (wd_stop_) return;
  // The communicator failed (found here or by the main thread). The main thread must raise it
  // within exit_grace_s and then finish unwinding to this Comm's destructor within
  // kUnwindGraceS — a stream synchronisation or cudaFree that the abort did not release would
  // otherwise hang the process.
  std::string msg;
  {
    std::lock_guard el(error_mu_);
    msg = error_;
  }
  const char* stage = nullptr;
  if (!wd_cv_.wait_for(lk, std::chrono::duration<double>(opt_.exit_grace_s),
                       [&] { return wd_stop_ || raised_; }))
    stage = "did not return to it";
  else if (!wd_stop_ && !wd_cv_.wait_for(lk, std::chrono::duration<double>(kUnwindGraceS),
                                         [&] { return wd_stop_; }))
    stage = "did not finish unwinding";
  if (!stage) return;
  std::fprintf(stderr,
               "zerotune: error: %s (the communicator was aborted; the process %s in time, so it "
               "exits here)\n",
               msg.c_str(), stage);
  std::fflush(stderr);
  std::_Exit(1);
}

std::string NcclComm::find_problem(double* gone_since) {
  InFlight f;
  const bool busy = oldest_in_flight(&f);
  {
    std::unique_lock nl(nccl_mu_, std::defer_lock);
    if (nl.try_lock_for(std::chrono::milliseconds(100)) && nccl_) {
      ncclResult_t st = ncclSuccess;
      (void)ncclCommGetAsyncError(nccl_, &st);
      if (is_bad(st))
        return fmt::format("NCCL reported an error on rank {}{}: {} ({})", rank(),
                           busy ? " during " + describe(f) : std::string(), ncclGetErrorString(st),
                           ncclGetLastError(nccl_));
    }
  }
  if (!busy) {
    *gone_since = -1.0;
    return "";
  }
  const double t = now_s();
  const int lost = host_->lost_peer();
  if (lost < 0) {
    *gone_since = -1.0;
  } else if (*gone_since < 0) {
    *gone_since = t;
  } else if (t - *gone_since > opt_.peer_gone_grace_s) {
    return fmt::format("{} did not complete on rank {}: rank {}'s process is gone", describe(f),
                       rank(), lost);
  }
  if (t - f.enqueued_s > opt_.timeout_s)
    return fmt::format(
        "{} did not complete on rank {} within {:g} s (trainer.ddp_timeout / ZT_COMM_TIMEOUT_S): a "
        "rank is stuck or gone",
        describe(f), rank(), opt_.timeout_s);
  return "";
}

}  // namespace zt::dist
