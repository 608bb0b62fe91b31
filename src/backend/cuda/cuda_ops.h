// CudaOps: the CUDA implementation of Ops (DESIGN §3–5, issue 8). Every op of backend/ops.h with
// the documented semantics unchanged; the CPU backend (backend/cpu) is the reference each kernel is
// tested against (tests/gpu). Tensors hold device pointers; ops are enqueued on the Stream given
// (a cudaStream_t; nullptr = the legacy default stream) and never allocate: scratch comes from the
// `workspace` arguments, sized by the *_workspace_bytes queries.
//
// Determinism: no floating-point atomics anywhere; every reduction has a fixed tree that depends on
// the shapes only (not on scheduling, buffer addresses or the device's SM count); cuBLASLt
// algorithms are chosen once per shape and cached, with split-K reductions disabled.
//
// Errors: argument checks throw zt::Error naming the op and argument (as the CPU ops do); a failed
// CUDA/cuBLAS call throws naming the op; an out-of-vocabulary token id seen by a kernel is recorded
// in a device flag and thrown (naming the position and value) by the next synchronize().
//
// Files (one op family each, mirroring backend/cpu): cuda_ops.cpp (class, elementwise dispatch,
// memory ops), cuda_elementwise.cu (cast, add, SwiGLU, RoPE), cuda_embedding.cu, cuda_rmsnorm.cu,
// cuda_reduce.cu (sumsq, bias_grad), cuda_matmul.cpp (cuBLASLt), cuda_cross_entropy.cpp/.cu,
// cuda_attention.cpp/.cu, cuda_memory.cpp (device / pinned-host MemoryResources); launchers are
// declared in cuda_kernels.h, device helpers shared by the kernels live in cuda_device.cuh.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "backend/ops.h"
#include "core/arena.h"

namespace zt {

struct CudaOpsOptions {
  int device = 0;  // CUDA device index (the trainer passes LOCAL_RANK)
  // Most rows per chunk of the fused LM-head cross-entropy (its workspace holds [rows, V] logits
  // of the compute dtype) ...
  int64_t ce_chunk_rows = 2048;
  // ... and the bytes the chunk's buffers may take: fewer rows (a multiple of 64) when
  // ce_chunk_rows of them do not fit (ce_rows_for_budget, ops.h).
  size_t ce_budget_bytes = kCeBudgetBytes;
};

// Number of visible CUDA devices (0 when there is no driver / no device; never throws).
int cuda_device_count();

// Device memory: one cudaMalloc per allocate() call (an Arena calls it once per pool).
class CudaDeviceMemory final : public MemoryResource {
 public:
  explicit CudaDeviceMemory(int device);
  void* allocate(size_t bytes, size_t alignment) override;  // nullptr when cudaMalloc fails
  void deallocate(void* p, size_t bytes) override;
  Device device() const override { return Device::kCUDA; }
  std::string name() const override;  // "cuda:0 (NVIDIA H200, 139.8 GiB free)"
  // Free / total device memory now (cudaMemGetInfo), bytes.
  size_t free_bytes() const;
  size_t total_bytes() const;

 private:
  int device_;
};

// Page-locked host memory (cudaHostAlloc): offloaded optimizer state and staging buffers, so that
// D2H/H2D copies run asynchronously at full PCIe speed.
class CudaPinnedMemory final : public MemoryResource {
 public:
  void* allocate(size_t bytes, size_t alignment) override;
  void deallocate(void* p, size_t bytes) override;
  Device device() const override { return Device::kCPU; }
  std::string name() const override { return "pinned host"; }
};

// Vocabulary slices of the fused cross-entropy's input-gradient product (cuda_cross_entropy.cpp).
inline constexpr int kCeDhParts = 4;

class CudaOps final : public Ops {
 public:
  // Selects options.device (cudaSetDevice), creates the cuBLASLt handle and the small device
  // status flag. Throws zt::Error when there is no such device.
  explicit CudaOps(CudaOpsOptions options = {});
  ~CudaOps() override;
  CudaOps(const CudaOps&) = delete;
  CudaOps& operator=(const CudaOps&) = delete;

