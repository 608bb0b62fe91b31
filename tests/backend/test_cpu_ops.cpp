// CPU ops against naive double-precision references and finite differences: cast, add,
// embedding, RMSNorm, matmul (+bias, beta, every layout, bf16 operands), bias_grad, RoPE, SwiGLU,
// sumsq; thread-count independence of the reductions.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
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

TEST(CpuOps, CastRoundsToNearestEvenAndBack) {
  CpuOps ops;
  // 1 + 2^-8 is halfway between bf16 1 and 1 + 2^-7: ties to even (1). 1 + 3·2^-8 rounds up.
  std::vector<float> src = {1.0f + 0x1.0p-8f, 1.0f + 3 * 0x1.0p-8f, -2.5f, 65504.0f};
  std::vector<uint16_t> mid(4);
  ops.cast(view(mid, {4}), view(src, {4}), {});
  EXPECT_EQ(mid[0], 0x3f80);
  EXPECT_EQ(mid[1], 0x3f82);
  EXPECT_EQ(mid[2], 0xc020);
  std::vector<float> back(4);
  ops.cast(view(back, {4}), view(mid, {4}), {});
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[1], 1.0f + 2 * 0x1.0p-7f);
  EXPECT_EQ(back[2], -2.5f);
  EXPECT_EQ(back[3], 65536.0f);
  std::vector<float> small(3);
  EXPECT_THROW(ops.cast(view(small, {3}), view(src, {4}), {}), Error);
}

TEST(CpuOps, AddInPlace) {
  CpuOps ops;
  std::vector<float> a = {1, 2, 3}, b = {10, 20, 30.5f};
  ops.add(view(a, {3}), view(a, {3}), view(b, {3}), {});
  EXPECT_EQ(a, (std::vector<float>{11, 22, 33.5f}));
}

