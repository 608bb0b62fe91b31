// CpuOps attention: causal, GQA, varlen (cu_seqlens) attention as HF's eager attention computes it
// (scores = scale·q·kᵀ, masked, fp32 softmax, ·v), optionally with a sliding window W (query i of
// a sequence sees keys j with i - W < j <= i). The forward runs one OpenMP task per (sequence,
// query head); within it, blocks of attn_block_rows query rows [r0, r1): the block's scores
// [rows, keys lo..r1-1] are one single-threaded cblas_sgemm, then the softmax, then the output
// sgemm. lo = 0 without a window, else max(0, r0 - W + 1), the first key any row of the block
// sees: keys before it are masked for the whole block and are never read, so a windowed long row
// costs O(L·(W + block)) rather than O(L²). Keys in [lo, r1) that a row does not see get
// probability 0. The backward runs one task per (sequence, KV head), which owns those dK/dV rows
// and adds the contributions of its query heads and blocks in order, recomputing the
// probabilities from the saved log-sum-exp over the same key ranges. Each task is sequential, so
// results do not depend on the thread count.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/op_checks.h"

namespace zt {

using namespace cpu;

namespace {

struct AttnShape {
  int64_t T, Hq, Hkv, D;
};

AttnShape attn_shape(const char* op, const Tensor& q, const Tensor& k, const Varlen& seqs) {
  check_shape(op, "q", q, {-1, -1, -1});
  const int64_t T = q.dim(0), Hq = q.dim(1), D = q.dim(2);
  check_shape(op, "k", k, {T, -1, D});
  const int64_t Hkv = k.dim(1);
  if (Hkv < 1 || Hq % Hkv != 0)
    fail("{}: {} query heads are not a multiple of {} KV heads", op, Hq, Hkv);
  opcheck::check_varlen(op, T, seqs.cu_host, seqs.max_seqlen);
  return {T, Hq, Hkv, D};
}

// The key range of query block [r0, r1) of a sequence (positions within the sequence): keys
// [lo, r1) hold every key a row of the block sees under window W (0 = none).
int64_t block_first_key(int64_t r0, int64_t window) {
  return window > 0 ? std::max<int64_t>(0, r0 - window + 1) : 0;
}
// The first key query row i (within its sequence) sees.
int64_t row_first_key(int64_t i, int64_t window) {
  return window > 0 ? std::max<int64_t>(0, i - window + 1) : 0;
}

void check_window(const char* op, int64_t window) {
  if (window < 0)
    fail("{}: window is {}, expected 0 (none) or a positive number of keys", op, window);
}

// Widens t into `dst` (fp32) unless it already is fp32; returns the fp32 pointer.
float* widen(const Tensor& t, WorkspaceCarver& ws) {
  if (t.dtype == DType::kF32) return t.as<float>();
  float* dst = ws.take<float>(t.numel());
  const bf16_t* src = t.as<bf16_t>();
  const int64_t n = t.numel();
#pragma omp parallel for schedule(static) if (n >= kParallelWork)
  for (int64_t i = 0; i < n; ++i) dst[i] = ld(src, i);
  return dst;
}

void narrow(const Tensor& t, const float* src) {
  if (t.dtype == DType::kF32) return;
  bf16_t* dst = t.as<bf16_t>();
  const int64_t n = t.numel();
#pragma omp parallel for schedule(static) if (n >= kParallelWork)
  for (int64_t i = 0; i < n; ++i) st(dst, i, src[i]);
}

// Output buffer: t itself when fp32, else an fp32 workspace region rounded into t by narrow().
float* out_f32(const Tensor& t, WorkspaceCarver& ws) {
  return t.dtype == DType::kF32 ? t.as<float>() : ws.take<float>(t.numel());
}

}  // namespace

size_t CpuOps::attention_workspace_bytes(const Tensor& q, const Tensor& k,
                                         const Varlen& seqs) const {
  const int64_t nq = q.numel(), nk = k.numel();
  size_t n = 2 * static_cast<size_t>(threads_) *
             WorkspaceCarver::bytes(opt_.attn_block_rows * seqs.max_seqlen, 4);
  if (q.dtype != DType::kF32)
    n += 4 * WorkspaceCarver::bytes(nq, 4) + 4 * WorkspaceCarver::bytes(nk, 4);
  return n;
}

void CpuOps::attention_fwd(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                           const Tensor& v, const Varlen& seqs, float scale,
                           const Tensor& workspace, Stream, int64_t window) {
  check_window("attention_fwd", window);
  const AttnShape s = attn_shape("attention_fwd", q, k, seqs);
  check_shape("attention_fwd", "v", v, {s.T, s.Hkv, s.D});
  check_shape("attention_fwd", "out", out, {s.T, s.Hq, s.D});
  check_shape("attention_fwd", "lse", lse, {s.Hq, s.T});
  check_dtype("attention_fwd", "lse", lse, DType::kF32);
  check_float("attention_fwd", "q", q);
  for (const Tensor* t : {&k, &v, &out}) check_same_dtype("attention_fwd", "q", q, "k/v/out", *t);
  check_workspace("attention_fwd", workspace, attention_workspace_bytes(q, k, seqs));
  WorkspaceCarver ws(workspace);
  const int64_t blk = opt_.attn_block_rows * seqs.max_seqlen;
  float* scratch = ws.take<float>(2 * threads_ * blk);
  const float* pq = widen(q, ws);
  const float* pk = widen(k, ws);
  const float* pv = widen(v, ws);
  float* po = out_f32(out, ws);
  float* pl = lse.as<float>();
  const int64_t ldq = s.Hq * s.D, ldk = s.Hkv * s.D, rep = s.Hq / s.Hkv, Bq = opt_.attn_block_rows;
  const int64_t ntask = seqs.num_seqs() * s.Hq;
  const float kNegInf = -std::numeric_limits<float>::infinity();
#pragma omp parallel for schedule(dynamic, 1) \
    num_threads(threads_) if (s.T * s.Hq * s.D >= kParallelWork)
  for (int64_t task = 0; task < ntask; ++task) {
    const int64_t i = task / s.Hq, h = task % s.Hq;
    float* S = scratch + 2 * omp_get_thread_num() * blk;
    const int64_t s0 = seqs.cu_host[i], L = seqs.cu_host[i + 1] - s0;
    const float* Q = pq + s0 * ldq + h * s.D;
    const float* K = pk + s0 * ldk + (h / rep) * s.D;
    const float* V = pv + s0 * ldk + (h / rep) * s.D;
    float* O = po + s0 * ldq + h * s.D;
    float* lrow = pl + h * s.T + s0;
    for (int64_t r0 = 0; r0 < L; r0 += Bq) {
      const int64_t r1 = std::min(L, r0 + Bq), nb = r1 - r0;
      const int64_t lo = block_first_key(r0, window), nk = r1 - lo;  // S [nb, nk]: keys lo..r1-1
      gemm(false, true, nb, nk, s.D, scale, Q + r0 * ldq, ldq, K + lo * ldk, ldk, 0.0f, S, nk);
      for (int64_t r = 0; r < nb; ++r) {
        float* row = S + r * nk;
        const int64_t j0 = row_first_key(r0 + r, window) - lo;  // sees columns j0..j1-1
        const int64_t j1 = r0 + r + 1 - lo;
        float m = kNegInf;
        for (int64_t j = j0; j < j1; ++j) m = std::max(m, row[j]);
        float sum = 0.0f;
        for (int64_t j = j0; j < j1; ++j) {
          row[j] = std::exp(row[j] - m);
          sum += row[j];
        }
        const float inv = 1.0f / sum;
        for (int64_t j = j0; j < j1; ++j) row[j] *= inv;
        for (int64_t j = 0; j < j0; ++j) row[j] = 0.0f;
        for (int64_t j = j1; j < nk; ++j) row[j] = 0.0f;
        lrow[r0 + r] = m + std::log(sum);
      }
      gemm(false, false, nb, s.D, nk, 1.0f, S, nk, V + lo * ldk, ldk, 0.0f, O + r0 * ldq, ldq);
    }
  }
  narrow(out, po);
}

void CpuOps::attention_bwd(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                           const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                           const Tensor& lse, const Varlen& seqs, float scale,
                           const Tensor& workspace, Stream, int64_t window) {
  check_window("attention_bwd", window);
  const AttnShape s = attn_shape("attention_bwd", q, k, seqs);
  check_shape("attention_bwd", "v", v, {s.T, s.Hkv, s.D});
  check_shape("attention_bwd", "out", out, {s.T, s.Hq, s.D});
  check_shape("attention_bwd", "dout", dout, {s.T, s.Hq, s.D});
  check_shape("attention_bwd", "dq", dq, {s.T, s.Hq, s.D});
  check_shape("attention_bwd", "dk", dk, {s.T, s.Hkv, s.D});
  check_shape("attention_bwd", "dv", dv, {s.T, s.Hkv, s.D});
  check_shape("attention_bwd", "lse", lse, {s.Hq, s.T});
  check_dtype("attention_bwd", "lse", lse, DType::kF32);
  check_float("attention_bwd", "q", q);
  for (const Tensor* t : {&k, &v, &out, &dout, &dq, &dk, &dv})
    check_same_dtype("attention_bwd", "q", q, "every other tensor", *t);
  check_workspace("attention_bwd", workspace, attention_workspace_bytes(q, k, seqs));
  WorkspaceCarver ws(workspace);
  const int64_t blk = opt_.attn_block_rows * seqs.max_seqlen;
  float* scratch = ws.take<float>(2 * threads_ * blk);
  const float* pq = widen(q, ws);
  const float* pk = widen(k, ws);
  const float* pv = widen(v, ws);
  const float* po = widen(out, ws);
  const float* pdo = widen(dout, ws);
  float* pdq = out_f32(dq, ws);
  float* pdk = out_f32(dk, ws);
  float* pdv = out_f32(dv, ws);
  const float* pl = lse.as<float>();
  const int64_t ldq = s.Hq * s.D, ldk = s.Hkv * s.D, rep = s.Hq / s.Hkv, Bq = opt_.attn_block_rows;
  const int64_t ntask = seqs.num_seqs() * s.Hkv;
#pragma omp parallel for schedule(dynamic, 1) \
    num_threads(threads_) if (s.T * s.Hq * s.D >= kParallelWork)
  for (int64_t task = 0; task < ntask; ++task) {
    const int64_t i = task / s.Hkv, g = task % s.Hkv;
    float* S = scratch + 2 * omp_get_thread_num() * blk;
    float* dP = S + blk;
    const int64_t s0 = seqs.cu_host[i], L = seqs.cu_host[i + 1] - s0;
    const int64_t kvo = s0 * ldk + g * s.D;
    const float* K = pk + kvo;
    const float* V = pv + kvo;
    float* dK = pdk + kvo;
    float* dV = pdv + kvo;
    for (int64_t r = 0; r < L; ++r) {
      std::memset(dK + r * ldk, 0, static_cast<size_t>(s.D) * 4);
      std::memset(dV + r * ldk, 0, static_cast<size_t>(s.D) * 4);
    }
    for (int64_t h = g * rep; h < (g + 1) * rep; ++h) {
      const int64_t qo = s0 * ldq + h * s.D;
      const float* Q = pq + qo;
      const float* O = po + qo;
      const float* dO = pdo + qo;
      float* dQ = pdq + qo;
      const float* lrow = pl + h * s.T + s0;
      for (int64_t r0 = 0; r0 < L; r0 += Bq) {
        const int64_t r1 = std::min(L, r0 + Bq), nb = r1 - r0;
        const int64_t lo = block_first_key(r0, window), nk = r1 - lo;  // keys lo..r1-1
        const float* Kb = K + lo * ldk;
        const float* Vb = V + lo * ldk;
        gemm(false, true, nb, nk, s.D, scale, Q + r0 * ldq, ldq, Kb, ldk, 0.0f, S, nk);
        gemm(false, true, nb, nk, s.D, 1.0f, dO + r0 * ldq, ldq, Vb, ldk, 0.0f, dP, nk);
        for (int64_t r = 0; r < nb; ++r) {
          float* P = S + r * nk;
          float* G = dP + r * nk;
          const int64_t j0 = row_first_key(r0 + r, window) - lo;  // sees columns j0..j1-1
          const int64_t j1 = r0 + r + 1 - lo;
          const float l = lrow[r0 + r];
          const float d = dot16(dO + (r0 + r) * ldq, O + (r0 + r) * ldq, s.D);
          for (int64_t j = j0; j < j1; ++j) {
            P[j] = std::exp(P[j] - l);
            G[j] = P[j] * (G[j] - d);
          }
          for (int64_t j = 0; j < j0; ++j) P[j] = G[j] = 0.0f;
          for (int64_t j = j1; j < nk; ++j) P[j] = G[j] = 0.0f;
        }
        // dQ rows = scale·dS·K; dK += scale·dSᵀ·Q; dV += Pᵀ·dO (key rows lo..r1-1 only).
        gemm(false, false, nb, s.D, nk, scale, dP, nk, Kb, ldk, 0.0f, dQ + r0 * ldq, ldq);
        gemm(true, false, nk, s.D, nb, scale, dP, nk, Q + r0 * ldq, ldq, 1.0f, dK + lo * ldk, ldk);
        gemm(true, false, nk, s.D, nb, 1.0f, S, nk, dO + r0 * ldq, ldq, 1.0f, dV + lo * ldk, ldk);
      }
    }
  }
  narrow(dq, pdq);
  narrow(dk, pdk);
  narrow(dv, pdv);
}

}  // namespace zt
