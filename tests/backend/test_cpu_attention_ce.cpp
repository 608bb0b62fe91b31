// CPU attention and fused LM-head cross-entropy against naive double-precision references and
// finite differences: varlen (no attention across examples), causal, GQA, several query blocks,
// bf16 storage; CE chunking, ignore_index, accumulation, errors.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"
#include "op_test_util.h"

namespace zt {
namespace {

using test::finite_diff;
using test::randn;
using test::rel_err;
using test::view;

struct AttnCase {
  std::vector<int32_t> cu = {0, 5, 6, 15};
  int64_t T = 15, Hq = 4, Hkv = 2, D = 8;
  float scale = 1.0f / std::sqrt(8.0f);
  Varlen seqs() const {
    Varlen v;
    v.cu_host = cu;
    v.max_seqlen = 9;
    return v;
  }
};

// Naive causal varlen GQA attention in double; lse optional.
std::vector<double> attn_ref(const AttnCase& c, const std::vector<double>& q,
                             const std::vector<double>& k, const std::vector<double>& v,
                             std::vector<double>* lse = nullptr) {
  std::vector<double> out(c.T * c.Hq * c.D, 0.0);
  if (lse) lse->assign(c.Hq * c.T, 0.0);
  for (size_t s = 0; s + 1 < c.cu.size(); ++s)
    for (int64_t h = 0; h < c.Hq; ++h) {
      const int64_t g = h / (c.Hq / c.Hkv);
      for (int64_t t = c.cu[s]; t < c.cu[s + 1]; ++t) {
        std::vector<double> sc;
        double m = -1e300;
        for (int64_t j = c.cu[s]; j <= t; ++j) {
          double d = 0;
          for (int64_t e = 0; e < c.D; ++e)
            d += q[(t * c.Hq + h) * c.D + e] * k[(j * c.Hkv + g) * c.D + e];
          sc.push_back(d * c.scale);
          m = std::max(m, sc.back());
        }
        double z = 0;
        for (double& x : sc) z += std::exp(x - m);
        if (lse) (*lse)[h * c.T + t] = m + std::log(z);
        for (int64_t j = c.cu[s]; j <= t; ++j) {
          const double p = std::exp(sc[j - c.cu[s]] - m) / z;
          for (int64_t e = 0; e < c.D; ++e)
            out[(t * c.Hq + h) * c.D + e] += p * v[(j * c.Hkv + g) * c.D + e];
        }
      }
    }
  return out;
}

TEST(CpuAttention, ForwardBackwardMatchNaiveAndFiniteDifferences) {
  const AttnCase c;
  for (int64_t block : {4, 128}) {  // 4: the 9- and 5-token examples span several query blocks
    CpuOpsOptions o;
    o.attn_block_rows = block;
    CpuOps ops(o);
    std::vector<float> q = randn(c.T * c.Hq * c.D, 1), k = randn(c.T * c.Hkv * c.D, 2),
                       v = randn(c.T * c.Hkv * c.D, 3), r = randn(c.T * c.Hq * c.D, 4);
    std::vector<float> out(q.size()), lse(c.Hq * c.T);
    const Tensor tq = view(q, {c.T, c.Hq, c.D}), tk = view(k, {c.T, c.Hkv, c.D}),
                 tv = view(v, {c.T, c.Hkv, c.D});
    test::Workspace ws(ops.attention_workspace_bytes(tq, tk, c.seqs()));
    ops.attention_fwd(view(out, {c.T, c.Hq, c.D}), view(lse, {c.Hq, c.T}), tq, tk, tv, c.seqs(),
                      c.scale, ws.tensor(), {});
    std::vector<double> lref;
    const auto qd = test::to_double(q), kd = test::to_double(k), vd = test::to_double(v);
    EXPECT_LT(rel_err(out, attn_ref(c, qd, kd, vd, &lref)), 1e-6);
    EXPECT_LT(rel_err(lse, lref), 1e-6);
    // A one-token example attends only to itself: its output is its value row.
    for (int64_t h = 0; h < c.Hq; ++h)
      for (int64_t e = 0; e < c.D; ++e)
        EXPECT_EQ(out[(5 * c.Hq + h) * c.D + e], v[(5 * c.Hkv + h / 2) * c.D + e]);

    std::vector<float> dq(q.size()), dk(k.size()), dv(v.size());
    ops.attention_bwd(view(dq, {c.T, c.Hq, c.D}), view(dk, {c.T, c.Hkv, c.D}),
                      view(dv, {c.T, c.Hkv, c.D}), view(r, {c.T, c.Hq, c.D}), tq, tk, tv,
                      view(out, {c.T, c.Hq, c.D}), view(lse, {c.Hq, c.T}), c.seqs(), c.scale,
                      ws.tensor(), {});
    const auto dot_r = [&](const std::vector<double>& o2) {
      double s = 0;
      for (size_t i = 0; i < o2.size(); ++i) s += r[i] * o2[i];
      return s;
    };
    EXPECT_LT(
        rel_err(dq, finite_diff([&](const auto& x) { return dot_r(attn_ref(c, x, kd, vd)); }, qd)),
        1e-5);
    EXPECT_LT(
        rel_err(dk, finite_diff([&](const auto& x) { return dot_r(attn_ref(c, qd, x, vd)); }, kd)),
        1e-5);
    EXPECT_LT(
        rel_err(dv, finite_diff([&](const auto& x) { return dot_r(attn_ref(c, qd, kd, x)); }, vd)),
        1e-5);
  }
}

TEST(CpuAttention, IndependentOfThreadCount) {
  AttnCase c;
  c.cu = {0, 40, 41, 100, 160};  // enough work for the parallel path
  c.T = 160;
  Varlen seqs = c.seqs();
  seqs.max_seqlen = 60;
  std::vector<float> q = randn(c.T * c.Hq * c.D, 11), k = randn(c.T * c.Hkv * c.D, 12),
                     v = randn(c.T * c.Hkv * c.D, 13), r = randn(c.T * c.Hq * c.D, 14);
  std::vector<std::vector<float>> results;
  const int saved = omp_get_max_threads();
  for (int threads : {1, 3}) {
    omp_set_num_threads(threads);
    CpuOpsOptions o;
    o.attn_block_rows = 16;
    CpuOps ops(o);
    const Tensor tq = view(q, {c.T, c.Hq, c.D}), tk = view(k, {c.T, c.Hkv, c.D}),
                 tv = view(v, {c.T, c.Hkv, c.D});
    test::Workspace ws(ops.attention_workspace_bytes(tq, tk, seqs));
    std::vector<float> out(q.size()), lse(c.Hq * c.T), dq(q.size()), dk(k.size()), dv(v.size());
    ops.attention_fwd(view(out, {c.T, c.Hq, c.D}), view(lse, {c.Hq, c.T}), tq, tk, tv, seqs,
                      c.scale, ws.tensor(), {});
    ops.attention_bwd(view(dq, {c.T, c.Hq, c.D}), view(dk, {c.T, c.Hkv, c.D}),
                      view(dv, {c.T, c.Hkv, c.D}), view(r, {c.T, c.Hq, c.D}), tq, tk, tv,
                      view(out, {c.T, c.Hq, c.D}), view(lse, {c.Hq, c.T}), seqs, c.scale,
                      ws.tensor(), {});
    for (auto* x : {&out, &lse, &dq, &dk, &dv}) results.push_back(*x);
  }
  omp_set_num_threads(saved);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(results[i], results[i + 5]) << "output " << i;
}

TEST(CpuAttention, NeverAttendsAcrossExamples) {
  // Changing the keys/values of example 0 leaves the outputs of examples 1 and 2 bit-identical.
  const AttnCase c;
  CpuOps ops;
  std::vector<float> q = randn(c.T * c.Hq * c.D, 5), k = randn(c.T * c.Hkv * c.D, 6),
                     v = randn(c.T * c.Hkv * c.D, 7);
  const Tensor tq = view(q, {c.T, c.Hq, c.D});
  test::Workspace ws(ops.attention_workspace_bytes(tq, view(k, {c.T, c.Hkv, c.D}), c.seqs()));
  std::vector<float> out1(q.size()), out2(q.size()), lse(c.Hq * c.T);
  ops.attention_fwd(view(out1, {c.T, c.Hq, c.D}), view(lse, {c.Hq, c.T}), tq,
                    view(k, {c.T, c.Hkv, c.D}), view(v, {c.T, c.Hkv, c.D}), c.seqs(), c.scale,
                    ws.tensor(), {});
  for (int64_t i = 0; i < 5 * c.Hkv * c.D; ++i) k[i] += 3.0f, v[i] -= 2.0f;
  ops.attention_fwd(view(out2, {c.T, c.Hq, c.D}), view(lse, {c.Hq, c.T}), tq,
                    view(k, {c.T, c.Hkv, c.D}), view(v, {c.T, c.Hkv, c.D}), c.seqs(), c.scale,
                    ws.tensor(), {});
  for (int64_t i = 5 * c.Hq * c.D; i < c.T * c.Hq * c.D; ++i) ASSERT_EQ(out1[i], out2[i]) << i;
  EXPECT_NE(out1[0], out2[0]);
}

TEST(CpuAttention, Bf16IsTheFp32ResultRoundedOnce) {
  const AttnCase c;
  CpuOps ops;
  std::vector<float> qf = test::bf16_round(randn(c.T * c.Hq * c.D, 8)),
                     kf = test::bf16_round(randn(c.T * c.Hkv * c.D, 9)),
                     vf = test::bf16_round(randn(c.T * c.Hkv * c.D, 10));
  auto q = test::to_bf16(qf), k = test::to_bf16(kf), v = test::to_bf16(vf);
  std::vector<uint16_t> out(q.size());
  std::vector<float> outf(q.size()), lse(c.Hq * c.T), lsef(c.Hq * c.T);
  const Tensor tq = view(q, {c.T, c.Hq, c.D}), tk = view(k, {c.T, c.Hkv, c.D});
  test::Workspace ws(ops.attention_workspace_bytes(tq, tk, c.seqs()));
  ops.attention_fwd(view(out, {c.T, c.Hq, c.D}), view(lse, {c.Hq, c.T}), tq, tk,
                    view(v, {c.T, c.Hkv, c.D}), c.seqs(), c.scale, ws.tensor(), {});
  ops.attention_fwd(view(outf, {c.T, c.Hq, c.D}), view(lsef, {c.Hq, c.T}),
                    view(qf, {c.T, c.Hq, c.D}), view(kf, {c.T, c.Hkv, c.D}),
                    view(vf, {c.T, c.Hkv, c.D}), c.seqs(), c.scale, ws.tensor(), {});
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], f32_to_bf16(outf[i])) << i;
  EXPECT_EQ(lse, lsef);
}

