// ZeroEngine: construction, micro-step reduction, stage-3 gathering, the optimizer step.
// Checkpoint state, export and memory accounting are in zero_state.cpp.
#include "zero/zero_engine.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "optim/clip.h"
#include "optim/host_adamw.h"

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
  if ((model.weights.data && model.weights.numel() != layout_.model_elems()) ||
      (model.grads.data && model.grads.numel() != layout_.model_elems()))
    fail("zero: model buffers weights {} / grads {} do not have the layout's {} elements",
         model.weights.describe(), model.grads.describe(), layout_.model_elems());
  if (!model.weights.data && (opt_.stage != 3 || !model.bind_weights))
    fail(
        "zero: a model without its own weight buffer needs stage 3 and bind_weights (stage {}, "
        "bind_weights {})",
        opt_.stage, model.bind_weights ? "set" : "missing");
  if (!model.grads.data && !model.bind_grads)
    fail("zero: a model without its own gradient buffer needs bind_grads");
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
  // Two bucket slots of [W][C] (C = reduce_chunk_elems: a decoder layer's shard); a larger group
  // (the embedding, an untied head) is reduced C shard columns at a time. Alone (W = 1) the first
  // micro-step packs straight into the shard and one slot takes the later ones.
  const int64_t C = reduce_chunk_elems(layout_);
  chunk_ = C;
  const Arena::Slot s_bucket = dev_.reserve("reduce-scatter bucket", f32(W * C));
  const Arena::Slot s_bucket2 = dev_.reserve("reduce-scatter bucket 2", W > 1 ? f32(W * C) : 0);
  // Engine-owned model storage (windowed weights / gradients).
  const int last = layout_.num_groups() - 1;
  const auto group_elems = [&](int g) {
    return layout_.group_model_end(g) - layout_.group_model_begin(g);
  };
  int64_t mid = 0;
  for (int g = 1; g < last; ++g) mid = std::max(mid, group_elems(g));
  const bool ww = model.weights.data == nullptr, wg = model.grads.data == nullptr;
  const Arena::Slot s_wfirst = dev_.reserve("weights: embedding", ww ? cmp(group_elems(0)) : 0);
  const Arena::Slot s_wlast = dev_.reserve("weights: head", ww ? cmp(group_elems(last)) : 0);
  const Arena::Slot s_wslot0 = dev_.reserve("weights: layer slot 0", ww ? cmp(mid) : 0);
  const Arena::Slot s_wslot1 = dev_.reserve("weights: layer slot 1", ww ? cmp(mid) : 0);
  const Arena::Slot s_gfirst = dev_.reserve("gradients: embedding", wg ? f32(group_elems(0)) : 0);
  const Arena::Slot s_glast = dev_.reserve("gradients: head", wg ? f32(group_elems(last)) : 0);
  const Arena::Slot s_gslot = dev_.reserve("gradients: layer slot", wg ? f32(mid) : 0);
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
  bucket2_ = static_cast<float*>(dev_.ptr(s_bucket2));
  wfirst_ = dev_.ptr(s_wfirst);
  wlast_ = dev_.ptr(s_wlast);
  wslot_[0] = dev_.ptr(s_wslot0);
  wslot_[1] = dev_.ptr(s_wslot1);
  gfirst_ = static_cast<float*>(dev_.ptr(s_gfirst));
  glast_ = static_cast<float*>(dev_.ptr(s_glast));
  gslot_ = static_cast<float*>(dev_.ptr(s_gslot));
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
  gather_pending_.assign(static_cast<size_t>(layout_.num_groups()), 0);
  group_valid_.assign(static_cast<size_t>(layout_.num_groups()), 0);

  side_ = ops_.create_stream();
  for (Event* e : {&ev_compute_, &ev_side_, &ev_bucket_free_[0], &ev_bucket_free_[1],
                   &ev_slot_ready_[0], &ev_slot_ready_[1], &ev_slot_free_[0], &ev_slot_free_[1]})
    *e = ops_.create_event();
  if (opt_.overlap_gather)
    for (int g = 0; g < layout_.num_groups(); ++g) ev_gathered_.push_back(ops_.create_event());
  if (opt_.offload) {
    host_adam_ = std::make_unique<optim::HostAdamW>(opt_.host_threads, opt_.local_world_size);
    plan_offload();
  }
  if (wg)
    for (int g = 0; g <= last; ++g) model_.bind_grads(g, static_cast<float*>(grads_of(g).base));
}

