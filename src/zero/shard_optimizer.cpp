#include "zero/shard_optimizer.h"

#include <cstring>

#include "optim/adamw_device.h"
#include "optim/host_adamw.h"

namespace zt::zero {

namespace {

// master / m / v in device memory; the device's AdamW kernel.
class DeviceAdamW final : public ShardOptimizer {
 public:
  DeviceAdamW(const ShardLayout& layout, const OwnedWeights& weights, Ops& ops,
              MemoryResource& device_memory, Stream compute)
      : ShardOptimizer(layout, weights, ops, device_memory, false, compute),
        kernel_(optim::adamw_kernel(ops.device())) {
    allocate();
  }

  void init_from_weights() override {
    for_each_segment([&](const Segment& sg) {
      ops_.cast(dev(master_ + sg.state, DType::kF32, sg.n), weights(sg), compute_);
    });
    ops_.zero(dev(m_, DType::kF32, owned_elems()), compute_);
    ops_.zero(dev(v_, DType::kF32, owned_elems()), compute_);
  }

  void step(const optim::AdamWStep& decay, const optim::AdamWStep& plain, const float* grad,
            const std::function<void(int64_t)>& /*ready*/) override {
    const bool bf16 = dtype_ == DType::kBF16;
    for_each_segment([&](const Segment& sg) {
      const int64_t o = sg.state;
      kernel_(sg.no_decay ? plain : decay, master_ + o, m_ + o, v_ + o, grad + o,
              static_cast<size_t>(sg.n), bf16 ? static_cast<uint16_t*>(weights(sg).data) : nullptr,
              compute_.handle);
      if (!bf16)  // the fp32 compute weights are the master weights
        ops_.cast(weights(sg), dev(master_ + o, DType::kF32, sg.n), compute_);
    });
  }

  void round_into_weights() override {
    for_each_segment([&](const Segment& sg) {
      ops_.cast(weights(sg), dev(master_ + sg.state, DType::kF32, sg.n), compute_);
    });
  }

 private:
  optim::AdamWKernel kernel_;
};

// master / m / v and the gradient in host memory; chunked host AdamW → H2D.
class OffloadedAdamW final : public ShardOptimizer {
 public:
  OffloadedAdamW(const ShardLayout& layout, const OwnedWeights& weights, Ops& ops,
                 MemoryResource& host_memory, Stream compute, int host_threads,
                 int local_world_size)
      : ShardOptimizer(layout, weights, ops, host_memory, true, compute),
        host_adam_(host_threads, local_world_size) {
    const auto n = static_cast<size_t>(owned_elems());
    const Arena::Slot s_grad = state_.reserve("host gradient", n * 4);
    const Arena::Slot s_bf16 =
        state_.reserve("offload bf16 weights", dtype_ == DType::kBF16 ? 2 * n : 0);
    allocate();
    host_grad_ = static_cast<float*>(state_.ptr(s_grad));
    host_bf16_ = static_cast<uint16_t*>(state_.ptr(s_bf16));
    plan_chunks();
  }
  ~OffloadedAdamW() override {
    try {  // no H2D copy may outlive the host buffers
      ops_.synchronize(compute_);
    } catch (...) {
    }
  }

  float* host_gradient() const override { return host_grad_; }
  int host_threads() const override { return host_adam_.threads(); }

  // The weights' data segments go D2H into the rank-major host buffers (whose padding stays 0).
  void init_from_weights() override {
    const int64_t n = owned_elems();
    const bool bf16 = dtype_ == DType::kBF16;
    for_each_segment([&](const Segment& sg) {
      ops_.copy_to_host(bf16 ? static_cast<void*>(host_bf16_ + sg.state) : master_ + sg.state,
                        weights(sg), compute_);
    });
    ops_.synchronize(compute_);
    if (bf16)  // widened on the host: exact, as on the device
      for (int64_t i = 0; i < n; ++i) master_[i] = bf16_to_f32(host_bf16_[i]);
    std::memset(m_, 0, static_cast<size_t>(n) * 4);
    std::memset(v_, 0, static_cast<size_t>(n) * 4);
  }

  // grad: the host gradient (host_gradient(); chunk c's range complete once ready() returns).
  // The host AdamW takes the chunks in order while chunk c−1's result goes H2D on the compute
  // stream and, with a delivered gradient, chunk c+1's gradient is still coming D2H.
  // Bitwise the device update (same per-element arithmetic; padding untouched).
  void step(const optim::AdamWStep& decay, const optim::AdamWStep& plain, const float* grad,
            const std::function<void(int64_t)>& ready) override {
    ops_.synchronize(compute_);  // the last step's H2D copies have read what this one rewrites
    uint16_t* bf16 = dtype_ == DType::kBF16 ? host_bf16_ : nullptr;
    std::vector<std::vector<optim::HostAdamW::Ticket>> tickets(chunks_.size());
    const auto finish = [&](size_t c) {
      for (const optim::HostAdamW::Ticket& tk : tickets[c]) host_adam_.wait(tk);
      for (const Piece& p : chunks_[c].pieces)  // each piece's new weights to where they live
        ops_.copy_from_host(dev(elem_at(w_.data, p.dst, dtype_size(dtype_)), dtype_, p.n),
                            bf16 ? static_cast<const void*>(bf16 + p.offset) : master_ + p.offset,
                            compute_);
    };
    for (size_t c = 0; c < chunks_.size(); ++c) {
      if (ready) {
        try {  // a failed copy: no host AdamW chunk may outlive this call before the error leaves
          ready(chunks_[c].pieces.back().offset + chunks_[c].pieces.back().n);
        } catch (...) {
          host_adam_.wait_all();
          throw;
        }
      }
      for (const Piece& p : chunks_[c].pieces)
        tickets[c].push_back(host_adam_.submit(
            p.no_decay ? plain : decay, master_ + p.offset, m_ + p.offset, v_ + p.offset,
            grad + p.offset, static_cast<size_t>(p.n), bf16 ? bf16 + p.offset : nullptr));
      if (c > 0) finish(c - 1);
    }
    if (!chunks_.empty()) finish(chunks_.size() - 1);
  }

