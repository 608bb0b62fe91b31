// Internal to the CUDA attention (cuda_attention.cu, cuda_attention_generic.cu,
// cuda_attention_tc.cu): the kernel argument block, the block → (sequence, tile, head) mapping over
// the varlen tile table, element load/store, warp reductions, the launch helper and the entry
// points of the two kernel families. See cuda_attention.cu for the design.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_check.h"

namespace zt::cuda::attn {

using bf16 = __nv_bfloat16;

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr int kGenRows = 16;    // rows per tile of the generic kernels' work list
constexpr int kTcRows = 64;     // rows per tile of the tensor-core kernels' work list
constexpr int kSm90Rows = 128;  // rows per tile of the Hopper backward's work list (key tiles)
// Query rows per tile of the Hopper forward's work list: 64 per MMA warpgroup, three at head dim
// 64 (FlashAttention-3's 192-row tiles there), two at 128 (attention_sm90.cu, fwd_wgs).
__host__ __device__ constexpr int sm90_fwd_rows(int D) { return D == 64 ? 192 : 128; }
// Query rows per step of the Hopper fused backward at head dim D (attention_sm90.cu's bwd_rows).
__host__ __device__ constexpr int sm90_bwd_rows(int D) { return D == 64 ? 128 : 64; }
constexpr int kMaxD = 256;      // largest head dim (generic kernels)

// Arguments every attention kernel takes (by value).
struct KArgs {
  const int32_t* cu;          // cu_seqlens [n+1]
  const int32_t* tile_start;  // [n+1]: first global tile of each sequence (tile_plan_kernel)
  int n;                      // number of sequences
  int64_t T;
  int Hq, Hkv, D;
  float scale;       // softmax scale
  float scale_log2;  // scale·log2(e) (tensor-core kernels work in base 2)
  int window;        // sliding window W (query r sees keys r - W < c ≤ r); 0 = none (or W ≥ T)
  // The Hopper forward's work counter (persistent blocks take work items in index order by an
  // atomicAdd on it): one int in the workspace after tile_start, zeroed by tile_plan_kernel.
  int32_t* next_item;
  // The Hopper backward: query heads per block (a divisor of Hq / Hkv; bwd_block_work) and its
  // block order, [Σ tiles] (sequence, key tile) pairs, each sequence's tiles heaviest first
  // (tile_plan_kernel: sequence by sequence, or tile-major).
  int hpb = 1;
  const int2* order = nullptr;
};

// The first key sequence-relative query row r sees: r - W + 1 with a window, else 0.
__device__ __forceinline__ int first_key(const KArgs& a, int r) {
  return a.window > 0 ? max(0, r - a.window + 1) : 0;
}
// One past the last query row that sees key c of a sequence of L tokens: c + W with a window
// (capped at L), else L.
__device__ __forceinline__ int query_end(const KArgs& a, int c, int L) {
  return a.window > 0 ? min(L, c + a.window) : L;
}

// The (sequence, tile, head) a block works on.
struct Work {
  int seq;     // sequence index
  int s0, L;   // first token and length of the sequence
  int tile;    // tile index within the sequence (rows [tile·rows, tile·rows + rows))
  int h, kvh;  // query head and its KV head
};

// Work item `item` (of the 1-D list of Σ tiles × Hq; by default the block's index) → (sequence,
// tile, head). `reverse`: the sequence's tiles in reverse order (query tiles, so the ones with the
// most keys come first).
__device__ __forceinline__ Work block_work(const KArgs& a, int rows, bool reverse,
                                           int item = static_cast<int>(blockIdx.x)) {
  const int bt = item / a.Hq;
  Work w;
  w.h = item % a.Hq;
  w.kvh = w.h / (a.Hq / a.Hkv);
  int lo = 0, hi = a.n - 1;  // the last sequence whose first tile is ≤ bt (skips empty ones)
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (a.tile_start[mid] <= bt) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  w.seq = lo;
  w.s0 = a.cu[lo];
  w.L = a.cu[lo + 1] - w.s0;
  const int local = bt - a.tile_start[lo];
  w.tile = reverse ? (w.L + rows - 1) / rows - 1 - local : local;
  return w;
}

__device__ __forceinline__ float ld(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float ld(const bf16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void st(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void st(bf16* p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }

// Butterfly reductions: every lane ends with the same value, computed in the same order each run.
__device__ __forceinline__ float warp_sum(float v) {
  for (int off = 16; off >= 1; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int off = 16; off >= 1; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Programmatic dependent launch (PDL, sm_90; CUDA programming guide, "Programmatic Dependent
// Launch and Synchronization"). A kernel launched with launch_pdl (below) may start
// before the kernel ahead of it on the stream has finished: it must call wait_prior_grid() before
// it reads anything that kernel writes (griddepcontrol.wait: returns once the prior grid has
// completed and its memory is visible; at once for a kernel launched without the attribute).
// allow_next_grid() lets the kernel behind start launching now instead of at this grid's end
// (griddepcontrol.launch_dependents; no effect when that kernel was launched without the
// attribute). Both compile to nothing before sm_90. What it saves is the launch gap between
// back-to-back kernels of one attention call (a few µs each, several per backward).
__device__ __forceinline__ void wait_prior_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void allow_next_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Sets the kernel's dynamic shared-memory limit and launches it.
template <class... KArgsT, class... Args>
void launch(void (*kernel)(KArgsT...), unsigned grid, int threads, size_t smem, cudaStream_t st,
            const char* op, Args... args) {
  check(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                             cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
        op);
  kernel<<<grid, threads, smem, st>>>(args...);
  check_launch(op);
}

// launch as a programmatic dependent launch (above): the kernel may start before the one ahead of
// it on the stream has finished, and calls wait_prior_grid before it reads that kernel's output.
template <class... KArgsT, class... Args>
void launch_pdl(void (*kernel)(KArgsT...), unsigned grid, int threads, size_t smem, cudaStream_t st,
                const char* op, Args... args) {
  if (smem > 0)
    check(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                               cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
          op);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid, 1, 1);
  cfg.blockDim = dim3(static_cast<unsigned>(threads), 1, 1);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = st;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  check(cudaLaunchKernelEx(&cfg, kernel, args...), op);
}

// Generic kernels (cuda_attention_generic.cu), storage f32 or bf16 (`is_bf16`), any D ≤ 256, work
// list of kGenRows-row tiles. Forward: out, lse. Backward: dq and the dK/dV contributions — fp32
// partials pk/pv [T, Hq, D] when non-null (Hq > Hkv), else dk/dv; lse natural-log, Di [Hq, T].
void generic_fwd(const KArgs& ka, unsigned grid, bool is_bf16, void* out, float* lse, const void* q,
                 const void* k, const void* v, cudaStream_t st);
void generic_bwd(const KArgs& ka, unsigned grid, bool is_bf16, const float* lse, const float* Di,
                 float* pk, float* pv, void* dq, void* dk, void* dv, const void* dout,
                 const void* q, const void* k, const void* v, cudaStream_t st);

// Tensor-core kernels (cuda_attention_tc.cu): bf16, D = ka.D ∈ {64, 128, 256}, 16-byte aligned
// tensors, work list of kTcRows-row tiles. As above, with lse2 = lse·log2(e).
void tc_fwd(const KArgs& ka, unsigned grid, void* out, float* lse, const void* q, const void* k,
            const void* v, cudaStream_t st);
void tc_bwd(const KArgs& ka, unsigned grid, const float* lse2, const float* Di, float* pk,
            float* pv, void* dq, void* dk, void* dv, const void* dout, const void* q, const void* k,
            const void* v, cudaStream_t st);

// Hopper kernels (sm90/attention_sm90.cu, built only when the build targets sm_90 —
// ZT_HAVE_SM90A — and run only on a compute-capability-9.0 device): bf16, D = ka.D ∈ {64, 128},
// no window (ka.window == 0), 16-byte aligned tensors, work list of sm90_fwd_rows(D)-row query
// tiles (forward) or kSm90Rows-row key tiles (backward). Arguments as tc_fwd / tc_bwd; the backward
// (fused: dK/dV and dQ in one kernel) also takes dqa, fp32 [Hq, T, D] (dQ accumulated in key-tile
// order), and sem, zero on entry (attention_bwd's tile_plan_kernel zeroes them): 2 dQ flags per
// (tile, query head), then with partials (pk non-null) one head-sum counter per (tile, KV head).
// Its grid: tiles × Hq / ka.hpb blocks in ka.order's order, each ka.hpb query heads of one KV
// head; pk/pv [T, Hq, D] hold one partial per head group (at its first head), null when ka.hpb =
// Hq / Hkv (or Hq = Hkv).
void sm90_fwd(const KArgs& ka, unsigned grid, void* out, float* lse, const void* q, const void* k,
              const void* v, cudaStream_t st);
void sm90_bwd(const KArgs& ka, unsigned grid, const float* lse2, const float* Di, float* pk,
              float* pv, float* dqa, int* sem, void* dq, void* dk, void* dv, const void* dout,
              const void* q, const void* k, const void* v, cudaStream_t st);

}  // namespace zt::cuda::attn