TEST(CpuAttention, RejectsBadSequenceBoundaries) {
  const AttnCase c;
  CpuOps ops;
  std::vector<float> q(c.T * c.Hq * c.D), k(c.T * c.Hkv * c.D), out(q.size()), lse(c.Hq * c.T);
  Varlen bad = c.seqs();
  std::vector<int32_t> cu = {0, 5, 14};
  bad.cu_host = cu;
  test::Workspace ws(1 << 20);
  try {
    ops.attention_fwd(view(out, {c.T, c.Hq, c.D}), view(lse, {c.Hq, c.T}),
                      view(q, {c.T, c.Hq, c.D}), view(k, {c.T, c.Hkv, c.D}),
                      view(k, {c.T, c.Hkv, c.D}), bad, c.scale, ws.tensor(), {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(
        e.what(),
        "attention_fwd: cu_seqlens must start at 0 and end at T = 15 (got 3 entries, last 14)");
  }
}

struct CeRef {
  double loss = 0;
  double entropy = 0;  // Σ over target rows of −Σ_j p_j log p_j
  int64_t correct = 0, count = 0;
  std::vector<double> dh, dw;
};

CeRef ce_ref(const std::vector<float>& h, const std::vector<float>& w,
             const std::vector<int32_t>& tg, int64_t T, int64_t H, int64_t V, double scale) {
  CeRef r;
  r.dh.assign(T * H, 0.0);
  r.dw.assign(V * H, 0.0);
  for (int64_t t = 0; t < T; ++t) {
    if (tg[t] == -100) continue;
    std::vector<double> lg(V);
    for (int64_t j = 0; j < V; ++j) {
      double s = 0;
      for (int64_t e = 0; e < H; ++e) s += static_cast<double>(h[t * H + e]) * w[j * H + e];
      lg[j] = s;
    }
    const double m = *std::max_element(lg.begin(), lg.end());
    double z = 0;
    for (double x : lg) z += std::exp(x - m);
    r.loss += m + std::log(z) - lg[tg[t]];
    for (int64_t j = 0; j < V; ++j) {
      const double p = std::exp(lg[j] - m) / z;
      r.entropy -= p * std::log(p);
    }
    r.correct += std::max_element(lg.begin(), lg.end()) - lg.begin() == tg[t];
    ++r.count;
    for (int64_t j = 0; j < V; ++j) {
      const double g = scale * (std::exp(lg[j] - m) / z - (j == tg[t]));
      for (int64_t e = 0; e < H; ++e) {
        r.dh[t * H + e] += g * w[j * H + e];
        r.dw[j * H + e] += g * h[t * H + e];
      }
    }
  }
  return r;
}

TEST(CpuCrossEntropy, MatchesNaiveSoftmaxWithChunksAndIgnoredRows) {
  const int64_t T = 10, H = 12, V = 37;
  CpuOpsOptions o;
  o.ce_chunk_rows = 3;  // 7 targets -> chunks of 3, 3, 1
  CpuOps ops(o);
  std::vector<float> h = randn(T * H, 20), w = randn(V * H, 21, 0.5f);
  std::vector<int32_t> tg = {4, -100, 36, 0, -100, 7, 7, -100, 20, 1};
  // Make row 0 predict its target so the argmax count is exercised.
  for (int64_t e = 0; e < H; ++e) h[e] = 2.0f * w[4 * H + e];
  const float scale = 1.0f / 7.0f;
  std::vector<float> dh(T * H, 9.0f), dw0 = randn(V * H, 22), dw = dw0;
  const Tensor th = view(h, {T, H}), tw = view(w, {V, H});
  test::Workspace ws(ops.linear_cross_entropy_workspace_bytes(th, tw));
  CeStats st;
  ops.linear_cross_entropy_fwd_bwd(&st, view(dh, {T, H}), view(dw, {V, H}), 1.0f, th, tw,
                                   view(tg, {T}), scale, ws.tensor(), {});
  const CeRef ref = ce_ref(h, w, tg, T, H, V, scale);
  EXPECT_EQ(st.count, 7);
  EXPECT_EQ(st.correct, ref.correct);
  EXPECT_GE(st.correct, 1);
  EXPECT_NEAR(st.loss_sum, ref.loss, 1e-5 * ref.loss);
  EXPECT_NEAR(st.entropy_sum, ref.entropy, 1e-6 * ref.entropy);
  EXPECT_GT(st.entropy_sum, 0.0);
  EXPECT_LT(st.entropy_sum, 7 * std::log(37.0));
  EXPECT_LT(rel_err(dh, ref.dh), 1e-5);
  std::vector<double> dw_delta(V * H);
  for (int64_t i = 0; i < V * H; ++i) dw_delta[i] = static_cast<double>(dw[i]) - dw0[i];
  EXPECT_LT(rel_err(dw_delta, ref.dw), 1e-5);
  for (int64_t e = 0; e < H; ++e) EXPECT_EQ(dh[1 * H + e], 0.0f);  // ignored rows get 0

  // Forward only: same statistics, nothing written.
  CeStats st2;
  ops.linear_cross_entropy_fwd_bwd(&st2, Tensor(), Tensor(), 0.0f, th, tw, view(tg, {T}), 1.0f,
                                   ws.tensor(), {});
  EXPECT_EQ(st2.loss_sum, st.loss_sum);
  EXPECT_EQ(st2.correct, st.correct);
  EXPECT_EQ(st2.entropy_sum, st.entropy_sum);

  // No target at all: zero stats, dhidden 0, dweight scaled by beta.
  std::vector<int32_t> none(T, -100);
  std::vector<float> dw2(V * H, 2.0f);
  ops.linear_cross_entropy_fwd_bwd(&st2, view(dh, {T, H}), view(dw2, {V, H}), 0.0f, th, tw,
                                   view(none, {T}), scale, ws.tensor(), {});
  EXPECT_EQ(st2.count, 0);
  EXPECT_EQ(st2.loss_sum, 0.0);
  EXPECT_EQ(st2.entropy_sum, 0.0);
  EXPECT_EQ(*std::max_element(dw2.begin(), dw2.end()), 0.0f);
  EXPECT_EQ(*std::max_element(dh.begin(), dh.end()), 0.0f);

  std::vector<int32_t> bad = tg;
  bad[3] = 37;
  try {
    ops.linear_cross_entropy_fwd_bwd(&st2, Tensor(), Tensor(), 0.0f, th, tw, view(bad, {T}), 1.0f,
                                     ws.tensor(), {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "linear_cross_entropy: target 37 at position 3 is outside [0, 37) and not -100");
  }
}

// Entropy of known distributions: equal logits (zero weight) give log V per target row; logits
// that are 0 but one at log 3 give p = 3/7 there and 1/7 elsewhere (V = 5).
TEST(CpuCrossEntropy, EntropyOfKnownDistributions) {
  const int64_t T = 4, H = 2, V = 5;
  CpuOps ops;
  std::vector<float> h = {1, 0, 0.5f, 0, 0, 1, 1, 1};
  std::vector<float> w(V * H, 0.0f);
  std::vector<int32_t> tg = {0, -100, 3, 1};
  const Tensor th = view(h, {T, H}), tw = view(w, {V, H});
  test::Workspace ws(ops.linear_cross_entropy_workspace_bytes(th, tw));
  CeStats st;
  ops.linear_cross_entropy_fwd_bwd(&st, Tensor(), Tensor(), 0.0f, th, tw, view(tg, {T}), 1.0f,
                                   ws.tensor(), {});
  EXPECT_EQ(st.count, 3);
  EXPECT_NEAR(st.entropy_sum, 3 * std::log(5.0), 1e-12);
  // Token 2's logit = h[t][0]·log(3): log(3) for the target rows 0 and 3, 0 for row 2.
  w[2 * H] = static_cast<float>(std::log(3.0));
  ops.linear_cross_entropy_fwd_bwd(&st, Tensor(), Tensor(), 0.0f, th, tw, view(tg, {T}), 1.0f,
                                   ws.tensor(), {});
  // p = 3/7 for token 2 and 1/7 for the other four: H = −(3/7)log(3/7) − (4/7)log(1/7).
  const double h3 = -(3.0 / 7.0) * std::log(3.0 / 7.0) - (4.0 / 7.0) * std::log(1.0 / 7.0);
  EXPECT_NEAR(h3, 1.4750763110546947, 1e-15);
  EXPECT_NEAR(st.entropy_sum, 2 * h3 + std::log(5.0), 1e-6);
}

// The summed entropy matches the double reference whatever the chunking, and is bitwise the same
// for 1 and 3 threads.
TEST(CpuCrossEntropy, EntropyIndependentOfThreadsAndChunks) {
  const int64_t T = 40, H = 16, V = 3000;  // T·V above the parallel threshold
  std::vector<float> h = randn(T * H, 40), w = randn(V * H, 41, 0.4f);
  std::vector<int32_t> tg(T);
  for (int64_t t = 0; t < T; ++t) tg[t] = t % 5 == 0 ? -100 : static_cast<int32_t>((t * 97) % V);
  const int saved = omp_get_max_threads();
  std::vector<double> sums;
  for (int threads : {1, 3}) {
    omp_set_num_threads(threads);
    for (int64_t chunk : {7, 64}) {
      CpuOpsOptions o;
      o.ce_chunk_rows = chunk;
      CpuOps ops(o);
      const Tensor th = view(h, {T, H}), tw = view(w, {V, H});
      test::Workspace ws(ops.linear_cross_entropy_workspace_bytes(th, tw));
      CeStats st;
      ops.linear_cross_entropy_fwd_bwd(&st, Tensor(), Tensor(), 0.0f, th, tw, view(tg, {T}), 1.0f,
                                       ws.tensor(), {});
      sums.push_back(st.entropy_sum);
    }
  }
  omp_set_num_threads(saved);
  const CeRef ref = ce_ref(h, w, tg, T, H, V, 1.0);
  for (double s : sums) EXPECT_NEAR(s, ref.entropy, 1e-6 * ref.entropy);
  EXPECT_EQ(sums[0], sums[2]);  // chunk 7, 1 vs 3 threads
  EXPECT_EQ(sums[1], sums[3]);  // chunk 64
}

// bf16 hidden and weight: the logits are rounded to bf16 (HF's bf16 lm_head), everything after
// them is fp32. Against a double reference built from the same rounded logits: the loss within
// 1e-6 relative, dweight within 1e-5 of its largest value, dhidden (rounded once to bf16) within
// 2^-8 of each value plus 1e-6 of the largest. On this data the rounding shows: the loss differs
// from the fp32 run's on the same bf16-exact values by more than 1e-5 relative.
TEST(CpuCrossEntropy, Bf16LogitsAreRoundedOnce) {
  const int64_t T = 6, H = 16, V = 50;
  CpuOps ops;
  std::vector<float> hf = test::bf16_round(randn(T * H, 30)),
                     wf = test::bf16_round(randn(V * H, 31, 0.3f));
  auto h = test::to_bf16(hf), w = test::to_bf16(wf);
  std::vector<int32_t> tg = {1, 2, 3, -100, 49, 0};
  const float scale = 0.2f;
  std::vector<uint16_t> dh(T * H);
  std::vector<float> dw(V * H), dhf(T * H), dwf(V * H);
  test::Workspace ws(ops.linear_cross_entropy_workspace_bytes(view(h, {T, H}), view(w, {V, H})));
  CeStats a, b;
  ops.linear_cross_entropy_fwd_bwd(&a, view(dh, {T, H}), view(dw, {V, H}), 0.0f, view(h, {T, H}),
                                   view(w, {V, H}), view(tg, {T}), scale, ws.tensor(), {});
  ops.linear_cross_entropy_fwd_bwd(&b, view(dhf, {T, H}), view(dwf, {V, H}), 0.0f,
                                   view(hf, {T, H}), view(wf, {V, H}), view(tg, {T}), scale,
                                   ws.tensor(), {});
  double loss = 0.0;
  std::vector<double> dh_ref(T * H, 0.0), dw_ref(V * H, 0.0);
  for (int64_t t = 0; t < T; ++t) {
    if (tg[t] == -100) continue;
    std::vector<double> z(V);
    for (int64_t j = 0; j < V; ++j) {
      double acc = 0.0;
      for (int64_t k = 0; k < H; ++k) acc += static_cast<double>(hf[t * H + k]) * wf[j * H + k];
      z[j] = bf16_to_f32(f32_to_bf16(static_cast<float>(acc)));
    }
    const double m = *std::max_element(z.begin(), z.end());
    double s = 0.0;
    for (const double x : z) s += std::exp(x - m);
    loss += m + std::log(s) - z[tg[t]];
    for (int64_t j = 0; j < V; ++j) {
      const double g = scale * (std::exp(z[j] - m) / s - (j == tg[t] ? 1.0 : 0.0));
      for (int64_t k = 0; k < H; ++k) {
        dh_ref[t * H + k] += g * wf[j * H + k];
        dw_ref[j * H + k] += g * hf[t * H + k];
      }
    }
  }
  EXPECT_EQ(a.count, 5);
  EXPECT_NEAR(a.loss_sum, loss, 1e-6 * loss);
  EXPECT_GT(std::abs(b.loss_sum - loss), 1e-5 * loss) << "the rounding of the logits must show";
  double dw_max = 0.0, dh_max = 0.0;
  for (const double x : dw_ref) dw_max = std::max(dw_max, std::abs(x));
  for (const double x : dh_ref) dh_max = std::max(dh_max, std::abs(x));
  for (int64_t i = 0; i < V * H; ++i) ASSERT_NEAR(dw[i], dw_ref[i], 1e-5 * dw_max) << i;
  for (int64_t i = 0; i < T * H; ++i)
    ASSERT_NEAR(bf16_to_f32(dh[i]), dh_ref[i], std::ldexp(std::abs(dh_ref[i]), -8) + 1e-6 * dh_max)
        << i;
}

}  // namespace
}  // namespace zt
