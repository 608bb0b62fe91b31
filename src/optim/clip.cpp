// Gradient-norm helpers: deterministic fp64 sum of squares, rank-order combination, clip
// coefficient.
#include "optim/clip.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace zt::optim {

namespace {

constexpr size_t kBlock = 4096;
constexpr size_t kLanes = 8;
constexpr size_t kParallelMinBlocks = 64;

// Sum of squares of one block (n <= kBlock) over kLanes interleaved lanes, lanes added in order.
double block_sumsq(const float* x, size_t n) {
  double lane[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) {
      const double d = static_cast<double>(x[i + j]);
      lane[j] += d * d;
    }
  }
  for (size_t j = 0; i < n; ++i, ++j) {
    const double d = static_cast<double>(x[i]);
    lane[j] += d * d;
  }
  double s = lane[0];
  for (size_t j = 1; j < kLanes; ++j) s += lane[j];
  return s;
}

}  // namespace

double sumsq_f64(const float* x, size_t n) {
  const size_t blocks = (n + kBlock - 1) / kBlock;
  if (blocks < kParallelMinBlocks) {
    double s = 0.0;
    for (size_t b = 0; b < blocks; ++b)
      s += block_sumsq(x + b * kBlock, std::min(kBlock, n - b * kBlock));
    return s;
  }
  std::vector<double> partial(blocks);
  const auto nb = static_cast<int64_t>(blocks);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < nb; ++b) {
    const size_t lo = static_cast<size_t>(b) * kBlock;
    partial[static_cast<size_t>(b)] = block_sumsq(x + lo, std::min(kBlock, n - lo));
  }
  double s = 0.0;
  for (double p : partial) s += p;
  return s;
}

double global_norm_from_partials(std::span<const double> partials) {
  if (partials.empty()) fail("global gradient norm: no per-rank partial sums given");
  double s = partials[0];
  for (size_t r = 1; r < partials.size(); ++r) s += partials[r];
  return std::sqrt(s);
}

float clip_coefficient(double total_norm, double max_norm) {
  if (!(max_norm > 0.0)) return 1.0f;
  const float denom = static_cast<float>(total_norm) + 1e-6f;
  const float coef = (1.0f / denom) * static_cast<float>(max_norm);
  return std::isnan(coef) ? coef : std::min(coef, 1.0f);
}

}  // namespace zt::optim
