// Best-fit-decreasing packing of examples into fixed-capacity bins (TRL `pack_dataset`, strategy
// "bfd"), one bin per training sample.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace zt::data {

// Packs examples of the given lengths (tokens, each in [1, capacity]; callers truncate first, as
// TRL's "bfd" truncates overflow to `capacity`) into bins holding at most `capacity` tokens.
// Returns the bins in creation order, each listing example indices in insertion order; every
// index appears exactly once. TRL's semantics exactly: examples are taken by length, longest
// first, ties in index order (a stable sort); each goes into the existing bin with the least
// remaining space that still fits it, ties to the bin that reached that remaining space first;
// when none fits a new bin is opened. Throws zt::Error for a length outside [1, capacity].
std::vector<std::vector<int64_t>> pack_bfd(std::span<const int64_t> lengths, int64_t capacity);

// The dataset rows TRL packs together, as the first row of each group (ascending, the first 0):
// TRL 0.25.1 packs with `dataset.map(_pack_bfd, batched=True, num_proc=dataset_num_proc)`, so
// bins never mix rows of different map batches. datasets 4.x's map cuts the `num_rows` rows into
// min(num_proc, num_rows) contiguous shards (Dataset.shard(contiguous=True): shard k holds
// num_rows / P rows, one more for k < num_rows % P; num_proc null or 0: one shard) and hands each
// shard over in batches of `batch_size` rows (map's default 1000) from the shard's start.
// batch_size 0: one batch per shard. Throws zt::Error for num_rows < 0, num_proc < 0 or
// batch_size < 0.
std::vector<int64_t> packing_group_starts(int64_t num_rows, int64_t num_proc, int64_t batch_size);

}  // namespace zt::data
