// The CPU AdamW loop (adamw_cpu, adamw.h).
//
// The loop body is adamw_element() (adamw.h). It is compiled three times — generic x86-64, AVX2+FMA
// and AVX-512 — and picked at run time; the arithmetic is IEEE (add, mul, div, sqrt, fma are each
// correctly rounded), so all three give the same bits. src/CMakeLists.txt compiles this one file
// with -fno-math-errno so that sqrtf vectorises (with errno GCC guards every sqrt with a branch);
// that changes no result: the argument is never negative, and NaN gives NaN either way. (GCC's
// `#pragma GCC optimize` cannot do this: it disables vectorisation of the target clones.)
#include <algorithm>
#include <cmath>
#include <cstring>

#include "optim/adamw.h"
#include "optim/master_split.h"

namespace zt::optim {

namespace {

// One build of the loop. The `omp simd` loops must sit lexically in the function that carries the
// target attribute (GCC does not vectorise them for the caller's ISA once inlined), hence macros
// rather than a shared inline function; the body is adamw_element_t() in every build, with the
// lerp branch and the bf16 copy fixed per loop.
#define ZT_ADAMW_SIMD(FROM_M, BF16)                     \
  _Pragma("omp simd") for (size_t i = 0; i < n; ++i) {  \
    adamw_element_t<FROM_M>(k, p[i], m[i], v[i], g[i]); \
    if constexpr (BF16) pb[i] = master_hi(p[i]);        \
  }
#define ZT_ADAMW_LOOP(ATTRS, NAME)                                                 \
  ATTRS void NAME(const AdamWStep& s, float* __restrict p, float* __restrict m,    \
                  float* __restrict v, const float* __restrict g, size_t n,        \
                  uint16_t* __restrict pb) {                                       \
    const AdamWStep k = s; /* local copy: no aliasing doubts for the vectoriser */ \
    if (k.lerp_from_m) {                                                           \
      if (pb) {                                                                    \
        ZT_ADAMW_SIMD(true, true)                                                  \
      } else {                                                                     \
        ZT_ADAMW_SIMD(true, false)                                                 \
      }                                                                            \
    } else {                                                                       \
      if (pb) {                                                                    \
        ZT_ADAMW_SIMD(false, true)                                                 \
      } else {                                                                     \
        ZT_ADAMW_SIMD(false, false)                                                \
      }                                                                            \
    }                                                                              \
  }

// The split-master build: p joined from (hi, lo), updated, split back (optim/master_split.h).
#define ZT_ADAMW_SPLIT_SIMD(FROM_M)                    \
  _Pragma("omp simd") for (size_t i = 0; i < n; ++i) { \
    float pi = master_join(hi[i], lo[i]);              \
    adamw_element_t<FROM_M>(k, pi, m[i], v[i], g[i]);  \
    hi[i] = master_hi(pi);                             \
    lo[i] = master_lo(pi);                             \
  }
#define ZT_ADAMW_SPLIT_LOOP(ATTRS, NAME)                                                           \
  ATTRS void NAME(const AdamWStep& s, uint16_t* __restrict hi, uint16_t* __restrict lo,            \
                  float* __restrict m, float* __restrict v, const float* __restrict g, size_t n) { \
    const AdamWStep k = s;                                                                         \
    if (k.lerp_from_m) {                                                                           \
      ZT_ADAMW_SPLIT_SIMD(true)                                                                    \
    } else {                                                                                       \
      ZT_ADAMW_SPLIT_SIMD(false)                                                                   \
    }                                                                                              \
  }

using LoopFn = void (*)(const AdamWStep&, float*, float*, float*, const float*, size_t, uint16_t*);
using SplitFn = void (*)(const AdamWStep&, uint16_t*, uint16_t*, float*, float*, const float*,
                         size_t);

ZT_ADAMW_LOOP(, loop_generic)
ZT_ADAMW_SPLIT_LOOP(, split_generic)
#if defined(__x86_64__)
ZT_ADAMW_LOOP([[gnu::target("avx2,fma")]], loop_avx2)
ZT_ADAMW_LOOP([[gnu::target("avx512f,avx512vl,avx512bw,avx2,fma")]], loop_avx512)
ZT_ADAMW_SPLIT_LOOP([[gnu::target("avx2,fma")]], split_avx2)
ZT_ADAMW_SPLIT_LOOP([[gnu::target("avx512f,avx512vl,avx512bw,avx2,fma")]], split_avx512)
#endif
#undef ZT_ADAMW_LOOP
#undef ZT_ADAMW_SIMD
#undef ZT_ADAMW_SPLIT_LOOP
#undef ZT_ADAMW_SPLIT_SIMD

bool cpu_has(AdamWBuild b) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (b == AdamWBuild::kAvx512)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw");
  if (b == AdamWBuild::kAvx2)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  return b == AdamWBuild::kGeneric;
}

// The build b of a loop: generic, or (x86-64) its AVX2+FMA or AVX-512 compilation.
#if defined(__x86_64__)
template <class F>
F build_of(AdamWBuild b, F generic, F avx2, F avx512) {
  return b == AdamWBuild::kAvx512 ? avx512 : b == AdamWBuild::kAvx2 ? avx2 : generic;
}
LoopFn loop_of(AdamWBuild b) { return build_of<LoopFn>(b, loop_generic, loop_avx2, loop_avx512); }
SplitFn split_of(AdamWBuild b) {
  return build_of<SplitFn>(b, split_generic, split_avx2, split_avx512);
}
#else
LoopFn loop_of(AdamWBuild) { return loop_generic; }
SplitFn split_of(AdamWBuild) { return split_generic; }
#endif

AdamWBuild best_build() {
  for (AdamWBuild b : {AdamWBuild::kAvx512, AdamWBuild::kAvx2})
    if (cpu_has(b)) return b;
  return AdamWBuild::kGeneric;
}

// Elements per OpenMP work item, and the size below which one thread does everything.
constexpr size_t kBlock = 1 << 14;
constexpr size_t kParallelMin = 1 << 16;

// fn(offset, length) over [0, n): one call below kParallelMin, else kBlock-sized blocks shared by
// OpenMP threads (element-wise loops: any split gives the same bits).
template <class Fn>
void for_blocks(size_t n, Fn&& fn) {
  if (n < kParallelMin) {
    fn(size_t{0}, n);
    return;
  }
  const auto blocks = static_cast<int64_t>((n + kBlock - 1) / kBlock);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const size_t o = static_cast<size_t>(b) * kBlock;
    fn(o, std::min(kBlock, n - o));
  }
}

