// Elementwise CUDA kernels: cast, add, scale, gated-MLP activation (SwiGLU, GeGLU with
// gelu_pytorch_tanh) forward/backward, RoPE tables and rotation (full or partial rotary).
// CPU reference: backend/cpu/cpu_elementwise.cpp (same operation order per element; nvcc runs with
// --fmad=false, so a*b+c is never contracted and each element rounds as on the CPU; expf / sincosf
// are CUDA's full-precision versions, within 2 ulp of the CPU's libm).
//
// Determinism: every output element is a function of the input elements at the same index only
// (no reduction), so the result cannot depend on the grid or on scheduling.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_kernels.h"

namespace zt::cuda {
namespace {

constexpr int kThreads = 256;

template <class TO, class TI, int NI, int NO>
struct MapArgs {
  const TI* in[NI];
  TO* out[NO];
};

// out_k[i] = f(in_0[i], …)_k for i < n.
// Grid: one thread per group of kVec = 8 consecutive elements, kThreads per block. With `vec`
// (every pointer 16-byte aligned) a full group moves with 16-byte loads/stores (bf16: one per
// tensor, fp32: two); the last partial group, or every group without `vec`, goes element by
// element. Traffic: each input read once, each output written once. A thread loads all its inputs
// before it stores, so an output may alias an input (in place).
template <class TO, class TI, class F>
__global__ void __launch_bounds__(kThreads)
    map_kernel(MapArgs<TO, TI, F::kIn, F::kOut> a, int64_t n, bool vec, F f) {
  const int64_t i0 = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) * kVec;
  if (i0 >= n) return;
  float x[F::kIn][kVec], y[F::kOut][kVec];
  const bool full = vec && i0 + kVec <= n;
  const int cnt = full ? kVec : static_cast<int>(n - i0 < kVec ? n - i0 : kVec);
  if (full) {
#pragma unroll
    for (int k = 0; k < F::kIn; ++k) ld8(a.in[k], i0, x[k]);
  } else {
#pragma unroll
    for (int e = 0; e < kVec; ++e)
#pragma unroll
      for (int k = 0; k < F::kIn; ++k) x[k][e] = e < cnt ? ld(a.in[k], i0 + e) : 0.0f;
  }
#pragma unroll
  for (int e = 0; e < kVec; ++e) {
    float xi[F::kIn], yo[F::kOut];
#pragma unroll
    for (int k = 0; k < F::kIn; ++k) xi[k] = x[k][e];
    f(xi, yo);
#pragma unroll
    for (int k = 0; k < F::kOut; ++k) y[k][e] = yo[k];
  }
  if (full) {
#pragma unroll
    for (int k = 0; k < F::kOut; ++k) st8(a.out[k], i0, y[k]);
  } else {
#pragma unroll
    for (int e = 0; e < kVec; ++e)
      if (e < cnt)
#pragma unroll
        for (int k = 0; k < F::kOut; ++k) st(a.out[k], i0 + e, y[k][e]);
  }
}

struct CastF {
  static constexpr int kIn = 1, kOut = 1;
  __device__ void operator()(const float (&i)[1], float (&o)[1]) const { o[0] = i[0]; }
};
struct AddF {
  static constexpr int kIn = 2, kOut = 1;
  __device__ void operator()(const float (&i)[2], float (&o)[1]) const { o[0] = i[0] + i[1]; }
};
struct ScaleF {
  static constexpr int kIn = 1, kOut = 1;
  float beta;
  __device__ void operator()(const float (&i)[1], float (&o)[1]) const { o[0] = i[0] * beta; }
};
// in: gate, up. CPU: gv / (1 + exp(-gv)) * u.
struct SwigluFwdF {
  static constexpr int kIn = 2, kOut = 1;
  __device__ void operator()(const float (&i)[2], float (&o)[1]) const {
    const float gv = i[0];
    o[0] = gv / (1.0f + expf(-gv)) * i[1];
  }
};
// in: dout, gate, up; out: dgate, dup. CPU: sig = 1/(1+exp(-g)); du = d*(g*sig);
// dg = d*u*(sig*(1 + g*(1 - sig))).
struct SwigluBwdF {
  static constexpr int kIn = 3, kOut = 2;
  __device__ void operator()(const float (&i)[3], float (&o)[2]) const {
    const float dv = i[0], gv = i[1], uv = i[2];
    const float sig = 1.0f / (1.0f + expf(-gv));
    const float silu = gv * sig;
    o[1] = dv * silu;
    o[0] = dv * uv * (sig * (1.0f + gv * (1.0f - sig)));
  }
};

// gelu_tanh(g) = ½g(1 + t), t = tanh(√(2/π)(g + 0.044715g³)) (torch approximate="tanh"), and its
// derivative ½(1 + t) + ½g(1 − t²)·√(2/π)(1 + 3·0.044715g²) (ops.h), in fp32 with tanhf.
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;
__device__ __forceinline__ float gelu_tanh_t(float g) {
  return tanhf(kSqrt2OverPi * (g + kGeluCubic * g * g * g));
}
// in: gate, up. out = gelu_tanh(g) * u.
struct GegluFwdF {
  static constexpr int kIn = 2, kOut = 1;
  __device__ void operator()(const float (&i)[2], float (&o)[1]) const {
    const float gv = i[0];
    o[0] = 0.5f * gv * (1.0f + gelu_tanh_t(gv)) * i[1];
  }
};
// in: dout, gate, up; out: dgate, dup. du = d*gelu_tanh(g); dg = d*u*gelu_tanh'(g).
struct GegluBwdF {
  static constexpr int kIn = 3, kOut = 2;
  __device__ void operator()(const float (&i)[3], float (&o)[2]) const {
    const float dv = i[0], gv = i[1], uv = i[2];
    const float t = gelu_tanh_t(gv);
    const float gelu = 0.5f * gv * (1.0f + t);
    const float dgelu =
        0.5f * (1.0f + t) +
        0.5f * gv * (1.0f - t * t) * (kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * gv * gv));
    o[1] = dv * gelu;
    o[0] = dv * uv * dgelu;
  }
};