  Device device() const override { return Device::kCUDA; }
  std::string name() const override;  // "cuda:0 NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)"
  const CudaOpsOptions& options() const { return opt_; }

  Stream create_stream() override;
  void destroy_stream(Stream s) override;
  Event create_event() override;
  void destroy_event(Event e) override;
  void record_event(Event e, Stream s) override;
  void wait_event(Stream waiter, Event e) override;
  void synchronize_event(Event e) override;
  void bind_thread() override;

  void zero(const Tensor& x, Stream s) override;
  void copy_from_host(const Tensor& dst, const void* src, Stream s) override;
  void copy_to_host(void* dst, const Tensor& src, Stream s) override;
  // Waits for s, then throws the first recorded kernel-side error (out-of-vocabulary id).
  void synchronize(Stream s) override;
  void cast(const Tensor& dst, const Tensor& src, Stream s) override;
  void add(const Tensor& out, const Tensor& a, const Tensor& b, Stream s) override;

  size_t embedding_workspace_bytes(const Tensor& ids) const override;
  void embedding_fwd(const Tensor& out, const Tensor& table, const Tensor& ids, Stream s,
                     float scale = 1.0f) override;
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
  CudaOpsOptions opt_;
  std::string name_;
  // Kernel-side error record (device int32[4]: code, position, value, unused) and its pinned host
  // mirror; owned by cuda_ops.cpp.
  int32_t* dev_status_ = nullptr;
  int32_t* host_status_ = nullptr;
  // ---- cuBLASLt state and the GEMM behind matmul and the fused cross-entropy (cuda_matmul.cpp)

  // Scratch bytes one cuBLASLt call may use (the size cuBLAS recommends for Hopper).
  static constexpr size_t kLtWorkspaceBytes = size_t{32} << 20;
  // A row-major matrix in device memory: rows × cols elements, row stride ld (elements).
  struct GemmView {
    const void* data = nullptr;
    DType dtype = DType::kF32;
    int64_t rows = 0, cols = 0, ld = 0;
  };
  // C = alpha·op(A)·op(B) + beta·C + bias[C.cols] on stream s through cuBLASLt, for the
  // combinations it runs natively: A, B both f32 with C f32, or both bf16 with C bf16 or f32;
  // bias (nullable) of C's dtype and 16-byte aligned. lt_workspace: lt_workspace_bytes (less for
  // a product that runs beside another on a second stream), 16-byte aligned. K = 0 is not handled
  // here. Throws zt::Error naming `op` on a cuBLAS failure.
  void gemm(const char* op, const GemmView& C, const GemmView& A, Trans ta, const GemmView& B,
            Trans tb, const void* bias, float alpha, float beta, void* lt_workspace, Stream s,
            size_t lt_workspace_bytes = kLtWorkspaceBytes);
  // What selects a cached algorithm: shape, leading dimensions, transposes, dtypes, epilogue,
  // which pointers are 16-byte aligned (never the addresses themselves) and the cuBLASLt
  // workspace size the heuristic was given.
  struct MatmulKey {
    int64_t m, n, k, lda, ldb, ldc;
    int ta, tb, ab_dtype, c_dtype, bias_dtype, aligned16;
    size_t lt_workspace_bytes;
    auto operator<=>(const MatmulKey&) const = default;
  };
  struct MatmulPlan;
  void* lt_handle_ = nullptr;  // cublasLtHandle_t
  std::map<MatmulKey, std::shared_ptr<MatmulPlan>> plans_;
  // Creates/destroys the cuBLASLt state (cuda_matmul.cpp).
  void init_matmul();
  void destroy_matmul();
  // The fused cross-entropy's input-gradient product runs as kCeDhParts vocabulary slices at once
  // (cuda_cross_entropy.cpp): slice 0 on the caller's stream, the others on these side streams,
  // forked and joined through the events (created on first use, destroyed with the ops).
  Stream ce_side_[kCeDhParts - 1] = {};
  Event ce_ev_[kCeDhParts] = {};
};

}  // namespace zt
