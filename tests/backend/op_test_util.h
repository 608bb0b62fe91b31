// Helpers for the CPU op tests: seeded random data, tensor views of std::vectors, bf16 rounding,
// relative-error measures and central finite differences in double precision.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace zt::test {

inline std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

inline std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

inline Tensor view(std::vector<float>& v, std::initializer_list<int64_t> shape) {
  return Tensor(v.data(), DType::kF32, shape);
}
inline Tensor view(std::vector<int32_t>& v, std::initializer_list<int64_t> shape) {
  return Tensor(v.data(), DType::kI32, shape);
}
inline Tensor view(std::vector<uint16_t>& v, std::initializer_list<int64_t> shape) {
  return Tensor(v.data(), DType::kBF16, shape);
}

inline std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i] = f32_to_bf16(v[i]);
  return o;
}
inline std::vector<float> from_bf16(const std::vector<uint16_t>& v) {
  std::vector<float> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i] = bf16_to_f32(v[i]);
  return o;
}
// Values rounded to bf16 (so bf16 storage of them is exact).
inline std::vector<float> bf16_round(std::vector<float> v) {
  for (auto& x : v) x = bf16_to_f32(f32_to_bf16(x));
  return v;
}

// max_i |a_i - b_i| / max(max_i |b_i|, floor): error relative to the reference's scale.
template <class A, class B>
double rel_err(const A& a, const B& b, double floor = 1e-30) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0, s = floor;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    m = std::max(m, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    s = std::max(s, std::abs(static_cast<double>(b[i])));
  }
  return m / s;
}

// Gradient of f at x by central differences (step h·max(1, |x_i|)), in double.
inline std::vector<double> finite_diff(const std::function<double(const std::vector<double>&)>& f,
                                       std::vector<double> x, double h = 1e-6) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i], s = h * std::max(1.0, std::abs(x0));
    x[i] = x0 + s;
    const double fp = f(x);
    x[i] = x0 - s;
    const double fm = f(x);
    x[i] = x0;
    g[i] = (fp - fm) / (2 * s);
  }
  return g;
}

// A byte workspace of n bytes (at least 1), 64-byte aligned.
struct Workspace {
  std::vector<uint64_t> buf;
  explicit Workspace(size_t n) : buf((std::max<size_t>(n, 1) + 7) / 8 + 8) {}
  Tensor tensor() { return Tensor(buf.data(), DType::kU8, {static_cast<int64_t>(buf.size() * 8)}); }
};

}  // namespace zt::test
