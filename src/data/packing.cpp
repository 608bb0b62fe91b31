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

std::vector<int64_t> packing_group_starts(int64_t num_rows, int64_t num_proc, int64_t batch_size) {
  if (num_rows < 0 || num_proc < 0 || batch_size < 0)
    fail("packing groups: num_rows {}, num_proc {}, batch_size {} (expected >= 0)", num_rows,
         num_proc, batch_size);
  // datasets: `num_proc == 0` is None; `num_proc > len(self)` is reduced to len(self).
  const int64_t shards = std::max<int64_t>(1, std::min(num_proc, num_rows));
  const int64_t div = num_rows / shards, mod = num_rows % shards;
  std::vector<int64_t> starts;
  for (int64_t k = 0; k < shards; ++k) {
    const int64_t begin = div * k + std::min(k, mod);
    const int64_t end = begin + div + (k < mod ? 1 : 0);
    const int64_t step = batch_size > 0 ? batch_size : std::max<int64_t>(1, end - begin);
    for (int64_t r = begin; r < end; r += step) starts.push_back(r);
  }
  if (starts.empty()) starts.push_back(0);  // no rows: one empty group
  return starts;
}

}  // namespace zt::data
