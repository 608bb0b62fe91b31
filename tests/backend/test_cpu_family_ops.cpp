// The op variants of the model families on the CPU (core/layer_kinds.h, backend/ops.h) against
// naive double-precision references written here and finite differences: RMSNorm styles kOlmo2 and
// kGemma (and where each rounds to bf16), the embedding scale, the gelu_tanh GLU activation, and
// partial rotary RoPE. Windowed attention: test_cpu_window_attention.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numbers>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"
#include "op_test_util.h"

namespace zt {
namespace {

using test::finite_diff;
using test::randn;
using test::rel_err;
using test::view;

double bf16_round_d(double v) { return bf16_to_f32(f32_to_bf16(static_cast<float>(v))); }

// Distance in bf16 steps between two bf16 values (0: same bits or ±0).
int bf16_ulps(uint16_t a, uint16_t b) {
  const auto ordered = [](uint16_t u) {
    return (u & 0x8000) ? 0x8000 - (u & 0x7fff) : 0x8000 + static_cast<int>(u);
  };
  return std::abs(ordered(a) - ordered(b));
}

// Checks bf16 output `got` against the double reference `ref` rounded once to bf16: every element
// within one bf16 step, and at least 99 % of them identical (the op's fp32 arithmetic may land on
// the other side of a rounding boundary only rarely). Elements within abs_tol of the reference
// pass both counts (for values whose fp32 evaluation cancels, as gelu's 1 + tanh for g ≲ -5).
void expect_bf16_rounded_once(const std::vector<uint16_t>& got, const std::vector<double>& ref,
                              const char* what, double abs_tol = 0.0) {
  ASSERT_EQ(got.size(), ref.size());
  size_t same = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const uint16_t want = f32_to_bf16(static_cast<float>(ref[i]));
    if (std::abs(bf16_to_f32(got[i]) - ref[i]) <= abs_tol) {
      ++same;
      continue;
    }
    ASSERT_LE(bf16_ulps(got[i], want), 1)
        << what << " element " << i << ": " << bf16_to_f32(got[i]) << " vs " << ref[i];
    same += got[i] == want;
  }
  EXPECT_GE(same * 100, got.size() * 99) << what << ": " << same << " of " << got.size();
}

// ---- RMSNorm styles

// y[t, j] = w'[j]·x[t, j]·rstd[t] in double, w' = w (kLlama, kOlmo2) or 1 + w (kGemma); no
// rounding. rstd optional.
std::vector<double> rmsnorm_ref(RmsNormStyle style, const std::vector<double>& x,
                                const std::vector<double>& w, int64_t T, int64_t H, double eps,
                                std::vector<double>* rstd = nullptr) {
  std::vector<double> y(T * H);
  if (rstd) rstd->resize(T);
  for (int64_t t = 0; t < T; ++t) {
    double ss = 0;
    for (int64_t j = 0; j < H; ++j) ss += x[t * H + j] * x[t * H + j];
    const double r = 1.0 / std::sqrt(ss / H + eps);
    if (rstd) (*rstd)[t] = r;
    for (int64_t j = 0; j < H; ++j)
      y[t * H + j] = (style == RmsNormStyle::kGemma ? 1.0 + w[j] : w[j]) * (x[t * H + j] * r);
  }
  return y;
}

const char* style_name(RmsNormStyle s) {
  return s == RmsNormStyle::kLlama ? "llama" : s == RmsNormStyle::kOlmo2 ? "olmo2" : "gemma";
}

TEST(CpuFamilyOps, RmsNormStylesFp32MatchNaiveAndFiniteDifferences) {
  CpuOps ops;
  const int64_t T = 5, H = 37;  // 37: two full 16-lane passes and a tail
  const float eps = 1e-5f;
  std::vector<float> x = randn(T * H, 200), w = randn(H, 201, 0.3f), r = randn(T * H, 202);
  const auto xd = test::to_double(x), wd = test::to_double(w);
  std::vector<float> y_llama(T * H);
  for (RmsNormStyle style : {RmsNormStyle::kOlmo2, RmsNormStyle::kGemma, RmsNormStyle::kLlama}) {
    SCOPED_TRACE(style_name(style));
    std::vector<float> y(T * H), rstd(T);
    ops.rmsnorm_fwd(view(y, {T, H}), view(rstd, {T}), view(x, {T, H}), view(w, {H}), eps, {},
                    style);
    std::vector<double> rref;
    EXPECT_LT(rel_err(y, rmsnorm_ref(style, xd, wd, T, H, eps, &rref)), 1e-6);
    EXPECT_LT(rel_err(rstd, rref), 1e-6);
    if (style == RmsNormStyle::kLlama) y_llama = y;

    std::vector<float> dx(T * H), dw(H);
    ops.rmsnorm_bwd(view(dx, {T, H}), false, view(dw, {H}), 0.0f, view(r, {T, H}), view(x, {T, H}),
                    view(w, {H}), view(rstd, {T}), {}, style);
    const auto loss = [&](const std::vector<double>& xx, const std::vector<double>& ww) {
      const auto yy = rmsnorm_ref(style, xx, ww, T, H, eps);
      double s = 0;
      for (int64_t i = 0; i < T * H; ++i) s += r[i] * yy[i];
      return s;
    };
    EXPECT_LT(rel_err(dx, finite_diff([&](const auto& xx) { return loss(xx, wd); }, xd)), 1e-5);
    EXPECT_LT(rel_err(dw, finite_diff([&](const auto& ww) { return loss(xd, ww); }, wd)), 1e-5);

    // Accumulation: dx += the same gradient, dw = 1·dw + the same sum; dx over dy in place.
    std::vector<float> dx2 = dx, dw2 = dw, dy_alias = r;
    ops.rmsnorm_bwd(view(dx2, {T, H}), true, view(dw2, {H}), 1.0f, view(r, {T, H}), view(x, {T, H}),
                    view(w, {H}), view(rstd, {T}), {}, style);
    ops.rmsnorm_bwd(view(dy_alias, {T, H}), false, view(dw, {H}), 0.0f, view(dy_alias, {T, H}),
                    view(x, {T, H}), view(w, {H}), view(rstd, {T}), {}, style);
    for (int64_t i = 0; i < T * H; ++i) {
      ASSERT_EQ(dx2[i], dx[i] + dx[i]);
      ASSERT_EQ(dy_alias[i], dx[i]);
    }
    for (int64_t j = 0; j < H; ++j) ASSERT_EQ(dw2[j], dw[j] + dw[j]);
  }
  // In fp32 the Llama and OLMo 2 styles are the same arithmetic, bit for bit.
  std::vector<float> y_olmo(T * H), rstd(T);
  ops.rmsnorm_fwd(view(y_olmo, {T, H}), view(rstd, {T}), view(x, {T, H}), view(w, {H}), eps, {},
                  RmsNormStyle::kOlmo2);
  EXPECT_EQ(y_olmo, y_llama);
}

TEST(CpuFamilyOps, RmsNormStylesBf16RoundOnceAfterTheWeight) {
  CpuOps ops;
  const int64_t T = 6, H = 70;
  const float eps = 1e-6f;
  std::vector<float> xf = test::bf16_round(randn(T * H, 210)),
                     wf = test::bf16_round(randn(H, 211, 0.5f)),
                     rf = test::bf16_round(randn(T * H, 212));
  auto x = test::to_bf16(xf), w = test::to_bf16(wf), r = test::to_bf16(rf);
  const auto xd = test::to_double(xf), wd = test::to_double(wf), rd = test::to_double(rf);
  std::vector<uint16_t> y_llama(T * H);
  for (RmsNormStyle style : {RmsNormStyle::kLlama, RmsNormStyle::kOlmo2, RmsNormStyle::kGemma}) {
    SCOPED_TRACE(style_name(style));
    std::vector<uint16_t> y(T * H);
    std::vector<float> rstd(T);
    ops.rmsnorm_fwd(view(y, {T, H}), view(rstd, {T}), view(x, {T, H}), view(w, {H}), eps, {},
                    style);
    std::vector<double> rref;
    std::vector<double> yref = rmsnorm_ref(style, xd, wd, T, H, eps, &rref);
    EXPECT_LT(rel_err(rstd, rref), 1e-6);
    if (style == RmsNormStyle::kLlama) {
      // HF LlamaRMSNorm: w · (x·rstd).to(bf16), then the bf16 product rounded again.
      for (int64_t i = 0; i < T * H; ++i) yref[i] = wd[i % H] * bf16_round_d(xd[i] * rref[i / H]);
      y_llama = y;
    }
    expect_bf16_rounded_once(y, yref, "y");

    // Backward: dw = Σ dy·n with n rounded to bf16 for kLlama only; dx treats the casts as
    // identity. dw is fp32, so the rounding point of n shows.
    std::vector<uint16_t> dx(T * H);
    std::vector<float> dw(H);
    ops.rmsnorm_bwd(view(dx, {T, H}), false, view(dw, {H}), 0.0f, view(r, {T, H}), view(x, {T, H}),
                    view(w, {H}), view(rstd, {T}), {}, style);
    std::vector<double> dwref(H, 0.0), dxref(T * H);
    for (int64_t t = 0; t < T; ++t) {
      const double rs = rref[t];
      double m = 0;
      for (int64_t j = 0; j < H; ++j) {
        const double n = xd[t * H + j] * rs;
        dwref[j] += rd[t * H + j] * (style == RmsNormStyle::kLlama ? bf16_round_d(n) : n);
        m += rd[t * H + j] * (style == RmsNormStyle::kGemma ? 1 + wd[j] : wd[j]) * n;
      }
      m /= H;
      for (int64_t j = 0; j < H; ++j) {
        const double g = rd[t * H + j] * (style == RmsNormStyle::kGemma ? 1 + wd[j] : wd[j]);
        dxref[t * H + j] = rs * (g - xd[t * H + j] * rs * m);
      }
    }
    EXPECT_LT(rel_err(dw, dwref), 1e-5);
    expect_bf16_rounded_once(dx, dxref, "dx");
  }
  // In bf16 the OLMo 2 style differs from the Llama style (one rounding instead of two).
  std::vector<uint16_t> y_olmo(T * H);
  std::vector<float> rstd(T);
  ops.rmsnorm_fwd(view(y_olmo, {T, H}), view(rstd, {T}), view(x, {T, H}), view(w, {H}), eps, {},
                  RmsNormStyle::kOlmo2);
  EXPECT_NE(y_olmo, y_llama);
}

TEST(CpuFamilyOps, GemmaNormOffsetsTheWeightByOne) {
  // w = 0 is the identity scale for kGemma: y = to_dtype(x·rstd); for kLlama it is 0.
  CpuOps ops;
  const int64_t T = 2, H = 8;
  std::vector<float> x = randn(T * H, 220), w(H, 0.0f), y(T * H), rstd(T);
  ops.rmsnorm_fwd(view(y, {T, H}), view(rstd, {T}), view(x, {T, H}), view(w, {H}), 1e-6f, {},
                  RmsNormStyle::kGemma);
  for (int64_t i = 0; i < T * H; ++i) ASSERT_EQ(y[i], x[i] * rstd[i / H]);
}

// ---- embedding scale

TEST(CpuFamilyOps, EmbeddingScaleForwardBackward) {
  CpuOps ops;
  const int64_t V = 5, H = 70, T = 7;  // 70 columns: two column blocks in the backward
  // Gemma's scale: √H rounded to the table's dtype by the caller (bf16: 8.375).
  const float scale = bf16_to_f32(f32_to_bf16(std::sqrt(static_cast<float>(H))));
  std::vector<int32_t> ids = {3, 0, 3, 4, 1, 3, 2};
  std::vector<float> tablef = test::bf16_round(randn(V * H, 230));
  auto table = test::to_bf16(tablef);
  // Forward, fp32 and bf16: table·scale rounded once (a bf16·bf16 product is exact in fp32 and in
  // double, so the reference is exact).
  std::vector<float> outf(T * H);
  std::vector<uint16_t> outb(T * H);
  ops.embedding_fwd(view(outf, {T, H}), view(tablef, {V, H}), view(ids, {T}), {}, scale);
  ops.embedding_fwd(view(outb, {T, H}), view(table, {V, H}), view(ids, {T}), {}, scale);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < H; ++j) {
      const double want = static_cast<double>(tablef[ids[t] * H + j]) * scale;
      ASSERT_EQ(outf[t * H + j], static_cast<float>(want)) << t << "," << j;
      ASSERT_EQ(outb[t * H + j], f32_to_bf16(static_cast<float>(want))) << t << "," << j;
    }
  // A scale that is not a bf16 value: the fp32 product rounded to bf16 once.
  const float odd = 1.1f;
  ops.embedding_fwd(view(outb, {T, H}), view(table, {V, H}), view(ids, {T}), {}, odd);
  std::vector<double> ref(T * H);
  for (int64_t i = 0; i < T * H; ++i)
    ref[i] = static_cast<double>(tablef[ids[i / H] * H + i % H]) * odd;
  expect_bf16_rounded_once(outb, ref, "out, scale 1.1");

