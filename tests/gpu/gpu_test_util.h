// Helpers for the GPU tests: host tensors of either float dtype built from fp32 values, device
// copies (optionally misaligned, outputs poisoned with NaN bytes so unwritten elements show), one
// shared CudaOps, and comparisons against the CPU reference (bitwise, relative, bf16 ulps).
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cuda/cuda_ops.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"

namespace zt::gputest {

// The process's CudaOps (created on first use, never destroyed: no CUDA calls during static
// destruction) and a non-default stream for the ops under test.
inline CudaOps& cuda_ops() {
  static CudaOps* ops = new CudaOps;
  return *ops;
}
inline Stream test_stream() {
  static cudaStream_t s = [] {
    cudaStream_t st = nullptr;
    if (cudaStreamCreate(&st) != cudaSuccess) ADD_FAILURE() << "cudaStreamCreate failed";
    return st;
  }();
  return Stream{s};
}

inline Tensor make_view(void* data, DType dt, const std::vector<int64_t>& shape, Device dev) {
  Tensor t;
  t.data = data;
  t.dtype = dt;
  t.device = dev;
  t.ndim = static_cast<int>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t.shape[i] = shape[i];
  return t;
}

// A host tensor (f32, bf16 or i32) with its own storage.
struct HostT {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<uint64_t> buf;  // 8-byte aligned storage

  HostT() = default;
  // fp32 values stored as `dt` (bf16: rounded to nearest even).
  HostT(DType dt, std::vector<int64_t> shp, const std::vector<float>& vals)
      : dtype(dt), shape(std::move(shp)) {
    alloc();
    EXPECT_EQ(static_cast<int64_t>(vals.size()), numel());
    for (int64_t i = 0; i < numel(); ++i) set(i, vals[static_cast<size_t>(i)]);
  }
  // i32 values.
  HostT(std::vector<int64_t> shp, const std::vector<int32_t>& ids)
      : dtype(DType::kI32), shape(std::move(shp)) {
    alloc();
    std::memcpy(data(), ids.data(), bytes());
  }
  static HostT empty(DType dt, std::vector<int64_t> shp) {
    HostT h;
    h.dtype = dt;
    h.shape = std::move(shp);
    h.alloc();
    return h;
  }
  void alloc() { buf.assign((bytes() + 7) / 8 + 1, 0); }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  void* data() { return buf.data(); }
  const void* data() const { return buf.data(); }
  Tensor view() { return make_view(data(), dtype, shape, Device::kCPU); }
  float get(int64_t i) const {
    if (dtype == DType::kBF16) return bf16_to_f32(static_cast<const uint16_t*>(data())[i]);
    return static_cast<const float*>(data())[i];
  }
  void set(int64_t i, float v) {
    if (dtype == DType::kBF16)
      static_cast<uint16_t*>(data())[i] = f32_to_bf16(v);
    else
      static_cast<float*>(data())[i] = v;
  }
};

// A device tensor, `misalign` elements past a 256-byte aligned allocation (so vector paths can be
// switched off). Freed on destruction.
struct DevT {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  void* base = nullptr;
  void* ptr = nullptr;

