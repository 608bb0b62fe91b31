#include "core/tensor.h"

#include <fmt/format.h>

#include "core/error.h"

namespace zt {

Tensor::Tensor(void* d, DType t, std::initializer_list<int64_t> s, Device dev)
    : data(d), dtype(t), device(dev) {
  if (s.size() > kMaxDims) fail("Tensor: {} dimensions requested, at most {} supported", s.size(), kMaxDims);
  for (int64_t v : s) shape[ndim++] = v;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  return n;
}

std::string Tensor::describe() const {
  std::string s = "[";
  for (int i = 0; i < ndim; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "] " + std::string(dtype_name(dtype));
}

}  // namespace zt
