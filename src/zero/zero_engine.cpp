// ZeroEngine: construction, micro-step reduction, stage-3 gathering, the optimizer step.
// Checkpoint state, export and memory accounting are in zero_state.cpp.
#include "zero/zero_engine.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "optim/clip.h"

namespace zt::zero {

namespace {

void* at(void* base, int64_t elem, size_t es) {
  return static_cast<char*>(base) + static_cast<size_t>(elem) * es;
}

}  // namespace

ZeroEngine::ZeroEngine(const ParamLayout& layout, ModelBuffers model, Ops& ops, dist::Comm& comm,
                       MemoryResource& device_memory, MemoryResource& host_memory,
                       EngineOptions options)
    : layout_(layout, comm.world_size()),
      model_(model),
      ops_(ops),
      comm_(comm),
      opt_(options),
      cdt_(model.weights.dtype),
      ces_(dtype_size(model.weights.dtype)),
      dev_("zero (device)", device_memory),
      host_("zero (host)", host_memory) {
  if (opt_.stage < 0 || opt_.stage > 3)
    fail("zero: stage {} is not supported (expected 0, 1, 2 or 3)", opt_.stage);
  if (cdt_ != DType::kF32 && cdt_ != DType::kBF16)
    fail("zero: model weights are {} (expected f32 or bf16)", model.weights.describe());
  if (model.weights.numel() != layout_.model_elems() ||
      model.grads.numel() != layout_.model_elems())
    fail("zero: model buffers weights {} / grads {} do not have the layout's {} elements",
         model.weights.describe(), model.grads.describe(), layout_.model_elems());
  if (model.grads.dtype != DType::kF32)
    fail("zero: model gradients are {} (expected f32)", model.grads.describe());
  if (model.weights.device != ops.device() || model.grads.device != ops.device() ||
      device_memory.device() != ops.device())
    fail("zero: model buffers and device memory must be on the Ops device ({})", ops.name());

  const int64_t W = layout_.world_size(), S = layout_.shard_elems();
  const int64_t G = layout_.max_group_shard_elems(), owned = owned_elems();
  const auto f32 = [](int64_t n) { return static_cast<size_t>(n) * 4; };
  const auto cmp = [&](int64_t n) { return static_cast<size_t>(n) * ces_; };

  // Device pools.
  const Arena::Slot s_grad = dev_.reserve("gradient shard", f32(S));
  const Arena::Slot s_bucket = dev_.reserve("reduce-scatter bucket", f32(W * G));
  const Arena::Slot s_gather = dev_.reserve("all-gather staging", opt_.stage == 0 ? 0 : cmp(W * G));
  const Arena::Slot s_compute = dev_.reserve(
      opt_.stage == 3 ? "compute weight shard" : "updated compute weights", cmp(owned));
  const Arena::Slot s_full = dev_.reserve("full gradient", opt_.stage == 0 ? f32(W * S) : 0);
  const size_t ws_bytes = ops.sumsq_workspace_bytes(Tensor(nullptr, DType::kF32, {S}));
  const Arena::Slot s_ws = dev_.reserve("norm workspace", ws_bytes);
  Arena& state = opt_.offload ? host_ : dev_;
  const Arena::Slot s_master = state.reserve("master weights", f32(owned));
  const Arena::Slot s_m = state.reserve("adam m", f32(owned));
  const Arena::Slot s_v = state.reserve("adam v", f32(owned));
  Arena::Slot s_hgrad = -1, s_hcompute = -1;
  if (opt_.offload) {
    s_hgrad = host_.reserve("offload gradient", f32(owned));
    s_hcompute = host_.reserve("offload bf16 weights", cdt_ == DType::kBF16 ? 2 * owned : 0);
  }
  dev_.allocate();
  host_.allocate();
  ops_.zero(
      Tensor(dev_.base(), DType::kU8, {static_cast<int64_t>(dev_.planned_bytes())}, dev_.device()),
      stream_);
  host_.zero_host();
  ops_.synchronize(stream_);

  grad_shard_ = static_cast<float*>(dev_.ptr(s_grad));
  bucket_ = static_cast<float*>(dev_.ptr(s_bucket));
  gather_ = dev_.ptr(s_gather);
  compute_ = dev_.ptr(s_compute);
  full_grad_ = static_cast<float*>(dev_.ptr(s_full));
  sumsq_ws_ = Tensor(dev_.ptr(s_ws), DType::kU8,
                     {static_cast<int64_t>(std::max<size_t>(ws_bytes, 1))}, dev_.device());
  master_ = static_cast<float*>(state.ptr(s_master));
  m_ = static_cast<float*>(state.ptr(s_m));
  v_ = static_cast<float*>(state.ptr(s_v));
  if (opt_.offload) {
    host_grad_ = static_cast<float*>(host_.ptr(s_hgrad));
    host_compute_ = static_cast<uint16_t*>(host_.ptr(s_hcompute));
  }
  reduced_.assign(static_cast<size_t>(layout_.num_groups()), 0);
}

Tensor ZeroEngine::dev(void* p, DType dt, int64_t n) const {
  return Tensor(p, dt, {n}, ops_.device());
}

int ZeroEngine::owned_rank0() const { return opt_.stage == 0 ? 0 : comm_.rank(); }
int ZeroEngine::owned_ranks() const { return opt_.stage == 0 ? layout_.world_size() : 1; }

void ZeroEngine::require_ready(const char* what) const {
  if (!ready_) fail("zero: {} before init_from_model() or load_state()", what);
}

void ZeroEngine::require_between_steps(const char* what) const {
  for (int g = 0; g < layout_.num_groups(); ++g)
    if (reduced_[static_cast<size_t>(g)] != 0)
      fail(
          "zero: {} in the middle of an optimizer step (group {} has a reduced gradient; call "
          "finish_step or discard_step first)",
          what, g);
}

// Model flat buffer → rank-major buffer, group g, ranks [r0, r1): every shard segment is converted
// (Ops::cast: a copy for equal dtypes) and its padding zeroed.
void ZeroEngine::pack(int g, const Tensor& model_flat, const RankMajor& dst, int r0, int r1) {
  const size_t des = dtype_size(dst.dtype), mes = dtype_size(model_flat.dtype);
  for (int r = r0; r < r1; ++r)
    for (int i = layout_.tensor_begin(g); i < layout_.tensor_end(g); ++i) {
      const ShardTensor& t = layout_.tensor(i);
      const int64_t valid = t.valid(r);
      const int64_t d = static_cast<int64_t>(r - r0) * dst.stride + t.shard_offset - dst.shift;
      if (valid > 0)
        ops_.cast(dev(at(dst.data, d, des), dst.dtype, valid),
                  dev(at(model_flat.data, t.model_offset + r * t.shard_elems, mes),
                      model_flat.dtype, valid),
                  stream_);
      if (valid < t.shard_elems)
        ops_.zero(dev(at(dst.data, d + valid, des), dst.dtype, t.shard_elems - valid), stream_);
    }
}

// Rank-major buffer → model flat buffer, group g, ranks [r0, r1) (data elements only).
void ZeroEngine::unpack(int g, const RankMajor& src, const Tensor& model_flat, int r0, int r1) {
  const size_t ses = dtype_size(src.dtype), mes = dtype_size(model_flat.dtype);
  for (int r = r0; r < r1; ++r)
    for (int i = layout_.tensor_begin(g); i < layout_.tensor_end(g); ++i) {
      const ShardTensor& t = layout_.tensor(i);
      const int64_t valid = t.valid(r);
      if (valid == 0) continue;
      const int64_t s = static_cast<int64_t>(r - r0) * src.stride + t.shard_offset - src.shift;
      ops_.cast(dev(at(model_flat.data, t.model_offset + r * t.shard_elems, mes), model_flat.dtype,
                    valid),
                dev(at(src.data, s, ses), src.dtype, valid), stream_);
    }
}

void ZeroEngine::init_from_model() {
  const int64_t S = layout_.shard_elems(), owned = owned_elems();
  const int r0 = owned_rank0(), r1 = r0 + owned_ranks();
  // fp32 staging of the owned shards: the full gradient buffer (stage 0) or the gradient shard.
  float* tmp = opt_.stage == 0 ? full_grad_ : grad_shard_;
  for (int g = 0; g < layout_.num_groups(); ++g) {
    pack(g, model_.weights, {tmp, DType::kF32, S, 0}, r0, r1);
    pack(g, model_.weights, {compute_, cdt_, S, 0}, r0, r1);  // the exact compute bits
  }
  if (opt_.offload) {
    ops_.copy_to_host(master_, dev(tmp, DType::kF32, owned), stream_);
    ops_.synchronize(stream_);
    std::memset(m_, 0, static_cast<size_t>(owned) * 4);
    std::memset(v_, 0, static_cast<size_t>(owned) * 4);
  } else {
    ops_.cast(dev(master_, DType::kF32, owned), dev(tmp, DType::kF32, owned), stream_);
    ops_.zero(dev(m_, DType::kF32, owned), stream_);
    ops_.zero(dev(v_, DType::kF32, owned), stream_);
  }
  ready_ = true;
  adam_step_ = 0;
  reset_step();
  if (opt_.stage == 3) release_all();
  ops_.synchronize(stream_);
}

void ZeroEngine::gather_group(int g) {
  require_ready("gather_group");
  if (g < 0 || g >= layout_.num_groups())
    fail("zero: gather_group({}): group out of range [0, {})", g, layout_.num_groups());
  if (opt_.stage != 3) return;
  all_gather_group(g);
}

void ZeroEngine::release_group(int g) {
  if (g < 0 || g >= layout_.num_groups())
    fail("zero: release_group({}): group out of range [0, {})", g, layout_.num_groups());
  if (opt_.stage != 3) return;
  const int64_t b = layout_.group_model_begin(g), e = layout_.group_model_end(g);
  ops_.zero(dev(at(model_.weights.data, b, ces_), cdt_, e - b), stream_);
}

void ZeroEngine::gather_all() {
  for (int g = 0; g < layout_.num_groups(); ++g) gather_group(g);
}

void ZeroEngine::release_all() {
  for (int g = 0; g < layout_.num_groups(); ++g) release_group(g);
}

// The overlap point: on a device backend, pack + reduce-scatter would be enqueued on a
// communication stream (after an event recorded on the compute stream) so that the reduction of
// group g runs while the backward computes group g−1. The CPU path is synchronous.
void ZeroEngine::reduce_group(int g) {
  require_ready("reduce_group");
  if (g < 0 || g >= layout_.num_groups())
    fail("zero: reduce_group({}): group out of range [0, {})", g, layout_.num_groups());
  if (norm_) fail("zero: reduce_group({}) after grad_norm() in the same optimizer step", g);
  const int64_t n = layout_.group_shard_elems(g), b = layout_.group_shard_begin(g);
  int& count = reduced_[static_cast<size_t>(g)];
  if (layout_.world_size() == 1) {
    // Alone, the reduce-scatter is the identity: the first micro-step packs the group straight into
    // the gradient shard, later ones add to it (the same fp32 sums as through a bucket, half the
    // memory traffic).
    if (count == 0) {
      pack(g, model_.grads, {grad_shard_, DType::kF32, 0, 0}, 0, 1);
    } else {
      pack(g, model_.grads, {bucket_, DType::kF32, n, b}, 0, 1);
      const Tensor shard = dev(grad_shard_ + b, DType::kF32, n);
      ops_.add(shard, shard, dev(bucket_, DType::kF32, n), stream_);
    }
    ++count;
    return;
  }
  pack(g, model_.grads, {bucket_, DType::kF32, n, b}, 0, layout_.world_size());
  ops_.synchronize(stream_);
  comm_.reduce_scatter_sum(bucket_, grad_shard_ + b, static_cast<size_t>(n * layout_.world_size()),
                           /*accumulate=*/count > 0, stream_.handle);
  ++count;
}

std::function<void(int)> ZeroEngine::group_ready_callback() {
  return [this](int g) { reduce_group(g); };
}

double ZeroEngine::grad_norm() {
  require_ready("grad_norm");
  if (norm_) return *norm_;
  const bool equal =
      std::all_of(reduced_.begin(), reduced_.end(), [&](int c) { return c == reduced_[0]; });
  if (!equal || reduced_[0] == 0)
    fail(
        "zero: grad_norm: the groups were reduced [{}] times in this step (expected the same "
        "count >= 1 for every group: one reduction per micro-step)",
        fmt::join(reduced_, ", "));
  const int W = layout_.world_size();
  const int64_t S = layout_.shard_elems();
  std::vector<double> partials;
  if (opt_.stage == 0) {
    // Every rank gets every reduced shard and sums each exactly as its owner does.
    comm_.all_gather(grad_shard_, full_grad_, static_cast<size_t>(S), stream_.handle);
    partials.resize(static_cast<size_t>(W));
    for (int r = 0; r < W; ++r)
      ops_.sumsq(&partials[static_cast<size_t>(r)], dev(full_grad_ + r * S, DType::kF32, S),
                 sumsq_ws_, stream_);
    ops_.synchronize(stream_);
  } else {
    double p = 0.0;
    ops_.sumsq(&p, dev(grad_shard_, DType::kF32, S), sumsq_ws_, stream_);
    ops_.synchronize(stream_);
    partials = comm_.all_gather_f64(p);
  }
  norm_ = optim::global_norm_from_partials(partials);
  return *norm_;
}

StepResult ZeroEngine::apply_step(const StepArgs& args) {
  const double norm = grad_norm();
  const float coef = optim::clip_coefficient(norm, args.max_grad_norm);
  update(args, coef);
  install_weights();
  reset_step();
  ops_.synchronize(stream_);
  return {norm, coef, true, adam_step_};
}

StepResult ZeroEngine::finish_step(const StepArgs& args) {
  const double norm = grad_norm();
  if (!std::isfinite(norm) && args.skip_nonfinite) {
    discard_step();
    return {norm, optim::clip_coefficient(norm, args.max_grad_norm), false, adam_step_};
  }
  return apply_step(args);
}

void ZeroEngine::discard_step() {
  ops_.zero(dev(grad_shard_, DType::kF32, layout_.shard_elems()), stream_);
  ops_.synchronize(stream_);
  reset_step();
}

void ZeroEngine::reset_step() {
  std::fill(reduced_.begin(), reduced_.end(), 0);
  norm_.reset();
}

// AdamW over the owned shards, tensor segment by tensor segment (data elements only, so padding
// stays 0), then the compute-dtype copy of the new master weights into compute_.
void ZeroEngine::update(const StepArgs& args, float coef) {
  const int64_t t = adam_step_ + 1;
  optim::AdamWParams no_decay = args.adam;
  no_decay.weight_decay = 0.0;
  const optim::AdamWStep s_decay = optim::adamw_step(args.adam, args.lr, t, coef);
  const optim::AdamWStep s_plain = optim::adamw_step(no_decay, args.lr, t, coef);
  const int64_t S = layout_.shard_elems(), owned = owned_elems();
  const float* dev_grad = opt_.stage == 0 ? full_grad_ : grad_shard_;
  const float* grad = dev_grad;
  uint16_t* bf16_out = nullptr;
  if (opt_.offload) {
    ops_.copy_to_host(host_grad_, dev(const_cast<float*>(dev_grad), DType::kF32, owned), stream_);
    ops_.synchronize(stream_);
    grad = host_grad_;
    if (cdt_ == DType::kBF16) bf16_out = host_compute_;
  } else if (cdt_ == DType::kBF16) {
    bf16_out = static_cast<uint16_t*>(compute_);
  }
  const int r0 = owned_rank0();
  for (int k = 0; k < owned_ranks(); ++k)
    for (const ShardTensor& ts : layout_.tensors()) {
      const int64_t valid = ts.valid(r0 + k);
      if (valid == 0) continue;
      const int64_t o = k * S + ts.shard_offset;
      const optim::AdamWStep& st = ts.no_decay ? s_plain : s_decay;
      if (!opt_.offload && ops_.device() == Device::kCUDA)  // device state: the same arithmetic
        optim::adamw_cuda(st, master_ + o, m_ + o, v_ + o, grad + o, static_cast<size_t>(valid),
                          bf16_out ? bf16_out + o : nullptr, stream_.handle);
      else
        optim::adamw_cpu(st, master_ + o, m_ + o, v_ + o, grad + o, static_cast<size_t>(valid),
                         bf16_out ? bf16_out + o : nullptr);
    }
  // compute_ ← the compute-dtype master weights.
  if (opt_.offload)
    ops_.copy_from_host(dev(compute_, cdt_, owned),
                        cdt_ == DType::kBF16 ? static_cast<const void*>(host_compute_) : master_,
                        stream_);
  else if (cdt_ == DType::kF32)
    ops_.cast(dev(compute_, DType::kF32, owned), dev(master_, DType::kF32, owned), stream_);
  adam_step_ = t;
}

void ZeroEngine::compute_from_master() {
  const int64_t owned = owned_elems();
  if (!opt_.offload) {
    ops_.cast(dev(compute_, cdt_, owned), dev(master_, DType::kF32, owned), stream_);
  } else if (cdt_ == DType::kBF16) {
    for (int64_t i = 0; i < owned; ++i) host_compute_[i] = f32_to_bf16(master_[i]);
    ops_.copy_from_host(dev(compute_, cdt_, owned), host_compute_, stream_);
  } else {
    ops_.copy_from_host(dev(compute_, cdt_, owned), master_, stream_);
  }
}

void ZeroEngine::install_weights() {
  const int64_t S = layout_.shard_elems();
  const int W = layout_.world_size();
  if (opt_.stage == 3) {
    release_all();
  } else if (opt_.stage == 0) {
    for (int g = 0; g < layout_.num_groups(); ++g)
      unpack(g, {compute_, cdt_, S, 0}, model_.weights, 0, W);
  } else {
    for (int g = 0; g < layout_.num_groups(); ++g) all_gather_group(g);
  }
}

// Group g's compute-weight shards of every rank → gather_ [W][n] → the model's weights.
void ZeroEngine::all_gather_group(int g) {
  const int64_t n = layout_.group_shard_elems(g), b = layout_.group_shard_begin(g);
  if (layout_.world_size() == 1) {  // alone: the shard is the whole group, no gather needed
    unpack(g, {compute_, cdt_, 0, 0}, model_.weights, 0, 1);
    return;
  }
  ops_.synchronize(stream_);
  if (cdt_ == DType::kBF16)
    comm_.all_gather_bf16(static_cast<const uint16_t*>(at(compute_, b, ces_)),
                          static_cast<uint16_t*>(gather_), static_cast<size_t>(n), stream_.handle);
  else
    comm_.all_gather(static_cast<const float*>(at(compute_, b, ces_)), static_cast<float*>(gather_),
                     static_cast<size_t>(n), stream_.handle);
  unpack(g, {gather_, cdt_, n, b}, model_.weights, 0, layout_.world_size());
}

}  // namespace zt::zero
