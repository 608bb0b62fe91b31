// ShardOptimizer: AdamW on the fp32 master weights of the shards this rank owns (DESIGN §6
// "AdamW", "Offload"), chosen once at construction:
//   on the device (no offload): master / m / v in device memory, optim::adamw_kernel of the
//     device (adamw_cuda or adamw_cpu — the same per-element arithmetic);
//   offloaded: master / m / v in (pinned) host memory; at the step boundary the gradient goes
//     D2H chunk by chunk on the optimizer's copy stream, the host AdamW (optim::HostAdamW) takes
//     chunk c as soon as it has landed while chunk c−1's new weights go H2D on the compute
//     stream. On the CPU backend both memories are host memory, but the code path is the
//     distinct one, and offload on/off is bitwise equal.
// Either way the new compute weights are the master weights rounded once to the model dtype (bf16
// round-to-nearest-even, or an fp32 copy), written into the owned compute-weight shards.
#pragma once

#include <cstdint>
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
  // optim::HostAdamW); else device state (device_memory). Throws zt::Error on an out-of-memory.
  static std::unique_ptr<ShardOptimizer> make(bool offload, const ShardLayout& layout,
                                              Ownership owned, DType dtype, Ops& ops,
                                              MemoryResource& device_memory,
                                              MemoryResource& host_memory, Stream compute,
                                              int host_threads, int local_world_size);
  virtual ~ShardOptimizer() = default;
  ShardOptimizer(const ShardOptimizer&) = delete;
  ShardOptimizer& operator=(const ShardOptimizer&) = delete;

  // master ← fp32 of the owned compute-weight shards `shards` (exact widening); m, v ← 0.
  virtual void init_from(const void* shards) = 0;
  // One AdamW step over every tensor segment of the owned shards (data elements only, padding
  // untouched): grad [owned] fp32 on the device; `decay` for tensors with weight decay, `plain`
  // for no_decay ones. Writes the rounded new weights into `shards` (enqueued on the compute
  // stream).
  virtual void step(const optim::AdamWStep& decay, const optim::AdamWStep& plain, const float* grad,
                    void* shards) = 0;
  // shards ← the master weights rounded to the compute dtype (after load_state).
  virtual void round_into(void* shards) = 0;
  // Offload: the host AdamW pool's start-up line (threads and why); empty otherwise.
  virtual std::string describe() const { return {}; }

  // The state [owned] fp32 each, in host memory when host_state().
  float* master() const { return master_; }
  float* m() const { return m_; }
  float* v() const { return v_; }
  bool host_state() const { return host_state_; }
  void append_pools(std::vector<PoolBytes>& out) const;

 protected:
  ShardOptimizer(const ShardLayout& layout, Ownership owned, DType dtype, Ops& ops,
                 MemoryResource& memory, bool host_state, Stream compute);
  // Allocates and zeroes the state (master / m / v, reserved by the constructor, then the
  // subclass's views).
  void allocate();
  int64_t owned_elems() const { return owned_.ranks * layout_.shard_elems(); }
  Tensor dev(void* p, DType dt, int64_t n) const { return Tensor(p, dt, {n}, ops_.device()); }

  const ShardLayout& layout_;
  Ownership owned_;
  DType dtype_;
  Ops& ops_;
  Stream compute_;
  bool host_state_;
  Arena state_;
  float* master_ = nullptr;
  float* m_ = nullptr;
  float* v_ = nullptr;
};

}  // namespace zt::zero
