// CudaOps::matmul on cuBLASLt: row-major C[M, N] = alpha·op(A)·op(B) + beta·C + bias[N], fp32
// accumulation (CUBLAS_COMPUTE_32F — no TF32, so fp32 operands give fp32-exact products).
//
// Row-major ↔ column-major: a row-major [r, c] matrix with row stride ld is the column-major
// [c, r] matrix with the same ld, so C = op(A)·op(B) is computed as the column-major
// Cᵀ[N, M] = op(B)ᵀ·op(A)ᵀ: cuBLAS's "A" is our B (with our tb), its "B" is our A (with our ta),
// m = N, n = M, k = K. The bias then runs along cuBLAS's rows, which is what
// CUBLASLT_EPILOGUE_BIAS broadcasts (D = alpha·A·B + beta·C + bias, one rounding to D's dtype).
//
// Natively run combinations: A, B both bf16 (tensor cores) with C bf16 or f32 — the latter is the
// weight-gradient case dYᵀ·X accumulated into an fp32 buffer — and A, B, C all f32. The others are
// made native through the workspace, exactly: a bf16 operand beside an f32 one is widened to an f32
// copy (so mixed operands run as an fp32 GEMM, like the CPU reference), and a bf16 C with f32
// operands, or a bf16 C accumulated into (beta != 0), is computed in an f32 copy of C and rounded
// once at the end (cuBLASLt's own bf16 beta epilogue is not within a bf16 ulp). The bias is used in
// C's dtype (a bf16 bias beside an f32 C is widened exactly; an f32 bias beside a bf16 C is rounded
// to bf16 first, the one place where this differs from the CPU's fl(product + bias)).
//
// Determinism: the algorithm is chosen once per MatmulKey (shape, leading dimensions, transposes,
// dtypes, epilogue, which pointers are 16-byte aligned and the workspace size) by
// cublasLtMatmulAlgoGetHeuristic with the reduction scheme restricted to
// CUBLASLT_REDUCTION_SCHEME_NONE (no split-K, so each element's dot product runs in one fixed
// order), and cached. The heuristic is told the alignment we guarantee (16 bytes, or the element
// size for a pointer that is not 16-byte aligned — a separate plan) instead of its default of 256,
// so the choice never depends on where a buffer happens to lie. The same call therefore gives the
// same bits every time; the cache is cleared when it exceeds kMaxPlans entries (the heuristic picks
// the same algorithms again).
//
// Workspace (matmul_workspace_bytes): kLtWorkspaceBytes (32 MiB) for cuBLASLt + 4·N bytes for a
// bias copy + the f32 copies above when needed + 256 bytes of alignment slack.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/op_checks.h"
#include "core/error.h"

