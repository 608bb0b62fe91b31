// CudaOps attention (backend/ops.h): argument checks with the CPU op's messages, then the launchers
// of cuda_attention.cu (kernels, tile sizes and the determinism argument are described there).
#include "backend/cuda/cuda_attention.h"

#include <limits>

#include "backend/cpu/cpu_common.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/op_checks.h"
#include "core/error.h"

namespace zt {

namespace {

// cpu::check_shape for a tensor that must live in device memory (any device for the shape-only
// tensors of workspace queries, require_data = false).
void check_shape(const char* op, const char* arg, const Tensor& t,
                 std::initializer_list<int64_t> dims, bool require_data = true) {
  Tensor view = t;
  view.device = Device::kCPU;  // the shape and data checks are the CPU op's
  cpu::check_shape(op, arg, view, dims, require_data);
  if (require_data && t.device != Device::kCUDA) fail("{}: {} is not in device memory", op, arg);
}

// Checks q [T, Hq, D] and k [T, Hkv, D] (D ≤ 256 on CUDA) and returns the launchers' problem
// description without sequences (what the workspace size depends on).
cuda::AttnProblem attn_shapes(const char* op, const Tensor& q, const Tensor& k, bool require_data) {
  check_shape(op, "q", q, {-1, -1, -1}, require_data);
  const int64_t T = q.dim(0), Hq = q.dim(1), D = q.dim(2);
  check_shape(op, "k", k, {T, -1, D}, require_data);
  const int64_t Hkv = k.dim(1);
  if (Hkv < 1 || Hq % Hkv != 0)
    fail("{}: {} query heads are not a multiple of {} KV heads", op, Hq, Hkv);
  if (D < 1 || D > 256) fail("{}: head dim {} is not supported on CUDA (1..256)", op, D);
  if (Hq > std::numeric_limits<int>::max() || T > std::numeric_limits<int32_t>::max())
    fail("{}: q {} is too large", op, q.describe());
  cuda::AttnProblem p;
  p.T = T;
  p.Hq = static_cast<int>(Hq);
  p.Hkv = static_cast<int>(Hkv);
  p.D = static_cast<int>(D);
  p.bf16 = q.dtype == DType::kBF16;
  return p;
}

// attn_shapes plus the sequence boundaries (as the CPU op checks them, and the device copy of
// cu_seqlens).
cuda::AttnProblem attn_problem(const char* op, const Tensor& q, const Tensor& k, const Varlen& seqs,
                               float scale, int64_t window) {
  if (window < 0)
    fail("{}: window is {}, expected 0 (none) or a positive number of keys", op, window);
  cuda::AttnProblem p = attn_shapes(op, q, k, true);
  const int64_t T = p.T;
  const auto& cu = seqs.cu_host;
  opcheck::check_varlen(op, T, cu, seqs.max_seqlen);
  const int64_t n = static_cast<int64_t>(cu.size()) - 1;
  check_shape(op, "cu_seqlens", seqs.cu_seqlens, {n + 1});
  cpu::check_dtype(op, "cu_seqlens", seqs.cu_seqlens, DType::kI32);
  p.cu_dev = seqs.cu_seqlens.as<const int32_t>();
  p.cu_host = cu.data();
  p.num_seqs = static_cast<int>(n);
  p.scale = scale;
  p.window = window;
  return p;
}

}  // namespace

size_t CudaOps::attention_workspace_bytes(const Tensor& q, const Tensor& k,
                                          const Varlen& seqs) const {
  // Sized from the shapes (the model queries it once with T = max_tokens and no sequences).
  cuda::AttnProblem p = attn_shapes("attention_workspace_bytes", q, k, false);
  p.num_seqs = seqs.cu_host.empty() ? 0 : static_cast<int>(seqs.cu_host.size() - 1);
  return cuda::attention_workspace_bytes(p);
}

void CudaOps::attention_fwd(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                            const Tensor& v, const Varlen& seqs, float scale,
                            const Tensor& workspace, Stream s, int64_t window) {
  const char* op = "attention_fwd";
  const cuda::AttnProblem p = attn_problem(op, q, k, seqs, scale, window);
  check_shape(op, "v", v, {p.T, p.Hkv, p.D});
  check_shape(op, "out", out, {p.T, p.Hq, p.D});
  check_shape(op, "lse", lse, {p.Hq, p.T});
  cpu::check_dtype(op, "lse", lse, DType::kF32);
  cpu::check_float(op, "q", q);
  for (const Tensor* t : {&k, &v, &out}) cpu::check_same_dtype(op, "q", q, "k/v/out", *t);
  cpu::check_workspace(op, workspace, cuda::attention_workspace_bytes(p));
  cuda::attention_fwd(p, out.data, lse.as<float>(), q.data, k.data, v.data, workspace.data,
                      s.handle);
}

void CudaOps::attention_bwd(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                            const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                            const Tensor& out, const Tensor& lse, const Varlen& seqs, float scale,
                            const Tensor& workspace, Stream s, int64_t window) {
  const char* op = "attention_bwd";
  const cuda::AttnProblem p = attn_problem(op, q, k, seqs, scale, window);
  check_shape(op, "v", v, {p.T, p.Hkv, p.D});
  check_shape(op, "out", out, {p.T, p.Hq, p.D});
  check_shape(op, "dout", dout, {p.T, p.Hq, p.D});
  check_shape(op, "dq", dq, {p.T, p.Hq, p.D});
  check_shape(op, "dk", dk, {p.T, p.Hkv, p.D});
  check_shape(op, "dv", dv, {p.T, p.Hkv, p.D});
  check_shape(op, "lse", lse, {p.Hq, p.T});
  cpu::check_dtype(op, "lse", lse, DType::kF32);
  cpu::check_float(op, "q", q);
  for (const Tensor* t : {&k, &v, &out, &dout, &dq, &dk, &dv})
    cpu::check_same_dtype(op, "q", q, "every other tensor", *t);
  cpu::check_workspace(op, workspace, cuda::attention_workspace_bytes(p));
  cuda::attention_bwd(p, dq.data, dk.data, dv.data, dout.data, q.data, k.data, v.data, out.data,
                      lse.as<const float>(), workspace.data, s.handle);
}

}  // namespace zt
