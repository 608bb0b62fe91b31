// CpuOps: the CPU implementation of Ops — OpenMP loops, OpenBLAS cblas_sgemm for every matrix
// product, fp32 arithmetic on fp32 or bf16 storage. It is the reference every CUDA kernel is
// compared with (DESIGN §3). Ops run synchronously; the Stream argument is ignored.
//
// Determinism: elementwise ops are trivially so; reductions use fixed orders that depend on
// neither the OpenMP thread count nor buffer addresses (per-row sums with 16 fixed lanes, column
// sums over rows in row order, fixed-size blocks for sumsq). Matrix products use OpenBLAS, which
// never splits K, and CpuOps splits products only over M or N (OpenBLAS itself is set to one
// thread, process-wide: OpenMP is the only thread pool), so products do not depend on the thread
// count either.
//
// Implementation files, one per op family with backend/cuda's names: cpu_ops.cpp (construction,
// memory ops), cpu_elementwise.cpp (cast, add, RoPE, SwiGLU/GeGLU), cpu_embedding.cpp,
// cpu_rmsnorm.cpp, cpu_reduce.cpp (bias_grad, sumsq), cpu_matmul.cpp, cpu_attention.cpp,
// cpu_cross_entropy.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "backend/ops.h"

namespace zt {

struct CpuOpsOptions {
  // Target rows per chunk of the fused LM-head cross-entropy: its workspace holds a
  // [ce_chunk_rows, V] fp32 logits block. Results depend on it only through the order in which
  // the chunks' weight gradients are added.
  int64_t ce_chunk_rows = 256;
  // Bytes the chunk's buffers may take (the logits block, the hidden rows and their gradient):
  // fewer rows per chunk when ce_chunk_rows of them do not fit (ce_rows_for_budget, ops.h).
  size_t ce_budget_bytes = kCeBudgetBytes;
  // Query rows per block of the attention: the workspace holds [attn_block_rows, max_seqlen] fp32
  // score blocks. Results depend on it only through the dK/dV accumulation order.
  int64_t attn_block_rows = 128;
};

class CpuOps final : public Ops {
 public:
  explicit CpuOps(CpuOpsOptions options = {});

  Device device() const override { return Device::kCPU; }
  std::string name() const override;
  const CpuOpsOptions& options() const { return opt_; }

  void zero(const Tensor& x, Stream s) override;
  void copy_from_host(const Tensor& dst, const void* src, Stream s) override;
  void copy_to_host(void* dst, const Tensor& src, Stream s) override;
  void synchronize(Stream) override {}
  void cast(const Tensor& dst, const Tensor& src, Stream s) override;
  void add(const Tensor& out, const Tensor& a, const Tensor& b, Stream s) override;

  void embedding_fwd(const Tensor& out, const Tensor& table, const Tensor& ids, Stream s,
                     float scale = 1.0f) override;
  size_t embedding_workspace_bytes(const Tensor&) const override { return 0; }
  void embedding_bwd(const Tensor& dtable, const Tensor& dout, const Tensor& ids, float beta,
                     const Tensor& workspace, Stream s, float scale = 1.0f) override;

  void rmsnorm_fwd(const Tensor& y, const Tensor& rstd, const Tensor& x, const Tensor& w, float eps,
                   Stream s, RmsNormStyle style = RmsNormStyle::kLlama) override;
  void rmsnorm_bwd(const Tensor& dx, bool accumulate_dx, const Tensor& dw, float beta_dw,
                   const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd, Stream s,
                   RmsNormStyle style = RmsNormStyle::kLlama) override;

  size_t matmul_workspace_bytes(const Tensor& C, const Tensor& A, Trans ta, const Tensor& B,
                                Trans tb, bool beta_nonzero = true) const override;
  void matmul(const Tensor& C, const Tensor& A, Trans ta, const Tensor& B, Trans tb,
              const Tensor& bias, float alpha, float beta, const Tensor& workspace,
              Stream s) override;
  void bias_grad(const Tensor& db, const Tensor& dy, float beta, Stream s) override;

  void rope_tables(const Tensor& cos, const Tensor& sin, const Tensor& pos, const Tensor& inv_freq,
                   float attention_scaling, Stream s) override;
  void rope_fwd(const Tensor& x, const Tensor& cos, const Tensor& sin, Stream s) override;
  void rope_bwd(const Tensor& dx, const Tensor& cos, const Tensor& sin, Stream s) override;

  size_t attention_workspace_bytes(const Tensor& q, const Tensor& k,
                                   const Varlen& seqs) const override;
  void attention_fwd(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                     const Tensor& v, const Varlen& seqs, float scale, const Tensor& workspace,
                     Stream s, int64_t window = 0) override;
  void attention_bwd(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                     const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                     const Tensor& lse, const Varlen& seqs, float scale, const Tensor& workspace,
                     Stream s, int64_t window = 0) override;

  void swiglu_fwd(const Tensor& out, const Tensor& gate, const Tensor& up, Stream s,
                  GluActivation act = GluActivation::kSilu) override;
  void swiglu_bwd(const Tensor& dgate, const Tensor& dup, const Tensor& dout, const Tensor& gate,
                  const Tensor& up, Stream s, GluActivation act = GluActivation::kSilu) override;

  size_t linear_cross_entropy_workspace_bytes(const Tensor& hidden,
                                              const Tensor& weight) const override;
  void linear_cross_entropy_fwd_bwd(CeStats* stats, const Tensor& dhidden, const Tensor& dweight,
                                    float beta_dw, const Tensor& hidden, const Tensor& weight,
                                    const Tensor& targets, float grad_scale,
                                    const Tensor& workspace, Stream s) override;

  size_t sumsq_workspace_bytes(const Tensor& x) const override;
  void sumsq(double* out, const Tensor& x, const Tensor& workspace, Stream s) override;

 private:
  CpuOpsOptions opt_;
  int threads_;  // OpenMP threads at construction; sizes per-thread attention scratch
};

}  // namespace zt