namespace zt {

namespace {

// Plans kept before the cache is cleared (each holds a few host-side cuBLASLt descriptors).
constexpr size_t kMaxPlans = 4096;
// The bias address the heuristic sees: 16-byte aligned and no more, the alignment we guarantee
// (the heuristic reads the pointer's value to infer it; it never dereferences it).
const void* const kPlanBiasAddress = reinterpret_cast<const void*>(uintptr_t{0x10010});

cudaDataType_t lt_type(DType t) { return t == DType::kBF16 ? CUDA_R_16BF : CUDA_R_32F; }

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

size_t round256(size_t n) { return (n + 255) & ~size_t{255}; }

// Argument checks shared by the query and the op. Shape-only tensors (the workspace queries) may
// live anywhere; the op wants device tensors with data.
void check_matrix(const char* arg, const Tensor& t, bool require_data) {
  if (t.ndim != 2) fail("matmul: {} is {}, expected a 2-D tensor", arg, t.describe());
  if (t.dtype != DType::kF32 && t.dtype != DType::kBF16)
    fail("matmul: {} has dtype {}, expected f32 or bf16", arg, dtype_name(t.dtype));
  if (!require_data) return;
  if (t.device != Device::kCUDA) fail("matmul: {} {} is not in device memory", arg, t.describe());
  if (t.data == nullptr && t.numel() > 0) fail("matmul: {} {} has no data", arg, t.describe());
}

struct Dims {
  int64_t M, N, K;
};

Dims matmul_dims(const Tensor& C, const Tensor& A, Trans ta, const Tensor& B, Trans tb,
                 bool require_data) {
  check_matrix("C", C, require_data);
  check_matrix("A", A, require_data);
  check_matrix("B", B, require_data);
  const opcheck::GemmDims d = opcheck::check_matmul_dims(C, A, ta, B, tb);
  return {d.M, d.N, d.K};
}

// What matmul() converts through the workspace for these dtypes.
struct Conversions {
  bool widen_a, widen_b, c_copy;
};

// beta_nonzero: whether C is read. A bf16 C that is accumulated into (beta != 0) also goes through
// the f32 copy: cuBLASLt's bf16 epilogue with beta was measured (H200, cuBLASLt 13.1) to be several
// bf16 ulps off fl(beta·C + A·B); the copy gives the CPU's single rounding. Workspace queries
// default to beta_nonzero = true (the size covers both); a caller that never accumulates into a
// bf16 C (the model) asks with false and saves the [M, N] fp32 copy.
Conversions conversions(const Tensor& C, const Tensor& A, const Tensor& B, bool beta_nonzero) {
  const bool mixed = A.dtype != B.dtype;
  return {mixed && A.dtype == DType::kBF16, mixed && B.dtype == DType::kBF16,
          (mixed || A.dtype == DType::kF32 || beta_nonzero) && C.dtype == DType::kBF16};
}

}  // namespace

struct CudaOps::MatmulPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr,
                         c = nullptr;  // cuBLAS's A (our B), B (our A), C=D
  cublasLtMatmulAlgo_t algo{};
  MatmulPlan() = default;
  MatmulPlan(const MatmulPlan&) = delete;
  MatmulPlan& operator=(const MatmulPlan&) = delete;
  ~MatmulPlan() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

void CudaOps::init_matmul() {
  cublasLtHandle_t h = nullptr;
  cuda::check(cublasLtCreate(&h), "cublasLtCreate");
  lt_handle_ = h;
}

void CudaOps::destroy_matmul() {
  plans_.clear();
  if (lt_handle_) cublasLtDestroy(static_cast<cublasLtHandle_t>(lt_handle_));
  lt_handle_ = nullptr;
}

void CudaOps::gemm(const char* op, const GemmView& C, const GemmView& A, Trans ta,
                   const GemmView& B, Trans tb, const void* bias, float alpha, float beta,
                   void* lt_workspace, Stream s, size_t lt_workspace_bytes) {
  const int64_t M = C.rows, N = C.cols, K = ta == Trans::kN ? A.cols : A.rows;
  const int mask =
      (aligned16(A.data) ? 1 : 0) | (aligned16(B.data) ? 2 : 0) | (aligned16(C.data) ? 4 : 0);
  const MatmulKey key{M,
                      N,
                      K,
                      A.ld,
                      B.ld,
                      C.ld,
                      static_cast<int>(ta),
                      static_cast<int>(tb),
                      static_cast<int>(A.dtype),
                      static_cast<int>(C.dtype),
                      bias ? static_cast<int>(C.dtype) : -1,
                      mask,
                      lt_workspace_bytes};
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    if (plans_.size() >= kMaxPlans) plans_.clear();
    auto plan = std::make_shared<MatmulPlan>();
    const auto chk = [](cublasStatus_t st, const char* what) { cuda::check(st, what); };
    chk(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
        "cublasLtMatmulDescCreate");
    const cublasOperation_t op_a = tb == Trans::kT ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLAS A = B
    const cublasOperation_t op_b = ta == Trans::kT ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLAS B = A
    const auto set_desc = [&](cublasLtMatmulDescAttributes_t attr, const void* v, size_t n) {
      chk(cublasLtMatmulDescSetAttribute(plan->desc, attr, v, n), "cublasLtMatmulDescSetAttribute");
    };
    set_desc(CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a));
    set_desc(CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b));
    if (bias) {
      const uint32_t epi = CUBLASLT_EPILOGUE_BIAS;
      const int32_t bias_type = lt_type(C.dtype);
      set_desc(CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
      set_desc(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type));
      set_desc(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &kPlanBiasAddress, sizeof(kPlanBiasAddress));
    }
    // Stored row-major [rows, cols] = column-major [cols, rows] with the same ld.
    chk(cublasLtMatrixLayoutCreate(&plan->a, lt_type(B.dtype), B.cols, B.rows, B.ld),
        "cublasLtMatrixLayoutCreate");
    chk(cublasLtMatrixLayoutCreate(&plan->b, lt_type(A.dtype), A.cols, A.rows, A.ld),
        "cublasLtMatrixLayoutCreate");
    chk(cublasLtMatrixLayoutCreate(&plan->c, lt_type(C.dtype), C.cols, C.rows, C.ld),
        "cublasLtMatrixLayoutCreate");
    cublasLtMatmulPreference_t pref = nullptr;
    chk(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    cublasLtMatmulHeuristicResult_t res[8] = {};
    int found = 0;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    {
      const uint64_t ws = lt_workspace_bytes;
      const uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
      const uint32_t al_a = (mask & 2) ? 16 : static_cast<uint32_t>(dtype_size(B.dtype));
      const uint32_t al_b = (mask & 1) ? 16 : static_cast<uint32_t>(dtype_size(A.dtype));
      const uint32_t al_c = (mask & 4) ? 16 : static_cast<uint32_t>(dtype_size(C.dtype));
      const std::pair<cublasLtMatmulPreferenceAttributes_t, std::pair<const void*, size_t>>
          prefs[] = {{CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, {&ws, sizeof(ws)}},
                     {CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, {&scheme, sizeof(scheme)}},
                     {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, {&al_a, sizeof(al_a)}},
                     {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, {&al_b, sizeof(al_b)}},
                     {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, {&al_c, sizeof(al_c)}},
                     {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, {&al_c, sizeof(al_c)}}};
      for (const auto& [attr, v] : prefs) {
        st = cublasLtMatmulPreferenceSetAttribute(pref, attr, v.first, v.second);
        if (st != CUBLAS_STATUS_SUCCESS) break;
      }
      if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(lt_handle_), plan->desc,
                                            plan->a, plan->b, plan->c, plan->c, pref, 8, res,
                                            &found);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED)
      found = 0;  // reported below, naming the shapes
    else
      chk(st, "cublasLtMatmulAlgoGetHeuristic");
    const auto best = std::find_if(res, res + found, [&](const cublasLtMatmulHeuristicResult_t& r) {
      return r.state == CUBLAS_STATUS_SUCCESS && r.workspaceSize <= lt_workspace_bytes;
    });
    if (best == res + found)
      fail("{}: cuBLASLt has no algorithm for C [{}, {}] {} = A{} [{}, {}] {} · B{} [{}, {}] {}{}",
           op, M, N, dtype_name(C.dtype), ta == Trans::kT ? "ᵀ" : "", A.rows, A.cols,
           dtype_name(A.dtype), tb == Trans::kT ? "ᵀ" : "", B.rows, B.cols, dtype_name(B.dtype),
           bias ? " + bias" : "");
    plan->algo = best->algo;
    it = plans_.emplace(key, std::move(plan)).first;
  }
  MatmulPlan& p = *it->second;
  if (bias)
    cuda::check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                               sizeof(bias)),
                op);
  cuda::check(
      cublasLtMatmul(static_cast<cublasLtHandle_t>(lt_handle_), p.desc, &alpha, B.data, p.a, A.data,
                     p.b, &beta, C.data, p.c, const_cast<void*>(C.data), p.c, &p.algo, lt_workspace,
                     lt_workspace_bytes, static_cast<cudaStream_t>(s.handle)),
      op);
}

