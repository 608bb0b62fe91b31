// Helpers shared by the CPU ops: storage-type tags (fp32 / bf16), element load/store, dtype
// dispatch, argument checks and fixed-order fp32/fp64 reductions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "backend/op_checks.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"

namespace zt::cpu {

// Loops with less work than this (elements, weighted roughly by cost) run on the calling thread:
// waking the OpenMP team costs more than it saves, and a lot more on a loaded machine.
constexpr int64_t kParallelWork = int64_t{1} << 15;

// bf16 storage element (raw bits). Arithmetic always happens on the fp32 value.
struct bf16_t {
  uint16_t bits;
};

inline float ld(const float* p, int64_t i) { return p[i]; }
inline float ld(const bf16_t* p, int64_t i) { return bf16_to_f32(p[i].bits); }
inline void st(float* p, int64_t i, float v) { p[i] = v; }
inline void st(bf16_t* p, int64_t i, float v) { p[i].bits = f32_to_bf16(v); }

// v rounded to the precision of storage type T (identity for fp32, RNE to bf16 and back).
template <class T>
inline float round_to(float v) {
  if constexpr (sizeof(T) == 2) {
    return bf16_to_f32(f32_to_bf16(v));
  } else {
    return v;
  }
}

// Calls f(T{}) with T = float for kF32 or bf16_t for kBF16; zt::Error naming `op` and `arg`
// for any other dtype.
template <class F>
void dispatch_float(DType t, std::string_view op, std::string_view arg, F&& f) {
  switch (t) {
    case DType::kF32:
      f(float{});
      return;
    case DType::kBF16:
      f(bf16_t{});
      return;
    default:
      fail("{}: {} has dtype {}, expected f32 or bf16", op, arg, dtype_name(t));
  }
}

// Argument checks (backend/op_checks.h); check_shape requires host memory here.
using opcheck::check_dtype;
using opcheck::check_float;
using opcheck::check_same_dtype;
using opcheck::check_workspace;
// opcheck::check_shape with device = host: "<op>: <arg> is not in host memory" otherwise.
inline void check_shape(std::string_view op, std::string_view arg, const Tensor& t,
                        std::initializer_list<int64_t> dims, bool require_data = true) {
  opcheck::check_shape(op, arg, t, dims, Device::kCPU, require_data);
}

// Row-major C[M, N] = alpha·op(A)·op(B) + beta·C with leading dimensions lda/ldb/ldc, through
// single-threaded OpenBLAS cblas_sgemm calls. For enough work the output is cut into fixed pieces
// of 128 rows (M ≥ N) or columns — the same pieces for any thread count — shared out among the
// OpenMP threads (outside a parallel region). OpenBLAS sees the same sub-problems whatever the
// thread count, so the result does not depend on it.
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// Σ a[i]*b[i] for i < n in fp32 with 16 interleaved partial sums added pairwise at the end: a
// fixed order (vectorisable without changing results), independent of alignment.
inline float dot16(const float* a, const float* b, int64_t n) {
  float acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int k = 0; k < 16; ++k) acc[k] += a[i + k] * b[i + k];
  for (int k = 0; i < n; ++i, ++k) acc[k] += a[i] * b[i];
  for (int w = 8; w >= 1; w /= 2)
    for (int k = 0; k < w; ++k) acc[k] += acc[k + w];
  return acc[0];
}

// One block of Ops::sumsq: Σ x_i² over [i0, i1) in fp64, in 8 lanes (element i in lane
// (i − i0) % 8) combined as ((l0 + l4) + (l1 + l5)) + ((l2 + l6) + (l3 + l7)) — the CUDA kernel's
// order (cuda_reduce.cu). The partials of consecutive blocks are then added in block order.
template <class T>
double sumsq_block(const T* p, int64_t i0, int64_t i1) {
  double acc[8] = {};
  int64_t i = i0;
  for (; i + 8 <= i1; i += 8)
    for (int k = 0; k < 8; ++k) {
      const double v = ld(p, i + k);
      acc[k] += v * v;
    }
  for (int k = 0; i < i1; ++i, ++k) {
    const double v = ld(p, i);
    acc[k] += v * v;
  }
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

// Carves consecutive 64-byte aligned regions out of a workspace tensor.
class WorkspaceCarver {
 public:
  explicit WorkspaceCarver(const Tensor& ws) : base_(static_cast<char*>(ws.data)) {}
  // Bytes needed by a region of `n` elements of `elem` bytes (rounded up to 64).
  static size_t bytes(int64_t n, size_t elem) {
    return (static_cast<size_t>(n) * elem + 63) & ~size_t{63};
  }
  template <class T>
  T* take(int64_t n) {
    T* p = reinterpret_cast<T*>(base_ + used_);
    used_ += bytes(n, sizeof(T));
    return p;
  }
  size_t used() const { return used_; }

 private:
  char* base_;
  size_t used_ = 0;
};

}  // namespace zt::cpu