  // Backward: dtable = beta·dtable + Σ_t scale·dout[t] at ids[t]; fp32 and bf16 dout.
  std::vector<float> doutf = test::bf16_round(randn(T * H, 231));
  auto doutb = test::to_bf16(doutf);
  const std::vector<float> d0 = randn(V * H, 232);
  std::vector<double> dref(V * H);
  for (int64_t i = 0; i < V * H; ++i) dref[i] = 0.5 * d0[i];
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < H; ++j)
      dref[ids[t] * H + j] += static_cast<double>(scale) * doutf[t * H + j];
  for (bool bf16 : {false, true}) {
    std::vector<float> dt = d0;
    ops.embedding_bwd(view(dt, {V, H}), bf16 ? view(doutb, {T, H}) : view(doutf, {T, H}),
                      view(ids, {T}), 0.5f, Tensor(), {}, scale);
    EXPECT_LT(rel_err(dt, dref), 1e-6) << (bf16 ? "bf16" : "f32");
  }
}

// ---- gelu_tanh GLU activation

double gelu_tanh(double g) {
  return 0.5 * g * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (g + 0.044715 * g * g * g)));
}

TEST(CpuFamilyOps, GeluTanhMatchesTorchValues) {
  // torch.nn.functional.gelu(x, approximate="tanh") and its autograd derivative, float64
  // (torch 2.x), at these points.
  const std::vector<float> g = {-3.0f, -1.25f, -0.5f, 0.0f, 0.75f, 2.0f, 4.5f};
  const double want_y[] = {-0.0036373920817729943, -0.13228579703028542, -0.15428599017485606, 0.0,
                           0.5799605551656203,     1.954597694087775,    4.499994863262588};
  const double want_dy[] = {-0.011584166630969648, -0.12249263224964865, 0.13263009646535764, 0.5,
                            0.9989382561374143,    1.0860992566236183,   1.0000293222704426};
  CpuOps ops;
  const int64_t n = static_cast<int64_t>(g.size());
  std::vector<float> ones(n, 1.0f), y(n), dg(n), du(n);
  std::vector<float> gg = g;
  ops.swiglu_fwd(view(y, {n}), view(gg, {n}), view(ones, {n}), {}, GluActivation::kGeluTanh);
  ops.swiglu_bwd(view(dg, {n}), view(du, {n}), view(ones, {n}), view(gg, {n}), view(ones, {n}), {},
                 GluActivation::kGeluTanh);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_NEAR(y[i], want_y[i], 1e-6) << g[i];
    EXPECT_EQ(du[i], y[i]) << g[i];  // dup = dout·act(gate)
    EXPECT_NEAR(dg[i], want_dy[i], 1e-6) << g[i];
  }
}

