// CpuOps attention: causal, GQA, varlen (cu_seqlens) attention as HF's eager attention computes it
// (scores = scale·q·kᵀ, masked, fp32 softmax, ·v). The forward runs one OpenMP task per
// (sequence, query head); within it, blocks of attn_block_rows query rows: the block's scores
// [rows, keys ≤ last row] are one single-threaded cblas_sgemm, then the softmax, then the output
// sgemm. The backward runs one task per (sequence, KV head), which owns those dK/dV rows and adds
// the contributions of its query heads and blocks in order, recomputing the probabilities from the
// saved log-sum-exp. Each task is sequential, so results do not depend on the thread count.
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
  if (window != 0) opcheck::unsupported_variant("attention_fwd", "a sliding window", Device::kCPU);
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
      gemm(false, true, nb, r1, s.D, scale, Q + r0 * ldq, ldq, K, ldk, 0.0f, S, r1);
      for (int64_t r = 0; r < nb; ++r) {
        float* row = S + r * r1;
        const int64_t nvalid = r0 + r + 1;  // keys 0..r0+r
        float m = kNegInf;
        for (int64_t j = 0; j < nvalid; ++j) m = std::max(m, row[j]);
        float sum = 0.0f;
        for (int64_t j = 0; j < nvalid; ++j) {
          row[j] = std::exp(row[j] - m);
          sum += row[j];
        }
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j < nvalid; ++j) row[j] *= inv;
        for (int64_t j = nvalid; j < r1; ++j) row[j] = 0.0f;
        lrow[r0 + r] = m + std::log(sum);
      }
      gemm(false, false, nb, s.D, r1, 1.0f, S, r1, V, ldk, 0.0f, O + r0 * ldq, ldq);
    }
  }
  narrow(out, po);
}

void CpuOps::attention_bwd(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                           const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                           const Tensor& lse, const Varlen& seqs, float scale,
                           const Tensor& workspace, Stream, int64_t window) {
  if (window != 0) opcheck::unsupported_variant("attention_bwd", "a sliding window", Device::kCPU);
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
        gemm(false, true, nb, r1, s.D, scale, Q + r0 * ldq, ldq, K, ldk, 0.0f, S, r1);
        gemm(false, true, nb, r1, s.D, 1.0f, dO + r0 * ldq, ldq, V, ldk, 0.0f, dP, r1);
        for (int64_t r = 0; r < nb; ++r) {
          float* P = S + r * r1;
          float* G = dP + r * r1;
          const int64_t nvalid = r0 + r + 1;
          const float l = lrow[r0 + r];
          const float d = dot16(dO + (r0 + r) * ldq, O + (r0 + r) * ldq, s.D);
          for (int64_t j = 0; j < nvalid; ++j) {
            P[j] = std::exp(P[j] - l);
            G[j] = P[j] * (G[j] - d);
          }
          for (int64_t j = nvalid; j < r1; ++j) P[j] = G[j] = 0.0f;
        }
        // dQ rows = scale·dS·K; dK += scale·dSᵀ·Q; dV += Pᵀ·dO.
        gemm(false, false, nb, s.D, r1, scale, dP, r1, K, ldk, 0.0f, dQ + r0 * ldq, ldq);
        gemm(true, false, r1, s.D, nb, scale, dP, r1, Q + r0 * ldq, ldq, 1.0f, dK, ldk);
        gemm(true, false, r1, s.D, nb, 1.0f, S, r1, dO + r0 * ldq, ldq, 1.0f, dV, ldk);
      }
    }
  }
  narrow(dq, pdq);
  narrow(dk, pdk);
  narrow(dv, pdv);
}

}  // namespace zt
