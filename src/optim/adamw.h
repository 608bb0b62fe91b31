// AdamW with torch.optim.AdamW's arithmetic (default single-tensor path, `_single_tensor_adam` with
// decoupled weight decay), element by element in fp32, on a contiguous shard.
//
// Per element, in this order (torch 2.x CPU kernels; every operation rounds to fp32):
//   g = g_raw * grad_scale          clip_grad_norm_: grad.mul_(clip_coef_clamped)
//   p = p * decay_factor            p.mul_(1 - lr*wd) (wd != 0; the factor is 1 otherwise)
//   m = fma(c, g - m, base)         exp_avg.lerp_(g, w), w = fp32(1-beta1). torch's CPU lerp is one
//                                   FMA: c = w, base = m when |w| < 0.5; else c = w-1, base = g
//   v = fma(omb2 * g, g, v * beta2) exp_avg_sq.mul_(beta2).addcmul_(g, g, value=1-beta2); torch's
//                                   CPU addcmul is self + (value*t1)*t2, fused
//   d = sqrt(v) / bc2_sqrt + eps    (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
//   p = p + (neg_step_size * m) / d p.addcdiv_(exp_avg, denom, value=-step_size)
// The scalars are Python float64 values rounded once to fp32, as torch's kernels round a Scalar.
// sqrt is the correctly rounded IEEE one (torch on CUDA; stock torch on the CPU uses a vectorised
// sqrt that is 1 ulp off for some inputs — see tools/make_optim_goldens.py).
// The two FMAs are explicit (std::fma / __fmaf_rn), never compiler contraction: the host code
// relies on -ffp-contract=off, the device code uses __f*_rn intrinsics throughout, so every build
// and device rounds the same way (checked on an H200: device == host bit for bit).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define ZT_OPTIM_HD __host__ __device__ __forceinline__
#else
#define ZT_OPTIM_HD [[gnu::always_inline]] inline
#endif

namespace zt::optim {

// Hyper-parameters of one parameter group (torch `param_group`), as Python floats. Defaults are
// TRL SFTConfig's (adam_beta1/adam_beta2/adam_epsilon; weight_decay 0).
struct AdamWParams {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

// The fp32 scalars of one AdamW step of one parameter group. Built by adamw_step(); plain data so a
// GPU kernel can take it by value.
struct AdamWStep {
  float grad_scale = 1.0f;             // clip coefficient (clip_coefficient()), 1 = no clipping
  bool decay = false;                  // weight_decay != 0
  float decay_factor = 1.0f;           // fp32(1 - lr*wd); exactly 1 when !decay (torch skips the
                                       // p.mul_ then; multiplying by 1 changes no bit)
  float lerp_coef = 0.1f;              // w if |w| < 0.5 else w - 1, w = fp32(1 - beta1)
  bool lerp_from_m = true;             // |w| < 0.5: the FMA adds to m, else to g
  float beta2 = 0.999f;                // fp32(beta2)
  float one_minus_beta2 = 0.001f;      // fp32(1 - beta2)
  float bias_correction2_sqrt = 1.0f;  // fp32((1 - beta2**t) ** 0.5)
  float eps = 1e-8f;                   // fp32(eps)
  float neg_step_size = 0.0f;          // fp32(-(lr / (1 - beta1**t)))
};

// Scalars of step number `step` (1-based: the first update is step 1, as torch's state["step"]
// after its increment) at learning rate `lr` (Python float, e.g. LrSchedule::lr()). grad_scale
// multiplies the gradient first (the fp32 clip coefficient). Scalar maths is float64 exactly as
// torch's Python code does it: 1 - beta1**step, lr / bc1, bc2 ** 0.5 (pow, not sqrt). Throws
// zt::Error for step < 1 or hyper-parameters torch rejects (beta outside [0, 1), eps < 0, lr < 0,
// weight_decay < 0). torch keeps `step` in an fp32 tensor; it is exact up to 2^24 steps, as here.
AdamWStep adamw_step(const AdamWParams& params, double lr, int64_t step, float grad_scale);

// One element of the update (the formula of the header comment); the one definition shared by the
// CPU loop and the CUDA kernel. p, m, v are updated in place; g is the raw (unclipped) gradient.
// kLerpFromM must equal s.lerp_from_m (a template parameter so that SIMD loops have no select on a
// scalar flag); adamw_element() below picks it.
template <bool kLerpFromM>
ZT_OPTIM_HD void adamw_element_t(const AdamWStep s, float& p, float& m, float& v, float g) {
#if defined(__CUDA_ARCH__)
  // Explicitly rounded intrinsics: never contracted, whatever nvcc's --fmad setting.
  const float gs = __fmul_rn(g, s.grad_scale);
  const float pp0 = __fmul_rn(p, s.decay_factor);
  const float mm = __fmaf_rn(s.lerp_coef, __fsub_rn(gs, m), kLerpFromM ? m : gs);
  const float vv = __fmaf_rn(__fmul_rn(s.one_minus_beta2, gs), gs, __fmul_rn(v, s.beta2));
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vv), s.bias_correction2_sqrt), s.eps);
  const float pp = __fadd_rn(pp0, __fdiv_rn(__fmul_rn(s.neg_step_size, mm), denom));
