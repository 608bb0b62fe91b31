#include "zero/weight_gatherer.h"

#include <algorithm>
#include <cassert>

namespace zt::zero {

namespace {

// Stages 0–2: one copy of the whole model's compute weights on every rank; the owned shards'
// weights are its elements.
class FullWeights final : public WeightGatherer {
 public:
  FullWeights(bool replicated, bool overlap, bool async_update, const ShardLayout& layout,
              DType dtype, Ops& ops, dist::Comm& comm, MemoryResource& device_memory,
              Stream compute)
      : WeightGatherer(layout, dtype, ops, comm, device_memory, compute,
                       replicated ? Ownership{0, layout.world_size()} : Ownership{comm.rank(), 1}),
        gather_(!replicated && layout.world_size() > 1),
        overlap_(overlap && gather_) {
    const Arena::Slot s_full =
        dev_.reserve("compute weights", static_cast<size_t>(layout.model_elems()) * es_);
    allocate(gather_, s_full);
    if (overlap_ || async_update) create_ready_events();
  }
  ~FullWeights() override { drain(); }

  const void* acquire(int g) override {
    wait_ready(g);  // the post-update gather of g, or the update of g, may still be in flight
    return base(g).base;
  }
  void release(int) override {}

  void install() override {
    if (!gather_) return;  // W = 1 or stage 0: the update wrote every weight in place
    const int ng = layout_.num_groups();
    if (overlap_) {
      // On the side stream after the update; acquire(g) waits for group g alone.
      side_after_compute();
      for (int g = 0; g < ng; ++g) {
        gather_into(g, base(g), side_);
        mark_produced(g, side_);
      }
    } else {
      for (int g = 0; g < ng; ++g) gather_into(g, base(g), compute_);
    }
  }

 private:
  GroupPtr base(int g) const {
    return {elem_at(owned_w_.data, layout_.group_model_begin(g), es_), dtype_};
  }
  bool gather_;   // stages 1/2 at W > 1: the other ranks' shards come by all-gather
  bool overlap_;  // ... on the side stream, marked produced per group
};

// Stage 3: the shard plus an embedding buffer, a head buffer and two layer slots.
class SlottedWeights final : public WeightGatherer {
 public:
  SlottedWeights(const ShardLayout& layout, DType dtype, Ops& ops, dist::Comm& comm,
                 MemoryResource& device_memory, Stream compute)
      : WeightGatherer(layout, dtype, ops, comm, device_memory, compute, {comm.rank(), 1}) {
    const int last = layout.num_groups() - 1;
    const auto bytes = [&](int g) {
      return static_cast<size_t>(layout.group_model_end(g) - layout.group_model_begin(g)) * es_;
    };
    size_t mid = 0;
    for (int g = 1; g < last; ++g) mid = std::max(mid, bytes(g));
    const Arena::Slot s_first = dev_.reserve("weights: embedding", bytes(0));
    const Arena::Slot s_last = dev_.reserve("weights: head", bytes(last));
    const Arena::Slot s_slot0 = dev_.reserve("weights: layer slot 0", mid);
    const Arena::Slot s_slot1 = dev_.reserve("weights: layer slot 1", mid);
    allocate(/*gather=*/true);
    first_ = dev_.ptr(s_first);
    last_ = dev_.ptr(s_last);
    slot_[0] = dev_.ptr(s_slot0);
    slot_[1] = dev_.ptr(s_slot1);
    for (OwnedEvent* e :
         {&ev_slot_ready_[0], &ev_slot_ready_[1], &ev_slot_free_[0], &ev_slot_free_[1]})
      *e = OwnedEvent(ops_);  // a refused one throws: the members made destroy theirs
    valid_.assign(static_cast<size_t>(layout.num_groups()), 0);
  }
  ~SlottedWeights() override { drain(); }  // then the slot events, then the base