size_t CudaOps::matmul_workspace_bytes(const Tensor& C, const Tensor& A, Trans ta, const Tensor& B,
                                       Trans tb, bool beta_nonzero) const {
  const Dims d = matmul_dims(C, A, ta, B, tb, false);
  const Conversions cv = conversions(C, A, B, beta_nonzero);
  size_t n = 256 + kLtWorkspaceBytes + round256(static_cast<size_t>(d.N) * 4);
  if (cv.widen_a) n += round256(static_cast<size_t>(A.numel()) * 4);
  if (cv.widen_b) n += round256(static_cast<size_t>(B.numel()) * 4);
  if (cv.c_copy) n += round256(static_cast<size_t>(C.numel()) * 4);
  return n;
}

void CudaOps::matmul(const Tensor& C, const Tensor& A, Trans ta, const Tensor& B, Trans tb,
                     const Tensor& bias, float alpha, float beta, const Tensor& workspace,
                     Stream s) {
  const Dims d = matmul_dims(C, A, ta, B, tb, true);
  const bool has_bias = bias.data != nullptr;
  if (has_bias) {
    if (bias.ndim != 1 || bias.dim(0) != d.N)
      fail("matmul: bias is {}, expected shape [{}]", bias.describe(), d.N);
    if (bias.dtype != DType::kF32 && bias.dtype != DType::kBF16)
      fail("matmul: bias has dtype {}, expected f32 or bf16", dtype_name(bias.dtype));
    if (bias.device != Device::kCUDA) fail("matmul: bias is not in device memory");
  }
  const size_t need = matmul_workspace_bytes(C, A, ta, B, tb, beta != 0.0f);
  if (workspace.nbytes() < need || workspace.data == nullptr)
    fail("matmul: workspace has {} bytes, {} needed", workspace.nbytes(), need);
  if (workspace.device != Device::kCUDA) fail("matmul: workspace is not in device memory");
  if (d.M == 0 || d.N == 0) return;
  const cudaStream_t cs = static_cast<cudaStream_t>(s.handle);
  if (d.K == 0) {
    // Nothing to multiply: C = beta·C + bias. Only the cases the model can produce are handled.
    if (!has_bias && beta == 0.0f)
      cuda::check(cudaMemsetAsync(C.data, 0, C.nbytes(), cs), "matmul");
    else if (has_bias || beta != 1.0f)
      fail("matmul: K = 0 with beta {} or a bias is not supported on CUDA (C {})", beta,
           C.describe());
    return;
  }

  // Carve the workspace: cuBLASLt scratch, bias copy, widened operands, f32 C copy.
  char* ws = static_cast<char*>(workspace.data);
  ws += (256 - (reinterpret_cast<uintptr_t>(ws) & 255u)) & 255u;
  void* lt_ws = ws;
  ws += kLtWorkspaceBytes;
  char* bias_buf = ws;
  ws += round256(static_cast<size_t>(d.N) * 4);
  const Conversions cv = conversions(C, A, B, beta != 0.0f);
  const auto widen = [&](const Tensor& t) {
    const Tensor w(ws, DType::kF32, {t.dim(0), t.dim(1)}, Device::kCUDA);
    ws += round256(w.nbytes());
    cast(w, t, s);
    return w;
  };
  const Tensor a = cv.widen_a ? widen(A) : A;
  const Tensor b = cv.widen_b ? widen(B) : B;
  Tensor c = C;
  if (cv.c_copy) {
    c = Tensor(ws, DType::kF32, {d.M, d.N}, Device::kCUDA);
    if (beta != 0.0f) cast(c, C, s);
  }
  const void* bias_ptr = nullptr;
  if (has_bias) {
    if (bias.dtype != c.dtype) {
      cast(Tensor(bias_buf, c.dtype, {d.N}, Device::kCUDA), bias, s);
      bias_ptr = bias_buf;
    } else if (!aligned16(bias.data)) {
      cuda::check(cudaMemcpyAsync(bias_buf, bias.data, bias.nbytes(), cudaMemcpyDeviceToDevice, cs),
                  "matmul");
      bias_ptr = bias_buf;
    } else {
      bias_ptr = bias.data;
    }
  }
  const auto view = [](const Tensor& t) {
    return GemmView{t.data, t.dtype, t.dim(0), t.dim(1), t.dim(1)};
  };
  gemm("matmul", view(c), view(a), ta, view(b), tb, bias_ptr, alpha, beta, lt_ws, s);
  if (cv.c_copy) cast(C, c, s);
}

}  // namespace zt
