// CpuOps::matmul: C = alpha·op(A)·op(B) + beta·C + bias through OpenBLAS cblas_sgemm. bf16
// operands are widened to fp32 copies in the workspace first (exact), a bf16 C is computed in an
// fp32 workspace copy and rounded once at the end.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/op_checks.h"

namespace zt {
namespace cpu {

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  const auto call = [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    if (m1 <= m0 || n1 <= n0) return;
    // Rows m0.. of op(A): A + m0*lda (kN) or column m0 of the stored [K, M] (kT); columns n0.. of
    // op(B): B + n0 (kN, stored [K, N]) or row n0 of the stored [N, K] (kT).
    const float* a = A + (ta ? m0 : m0 * lda);
    const float* b = B + (tb ? n0 * ldb : n0);
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                static_cast<blasint>(m1 - m0), static_cast<blasint>(n1 - n0),
                static_cast<blasint>(K), alpha, a, static_cast<blasint>(lda), b,
                static_cast<blasint>(ldb), beta, C + m0 * ldc + n0, static_cast<blasint>(ldc));
  };
  // Above the threshold the output is always cut into the same pieces — kGemmPiece rows (M >= N)
  // or columns — whatever the thread count, and the pieces are shared out among the threads. So
  // OpenBLAS sees the same sub-problems for 1, 2 or 16 threads: its kernel choice depends on the
  // sub-problem's size (measured: OpenBLAS 0.3.21 on Zen gives other bits for a 160-row piece of
  // a 300-row product than for the whole), so a thread-count-dependent cut would change bits.
  if (M * N * std::max<int64_t>(K, 1) < 64 * kParallelWork) {
    call(0, M, 0, N);
    return;
  }
  constexpr int64_t kGemmPiece = 128;
  const bool rows = M >= N;
  const int64_t len = rows ? M : N;
  const int64_t pieces = (len + kGemmPiece - 1) / kGemmPiece;
  const int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
  for (int64_t p = 0; p < pieces; ++p) {
    const int64_t i0 = p * kGemmPiece, i1 = std::min(len, i0 + kGemmPiece);
    if (rows)
      call(i0, i1, 0, N);
    else
      call(0, M, i0, i1);
  }
}

}  // namespace cpu

using namespace cpu;

namespace {

struct Dims {
  int64_t M, N, K;
};

Dims matmul_dims(const Tensor& C, const Tensor& A, Trans ta, const Tensor& B, Trans tb,
                 bool require_data) {
  check_shape("matmul", "C", C, {-1, -1}, require_data);
  check_shape("matmul", "A", A, {-1, -1}, require_data);
  check_shape("matmul", "B", B, {-1, -1}, require_data);
  const opcheck::GemmDims d = opcheck::check_matmul_dims(C, A, ta, B, tb);
  return {d.M, d.N, d.K};
}

// fp32 view of t: t itself when fp32, else a widened copy carved from the workspace.
const float* as_f32(const Tensor& t, WorkspaceCarver& ws) {
  if (t.dtype == DType::kF32) return t.as<float>();
  float* dst = ws.take<float>(t.numel());
  const bf16_t* src = t.as<bf16_t>();
  const int64_t n = t.numel();
#pragma omp parallel for schedule(static) if (n >= kParallelWork)
  for (int64_t i = 0; i < n; ++i) dst[i] = ld(src, i);
  return dst;
}

}  // namespace

// beta_nonzero is unused: a bf16 C is always computed in an fp32 copy here.
size_t CpuOps::matmul_workspace_bytes(const Tensor& C, const Tensor& A, Trans ta, const Tensor& B,
                                      Trans tb, bool /*beta_nonzero*/) const {
  matmul_dims(C, A, ta, B, tb, false);
  size_t n = 0;
  if (A.dtype != DType::kF32) n += WorkspaceCarver::bytes(A.numel(), 4);
  if (B.dtype != DType::kF32) n += WorkspaceCarver::bytes(B.numel(), 4);
  if (C.dtype != DType::kF32) n += WorkspaceCarver::bytes(C.numel(), 4);
  return n;
}

void CpuOps::matmul(const Tensor& C, const Tensor& A, Trans ta, const Tensor& B, Trans tb,
                    const Tensor& bias, float alpha, float beta, const Tensor& workspace, Stream) {
  const Dims d = matmul_dims(C, A, ta, B, tb, true);
  check_float("matmul", "A", A);
  check_float("matmul", "B", B);
  check_float("matmul", "C", C);
  const bool has_bias = bias.data != nullptr;
  if (has_bias) {
    check_shape("matmul", "bias", bias, {d.N});
    check_float("matmul", "bias", bias);
  }
  check_workspace("matmul", workspace, matmul_workspace_bytes(C, A, ta, B, tb));
  if (d.M == 0 || d.N == 0) return;
  WorkspaceCarver ws(workspace);
  const float* a = as_f32(A, ws);
  const float* b = as_f32(B, ws);
  float* c = C.dtype == DType::kF32 ? C.as<float>() : ws.take<float>(C.numel());
  const int64_t MN = d.M * d.N;
  if (C.dtype != DType::kF32 && beta != 0.0f) {
    const bf16_t* cs = C.as<bf16_t>();
#pragma omp parallel for schedule(static) if (MN >= kParallelWork)
    for (int64_t i = 0; i < MN; ++i) c[i] = ld(cs, i);
  }
  float gemm_beta = beta;
  if (has_bias) {
    // C := beta*C + bias, then the product is added with beta 1 (torch addmm's rounding order:
    // fl(product + bias) when beta is 0).
    dispatch_float(bias.dtype, "matmul", "bias", [&](auto tag) {
      using T_ = decltype(tag);
      const T_* pb = bias.as<T_>();
#pragma omp parallel for schedule(static) if (d.M * d.N >= kParallelWork)
      for (int64_t i = 0; i < d.M; ++i)
        for (int64_t j = 0; j < d.N; ++j)
          c[i * d.N + j] = (beta == 0.0f ? 0.0f : beta * c[i * d.N + j]) + ld(pb, j);
    });
    gemm_beta = 1.0f;
  }
  if (d.K == 0) {
    if (!has_bias && gemm_beta == 0.0f)
      std::memset(c, 0, static_cast<size_t>(MN) * 4);
    else if (!has_bias && gemm_beta != 1.0f)
      for (int64_t i = 0; i < MN; ++i) c[i] *= gemm_beta;
  } else {
    gemm(ta == Trans::kT, tb == Trans::kT, d.M, d.N, d.K, alpha, a, A.dim(1), b, B.dim(1),
         gemm_beta, c, d.N);
  }
  if (C.dtype != DType::kF32) {
    bf16_t* cd = C.as<bf16_t>();
#pragma omp parallel for schedule(static) if (MN >= kParallelWork)
    for (int64_t i = 0; i < MN; ++i) st(cd, i, c[i]);
  }
}

}  // namespace zt