  // Uninitialised output: every byte 0xFF (NaN in f32 and bf16).
  DevT(DType dt, std::vector<int64_t> shp, int64_t misalign = 0)
      : dtype(dt), shape(std::move(shp)) {
    alloc(misalign);
    EXPECT_EQ(cudaMemset(ptr, 0xFF, bytes()), cudaSuccess);
  }
  // A copy of h.
  explicit DevT(const HostT& h, int64_t misalign = 0) : dtype(h.dtype), shape(h.shape) {
    alloc(misalign);
    EXPECT_EQ(cudaMemcpy(ptr, h.data(), bytes(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  DevT(const DevT&) = delete;
  DevT& operator=(const DevT&) = delete;
  ~DevT() { cudaFree(base); }
  void alloc(int64_t misalign) {
    const size_t off = static_cast<size_t>(misalign) * dtype_size(dtype);
    EXPECT_EQ(cudaMalloc(&base, bytes() + off + 16), cudaSuccess);
    ptr = static_cast<char*>(base) + off;
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  Tensor view() const { return make_view(ptr, dtype, shape, Device::kCUDA); }
  // Waits for the test stream (which throws a recorded kernel error) and copies back.
  HostT download() const {
    cuda_ops().synchronize(test_stream());
    HostT h = HostT::empty(dtype, shape);
    EXPECT_EQ(cudaMemcpy(h.data(), ptr, bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
};

// Skips the test when no GPU is visible.
#define ZT_REQUIRE_GPU()                                                  \
  do {                                                                    \
    if (::zt::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

// Every byte equal (f32: the same bits; NaN poison left in the GPU output fails).
inline void expect_bitwise(const HostT& gpu, const HostT& cpu, const std::string& what) {
  ASSERT_EQ(gpu.bytes(), cpu.bytes()) << what;
  ASSERT_EQ(gpu.dtype, cpu.dtype) << what;
  const size_t es = dtype_size(gpu.dtype);
  for (int64_t i = 0; i < gpu.numel(); ++i) {
    if (std::memcmp(static_cast<const char*>(gpu.data()) + i * es,
                    static_cast<const char*>(cpu.data()) + i * es, es) != 0) {
      ADD_FAILURE() << what << ": element " << i << " of " << gpu.numel() << " differs: gpu "
                    << gpu.get(i) << " cpu " << cpu.get(i);
      return;
    }
  }
}

// |gpu_i - cpu_i| <= rel * max_j |cpu_j| for every i (NaN fails). Returns the worst ratio.
inline double expect_close(const HostT& gpu, const HostT& cpu, double rel,
                           const std::string& what) {
  EXPECT_EQ(gpu.numel(), cpu.numel()) << what;
  double scale = 1e-30, worst = 0;
  for (int64_t i = 0; i < cpu.numel(); ++i) scale = std::max(scale, std::fabs(double(cpu.get(i))));
  for (int64_t i = 0; i < cpu.numel(); ++i) {
    const double d = std::fabs(double(gpu.get(i)) - double(cpu.get(i))) / scale;
    if (!(d <= rel)) {
      ADD_FAILURE() << what << ": element " << i << ": gpu " << gpu.get(i) << " cpu " << cpu.get(i)
                    << " (error " << d << " of max |cpu| " << scale << ", allowed " << rel << ")";
      return d;
    }
    worst = std::max(worst, d);
  }
  return worst;
}

// One bf16 ulp at |x| (2^(e-7) for x in [2^e, 2^(e+1))).
inline double bf16_ulp(double x) {
  if (x == 0) return std::ldexp(1.0, -133);
  int e = 0;
  std::frexp(std::fabs(x), &e);  // |x| in [2^(e-1), 2^e)
  return std::ldexp(1.0, e - 1 - 7);
}

// |gpu_i - cpu_i| <= ulps * bf16_ulp(cpu_i) + abs_rel * max_j |cpu_j| (NaN fails).
inline void expect_bf16_close(const HostT& gpu, const HostT& cpu, double ulps, double abs_rel,
                              const std::string& what) {
  EXPECT_EQ(gpu.numel(), cpu.numel()) << what;
  double scale = 0;
  for (int64_t i = 0; i < cpu.numel(); ++i) scale = std::max(scale, std::fabs(double(cpu.get(i))));
  for (int64_t i = 0; i < cpu.numel(); ++i) {
    const double c = cpu.get(i), g = gpu.get(i);
    if (!(std::fabs(g - c) <= ulps * bf16_ulp(c) + abs_rel * scale)) {
      ADD_FAILURE() << what << ": element " << i << ": gpu " << g << " cpu " << c << " (allowed "
                    << ulps << " bf16 ulps + " << abs_rel << " of " << scale << ")";
      return;
    }
  }
}

// Runs f, which must throw zt::Error; returns the message ("" and a test failure when none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no zt::Error thrown";
  return "";
}

inline const char* dtype_str(DType t) { return t == DType::kBF16 ? "bf16" : "f32"; }

}  // namespace zt::gputest
