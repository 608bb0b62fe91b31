// The fused LM-head cross-entropy's workspace budget (ce_budget_bytes, ops.h ce_rows_for_budget):
// the rows per chunk it allows, the workspace it sizes, and what it does to the result — nothing
// while the chunk stays the same, low bits only when it shrinks the chunk.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "backend/cpu/cpu_ops.h"
#include "op_test_util.h"

namespace zt {
namespace {

using test::randn;
using test::view;

TEST(CeBudget, RowsPerChunk) {
  // Qwen2.5-1.5B on CUDA with fp32 logits: a row is 4·V + 18·H bytes (the logits, a bf16 hidden
  // row, 4 fp32 gradient partials); 512 MiB fit 844 rows → 832 (× 64). With bf16 logits (2·V +
  // 18·H) they fit 1619 → 1600.
  const size_t row = 4 * 151936 + 18 * 1536;
  EXPECT_EQ(ce_rows_for_budget(8192, 2048, kCeBudgetBytes, row, 64), 832);
  EXPECT_EQ(ce_rows_for_budget(8192, 2048, kCeBudgetBytes, 2 * 151936 + 18 * 1536, 64), 1600);
  EXPECT_EQ(ce_rows_for_budget(8192, 2048, size_t{2} << 30, row, 64), 2048);  // the cap
  EXPECT_EQ(ce_rows_for_budget(300, 2048, size_t{2} << 30, row, 64), 300);    // T fits: as is
  EXPECT_EQ(ce_rows_for_budget(300, 2048, 200 * row, row, 64), 192);          // else × 64
  EXPECT_EQ(ce_rows_for_budget(8192, 2048, 50 * row + 7, row, 64), 50);       // under one quantum
  EXPECT_EQ(ce_rows_for_budget(8192, 2048, 0, row, 64), 1);                   // at least one row
  EXPECT_EQ(ce_rows_for_budget(0, 2048, kCeBudgetBytes, row), 1);
  // Non-decreasing in T: a T between the rounded (832) and unrounded (870) budget rows gets 832,
  // not T — the workspace planned for the longest micro-batch must serve every shorter one (the
  // users' job on Qwen3-1.7B / Gemma-3-1B failed "workspace has … needed" on the GPU otherwise).
  EXPECT_EQ(ce_rows_for_budget(850, 2048, kCeBudgetBytes, row, 64), 832);
  int64_t prev = 0;
  for (int64_t T = 1; T <= 4096; ++T) {
    const int64_t c = ce_rows_for_budget(T, 2048, kCeBudgetBytes, row, 64);
    ASSERT_GE(c, prev) << "T " << T;
    ASSERT_LE(c, 832) << "T " << T;
    prev = c;
  }
}

struct CeRun {
  CeStats st;
  std::vector<float> dh, dw;
  size_t workspace = 0;
};

CeRun run(size_t budget, const std::vector<float>& h, const std::vector<float>& w,
          const std::vector<int32_t>& tg, int64_t T, int64_t H, int64_t V) {
  CpuOpsOptions o;
  o.ce_chunk_rows = 16;
  o.ce_budget_bytes = budget;
  CpuOps ops(o);
  std::vector<float> hh = h, ww = w;
  std::vector<int32_t> tt = tg;
  CeRun r;
  r.dh.assign(static_cast<size_t>(T * H), 0.0f);
  r.dw = randn(static_cast<size_t>(V * H), 7, 0.1f);  // accumulated into (beta 1)
  const Tensor th = view(hh, {T, H}), tw = view(ww, {V, H});
  r.workspace = ops.linear_cross_entropy_workspace_bytes(th, tw);
  test::Workspace ws(r.workspace);
  ops.linear_cross_entropy_fwd_bwd(&r.st, view(r.dh, {T, H}), view(r.dw, {V, H}), 1.0f, th, tw,
                                   view(tt, {T}), 0.25f, ws.tensor(), {});
  return r;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

// A budget above what the chunk cap needs changes nothing, bit for bit; a budget of 5 rows makes
// chunks of 5 (a smaller workspace) and the same statistics up to the weight-gradient
// accumulation order.
TEST(CeBudget, BudgetsGivingTheSameChunkAreBitwiseEqual) {
  const int64_t T = 45, H = 16, V = 3000;
  const std::vector<float> h = randn(T * H, 50), w = randn(V * H, 51, 0.4f);
  std::vector<int32_t> tg(T);
  for (int64_t t = 0; t < T; ++t) tg[t] = t % 4 == 1 ? -100 : static_cast<int32_t>((t * 131) % V);
  const size_t row = 4 * static_cast<size_t>(V + 2 * H) + 20;  // cpu_cross_entropy.cpp
  const CeRun big = run(std::numeric_limits<size_t>::max(), h, w, tg, T, H, V);
  const CeRun exact = run(16 * row, h, w, tg, T, H, V);  // exactly the 16-row cap
  const CeRun small = run(5 * row + row / 2, h, w, tg, T, H, V);
  EXPECT_EQ(big.workspace, exact.workspace);
  EXPECT_LT(small.workspace, big.workspace);
  // The workspace of C rows (cpu_cross_entropy.cpp: regions rounded up to 64 bytes).
  const auto ws_bytes = [&](size_t C) {
    const auto r = [](size_t n) { return (n + 63) / 64 * 64; };
    const auto t = static_cast<size_t>(T), hd = static_cast<size_t>(H), v = static_cast<size_t>(V);
    return r(4 * t) + 2 * r(C * hd * 4) + r(C * v * 4) + 2 * r(C * 8) + r(C * 4);
  };
  EXPECT_EQ(big.workspace, ws_bytes(16));
  EXPECT_EQ(small.workspace, ws_bytes(5));
  EXPECT_EQ(big.st.count, 34);  // 11 of the 45 rows have no target
  // Same chunk: bitwise.
  EXPECT_EQ(std::memcmp(&big.st.loss_sum, &exact.st.loss_sum, 8), 0);
  EXPECT_EQ(std::memcmp(&big.st.entropy_sum, &exact.st.entropy_sum, 8), 0);
  EXPECT_EQ(big.st.correct, exact.st.correct);
  EXPECT_TRUE(same_bits(big.dh, exact.dh));
  EXPECT_TRUE(same_bits(big.dw, exact.dw));
  // Smaller chunks: the same counts, values within fp32 rounding.
  EXPECT_EQ(small.st.count, big.st.count);
  EXPECT_EQ(small.st.correct, big.st.correct);
  EXPECT_NEAR(small.st.loss_sum, big.st.loss_sum, 1e-6 * big.st.loss_sum);
  EXPECT_NEAR(small.st.entropy_sum, big.st.entropy_sum, 1e-6 * big.st.entropy_sum);
  for (size_t i = 0; i < big.dw.size(); ++i) ASSERT_NEAR(small.dw[i], big.dw[i], 1e-6f) << i;
  for (size_t i = 0; i < big.dh.size(); ++i) ASSERT_NEAR(small.dh[i], big.dh[i], 1e-6f) << i;
}

}  // namespace
}  // namespace zt
