#include "core/tensor.h"

#include <fmt/format.h>

#include <cstdint>

#include "core/error.h"

namespace zt {

Tensor::Tensor(void* d, DType t, std::initializer_list<int64_t> s, Device dev)
    : data(d), dtype(t), device(dev) {
  if (s.size() > kMaxDims)
    fail("Tensor: {} dimensions requested, at most {} supported", s.size(), kMaxDims);
  for (int64_t v : s) shape[ndim++] = v;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  return n;
}

std::string Tensor::describe() const {
  return shape_to_string(dims()) + " " + std::string(dtype_name(dtype));
}

std::string shape_to_string(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t shape_numel(std::span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) fail("shape {} has a negative dimension", shape_to_string(shape));
    if (d != 0 && n > INT64_MAX / d)
      fail("shape {} has more than 2^63 elements", shape_to_string(shape));
    n *= d;
  }
  return n;
}

}  // namespace zt
