// Argument checks shared by the Ops implementations. See op_checks.h.
#include "backend/op_checks.h"

#include <string>

#include "core/error.h"

namespace zt::opcheck {

void check_device(std::string_view op, std::string_view arg, const Tensor& t, Device device) {
  if (t.device != device)
    fail("{}: {} is not in {} memory", op, arg, device == Device::kCPU ? "host" : "device");
}

void check_shape(std::string_view op, std::string_view arg, const Tensor& t,
                 std::initializer_list<int64_t> dims, Device device, bool require_data) {
  bool ok = t.ndim == static_cast<int>(dims.size());
  int i = 0;
  for (int64_t d : dims) {
    if (ok && d >= 0 && t.shape[i] != d) ok = false;
    ++i;
  }
  if (!ok) {
    std::string want = "[";
    i = 0;
    for (int64_t d : dims)
      want += (i++ ? ", " : "") + (d < 0 ? std::string("*") : std::to_string(d));
    fail("{}: {} is {}, expected shape {}]", op, arg, t.describe(), want);
  }
  check_device(op, arg, t, device);
  if (require_data && t.data == nullptr && t.numel() > 0)
    fail("{}: {} {} has no data", op, arg, t.describe());
}

void check_dtype(std::string_view op, std::string_view arg, const Tensor& t, DType want) {
  if (t.dtype != want)
    fail("{}: {} has dtype {}, expected {}", op, arg, dtype_name(t.dtype), dtype_name(want));
}

void check_float(std::string_view op, std::string_view arg, const Tensor& t) {
  if (t.dtype != DType::kF32 && t.dtype != DType::kBF16)
    fail("{}: {} has dtype {}, expected f32 or bf16", op, arg, dtype_name(t.dtype));
}

void check_same_dtype(std::string_view op, std::string_view an, const Tensor& a,
                      std::string_view bn, const Tensor& b) {
  if (a.dtype != b.dtype)
    fail("{}: {} has dtype {} but {} has dtype {}; they must match", op, an, dtype_name(a.dtype),
         bn, dtype_name(b.dtype));
}

void check_workspace(std::string_view op, const Tensor& ws, size_t need) {
  if (need == 0) return;
  if (ws.data == nullptr || ws.nbytes() < need)
    fail("{}: workspace has {} bytes, {} needed", op, ws.data ? ws.nbytes() : 0, need);
}

void check_cast(const Tensor& dst, const Tensor& src) {
  check_float("cast", "dst", dst);
  check_float("cast", "src", src);
  if (dst.numel() != src.numel())
    fail("cast: dst {} and src {} differ in size", dst.describe(), src.describe());
}

void check_add(const Tensor& out, const Tensor& a, const Tensor& b) {
  check_same_dtype("add", "out", out, "a", a);
  check_same_dtype("add", "out", out, "b", b);
  if (out.numel() != a.numel() || out.numel() != b.numel())
    fail("add: out {}, a {}, b {} differ in size", out.describe(), a.describe(), b.describe());
  check_float("add", "out", out);
}

void check_swiglu_fwd(const Tensor& out, const Tensor& gate, const Tensor& up) {
  check_same_dtype("swiglu_fwd", "out", out, "gate", gate);
  check_same_dtype("swiglu_fwd", "out", out, "up", up);
  if (out.numel() != gate.numel() || out.numel() != up.numel())
    fail("swiglu_fwd: out {}, gate {}, up {} differ in size", out.describe(), gate.describe(),
         up.describe());
  check_float("swiglu_fwd", "out", out);
}

void check_swiglu_bwd(const Tensor& dgate, const Tensor& dup, const Tensor& dout,
                      const Tensor& gate, const Tensor& up) {
  for (const Tensor* t : {&dup, &dout, &gate, &up})
    check_same_dtype("swiglu_bwd", "dgate", dgate, "every argument", *t);
  const int64_t n = gate.numel();
  if (dgate.numel() != n || dup.numel() != n || dout.numel() != n || up.numel() != n)
    fail("swiglu_bwd: arguments differ in size (gate {}, up {}, dout {})", gate.describe(),
         up.describe(), dout.describe());
  check_float("swiglu_bwd", "gate", gate);
}

EmbeddingDims check_embedding_fwd(const Tensor& out, const Tensor& table, const Tensor& ids,
                                  Device dev) {
  check_shape("embedding_fwd", "table", table, {-1, -1}, dev);
  const int64_t V = table.dim(0), H = table.dim(1);
  check_shape("embedding_fwd", "ids", ids, {-1}, dev);
  check_dtype("embedding_fwd", "ids", ids, DType::kI32);
  const int64_t T = ids.dim(0);
  check_shape("embedding_fwd", "out", out, {T, H}, dev);
  check_same_dtype("embedding_fwd", "out", out, "table", table);
  return {V, H, T};
}

EmbeddingDims check_embedding_bwd(const Tensor& dtable, const Tensor& dout, const Tensor& ids,
                                  Device dev) {
  check_shape("embedding_bwd", "dtable", dtable, {-1, -1}, dev);
  check_dtype("embedding_bwd", "dtable", dtable, DType::kF32);
  const int64_t V = dtable.dim(0), H = dtable.dim(1);
  check_shape("embedding_bwd", "ids", ids, {-1}, dev);
  check_dtype("embedding_bwd", "ids", ids, DType::kI32);
  const int64_t T = ids.dim(0);
  check_shape("embedding_bwd", "dout", dout, {T, H}, dev);
  return {V, H, T};
}

MatrixDims check_rmsnorm_fwd(const Tensor& y, const Tensor& rstd, const Tensor& x, const Tensor& w,
                             Device dev) {
  check_shape("rmsnorm_fwd", "x", x, {-1, -1}, dev);
  const int64_t T = x.dim(0), H = x.dim(1);
  check_shape("rmsnorm_fwd", "y", y, {T, H}, dev);
  check_shape("rmsnorm_fwd", "w", w, {H}, dev);
  check_shape("rmsnorm_fwd", "rstd", rstd, {T}, dev);
  check_dtype("rmsnorm_fwd", "rstd", rstd, DType::kF32);
  check_same_dtype("rmsnorm_fwd", "y", y, "x", x);
  check_same_dtype("rmsnorm_fwd", "w", w, "x", x);
  check_float("rmsnorm_fwd", "x", x);
  return {T, H};
}

MatrixDims check_rmsnorm_bwd(const Tensor& dx, const Tensor& dw, const Tensor& dy, const Tensor& x,
                             const Tensor& w, const Tensor& rstd, Device dev) {
  check_shape("rmsnorm_bwd", "x", x, {-1, -1}, dev);
  const int64_t T = x.dim(0), H = x.dim(1);
  check_shape("rmsnorm_bwd", "dx", dx, {T, H}, dev);
  check_shape("rmsnorm_bwd", "dy", dy, {T, H}, dev);
  check_shape("rmsnorm_bwd", "w", w, {H}, dev);
  check_shape("rmsnorm_bwd", "dw", dw, {H}, dev);
  check_shape("rmsnorm_bwd", "rstd", rstd, {T}, dev);
  check_dtype("rmsnorm_bwd", "dw", dw, DType::kF32);
  check_dtype("rmsnorm_bwd", "rstd", rstd, DType::kF32);
  check_same_dtype("rmsnorm_bwd", "dx", dx, "x", x);
  check_same_dtype("rmsnorm_bwd", "dy", dy, "x", x);
  check_same_dtype("rmsnorm_bwd", "w", w, "x", x);
  check_float("rmsnorm_bwd", "x", x);
  return {T, H};
}

MatrixDims check_bias_grad(const Tensor& db, const Tensor& dy, Device dev) {
  check_shape("bias_grad", "dy", dy, {-1, -1}, dev);
  const int64_t M = dy.dim(0), N = dy.dim(1);
  check_shape("bias_grad", "db", db, {N}, dev);
  check_dtype("bias_grad", "db", db, DType::kF32);
  check_float("bias_grad", "dy", dy);
  return {M, N};
}

RopeDims check_rope_tables(const Tensor& cos, const Tensor& sin, const Tensor& pos,
                           const Tensor& inv_freq, Device dev) {
  check_shape("rope_tables", "inv_freq", inv_freq, {-1}, dev);
  check_dtype("rope_tables", "inv_freq", inv_freq, DType::kF32);
  const int64_t half = inv_freq.dim(0);
  check_shape("rope_tables", "pos", pos, {-1}, dev);
  check_dtype("rope_tables", "pos", pos, DType::kI32);
  const int64_t T = pos.dim(0);
  check_shape("rope_tables", "cos", cos, {T, half}, dev);
  check_shape("rope_tables", "sin", sin, {T, half}, dev);
  check_dtype("rope_tables", "cos", cos, DType::kF32);
  check_dtype("rope_tables", "sin", sin, DType::kF32);
  return {T, 0, half};
}

RopeDims check_rope(std::string_view op, const Tensor& x, const Tensor& cos, const Tensor& sin,
                    Device dev) {
  check_shape(op, "x", x, {-1, -1, -1}, dev);
  const int64_t T = x.dim(0), NH = x.dim(1), D = x.dim(2);
  check_shape(op, "cos", cos, {T, -1}, dev);
  const int64_t half = cos.dim(1);
  if (half < 1 || 2 * half > D)
    fail("{}: cos/sin have {} columns; the rotated part 2·{} must be in [2, head dim {}]", op, half,
         half, D);
  check_shape(op, "sin", sin, {T, half}, dev);
  check_dtype(op, "cos", cos, DType::kF32);
  check_dtype(op, "sin", sin, DType::kF32);
  check_float(op, "x", x);
  return {T, NH, half, D};
}

GemmDims check_matmul_dims(const Tensor& C, const Tensor& A, Trans ta, const Tensor& B, Trans tb) {
  const int64_t M = C.dim(0), N = C.dim(1);
  const int64_t am = ta == Trans::kN ? A.dim(0) : A.dim(1);
  const int64_t K = ta == Trans::kN ? A.dim(1) : A.dim(0);
  const int64_t bk = tb == Trans::kN ? B.dim(0) : B.dim(1);
  const int64_t bn = tb == Trans::kN ? B.dim(1) : B.dim(0);
  if (am != M || bk != K || bn != N)
    fail("matmul: shapes do not fit: C {}, A{} {}, B{} {} (need op(A) [M, K], op(B) [K, N])",
         C.describe(), ta == Trans::kT ? "ᵀ" : "", A.describe(), tb == Trans::kT ? "ᵀ" : "",
         B.describe());
  return {M, N, K};
}

void check_varlen(std::string_view op, int64_t T, std::span<const int32_t> cu, int64_t max_seqlen) {
  if (cu.size() < 2 || cu.front() != 0 || cu.back() != T)
    fail("{}: cu_seqlens must start at 0 and end at T = {} (got {} entries, last {})", op, T,
         cu.size(), cu.empty() ? -1 : cu.back());
  for (size_t i = 1; i < cu.size(); ++i) {
    const int64_t len = cu[i] - cu[i - 1];
    if (len < 0 || len > max_seqlen)
      fail("{}: sequence {} has length {}, expected 0..max_seqlen = {}", op, i - 1, len,
           max_seqlen);
  }
}

void unsupported_variant(std::string_view op, std::string_view what, Device dev) {
  fail("{}: {} is not implemented on the {} backend", op, what,
       dev == Device::kCPU ? "cpu" : "cuda");
}

}  // namespace zt::opcheck