  const void* acquire(int g) override {
    const int ng = layout_.num_groups();
    if (last_acquired_ >= 0 && g != last_acquired_) direction_ = g > last_acquired_ ? 1 : -1;
    last_acquired_ = g;
    if (g == 0 || g == ng - 1) {
      if (!valid_[static_cast<size_t>(g)]) {
        gather_on_side(g, -1);
        ops_.record_event(ev_side_, side_);
        ops_.wait_event(compute_, ev_side_);
        valid_[static_cast<size_t>(g)] = 1;
      }
      return storage(g);
    }
    const int k = g % 2;
    if (slot_group_[k] != g) {
      gather_on_side(g, -1);  // compute's earlier use of the slot is ordered by ev_compute_
      ops_.record_event(ev_slot_ready_[k], side_);
      slot_group_[k] = g;
    }
    ops_.wait_event(compute_, ev_slot_ready_[k]);
    // Prefetch the next layer (in the direction of travel) into the other slot.
    const int next = g + direction_;
    if (direction_ != 0 && next > 0 && next < ng - 1 && slot_group_[next % 2] != next) {
      const int k2 = next % 2;
      gather_on_side(next, k2);
      ops_.record_event(ev_slot_ready_[k2], side_);
      slot_group_[k2] = next;
    }
    return storage(g);
  }

  void release(int g) override {
    if (g > 0 && g < layout_.num_groups() - 1) ops_.record_event(ev_slot_free_[g % 2], compute_);
  }

  // The storage no longer holds current weights: the next acquire of each group gathers it.
  void install() override {
    std::fill(valid_.begin(), valid_.end(), 0);
    slot_group_[0] = slot_group_[1] = -1;
  }

 private:
  void* storage(int g) const {
    const int last = layout_.num_groups() - 1;
    return g == 0 ? first_ : g == last ? last_ : slot_[g % 2];
  }
  // Every stage-3 gather runs on the side stream, after the compute stream's work so far (the
  // update that wrote the shards; the last use of the storage it overwrites) and, for a
  // prefetch into slot k, after compute released the slot's previous group.
  void gather_on_side(int g, int slot_or_minus1) {
    side_after_compute();
    if (slot_or_minus1 >= 0) ops_.wait_event(side_, ev_slot_free_[slot_or_minus1]);
    gather_into(g, {storage(g), dtype_}, side_);
  }

