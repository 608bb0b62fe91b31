// balance_micro_batches: each micro-step's samples dealt across ranks by token count.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "train/micro_batch_balance.h"

namespace zt::train {
namespace {

StepSamples make(std::vector<std::vector<std::vector<int64_t>>> s) {
  StepSamples ss;
  ss.samples = std::move(s);
  return ss;
}

TEST(MicroBatchBalance, DealsLongestFirstToTheLightestRankWithRoom) {
  // Sample i has length len[i]. Micro-batch 0: rank 0 holds the two longest, rank 1 two short ones.
  const std::map<int64_t, int64_t> len = {{0, 900}, {1, 800}, {2, 100}, {3, 50},
                                          {4, 10},  {5, 20},  {6, 30},  {7, 40}};
  StepSamples ss = make({{{0, 1}, {4, 5}}, {{2, 3}, {6, 7}}});
  balance_micro_batches(ss, [&](int64_t i) { return len.at(i); });
  // m = 0: 900 → r0 (tie: lower rank), 800 → r1, 100 → r1 (800 < 900), 50 → r0 (r1 is full).
  EXPECT_EQ(ss.samples[0][0], (std::vector<int64_t>{0, 3}));  // 950 tokens
  EXPECT_EQ(ss.samples[1][0], (std::vector<int64_t>{1, 2}));  // 900 tokens
  // m = 1: 40 → r0, 30 → r1, 20 → r1, 10 → r0: pool order kept inside each micro-batch.
  EXPECT_EQ(ss.samples[0][1], (std::vector<int64_t>{4, 7}));
  EXPECT_EQ(ss.samples[1][1], (std::vector<int64_t>{5, 6}));
}

TEST(MicroBatchBalance, KeepsEveryMicroStepsSamplesAndSizes) {
  // 3 ranks × 2 micro-batches × 3 samples, lengths from a fixed pattern with ties.
  StepSamples ss = make({{{0, 1, 2}, {9, 10, 11}}, {{3, 4, 5}, {12, 13, 14}},
                         {{6, 7, 8}, {15, 16, 17}}});
  const StepSamples before = ss;
  const auto len = [](int64_t i) { return 100 + (i * 37) % 5 * 50; };
  balance_micro_batches(ss, len);
  for (size_t m = 0; m < 2; ++m) {
    std::vector<int64_t> a, b;
    int64_t lo = INT64_MAX, hi = 0, lo0 = INT64_MAX, hi0 = 0;
    for (size_t r = 0; r < 3; ++r) {
      EXPECT_EQ(ss.samples[r][m].size(), before.samples[r][m].size());
      a.insert(a.end(), ss.samples[r][m].begin(), ss.samples[r][m].end());
      b.insert(b.end(), before.samples[r][m].begin(), before.samples[r][m].end());
      int64_t t = 0, t0 = 0;
      for (int64_t s : ss.samples[r][m]) t += len(s);
      for (int64_t s : before.samples[r][m]) t0 += len(s);
      lo = std::min(lo, t), hi = std::max(hi, t), lo0 = std::min(lo0, t0), hi0 = std::max(hi0, t0);
    }
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    EXPECT_EQ(a, b) << "micro-batch " << m;
    EXPECT_LE(hi - lo, hi0 - lo0) << "micro-batch " << m;
    EXPECT_LE(hi - lo, 150) << "micro-batch " << m;  // within the spread of one sample
  }
  StepSamples again = before;
  balance_micro_batches(again, len);
  EXPECT_EQ(again.samples, ss.samples);  // deterministic
}

TEST(MicroBatchBalance, OneSamplePerRankIsLeftAsItIs) {
  StepSamples ss = make({{{0}, {2}}, {{1}, {3}}});
  balance_micro_batches(ss, [](int64_t i) { return 10 * (i + 1); });  // rank 1 heavier each time
  EXPECT_EQ(ss.samples[0], (std::vector<std::vector<int64_t>>{{0}, {2}}));
  EXPECT_EQ(ss.samples[1], (std::vector<std::vector<int64_t>>{{1}, {3}}));
}

TEST(MicroBatchBalance, OneRankIsLeftAsItIs) {
  StepSamples ss = make({{{5, 1, 3}}});
  balance_micro_batches(ss, [](int64_t i) { return i + 1; });
  EXPECT_EQ(ss.samples[0][0], (std::vector<int64_t>{5, 1, 3}));
}

}  // namespace
}  // namespace zt::train
