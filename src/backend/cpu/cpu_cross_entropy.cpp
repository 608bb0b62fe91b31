// CpuOps::linear_cross_entropy_fwd_bwd: the LM head fused with the token cross-entropy (HF
// `ForCausalLMLoss` on `logits.float()`, reduction "sum"). Rows that have a target are gathered
// into chunks of C rows (ce_chunk_rows, fewer when they do not fit in ce_budget_bytes); for each
// chunk the logits [rows, V] are one sgemm (rounded to bf16 when hidden and weight are both bf16:
// the logits HF's bf16 `lm_head` returns and the CUDA backend stores, cuda_cross_entropy.cpp),
// the softmax / loss / argmax (fp32, from those logits) a parallel loop over rows,
// and (with gradients) the logits block is turned into grad_scale·(softmax - onehot) in place,
// giving dHidden = G·W and dW += Gᵀ·hidden by two more sgemms. The [T, V] logits never exist. Each
// target row's entropy H(softmax(logits_t)) = lse − Σ_j p_j·logit_j = log Σ_j e_j − (Σ_j e_j·d_j) /
// Σ_j e_j, with d_j = logit_j − max and e_j = exp(d_j), summed in fp64 in vocabulary order; the
// per-row values are added in row order (TRL's `entropy_from_logits`, taken over target tokens
// only).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_ops.h"

