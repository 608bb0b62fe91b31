// WeightGatherer: the weight side of the ZeRO engine (DESIGN §6 "Stages"). It owns this rank's
// compute-weight shard(s) [owned] in the model dtype — what AdamW writes, rounded once from the
// master weights — and the storage the model reads a group's weights from. Built once per stage:
//   FullWeights (stages 0–2): the whole model's weights [layout.model_elems()] on every rank.
//     install() after an update: stage 0 unpacks the locally updated [W][S] shards; stages 1/2
//     all-gather them group by group — with overlap, on the gatherer's side stream, and
//     acquire(g) makes the compute stream wait for group g's gather alone.
//   SlottedWeights (stage 3): only the shard stays resident. Group 0 and the last group each have
//     a buffer, the decoder layers share two slots (g % 2); acquire(g) all-gathers g on the side
//     stream unless its storage already holds it, and prefetches the next layer (in the direction
//     of the last two acquires) into the other slot while the current one computes.
// Every gather that reads the shards is on the side stream or the compute stream; join() makes
// the compute stream wait for all of them before the shards are overwritten.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/ops.h"
#include "core/arena.h"
#include "dist/comm.h"
#include "zero/shard_copy.h"
#include "zero/zero_memory.h"

namespace zt::zero {

// Which ranks' shards this rank keeps and updates: [rank0, rank0 + ranks) — all W under stage 0,
// its own otherwise.
struct Ownership {
  int rank0 = 0;
  int ranks = 1;
};

class WeightGatherer {
 public:
  // The gatherer of `stage` (0–3). overlap (stages 1/2): leave the post-update all-gather in
  // flight (the model then reaches every weight through acquire). Allocates on device_memory.
  static std::unique_ptr<WeightGatherer> make(int stage, bool overlap, const ShardLayout& layout,
                                              DType dtype, Ops& ops, dist::Comm& comm,
                                              MemoryResource& device_memory, Stream compute);
  virtual ~WeightGatherer();
  WeightGatherer(const WeightGatherer&) = delete;
  WeightGatherer& operator=(const WeightGatherer&) = delete;

  // Group g's weights for a use on the compute stream (stage 3: an all-gather, collective).
  virtual const void* acquire(int g) = 0;
  // The compute stream's use of group g's weights ends here (enqueued).
  virtual void release(int g) = 0;
  // The shards now hold new weights (after init or an update): make them the model's (stages
  // 0–2: every rank's full weights — an all-gather under 1/2; stage 3: the next acquire gathers).
  virtual void install() = 0;
  // Bytes of the full weight buffer (stages 0–2), 0 for stage 3.
  virtual size_t model_weight_bytes() const = 0;

  // [owned.ranks × S] compute dtype: the shards this rank updates (device memory).
  void* shards() const { return shards_; }
  const Ownership& owned() const { return owned_; }
  int64_t owned_elems() const { return owned_.ranks * layout_.shard_elems(); }
  // The compute stream waits for every gather in flight (before the shards are overwritten).
  void join();
  void synchronize();  // waits for the side stream
  void append_pools(std::vector<PoolBytes>& out) const;

 protected:
  WeightGatherer(const ShardLayout& layout, DType dtype, Ops& ops, dist::Comm& comm,
                 MemoryResource& device_memory, Stream compute, Ownership owned);
  // Reserves the shard and (staging = true) an all-gather staging buffer [W][max group shard],
  // after the subclass's own views; then allocates and zeroes.
  void allocate(bool staging, const char* shard_name);
  // All-gathers group g's shards into `dst` (its storage) on stream s; alone, copies the shard.
  void gather_into(int g, GroupPtr dst, Stream s);
  // Makes the side stream wait for the compute stream's work so far.
  void side_after_compute();
  // Waits for both streams, ignoring errors (destructors: nothing in flight may outlive a buffer).
  void drain() noexcept;

  const ShardLayout& layout_;
  DType dtype_;
  size_t es_;
  Ops& ops_;
  dist::Comm& comm_;
  ShardCopy copy_;
  Stream compute_;
  Ownership owned_;
  Arena dev_;
  void* shards_ = nullptr;
  void* staging_ = nullptr;
  Stream side_;
  Event ev_compute_, ev_side_;
};

}  // namespace zt::zero