template <class TO, class TI, class F>
void map(const char* op, MapArgs<TO, TI, F::kIn, F::kOut> a, int64_t n, F f, cudaStream_t stream) {
  if (n <= 0) return;
  bool vec = true;
  for (const TI* p : a.in) vec = vec && aligned16(p);
  for (TO* p : a.out) vec = vec && aligned16(p);
  map_kernel<TO, TI, F>
      <<<blocks_for((n + kVec - 1) / kVec, kThreads), kThreads, 0, stream>>>(a, n, vec, f);
  check_launch(op);
}

// cos/sin [T, half]: one thread per (t, i); reads pos[t] and inv_freq[i], writes two floats.
__global__ void __launch_bounds__(kThreads)
    rope_tables_kernel(float* cos, float* sin, const int32_t* pos, const float* inv_freq, int64_t T,
                       int64_t half, float scaling) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (idx >= T * half) return;
  const int64_t t = idx / half, i = idx - t * half;
  const float a = inv_freq[i] * static_cast<float>(pos[t]);
  float s, c;
  sincosf(a, &s, &c);
  cos[idx] = c * scaling;
  sin[idx] = s * scaling;
}

// x [rows = T*heads, dim] in place, over the first 2*half elements of each row: x'[i] = x[i]c -
// x[i+half]s, x'[i+half] = x[i+half]c + x[i]s with s = sign*sin; elements [2*half, dim) are not
// touched (partial rotary, dim > 2*half). One thread per (row, group of 8 pair indices i); with
// `vec` (half % 8 == 0, dim % 8 == 0, pointers aligned) the two halves and the cos/sin rows move as
// 16-byte vectors. Traffic: the rotated part of x read and written once; the cos/sin rows of token
// t are re-read by its `heads` rows (cache hits).
template <class T>
__global__ void __launch_bounds__(kThreads)
    rope_kernel(T* x, const float* cos, const float* sin, int64_t rows, int64_t heads, int64_t half,
                int64_t dim, float sign, bool vec) {
  const int64_t groups = (half + kVec - 1) / kVec;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (idx >= rows * groups) return;
  const int64_t r = idx / groups, i0 = (idx - r * groups) * kVec, t = r / heads;
  T* v = x + r * dim;
  const float* c = cos + t * half;
  const float* s = sin + t * half;
  if (vec) {
    float a[kVec], b[kVec], cc[kVec], ss[kVec], oa[kVec], ob[kVec];
    ld8(v, i0, a);
    ld8(v, i0 + half, b);
    ld8(c, i0, cc);
    ld8(s, i0, ss);
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const float si = sign * ss[e];
      oa[e] = a[e] * cc[e] - b[e] * si;
      ob[e] = b[e] * cc[e] + a[e] * si;
    }
    st8(v, i0, oa);
    st8(v, i0 + half, ob);
  } else {
    const int64_t i1 = i0 + kVec < half ? i0 + kVec : half;
    for (int64_t i = i0; i < i1; ++i) {
      const float a = ld(v, i), b = ld(v, i + half);
      const float si = sign * s[i];
      st(v, i, a * c[i] - b * si);
      st(v, i + half, b * c[i] + a * si);
    }
  }
}

}  // namespace