ZeroEngine::~ZeroEngine() {
  try {  // nothing in flight may outlive the buffers (after a Comm failure this returns at once)
    ops_.synchronize(side_);
    ops_.synchronize(stream_);
  } catch (...) {
  }
  ops_.destroy_stream(side_);
  for (Event e : {ev_compute_, ev_side_, ev_bucket_free_[0], ev_bucket_free_[1], ev_slot_ready_[0],
                  ev_slot_ready_[1], ev_slot_free_[0], ev_slot_free_[1]})
    ops_.destroy_event(e);
  for (Event e : ev_gathered_) ops_.destroy_event(e);
  for (Event e : ev_d2h_) ops_.destroy_event(e);
}

ZeroEngine::GroupPtr ZeroEngine::weights_of(int g) const {
  if (!windowed_weights())
    return {at(model_.weights.data, layout_.group_model_begin(g), ces_), cdt_};
  return {weight_storage(g), cdt_};
}

void* ZeroEngine::weight_storage(int g) const {
  const int last = layout_.num_groups() - 1;
  return g == 0 ? wfirst_ : g == last ? wlast_ : wslot_[g % 2];
}

ZeroEngine::GroupPtr ZeroEngine::grads_of(int g) const {
  if (!windowed_grads())
    return {at(model_.grads.data, layout_.group_model_begin(g), 4), DType::kF32};
  const int last = layout_.num_groups() - 1;
  return {g == 0 ? gfirst_ : g == last ? glast_ : gslot_, DType::kF32};
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

// Group storage → rank-major buffer, group g, ranks [r0, r1), shard columns [lo, hi) (positions
// in a rank's shard buffer; default: the whole group): every shard segment is converted
// (Ops::cast: a copy for equal dtypes) and its padding zeroed.
void ZeroEngine::pack(int g, GroupPtr src, const RankMajor& dst, int r0, int r1, int64_t lo,
                      int64_t hi) {
  const size_t des = dtype_size(dst.dtype), ses = dtype_size(src.dtype);
  const int64_t gb = layout_.group_model_begin(g);
  lo = std::max(lo, layout_.group_shard_begin(g));
  hi = std::min(hi, layout_.group_shard_end(g));
  for (int r = r0; r < r1; ++r)
    for (int i = layout_.tensor_begin(g); i < layout_.tensor_end(g); ++i) {
      const ShardTensor& t = layout_.tensor(i);
      // This tensor's columns inside the window, relative to its shard start.
      const int64_t u0 = std::max(lo, t.shard_offset) - t.shard_offset;
      const int64_t u1 = std::min(hi, t.shard_offset + t.shard_elems) - t.shard_offset;
      if (u0 >= u1) continue;
      const int64_t valid = t.valid(r), d0 = std::min(u1, valid);
      const int64_t d = static_cast<int64_t>(r - r0) * dst.stride + t.shard_offset - dst.shift;
      if (u0 < d0)
        ops_.cast(dev(at(dst.data, d + u0, des), dst.dtype, d0 - u0),
                  dev(at(src.base, t.model_offset - gb + r * t.shard_elems + u0, ses), src.dtype,
                      d0 - u0),
                  stream_);
      const int64_t z0 = std::max(u0, valid);
      if (z0 < u1) ops_.zero(dev(at(dst.data, d + z0, des), dst.dtype, u1 - z0), stream_);
    }
}

int64_t ZeroEngine::reduce_chunk_elems(const ShardLayout& layout) {
  const int ng = layout.num_groups();
  int64_t c = 0;
  for (int g = 1; g + 1 < ng; ++g) c = std::max(c, layout.group_shard_elems(g));
  return c > 0 ? c : layout.max_group_shard_elems();
}

// Rank-major buffer → group storage, group g, ranks [r0, r1) (data elements only), on stream s.
void ZeroEngine::unpack(int g, const RankMajor& src, GroupPtr dst, int r0, int r1, Stream s) {
  const size_t ses = dtype_size(src.dtype), des = dtype_size(dst.dtype);
  const int64_t gb = layout_.group_model_begin(g);
  for (int r = r0; r < r1; ++r)
    for (int i = layout_.tensor_begin(g); i < layout_.tensor_end(g); ++i) {
      const ShardTensor& t = layout_.tensor(i);
      const int64_t valid = t.valid(r);
      if (valid == 0) continue;
      const int64_t o = static_cast<int64_t>(r - r0) * src.stride + t.shard_offset - src.shift;
      ops_.cast(dev(at(dst.base, t.model_offset - gb + r * t.shard_elems, des), dst.dtype, valid),
                dev(at(src.data, o, ses), src.dtype, valid), s);
    }
}

void ZeroEngine::init_from_model() {
  if (windowed_weights())
    fail("zero: init_from_model: the model has no weight buffer of its own (use init_from_flat)");
  const int r0 = owned_rank0(), r1 = r0 + owned_ranks();
  for (int g = 0; g < layout_.num_groups(); ++g)
    pack(g, weights_of(g), {compute_, cdt_, layout_.shard_elems(), 0}, r0, r1);  // exact bits
  init_state_from_compute();
}

void ZeroEngine::init_from_flat(const Tensor& flat) {
  if (flat.dtype != cdt_ || flat.numel() != layout_.model_elems() || flat.data == nullptr)
    fail("zero: init_from_flat: expected a flat {} tensor of {} elements, got {}", dtype_name(cdt_),
         layout_.model_elems(), flat.describe());
  const int64_t S = layout_.shard_elems();
  const int r0 = owned_rank0(), r1 = r0 + owned_ranks();
  ops_.zero(dev(compute_, cdt_, owned_elems()), stream_);  // padding stays 0
  for (int r = r0; r < r1; ++r)
    for (const ShardTensor& t : layout_.tensors()) {
      const int64_t valid = t.valid(r);
      if (valid == 0) continue;
      const Tensor dst = dev(at(compute_, (r - r0) * S + t.shard_offset, ces_), cdt_, valid);
      const void* src = at(flat.data, t.model_offset + r * t.shard_elems, ces_);
      if (flat.device == Device::kCPU && ops_.device() != Device::kCPU)
        ops_.copy_from_host(dst, src, stream_);
      else
        ops_.cast(dst, Tensor(const_cast<void*>(src), cdt_, {valid}, flat.device), stream_);
    }
  init_state_from_compute();
}

void ZeroEngine::init_state_from_compute() {
  const int64_t owned = owned_elems();
  // fp32 staging of the owned shards: the full gradient buffer (stage 0) or the gradient shard.
  float* tmp = opt_.stage == 0 ? full_grad_ : grad_shard_;
  ops_.cast(dev(tmp, DType::kF32, owned), dev(compute_, cdt_, owned), stream_);  // exact widening
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
  ops_.zero(dev(tmp, DType::kF32, owned), stream_);
  ready_ = true;
  adam_step_ = 0;
  reset_step();
  install_weights();
  ops_.synchronize(side_);
  ops_.synchronize(stream_);
}

void ZeroEngine::gather_into(int g, GroupPtr dst, Stream s) {
  const int64_t n = layout_.group_shard_elems(g), b = layout_.group_shard_begin(g);
  if (layout_.world_size() == 1) {  // alone: the shard is the whole group, no gather needed
    unpack(g, {compute_, cdt_, 0, 0}, dst, 0, 1, s);
    return;
  }
  if (cdt_ == DType::kBF16)
    comm_.all_gather_bf16(static_cast<const uint16_t*>(at(compute_, b, ces_)),
                          static_cast<uint16_t*>(gather_), static_cast<size_t>(n), s.handle);
  else
    comm_.all_gather(static_cast<const float*>(at(compute_, b, ces_)), static_cast<float*>(gather_),
                     static_cast<size_t>(n), s.handle);
  unpack(g, {gather_, cdt_, n, b}, dst, 0, layout_.world_size(), s);
}

void ZeroEngine::acquire_group(int g) {
  require_ready("acquire_group");
  const int ng = layout_.num_groups();
  if (g < 0 || g >= ng) fail("zero: acquire_group({}): group out of range [0, {})", g, ng);
  if (opt_.stage != 3) {
    if (gather_pending_[static_cast<size_t>(g)]) {
      ops_.wait_event(stream_, ev_gathered_[static_cast<size_t>(g)]);
      gather_pending_[static_cast<size_t>(g)] = 0;
    }
    return;
  }
  if (!windowed_weights()) {  // gathered in place, on the compute stream
    gather_into(g, weights_of(g), stream_);
    return;
  }
  const bool middle = g > 0 && g < ng - 1;
  if (last_acquired_ >= 0 && g != last_acquired_) direction_ = g > last_acquired_ ? 1 : -1;
  last_acquired_ = g;
  // Every stage-3 gather runs on the side stream, after the compute stream's work so far (the
  // update that wrote the shards; the last use of the storage it overwrites).
  const auto gather_on_side = [&](int h, int slot_or_minus1) {
    ops_.record_event(ev_compute_, stream_);
    ops_.wait_event(side_, ev_compute_);
    if (slot_or_minus1 >= 0) ops_.wait_event(side_, ev_slot_free_[slot_or_minus1]);
    gather_into(h, {weight_storage(h), cdt_}, side_);
  };
  if (!middle) {
    if (!group_valid_[static_cast<size_t>(g)]) {
      gather_on_side(g, -1);
      ops_.record_event(ev_side_, side_);
      ops_.wait_event(stream_, ev_side_);
      group_valid_[static_cast<size_t>(g)] = 1;
    }
  } else {
    const int k = g % 2;
    if (wslot_group_[k] != g) {
      gather_on_side(g, -1);  // compute's earlier use of the slot is ordered by ev_compute_
      ops_.record_event(ev_slot_ready_[k], side_);
      wslot_group_[k] = g;
    }
    ops_.wait_event(stream_, ev_slot_ready_[k]);
    // Prefetch the next layer (in the direction of travel) into the other slot.
    const int next = g + direction_;
    if (direction_ != 0 && next > 0 && next < ng - 1 && wslot_group_[next % 2] != next) {
      const int k2 = next % 2;
      gather_on_side(next, k2);
      ops_.record_event(ev_slot_ready_[k2], side_);
      wslot_group_[k2] = next;
    }
  }
  model_.bind_weights(g, weight_storage(g));
}

void ZeroEngine::release_group(int g) {
  const int ng = layout_.num_groups();
  if (g < 0 || g >= ng) fail("zero: release_group({}): group out of range [0, {})", g, ng);
  if (opt_.stage != 3) return;
  if (windowed_weights()) {
    if (g > 0 && g < ng - 1) ops_.record_event(ev_slot_free_[g % 2], stream_);
    return;
  }
  const int64_t b = layout_.group_model_begin(g), e = layout_.group_model_end(g);
  ops_.zero(dev(at(model_.weights.data, b, ces_), cdt_, e - b), stream_);
}

void ZeroEngine::gather_all() {
  if (opt_.stage == 3 && windowed_weights())
    fail(
        "zero: gather_all: the engine holds two layers' weights at a time under stage 3 (route "
        "the model's weight uses through acquire_group / release_group)");
  for (int g = 0; g < layout_.num_groups(); ++g) acquire_group(g);
}

void ZeroEngine::release_all() {
  for (int g = 0; g < layout_.num_groups(); ++g) release_group(g);
}

std::function<void(int)> ZeroEngine::acquire_callback() {
  return [this](int g) { acquire_group(g); };
}

std::function<void(int)> ZeroEngine::release_callback() {
  return [this](int g) { release_group(g); };
}

void ZeroEngine::join_side(bool always) {
  if (!side_busy_ && !always) return;
  ops_.record_event(ev_side_, side_);
  ops_.wait_event(stream_, ev_side_);
  side_busy_ = false;
}

// Pack on the compute stream (ordered after the backward that wrote the gradients, before
// whatever next overwrites them), reduce-scatter on the side stream.
void ZeroEngine::reduce_group(int g) {
  require_ready("reduce_group");
  if (g < 0 || g >= layout_.num_groups())
    fail("zero: reduce_group({}): group out of range [0, {})", g, layout_.num_groups());
  if (norm_) fail("zero: reduce_group({}) after grad_norm() in the same optimizer step", g);
  const int64_t b = layout_.group_shard_begin(g), e = layout_.group_shard_end(g);
  const int W = layout_.world_size();
  int& count = reduced_[static_cast<size_t>(g)];
  if (W == 1 && count == 0) {
    // Alone, the reduce-scatter is the identity: the first micro-step packs the group straight into
    // the gradient shard, later ones add to it chunk by chunk (the same fp32 sums as through a
    // bucket, half the memory traffic).
    pack(g, grads_of(g), {grad_shard_, DType::kF32, 0, 0}, 0, 1);
    ++count;
    return;
  }
  // The group's shard columns C at a time (one chunk for a decoder layer).
  for (int64_t j0 = b; j0 < e; j0 += chunk_) {
    const int64_t j1 = std::min(e, j0 + chunk_), n = j1 - j0;
    if (W == 1) {
      pack(g, grads_of(g), {bucket_, DType::kF32, n, j0}, 0, 1, j0, j1);
      const Tensor shard = dev(grad_shard_ + j0, DType::kF32, n);
      ops_.add(shard, shard, dev(bucket_, DType::kF32, n), stream_);
      continue;
    }
    const int k = next_bucket_;
    next_bucket_ = 1 - k;
    float* bucket = k == 0 ? bucket_ : bucket2_;
    ops_.wait_event(stream_, ev_bucket_free_[k]);  // the collective that last read slot k is done
    pack(g, grads_of(g), {bucket, DType::kF32, n, j0}, 0, W, j0, j1);
    ops_.record_event(ev_compute_, stream_);
    ops_.wait_event(side_, ev_compute_);
    comm_.reduce_scatter_sum(bucket, grad_shard_ + j0, static_cast<size_t>(n * W),
                             /*accumulate=*/count > 0, side_.handle);
    ops_.record_event(ev_bucket_free_[k], side_);
    side_busy_ = true;
  }
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
  join_side();
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
  if (!opt_.overlap_gather) {
    ops_.synchronize(side_);
    ops_.synchronize(stream_);
  }
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
  join_side();
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
  // No side-stream gather (a stage-3 prefetch, a post-update gather) may still read compute_.
  join_side(/*always=*/true);
  adam_step_ = t;
  if (opt_.offload) {
    update_offloaded(s_decay, s_plain, dev_grad);
    return;
  }
  uint16_t* bf16_out = cdt_ == DType::kBF16 ? static_cast<uint16_t*>(compute_) : nullptr;
  const int r0 = owned_rank0();
  for (int k = 0; k < owned_ranks(); ++k)
    for (const ShardTensor& ts : layout_.tensors()) {
      const int64_t valid = ts.valid(r0 + k);
      if (valid == 0) continue;
      const int64_t o = k * S + ts.shard_offset;
      const optim::AdamWStep& st = ts.no_decay ? s_plain : s_decay;
      if (ops_.device() == Device::kCUDA)  // device state: the same arithmetic as adamw_cpu
        optim::adamw_cuda(st, master_ + o, m_ + o, v_ + o, dev_grad + o,
                          static_cast<size_t>(valid), bf16_out ? bf16_out + o : nullptr,
                          stream_.handle);
      else
        optim::adamw_cpu(st, master_ + o, m_ + o, v_ + o, dev_grad + o,
                         static_cast<size_t>(valid), bf16_out ? bf16_out + o : nullptr);
    }
  if (cdt_ == DType::kF32)  // compute_ ← the compute-dtype master weights
    ops_.cast(dev(compute_, DType::kF32, owned), dev(master_, DType::kF32, owned), stream_);
}

// Pieces of the owned shard buffer for the offloaded update: every tensor's data elements, cut
// into pieces of at most kOffloadChunk elements, grouped into chunks of about that size.
void ZeroEngine::plan_offload() {
  const int64_t S = layout_.shard_elems();
  const int r0 = owned_rank0();
  OffloadChunk cur;
  int64_t cur_elems = 0;
  const auto flush = [&] {
    if (cur.pieces.empty()) return;
    cur.lo = cur.pieces.front().offset;
    cur.hi = cur.pieces.back().offset + cur.pieces.back().n;
    chunks_.push_back(std::move(cur));
    cur = {};
    cur_elems = 0;
  };
  for (int k = 0; k < owned_ranks(); ++k)
    for (const ShardTensor& ts : layout_.tensors()) {
      const int64_t valid = ts.valid(r0 + k), o = k * S + ts.shard_offset;
      for (int64_t p = 0; p < valid; p += kOffloadChunk) {
        const int64_t n = std::min(kOffloadChunk, valid - p);
        if (cur_elems > 0 && cur_elems + n > kOffloadChunk) flush();
        cur.pieces.push_back({o + p, n, ts.no_decay});
        cur_elems += n;
      }
    }
  flush();
  for (size_t c = 0; c < chunks_.size(); ++c) ev_d2h_.push_back(ops_.create_event());
}

// The offloaded update, chunk by chunk: every gradient chunk's D2H copy is enqueued at once on
// the side stream; the host AdamW takes chunk c as soon as its copy has landed, while chunk c−1's
// result goes H2D on the compute stream. Bitwise the device update (same per-element arithmetic;
// padding untouched).
void ZeroEngine::update_offloaded(const optim::AdamWStep& s_decay, const optim::AdamWStep& s_plain,
                                  const float* dev_grad) {
  ops_.record_event(ev_compute_, stream_);
  ops_.wait_event(side_, ev_compute_);
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const OffloadChunk& ch = chunks_[c];
    ops_.copy_to_host(host_grad_ + ch.lo,
                      dev(const_cast<float*>(dev_grad) + ch.lo, DType::kF32, ch.hi - ch.lo), side_);
    ops_.record_event(ev_d2h_[c], side_);
  }
  uint16_t* bf16 = cdt_ == DType::kBF16 ? host_compute_ : nullptr;
  std::vector<std::vector<optim::HostAdamW::Ticket>> tickets(chunks_.size());
  const auto finish = [&](size_t c) {
    for (const optim::HostAdamW::Ticket& tk : tickets[c]) host_adam_->wait(tk);
    const OffloadChunk& ch = chunks_[c];
    const void* src = bf16 ? static_cast<const void*>(bf16 + ch.lo) : master_ + ch.lo;
    ops_.copy_from_host(dev(at(compute_, ch.lo, ces_), cdt_, ch.hi - ch.lo), src, stream_);
  };
  for (size_t c = 0; c < chunks_.size(); ++c) {
    ops_.synchronize_event(ev_d2h_[c]);
    for (const OffloadPiece& p : chunks_[c].pieces)
      tickets[c].push_back(host_adam_->submit(p.no_decay ? s_plain : s_decay, master_ + p.offset,
                                              m_ + p.offset, v_ + p.offset, host_grad_ + p.offset,
                                              static_cast<size_t>(p.n),
                                              bf16 ? bf16 + p.offset : nullptr));
    if (c > 0) finish(c - 1);
  }
  if (!chunks_.empty()) finish(chunks_.size() - 1);
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
    // The storage no longer holds current weights: the next acquire of each group gathers it.
    std::fill(group_valid_.begin(), group_valid_.end(), 0);
    wslot_group_[0] = wslot_group_[1] = -1;
    if (!windowed_weights()) release_all();
  } else if (opt_.stage == 0) {
    for (int g = 0; g < layout_.num_groups(); ++g)
      unpack(g, {compute_, cdt_, S, 0}, weights_of(g), 0, W, stream_);
  } else if (opt_.overlap_gather) {
    // On the side stream after the update; acquire_group(g) waits for group g alone.
    ops_.record_event(ev_compute_, stream_);
    ops_.wait_event(side_, ev_compute_);
    for (int g = 0; g < layout_.num_groups(); ++g) {
      gather_into(g, weights_of(g), side_);
      ops_.record_event(ev_gathered_[static_cast<size_t>(g)], side_);
      gather_pending_[static_cast<size_t>(g)] = 1;
    }
  } else {
    for (int g = 0; g < layout_.num_groups(); ++g) gather_into(g, weights_of(g), stream_);
  }
}

}  // namespace zt::zero
