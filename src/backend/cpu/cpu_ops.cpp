// CpuOps: elementwise ops, embedding, RMSNorm, RoPE, SwiGLU and reductions. See cpu_ops.h.
#include "backend/cpu/cpu_ops.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_common.h"
#include "core/tensor.h"

namespace zt {

using namespace cpu;

CpuOps::CpuOps(CpuOpsOptions options) : opt_(options), threads_(omp_get_max_threads()) {
  if (opt_.ce_chunk_rows < 1 || opt_.attn_block_rows < 1)
    fail("CpuOps: ce_chunk_rows ({}) and attn_block_rows ({}) must be >= 1", opt_.ce_chunk_rows,
         opt_.attn_block_rows);
  // One thread pool: OpenBLAS's own pthreads spinning next to the OpenMP team makes both crawl
  // (measured 4x slower on 2 cores), so every sgemm call is single-threaded and CpuOps splits the
  // work over OpenMP threads itself (gemm() in cpu_matmul.cpp).
  openblas_set_num_threads(1);
}

std::string CpuOps::name() const {
  return fmt::format("cpu ({} OpenMP threads, OpenBLAS)", threads_);
}

void CpuOps::zero(const Tensor& x, Stream) {
  if (x.numel() > 0) std::memset(x.data, 0, x.nbytes());
}

void CpuOps::copy_from_host(const Tensor& dst, const void* src, Stream) {
  if (dst.device != Device::kCPU) fail("copy_from_host: dst is not in host memory");
  if (dst.numel() > 0) std::memcpy(dst.data, src, dst.nbytes());
}

void CpuOps::copy_to_host(void* dst, const Tensor& src, Stream) {
  if (src.device != Device::kCPU) fail("copy_to_host: src is not in host memory");
  if (src.numel() > 0) std::memcpy(dst, src.data, src.nbytes());
}

void CpuOps::cast(const Tensor& dst, const Tensor& src, Stream) {
  opcheck::check_cast(dst, src);
  const int64_t n = src.numel();
  dispatch_float(dst.dtype, "cast", "dst", [&](auto dt) {
    using D = decltype(dt);
    dispatch_float(src.dtype, "cast", "src", [&](auto sdt) {
      using S = decltype(sdt);
      const S* s = src.as<S>();
      D* d = dst.as<D>();
#pragma omp parallel for schedule(static) if (n >= kParallelWork)
      for (int64_t i = 0; i < n; ++i) st(d, i, ld(s, i));
    });
  });
}

void CpuOps::add(const Tensor& out, const Tensor& a, const Tensor& b, Stream) {
  opcheck::check_add(out, a, b);
  const int64_t n = out.numel();
  dispatch_float(out.dtype, "add", "out", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.as<T>();
    const T* pb = b.as<T>();
    T* po = out.as<T>();
#pragma omp parallel for schedule(static) if (n >= kParallelWork)
    for (int64_t i = 0; i < n; ++i) st(po, i, ld(pa, i) + ld(pb, i));
  });
}

void CpuOps::embedding_fwd(const Tensor& out, const Tensor& table, const Tensor& ids, Stream) {
  const opcheck::EmbeddingDims d = opcheck::check_embedding_fwd(out, table, ids, Device::kCPU);
  const int64_t V = d.V, H = d.H, T = d.T;
  const int32_t* id = ids.as<int32_t>();
  for (int64_t t = 0; t < T; ++t)
    if (id[t] < 0 || id[t] >= V)
      fail("embedding_fwd: token id {} at position {} is outside the vocabulary [0, {})", id[t], t,
           V);
  const size_t row_bytes = static_cast<size_t>(H) * dtype_size(table.dtype);
  const char* src = static_cast<const char*>(table.data);
  char* dst = static_cast<char*>(out.data);
#pragma omp parallel for schedule(static) if (T * H >= kParallelWork)
  for (int64_t t = 0; t < T; ++t)
    std::memcpy(dst + t * row_bytes, src + id[t] * row_bytes, row_bytes);
}

