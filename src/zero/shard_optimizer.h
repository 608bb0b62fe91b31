// ShardOptimizer: AdamW on the fp32 master weights of the shards this rank owns (DESIGN §6
// "AdamW", "Offload"), chosen once at construction:
//   on the device (no offload): master / m / v in device memory, optim::adamw_kernel of the
//     device (adamw_cuda or adamw_cpu — the same per-element arithmetic);
//   offloaded: master / m / v and the gradient ("host gradient", [owned] fp32) in (pinned) host
//     memory; GradReducer accumulates the gradient there during the backward (HostGradient),
//     so nothing goes D2H at the step boundary: the host AdamW (optim::HostAdamW) takes the
//     gradient chunk by chunk while chunk c−1's new weights go H2D on the compute stream. On the
//     CPU backend both memories are host memory, but the code path is the distinct one, and
//     offload on/off is bitwise equal.
// Either way the new compute weights are the master weights rounded once to the model dtype (bf16:
// optim::master_hi, round to nearest with ties away from zero; fp32: a copy), written where the
// owned shards' compute weights live (OwnedWeights: the model's full weights under stages 0–2, the
// rank-major shard under stage 3), data elements only, one segment per (owned rank, tensor).
// A bf16 model's master is stored SPLIT (optim/master_split.h), the same fp32 values and update
// bits (the step rewrites both halves in place), 2 bytes per parameter beside the bf16 weights
// instead of 4:
//   on the device, its high halves are the compute weights themselves and only the low halves
//     [owned] u16 are kept beside them. The rule that keeps it sound: nothing but this class
//     writes the owned compute weights with other bits (gathers only copy them; a write without
//     its low halves would change the master). Padding elements read as 0 whatever write_master
//     was given there;
//   offloaded, its high halves are the host bf16 weights that go H2D after each update (rank-major
//     [owned], padding included) and the low halves sit beside them in host memory.
// Its master weights are then reached through read_master / write_master.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "core/arena.h"
#include "optim/adamw.h"
#include "zero/shard_layout.h"
#include "zero/weight_gatherer.h"
#include "zero/zero_memory.h"

namespace zt::zero {

class ShardOptimizer {
 public:
  // offload: host state (host_memory; host_threads / local_world_size size the host AdamW pool,
  // optim::HostAdamW); else device state (device_memory). `weights` (which must stay valid):
  // where the owned compute weights live, read by init_from and written by step / round_into.
  // Throws zt::Error on an out-of-memory.
  static std::unique_ptr<ShardOptimizer> make(bool offload, const ShardLayout& layout,
                                              const OwnedWeights& weights, Ops& ops,
                                              MemoryResource& device_memory,
                                              MemoryResource& host_memory, Stream compute,
                                              int host_threads, int local_world_size);
  virtual ~ShardOptimizer() = default;
  ShardOptimizer(const ShardOptimizer&) = delete;
  ShardOptimizer& operator=(const ShardOptimizer&) = delete;

  // master ← fp32 of the owned compute weights (exact widening; padding stays 0); m, v ← 0.
  virtual void init_from_weights() = 0;
  // One AdamW step over every tensor segment of the owned shards (data elements only, padding
  // untouched): grad [owned.ranks × S] fp32, rank-major, on the device — or, offloaded, in host
  // memory (host_gradient()); `decay` for tensors with weight decay, `plain` for no_decay ones.
  // Writes the rounded new weights into the owned compute weights (enqueued on the compute
  // stream). ready(end), when given, is called before elements [0, end) of grad are read (a host
  // gradient still landing: GradReducer::wait_delivered); the device update ignores it.
  virtual void step(const optim::AdamWStep& decay, const optim::AdamWStep& plain, const float* grad,
                    const std::function<void(int64_t)>& ready = {}) = 0;
  // Device state only (async_step()): the same step enqueued on stream `s` (which must have waited
  // for the gradient), tensors in layout order; group_done(g) is called once the last segment of
  // ParamLayout group g has been enqueued, so the caller can record an event there. One owned
  // rank only (each group's segments then come together).
  virtual void step_on(Stream s, const optim::AdamWStep& decay, const optim::AdamWStep& plain,
                       const float* grad, const std::function<void(int)>& group_done);
  // Whether step_on is available (device state, one owned rank).
  virtual bool async_step() const { return false; }
  // The owned compute weights ← the master weights rounded to the compute dtype (after
  // load_state).
  virtual void round_into_weights() = 0;
  // Offload: the host AdamW pool's start-up line (threads and why); empty otherwise.
  virtual std::string describe() const { return {}; }
  // Offload: the host gradient [owned.ranks × S] fp32 (pinned host memory) the gradient
  // reducer accumulates into and step() reads; nullptr otherwise.
  virtual float* host_gradient() const { return nullptr; }
  // Offload: the host AdamW pool's thread count (the host gradient's adds use as many); else 1.
  virtual int host_threads() const { return 1; }

