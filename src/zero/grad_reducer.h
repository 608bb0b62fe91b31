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
//     optimizer step and added to after; where it lives is chosen at construction:
//       on the device (no offload): the reduce-scatter accumulates into it (Comm's accumulate:
//         shard + Σ ranks in rank order); under stage 0 also the [W][S] all-gather of every
//         rank's shard (each rank then updates everything);
//       on the device, delivered to the host (optimizer offload with gradient accumulation,
//         HostGradient::accumulate false): accumulated as without offload; gradient_for_update()
//         copies it D2H into the offloaded optimizer's host gradient once per step, in pieces
//         on the side stream that the host AdamW waits for one by one (wait_delivered), so the
//         copy overlaps the update (stage 0 at W > 1: this rank's block in one copy, then
//         all_gather_host). One transfer per optimizer step instead of one per micro-step
//         (DeepSpeed's CPU offload pays one per micro-step);
//       in host memory (optimizer offload, HostGradient::accumulate): the shard is the offloaded
//         optimizer's host gradient and no [S] buffer is on the device. Each chunk's reduce-scatter
//         (accumulate off) lands in a device staging ring of two [C] slots and goes D2H as soon
//         as its collective has finished; the host overwrites or adds (HostGradAccumulator:
//         shard + Σ ranks, the device's association, so offload on/off agree bitwise). The
//         norm and the host AdamW read the host shard; stage 0 all-gathers it chunk by chunk
//         through the device staging into the optimizer's host [W][S];
//   - its side stream: packs run on the compute stream, the reduce-scatter on the side stream,
//     so the collective of group g runs while the backward computes group g−1; join() makes the
//     compute stream wait before the shard is read.
// On the CPU every op and collective is synchronous, so all of this reduces to the plain order
// (under offload the host adds still run on HostGradAccumulator's worker thread).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/ops.h"
#include "core/arena.h"
#include "dist/comm.h"
#include "zero/host_grad_accumulator.h"
#include "zero/shard_copy.h"
#include "zero/zero_memory.h"

namespace zt::zero {

// Where the gradient shard accumulates under optimizer offload.
struct HostGradient {
  // [owned ranks × S] fp32 host memory (ShardOptimizer::host_gradient(): [S], or [W][S] under
  // stage 0 with this rank's block at rank·S); null: the shard stays on the device.
  float* data = nullptr;
  MemoryResource* memory = nullptr;  // host pools (staging); required with data
  int threads = 1;  // host threads for the adds (the host AdamW's count: OMP_NUM_THREADS ignored)
  // true: accumulate in host memory (no [S] on the device; a D2H and a host add per micro-step);
  // false: accumulate on the device and copy the result to `data` once per step.
  bool accumulate = true;
  // accumulate false: elements per D2H piece (GradReducer::gradient_for_update); 0 = the default.
  int64_t deliver_elems = 0;
};

// Whether group g's storage (ParamLayout offsets) is element for element the same as its columns
// of a rank's shard buffer: W = 1 and no tensor of the group padded (every numel a multiple of
// ShardLayout::kShardQuantum, the model's tensors packed in the same order).
bool shard_is_group_storage(const ShardLayout& layout, int g);

class GradReducer {
 public:
  // Allocates the pools on `device_memory` (zeroed) and, with host.data, on host.memory.
  // replicate (stage 0): gradient_for_update() returns every rank's shard ([W][S]: on the device,
  // or host.data). one_micro_step: every optimizer step reduces each group once (gradient
  // accumulation 1); then, alone (W = 1) with the shard on the device, a group whose storage is
  // its shard columns (shard_is_group_storage) has no window: the model writes its gradient
  // straight into the shard (the bits the window's copy would put there) and reduce() does
  // nothing for it; a second reduction of such a group in one step throws zt::Error. Throws
  // zt::Error on an out-of-memory (naming the pool).
  GradReducer(const ShardLayout& layout, Ops& ops, dist::Comm& comm, MemoryResource& device_memory,
              Stream compute, bool replicate, HostGradient host = {}, bool one_micro_step = false);
  ~GradReducer();
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  // Shard columns one reduce-scatter (and one bucket, [W][C] fp32) covers: the largest decoder
  // layer's group shard (the largest group when there is no layer). A device Comm needs
  // reduce-scatter scratch for W × C elements.
  static int64_t chunk_elems(const ShardLayout& layout);

