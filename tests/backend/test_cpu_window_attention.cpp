// CPU sliding-window attention (attention_fwd/bwd with window W > 0) against a naive
// double-precision reference written here (forward and backward) and finite differences: several
// packed sequences whose lengths straddle W, GQA, query blocks smaller and larger than W, W = 1,
// W ≥ the sequence length (equal to no window, bit for bit), long rows, bf16 storage, thread-count
// independence, and that keys before a query block's window are never read.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"
#include "op_test_util.h"

namespace zt {
namespace {

using test::finite_diff;
using test::randn;
using test::rel_err;
using test::view;

struct WinCase {
  std::vector<int32_t> cu;  // lengths straddle the window
  int64_t T, Hq, Hkv, D, window;
  float scale;
  Varlen seqs() const {
    Varlen v;
    v.cu_host = cu;
    for (size_t i = 0; i + 1 < cu.size(); ++i)
      v.max_seqlen = std::max<int64_t>(v.max_seqlen, cu[i + 1] - cu[i]);
    return v;
  }
  int64_t nq() const { return T * Hq * D; }
  int64_t nk() const { return T * Hkv * D; }
};

// Lengths 3, 4, 5, 9, 1 around W = 4; 4 query heads on 2 KV heads.
WinCase small_case(int64_t window = 4) {
  return {{0, 3, 7, 12, 21, 22}, 22, 4, 2, 8, window, 1.0f / std::sqrt(8.0f)};
}

// Whether query i sees key j (positions within one sequence).
bool sees(int64_t i, int64_t j, int64_t W) { return j <= i && (W == 0 || j > i - W); }

// Naive windowed causal varlen GQA attention in double: out, and lse if asked.
std::vector<double> ref_fwd(const WinCase& c, const std::vector<double>& q,
                            const std::vector<double>& k, const std::vector<double>& v,
                            std::vector<double>* lse = nullptr) {
  std::vector<double> out(c.nq(), 0.0);
  if (lse) lse->assign(c.Hq * c.T, 0.0);
  for (size_t s = 0; s + 1 < c.cu.size(); ++s)
    for (int64_t h = 0; h < c.Hq; ++h) {
      const int64_t g = h / (c.Hq / c.Hkv), b = c.cu[s], L = c.cu[s + 1] - b;
      for (int64_t i = 0; i < L; ++i) {
        std::vector<double> sc(L, -std::numeric_limits<double>::infinity());
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < L; ++j) {
          if (!sees(i, j, c.window)) continue;
          double d = 0;
          for (int64_t e = 0; e < c.D; ++e)
            d += q[((b + i) * c.Hq + h) * c.D + e] * k[((b + j) * c.Hkv + g) * c.D + e];
          sc[j] = d * c.scale;
          m = std::max(m, sc[j]);
        }
        double z = 0;
        for (int64_t j = 0; j < L; ++j)
          if (sees(i, j, c.window)) z += std::exp(sc[j] - m);
        if (lse) (*lse)[h * c.T + b + i] = m + std::log(z);
        for (int64_t j = 0; j < L; ++j) {
          if (!sees(i, j, c.window)) continue;
          const double p = std::exp(sc[j] - m) / z;
          for (int64_t e = 0; e < c.D; ++e)
            out[((b + i) * c.Hq + h) * c.D + e] += p * v[((b + j) * c.Hkv + g) * c.D + e];
        }
      }
    }
  return out;
}

struct Grads {
  std::vector<double> dq, dk, dv;
};

// Naive backward in double: p_ij, dp_ij = dO_i·v_j, ds_ij = p_ij(dp_ij - Σ_j p_ij dp_ij);
// dq_i = scale Σ_j ds_ij k_j, dk_j = scale Σ_i ds_ij q_i, dv_j = Σ_i p_ij dO_i.
Grads ref_bwd(const WinCase& c, const std::vector<double>& q, const std::vector<double>& k,
              const std::vector<double>& v, const std::vector<double>& dout) {
  Grads gr{std::vector<double>(c.nq(), 0.0), std::vector<double>(c.nk(), 0.0),
           std::vector<double>(c.nk(), 0.0)};
  for (size_t s = 0; s + 1 < c.cu.size(); ++s)
    for (int64_t h = 0; h < c.Hq; ++h) {
      const int64_t g = h / (c.Hq / c.Hkv), b = c.cu[s], L = c.cu[s + 1] - b;
      const auto qi = [&](int64_t i, int64_t e) { return ((b + i) * c.Hq + h) * c.D + e; };
      const auto kj = [&](int64_t j, int64_t e) { return ((b + j) * c.Hkv + g) * c.D + e; };
      for (int64_t i = 0; i < L; ++i) {
        std::vector<double> p(L, 0.0), dp(L, 0.0);
        double m = -std::numeric_limits<double>::infinity(), z = 0, dsum = 0;
        for (int64_t j = 0; j < L; ++j) {
          if (!sees(i, j, c.window)) continue;
          double d = 0, e2 = 0;
          for (int64_t e = 0; e < c.D; ++e) {
            d += q[qi(i, e)] * k[kj(j, e)];
            e2 += dout[qi(i, e)] * v[kj(j, e)];
          }
          p[j] = d * c.scale;
          dp[j] = e2;
          m = std::max(m, p[j]);
        }
        for (int64_t j = 0; j < L; ++j)
          if (sees(i, j, c.window)) z += (p[j] = std::exp(p[j] - m));
        for (int64_t j = 0; j < L; ++j) {
          p[j] = sees(i, j, c.window) ? p[j] / z : 0.0;
          dsum += p[j] * dp[j];
        }
        for (int64_t j = 0; j < L; ++j) {
          if (!sees(i, j, c.window)) continue;
          const double ds = p[j] * (dp[j] - dsum);
          for (int64_t e = 0; e < c.D; ++e) {
            gr.dq[qi(i, e)] += c.scale * ds * k[kj(j, e)];
            gr.dk[kj(j, e)] += c.scale * ds * q[qi(i, e)];
            gr.dv[kj(j, e)] += p[j] * dout[qi(i, e)];
          }
        }
      }
    }
  return gr;
}

// The op's outputs for one case (fp32 storage).
struct AttnResult {
  std::vector<float> out, lse, dq, dk, dv;
};

AttnResult run_fp32(const WinCase& c, int64_t block, const std::vector<float>& q,
                    const std::vector<float>& k, const std::vector<float>& v,
                    const std::vector<float>& dout, int64_t window) {
  CpuOpsOptions o;
  o.attn_block_rows = block;
  CpuOps ops(o);
  std::vector<float> qq = q, kk = k, vv = v, dd = dout;
  const Tensor tq = view(qq, {c.T, c.Hq, c.D}), tk = view(kk, {c.T, c.Hkv, c.D}),
               tv = view(vv, {c.T, c.Hkv, c.D});
  test::Workspace ws(ops.attention_workspace_bytes(tq, tk, c.seqs()));
  AttnResult r{std::vector<float>(c.nq()), std::vector<float>(c.Hq * c.T),
               std::vector<float>(c.nq()), std::vector<float>(c.nk()), std::vector<float>(c.nk())};
  ops.attention_fwd(view(r.out, {c.T, c.Hq, c.D}), view(r.lse, {c.Hq, c.T}), tq, tk, tv, c.seqs(),
                    c.scale, ws.tensor(), {}, window);
  ops.attention_bwd(view(r.dq, {c.T, c.Hq, c.D}), view(r.dk, {c.T, c.Hkv, c.D}),
                    view(r.dv, {c.T, c.Hkv, c.D}), view(dd, {c.T, c.Hq, c.D}), tq, tk, tv,
                    view(r.out, {c.T, c.Hq, c.D}), view(r.lse, {c.Hq, c.T}), c.seqs(), c.scale,
                    ws.tensor(), {}, window);
  return r;
}

TEST(CpuWindowAttention, PackedSequencesStraddlingTheWindowMatchNaiveAndFiniteDifferences) {
  const WinCase c = small_case(4);
  const std::vector<float> q = randn(c.nq(), 300), k = randn(c.nk(), 301), v = randn(c.nk(), 302),
                           r = randn(c.nq(), 303);
  const auto qd = test::to_double(q), kd = test::to_double(k), vd = test::to_double(v),
             rd = test::to_double(r);
  std::vector<double> lref;
  const std::vector<double> oref = ref_fwd(c, qd, kd, vd, &lref);
  const Grads gref = ref_bwd(c, qd, kd, vd, rd);
  // The naive backward is the gradient of <dout, out>: finite differences agree with it.
  const auto dot_r = [&](const std::vector<double>& o2) {
    double s = 0;
    for (size_t i = 0; i < o2.size(); ++i) s += rd[i] * o2[i];
    return s;
  };
  EXPECT_LT(rel_err(gref.dq,
                    finite_diff([&](const auto& x) { return dot_r(ref_fwd(c, x, kd, vd)); }, qd)),
            1e-7);
  EXPECT_LT(rel_err(gref.dk,
                    finite_diff([&](const auto& x) { return dot_r(ref_fwd(c, qd, x, vd)); }, kd)),
            1e-7);
  EXPECT_LT(rel_err(gref.dv,
                    finite_diff([&](const auto& x) { return dot_r(ref_fwd(c, qd, kd, x)); }, vd)),
            1e-7);
  // Query blocks of 1, 2 and 3 rows start windows mid-block and past key 0; 128 is one block.
  for (int64_t block : {1, 2, 3, 128}) {
    SCOPED_TRACE("block " + std::to_string(block));
    const AttnResult run = run_fp32(c, block, q, k, v, r, c.window);
    EXPECT_LT(rel_err(run.out, oref), 1e-6);
    EXPECT_LT(rel_err(run.lse, lref), 1e-6);
    EXPECT_LT(rel_err(run.dq, gref.dq), 1e-5);
    EXPECT_LT(rel_err(run.dk, gref.dk), 1e-5);
    EXPECT_LT(rel_err(run.dv, gref.dv), 1e-5);
  }
  // The window matters here: without it the 5- and 9-token sequences come out differently.
  const AttnResult full = run_fp32(c, 128, q, k, v, r, 0);
  EXPECT_GT(rel_err(full.out, oref), 1e-2);
}

TEST(CpuWindowAttention, WindowOfOneAttendsToItselfOnly) {
  const WinCase c = small_case(1);
  const std::vector<float> q = randn(c.nq(), 310), k = randn(c.nk(), 311), v = randn(c.nk(), 312),
                           r = randn(c.nq(), 313);
  for (int64_t block : {1, 4, 128}) {
    SCOPED_TRACE("block " + std::to_string(block));
    const AttnResult run = run_fp32(c, block, q, k, v, r, 1);
    std::vector<double> lse_ref(c.Hq * c.T), dv_ref(c.nk(), 0.0);
    for (int64_t t = 0; t < c.T; ++t)
      for (int64_t h = 0; h < c.Hq; ++h) {
        const int64_t g = h / (c.Hq / c.Hkv);
        double d = 0;
        for (int64_t e = 0; e < c.D; ++e) {
          // Probability 1 on the token's own key: out is its value row, exactly.
          ASSERT_EQ(run.out[(t * c.Hq + h) * c.D + e], v[(t * c.Hkv + g) * c.D + e]);
          d += static_cast<double>(q[(t * c.Hq + h) * c.D + e]) * k[(t * c.Hkv + g) * c.D + e];
          dv_ref[(t * c.Hkv + g) * c.D + e] += r[(t * c.Hq + h) * c.D + e];
        }
        lse_ref[h * c.T + t] = d * c.scale;
      }
    EXPECT_LT(rel_err(run.lse, lse_ref), 1e-6);
    EXPECT_LT(rel_err(run.dv, dv_ref), 1e-6);
    // A softmax over one key has no gradient with respect to the scores.
    for (float x : run.dq) ASSERT_LT(std::abs(x), 1e-5f);
    for (float x : run.dk) ASSERT_LT(std::abs(x), 1e-5f);
  }
}

TEST(CpuWindowAttention, WindowAtLeastTheSequenceLengthIsNoWindowBitForBit) {
  const WinCase c = small_case(0);  // longest sequence: 9 tokens
  const std::vector<float> q = randn(c.nq(), 320), k = randn(c.nk(), 321), v = randn(c.nk(), 322),
                           r = randn(c.nq(), 323);
  for (int64_t block : {2, 128}) {
    const AttnResult none = run_fp32(c, block, q, k, v, r, 0);
    for (int64_t W : {9, 10, 1000}) {
      SCOPED_TRACE("block " + std::to_string(block) + ", W " + std::to_string(W));
      const AttnResult win = run_fp32(c, block, q, k, v, r, W);
      EXPECT_EQ(win.out, none.out);
      EXPECT_EQ(win.lse, none.lse);
      EXPECT_EQ(win.dq, none.dq);
      EXPECT_EQ(win.dk, none.dk);
      EXPECT_EQ(win.dv, none.dv);
    }
    // One less than the longest sequence already differs (its last query drops key 0).
    EXPECT_NE(run_fp32(c, block, q, k, v, r, 8).out, none.out);
  }
}

TEST(CpuWindowAttention, LongRowsMatchNaive) {
  // Sequences of 700 and 300 tokens with W = 50 and 128-row query blocks: most key blocks are
  // skipped, the first block of each sequence reaches back to key 0.
  WinCase c{{0, 700, 1000}, 1000, 2, 1, 16, 50, 0.25f};
  const std::vector<float> q = randn(c.nq(), 330), k = randn(c.nk(), 331), v = randn(c.nk(), 332),
                           r = randn(c.nq(), 333);
  const auto qd = test::to_double(q), kd = test::to_double(k), vd = test::to_double(v);
  std::vector<double> lref;
  const auto oref = ref_fwd(c, qd, kd, vd, &lref);
  const Grads gref = ref_bwd(c, qd, kd, vd, test::to_double(r));
  const AttnResult run = run_fp32(c, 128, q, k, v, r, c.window);
  EXPECT_LT(rel_err(run.out, oref), 1e-6);
  EXPECT_LT(rel_err(run.lse, lref), 1e-6);
  EXPECT_LT(rel_err(run.dq, gref.dq), 1e-5);
  EXPECT_LT(rel_err(run.dk, gref.dk), 1e-5);
  EXPECT_LT(rel_err(run.dv, gref.dv), 1e-5);
}

TEST(CpuWindowAttention, KeysBeforeABlocksWindowAreNeverRead) {
  // NaN keys and values at positions 0..9 of a 400-token sequence, W = 20, 64-row query blocks:
  // query blocks from row 64 on start their keys at row 64 - 19 = 45 > 9, so they never read the
  // NaNs and come out finite and equal to the naive result. (Rows 0..63 share a block with rows
  // that see the NaNs, and 0·NaN is NaN in the probability-times-value product.)
  WinCase c{{0, 400}, 400, 2, 2, 8, 20, 0.3f};
  std::vector<float> q = randn(c.nq(), 340), k = randn(c.nk(), 341), v = randn(c.nk(), 342);
  const auto oref = ref_fwd(c, test::to_double(q), test::to_double(k), test::to_double(v));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t i = 0; i < 10 * c.Hkv * c.D; ++i) k[i] = v[i] = nan;
  CpuOpsOptions o;
  o.attn_block_rows = 64;
  CpuOps ops(o);
  std::vector<float> out(c.nq()), lse(c.Hq * c.T);
  const Tensor tq = view(q, {c.T, c.Hq, c.D}), tk = view(k, {c.T, c.Hkv, c.D});
  test::Workspace ws(ops.attention_workspace_bytes(tq, tk, c.seqs()));
  ops.attention_fwd(view(out, {c.T, c.Hq, c.D}), view(lse, {c.Hq, c.T}), tq, tk,
                    view(v, {c.T, c.Hkv, c.D}), c.seqs(), c.scale, ws.tensor(), {}, c.window);
  for (int64_t i = 64 * c.Hq * c.D; i < c.nq(); ++i) {
    ASSERT_TRUE(std::isfinite(out[i])) << i;
    ASSERT_NEAR(out[i], oref[i], 1e-5) << i;
  }
}