  // The fp32 master weights of state elements [begin, begin + n) of [owned.ranks × S] into /
  // from host memory, whatever the storage: a copy, or (split) the two
  // halves joined / split — write_master also rewrites the compute weights the halves include.
  // Synchronous (the compute stream is synchronized). Throws zt::Error on a failed copy.
  virtual void read_master(int64_t begin, int64_t n, float* dst);
  virtual void write_master(int64_t begin, int64_t n, const float* src);
  // The fp32 master weights [owned], in host memory when host_state(); nullptr when they are kept
  // split (read_master / write_master reach them either way).
  float* master() const { return master_; }
  // The state [owned] fp32 each, in host memory when host_state().
  float* m() const { return m_; }
  float* v() const { return v_; }
  bool host_state() const { return host_state_; }
  void append_pools(std::vector<PoolBytes>& out) const;

 protected:
  // Reserves master / m / v; a bf16 model's master as low halves [owned] u16 (lo_), split.
  ShardOptimizer(const ShardLayout& layout, const OwnedWeights& weights, Ops& ops,
                 MemoryResource& memory, bool host_state, Stream compute);
  // Allocates and zeroes the state (master / m / v, reserved by the constructor, then the
  // subclass's views).
  void allocate();
  int64_t owned_elems() const { return owned_.ranks * layout_.shard_elems(); }
  Tensor dev(void* p, DType dt, int64_t n) const { return Tensor(p, dt, {n}, ops_.device()); }
  // The data elements of owned rank (owned.rank0 + k)'s shard of one tensor.
  struct Segment {
    int64_t state;    // offset in the rank-major state and gradient buffers: k·S + shard_offset
    int64_t weights;  // offset in the owned compute weights (OwnedWeights::at)
    int64_t n;        // data elements (ShardTensor::valid)
    bool no_decay;
    int group;  // ParamLayout group of the tensor
  };
  // Calls fn(segment) for every non-empty segment, rank by rank, tensors in layout order.
  template <class Fn>
  void for_each_segment(Fn&& fn) const {
    const int64_t S = layout_.shard_elems();
    for (int k = 0; k < owned_.ranks; ++k)
      for (const ShardTensor& t : layout_.tensors()) {
        const int64_t n = t.valid(owned_.rank0 + k);
        if (n > 0) fn(Segment{k * S + t.shard_offset, w_.at(t, k, S), n, t.no_decay, t.group});
      }
  }
  // The compute weights of a segment, [n] of the model dtype on the device.
  Tensor weights(const Segment& sg) const {
    return dev(elem_at(w_.data, sg.weights, dtype_size(dtype_)), dtype_, sg.n);
  }

  const ShardLayout& layout_;
  const OwnedWeights& w_;  // where the owned compute weights live
  Ownership owned_;
  DType dtype_;
  Ops& ops_;
  Stream compute_;
  bool host_state_;
  Arena state_;
  float* master_ = nullptr;  // fp32, or null when split
  uint16_t* lo_ = nullptr;   // split: the master's low halves
  float* m_ = nullptr;
  float* v_ = nullptr;
};

}  // namespace zt::zero