void CpuOps::embedding_bwd(const Tensor& dtable, const Tensor& dout, const Tensor& ids, float beta,
                           const Tensor&, Stream) {
  const opcheck::EmbeddingDims d = opcheck::check_embedding_bwd(dtable, dout, ids, Device::kCPU);
  const int64_t V = d.V, H = d.H, T = d.T;
  const int32_t* id = ids.as<int32_t>();
  for (int64_t t = 0; t < T; ++t)
    if (id[t] < 0 || id[t] >= V)
      fail("embedding_bwd: token id {} at position {} is outside the vocabulary [0, {})", id[t], t,
           V);
  float* dt = dtable.as<float>();
  if (beta == 0.0f) {
    zero(dtable, {});
  } else if (beta != 1.0f) {
    const int64_t n = V * H;
#pragma omp parallel for schedule(static) if (n >= kParallelWork)
    for (int64_t i = 0; i < n; ++i) dt[i] *= beta;
  }
  // Each thread owns a block of columns and adds the rows in token order: no two threads touch
  // the same element, and every element sees the same addition order for any thread count.
  constexpr int64_t kCols = 64;
  const int64_t nblk = (H + kCols - 1) / kCols;
  dispatch_float(dout.dtype, "embedding_bwd", "dout", [&](auto tag) {
    using T_ = decltype(tag);
    const T_* g = dout.as<T_>();
#pragma omp parallel for schedule(static) if (T * H >= kParallelWork)
    for (int64_t b = 0; b < nblk; ++b) {
      const int64_t j0 = b * kCols, j1 = std::min(H, j0 + kCols);
      for (int64_t t = 0; t < T; ++t) {
        float* row = dt + id[t] * H;
        const T_* grow = g + t * H;
        for (int64_t j = j0; j < j1; ++j) row[j] += ld(grow, j);
      }
    }
  });
}

void CpuOps::rmsnorm_fwd(const Tensor& y, const Tensor& rstd, const Tensor& x, const Tensor& w,
                         float eps, Stream) {
  const opcheck::MatrixDims d = opcheck::check_rmsnorm_fwd(y, rstd, x, w, Device::kCPU);
  const int64_t T = d.rows, H = d.cols;
  float* rs = rstd.as<float>();
  dispatch_float(x.dtype, "rmsnorm_fwd", "x", [&](auto tag) {
    using T_ = decltype(tag);
    const T_* px = x.as<T_>();
    const T_* pw = w.as<T_>();
    T_* py = y.as<T_>();
#pragma omp parallel for schedule(static) if (T * H >= kParallelWork)
    for (int64_t t = 0; t < T; ++t) {
      const T_* xr = px + t * H;
      float acc[16] = {};
      int64_t j = 0;
      for (; j + 16 <= H; j += 16)
        for (int k = 0; k < 16; ++k) {
          const float v = ld(xr, j + k);
          acc[k] += v * v;
        }
      for (int k = 0; j < H; ++j, ++k) {
        const float v = ld(xr, j);
        acc[k] += v * v;
      }
      for (int wd = 8; wd >= 1; wd /= 2)
        for (int k = 0; k < wd; ++k) acc[k] += acc[k + wd];
      const float r = 1.0f / std::sqrt(acc[0] / static_cast<float>(H) + eps);
      rs[t] = r;
      T_* yr = py + t * H;
      for (int64_t c = 0; c < H; ++c) st(yr, c, ld(pw, c) * round_to<T_>(ld(xr, c) * r));
    }
  });
}

