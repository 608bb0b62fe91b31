// GradReducer: the gradient side of the ZeRO engine (DESIGN §6 "Buckets", "Canonical reduction
// order"). It owns
//   - the gradient window: the fp32 storage the model writes a group's gradients into — group 0
//     and the last group each have a buffer (a tied embedding collects the LM head's gradient
//     first and the embedding's last), the decoder layers share one slot. Valid because the model
//     writes a group's gradients only between asking for them and handing them back, in order,
//     on the compute stream, and reduce() packs them on that stream;
//   - two reduce-scatter buckets [W][C] (C = chunk_elems: a decoder layer's shard), each reused
//     once the collective that read it has finished; a larger group is reduced C shard columns
//     at a time (the same element sums in the same rank order);
//   - this rank's fp32 gradient shard [S], overwritten by a group's first reduction of an
//     optimizer step and added to after; under stage 0 also the [W][S] all-gather of every
//     rank's shard (each rank then updates everything);
//   - its side stream: packs run on the compute stream, the reduce-scatter on the side stream,
//     so the collective of group g runs while the backward computes group g−1; join() makes the
//     compute stream wait before the shard is read.
// On the CPU every op and collective is synchronous, so all of this reduces to the plain order.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/ops.h"
#include "core/arena.h"
#include "dist/comm.h"
#include "zero/shard_copy.h"
#include "zero/zero_memory.h"

namespace zt::zero {

class GradReducer {
 public:
  // Allocates the pools on `device_memory` (zeroed). replicate (stage 0): keep a [W][S] buffer
  // for gradient_for_update(). Throws zt::Error on an out-of-memory (naming the pool).
  GradReducer(const ShardLayout& layout, Ops& ops, dist::Comm& comm, MemoryResource& device_memory,
              Stream compute, bool replicate);
  ~GradReducer();
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  // Shard columns one reduce-scatter (and one bucket, [W][C] fp32) covers: the largest decoder
  // layer's group shard (the largest group when there is no layer). A device Comm needs
  // reduce-scatter scratch for W × C elements.
  static int64_t chunk_elems(const ShardLayout& layout);

  // The fp32 storage [group size] the model writes group g's gradients into.
  float* window(int g) const;
  // Packs group g's window into a bucket (compute stream) and reduce-scatters it into the shard
  // (side stream; collective): overwrite when `first` (the group's first reduction of the step),
  // add otherwise.
  void reduce(int g, bool first);
  // The compute stream waits for every reduce-scatter enqueued so far.
  void join();
  // Σ x² (fp64) over this rank's gradient shard, after join() (synchronises the compute stream).
  double shard_sumsq();
  // The fp32 gradient of the shards this rank updates: the shard [S], or under stage 0 the
  // all-gather of every rank's shard into [W][S] (collective, compute stream).
  const float* gradient_for_update();
  // Zeroes the shard (after join(); synchronises).
  void clear();

  // Buffers the engine borrows as staging at step boundaries (checkpoints, export).
  float* shard() const { return shard_; }       // [S] fp32
  float* full() const { return full_; }         // [W][S] fp32 (stage 0), else nullptr
  float* bucket() const { return bucket_[0]; }  // [W][C] fp32
  int64_t chunk() const { return chunk_; }
  void append_pools(std::vector<PoolBytes>& out) const;
  void synchronize();  // waits for the side stream

 private:
  const ShardLayout& layout_;
  Ops& ops_;
  dist::Comm& comm_;
  ShardCopy copy_;
  Stream compute_;
  Arena dev_;
  int64_t chunk_ = 0;
  float* shard_ = nullptr;
  float* bucket_[2] = {nullptr, nullptr};  // slot 1 only for W > 1
  int next_bucket_ = 0;
  float* gfirst_ = nullptr;  // the window: group 0, the last group, one layer slot
  float* glast_ = nullptr;
  float* gslot_ = nullptr;
  float* full_ = nullptr;
  Tensor sumsq_ws_;
  Stream side_;
  Event ev_compute_;         // compute stream → side stream handoff
  Event ev_side_;            // side stream → compute stream handoff
  Event ev_bucket_free_[2];  // the reduce-scatter reading bucket k has finished
  bool side_busy_ = false;   // reduce-scatters enqueued since the last join
};

}  // namespace zt::zero
