// CpuOps reductions (backend/cuda/cuda_reduce.cu): bias_grad's column sums and sumsq. See
// cpu_ops.h.
#include <algorithm>

#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_ops.h"
#include "core/tensor.h"

namespace zt {

using namespace cpu;

void CpuOps::bias_grad(const Tensor& db, const Tensor& dy, float beta, Stream) {
  const opcheck::MatrixDims d = opcheck::check_bias_grad(db, dy, Device::kCPU);
  const int64_t M = d.rows, N = d.cols;
  float* out = db.as<float>();
  constexpr int64_t kCols = 64;
  const int64_t nblk = (N + kCols - 1) / kCols;
  dispatch_float(dy.dtype, "bias_grad", "dy", [&](auto tag) {
    using T_ = decltype(tag);
    const T_* g = dy.as<T_>();
#pragma omp parallel for schedule(static) if (M * N >= kParallelWork)
    for (int64_t b = 0; b < nblk; ++b) {
      const int64_t j0 = b * kCols, n = std::min(N, j0 + kCols) - j0;
      float acc[kCols] = {};
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < n; ++j) acc[j] += ld(g + i * N + j0, j);
      for (int64_t j = 0; j < n; ++j)
        out[j0 + j] = (beta == 0.0f ? 0.0f : beta * out[j0 + j]) + acc[j];
    }
  });
}

size_t CpuOps::sumsq_workspace_bytes(const Tensor& x) const {
  const int64_t nblk = (x.numel() + kSumsqBlock - 1) / kSumsqBlock;
  return WorkspaceCarver::bytes(nblk, sizeof(double));
}

void CpuOps::sumsq(double* out, const Tensor& x, const Tensor& workspace, Stream) {
  const int64_t n = x.numel();
  const int64_t nblk = (n + kSumsqBlock - 1) / kSumsqBlock;
  check_workspace("sumsq", workspace, sumsq_workspace_bytes(x));
  double* part = static_cast<double*>(workspace.data);
  dispatch_float(x.dtype, "sumsq", "x", [&](auto tag) {
    using T_ = decltype(tag);
    const T_* p = x.as<T_>();
#pragma omp parallel for schedule(static) if (n >= kParallelWork)
    for (int64_t b = 0; b < nblk; ++b) {
      const int64_t i0 = b * kSumsqBlock;
      part[b] = sumsq_block(p, i0, std::min(n, i0 + kSumsqBlock));
    }
  });
  double total = 0.0;
  for (int64_t b = 0; b < nblk; ++b) total += part[b];
  *out = total;
}

}  // namespace zt