namespace zt {

using namespace cpu;

namespace {

// Rows per chunk: each row takes a logits row [V] and a hidden row and its gradient [H] (fp32),
// its loss, entropy (fp64) and hit (i32).
int64_t chunk_rows(const CpuOpsOptions& o, int64_t T, int64_t H, int64_t V) {
  const size_t row = 4 * static_cast<size_t>(V + 2 * H) + 8 + 8 + 4;
  return ce_rows_for_budget(T, o.ce_chunk_rows, o.ce_budget_bytes, row);
}

}  // namespace

size_t CpuOps::linear_cross_entropy_workspace_bytes(const Tensor& hidden,
                                                    const Tensor& weight) const {
  const int64_t T = hidden.dim(0), H = hidden.dim(1), V = weight.dim(0);
  const int64_t C = chunk_rows(opt_, T, H, V);
  size_t n = WorkspaceCarver::bytes(T, 4)            // target row indices
             + 2 * WorkspaceCarver::bytes(C * H, 4)  // gathered hidden rows, their gradient
             + WorkspaceCarver::bytes(C * V, 4)      // logits / gradient block
             + 2 * WorkspaceCarver::bytes(C, 8)      // per-row losses, entropies
             + WorkspaceCarver::bytes(C, 4);         // per-row argmax hits
  if (weight.dtype != DType::kF32) n += WorkspaceCarver::bytes(V * H, 4);
  return n;
}

void CpuOps::linear_cross_entropy_fwd_bwd(CeStats* stats, const Tensor& dhidden,
                                          const Tensor& dweight, float beta_dw,
                                          const Tensor& hidden, const Tensor& weight,
                                          const Tensor& targets, float grad_scale,
                                          const Tensor& workspace, Stream) {
  static constexpr char kOp[] = "linear_cross_entropy";
  check_shape(kOp, "hidden", hidden, {-1, -1});
  const int64_t T = hidden.dim(0), H = hidden.dim(1);
  check_shape(kOp, "weight", weight, {-1, H});
  const int64_t V = weight.dim(0);
  check_shape(kOp, "targets", targets, {T});
  check_dtype(kOp, "targets", targets, DType::kI32);
  check_float(kOp, "hidden", hidden);
  check_float(kOp, "weight", weight);
  const bool grad = dhidden.data != nullptr;
  if (grad) {
    check_shape(kOp, "dhidden", dhidden, {T, H});
    check_float(kOp, "dhidden", dhidden);
    check_shape(kOp, "dweight", dweight, {V, H});
    check_dtype(kOp, "dweight", dweight, DType::kF32);
  }
  check_workspace(kOp, workspace, linear_cross_entropy_workspace_bytes(hidden, weight));
  const int32_t* tg = targets.as<int32_t>();
  WorkspaceCarver ws(workspace);
  const int64_t C = chunk_rows(opt_, T, H, V);
  int32_t* rows = ws.take<int32_t>(T);
  float* hc = ws.take<float>(C * H);
  float* dhc = ws.take<float>(C * H);
  float* G = ws.take<float>(C * V);
  double* loss = ws.take<double>(C);
  double* ent = ws.take<double>(C);
  int32_t* hit = ws.take<int32_t>(C);
  int64_t n = 0;
  for (int64_t t = 0; t < T; ++t) {
    if (tg[t] == -100) continue;
    if (tg[t] < 0 || tg[t] >= V)
      fail("{}: target {} at position {} is outside [0, {}) and not -100", kOp, tg[t], t, V);
    rows[n++] = static_cast<int32_t>(t);
  }
  const float* W = weight.as<float>();
  if (weight.dtype != DType::kF32) {
    float* w32 = ws.take<float>(V * H);
    const bf16_t* src = weight.as<bf16_t>();
#pragma omp parallel for schedule(static) if (V * H >= kParallelWork)
    for (int64_t i = 0; i < V * H; ++i) w32[i] = ld(src, i);
    W = w32;
  }
  if (grad) {
    zero(dhidden, {});
    if (n == 0 && beta_dw != 1.0f) {
      float* dw = dweight.as<float>();
      if (beta_dw == 0.0f)
        zero(dweight, {});
      else
        for (int64_t i = 0; i < V * H; ++i) dw[i] *= beta_dw;
    }
  }
  const bool bf16_logits = hidden.dtype == DType::kBF16 && weight.dtype == DType::kBF16;
  CeStats acc;
  for (int64_t c0 = 0; c0 < n; c0 += C) {
    const int64_t nc = std::min(C, n - c0);
    dispatch_float(hidden.dtype, kOp, "hidden", [&](auto tag) {
      using T_ = decltype(tag);
      const T_* ph = hidden.as<T_>();
#pragma omp parallel for schedule(static) if (nc * H >= kParallelWork)
      for (int64_t r = 0; r < nc; ++r)
        for (int64_t j = 0; j < H; ++j) hc[r * H + j] = ld(ph + rows[c0 + r] * H, j);
    });
    gemm(false, true, nc, V, H, 1.0f, hc, H, W, H, 0.0f, G, V);
#pragma omp parallel for schedule(static) if (nc * V >= kParallelWork)
    for (int64_t r = 0; r < nc; ++r) {
      float* row = G + r * V;
      const int32_t y = tg[rows[c0 + r]];
      if (bf16_logits)
        for (int64_t j = 0; j < V; ++j) row[j] = round_to<bf16_t>(row[j]);
      float m = -std::numeric_limits<float>::infinity();
      int64_t am = 0;
      for (int64_t j = 0; j < V; ++j)
        if (row[j] > m) {
          m = row[j];
          am = j;
        }
      const float ly = row[y];
      double sum = 0.0, wsum = 0.0;  // Σ e_j, Σ e_j·(logit_j − m)
      for (int64_t j = 0; j < V; ++j) {
        const float d = row[j] - m;
        row[j] = std::exp(d);
        sum += row[j];
        wsum += static_cast<double>(row[j]) * static_cast<double>(d);
      }
      loss[r] = static_cast<double>(m) + std::log(sum) - static_cast<double>(ly);
      ent[r] = std::log(sum) - wsum / sum;
      hit[r] = am == y ? 1 : 0;
      if (grad) {
        const float scale = static_cast<float>(1.0 / sum) * grad_scale;
        for (int64_t j = 0; j < V; ++j) row[j] *= scale;
        row[y] -= grad_scale;
      }
    }
    for (int64_t r = 0; r < nc; ++r) {
      acc.loss_sum += loss[r];
      acc.correct += hit[r];
      acc.entropy_sum += ent[r];
    }
    acc.count += nc;
    if (!grad) continue;
    gemm(false, false, nc, H, V, 1.0f, G, V, W, H, 0.0f, dhc, H);
    dispatch_float(dhidden.dtype, kOp, "dhidden", [&](auto tag) {
      using T_ = decltype(tag);
      T_* pd = dhidden.as<T_>();
#pragma omp parallel for schedule(static) if (nc * H >= kParallelWork)
      for (int64_t r = 0; r < nc; ++r)
        for (int64_t j = 0; j < H; ++j) st(pd + rows[c0 + r] * H, j, dhc[r * H + j]);
    });
    gemm(true, false, V, H, nc, 1.0f, G, V, hc, H, c0 == 0 ? beta_dw : 1.0f, dweight.as<float>(),
         H);
  }
  *stats = acc;
}

}  // namespace zt