  // The fp32 storage [group size] the model writes group g's gradients into: a window buffer, or
  // the group's columns of the shard (in_shard(g)).
  float* window(int g) const;
  // Whether group g's gradient is written straight into the shard (see the constructor).
  bool in_shard(int g) const { return !direct_.empty() && direct_[static_cast<size_t>(g)]; }
  // How many groups are in_shard.
  int groups_in_shard() const;
  // Packs group g's window into a bucket (compute stream) and reduce-scatters it into the shard
  // (side stream; collective): overwrite when `first` (the group's first reduction of the step),
  // add otherwise. Host shard: may wait for the host add of the chunk two chunks back.
  void reduce(int g, bool first);
  // The compute stream waits for every reduce-scatter enqueued so far.
  void join();
  // Σ x² (fp64) over this rank's gradient shard, after join() (synchronises the compute stream;
  // host shard: waits for every chunk to land, then CpuOps::sumsq — bitwise Ops::sumsq).
  double shard_sumsq();
  // The fp32 gradient of the shards this rank updates: the shard [S], or under stage 0 the
  // all-gather of every rank's shard into [W][S] (collective, compute stream). With a host
  // gradient: host memory (HostGradient::data). Complete on return, except when the device shard
  // is delivered to the host of one owner (offload with device accumulation, stages 1–3, or
  // stage 0 alone): then the D2H is enqueued on the side stream in pieces of kDeliverElems and
  // the caller calls wait_delivered() before reading a range (the host AdamW starts on the first
  // piece while the rest is in flight).
  const float* gradient_for_update();
  // Blocks until elements [0, end) of the delivered gradient are in host memory (no-op when
  // gradient_for_update() returned a complete gradient). end in elements of the host gradient.
  // Throws zt::Error when a piece's copy failed.
  void wait_delivered(int64_t end);
  static constexpr int64_t kDeliverElems = int64_t{1} << 24;  // 64 MiB of fp32 per D2H piece
  // Zeroes the shard (after join(); synchronises).
  void clear();
  // With a host gradient only: buf [W][S] fp32 host memory, rank-major, this rank's block valid →
  // every block its owner's (collective; C columns at a time: H2D into device staging — a host
  // staging slot, or the device shard, which it overwrites — all-gather into a bucket, D2H;
  // compute stream; synchronises). Call between steps (the shard is cleared or overwritten next).
  // shard_is_mine: the device shard already holds this rank's block of buf (the delivered
  // gradient): the all-gather sends its columns directly, no H2D.
  void all_gather_host(float* buf, bool shard_is_mine = false);

  // Buffers the engine borrows as staging at step boundaries (checkpoints, export).
  float* staging() const;  // ≥ [C] fp32 on the device (a host staging slot, or the shard [S])
  // [W][C] fp32 (distinct from staging()); null at W = 1 (nothing to gather).
  float* bucket() const { return bucket_[0]; }
  int64_t chunk() const { return chunk_; }
  void append_pools(std::vector<PoolBytes>& out) const;
  void synchronize();  // waits for the side stream (and every host add)

 private:
  const ShardLayout& layout_;
  Ops& ops_;
  dist::Comm& comm_;
  void reduce_to_host(int g, bool first);

  ShardCopy copy_;
  Stream compute_;
  bool replicate_;
  Arena dev_;
  int64_t chunk_ = 0;
  float* shard_ = nullptr;  // device shard [S] (null under offload; stage 0: block r of full_)
  float* bucket_[2] = {nullptr, nullptr};  // W > 1 only
  int next_bucket_ = 0;
  float* gfirst_ = nullptr;  // the window: group 0, the last group, one layer slot
  float* glast_ = nullptr;
  float* gslot_ = nullptr;
  std::vector<bool> direct_;  // per group: in_shard(g) (empty when no group is)
  float* full_ = nullptr;       // [W][S] (stage 0 without offload; holds the shard)
  float* host_base_ = nullptr;  // HostGradient::data (offload; without host_: device accumulation,
                                // copied here once per step)
  Tensor sumsq_ws_;
  OwnedStream side_;
  OwnedEvent ev_compute_;                 // compute stream → side stream handoff
  OwnedEvent ev_side_;                    // side stream → compute stream handoff
  OwnedEvent ev_bucket_free_[2];          // the reduce-scatter reading bucket k has finished
  std::vector<OwnedEvent> ev_delivered_;  // D2H piece i of the shard has landed (side stream)
  // Pieces [0, delivered_waited_) of the last delivery have landed (all of them: none in flight).
  size_t delivered_waited_ = 0;
  int64_t deliver_elems_ = kDeliverElems;      // elements per D2H piece
  bool side_busy_ = false;                     // reduce-scatters enqueued since the last join
  std::unique_ptr<HostGradAccumulator> host_;  // offload: the host shard, its staging and adds
};

}  // namespace zt::zero
