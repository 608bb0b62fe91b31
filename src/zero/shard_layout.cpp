#include "zero/shard_layout.h"

#include <xxhash.h>

#include <algorithm>

#include "core/error.h"

namespace zt::zero {

int64_t ShardTensor::valid(int r) const {
  return std::clamp<int64_t>(numel - static_cast<int64_t>(r) * shard_elems, 0, shard_elems);
}

ShardLayout::ShardLayout(const ParamLayout& layout, int world_size) {
  const int num_groups = layout.num_groups();
  model_elems_ = layout.total_elems();
  for (int g = 0; g <= num_groups; ++g)
    group_model_.push_back(g < num_groups ? layout.group_begin(g)
                                          : layout.group_end(num_groups - 1));
  int prev_group = -1;
  for (int i = 0; i < layout.num_params(); ++i) {
    const ParamSpec& p = layout.param(i);
    if (p.group < prev_group || p.group < 0 || p.group >= num_groups)
      fail(
          "zero: tensor {} '{}' is in group {} after a tensor of group {} (groups must be "
          "contiguous and ascending in tensor order, 0 <= group < {})",
          i, p.name, p.group, prev_group, num_groups);
    if (p.offset < layout.group_begin(p.group) || p.offset + p.numel > layout.group_end(p.group))
      fail("zero: tensor '{}' [{}, {}) lies outside its group {} range [{}, {}) of the flat buffer",
           p.name, p.offset, p.offset + p.numel, p.group, layout.group_begin(p.group),
           layout.group_end(p.group));
    while (prev_group < p.group) {
      ++prev_group;
      group_tensor_.push_back(i);
    }
    ShardTensor t;
    t.name = p.name;
    t.shape = p.shape;
    t.numel = p.numel;
    t.model_offset = p.offset;
    t.group = p.group;
    t.no_decay = p.no_decay;
    tensors_.push_back(std::move(t));
  }
  while (prev_group < num_groups) {  // empty trailing groups, then the end marker
    ++prev_group;
    group_tensor_.push_back(layout.num_params());
  }
  cut(world_size);
}

ShardLayout ShardLayout::with_world_size(int world_size) const {
  ShardLayout out = *this;
  out.cut(world_size);
  return out;
}

void ShardLayout::cut(int world_size) {
  if (world_size < 1) fail("zero: world size {} must be >= 1", world_size);
  world_size_ = world_size;
  const int64_t W = world_size, quantum = kShardQuantum * W;
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  const auto feed = [&](const void* p, size_t n) { XXH3_64bits_update(st, p, n); };
  const std::string tag = "zerotune-zero-layout-v1";
  feed(tag.data(), tag.size());
  const int64_t head[2] = {kShardQuantum, W};
  feed(head, sizeof head);
  int64_t offset = 0;
  for (ShardTensor& t : tensors_) {
    t.shard_elems = (t.numel + quantum - 1) / quantum * quantum / W;
    t.shard_offset = offset;
    offset += t.shard_elems;
    feed(t.name.data(), t.name.size() + 1);  // with the terminating NUL as a separator
    const int64_t ndim = static_cast<int64_t>(t.shape.size());
    feed(&ndim, sizeof ndim);
    feed(t.shape.data(), t.shape.size() * sizeof(int64_t));
  }
  hash_ = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  shard_elems_ = offset;
  group_shard_.clear();
  for (const int i : group_tensor_)
    group_shard_.push_back(i < num_tensors() ? tensors_[static_cast<size_t>(i)].shard_offset
                                             : offset);
  max_group_shard_ = 0;
  for (int g = 0; g < num_groups(); ++g)
    max_group_shard_ = std::max(max_group_shard_, group_shard_elems(g));
}

}  // namespace zt::zero
