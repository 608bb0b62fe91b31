// Tensor: a non-owning view (pointer, dtype, shape, device). Memory belongs to an Arena or a mapped
// file; a Tensor never allocates or frees. Row-major, contiguous.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "core/dtype.h"

namespace zt {

enum class Device : uint8_t { kCPU, kCUDA };

struct Tensor {
  static constexpr int kMaxDims = 4;

  void* data = nullptr;
  DType dtype = DType::kF32;
  Device device = Device::kCPU;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};

  Tensor() = default;
  // A view of `data` with the given shape (at most 4 dims). Throws zt::Error for more dims.
  Tensor(void* data, DType dtype, std::initializer_list<int64_t> shape,
         Device device = Device::kCPU);

  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  int64_t dim(int i) const { return shape[i < 0 ? ndim + i : i]; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
  // The used dimensions, shape[0..ndim).
  std::span<const int64_t> dims() const { return {shape.data(), static_cast<size_t>(ndim)}; }
  // "[2, 3] bf16" — for error messages.
  std::string describe() const;
};

// "[2, 3]" ("[]" for a scalar) — shapes in error messages.
std::string shape_to_string(std::span<const int64_t> shape);

// Product of the dimensions (1 for a scalar). Throws zt::Error on a negative dimension or overflow
// of int64.
int64_t shape_numel(std::span<const int64_t> shape);

}  // namespace zt