  void *first_ = nullptr, *last_ = nullptr, *slot_[2] = {nullptr, nullptr};
  int slot_group_[2] = {-1, -1};  // the group gathered (or in flight) in each layer slot
  OwnedEvent ev_slot_ready_[2];   // slot k holds its group (gather finished)
  OwnedEvent ev_slot_free_[2];    // compute finished with slot k's previous group
  std::vector<char> valid_;       // group 0 / last: the buffer holds the current weights
  int last_acquired_ = -1, direction_ = 0;
};

}  // namespace

std::unique_ptr<WeightGatherer> WeightGatherer::make(int stage, bool overlap, bool async_update,
                                                     const ShardLayout& layout, DType dtype,
                                                     Ops& ops, dist::Comm& comm,
                                                     MemoryResource& device_memory,
                                                     Stream compute) {
  assert(stage != 3 || !async_update);  // the engine overlaps the update under stages 0–2 only
  if (stage == 3)
    return std::make_unique<SlottedWeights>(layout, dtype, ops, comm, device_memory, compute);
  return std::make_unique<FullWeights>(stage == 0, overlap && stage != 0, async_update, layout,
                                       dtype, ops, comm, device_memory, compute);
}

WeightGatherer::WeightGatherer(const ShardLayout& layout, DType dtype, Ops& ops, dist::Comm& comm,
                               MemoryResource& device_memory, Stream compute, Ownership owned)
    : layout_(layout),
      dtype_(dtype),
      es_(dtype_size(dtype)),
      ops_(ops),
      comm_(comm),
      copy_(layout, ops),
      compute_(compute),
      dev_(kWeightArena, device_memory) {
  owned_w_.dtype = dtype;
  owned_w_.owned = owned;
  side_ = OwnedStream(ops_);  // a refused one throws: the members made destroy theirs
  ev_compute_ = OwnedEvent(ops_);
  ev_side_ = OwnedEvent(ops_);
}

void WeightGatherer::drain() noexcept {
  try {  // no gather may outlive the buffers (after a Comm failure this returns at once)
    ops_.synchronize(side_);
    ops_.synchronize(compute_);
  } catch (...) {
  }
}

WeightGatherer::~WeightGatherer() { drain(); }  // then the members: events, side stream

void WeightGatherer::create_ready_events() {
  const auto G = static_cast<size_t>(layout_.num_groups());
  ev_ready_.reserve(G);
  for (size_t g = 0; g < G; ++g) ev_ready_.emplace_back(ops_);
  ready_pending_.assign(G, 0);
}

void WeightGatherer::mark_produced(int g, Stream s) {
  assert(static_cast<size_t>(g) < ev_ready_.size());  // made with overlap or async_update
  ops_.record_event(ev_ready_[static_cast<size_t>(g)], s);
  ready_pending_[static_cast<size_t>(g)] = 1;
}

void WeightGatherer::wait_ready(int g) {
  if (ready_pending_.empty()) return;  // no ready events: nothing is produced elsewhere
  char& pending = ready_pending_[static_cast<size_t>(g)];
  if (pending == 0) return;
  ops_.wait_event(compute_, ev_ready_[static_cast<size_t>(g)]);
  pending = 0;
}

void WeightGatherer::wait_all_ready() {
  for (int g = 0; g < static_cast<int>(ready_pending_.size()); ++g) wait_ready(g);
}

void WeightGatherer::allocate(bool gather, Arena::Slot model_weights) {
  const auto W = static_cast<size_t>(layout_.world_size());
  const auto group = static_cast<size_t>(layout_.max_group_shard_elems());
  const bool in_model = model_weights >= 0;
  const Arena::Slot s_staging = dev_.reserve("all-gather staging", gather ? W * group * es_ : 0);
  const Arena::Slot s_send = dev_.reserve("all-gather send", gather && in_model ? group * es_ : 0);
  const int64_t owned_elems = owned_w_.owned.ranks * layout_.shard_elems();
  const Arena::Slot s_shards =
      dev_.reserve("compute weight shard", in_model ? 0 : static_cast<size_t>(owned_elems) * es_);
  dev_.allocate();
  ops_.zero(
      Tensor(dev_.base(), DType::kU8, {static_cast<int64_t>(dev_.planned_bytes())}, dev_.device()),
      compute_);
  ops_.synchronize(compute_);
  staging_ = dev_.ptr(s_staging);
  send_ = dev_.ptr(s_send);
  owned_w_.model_layout = in_model;
  owned_w_.data = dev_.ptr(in_model ? model_weights : s_shards);
  owned_w_.elems = in_model ? layout_.model_elems() : owned_elems;
}

void WeightGatherer::gather_into(int g, GroupPtr dst, Stream s) {
  const int64_t n = layout_.group_shard_elems(g), b = layout_.group_shard_begin(g);
  const int W = layout_.world_size();
  if (owned_w_.model_layout) {
    if (W == 1) return;  // dst is the owned weights themselves
    // This rank's shard of the group, out of the full buffer (padding zeroed), is what it sends.
    copy_.pack(g, dst, {send_, dtype_, 0, b}, comm_.rank(), comm_.rank() + 1, s);
  }
  const void* send = owned_w_.model_layout ? send_ : elem_at(owned_w_.data, b, es_);
  if (W == 1) {  // alone: the shard is the whole group, no gather needed
    copy_.unpack(g, {owned_w_.data, dtype_, 0, 0}, dst, 0, 1, s);
    return;
  }
  if (dtype_ == DType::kBF16)
    comm_.all_gather_bf16(static_cast<const uint16_t*>(send), static_cast<uint16_t*>(staging_),
                          static_cast<size_t>(n), s);
  else
    comm_.all_gather(static_cast<const float*>(send), static_cast<float*>(staging_),
                     static_cast<size_t>(n), s);
  copy_.unpack(g, {staging_, dtype_, n, b}, dst, 0, W, s);
}

void WeightGatherer::side_after_compute() {
  ops_.record_event(ev_compute_, compute_);
  ops_.wait_event(side_, ev_compute_);
}

void WeightGatherer::join() {
  ops_.record_event(ev_side_, side_);
  ops_.wait_event(compute_, ev_side_);
}

void WeightGatherer::synchronize() { ops_.synchronize(side_); }

void WeightGatherer::append_pools(std::vector<PoolBytes>& out) const {
  zero::append_pools(dev_, false, out);
}

}  // namespace zt::zero
