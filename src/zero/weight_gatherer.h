// WeightGatherer: the weight side of the ZeRO engine (DESIGN §6 "Stages"). It owns the compute
// weights in the model dtype: the storage the model reads a group's weights from, and where the
// owned shards' weights live — what AdamW writes, rounded once from the master weights
// (OwnedWeights). Built once per stage:
//   FullWeights (stages 0–2): ONE copy of the whole model's compute weights [layout.model_elems()]
//     (ParamLayout offsets) on every rank, and the owned shards' weights are its elements: the
//     update writes them in place. install() after an update: nothing at W = 1 or under stage 0
//     (this rank updated everything); stages 1/2 at W > 1 all-gather group by group — each rank's
//     shard of the group packed from the full buffer into a send buffer [max group shard], gathered
//     into a staging buffer [W][max group shard] and unpacked into the full buffer — with overlap,
//     on the gatherer's side stream, each group marked produced there (below).
//   SlottedWeights (stage 3): only the rank-major shard [S] stays resident. Group 0 and the last
//     group each have a buffer, the decoder layers share two slots (g % 2); acquire(g)
//     all-gathers g on the side stream unless its storage already holds it, and prefetches the
//     next layer (in the direction of the last two acquires) into the other slot while the
//     current one computes.
// Weights produced on another stream (FullWeights only): the post-update all-gather on the side
// stream (overlap, stages 1/2 at W > 1) or the engine's AdamW update on its update stream
// (async_update, W = 1) — never both — call mark_produced(g, s) once group g's new weights are
// enqueued on s. One event and one pending flag per group hold it; the one rule for the compute
// stream: acquire(g) waits for group g's ready event alone, wait_all_ready() for every group's
// (the engine calls it before anything else that touches what the producer reads or writes).
// Every gather that reads the owned weights is on the side stream or the compute stream; join()
// makes the compute stream wait for all of them before the owned weights are overwritten.
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

// Where the compute weights of the owned shards live (device memory, the model dtype). Rank
// (owned.rank0 + k)'s shard of tensor t holds t.valid(owned.rank0 + k) data elements starting at
// element at(t, k) of `data`:
//   model_layout (stages 0–2): `data` is the model's full weight buffer [layout.model_elems()]:
//     the shard's data sits inside the tensor, at t.model_offset + r·t.shard_elems; its padding
//     does not exist there (it may be the next tensor's first elements) and is never written;
//   rank-major (stage 3): `data` is [owned.ranks][S], at k·S + t.shard_offset, padding zero.
// Whoever writes through it writes data elements only, one segment per (rank, tensor).
struct OwnedWeights {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Ownership owned;
  bool model_layout = false;
  int64_t elems = 0;  // elements of `data`: model_elems() or owned.ranks · S
  // Element offset of rank (owned.rank0 + k)'s shard of tensor t in `data` (S: ShardLayout's).
  int64_t at(const ShardTensor& t, int k, int64_t S) const {
    return model_layout ? t.model_offset + static_cast<int64_t>(owned.rank0 + k) * t.shard_elems
                        : k * S + t.shard_offset;
  }
};

class WeightGatherer {
 public:
  // The gatherer of `stage` (0–3). overlap (stages 1/2): leave the post-update all-gather in
  // flight (the model then reaches every weight through acquire). async_update (stages 0–2): the
  // caller's update writes the compute weights on another stream and marks each group produced.
  // Either one creates the per-group ready events. Allocates on device_memory. Throws zt::Error
  // on an out-of-memory or when the device refuses a stream or event.
  static std::unique_ptr<WeightGatherer> make(int stage, bool overlap, bool async_update,
                                              const ShardLayout& layout, DType dtype, Ops& ops,
                                              dist::Comm& comm, MemoryResource& device_memory,
                                              Stream compute);
  virtual ~WeightGatherer();
  WeightGatherer(const WeightGatherer&) = delete;
  WeightGatherer& operator=(const WeightGatherer&) = delete;

  // Group g's weights for a use on the compute stream: the compute stream waits for group g's
  // ready event if it is pending (stage 3: an all-gather, collective).
  virtual const void* acquire(int g) = 0;
  // The compute stream's use of group g's weights ends here (enqueued).
  virtual void release(int g) = 0;
  // The owned weights are new (after init or an update): make them the model's (stages 1/2 at
  // W > 1: an all-gather into the full weights; stage 3: the next acquire gathers; otherwise the
  // update already wrote the model's weights).
  virtual void install() = 0;

  // Where the owned shards' compute weights live (the update writes them there).
  const OwnedWeights& owned_weights() const { return owned_w_; }
  const Ownership& owned() const { return owned_w_.owned; }
  // Group g's new weights are enqueued on stream s (the producer's): records g's ready event
  // there; the next acquire(g) or wait_all_ready() makes the compute stream wait for it. Only
  // with ready events (make: overlap or async_update).
  void mark_produced(int g, Stream s);
  // The compute stream waits for every group's pending ready event, in group order (none without
  // ready events).
  void wait_all_ready();
  // The compute stream waits for every gather in flight (before the owned weights are
  // overwritten).
  void join();
  void synchronize();  // waits for the side stream
  void append_pools(std::vector<PoolBytes>& out) const;

 protected:
  WeightGatherer(const ShardLayout& layout, DType dtype, Ops& ops, dist::Comm& comm,
                 MemoryResource& device_memory, Stream compute, Ownership owned);
  // After the subclass's own views: reserves (gather = true) an all-gather staging buffer
  // [W][max group shard] and, for owned weights in the model layout, a send buffer [max group
  // shard]; then the rank-major shard [owned.ranks × S] unless `model_weights` (a view of this
  // arena, [model_elems()]) holds the owned weights; allocates, zeroes and sets owned_weights().
  void allocate(bool gather, Arena::Slot model_weights = -1);
  // All-gathers group g's shards into `dst` (its storage) on stream s; alone, copies the shard
  // (nothing when the owned weights are dst's own elements).
  void gather_into(int g, GroupPtr dst, Stream s);
  // Makes the side stream wait for the compute stream's work so far.
  void side_after_compute();
  // Waits for both streams, ignoring errors (destructors: nothing in flight may outlive a buffer).
  void drain() noexcept;
  // One ready event per group.
  void create_ready_events();
  // The compute stream waits for group g's ready event if it is pending.
  void wait_ready(int g);

  const ShardLayout& layout_;
  DType dtype_;
  size_t es_;
  Ops& ops_;
  dist::Comm& comm_;
  ShardCopy copy_;
  Stream compute_;
  OwnedWeights owned_w_;
  Arena dev_;
  void* staging_ = nullptr;  // [W][max group shard]
  void* send_ = nullptr;     // [max group shard] (owned weights in the model layout, W > 1)
  OwnedStream side_;
  OwnedEvent ev_compute_, ev_side_;
  std::vector<OwnedEvent> ev_ready_;  // per group: its weights' producer reached this point
  std::vector<char> ready_pending_;  // per group: recorded, not yet waited for by compute_
};

}  // namespace zt::zero