TEST(CpuOps, EmbeddingForwardBackward) {
  CpuOps ops;
  const int64_t V = 5, H = 70;  // H > one 64-column block
  std::vector<float> table = randn(V * H, 1);
  std::vector<int32_t> ids = {3, 0, 3, 4};
  std::vector<float> out(4 * H);
  ops.embedding_fwd(view(out, {4, H}), view(table, {V, H}), view(ids, {4}), {});
  for (int t = 0; t < 4; ++t)
    for (int j = 0; j < H; ++j) ASSERT_EQ(out[t * H + j], table[ids[t] * H + j]);
  std::vector<float> dout = randn(4 * H, 2), dtable(V * H, 7.0f);
  ops.embedding_bwd(view(dtable, {V, H}), view(dout, {4, H}), view(ids, {4}), 0.0f, {}, {});
  for (int j = 0; j < H; ++j) {
    EXPECT_EQ(dtable[3 * H + j], dout[0 * H + j] + dout[2 * H + j]);  // rows added in order
    EXPECT_EQ(dtable[0 * H + j], dout[1 * H + j]);
    EXPECT_EQ(dtable[1 * H + j], 0.0f);
  }
  ops.embedding_bwd(view(dtable, {V, H}), view(dout, {4, H}), view(ids, {4}), 1.0f, {}, {});
  EXPECT_EQ(dtable[4 * H + 5], dout[3 * H + 5] + dout[3 * H + 5]);
  std::vector<int32_t> bad = {1, 5};
  std::vector<float> out2(2 * H);
  try {
    ops.embedding_fwd(view(out2, {2, H}), view(table, {V, H}), view(bad, {2}), {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "embedding_fwd: token id 5 at position 1 is outside the vocabulary [0, 5)");
  }
}

// Naive RMSNorm in double (no intermediate rounding: the fp32 path).
std::vector<double> rmsnorm_ref(const std::vector<double>& x, const std::vector<double>& w,
                                int64_t T, int64_t H, double eps) {
  std::vector<double> y(x.size());
  for (int64_t t = 0; t < T; ++t) {
    double ss = 0;
    for (int64_t j = 0; j < H; ++j) ss += x[t * H + j] * x[t * H + j];
    const double r = 1.0 / std::sqrt(ss / H + eps);
    for (int64_t j = 0; j < H; ++j) y[t * H + j] = w[j] * (x[t * H + j] * r);
  }
  return y;
}

TEST(CpuOps, RmsNormForwardAndBackwardMatchFiniteDifferences) {
  CpuOps ops;
  const int64_t T = 5, H = 37;
  const float eps = 1e-5f;
  std::vector<float> x = randn(T * H, 3, 2.0f), w = randn(H, 4), r = randn(T * H, 5);
  std::vector<float> y(T * H), rstd(T);
  ops.rmsnorm_fwd(view(y, {T, H}), view(rstd, {T}), view(x, {T, H}), view(w, {H}), eps, {});
  const auto yref = rmsnorm_ref(test::to_double(x), test::to_double(w), T, H, eps);
  EXPECT_LT(rel_err(y, yref), 2e-6);
  // L = Σ r·y: dL/dy = r.
  std::vector<float> dx(T * H), dw(H, 100.0f);
  ops.rmsnorm_bwd(view(dx, {T, H}), false, view(dw, {H}), 0.0f, view(r, {T, H}), view(x, {T, H}),
                  view(w, {H}), view(rstd, {T}), {});
  const auto wd = test::to_double(w), xd = test::to_double(x), rd = test::to_double(r);
  const auto loss_x = [&](const std::vector<double>& xx) {
    const auto yy = rmsnorm_ref(xx, wd, T, H, eps);
    return std::inner_product(yy.begin(), yy.end(), rd.begin(), 0.0);
  };
  const auto loss_w = [&](const std::vector<double>& ww) {
    const auto yy = rmsnorm_ref(xd, ww, T, H, eps);
    return std::inner_product(yy.begin(), yy.end(), rd.begin(), 0.0);
  };
  EXPECT_LT(rel_err(dx, finite_diff(loss_x, xd)), 1e-5);
  EXPECT_LT(rel_err(dw, finite_diff(loss_w, wd)), 1e-5);
  // accumulate_dx adds; beta_dw = 1 adds; dx may alias dy.
  std::vector<float> dx2 = dx, dw2 = dw, dy_alias = r;
  ops.rmsnorm_bwd(view(dx2, {T, H}), true, view(dw2, {H}), 1.0f, view(r, {T, H}), view(x, {T, H}),
                  view(w, {H}), view(rstd, {T}), {});
  ops.rmsnorm_bwd(view(dy_alias, {T, H}), false, view(dw, {H}), 0.0f, view(dy_alias, {T, H}),
                  view(x, {T, H}), view(w, {H}), view(rstd, {T}), {});
  for (int64_t i = 0; i < T * H; ++i) {
    ASSERT_EQ(dx2[i], dx[i] + dx[i]);
    ASSERT_EQ(dy_alias[i], dx[i]);
  }
  for (int64_t j = 0; j < H; ++j) ASSERT_EQ(dw2[j], dw[j] + dw[j]);
}

TEST(CpuOps, RmsNormBf16CastsBeforeTheWeightMultiply) {
  CpuOps ops;
  const int64_t T = 3, H = 20;
  std::vector<float> xf = test::bf16_round(randn(T * H, 6)), wf = test::bf16_round(randn(H, 7));
  auto x = test::to_bf16(xf), w = test::to_bf16(wf);
  std::vector<uint16_t> y(T * H);
  std::vector<float> rstd(T);
  ops.rmsnorm_fwd(view(y, {T, H}), view(rstd, {T}), view(x, {T, H}), view(w, {H}), 1e-6f, {});
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < H; ++j) {
      // HF: weight * (x32 * rstd).to(bf16), the product rounded to bf16 again.
      const float n = bf16_to_f32(f32_to_bf16(xf[t * H + j] * rstd[t]));
      ASSERT_EQ(y[t * H + j], f32_to_bf16(wf[j] * n)) << t << "," << j;
    }
}