void run(LoopFn loop, const AdamWStep& s, float* p, float* m, float* v, const float* g, size_t n,
         uint16_t* p_bf16) {
  for_blocks(n, [&](size_t o, size_t len) {
    loop(s, p + o, m + o, v + o, g + o, len, p_bf16 ? p_bf16 + o : nullptr);
  });
}

void run_split(SplitFn loop, const AdamWStep& s, uint16_t* hi, uint16_t* lo, float* m, float* v,
               const float* g, size_t n) {
  for_blocks(n, [&](size_t o, size_t len) { loop(s, hi + o, lo + o, m + o, v + o, g + o, len); });
}

// The build adamw_cpu and adamw_cpu_range use: the best this CPU runs, picked once.
LoopFn best_loop() {
  static const LoopFn loop = loop_of(best_build());  // immutable after first use
  return loop;
}

}  // namespace

void adamw_cpu(const AdamWStep& s, float* p, float* m, float* v, const float* g, size_t n,
               uint16_t* p_bf16) {
  run(best_loop(), s, p, m, v, g, n, p_bf16);
}

void adamw_cpu_range(const AdamWStep& s, float* p, float* m, float* v, const float* g, size_t n,
                     uint16_t* p_bf16) {
  best_loop()(s, p, m, v, g, n, p_bf16);
}

// The split build adamw_split_cpu and adamw_split_cpu_range use, picked once.
SplitFn best_split() {
  static const SplitFn loop = split_of(best_build());  // immutable after first use
  return loop;
}

void adamw_split_cpu(const AdamWStep& s, uint16_t* hi, uint16_t* lo, float* m, float* v,
                     const float* g, size_t n) {
  run_split(best_split(), s, hi, lo, m, v, g, n);
}

void adamw_split_cpu_range(const AdamWStep& s, uint16_t* hi, uint16_t* lo, float* m, float* v,
                           const float* g, size_t n) {
  best_split()(s, hi, lo, m, v, g, n);
}

bool adamw_split_cpu_build(AdamWBuild build, const AdamWStep& s, uint16_t* hi, uint16_t* lo,
                           float* m, float* v, const float* g, size_t n) {
  if (build == AdamWBuild::kAuto) build = best_build();
  if (!cpu_has(build)) return false;
  run_split(split_of(build), s, hi, lo, m, v, g, n);
  return true;
}

bool adamw_cpu_build(AdamWBuild build, const AdamWStep& s, float* p, float* m, float* v,
                     const float* g, size_t n, uint16_t* p_bf16) {
  if (build == AdamWBuild::kAuto) build = best_build();
  if (!cpu_has(build)) return false;
  run(loop_of(build), s, p, m, v, g, n, p_bf16);
  return true;
}

}  // namespace zt::optim
