// CpuOps RMSNorm forward and backward (backend/cuda/cuda_rmsnorm.cu), in the three styles of
// core/layer_kinds.h. See cpu_ops.h. One OpenMP iteration per row (forward, dx) or per block of 64
// columns (dw, rows added in order t = 0..T-1); per-row sums use 16 fixed lanes, so results do
// not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_ops.h"
#include "core/tensor.h"

namespace zt {

using namespace cpu;

namespace {

template <RmsNormStyle S>
using StyleTag = std::integral_constant<RmsNormStyle, S>;

// Calls f(StyleTag<style>{}), so the style is a compile-time constant inside the row loops.
template <class F>
void dispatch_style(RmsNormStyle style, F&& f) {
  switch (style) {
    case RmsNormStyle::kLlama:
      f(StyleTag<RmsNormStyle::kLlama>{});
      return;
    case RmsNormStyle::kOlmo2:
      f(StyleTag<RmsNormStyle::kOlmo2>{});
      return;
    case RmsNormStyle::kGemma:
      f(StyleTag<RmsNormStyle::kGemma>{});
      return;
  }
  fail("rmsnorm: unknown norm style {}", static_cast<int>(style));
}

// The weight as the style applies it: w, or 1 + w for kGemma (fp32).
template <RmsNormStyle S>
inline float eff_weight(float w) {
  if constexpr (S == RmsNormStyle::kGemma) {
    return 1.0f + w;
  } else {
    return w;
  }
}

// The normalised value n = x·rstd as it meets the weight: rounded to the storage type T first
// for kLlama (HF's `.to(input_dtype)` before `weight *`), kept in fp32 otherwise.
template <RmsNormStyle S, class T>
inline float norm_value(float n) {
  if constexpr (S == RmsNormStyle::kLlama) {
    return round_to<T>(n);
  } else {
    return n;
  }
}

}  // namespace

void CpuOps::rmsnorm_fwd(const Tensor& y, const Tensor& rstd, const Tensor& x, const Tensor& w,
                         float eps, Stream, RmsNormStyle style) {
  const opcheck::MatrixDims d = opcheck::check_rmsnorm_fwd(y, rstd, x, w, Device::kCPU);
  const int64_t T = d.rows, H = d.cols;
  float* rs = rstd.as<float>();
  dispatch_style(style, [&](auto stag) {
    constexpr RmsNormStyle S = decltype(stag)::value;
    dispatch_float(x.dtype, "rmsnorm_fwd", "x", [&](auto tag) {
      using T_ = decltype(tag);
      const T_* px = x.as<T_>();
      const T_* pw = w.as<T_>();
      T_* py = y.as<T_>();
#pragma omp parallel for schedule(static) if (T * H >= kParallelWork)
      for (int64_t t = 0; t < T; ++t) {
        const T_* xr = px + t * H;
        float acc[16] = {};
        int64_t j = 0;
        for (; j + 16 <= H; j += 16)
          for (int k = 0; k < 16; ++k) {
            const float v = ld(xr, j + k);
            acc[k] += v * v;
          }
        for (int k = 0; j < H; ++j, ++k) {
          const float v = ld(xr, j);
          acc[k] += v * v;
        }
        for (int wd = 8; wd >= 1; wd /= 2)
          for (int k = 0; k < wd; ++k) acc[k] += acc[k + wd];
        const float r = 1.0f / std::sqrt(acc[0] / static_cast<float>(H) + eps);
        rs[t] = r;
        T_* yr = py + t * H;
        // kLlama: w·to_dtype(n), then stored (rounded) again; kOlmo2: to_dtype(w·n);
        // kGemma: to_dtype((1 + w)·n). The products are fp32.
        for (int64_t c = 0; c < H; ++c)
          st(yr, c, eff_weight<S>(ld(pw, c)) * norm_value<S, T_>(ld(xr, c) * r));
      }
    });
  });
}

void CpuOps::rmsnorm_bwd(const Tensor& dx, bool accumulate_dx, const Tensor& dw, float beta_dw,
                         const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd,
                         Stream, RmsNormStyle style) {
  const opcheck::MatrixDims d = opcheck::check_rmsnorm_bwd(dx, dw, dy, x, w, rstd, Device::kCPU);
  const int64_t T = d.rows, H = d.cols;
  const float* rs = rstd.as<float>();
  float* pdw = dw.as<float>();
  dispatch_style(style, [&](auto stag) {
    constexpr RmsNormStyle S = decltype(stag)::value;
    dispatch_float(x.dtype, "rmsnorm_bwd", "x", [&](auto tag) {
      using T_ = decltype(tag);
      const T_* px = x.as<T_>();
      const T_* pw = w.as<T_>();
      const T_* pdy = dy.as<T_>();
      T_* pdx = dx.as<T_>();
      // dw first (dx may alias dy): column blocks, rows added in order. dw = Σ dy·n in every
      // style (d(1 + w)/dw = 1), n rounded to the storage type for kLlama only.
      constexpr int64_t kCols = 64;
      const int64_t nblk = (H + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if (T * H >= kParallelWork)
      for (int64_t b = 0; b < nblk; ++b) {
        const int64_t j0 = b * kCols, n = std::min(H, j0 + kCols) - j0;
        float acc[kCols] = {};
        for (int64_t t = 0; t < T; ++t) {
          const T_* xr = px + t * H + j0;
          const T_* gr = pdy + t * H + j0;
          const float r = rs[t];
          for (int64_t j = 0; j < n; ++j) acc[j] += ld(gr, j) * norm_value<S, T_>(ld(xr, j) * r);
        }
        for (int64_t j = 0; j < n; ++j)
          pdw[j0 + j] = (beta_dw == 0.0f ? 0.0f : beta_dw * pdw[j0 + j]) + acc[j];
      }
      // dx = rstd·(g - n̂·mean(g·n̂)), g = dy·w' (w' = w, or 1 + w for kGemma), n̂ = x·rstd.
#pragma omp parallel for schedule(static) if (T * H >= kParallelWork)
      for (int64_t t = 0; t < T; ++t) {
        const T_* xr = px + t * H;
        const T_* gr = pdy + t * H;
        T_* dxr = pdx + t * H;
        const float r = rs[t];
        float acc[16] = {};
        int64_t j = 0;
        for (; j + 16 <= H; j += 16)
          for (int k = 0; k < 16; ++k)
            acc[k] += (ld(gr, j + k) * eff_weight<S>(ld(pw, j + k))) * (ld(xr, j + k) * r);
        for (int k = 0; j < H; ++j, ++k)
          acc[k] += (ld(gr, j) * eff_weight<S>(ld(pw, j))) * (ld(xr, j) * r);
        for (int wd = 8; wd >= 1; wd /= 2)
          for (int k = 0; k < wd; ++k) acc[k] += acc[k + wd];
        const float mean = acc[0] / static_cast<float>(H);
        for (int64_t c = 0; c < H; ++c) {
          const float g = ld(gr, c) * eff_weight<S>(ld(pw, c));
          const float v = r * (g - (ld(xr, c) * r) * mean);
          st(dxr, c, accumulate_dx ? ld(dxr, c) + v : v);
        }
      }
    });
  });
}

}  // namespace zt