// Naive C = op(A)·op(B) in double.
std::vector<double> matmul_ref(const std::vector<float>& A, bool ta, const std::vector<float>& B,
                               bool tb, int64_t M, int64_t N, int64_t K) {
  std::vector<double> C(M * N, 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += static_cast<double>(ta ? A[k * M + i] : A[i * K + k]) *
             (tb ? B[j * K + k] : B[k * N + j]);
      C[i * N + j] = s;
    }
  return C;
}

TEST(CpuOps, MatmulAllLayoutsBiasAndBeta) {
  CpuOps ops;
  const int64_t M = 7, N = 9, K = 13;
  for (int lay = 0; lay < 4; ++lay) {
    const bool ta = lay & 1, tb = lay & 2;
    std::vector<float> A = randn(M * K, 10 + lay), B = randn(K * N, 20 + lay), bias = randn(N, 30);
    std::vector<float> C0 = randn(M * N, 40), C = C0;
    const Tensor tA = ta ? view(A, {K, M}) : view(A, {M, K});
    const Tensor tB = tb ? view(B, {N, K}) : view(B, {K, N});
    ops.matmul(view(C, {M, N}), tA, ta ? Trans::kT : Trans::kN, tB, tb ? Trans::kT : Trans::kN,
               view(bias, {N}), 0.5f, 2.0f, Tensor(), {});
    auto ref = matmul_ref(A, ta, B, tb, M, N, K);
    for (int64_t i = 0; i < M * N; ++i) ref[i] = 0.5 * ref[i] + 2.0 * C0[i] + bias[i % N];
    EXPECT_LT(rel_err(C, ref), 1e-6) << "layout " << lay;
  }
  std::vector<float> A(6), B(6), C(4);
  try {
    ops.matmul(view(C, {2, 2}), view(A, {2, 3}), Trans::kN, view(B, {2, 3}), Trans::kN, Tensor(),
               1.0f, 0.0f, Tensor(), {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("matmul: shapes do not fit"), std::string::npos)
        << e.what();
  }
}

TEST(CpuOps, MatmulBf16OperandsAccumulateInFp32) {
  CpuOps ops;
  const int64_t M = 5, N = 6, K = 300;
  std::vector<float> Af = test::bf16_round(randn(M * K, 50)),
                     Bf = test::bf16_round(randn(N * K, 51));
  auto A = test::to_bf16(Af), B = test::to_bf16(Bf);
  std::vector<uint16_t> C(M * N);
  std::vector<float> Cf(M * N);
  const Tensor tC = view(C, {M, N}), tA = view(A, {M, K}), tB = view(B, {N, K});
  test::Workspace ws(ops.matmul_workspace_bytes(tC, tA, Trans::kN, tB, Trans::kT));
  // fp32 copies of A, B and C, each rounded up to 64 bytes.
  EXPECT_EQ(
      ops.matmul_workspace_bytes(tC, tA, Trans::kN, tB, Trans::kT),
      size_t{(M * K * 4 + 63) / 64 * 64 + (N * K * 4 + 63) / 64 * 64 + (M * N * 4 + 63) / 64 * 64});
  ops.matmul(tC, tA, Trans::kN, tB, Trans::kT, Tensor(), 1.0f, 0.0f, ws.tensor(), {});
  // Same product with fp32 operands and fp32 output, then rounded once.
  ops.matmul(view(Cf, {M, N}), view(Af, {M, K}), Trans::kN, view(Bf, {N, K}), Trans::kT, Tensor(),
             1.0f, 0.0f, Tensor(), {});
  for (int64_t i = 0; i < M * N; ++i) ASSERT_EQ(C[i], f32_to_bf16(Cf[i]));
  // Too small a workspace is an error naming the sizes.
  test::Workspace small(8);
  EXPECT_THROW(
      ops.matmul(tC, tA, Trans::kN, tB, Trans::kT, Tensor(), 1.0f, 0.0f, small.tensor(), {}),
      Error);
}

TEST(CpuOps, MatmulIsIndependentOfThreadCount) {
  // Large enough to be split over threads (by rows, then by columns).
  const int64_t M = 300, N = 200, K = 70;
  std::vector<float> A = randn(M * K, 55), B = randn(N * K, 56);
  const int saved = omp_get_max_threads();
  for (bool wide : {false, true}) {
    const int64_t m = wide ? N : M, n = wide ? M : N;
    std::vector<std::vector<float>> outs;
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      CpuOps ops;
      std::vector<float> C(m * n, 1.0f);
      ops.matmul(view(C, {m, n}), wide ? view(B, {m, K}) : view(A, {m, K}), Trans::kN,
                 wide ? view(A, {n, K}) : view(B, {n, K}), Trans::kT, Tensor(), 1.0f, 0.5f,
                 Tensor(), {});
      outs.push_back(C);
    }
    EXPECT_EQ(outs[0], outs[1]);
    EXPECT_EQ(outs[0], outs[2]);
  }
  omp_set_num_threads(saved);
}

