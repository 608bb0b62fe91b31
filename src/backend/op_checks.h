// Argument checks shared by the Ops implementations (backend/cpu, backend/cuda): each throws
// zt::Error naming the op, the argument, what it got and what was expected. The per-op checks
// below are the whole shape/dtype contract of ops.h for that op, in one order for every backend;
// `dev` is the device the tensors must be on (a backend checks its own data-pointer needs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>

#include "backend/ops.h"
#include "core/tensor.h"

namespace zt::opcheck {

// Throws zt::Error "<op>: <arg> is [2, 3] f32, expected shape [4, 3]" unless t has exactly `dims`
// (a -1 entry matches any size). Also rejects a tensor on another device than `device` ("<op>:
// <arg> is not in host memory" / "... device memory") and, when require_data, a null pointer for a
// non-empty tensor (workspace-size queries pass shape-only tensors).
void check_shape(std::string_view op, std::string_view arg, const Tensor& t,
                 std::initializer_list<int64_t> dims, Device device, bool require_data = true);
// Throws zt::Error naming op/arg unless t lives on `device` (same messages as check_shape).
void check_device(std::string_view op, std::string_view arg, const Tensor& t, Device device);
// Throws zt::Error naming op/arg unless t.dtype == want.
void check_dtype(std::string_view op, std::string_view arg, const Tensor& t, DType want);
// Throws zt::Error naming op/arg unless t.dtype is f32 or bf16.
void check_float(std::string_view op, std::string_view arg, const Tensor& t);
// Throws zt::Error naming op and both args unless a and b have the same dtype.
void check_same_dtype(std::string_view op, std::string_view an, const Tensor& a,
                      std::string_view bn, const Tensor& b);
// Throws zt::Error unless the workspace has at least `need` bytes.
void check_workspace(std::string_view op, const Tensor& ws, size_t need);

// ---- per-op checks (semantics and shapes: backend/ops.h)

struct MatrixDims {
  int64_t rows = 0, cols = 0;
};
struct EmbeddingDims {
  int64_t V = 0, H = 0, T = 0;  // vocabulary, hidden size, tokens
};
struct RopeDims {
  int64_t T = 0, heads = 0, half = 0;  // tokens, heads (0 for the tables), rotated dims / 2
  int64_t head_dim = 0;                // D (0 for the tables); 2·half < D: partial rotary
};

struct GemmDims {
  int64_t M = 0, N = 0, K = 0;
};
// matmul's product shapes, for 2-D C, A, B (each already checked): C [M, N], op(A) [M, K],
// op(B) [K, N]; zt::Error "matmul: shapes do not fit: …" otherwise.
GemmDims check_matmul_dims(const Tensor& C, const Tensor& A, Trans ta, const Tensor& B, Trans tb);
// The sequence boundaries of a varlen attention call over T tokens: cu starts at 0, ends at T, and
// no sequence is longer than max_seqlen (zt::Error naming the op and the sequence).
void check_varlen(std::string_view op, int64_t T, std::span<const int32_t> cu, int64_t max_seqlen);

// cast: dst and src f32/bf16 with equal numel.
void check_cast(const Tensor& dst, const Tensor& src);
// add: out, a, b of one float dtype and equal numel.
void check_add(const Tensor& out, const Tensor& a, const Tensor& b);
// swiglu_fwd / swiglu_bwd: every argument of one float dtype and equal numel.
void check_swiglu_fwd(const Tensor& out, const Tensor& gate, const Tensor& up);
void check_swiglu_bwd(const Tensor& dgate, const Tensor& dup, const Tensor& dout,
                      const Tensor& gate, const Tensor& up);
// embedding_fwd: table [V, H], ids [T] i32, out [T, H] of the table's dtype.
EmbeddingDims check_embedding_fwd(const Tensor& out, const Tensor& table, const Tensor& ids,
                                  Device dev);
// embedding_bwd: dtable [V, H] f32, ids [T] i32, dout [T, H] (its dtype is the caller's check).
EmbeddingDims check_embedding_bwd(const Tensor& dtable, const Tensor& dout, const Tensor& ids,
                                  Device dev);
// rmsnorm_fwd: x [T, H] f32/bf16, y like x, w [H] like x, rstd [T] f32. Returns {T, H}.
MatrixDims check_rmsnorm_fwd(const Tensor& y, const Tensor& rstd, const Tensor& x, const Tensor& w,
                             Device dev);
// rmsnorm_bwd: as the forward, plus dx, dy like x and dw [H] f32. Returns {T, H}.
MatrixDims check_rmsnorm_bwd(const Tensor& dx, const Tensor& dw, const Tensor& dy, const Tensor& x,
                             const Tensor& w, const Tensor& rstd, Device dev);
// bias_grad: dy [M, N] f32/bf16, db [N] f32. Returns {M, N}.
MatrixDims check_bias_grad(const Tensor& db, const Tensor& dy, Device dev);
// rope_tables: inv_freq [half] f32, pos [T] i32, cos/sin [T, half] f32.
RopeDims check_rope_tables(const Tensor& cos, const Tensor& sin, const Tensor& pos,
                           const Tensor& inv_freq, Device dev);
// rope_fwd / rope_bwd (`op` names which): x [T, heads, D] f32/bf16 with D even, cos/sin
// [T, D/2] f32.
RopeDims check_rope(std::string_view op, const Tensor& x, const Tensor& cos, const Tensor& sin,
                    Device dev);

// Throws zt::Error "<op>: <what> is not implemented on <device>" — an op variant (a norm
// style, an activation, a sliding window) that this backend does not have yet.
[[noreturn]] void unsupported_variant(std::string_view op, std::string_view what, Device dev);

}  // namespace zt::opcheck
