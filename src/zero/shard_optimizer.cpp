#include "zero/shard_optimizer.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "optim/adamw_device.h"
#include "optim/host_adamw.h"
#include "optim/master_split.h"

namespace zt::zero {

namespace {

// master / m / v in device memory; the device's AdamW kernel. An fp32 model keeps an fp32 master
// beside its compute weights; a bf16 model keeps the master split (the compute weights are its
// high halves, lo_ its low halves).
class DeviceAdamW final : public ShardOptimizer {
 public:
  DeviceAdamW(const ShardLayout& layout, const OwnedWeights& weights, Ops& ops,
              MemoryResource& device_memory, Stream compute)
      : ShardOptimizer(layout, weights, ops, device_memory, false, compute),
        kernel_(optim::adamw_kernel(ops.device())),
        split_kernel_(optim::adamw_split_kernel(ops.device())) {
    allocate();
  }

  void init_from_weights() override {
    if (lo_ != nullptr) {  // bf16 weights are exact masters: low halves 0
      ops_.zero(bytes(lo_, owned_elems() * 2), compute_);
    } else {
      for_each_segment([&](const Segment& sg) {
        ops_.cast(dev(master_ + sg.state, DType::kF32, sg.n), weights(sg), compute_);
      });
    }
    ops_.zero(dev(m_, DType::kF32, owned_elems()), compute_);
    ops_.zero(dev(v_, DType::kF32, owned_elems()), compute_);
  }

  void step(const optim::AdamWStep& decay, const optim::AdamWStep& plain, const float* grad,
            const std::function<void(int64_t)>& /*ready*/) override {
    step_on(compute_, decay, plain, grad, {});
  }

  bool async_step() const override { return owned_.ranks == 1; }

  void step_on(Stream st, const optim::AdamWStep& decay, const optim::AdamWStep& plain,
               const float* grad, const std::function<void(int)>& group_done) override {
    int last = -1;  // the group of the segment enqueued last
    for_each_segment([&](const Segment& sg) {
      if (group_done && last >= 0 && sg.group != last) group_done(last);
      last = sg.group;
      const int64_t o = sg.state;
      const optim::AdamWStep& s = sg.no_decay ? plain : decay;
      const auto n = static_cast<size_t>(sg.n);
      if (lo_ != nullptr) {
        split_kernel_(s, static_cast<uint16_t*>(weights(sg).data), lo_ + o, m_ + o, v_ + o,
                      grad + o, n, st.handle);
      } else {  // fp32: the compute weights are a copy of the master weights
        kernel_(s, master_ + o, m_ + o, v_ + o, grad + o, n, nullptr, st.handle);
        ops_.cast(weights(sg), dev(master_ + o, DType::kF32, sg.n), st);
      }
    });
    if (group_done && last >= 0) group_done(last);
  }

  // Split: nothing to do — the compute weights are the master's high halves (write_master wrote
  // them).
  void round_into_weights() override {
    if (lo_ != nullptr) return;
    for_each_segment([&](const Segment& sg) {
      ops_.cast(weights(sg), dev(master_ + sg.state, DType::kF32, sg.n), compute_);
    });
  }

  void read_master(int64_t begin, int64_t n, float* dst) override {
    if (lo_ == nullptr) return ShardOptimizer::read_master(begin, n, dst);
    std::vector<uint16_t> hi(static_cast<size_t>(n), 0), lo(static_cast<size_t>(n));
    ops_.copy_to_host(lo.data(), bytes(lo_ + begin, n * 2), compute_);
    for_each_overlap(begin, n, [&](int64_t at, int64_t w, int64_t len) {
      ops_.copy_to_host(hi.data() + (at - begin), bytes(hi_at(w), len * 2), compute_);
    });
    ops_.synchronize(compute_);
    for (int64_t i = 0; i < n; ++i) dst[i] = optim::master_join(hi[i], lo[i]);
  }

  void write_master(int64_t begin, int64_t n, const float* src) override {
    if (lo_ == nullptr) return ShardOptimizer::write_master(begin, n, src);
    // Data elements only: a padding element has no compute weight, so its low half stays 0 (it
    // reads back as 0 whatever the source held there).
    std::vector<uint16_t> hi(static_cast<size_t>(n)), lo(static_cast<size_t>(n), 0);
    for_each_overlap(begin, n, [&](int64_t at, int64_t w, int64_t len) {
      for (int64_t i = at - begin; i < at - begin + len; ++i) {
        hi[i] = optim::master_hi(src[i]);
        lo[i] = optim::master_lo(src[i]);
      }
      ops_.copy_from_host(bytes(hi_at(w), len * 2), hi.data() + (at - begin), compute_);
    });
    ops_.copy_from_host(bytes(lo_ + begin, n * 2), lo.data(), compute_);
    ops_.synchronize(compute_);  // the host vectors die here
  }

