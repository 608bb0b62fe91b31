// ShardLayout: the canonical ZeRO shard layout of a model for world size W (DESIGN §6).
//
// Every parameter tensor i (numel n_i) is padded to P_i = ceil(n_i / (16·W))·16·W elements and cut
// into W contiguous shards of S_i = P_i / W elements (a multiple of 16): rank r owns elements
// [r·S_i, (r+1)·S_i) of the tensor, of which valid(r) = clamp(n_i − r·S_i, 0, S_i) hold data and
// the rest is zero padding. A rank's *shard buffer* is its shards of all tensors, concatenated in
// tensor order: [S] with S = Σ S_i, tensor i at shard_offset(i) = Σ_{j<i} S_j. Tensors are in
// ParamLayout order, which keeps each group (bucket) contiguous: group g is
// [group_shard_begin(g), group_shard_end(g)) of every rank's shard buffer.
//
// Rank-major buffers ("[W][…]") place rank r's block at r·stride; the group-g bucket of a
// reduce-scatter is [W][group_shard_elems(g)], the full layout of stage 0 is [W][S].
//
// The layout depends on the model and W only — never on the ZeRO stage or offload — so the same
// elements are summed in the same order under every stage, and checkpoints move between stages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "param/param_layout.h"

namespace zt::zero {

// One parameter tensor in the canonical layout.
struct ShardTensor {
  std::string name;            // HF name
  std::vector<int64_t> shape;  // HF shape
  int64_t numel = 0;           // elements of the tensor (n_i)
  int64_t model_offset = 0;    // element offset in the model's flat buffer (ParamLayout)
  int group = 0;               // bucket (ParamLayout group)
  bool no_decay = false;       // AdamW weight decay 0 (bias / norm weight)
  int64_t shard_elems = 0;     // S_i: elements of each rank's shard (padding included)
  int64_t shard_offset = 0;    // where shard i starts in a rank's shard buffer

  // Elements of rank r's shard that hold data: clamp(numel − r·S_i, 0, S_i).
  int64_t valid(int r) const;
};

class ShardLayout {
 public:
  // Every per-rank shard is a multiple of this many elements (64 B of fp32).
  static constexpr int64_t kShardQuantum = 16;

  // Builds the layout of `layout` for `world_size` ranks. Throws zt::Error when world_size < 1,
  // when the tensors of a group are not contiguous in tensor order, or when a tensor lies outside
  // its group's range of the flat buffer.
  ShardLayout(const ParamLayout& layout, int world_size);
  // The same tensors cut for `world_size` ranks (what ShardLayout(layout, world_size) gives): the
  // layout a checkpoint of another world size was written in. Throws zt::Error when world_size < 1.
  ShardLayout with_world_size(int world_size) const;

  int world_size() const { return world_size_; }
  const std::vector<ShardTensor>& tensors() const { return tensors_; }
  const ShardTensor& tensor(int i) const { return tensors_.at(static_cast<size_t>(i)); }
  int num_tensors() const { return static_cast<int>(tensors_.size()); }
  int num_groups() const { return static_cast<int>(group_tensor_.size()) - 1; }

  // S: elements of one rank's shard buffer.
  int64_t shard_elems() const { return shard_elems_; }
  // Tensor indices of group g: [tensor_begin(g), tensor_end(g)).
  int tensor_begin(int g) const { return group_tensor_.at(static_cast<size_t>(g)); }
  int tensor_end(int g) const { return group_tensor_.at(static_cast<size_t>(g) + 1); }
  // Group g's range of a rank's shard buffer.
  int64_t group_shard_begin(int g) const { return group_shard_.at(static_cast<size_t>(g)); }
  int64_t group_shard_end(int g) const { return group_shard_.at(static_cast<size_t>(g) + 1); }
  int64_t group_shard_elems(int g) const { return group_shard_end(g) - group_shard_begin(g); }
  int64_t max_group_shard_elems() const { return max_group_shard_; }
  // Group g's [begin, end) element range of the model's flat buffer (ParamLayout).
  int64_t group_model_begin(int g) const { return group_model_.at(static_cast<size_t>(g)); }
  int64_t group_model_end(int g) const { return group_model_.at(static_cast<size_t>(g) + 1); }
  // Elements of the model's flat buffer (ParamLayout::total_elems()).
  int64_t model_elems() const { return model_elems_; }

  // XXH3-64 of the layout's identity: the quantum, W and every tensor's name and shape (in order).
  // Stage-independent; checkpoints of the ZeRO state carry it.
  uint64_t hash() const { return hash_; }

 private:
  // Sets W and derives every shard size and offset, the group shard ranges and the hash from
  // tensors_ and group_tensor_.
  void cut(int world_size);

  int world_size_ = 1;
  std::vector<ShardTensor> tensors_;
  std::vector<int> group_tensor_;     // num_groups + 1 tensor indices
  std::vector<int64_t> group_shard_;  // num_groups + 1 shard-buffer offsets
  std::vector<int64_t> group_model_;  // num_groups + 1 model-buffer offsets
  int64_t shard_elems_ = 0;
  int64_t max_group_shard_ = 0;
  int64_t model_elems_ = 0;
  uint64_t hash_ = 0;
};

}  // namespace zt::zero