void CpuOps::rmsnorm_bwd(const Tensor& dx, bool accumulate_dx, const Tensor& dw, float beta_dw,
                         const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd,
                         Stream) {
  const opcheck::MatrixDims d = opcheck::check_rmsnorm_bwd(dx, dw, dy, x, w, rstd, Device::kCPU);
  const int64_t T = d.rows, H = d.cols;
  const float* rs = rstd.as<float>();
  float* pdw = dw.as<float>();
  dispatch_float(x.dtype, "rmsnorm_bwd", "x", [&](auto tag) {
    using T_ = decltype(tag);
    const T_* px = x.as<T_>();
    const T_* pw = w.as<T_>();
    const T_* pdy = dy.as<T_>();
    T_* pdx = dx.as<T_>();
    // dw first (dx may alias dy): column blocks, rows added in order.
    constexpr int64_t kCols = 64;
    const int64_t nblk = (H + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if (T * H >= kParallelWork)
    for (int64_t b = 0; b < nblk; ++b) {
      const int64_t j0 = b * kCols, n = std::min(H, j0 + kCols) - j0;
      float acc[kCols] = {};
      for (int64_t t = 0; t < T; ++t) {
        const T_* xr = px + t * H + j0;
        const T_* gr = pdy + t * H + j0;
        const float r = rs[t];
        for (int64_t j = 0; j < n; ++j) acc[j] += ld(gr, j) * round_to<T_>(ld(xr, j) * r);
      }
      for (int64_t j = 0; j < n; ++j)
        pdw[j0 + j] = (beta_dw == 0.0f ? 0.0f : beta_dw * pdw[j0 + j]) + acc[j];
    }
#pragma omp parallel for schedule(static) if (T * H >= kParallelWork)
    for (int64_t t = 0; t < T; ++t) {
      const T_* xr = px + t * H;
      const T_* gr = pdy + t * H;
      T_* dxr = pdx + t * H;
      const float r = rs[t];
      float acc[16] = {};
      int64_t j = 0;
      for (; j + 16 <= H; j += 16)
        for (int k = 0; k < 16; ++k)
          acc[k] += (ld(gr, j + k) * ld(pw, j + k)) * (ld(xr, j + k) * r);
      for (int k = 0; j < H; ++j, ++k) acc[k] += (ld(gr, j) * ld(pw, j)) * (ld(xr, j) * r);
      for (int wd = 8; wd >= 1; wd /= 2)
        for (int k = 0; k < wd; ++k) acc[k] += acc[k + wd];
      const float mean = acc[0] / static_cast<float>(H);
      for (int64_t c = 0; c < H; ++c) {
        const float g = ld(gr, c) * ld(pw, c);
        const float v = r * (g - (ld(xr, c) * r) * mean);
        st(dxr, c, accumulate_dx ? ld(dxr, c) + v : v);
      }
    }
  });
}

void CpuOps::bias_grad(const Tensor& db, const Tensor& dy, float beta, Stream) {
  const opcheck::MatrixDims d = opcheck::check_bias_grad(db, dy, Device::kCPU);
  const int64_t M = d.rows, N = d.cols;
  float* out = db.as<float>();
  constexpr int64_t kCols = 64;
  const int64_t nblk = (N + kCols - 1) / kCols;
  dispatch_float(dy.dtype, "bias_grad", "dy", [&](auto tag) {
    using T_ = decltype(tag);
    const T_* g = dy.as<T_>();
#pragma omp parallel for schedule(static) if (M * N >= kParallelWork)
    for (int64_t b = 0; b < nblk; ++b) {
      const int64_t j0 = b * kCols, n = std::min(N, j0 + kCols) - j0;
      float acc[kCols] = {};
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < n; ++j) acc[j] += ld(g + i * N + j0, j);
      for (int64_t j = 0; j < n; ++j)
        out[j0 + j] = (beta == 0.0f ? 0.0f : beta * out[j0 + j]) + acc[j];
    }
  });
}

void CpuOps::rope_tables(const Tensor& cos, const Tensor& sin, const Tensor& pos,
                         const Tensor& inv_freq, float attention_scaling, Stream) {
  const opcheck::RopeDims d = opcheck::check_rope_tables(cos, sin, pos, inv_freq, Device::kCPU);
  const int64_t T = d.T, half = d.half;
  const int32_t* p = pos.as<int32_t>();
  const float* f = inv_freq.as<float>();
  float* c = cos.as<float>();
  float* s = sin.as<float>();
#pragma omp parallel for schedule(static) if (T * half * 16 >= kParallelWork)
  for (int64_t t = 0; t < T; ++t) {
    const float pt = static_cast<float>(p[t]);
    for (int64_t i = 0; i < half; ++i) {
      const float a = f[i] * pt;
      c[t * half + i] = std::cos(a) * attention_scaling;
      s[t * half + i] = std::sin(a) * attention_scaling;
    }
  }
}

namespace {

// Rotates x [T, heads, D] in place by +angle (sign = 1) or -angle (sign = -1).
void rope_apply(const char* op, const Tensor& x, const Tensor& cos, const Tensor& sin, float sign) {
  const opcheck::RopeDims d = opcheck::check_rope(op, x, cos, sin, Device::kCPU);
  const int64_t T = d.T, NH = d.heads, half = d.half;
  const int64_t D = 2 * half;
  const float* c = cos.as<float>();
  const float* s = sin.as<float>();
  dispatch_float(x.dtype, op, "x", [&](auto tag) {
    using T_ = decltype(tag);
    T_* px = x.as<T_>();
#pragma omp parallel for schedule(static) if (T * NH * D >= kParallelWork)
    for (int64_t t = 0; t < T; ++t) {
      const float* ct = c + t * half;
      const float* stb = s + t * half;
      for (int64_t h = 0; h < NH; ++h) {
        T_* v = px + (t * NH + h) * D;
        for (int64_t i = 0; i < half; ++i) {
          const float a = ld(v, i), b = ld(v, i + half);
          const float si = sign * stb[i];
          st(v, i, a * ct[i] - b * si);
          st(v, i + half, b * ct[i] + a * si);
        }
      }
    }
  });
}

}  // namespace

