// The collective-communication interface of the ZeRO engine (DESIGN §4 "Comm", §6, §7).
//
// One Comm per process (rank). Every rank calls the same collectives in the same order with the
// same sizes (SPMD); a mismatch is an error where the implementation can see it (TCP), undefined
// where it cannot. Calls must not be made from two threads at once. The CPU implementations
// (single-process, MPI, TCP) take host memory and complete each call before returning; the device
// Comm (dist/nccl/comm_nccl.h) takes device pointers for the bulk collectives and enqueues them in
// order with the work on `stream` (synchronize(stream) waits for them), and serves host buffers
// through its host Comm.
//
// Determinism: reductions are never left to the transport. reduce_scatter_sum and the small
// all_reduce gather every contribution and add them in rank order 0..W-1, so the result is bitwise
// the same whatever the transport's algorithm, on every rank, and equal to what one process adding
// the W buffers in rank order gets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/stream.h"

namespace zt::dist {

// Reduction of the small all_reduce.
enum class ReduceOp { kSum, kMax };

// The stream a collective is enqueued on (core/stream.h: a cudaStream_t for a device Comm). The
// CPU Comms ignore it: they complete the operation before returning.
using zt::Stream;

class Comm {
 public:
  virtual ~Comm() = default;
  Comm() = default;
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  // Rank among the processes of this host, and their number (LOCAL_RANK / LOCAL_WORLD_SIZE).
  int local_rank() const { return local_rank_; }
  int local_world_size() const { return local_world_size_; }
  // "single", "mpi", "tcp", or for the device Comm "nccl" (world size > 1) / "cuda" (alone).
  virtual std::string_view backend() const = 0;

  // Reduce-scatter, fp32 SUM. send: [n] on every rank, n a multiple of world_size; out: [n/W], this
  // rank's contiguous shard: out[i] = ((send_0[r*n/W + i] + send_1[…]) + …) + send_{W-1}[…], added
  // in rank order; with accumulate, out[i] = out[i] + (that sum). out must not overlap send.
  // Throws zt::Error if n % W != 0, the buffers overlap, or the transport fails.
  void reduce_scatter_sum(const float* send, float* out, size_t n, bool accumulate = false,
                          Stream stream = {});

  // All-gather of `bytes` bytes per rank: out [W * bytes] receives rank q's send at out + q*bytes.
  // send may be out + rank*bytes (in place); otherwise the buffers must not overlap.
  void all_gather_bytes(const void* send, void* out, size_t bytes, Stream stream = {});
  // Typed forms: `count` elements per rank, out [W * count]. bf16 values are their uint16 bits.
  void all_gather(const float* send, float* out, size_t count, Stream stream = {});
  void all_gather_bf16(const uint16_t* send, uint16_t* out, size_t count, Stream stream = {});

  // Broadcast `bytes` bytes of data from rank `root` to every rank (in place).
  void broadcast(void* data, size_t bytes, int root, Stream stream = {});

  // Returns when every rank has entered the barrier.
  void barrier();

  // Waits until the work enqueued on `stream` so far (the collectives this Comm enqueued on it
  // included) has completed. Throws zt::Error naming the collective when the transport failed
  // (a device Comm whose peer died). The CPU Comms complete every call before returning: no-op.
  virtual void synchronize(Stream stream) { (void)stream; }

  // Liveness probe, callable from another thread while this Comm is in use (it never touches the
  // data path): the rank of a peer whose process is known to be gone — its connection to this
  // rank closed — or -1 when none is known. The TCP Comm looks at its sockets; MPI (mpirun ends
  // the job when a rank dies) and the single-process Comm return -1. A peer that finished and
  // exited normally also counts as gone: callers act on it only while they wait for that peer.
  virtual int lost_peer() const { return -1; }

  // Small host vectors (a few values: token counts, losses, flags), reduced element-wise in rank
  // order and identical on every rank. kMax propagates NaN.
  void all_reduce(double* data, size_t n, ReduceOp op);
  void all_reduce(float* data, size_t n, ReduceOp op);
  void all_reduce(int64_t* data, size_t n, ReduceOp op);

  // Every rank's value of x, in rank order ([W]).
  std::vector<double> all_gather_f64(double x);
  // ((x_0 + x_1) + …) + x_{W-1}: the global gradient norm's sum of squares from the per-rank
  // partial sums (DESIGN §6), the same bits on every rank.
  double sum_in_rank_order(double x);

 protected:
  // Implementations set these in their constructor.
  void set_identity(int rank, int world_size, int local_rank, int local_world_size);

  // The transport. Called with validated arguments, world_size > 1 for the multi-rank Comms.
  // do_reduce_scatter_sum must add in rank order (use fold_rank_order()).
  virtual void do_reduce_scatter_sum(const float* send, float* out, size_t n, bool accumulate,
                                     Stream stream) = 0;
  virtual void do_all_gather_bytes(const void* send, void* out, size_t bytes, Stream stream) = 0;
  virtual void do_broadcast(void* data, size_t bytes, int root, Stream stream) = 0;
  virtual void do_barrier() = 0;

 private:
  int rank_ = 0;
  int world_size_ = 1;
  int local_rank_ = 0;
  int local_world_size_ = 1;
};

// The reduction every Comm uses: out[i] = (accumulate ? out[i] + s : s) with
// s = ((parts[0][i] + parts[1][i]) + …) + parts[count-1][i], fp32, for i in [0, n).
// parts: `count` pointers to [n] floats; out may alias parts[0] (and only parts[0]).
void fold_rank_order(const float* const* parts, int count, size_t n, float* out, bool accumulate);

// The process's Comm when it runs alone: world size 1, every collective a copy.
class SingleComm final : public Comm {
 public:
  SingleComm() { set_identity(0, 1, 0, 1); }
  std::string_view backend() const override { return "single"; }

 protected:
  void do_reduce_scatter_sum(const float* send, float* out, size_t n, bool accumulate,
                             Stream stream) override;
  void do_all_gather_bytes(const void* send, void* out, size_t bytes, Stream stream) override;
  void do_broadcast(void*, size_t, int, Stream) override {}
  void do_barrier() override {}
};

}  // namespace zt::dist