#else
  const float gs = g * s.grad_scale;
  const float pp0 = p * s.decay_factor;  // decay_factor is exactly 1 without weight decay: p*1 == p
  const float mm = std::fma(s.lerp_coef, gs - m, kLerpFromM ? m : gs);
  float vv = v * s.beta2;
  vv = std::fma(s.one_minus_beta2 * gs, gs, vv);
  const float denom = std::sqrt(vv) / s.bias_correction2_sqrt + s.eps;
  const float pp = pp0 + (s.neg_step_size * mm) / denom;
#endif
  p = pp;
  m = mm;
  v = vv;
}

ZT_OPTIM_HD void adamw_element(const AdamWStep s, float& p, float& m, float& v, float g) {
  if (s.lerp_from_m)
    adamw_element_t<true>(s, p, m, v, g);
  else
    adamw_element_t<false>(s, p, m, v, g);
}

// CPU AdamW over a contiguous fp32 shard: p (master weights), m (exp_avg), v (exp_avg_sq), all [n],
// updated in place; g [n] is the raw gradient (scaled by s.grad_scale inside). When p_bf16 is not
// null it receives the bf16 compute weights master_hi(p) [n] (optim/master_split.h: round to
// nearest, ties away from zero — torch's .to(bfloat16) rounds ties to even; they differ only on an
// exact tie, by one ulp, so the master can be stored split on the GPU). Bitwise equal to
// adamw_element() per element whatever the thread count or SIMD width (element-wise, no reduction).
// OpenMP-parallel above a size threshold; dispatches to AVX-512 / AVX2+FMA builds of the same loop
// when the CPU has them. The arrays must not overlap (p_bf16 included).
void adamw_cpu(const AdamWStep& s, float* p, float* m, float* v, const float* g, size_t n,
               uint16_t* p_bf16 = nullptr);

// adamw_cpu on the calling thread only: the same build (AVX-512 / AVX2+FMA / generic) and bits,
// never OpenMP, whatever n. The building block of a caller's own parallel split (HostAdamW,
// optim/host_adamw.h); splitting a shard anywhere gives the same bits (element-wise).
void adamw_cpu_range(const AdamWStep& s, float* p, float* m, float* v, const float* g, size_t n,
                     uint16_t* p_bf16 = nullptr);

// CUDA AdamW over a contiguous fp32 shard in device memory: the same arguments and per-element
// arithmetic as adamw_cpu (adamw_element(), explicitly rounded intrinsics on the device), so the
// results are bitwise equal to adamw_cpu's for the same inputs, p_bf16 included (for non-NaN
// results: the GPU's arithmetic returns a canonical NaN where x86 propagates the input's payload).
// p, m, v, g, p_bf16 are device pointers (p_bf16 may be null); `stream` is a cudaStream_t
// (nullptr = the legacy default stream). Only enqueues work. Throws zt::Error naming adamw_cuda
// when the launch fails, and always in a build without CUDA.
void adamw_cuda(const AdamWStep& s, float* p, float* m, float* v, const float* g, size_t n,
                uint16_t* p_bf16, void* stream);

// AdamW on split master weights (optim/master_split.h): element i's master weight is
// p = master_join(hi[i], lo[i]), where hi [n] are the bf16 compute weights and lo [n] the low
// halves; both are rewritten in place from the updated p' (hi ← master_hi(p'), lo ← master_lo(p')).
// m, v [n] fp32 updated in place, g [n] the raw gradient. For non-NaN results: the same bits as
// adamw_cpu on the joined p with p_bf16 (p' = master_join of the new halves, hi = its p_bf16).
// Same builds, threading and no-overlap rule as adamw_cpu.
void adamw_split_cpu(const AdamWStep& s, uint16_t* hi, uint16_t* lo, float* m, float* v,
                     const float* g, size_t n);
// adamw_split_cpu on the calling thread only (never OpenMP): the building block of HostAdamW.
void adamw_split_cpu_range(const AdamWStep& s, uint16_t* hi, uint16_t* lo, float* m, float* v,
                           const float* g, size_t n);

// adamw_split_cpu on the device: hi, lo, m, v, g device pointers, `stream` a cudaStream_t. The same
// bits as adamw_split_cpu. Only enqueues; throws zt::Error naming adamw_split_cuda when the launch
// fails, and always in a build without CUDA.
void adamw_split_cuda(const AdamWStep& s, uint16_t* hi, uint16_t* lo, float* m, float* v,
                      const float* g, size_t n, void* stream);

// The builds adamw_cpu picks from (the best the CPU runs). Exposed so tests can run each one.
enum class AdamWBuild { kAuto, kGeneric, kAvx2, kAvx512 };

// adamw_cpu with the given build; returns false, touching nothing, when this CPU cannot run it.
bool adamw_cpu_build(AdamWBuild build, const AdamWStep& s, float* p, float* m, float* v,
                     const float* g, size_t n, uint16_t* p_bf16);
// adamw_split_cpu with the given build; false, touching nothing, when this CPU cannot run it.
bool adamw_split_cpu_build(AdamWBuild build, const AdamWStep& s, uint16_t* hi, uint16_t* lo,
                           float* m, float* v, const float* g, size_t n);

}  // namespace zt::optim