void CpuOps::rope_fwd(const Tensor& x, const Tensor& cos, const Tensor& sin, Stream) {
  rope_apply("rope_fwd", x, cos, sin, 1.0f);
}

void CpuOps::rope_bwd(const Tensor& dx, const Tensor& cos, const Tensor& sin, Stream) {
  rope_apply("rope_bwd", dx, cos, sin, -1.0f);
}

void CpuOps::swiglu_fwd(const Tensor& out, const Tensor& gate, const Tensor& up, Stream) {
  opcheck::check_swiglu_fwd(out, gate, up);
  const int64_t n = out.numel();
  dispatch_float(out.dtype, "swiglu_fwd", "out", [&](auto tag) {
    using T_ = decltype(tag);
    const T_* g = gate.as<T_>();
    const T_* u = up.as<T_>();
    T_* o = out.as<T_>();
#pragma omp parallel for schedule(static) if (n * 8 >= kParallelWork)
    for (int64_t i = 0; i < n; ++i) {
      const float gv = ld(g, i);
      st(o, i, gv / (1.0f + std::exp(-gv)) * ld(u, i));
    }
  });
}

void CpuOps::swiglu_bwd(const Tensor& dgate, const Tensor& dup, const Tensor& dout,
                        const Tensor& gate, const Tensor& up, Stream) {
  opcheck::check_swiglu_bwd(dgate, dup, dout, gate, up);
  const int64_t n = gate.numel();
  dispatch_float(gate.dtype, "swiglu_bwd", "gate", [&](auto tag) {
    using T_ = decltype(tag);
    const T_* g = gate.as<T_>();
    const T_* u = up.as<T_>();
    const T_* d = dout.as<T_>();
    T_* dg = dgate.as<T_>();
    T_* du = dup.as<T_>();
#pragma omp parallel for schedule(static) if (n * 8 >= kParallelWork)
    for (int64_t i = 0; i < n; ++i) {
      const float gv = ld(g, i), uv = ld(u, i), dv = ld(d, i);
      const float sig = 1.0f / (1.0f + std::exp(-gv));
      const float silu = gv * sig;
      st(du, i, dv * silu);
      st(dg, i, dv * uv * (sig * (1.0f + gv * (1.0f - sig))));
    }
  });
}

size_t CpuOps::sumsq_workspace_bytes(const Tensor& x) const {
  const int64_t nblk = (x.numel() + kSumsqBlock - 1) / kSumsqBlock;
  return WorkspaceCarver::bytes(nblk, sizeof(double));
}

void CpuOps::sumsq(double* out, const Tensor& x, const Tensor& workspace, Stream) {
  const int64_t n = x.numel();
  const int64_t nblk = (n + kSumsqBlock - 1) / kSumsqBlock;
  check_workspace("sumsq", workspace, sumsq_workspace_bytes(x));
  double* part = static_cast<double*>(workspace.data);
  dispatch_float(x.dtype, "sumsq", "x", [&](auto tag) {
    using T_ = decltype(tag);
    const T_* p = x.as<T_>();
#pragma omp parallel for schedule(static) if (n >= kParallelWork)
    for (int64_t b = 0; b < nblk; ++b) {
      const int64_t i0 = b * kSumsqBlock, i1 = std::min(n, i0 + kSumsqBlock);
      double acc[8] = {};
      int64_t i = i0;
      for (; i + 8 <= i1; i += 8)
        for (int k = 0; k < 8; ++k) {
          const double v = ld(p, i + k);
          acc[k] += v * v;
        }
      for (int k = 0; i < i1; ++i, ++k) {
        const double v = ld(p, i);
        acc[k] += v * v;
      }
      part[b] = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    }
  });
  double total = 0.0;
  for (int64_t b = 0; b < nblk; ++b) total += part[b];
  *out = total;
}

}  // namespace zt