TEST(CpuFamilyOps, GeluTanhGluForwardBackwardMatchFiniteDifferences) {
  CpuOps ops;
  const int64_t n = 60;
  std::vector<float> g = randn(n, 240, 3.0f), u = randn(n, 241), r = randn(n, 242), out(n);
  ops.swiglu_fwd(view(out, {n}), view(g, {n}), view(u, {n}), {}, GluActivation::kGeluTanh);
  std::vector<double> ref(n);
  for (int64_t i = 0; i < n; ++i) ref[i] = gelu_tanh(g[i]) * u[i];
  EXPECT_LT(rel_err(out, ref), 1e-6);

  std::vector<float> dg(n), du(n);
  ops.swiglu_bwd(view(dg, {n}), view(du, {n}), view(r, {n}), view(g, {n}), view(u, {n}), {},
                 GluActivation::kGeluTanh);
  const auto gd = test::to_double(g), ud = test::to_double(u);
  const auto loss = [&](const std::vector<double>& gg, const std::vector<double>& uu) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += r[i] * gelu_tanh(gg[i]) * uu[i];
    return s;
  };
  EXPECT_LT(rel_err(dg, finite_diff([&](const auto& gg) { return loss(gg, ud); }, gd)), 1e-6);
  EXPECT_LT(rel_err(du, finite_diff([&](const auto& uu) { return loss(gd, uu); }, ud)), 1e-6);
  // In place (dgate over gate, dup over up) gives the same bits.
  std::vector<float> g2 = g, u2 = u;
  ops.swiglu_bwd(view(g2, {n}), view(u2, {n}), view(r, {n}), view(g2, {n}), view(u2, {n}), {},
                 GluActivation::kGeluTanh);
  EXPECT_EQ(g2, dg);
  EXPECT_EQ(u2, du);
}