TEST(CpuOps, BiasGradSumsRowsInOrder) {
  CpuOps ops;
  const int64_t M = 11, N = 70;
  std::vector<float> dy = randn(M * N, 60), db(N, 3.0f);
  ops.bias_grad(view(db, {N}), view(dy, {M, N}), 1.0f, {});
  for (int64_t j = 0; j < N; ++j) {
    float s = 0;
    for (int64_t i = 0; i < M; ++i) s += dy[i * N + j];
    ASSERT_EQ(db[j], 3.0f + s);
  }
}

TEST(CpuOps, RopeTablesForwardAndAdjointBackward) {
  CpuOps ops;
  const int64_t T = 6, NH = 3, D = 8, half = D / 2;
  std::vector<float> inv = {1.0f, 0.1f, 0.01f, 0.001f};
  std::vector<int32_t> pos = {0, 1, 2, 0, 1, 700};
  std::vector<float> c(T * half), s(T * half);
  ops.rope_tables(view(c, {T, half}), view(s, {T, half}), view(pos, {T}), view(inv, {half}), 1.0f,
                  {});
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const float a = inv[i] * static_cast<float>(pos[t]);
      ASSERT_NEAR(c[t * half + i], std::cos(static_cast<double>(a)), 1e-7);
      ASSERT_NEAR(s[t * half + i], std::sin(static_cast<double>(a)), 1e-7);
    }
  std::vector<float> x = randn(T * NH * D, 70), x0 = x;
  ops.rope_fwd(view(x, {T, NH, D}), view(c, {T, half}), view(s, {T, half}), {});
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t i = 0; i < half; ++i) {
        const int64_t o = (t * NH + h) * D;
        const double ci = c[t * half + i], si = s[t * half + i];
        // q·cos + rotate_half(q)·sin with rotate_half([a, b]) = [-b, a].
        ASSERT_NEAR(x[o + i], x0[o + i] * ci - x0[o + i + half] * si, 1e-6);
        ASSERT_NEAR(x[o + i + half], x0[o + i + half] * ci + x0[o + i] * si, 1e-6);
      }
  // Backward is the adjoint: <R x, y> = <x, Rᵀ y>.
  std::vector<float> y = randn(T * NH * D, 71), ry = y;
  ops.rope_bwd(view(ry, {T, NH, D}), view(c, {T, half}), view(s, {T, half}), {});
  double lhs = 0, rhs = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    lhs += static_cast<double>(x[i]) * y[i];
    rhs += static_cast<double>(x0[i]) * ry[i];
  }
  EXPECT_NEAR(lhs, rhs, 1e-5 * std::abs(lhs) + 1e-6);
}

