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

}  // namespace zt::data
