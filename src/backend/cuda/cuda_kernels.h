// Launchers of the CUDA kernels behind CudaOps (plain C++ signatures: cuda_ops.cpp checks the
// arguments and calls these; the .cu files hold kernels and launchers and include no fmt). Every
// launcher enqueues its kernels on `stream`, never synchronises the device (sumsq's result copy to
// pageable host memory aside, see launch_sumsq) and throws zt::Error "CUDA error in <op>: …" when a
// launch fails. Pointers are device pointers; `t` is the storage dtype (kF32 or kBF16) of every
// floating-point tensor argument that is not explicitly float*. Semantics: backend/ops.h.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/layer_kinds.h"

namespace zt::cuda {

// ---- kernel-side error record (CudaOps::dev_status_, int32[kStatusInts] on the device)
// [kStatusKey, kStatusKey+1]: one uint64 = (position << 32) | uint32(value) of the smallest
// out-of-vocabulary position seen, UINT64_MAX when none; [kStatusVocab]: the vocabulary size;
// [kStatusOp]: the StatusOp that recorded it (kNone = no error).
constexpr int kStatusKey = 0;
constexpr int kStatusVocab = 2;
constexpr int kStatusOp = 3;
constexpr int kStatusInts = 4;
enum class StatusOp : int32_t {
  kNone = 0,
  kEmbeddingFwd = 1,
  kEmbeddingBwd = 2,
  kCrossEntropy = 3
};

// ---- cuda_elementwise.cu (n = elements)

// dst = src converted (dt, st ∈ {f32, bf16}; equal dtypes are copied by the caller).
void launch_cast(void* dst, DType dt, const void* src, DType st, int64_t n, cudaStream_t stream);
// out = a + b (out may alias a or b).
void launch_add(void* out, const void* a, const void* b, DType t, int64_t n, cudaStream_t stream);
// x *= beta in place (fp32).
void launch_scale(float* x, float beta, int64_t n, cudaStream_t stream);
// out = act(gate) * up (act: silu or gelu_tanh, core/layer_kinds.h).
void launch_swiglu_fwd(void* out, const void* gate, const void* up, DType t, int64_t n,
                       GluActivation act, cudaStream_t stream);
// dup = dout*act(gate); dgate = dout*up*act'(gate) (dgate may alias gate, dup may alias up).
void launch_swiglu_bwd(void* dgate, void* dup, const void* dout, const void* gate, const void* up,
                       DType t, int64_t n, GluActivation act, cudaStream_t stream);
// cos/sin [T, half] = cos/sin(inv_freq[i] * float(pos[t])) * scaling.
void launch_rope_tables(float* cos, float* sin, const int32_t* pos, const float* inv_freq,
                        int64_t T, int64_t half, float scaling, cudaStream_t stream);
// x [T, heads, dim]: the first 2*half elements of each head rotated in place by +angle (sign 1)
// or -angle (sign -1); elements [2*half, dim) untouched (partial rotary when 2*half < dim).
void launch_rope(void* x, DType t, const float* cos, const float* sin, int64_t T, int64_t heads,
                 int64_t half, int64_t dim, float sign, cudaStream_t stream);

// ---- cuda_embedding.cu

// out[T, H] = to_dtype(table[ids[t]] * scale) (table [V, H]; scale 1 copies the row's bytes); an
// id outside [0, V) writes a zero row and is recorded in `status` (StatusOp::kEmbeddingFwd).
void launch_embedding_fwd(void* out, const void* table, DType t, const int32_t* ids, int64_t T,
                          int64_t V, int64_t H, float scale, int32_t* status, cudaStream_t stream);
// Workspace bytes of launch_embedding_bwd for T ids (sort keys/values and cub's temp storage).
size_t embedding_bwd_workspace_bytes(int64_t T);
// dtable[V, H] (f32) = beta*dtable + rows scale*dout[T, H] (fp32 products) added at ids[t] in
// token order. An id outside [0, V) is skipped and recorded (StatusOp::kEmbeddingBwd).
void launch_embedding_bwd(float* dtable, const void* dout, DType t, const int32_t* ids, int64_t T,
                          int64_t V, int64_t H, float beta, float scale, void* workspace,
                          size_t workspace_bytes, int32_t* status, cudaStream_t stream);

// ---- cuda_rmsnorm.cu (x, y, w, dx, dy share dtype t; style: core/layer_kinds.h)

void launch_rmsnorm_fwd(void* y, float* rstd, const void* x, const void* w, DType t, int64_t T,
                        int64_t H, float eps, RmsNormStyle style, cudaStream_t stream);
void launch_rmsnorm_bwd(void* dx, bool accumulate_dx, float* dw, float beta_dw, const void* dy,
                        const void* x, const void* w, const float* rstd, DType t, int64_t T,
                        int64_t H, RmsNormStyle style, cudaStream_t stream);

// ---- cuda_reduce.cu

// Workspace bytes of launch_sumsq for n elements: one fp64 partial per Ops::kSumsqBlock elements
// plus the total.
size_t sumsq_workspace_bytes(int64_t n);
// *out (host memory) = Σ x_i² in fp64, the CPU's order (cpu_reduce.cpp). The result is copied with
// cudaMemcpyAsync: valid after the stream is synchronised (pinned `out`); for pageable `out` the
// copy returns when the result is there.
void launch_sumsq(double* out, const void* x, DType t, int64_t n, void* workspace,
                  cudaStream_t stream);
// db[N] (f32) = beta*db + column sums of dy[M, N].
void launch_bias_grad(float* db, const void* dy, DType t, int64_t M, int64_t N, float beta,
                      cudaStream_t stream);

}  // namespace zt::cuda