TEST(CpuOps, SwigluForwardBackwardMatchFiniteDifferences) {
  CpuOps ops;
  const int64_t n = 50;
  std::vector<float> g = randn(n, 80, 3.0f), u = randn(n, 81), r = randn(n, 82), out(n);
  ops.swiglu_fwd(view(out, {n}), view(g, {n}), view(u, {n}), {});
  const auto f = [](double gg, double uu) { return gg / (1 + std::exp(-gg)) * uu; };
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(out[i], f(g[i], u[i]), 1e-6 * (1 + std::abs(out[i])));
  std::vector<float> dg(n), du(n);
  ops.swiglu_bwd(view(dg, {n}), view(du, {n}), view(r, {n}), view(g, {n}), view(u, {n}), {});
  const auto gd = test::to_double(g), ud = test::to_double(u);
  const auto lg = [&](const std::vector<double>& gg) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += r[i] * f(gg[i], ud[i]);
    return s;
  };
  const auto lu = [&](const std::vector<double>& uu) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += r[i] * f(gd[i], uu[i]);
    return s;
  };
  EXPECT_LT(rel_err(dg, finite_diff(lg, gd)), 1e-6);
  EXPECT_LT(rel_err(du, finite_diff(lu, ud)), 1e-6);
  // In place (dgate over gate, dup over up) gives the same bits.
  std::vector<float> g2 = g, u2 = u;
  ops.swiglu_bwd(view(g2, {n}), view(u2, {n}), view(r, {n}), view(g2, {n}), view(u2, {n}), {});
  EXPECT_EQ(g2, dg);
  EXPECT_EQ(u2, du);
}

TEST(CpuOps, SumsqIsFp64AndIndependentOfThreads) {
  CpuOps ops;
  const int64_t n = 3 * Ops::kSumsqBlock + 123;
  std::vector<float> x = randn(n, 90);
  const Tensor tx = view(x, {n});
  test::Workspace ws(ops.sumsq_workspace_bytes(tx));
  double ref = 0;
  for (float v : x) ref += static_cast<double>(v) * v;
  double a = 0, b = 0;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  ops.sumsq(&a, tx, ws.tensor(), {});
  omp_set_num_threads(2);
  ops.sumsq(&b, tx, ws.tensor(), {});
  omp_set_num_threads(saved);
  EXPECT_EQ(a, b);
  EXPECT_NEAR(a, ref, 1e-12 * ref);
  auto xb = test::to_bf16(x);
  double c = 0, refb = 0;
  for (uint16_t v : xb) refb += static_cast<double>(bf16_to_f32(v)) * bf16_to_f32(v);
  ops.sumsq(&c, view(xb, {n}), ws.tensor(), {});
  EXPECT_NEAR(c, refb, 1e-12 * refb);
}

TEST(CpuOps, ColumnReductionsAreIndependentOfThreads) {
  CpuOps ops;
  const int64_t T = 300, H = 130, V = 7;
  std::vector<float> x = randn(T * H, 100), w = randn(H, 101), dy = randn(T * H, 102), rstd(T),
                     y(T * H);
  std::vector<int32_t> ids(T);
  for (int64_t t = 0; t < T; ++t) ids[t] = static_cast<int32_t>((t * 5) % V);
  ops.rmsnorm_fwd(view(y, {T, H}), view(rstd, {T}), view(x, {T, H}), view(w, {H}), 1e-6f, {});
  std::vector<std::vector<float>> dws, dtabs, dxs;
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    std::vector<float> dx(T * H), dw(H), dt(V * H);
    ops.rmsnorm_bwd(view(dx, {T, H}), false, view(dw, {H}), 0.0f, view(dy, {T, H}), view(x, {T, H}),
                    view(w, {H}), view(rstd, {T}), {});
    ops.embedding_bwd(view(dt, {V, H}), view(dy, {T, H}), view(ids, {T}), 0.0f, {}, {});
    dws.push_back(dw);
    dxs.push_back(dx);
    dtabs.push_back(dt);
  }
  omp_set_num_threads(saved);
  EXPECT_EQ(dws[0], dws[1]);
  EXPECT_EQ(dws[0], dws[2]);
  EXPECT_EQ(dxs[0], dxs[2]);
  EXPECT_EQ(dtabs[0], dtabs[1]);
  EXPECT_EQ(dtabs[0], dtabs[2]);
}

}  // namespace
}  // namespace zt
