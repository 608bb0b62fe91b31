// Best-fit decreasing, as TRL's `_pack_bfd` (trl/data_utils.py) does it with its segment tree:
// the tree finds the smallest remaining space >= length; bins with equal space wait in a FIFO.
// An ordered map from remaining space to a FIFO of bins is the same search.
#include "data/packing.h"

#include <algorithm>
#include <deque>
#include <map>
#include <numeric>

#include "core/error.h"

namespace zt::data {

std::vector<std::vector<int64_t>> pack_bfd(std::span<const int64_t> lengths, int64_t capacity) {
  if (capacity < 1) fail("packing: bin capacity (max_length) must be >= 1, got {}", capacity);
  std::vector<int64_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 1 || lengths[i] > capacity) {
      fail("packing: example {} has {} tokens, outside [1, {}]", i, lengths[i], capacity);
    }
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return lengths[a] > lengths[b]; });
  std::vector<std::vector<int64_t>> bins;
  std::map<int64_t, std::deque<size_t>> by_space;  // remaining space (> 0) -> bins, FIFO
  for (const int64_t idx : order) {
    const int64_t len = lengths[idx];
    size_t bin;
    int64_t space;
    auto it = by_space.lower_bound(len);
    if (it != by_space.end()) {
      space = it->first;
      bin = it->second.front();
      it->second.pop_front();
      if (it->second.empty()) by_space.erase(it);
    } else {
      space = capacity;
      bin = bins.size();
      bins.emplace_back();
    }
    bins[bin].push_back(idx);
    space -= len;
    if (space > 0) by_space[space].push_back(bin);
  }
  return bins;
}

}  // namespace zt::data