  void round_into_weights() override {
    const int64_t n = owned_elems();
    const bool bf16 = dtype_ == DType::kBF16;
    if (bf16)
      for (int64_t i = 0; i < n; ++i) host_bf16_[i] = f32_to_bf16(master_[i]);
    for_each_segment([&](const Segment& sg) {
      ops_.copy_from_host(
          weights(sg), bf16 ? static_cast<const void*>(host_bf16_ + sg.state) : master_ + sg.state,
          compute_);
    });
    ops_.synchronize(compute_);  // the host buffers are rewritten by the next call
  }

  std::string describe() const override { return host_adam_.describe(); }

 private:
  struct Piece {
    int64_t offset;  // in the rank-major state buffers [owned.ranks × S]
    int64_t dst;     // in the owned compute weights (OwnedWeights::at)
    int64_t n;       // data elements
    bool no_decay;
  };
  struct Chunk {
    std::vector<Piece> pieces;
  };
  static constexpr int64_t kChunk = int64_t{1} << 24;  // elements (64 MiB of fp32)

  // Pieces of the owned shard buffer: every tensor's data elements, cut into pieces of at most
  // kChunk elements, grouped into chunks of about that size.
  void plan_chunks() {
    Chunk cur;
    int64_t cur_elems = 0;
    const auto flush = [&] {
      if (cur.pieces.empty()) return;
      chunks_.push_back(std::move(cur));
      cur = {};
      cur_elems = 0;
    };
    for_each_segment([&](const Segment& sg) {
      for (int64_t p = 0; p < sg.n; p += kChunk) {
        const int64_t n = std::min(kChunk, sg.n - p);
        if (cur_elems > 0 && cur_elems + n > kChunk) flush();
        cur.pieces.push_back({sg.state + p, sg.weights + p, n, sg.no_decay});
        cur_elems += n;
      }
    });
    flush();
  }

  optim::HostAdamW host_adam_;
  float* host_grad_ = nullptr;     // [owned] fp32: the gradient, accumulated by GradReducer
  uint16_t* host_bf16_ = nullptr;  // [owned] bf16 (bf16 models only): the rounded new weights
  std::vector<Chunk> chunks_;
};

}  // namespace

std::unique_ptr<ShardOptimizer> ShardOptimizer::make(bool offload, const ShardLayout& layout,
                                                     const OwnedWeights& weights, Ops& ops,
                                                     MemoryResource& device_memory,
                                                     MemoryResource& host_memory, Stream compute,
                                                     int host_threads, int local_world_size) {
  if (offload)
    return std::make_unique<OffloadedAdamW>(layout, weights, ops, host_memory, compute,
                                            host_threads, local_world_size);
  return std::make_unique<DeviceAdamW>(layout, weights, ops, device_memory, compute);
}

ShardOptimizer::ShardOptimizer(const ShardLayout& layout, const OwnedWeights& weights, Ops& ops,
                               MemoryResource& memory, bool host_state, Stream compute)
    : layout_(layout),
      w_(weights),
      owned_(weights.owned),
      dtype_(weights.dtype),
      ops_(ops),
      compute_(compute),
      host_state_(host_state),
      state_(host_state ? "zero optimizer (host)" : "zero optimizer (device)", memory) {
  const auto n = static_cast<size_t>(owned_elems()) * 4;
  state_.reserve("master weights", n);
  state_.reserve("adam m", n);
  state_.reserve("adam v", n);
}

void ShardOptimizer::allocate() {
  state_.allocate();
  if (host_state_) {
    state_.zero_host();
  } else {
    ops_.zero(Tensor(state_.base(), DType::kU8, {static_cast<int64_t>(state_.planned_bytes())},
                     state_.device()),
              compute_);
    ops_.synchronize(compute_);
  }
  master_ = static_cast<float*>(state_.ptr(0));
  m_ = static_cast<float*>(state_.ptr(1));
  v_ = static_cast<float*>(state_.ptr(2));
}

void ShardOptimizer::append_pools(std::vector<PoolBytes>& out) const {
  zero::append_pools(state_, host_state_, out);
}

}  // namespace zt::zero