void launch_cast(void* dst, DType dt, const void* src, DType st, int64_t n, cudaStream_t stream) {
  if (dt == DType::kBF16 && st == DType::kF32)
    map("cast",
        MapArgs<bf16s, float, 1, 1>{{static_cast<const float*>(src)}, {static_cast<bf16s*>(dst)}},
        n, CastF{}, stream);
  else
    map("cast",
        MapArgs<float, bf16s, 1, 1>{{static_cast<const bf16s*>(src)}, {static_cast<float*>(dst)}},
        n, CastF{}, stream);
}

void launch_add(void* out, const void* a, const void* b, DType t, int64_t n, cudaStream_t stream) {
  by_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    map("add",
        MapArgs<T, T, 2, 1>{{static_cast<const T*>(a), static_cast<const T*>(b)},
                            {static_cast<T*>(out)}},
        n, AddF{}, stream);
  });
}

void launch_scale(float* x, float beta, int64_t n, cudaStream_t stream) {
  map("scale", MapArgs<float, float, 1, 1>{{x}, {x}}, n, ScaleF{beta}, stream);
}

void launch_swiglu_fwd(void* out, const void* gate, const void* up, DType t, int64_t n,
                       GluActivation act, cudaStream_t stream) {
  by_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    const MapArgs<T, T, 2, 1> a{{static_cast<const T*>(gate), static_cast<const T*>(up)},
                                {static_cast<T*>(out)}};
    if (act == GluActivation::kGeluTanh)
      map("swiglu_fwd", a, n, GegluFwdF{}, stream);
    else
      map("swiglu_fwd", a, n, SwigluFwdF{}, stream);
  });
}

void launch_swiglu_bwd(void* dgate, void* dup, const void* dout, const void* gate, const void* up,
                       DType t, int64_t n, GluActivation act, cudaStream_t stream) {
  by_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    const MapArgs<T, T, 3, 2> a{
        {static_cast<const T*>(dout), static_cast<const T*>(gate), static_cast<const T*>(up)},
        {static_cast<T*>(dgate), static_cast<T*>(dup)}};
    if (act == GluActivation::kGeluTanh)
      map("swiglu_bwd", a, n, GegluBwdF{}, stream);
    else
      map("swiglu_bwd", a, n, SwigluBwdF{}, stream);
  });
}

void launch_rope_tables(float* cos, float* sin, const int32_t* pos, const float* inv_freq,
                        int64_t T, int64_t half, float scaling, cudaStream_t stream) {
  if (T * half == 0) return;
  rope_tables_kernel<<<blocks_for(T * half, kThreads), kThreads, 0, stream>>>(
      cos, sin, pos, inv_freq, T, half, scaling);
  check_launch("rope_tables");
}

void launch_rope(void* x, DType t, const float* cos, const float* sin, int64_t T, int64_t heads,
                 int64_t half, int64_t dim, float sign, cudaStream_t stream) {
  const int64_t rows = T * heads, groups = (half + kVec - 1) / kVec;
  if (rows * groups == 0) return;
  const bool vec =
      half % kVec == 0 && dim % kVec == 0 && aligned16(x) && aligned16(cos) && aligned16(sin);
  const char* op = sign > 0 ? "rope_fwd" : "rope_bwd";
  by_dtype(t, [&](auto tag) {
    using T_ = decltype(tag);
    rope_kernel<T_><<<blocks_for(rows * groups, kThreads), kThreads, 0, stream>>>(
        static_cast<T_*>(x), cos, sin, rows, heads, half, dim, sign, vec);
  });
  check_launch(op);
}

}  // namespace zt::cuda