TEST(CpuWindowAttention, Bf16IsTheFp32ResultRoundedOnce) {
  const WinCase c = small_case(3);
  const std::vector<float> qf = test::bf16_round(randn(c.nq(), 350)),
                           kf = test::bf16_round(randn(c.nk(), 351)),
                           vf = test::bf16_round(randn(c.nk(), 352)),
                           rf = test::bf16_round(randn(c.nq(), 353));
  for (int64_t block : {2, 128}) {
    SCOPED_TRACE("block " + std::to_string(block));
    const AttnResult f = run_fp32(c, block, qf, kf, vf, rf, c.window);
    CpuOpsOptions o;
    o.attn_block_rows = block;
    CpuOps ops(o);
    auto q = test::to_bf16(qf), k = test::to_bf16(kf), v = test::to_bf16(vf), r = test::to_bf16(rf);
    std::vector<uint16_t> out(c.nq()), dq(c.nq()), dk(c.nk()), dv(c.nk());
    std::vector<float> lse(c.Hq * c.T);
    const Tensor tq = view(q, {c.T, c.Hq, c.D}), tk = view(k, {c.T, c.Hkv, c.D}),
                 tv = view(v, {c.T, c.Hkv, c.D});
    test::Workspace ws(ops.attention_workspace_bytes(tq, tk, c.seqs()));
    ops.attention_fwd(view(out, {c.T, c.Hq, c.D}), view(lse, {c.Hq, c.T}), tq, tk, tv, c.seqs(),
                      c.scale, ws.tensor(), {}, c.window);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], f32_to_bf16(f.out[i])) << i;
    EXPECT_EQ(lse, f.lse);
    // The backward reads the bf16 out; compare with the fp32 backward given that same out.
    const AttnResult f2 = [&] {
      CpuOps o2(o);
      std::vector<float> qq = qf, kk = kf, vv = vf, rr = rf, oo = test::from_bf16(out), ll = lse;
      AttnResult g{{},
                   {},
                   std::vector<float>(c.nq()),
                   std::vector<float>(c.nk()),
                   std::vector<float>(c.nk())};
      o2.attention_bwd(view(g.dq, {c.T, c.Hq, c.D}), view(g.dk, {c.T, c.Hkv, c.D}),
                       view(g.dv, {c.T, c.Hkv, c.D}), view(rr, {c.T, c.Hq, c.D}),
                       view(qq, {c.T, c.Hq, c.D}), view(kk, {c.T, c.Hkv, c.D}),
                       view(vv, {c.T, c.Hkv, c.D}), view(oo, {c.T, c.Hq, c.D}),
                       view(ll, {c.Hq, c.T}), c.seqs(), c.scale, ws.tensor(), {}, c.window);
      return g;
    }();
    ops.attention_bwd(view(dq, {c.T, c.Hq, c.D}), view(dk, {c.T, c.Hkv, c.D}),
                      view(dv, {c.T, c.Hkv, c.D}), view(r, {c.T, c.Hq, c.D}), tq, tk, tv,
                      view(out, {c.T, c.Hq, c.D}), view(lse, {c.Hq, c.T}), c.seqs(), c.scale,
                      ws.tensor(), {}, c.window);
    for (size_t i = 0; i < dq.size(); ++i) ASSERT_EQ(dq[i], f32_to_bf16(f2.dq[i])) << i;
    for (size_t i = 0; i < dk.size(); ++i) ASSERT_EQ(dk[i], f32_to_bf16(f2.dk[i])) << i;
    for (size_t i = 0; i < dv.size(); ++i) ASSERT_EQ(dv[i], f32_to_bf16(f2.dv[i])) << i;
    // And close to the naive double result on the same (bf16-valued) inputs.
    const auto qd = test::to_double(qf), kd = test::to_double(kf), vd = test::to_double(vf);
    EXPECT_LT(rel_err(test::from_bf16(out), ref_fwd(c, qd, kd, vd)), 1e-2);
    EXPECT_LT(rel_err(test::from_bf16(dk), ref_bwd(c, qd, kd, vd, test::to_double(rf)).dk), 2e-2);
  }
}

