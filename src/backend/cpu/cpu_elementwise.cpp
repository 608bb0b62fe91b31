// CpuOps elementwise ops (backend/cuda/cuda_elementwise.cu): cast, add, RoPE tables and rotation
// (full or partial rotary), gated-MLP activation (SwiGLU / GeGLU) forward and backward. See
// cpu_ops.h. Every output element is computed by one iteration from its own inputs: no reductions.
#include <cmath>
#include <type_traits>

#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_ops.h"
#include "core/tensor.h"

namespace zt {

using namespace cpu;

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

// Rotates x [T, heads, D] in place by +angle (sign = 1) or -angle (sign = -1): the first
// R = 2·half elements of each head (cos/sin [T, half]); elements [R, D) are neither read nor
// written (partial rotary), so they stay bitwise unchanged.
void rope_apply(const char* op, const Tensor& x, const Tensor& cos, const Tensor& sin, float sign) {
  const opcheck::RopeDims d = opcheck::check_rope(op, x, cos, sin, Device::kCPU);
  const int64_t T = d.T, NH = d.heads, half = d.half, D = d.head_dim;
  const float* c = cos.as<float>();
  const float* s = sin.as<float>();
  dispatch_float(x.dtype, op, "x", [&](auto tag) {
    using T_ = decltype(tag);
    T_* px = x.as<T_>();
#pragma omp parallel for schedule(static) if (T * NH * 2 * half >= kParallelWork)
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

namespace {

template <GluActivation A>
using ActTag = std::integral_constant<GluActivation, A>;

// Calls f(ActTag<act>{}), so the activation is a compile-time constant inside the loops.
template <class F>
void dispatch_act(GluActivation act, const char* op, F&& f) {
  switch (act) {
    case GluActivation::kSilu:
      f(ActTag<GluActivation::kSilu>{});
      return;
    case GluActivation::kGeluTanh:
      f(ActTag<GluActivation::kGeluTanh>{});
      return;
  }
  fail("{}: unknown activation {}", op, static_cast<int>(act));
}

// gelu_tanh constants (torch's approximate="tanh"): √(2/π) and the cubic coefficient.
constexpr float kGeluBeta = 0.7978845608028654f;
constexpr float kGeluKappa = 0.044715f;

}  // namespace

// out = act(g)·u, act in fp32 and the product rounded once to the storage type.
void CpuOps::swiglu_fwd(const Tensor& out, const Tensor& gate, const Tensor& up, Stream,
                        GluActivation act) {
  opcheck::check_swiglu_fwd(out, gate, up);
  const int64_t n = out.numel();
  dispatch_act(act, "swiglu_fwd", [&](auto atag) {
    constexpr GluActivation A = decltype(atag)::value;
    dispatch_float(out.dtype, "swiglu_fwd", "out", [&](auto tag) {
      using T_ = decltype(tag);
      const T_* g = gate.as<T_>();
      const T_* u = up.as<T_>();
      T_* o = out.as<T_>();
#pragma omp parallel for schedule(static) if (n * 8 >= kParallelWork)
      for (int64_t i = 0; i < n; ++i) {
        const float gv = ld(g, i);
        if constexpr (A == GluActivation::kSilu) {
          st(o, i, gv / (1.0f + std::exp(-gv)) * ld(u, i));
        } else {
          const float th = std::tanh(kGeluBeta * (gv + kGeluKappa * (gv * gv * gv)));
          st(o, i, (0.5f * gv * (1.0f + th)) * ld(u, i));
        }
      }
    });
  });
}

// dup = dout·act(g), dgate = (dout·u)·act'(g), all fp32, each rounded once to the storage type.
// silu'(g) = σ(1 + g(1 - σ)); gelu_tanh'(g) = ½(1 + t) + ½g(1 - t²)·√(2/π)(1 + 3κg²).
void CpuOps::swiglu_bwd(const Tensor& dgate, const Tensor& dup, const Tensor& dout,
                        const Tensor& gate, const Tensor& up, Stream, GluActivation act) {
  opcheck::check_swiglu_bwd(dgate, dup, dout, gate, up);
  const int64_t n = gate.numel();
  dispatch_act(act, "swiglu_bwd", [&](auto atag) {
    constexpr GluActivation A = decltype(atag)::value;
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
        if constexpr (A == GluActivation::kSilu) {
          const float sig = 1.0f / (1.0f + std::exp(-gv));
          const float silu = gv * sig;
          st(du, i, dv * silu);
          st(dg, i, dv * uv * (sig * (1.0f + gv * (1.0f - sig))));
        } else {
          const float g2 = gv * gv;
          const float th = std::tanh(kGeluBeta * (gv + kGeluKappa * (g2 * gv)));
          const float gelu = 0.5f * gv * (1.0f + th);
          const float dgelu = 0.5f * (1.0f + th) + 0.5f * gv * (1.0f - th * th) * kGeluBeta *
                                                       (1.0f + 3.0f * kGeluKappa * g2);
          st(du, i, dv * gelu);
          st(dg, i, dv * uv * dgelu);
        }
      }
    });
  });
}

}  // namespace zt