 private:
  Tensor bytes(void* p, int64_t n) const { return dev(p, DType::kU8, n); }
  uint16_t* hi_at(int64_t w) const { return static_cast<uint16_t*>(w_.data) + w; }
  // fn(state offset, compute-weights offset, n) for each segment's part inside the state range
  // [begin, begin + n).
  template <class Fn>
  void for_each_overlap(int64_t begin, int64_t n, Fn&& fn) const {
    for_each_segment([&](const Segment& sg) {
      const int64_t a = std::max(begin, sg.state), b = std::min(begin + n, sg.state + sg.n);
      if (a < b) fn(a, sg.weights + (a - sg.state), b - a);
    });
  }

  optim::AdamWKernel kernel_;
  optim::AdamWSplitKernel split_kernel_;
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
    // bf16: the rounded new weights that go H2D, which are also the master's high halves.
    const Arena::Slot s_bf16 = state_.reserve("master weights (high halves: the bf16 weights)",
                                              dtype_ == DType::kBF16 ? 2 * n : 0);
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
    if (bf16)  // bf16 weights are exact masters: low halves 0 (padding stays 0 in both halves)
      std::memset(lo_, 0, static_cast<size_t>(n) * 2);
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
      for (const Piece& p : chunks_[c].pieces) {
        const optim::AdamWStep& s = p.no_decay ? plain : decay;
        const auto n = static_cast<size_t>(p.n);
        tickets[c].push_back(bf16 ? host_adam_.submit_split(s, bf16 + p.offset, lo_ + p.offset,
                                                            m_ + p.offset, v_ + p.offset,
                                                            grad + p.offset, n)
                                  : host_adam_.submit(s, master_ + p.offset, m_ + p.offset,
                                                      v_ + p.offset, grad + p.offset, n, nullptr));
      }
      if (c > 0) finish(c - 1);
    }
    if (!chunks_.empty()) finish(chunks_.size() - 1);
  }

  // bf16: the high halves are already the weights (write_master wrote them).
  void round_into_weights() override {
    const bool bf16 = dtype_ == DType::kBF16;
    for_each_segment([&](const Segment& sg) {
      ops_.copy_from_host(
          weights(sg), bf16 ? static_cast<const void*>(host_bf16_ + sg.state) : master_ + sg.state,
          compute_);
    });
    ops_.synchronize(compute_);  // the host buffers are rewritten by the next call
  }

  std::string describe() const override { return host_adam_.describe(); }

  // Split (bf16): both halves live rank-major in host memory, padding included.
  void read_master(int64_t begin, int64_t n, float* dst) override {
    if (lo_ == nullptr) return ShardOptimizer::read_master(begin, n, dst);
    for (int64_t i = 0; i < n; ++i)
      dst[i] = optim::master_join(host_bf16_[begin + i], lo_[begin + i]);
  }
  void write_master(int64_t begin, int64_t n, const float* src) override {
    if (lo_ == nullptr) return ShardOptimizer::write_master(begin, n, src);
    ops_.synchronize(compute_);  // no H2D copy still reads the high halves
    for (int64_t i = 0; i < n; ++i) {
      host_bf16_[begin + i] = optim::master_hi(src[i]);
      lo_[begin + i] = optim::master_lo(src[i]);
    }
  }

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

void ShardOptimizer::step_on(Stream, const optim::AdamWStep&, const optim::AdamWStep&, const float*,
                             const std::function<void(int)>&) {
  fail("zero: step_on: this optimizer updates on the compute stream only");
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
  if (dtype_ == DType::kBF16)  // split: the low halves
    state_.reserve("master weights (low halves)", n / 2);
  else
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
  if (dtype_ == DType::kBF16)
    lo_ = static_cast<uint16_t*>(state_.ptr(0));
  else
    master_ = static_cast<float*>(state_.ptr(0));
  m_ = static_cast<float*>(state_.ptr(1));
  v_ = static_cast<float*>(state_.ptr(2));
}

void ShardOptimizer::read_master(int64_t begin, int64_t n, float* dst) {
  if (host_state_) {
    std::memcpy(dst, master_ + begin, static_cast<size_t>(n) * 4);
    return;
  }
  ops_.copy_to_host(dst, dev(master_ + begin, DType::kF32, n), compute_);
  ops_.synchronize(compute_);
}

void ShardOptimizer::write_master(int64_t begin, int64_t n, const float* src) {
  if (host_state_) {
    std::memcpy(master_ + begin, src, static_cast<size_t>(n) * 4);
    return;
  }
  ops_.copy_from_host(dev(master_ + begin, DType::kF32, n), src, compute_);
  ops_.synchronize(compute_);
}

void ShardOptimizer::append_pools(std::vector<PoolBytes>& out) const {
  zero::append_pools(state_, host_state_, out);
}

}  // namespace zt::zero
