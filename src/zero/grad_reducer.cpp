#include "zero/grad_reducer.h"

#include <algorithm>

#include "core/error.h"

namespace zt::zero {

bool shard_is_group_storage(const ShardLayout& layout, int g) {
  if (layout.world_size() != 1) return false;
  const int64_t mb = layout.group_model_begin(g), sb = layout.group_shard_begin(g);
  if (layout.group_model_end(g) - mb != layout.group_shard_elems(g)) return false;
  for (int i = layout.tensor_begin(g); i < layout.tensor_end(g); ++i) {
    const ShardTensor& t = layout.tensor(i);
    if (t.shard_elems != t.numel || t.model_offset - mb != t.shard_offset - sb) return false;
  }
  return true;
}

GradReducer::GradReducer(const ShardLayout& layout, Ops& ops, dist::Comm& comm,
                         MemoryResource& device_memory, Stream compute, bool replicate,
                         HostGradient host, bool one_micro_step)
    : layout_(layout),
      ops_(ops),
      comm_(comm),
      copy_(layout, ops),
      compute_(compute),
      replicate_(replicate),
      dev_("zero gradients (device)", device_memory) {
  const int64_t W = layout.world_size(), S = layout.shard_elems();
  const auto f32 = [](int64_t n) { return static_cast<size_t>(n) * 4; };
  const int last = layout.num_groups() - 1;
  const auto group_elems = [&](int g) {
    return layout.group_model_end(g) - layout.group_model_begin(g);
  };
  chunk_ = chunk_elems(layout);
  const bool on_host = host.data != nullptr && host.accumulate;
  if (on_host && host.memory == nullptr) fail("GradReducer: a host gradient needs host memory");
  // Alone, one micro-step per step, the shard on the device: the model writes a group straight
  // into its shard columns when they are laid out as its storage (the first reduction's pack would
  // copy the window there unchanged). Saves the windows: for a tied 1.5B model the 0.9 GiB fp32
  // embedding window, the layer slot and the head's.
  const int ng = layout.num_groups();
  if (one_micro_step && !on_host) {
    direct_.assign(static_cast<size_t>(ng), false);
    for (int g = 0; g < ng; ++g) direct_[static_cast<size_t>(g)] = shard_is_group_storage(layout, g);
  }
  const auto windowed = [&](int g) { return in_shard(g) ? int64_t{0} : group_elems(g); };
  int64_t mid = 0;
  for (int g = 1; g < last; ++g) mid = std::max(mid, windowed(g));
  // Delivering to the host, stage 0 all-gathers through the host gradient: no [W][S] here.
  // Without offload stage 0 holds the full gradient [W][S] and this rank's shard is its block r
  // (the all-gather runs in place): one fp32 gradient, not a shard beside a full copy.
  const bool device_full = replicate && host.data == nullptr;
  const Arena::Slot s_shard = dev_.reserve("gradient shard", on_host || device_full ? 0 : f32(S));
  // Alone (W = 1) there is no bucket: the first micro-step packs straight into the shard and the
  // later ones add to it (ShardCopy::pack_add); under host accumulation every chunk packs into a
  // staging slot.
  const bool no_bucket = W == 1;
  const Arena::Slot s_b0 = dev_.reserve("reduce-scatter bucket", no_bucket ? 0 : f32(W * chunk_));
  const Arena::Slot s_b1 = dev_.reserve("reduce-scatter bucket 2", W > 1 ? f32(W * chunk_) : 0);
  const Arena::Slot s_stage =
      dev_.reserve("gradient staging", on_host ? f32(HostGradAccumulator::kSlots * chunk_) : 0);
  const Arena::Slot s_gfirst = dev_.reserve("gradients: embedding", f32(windowed(0)));
  const Arena::Slot s_glast = dev_.reserve("gradients: head", f32(windowed(last)));
  const Arena::Slot s_gslot = dev_.reserve("gradients: layer slot", f32(mid));
  const Arena::Slot s_full =
      dev_.reserve("full gradient (the shard is this rank's block)", device_full ? f32(W * S) : 0);
  const size_t ws_bytes =
      on_host ? 0 : ops.sumsq_workspace_bytes(Tensor(nullptr, DType::kF32, {S}));
  const Arena::Slot s_ws = dev_.reserve("norm workspace", ws_bytes);
  dev_.allocate();
  ops_.zero(
      Tensor(dev_.base(), DType::kU8, {static_cast<int64_t>(dev_.planned_bytes())}, dev_.device()),
      compute_);
  ops_.synchronize(compute_);
  full_ = device_full ? static_cast<float*>(dev_.ptr(s_full)) : nullptr;
  shard_ = on_host       ? nullptr
           : device_full ? full_ + static_cast<int64_t>(comm.rank()) * S
                         : static_cast<float*>(dev_.ptr(s_shard));
  bucket_[0] = no_bucket ? nullptr : static_cast<float*>(dev_.ptr(s_b0));
  bucket_[1] = static_cast<float*>(dev_.ptr(s_b1));
  gfirst_ = static_cast<float*>(dev_.ptr(s_gfirst));
  glast_ = static_cast<float*>(dev_.ptr(s_glast));
  gslot_ = static_cast<float*>(dev_.ptr(s_gslot));
  sumsq_ws_ = Tensor(dev_.ptr(s_ws), DType::kU8,
                     {static_cast<int64_t>(std::max<size_t>(ws_bytes, 1))}, dev_.device());
  host_base_ = host.data;
  // A refused stream or event, or a bad option, throws: the members made so far destroy theirs.
  side_ = OwnedStream(ops_);
  for (OwnedEvent* e : {&ev_compute_, &ev_side_, &ev_bucket_free_[0], &ev_bucket_free_[1]})
    *e = OwnedEvent(ops_);
  if (host_base_ != nullptr && !on_host && !(replicate && W > 1)) {  // streamed delivery
    if (host.deliver_elems < 0) fail("GradReducer: deliver_elems {} < 0", host.deliver_elems);
    if (host.deliver_elems > 0) deliver_elems_ = host.deliver_elems;
    ev_delivered_.resize(static_cast<size_t>(S / deliver_elems_ + (S % deliver_elems_ != 0)));
    for (OwnedEvent& e : ev_delivered_) e = OwnedEvent(ops_);
    delivered_waited_ = ev_delivered_.size();  // nothing in flight
  }
  if (on_host) {
    float* mine = host.data + (replicate ? comm.rank() * S : 0);
    host_ = std::make_unique<HostGradAccumulator>(ops, *host.memory, mine, S,
                                                  static_cast<float*>(dev_.ptr(s_stage)), chunk_,
                                                  host.threads);
  }
}

GradReducer::~GradReducer() {
  try {  // nothing in flight may outlive the buffers (after a Comm failure this returns at once)
    ops_.synchronize(side_);
  } catch (...) {
  }
  host_.reset();  // waits for its copies and adds
}  // then the members: the events and the side stream

int64_t GradReducer::chunk_elems(const ShardLayout& layout) {
  const int ng = layout.num_groups();
  int64_t c = 0;
  for (int g = 1; g + 1 < ng; ++g) c = std::max(c, layout.group_shard_elems(g));
  return c > 0 ? c : layout.max_group_shard_elems();
}

int GradReducer::groups_in_shard() const {
  return static_cast<int>(std::count(direct_.begin(), direct_.end(), true));
}

float* GradReducer::window(int g) const {
  if (in_shard(g)) return shard_ + layout_.group_shard_begin(g);
  const int last = layout_.num_groups() - 1;
  return g == 0 ? gfirst_ : g == last ? glast_ : gslot_;
}

// Pack on the compute stream (ordered after the backward that wrote the gradients, before
// whatever next overwrites them), reduce-scatter on the side stream.
void GradReducer::reduce(int g, bool first) {
  if (host_) {
    reduce_to_host(g, first);
    return;
  }
  if (in_shard(g)) {  // the model wrote the gradient into the shard: nothing to move
    if (!first)
      fail(
          "GradReducer: group {} reduced twice in one optimizer step, but its gradient is written "
          "straight into the shard (set up for one micro-step per step)",
          g);
    return;
  }
  const int64_t b = layout_.group_shard_begin(g), e = layout_.group_shard_end(g);
  const int W = layout_.world_size();
  const GroupPtr src{window(g), DType::kF32};
  if (W == 1) {
    // Alone, the reduce-scatter is the identity: the first micro-step packs the group straight into
    // the gradient shard, later ones add to it (the same fp32 sums as through a bucket, without
    // the bucket).
    if (first)
      copy_.pack(g, src, {shard_, DType::kF32, 0, 0}, 0, 1, compute_);
    else
      copy_.pack_add(g, src, {shard_, DType::kF32, 0, 0}, compute_);
    return;
  }
  // The group's shard columns C at a time (one chunk for a decoder layer).
  for (int64_t j0 = b; j0 < e; j0 += chunk_) {
    const int64_t j1 = std::min(e, j0 + chunk_), n = j1 - j0;
    const int k = next_bucket_;
    next_bucket_ = 1 - k;
    ops_.wait_event(compute_, ev_bucket_free_[k]);  // the collective that last read slot k is done
    copy_.pack(g, src, {bucket_[k], DType::kF32, n, j0}, 0, W, compute_, j0, j1);
    ops_.record_event(ev_compute_, compute_);
    ops_.wait_event(side_, ev_compute_);
    comm_.reduce_scatter_sum(bucket_[k], shard_ + j0, static_cast<size_t>(n * W),
                             /*accumulate=*/!first, side_);
    ops_.record_event(ev_bucket_free_[k], side_);
    side_busy_ = true;
  }
}

// Offload: chunk i's sum lands in staging slot k = i mod 2 (the bucket of the same index at
// W > 1) and goes D2H (HostGradAccumulator); the host overwrites or adds.
void GradReducer::reduce_to_host(int g, bool first) {
  const int64_t b = layout_.group_shard_begin(g), e = layout_.group_shard_end(g);
  const int W = layout_.world_size();
  const GroupPtr src{window(g), DType::kF32};
  for (int64_t j0 = b; j0 < e; j0 += chunk_) {
    const int64_t j1 = std::min(e, j0 + chunk_), n = j1 - j0;
    const int k = next_bucket_;
    next_bucket_ = 1 - k;
    if (W == 1) {  // the reduce-scatter is the identity: pack straight into the staging slot
      host_->acquire(k, compute_);
      copy_.pack(g, src, {host_->slot(k), DType::kF32, n, j0}, 0, 1, compute_, j0, j1);
      host_->land(k, j0, n, first, compute_);
      continue;
    }
    host_->acquire(k, side_);
    ops_.wait_event(compute_, ev_bucket_free_[k]);  // the collective that last read bucket k
    copy_.pack(g, src, {bucket_[k], DType::kF32, n, j0}, 0, W, compute_, j0, j1);
    ops_.record_event(ev_compute_, compute_);
    ops_.wait_event(side_, ev_compute_);
    comm_.reduce_scatter_sum(bucket_[k], host_->slot(k), static_cast<size_t>(n * W),
                             /*accumulate=*/false, side_);
    ops_.record_event(ev_bucket_free_[k], side_);
    host_->land(k, j0, n, first, side_);
    side_busy_ = true;
  }
}

void GradReducer::join() {
  if (!side_busy_) return;
  ops_.record_event(ev_side_, side_);
  ops_.wait_event(compute_, ev_side_);
  side_busy_ = false;
}

double GradReducer::shard_sumsq() {
  join();
  if (host_) return host_->sumsq();
  double p = 0.0;
  ops_.sumsq(&p, copy_.dev(shard_, DType::kF32, layout_.shard_elems()), sumsq_ws_, compute_);
  ops_.synchronize(compute_);
  return p;
}

const float* GradReducer::gradient_for_update() {
  join();
  if (host_base_ != nullptr) {  // offload: the gradient goes to the optimizer's host memory
    if (host_) {
      host_->drain();
    } else if (!ev_delivered_.empty()) {
      // Accumulated on the device, one owner: D2H piece by piece on the side stream (after the
      // compute stream's last adds), each piece's event recorded for wait_delivered().
      const int64_t S = layout_.shard_elems();
      ops_.record_event(ev_compute_, compute_);
      ops_.wait_event(side_, ev_compute_);
      for (size_t i = 0; i < ev_delivered_.size(); ++i) {
        const int64_t j0 = static_cast<int64_t>(i) * deliver_elems_;
        ops_.copy_to_host(host_base_ + j0,
                          copy_.dev(shard_ + j0, DType::kF32, std::min(deliver_elems_, S - j0)),
                          side_);
        ops_.record_event(ev_delivered_[i], side_);
      }
      side_busy_ = true;  // clear() joins before zeroing the shard
      delivered_waited_ = 0;
      return host_base_;
    } else {  // accumulated on the device, stage 0 at W > 1: this rank's block D2H
      const int64_t S = layout_.shard_elems();
      float* mine = host_base_ + comm_.rank() * S;
      ops_.copy_to_host(mine, copy_.dev(shard_, DType::kF32, S), compute_);
      ops_.synchronize(compute_);
    }
    if (replicate_ && layout_.world_size() > 1)  // stage 0; device accumulation: the shard is it
      all_gather_host(host_base_, /*shard_is_mine=*/host_ == nullptr);
    return host_base_;
  }
  if (full_ == nullptr) return shard_;
  // In place: the shard is block r of full_ (at W = 1 nothing moves).
  comm_.all_gather(shard_, full_, static_cast<size_t>(layout_.shard_elems()), compute_);
  return full_;
}

void GradReducer::wait_delivered(int64_t end) {
  while (delivered_waited_ < ev_delivered_.size() &&
         static_cast<int64_t>(delivered_waited_) * deliver_elems_ < end)
    ops_.synchronize_event(ev_delivered_[delivered_waited_++]);
}

void GradReducer::clear() {
  join();
  if (host_) {
    host_->zero();
    return;
  }
  ops_.zero(copy_.dev(shard_, DType::kF32, layout_.shard_elems()), compute_);
  ops_.synchronize(compute_);
}

void GradReducer::all_gather_host(float* buf, bool shard_is_mine) {
  if (host_base_ == nullptr) fail("GradReducer::all_gather_host without a host gradient");
  if (shard_is_mine && shard_ == nullptr)
    fail("GradReducer::all_gather_host: shard_is_mine without a device shard");
  const int W = layout_.world_size(), r = comm_.rank();
  const int64_t S = layout_.shard_elems();
  join();
  if (host_) host_->drain();                      // no copy still reads the staging slot
  float* send = host_ ? host_->slot(0) : shard_;  // [C] / [S] on the device
  for (int64_t j0 = 0; j0 < S; j0 += chunk_) {    // stream-ordered: each buffer reused in order
    const int64_t n = std::min(chunk_, S - j0);
    if (shard_is_mine)
      send = shard_ + j0;
    else
      ops_.copy_from_host(copy_.dev(send, DType::kF32, n), buf + r * S + j0, compute_);
    comm_.all_gather(send, bucket_[0], static_cast<size_t>(n), compute_);
    for (int q = 0; q < W; ++q)
      if (q != r)
        ops_.copy_to_host(buf + q * S + j0, copy_.dev(bucket_[0] + q * n, DType::kF32, n),
                          compute_);
  }
  ops_.synchronize(compute_);
}

float* GradReducer::staging() const { return host_ ? host_->slot(0) : shard_; }

void GradReducer::append_pools(std::vector<PoolBytes>& out) const {
  zero::append_pools(dev_, false, out);
  if (host_) host_->append_pools(out);
}

void GradReducer::synchronize() {
  ops_.synchronize(side_);
  if (host_) host_->drain();
}

}  // namespace zt::zero