TEST(CpuFamilyOps, GeluTanhGluBf16RoundsTheProductOnce) {
  CpuOps ops;
  const int64_t n = 400;
  std::vector<float> gf = test::bf16_round(randn(n, 250, 2.0f)),
                     uf = test::bf16_round(randn(n, 251)), rf = test::bf16_round(randn(n, 252));
  auto g = test::to_bf16(gf), u = test::to_bf16(uf), r = test::to_bf16(rf);
  std::vector<uint16_t> out(n), dg(n), du(n);
  ops.swiglu_fwd(view(out, {n}), view(g, {n}), view(u, {n}), {}, GluActivation::kGeluTanh);
  ops.swiglu_bwd(view(dg, {n}), view(du, {n}), view(r, {n}), view(g, {n}), view(u, {n}), {},
                 GluActivation::kGeluTanh);
  std::vector<double> oref(n), dgref(n), duref(n);
  for (int64_t i = 0; i < n; ++i) {
    const double x = gf[i],
                 t = std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x));
    const double d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * std::sqrt(2 / std::numbers::pi) *
                                         (1 + 3 * 0.044715 * x * x);
    oref[i] = gelu_tanh(x) * uf[i];
    duref[i] = static_cast<double>(rf[i]) * gelu_tanh(x);
    dgref[i] = static_cast<double>(rf[i]) * uf[i] * d;
  }
  // In fp32, 1 + tanh(…) and the two terms of gelu' cancel for g ≲ -5 (as in torch's fp32
  // kernel), where the exact values are below 3e-7 and 3e-6: an absolute tolerance of 1e-5 there,
  // for outputs of order 1.
  expect_bf16_rounded_once(out, oref, "out", 1e-5);
  expect_bf16_rounded_once(du, duref, "dup", 1e-5);
  expect_bf16_rounded_once(dg, dgref, "dgate", 1e-5);
}

