#include "train/micro_batch_balance.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace zt::train {

void balance_micro_batches(StepSamples& ss, const std::function<int64_t(int64_t)>& tokens) {
  const size_t W = ss.samples.size();
  if (W < 2) return;
  const size_t M = ss.samples[0].size();
  for (size_t m = 0; m < M; ++m) {
    // The pool in rank order, with each rank's capacity.
    std::vector<int64_t> pool, len;
    std::vector<size_t> room(W);
    for (size_t r = 0; r < W; ++r) {
      if (m >= ss.samples[r].size()) continue;
      room[r] = ss.samples[r][m].size();
      for (int64_t s : ss.samples[r][m]) {
        pool.push_back(s);
        len.push_back(tokens(s));
      }
    }
    // One sample per rank: any dealing has the same heaviest rank; keep accelerate's.
    if (*std::max_element(room.begin(), room.end()) <= 1) continue;
    std::vector<size_t> order(pool.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return len[a] > len[b]; });
    std::vector<int64_t> load(W, 0);
    std::vector<std::vector<size_t>> got(W);  // pool positions per rank
    for (size_t p : order) {
      size_t best = W;
      for (size_t r = 0; r < W; ++r)
        if (got[r].size() < room[r] && (best == W || load[r] < load[best])) best = r;
      got[best].push_back(p);
      load[best] += len[p];
    }
    for (size_t r = 0; r < W; ++r) {
      if (m >= ss.samples[r].size()) continue;
      std::sort(got[r].begin(), got[r].end());
      auto& mb = ss.samples[r][m];
      for (size_t i = 0; i < got[r].size(); ++i) mb[i] = pool[got[r][i]];
    }
  }
}

}  // namespace zt::train