TEST(CpuWindowAttention, IndependentOfThreadCount) {
  WinCase c{{0, 40, 41, 100, 160}, 160, 4, 2, 8, 7, 0.35f};  // enough work for the parallel path
  const std::vector<float> q = randn(c.nq(), 360), k = randn(c.nk(), 361), v = randn(c.nk(), 362),
                           r = randn(c.nq(), 363);
  const int saved = omp_get_max_threads();
  std::vector<AttnResult> runs;
  for (int threads : {1, 3}) {
    omp_set_num_threads(threads);
    runs.push_back(run_fp32(c, 16, q, k, v, r, c.window));
  }
  omp_set_num_threads(saved);
  EXPECT_EQ(runs[0].out, runs[1].out);
  EXPECT_EQ(runs[0].lse, runs[1].lse);
  EXPECT_EQ(runs[0].dq, runs[1].dq);
  EXPECT_EQ(runs[0].dk, runs[1].dk);
  EXPECT_EQ(runs[0].dv, runs[1].dv);
}

TEST(CpuWindowAttention, RejectsANegativeWindow) {
  const WinCase c = small_case();
  CpuOps ops;
  std::vector<float> q(c.nq()), k(c.nk()), out(c.nq()), lse(c.Hq * c.T);
  const Tensor tq = view(q, {c.T, c.Hq, c.D}), tk = view(k, {c.T, c.Hkv, c.D});
  test::Workspace ws(ops.attention_workspace_bytes(tq, tk, c.seqs()));
  try {
    ops.attention_fwd(view(out, {c.T, c.Hq, c.D}), view(lse, {c.Hq, c.T}), tq, tk, tk, c.seqs(),
                      c.scale, ws.tensor(), {}, -3);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "attention_fwd: window is -3, expected 0 (none) or a positive number of keys");
  }
}

}  // namespace
}  // namespace zt