// ---- partial rotary RoPE

TEST(CpuFamilyOps, PartialRotaryRotatesOnlyTheFirstRElements) {
  CpuOps ops;
  const int64_t T = 5, NH = 3, D = 16;
  std::vector<int32_t> pos = {0, 1, 2, 9, 300};
  for (int64_t R : {D / 2, 3 * D / 4}) {
    SCOPED_TRACE("R = " + std::to_string(R));
    const int64_t half = R / 2;
    std::vector<float> inv(half);
    for (int64_t i = 0; i < half; ++i) inv[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / R));
    std::vector<float> c(T * half), s(T * half);
    ops.rope_tables(view(c, {T, half}), view(s, {T, half}), view(pos, {T}), view(inv, {half}), 1.0f,
                    {});
    // Naive rotation of x [T, NH, D] by ±angle in double: the first R elements, rotate_half form.
    const auto rotate = [&](const std::vector<float>& x, double sign) {
      std::vector<double> y(x.begin(), x.end());
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < NH; ++h)
          for (int64_t i = 0; i < half; ++i) {
            const int64_t o = (t * NH + h) * D;
            const double ci = c[t * half + i], si = sign * s[t * half + i];
            y[o + i] = x[o + i] * ci - static_cast<double>(x[o + i + half]) * si;
            y[o + i + half] = x[o + i + half] * ci + static_cast<double>(x[o + i]) * si;
          }
      return y;
    };
    const auto pass_through_same = [&](const auto& a, const auto& b) {
      for (int64_t th = 0; th < T * NH; ++th)
        for (int64_t e = R; e < D; ++e)
          ASSERT_EQ(std::memcmp(&a[th * D + e], &b[th * D + e], sizeof(a[0])), 0)
              << "head row " << th << " element " << e;
    };
    // fp32: forward and backward against the naive rotation; [R, D) bitwise unchanged.
    const std::vector<float> x0 = randn(T * NH * D, 260);
    for (float sign : {1.0f, -1.0f}) {
      std::vector<float> x = x0;
      if (sign > 0)
        ops.rope_fwd(view(x, {T, NH, D}), view(c, {T, half}), view(s, {T, half}), {});
      else
        ops.rope_bwd(view(x, {T, NH, D}), view(c, {T, half}), view(s, {T, half}), {});
      EXPECT_LT(rel_err(x, rotate(x0, sign)), 1e-6) << "sign " << sign;
      pass_through_same(x, x0);
    }
    // bf16: the rotated part rounded once, the rest bitwise unchanged.
    const std::vector<float> xf = test::bf16_round(x0);
    auto xb = test::to_bf16(xf);
    const auto xb0 = xb;
    ops.rope_fwd(view(xb, {T, NH, D}), view(c, {T, half}), view(s, {T, half}), {});
    expect_bf16_rounded_once(xb, rotate(xf, 1.0), "bf16 rope_fwd");
    pass_through_same(xb, xb0);
    // The backward is the adjoint of the forward: <R x, y> = <x, Rᵀ y>.
    std::vector<float> x = x0, y = randn(T * NH * D, 261), ry = y;
    ops.rope_fwd(view(x, {T, NH, D}), view(c, {T, half}), view(s, {T, half}), {});
    ops.rope_bwd(view(ry, {T, NH, D}), view(c, {T, half}), view(s, {T, half}), {});
    double lhs = 0, rhs = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      lhs += static_cast<double>(x[i]) * y[i];
      rhs += static_cast<double>(x0[i]) * ry[i];
    }
    EXPECT_NEAR(lhs, rhs, 1e-5 * std::abs(lhs) + 1e-6);
  }
}

TEST(CpuFamilyOps, RopeRejectsARotaryPartWiderThanTheHead) {
  CpuOps ops;
  const int64_t T = 2, NH = 1, D = 8;
  std::vector<float> x(T * NH * D), c(T * 5), s(T * 5);
  try {
    ops.rope_fwd(view(x, {T, NH, D}), view(c, {T, 5}), view(s, {T, 5}), {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "rope_fwd: cos/sin have 5 columns; the rotated part 2·5 must be in [2, head dim "
                 "8]");
  }
}

}  // namespace
}  // namespace zt
