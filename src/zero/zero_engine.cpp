// ZeroEngine: the coordinator — construction, the model's per-group calls, the optimizer step.
// Checkpoint state, export and memory accounting are in zero_state.cpp.
#include "zero/zero_engine.h"

#include <fmt/ranges.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "optim/clip.h"

namespace zt::zero {

namespace {

EngineOptions checked(EngineOptions o, DType dtype, const Ops& ops, const MemoryResource& dev) {
  if (o.stage < 0 || o.stage > 3)
    fail("zero: stage {} is not supported (expected 0, 1, 2 or 3)", o.stage);
  if (dtype != DType::kF32 && dtype != DType::kBF16)
    fail("zero: compute dtype {} is not supported (expected f32 or bf16)", dtype_name(dtype));
  if (dev.device() != ops.device())
    fail("zero: device memory must be on the Ops device ({})", ops.name());
  if (o.micro_steps_per_step < 0)
    fail("zero: micro_steps_per_step {} < 0 (expected 0 = unknown, or the micro-steps per step)",
         o.micro_steps_per_step);
  return o;
}

// save_id() of a state initialised from weights (init_from_flat): any fixed non-zero value.
constexpr uint64_t kFreshSaveId = 0x5a545a45524f4930;

// save_id() after the update to step `step` from the state of id `prev`: XXH3-64 of the previous
// id, the step count and what the update did — the gradient norm (a fingerprint of the reduced
// gradient), the clip coefficient and the step's arguments —, never 0. Every input is the same on
// every rank (the norm is all-gathered and added in rank order, the arguments are SPMD), so is
// the result.
uint64_t next_save_id(uint64_t prev, int64_t step, double norm, float coef, const StepArgs& a) {
  const uint64_t in[10] = {prev,
                           static_cast<uint64_t>(step),
                           std::bit_cast<uint64_t>(norm),
                           std::bit_cast<uint32_t>(coef),
                           std::bit_cast<uint64_t>(a.lr),
                           std::bit_cast<uint64_t>(a.max_grad_norm),
                           std::bit_cast<uint64_t>(a.adam.beta1),
                           std::bit_cast<uint64_t>(a.adam.beta2),
                           std::bit_cast<uint64_t>(a.adam.eps),
                           std::bit_cast<uint64_t>(a.adam.weight_decay)};
  const uint64_t id = XXH3_64bits(in, sizeof in);
  return id != 0 ? id : 1;
}

// EngineOptions::overlap_gather at W = 1, stages 0–2, the optimizer state on the device: the
// AdamW update runs on the engine's update stream (ShardOptimizer::step_on).
bool update_overlapped(const EngineOptions& o, int world_size) {
  return o.overlap_gather && world_size == 1 && o.stage <= 2 && !o.offload;
}

}  // namespace

ZeroEngine::ZeroEngine(const ParamLayout& layout, DType dtype, Ops& ops, dist::Comm& comm,
                       MemoryResource& device_memory, MemoryResource& host_memory,
                       EngineOptions options)
    : layout_(layout, comm.world_size()),
      ops_(ops),
      comm_(comm),
      opt_(checked(options, dtype, ops, device_memory)),
      dtype_(dtype),
      overlap_update_(update_overlapped(opt_, layout_.world_size())),
      gatherer_(WeightGatherer::make(opt_.stage, opt_.overlap_gather, overlap_update_, layout_,
                                     dtype, ops, comm, device_memory, stream_)),
      optimizer_(ShardOptimizer::make(opt_.offload, layout_, gatherer_->owned_weights(), ops,
                                      device_memory, host_memory, stream_, opt_.host_threads,
                                      opt_.local_world_size)),
      reducer_(layout_, ops, comm, device_memory, stream_, /*replicate=*/opt_.stage == 0,
               {optimizer_->host_gradient(), &host_memory, optimizer_->host_threads(),
                opt_.host_gradient_accumulation, opt_.gradient_delivery_elems},
               /*one_micro_step=*/opt_.micro_steps_per_step == 1) {
  reduced_.assign(static_cast<size_t>(layout_.num_groups()), 0);
  assert(!overlap_update_ || optimizer_->async_step());  // device state, one owned rank
  if (!overlap_update_) return;
  update_stream_ = OwnedStream(ops_);  // a refused one throws: the members made destroy theirs
  ev_update_start_ = OwnedEvent(ops_);
}

ZeroEngine::~ZeroEngine() {
  if (!overlap_update_) return;
  try {  // an event wait, not synchronize(): that would also consume the ops' error status
    ops_.record_event(ev_update_start_, update_stream_);
    ops_.synchronize_event(ev_update_start_);
  } catch (...) {  // a destructor does not throw; the stream goes with the device
  }
}  // then the members: the event and the stream first (the gatherer owns the ready events)

void ZeroEngine::check_group(const char* what, int g) const {
  if (g < 0 || g >= layout_.num_groups())
    fail("zero: {}({}): group out of range [0, {})", what, g, layout_.num_groups());
}

void ZeroEngine::require_ready(const char* what) const {
  if (!ready_) fail("zero: {} before init_from_flat() or load_state()", what);
}

void ZeroEngine::require_between_steps(const char* what) const {
  for (int g = 0; g < layout_.num_groups(); ++g)
    if (reduced_[static_cast<size_t>(g)] != 0)
      fail(
          "zero: {} in the middle of an optimizer step (group {} has a reduced gradient; call "
          "finish_step or discard_step first)",
          what, g);
}

void ZeroEngine::init_from_flat(const Tensor& flat) {
  if (flat.dtype != dtype_ || flat.numel() != layout_.model_elems() || flat.data == nullptr)
    fail("zero: init_from_flat: expected a flat {} tensor of {} elements, got {}",
         dtype_name(dtype_), layout_.model_elems(), flat.describe());
  const int64_t S = layout_.shard_elems();
  const size_t es = dtype_size(dtype_);
  const OwnedWeights& w = gatherer_->owned_weights();
  gatherer_->wait_all_ready();
  gatherer_->join();  // no gather still reads or writes them
  ops_.zero(Tensor(w.data, dtype_, {w.elems}, ops_.device()), stream_);
  for (int r = w.owned.rank0; r < w.owned.rank0 + w.owned.ranks; ++r)
    for (const ShardTensor& t : layout_.tensors()) {
      const int64_t valid = t.valid(r);
      if (valid == 0) continue;
      const Tensor dst(elem_at(w.data, w.at(t, r - w.owned.rank0, S), es), dtype_, {valid},
                       ops_.device());
      const void* src = elem_at(flat.data, t.model_offset + r * t.shard_elems, es);
      if (flat.device == Device::kCPU && ops_.device() != Device::kCPU)
        ops_.copy_from_host(dst, src, stream_);
      else
        ops_.cast(dst, Tensor(const_cast<void*>(src), dtype_, {valid}, flat.device), stream_);
    }
  init_state_from_weights();
}

void ZeroEngine::init_state_from_weights() {
  optimizer_->init_from_weights();
  ready_ = true;
  adam_step_ = 0;
  save_id_ = kFreshSaveId;
  reset_step();
  gatherer_->install();  // stages 1/2 at W > 1: all-gather into every rank's full weights
  synchronize_all();
}

const void* ZeroEngine::weights(int g) {
  require_ready("weights");
  check_group("weights", g);
  // Waits for group g's ready event alone (the groups before g were produced first: one stream,
  // layout order); stage 3: all-gather of group g (collective) + prefetch.
  return gatherer_->acquire(g);
}

void ZeroEngine::release(int g) {
  check_group("release", g);
  gatherer_->release(g);
}

float* ZeroEngine::grads(int g) {
  check_group("grads", g);
  gatherer_->wait_all_ready();  // the update reads the gradient shard
  return reducer_.window(g);
}

void* ZeroEngine::gradient_scratch(int g) {
  check_group("gradient_scratch", g);
  if (!reducer_.in_shard(g)) return nullptr;
  int64_t numel = 0;  // the group's parameters: every column when there is no padding
  for (int i = layout_.tensor_begin(g); i < layout_.tensor_end(g); ++i)
    numel += layout_.tensor(i).numel;
  return numel == layout_.group_shard_elems(g) ? reducer_.window(g) : nullptr;
}

void ZeroEngine::reduce_group(int g) {
  require_ready("reduce_group");
  check_group("reduce_group", g);
  if (norm_) fail("zero: reduce_group({}) after grad_norm() in the same optimizer step", g);
  gatherer_->wait_all_ready();
  int& count = reduced_[static_cast<size_t>(g)];
  reducer_.reduce(g, /*first=*/count == 0);  // reduce-scatter (collective)
  ++count;
}

double ZeroEngine::grad_norm() {
  require_ready("grad_norm");
  if (norm_) return *norm_;
  gatherer_->wait_all_ready();
  const bool equal =
      std::all_of(reduced_.begin(), reduced_.end(), [&](int c) { return c == reduced_[0]; });
  if (!equal || reduced_[0] == 0)
    fail(
        "zero: grad_norm: the groups were reduced [{}] times in this step (expected the same "
        "count >= 1 for every group: one reduction per micro-step)",
        fmt::join(reduced_, ", "));
  // Each rank's fp64 sum of squares of its own shard, all-gathered and added in rank order.
  const std::vector<double> partials = comm_.all_gather_f64(reducer_.shard_sumsq());
  norm_ = optim::global_norm_from_partials(partials);
  return *norm_;
}

StepResult ZeroEngine::apply_step(const StepArgs& args) {
  const double norm = grad_norm();
  const float coef = optim::clip_coefficient(norm, args.max_grad_norm);
  const int64_t t = adam_step_ + 1;
  optim::AdamWParams no_decay = args.adam;
  no_decay.weight_decay = 0.0;
  const optim::AdamWStep s_decay = optim::adamw_step(args.adam, args.lr, t, coef);
  const optim::AdamWStep s_plain = optim::adamw_step(no_decay, args.lr, t, coef);
  const float* grad = reducer_.gradient_for_update();  // stage 0: all-gather of every shard
  gatherer_->join();  // no gather (stage-3 prefetch, post-update gather) still reads the weights
  gatherer_->wait_all_ready();  // (this step's forward waited for the last update already)
  adam_step_ = t;
  save_id_ = next_save_id(save_id_, t, norm, coef, args);
  if (overlap_update_) {
    // On the update stream after everything enqueued so far; weights(g) waits for group g.
    ops_.record_event(ev_update_start_, stream_);
    ops_.wait_event(update_stream_, ev_update_start_);
    optimizer_->step_on(update_stream_, s_decay, s_plain, grad,
                        [&](int g) { gatherer_->mark_produced(g, update_stream_); });
    reset_step();
    return {norm, coef, true, adam_step_};
  }
  // Writes the owned compute weights; a delivered host gradient is read as its pieces land.
  optimizer_->step(s_decay, s_plain, grad, [&](int64_t end) { reducer_.wait_delivered(end); });
  // The padding's pieces too, before the shard is rewritten — by the next step's gradients, or
  // by the residual stream the model keeps in lent columns (gradient_scratch) from its next
  // forward.
  reducer_.wait_delivered(INT64_MAX);
  gatherer_->install();  // stages 1/2: all-gather of the new weights; stage 3: gathered on use
  reset_step();
  if (!opt_.overlap_gather) synchronize_all();
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
  gatherer_->wait_all_ready();
  reducer_.clear();
  reset_step();
}

void ZeroEngine::reset_step() {
  std::fill(reduced_.begin(), reduced_.end(), 0);
  norm_.reset();
}

void ZeroEngine::synchronize_all() {
  gatherer_->wait_all_ready();
  reducer_.synchronize();
  gatherer_->synchronize();
  ops_.synchronize(stream_);
}

}  // namespace zt::zero
