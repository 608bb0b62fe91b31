// CUDA attention: causal, GQA, padding-free varlen (cu_seqlens) attention, forward and a
// deterministic backward, with the maths of backend/cpu/cpu_attention.cpp (the reference the GPU
// tests compare against): scores = scale·q·kᵀ, causal mask within each sequence, fp32 softmax
// statistics, ·v; lse saved for the backward, which recomputes the probabilities.
//
// Why our own FlashAttention-2-style kernels and not cuDNN's SDPA: the cudnn-frontend headers are
// not installed and the raw cuDNN backend graph API needs hundreds of lines of descriptor code per
// graph (forward, backward, ragged offsets), whose deterministic-backward support depends on the
// cuDNN version; two small kernel families are less code, run on any sm_80+ GPU and are tested
// against the CPU op like every other kernel.
//
// Two kernel families behind one dispatch (attention_fwd / attention_bwd at the end):
//  * generic: any D ≤ 256, f32 or bf16 storage, fp32 CUDA-core arithmetic. Used for fp32 models and
//    unusual head dims (the test models have D = 12 and 16). A block of 4 warps owns 16 query rows
//    (forward, dQ) or 16 keys (dK/dV); the other side is staged through shared memory 32 rows at a
//    time, lane j of a warp owning row j of that tile for the dot products, and each lane owning
//    dims d ≡ lane (mod 32) of the accumulators (online softmax in the forward).
//  * tensor cores: bf16, D ∈ {64, 128} (Qwen2.5: 0.5B D = 64, 1.5B D = 128), mma.sync m16n8k16
//    bf16 with fp32 accumulators, 64×64 tiles, 4 warps of 16 rows each, ldmatrix from XOR-swizzled
//    shared memory, cp.async double buffering, causal tile skipping (a query tile reads only the
//    key tiles up to its diagonal, and only the diagonal tile is masked). The probabilities are
//    rounded to bf16 before the P·V (and dS before dS·K, dSᵀ·Q) products, as FlashAttention does.
//
// Varlen work lists: a tiny kernel turns cu_seqlens into tile_start[i] = Σ_{j<i} ceil(len_j / rows)
// (device, in the workspace); a block b of the 1-D grid (Σ tiles × Hq blocks) takes query head
// b % Hq and global tile b / Hq, and finds its sequence by binary search. Query tiles run heaviest
// (last) first, key tiles of the dK/dV pass also heaviest (first) first, which evens the tail.
//
// Backward (both families): (1) a prep kernel writes Di = rowsum(dO∘O) and lse·log2(e) f32 [Hq, T];
// (2) a dK/dV kernel, one block per (key tile, query head): it loops over the query tiles at and
// after its keys in order and writes that query head's dK, dV contribution (f32 partials
// [T, Hq, D] in the workspace when Hq > Hkv, else the result); (3) a dQ kernel, one block per
// (query tile, query head), loops over the key tiles up to the diagonal in order (recomputing P);
// (4) when Hq > Hkv, a kernel sums each KV head's partials in head order into dk, dv. Splitting the
// dK/dV pass by query head (instead of one block looping over the group's heads) gives 6× the
// blocks for Qwen2.5-1.5B (12 query / 2 KV heads), where one block per (KV head, key tile) would
// leave the longest block ~2× the average on 132 SMs.
//
// Determinism: no atomics at all. Every output element is written by exactly one thread, which
// adds its terms in an order fixed by the shapes (tile loops in index order, fixed warp-shuffle
// trees, fixed mma k order); nothing depends on scheduling, the SM count or addresses.
//
// Resources (ptxas, sm_90; sm_89 within a few registers): tensor-core kernels 128 threads,
// __launch_bounds__(128, 2), no spills — forward D=128 229 regs / 80 KiB smem, D=64 153 / 40 KiB;
// dQ D=128 246 / 96 KiB, D=64 206 / 48 KiB; dK/dV D=128 255 / 97 KiB, D=64 245 / 49 KiB (every
// tile fits the 99 KiB per-block limit of sm_89 too). Generic: 94-128 regs (the dQ kernel spills
// 8-28 bytes on sm_90), ≤ 97 KiB of shared memory at D = 256.
//
// Expected speed on an H200 (Qwen2.5-1.5B layer, T = 8192 = 4×2048, Hq 12, Hkv 2, D 128; causal
// FLOPs fwd 4·Σs²/2·Hq·D = 51.5 GFLOP, bwd counted 2.5× = 129 GFLOP): the forward reads 32 FLOP per
// byte of shared memory (the mma.sync rate, ~60 % of the 989 TFLOP/s dense peak, is the limit):
// ~250-300 TFLOP/s, ~0.2 ms. The backward executes 7/5 of its counted FLOPs (P is recomputed in
// both passes) at ~14.5 FLOP per shared-memory byte (smem-bound near 45 % of peak): ~130-180
// counted TFLOP/s, ~0.7-1.0 ms. Together ~1 ms per layer against ~3.5 ms for the layer's linear
// layers (6·T·(H·(Hq+2Hkv)·D + Hq·D·H + 3·H·I) = 2.3 TFLOP at ~650 TFLOP/s). Measure with
// bench/bench_cuda_attention.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "backend/cuda/cuda_attention.h"
#include "backend/cuda/cuda_check.h"

namespace zt::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// ---------------------------------------------------------------------------------------------
// Shared pieces

// Arguments every attention kernel takes (by value).
struct KArgs {
  const int32_t* cu;          // cu_seqlens [n+1]
  const int32_t* tile_start;  // [n+1]: first global tile of each sequence (tile_plan_kernel)
  int n;                      // number of sequences
  int64_t T;
  int Hq, Hkv, D;
  float scale;       // softmax scale
  float scale_log2;  // scale·log2(e) (tensor-core kernels work in base 2)
};

// The (sequence, tile, head) a block works on.
struct Work {
  int s0, L;   // first token and length of the sequence
  int tile;    // tile index within the sequence (rows [tile·rows, tile·rows + rows))
  int h, kvh;  // query head and its KV head
};

// Block blockIdx.x → work item. `reverse`: the sequence's tiles in reverse order (query tiles, so
// the ones with the most keys start first).
__device__ __forceinline__ Work block_work(const KArgs& a, int rows, bool reverse) {
  const int bt = static_cast<int>(blockIdx.x / a.Hq);
  Work w;
  w.h = static_cast<int>(blockIdx.x % a.Hq);
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
  w.s0 = a.cu[lo];
  w.L = a.cu[lo + 1] - w.s0;
  const int local = bt - a.tile_start[lo];
  w.tile = reverse ? (w.L + rows - 1) / rows - 1 - local : local;
  return w;
}

// tile_start[i] = Σ_{j<i} ceil(len_j / rows) for i = 0..n (one block of kPlanThreads threads:
// each sums a contiguous chunk of sequences, then a block-wide inclusive scan of the chunk sums).
constexpr int kPlanThreads = 1024;
__global__ void __launch_bounds__(kPlanThreads)
    tile_plan_kernel(const int32_t* cu, int n, int rows, int32_t* tile_start) {
  __shared__ int32_t part[kPlanThreads];
  const int t = threadIdx.x;
  const int chunk = (n + kPlanThreads - 1) / kPlanThreads;
  const int b = min(n, t * chunk), e = min(n, b + chunk);
  int32_t sum = 0;
  for (int i = b; i < e; ++i) sum += (cu[i + 1] - cu[i] + rows - 1) / rows;
  part[t] = sum;
  __syncthreads();
  for (int off = 1; off < kPlanThreads; off <<= 1) {
    const int32_t add = t >= off ? part[t - off] : 0;
    __syncthreads();
    part[t] += add;
    __syncthreads();
  }
  int32_t run = t > 0 ? part[t - 1] : 0;
  for (int i = b; i < e; ++i) {
    tile_start[i] = run;
    run += (cu[i + 1] - cu[i] + rows - 1) / rows;
  }
  if (t == kPlanThreads - 1) tile_start[n] = part[t];
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

// Backward prep: Di[h, t] = Σ_d dO[t,h,d]·O[t,h,d] (fp32, lane-strided partials then a butterfly)
// and lse2[h, t] = lse[h, t]·log2(e). One warp per (t, h) row, 4 rows per block.
template <class T>
__global__ void __launch_bounds__(128)
    attn_bwd_prep_kernel(const T* dout, const T* out, const float* lse, float* Di, float* lse2,
                         int64_t ntok, int Hq, int D) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * 4 + (threadIdx.x >> 5);  // t·Hq + h
  if (row >= ntok * Hq) return;
  const int lane = threadIdx.x & 31;
  float s = 0.0f;
  for (int d = lane; d < D; d += 32) s += ld(dout, row * D + d) * ld(out, row * D + d);
  s = warp_sum(s);
  if (lane == 0) {
    const int64_t t = row / Hq, i = (row - t * Hq) * ntok + t;
    Di[i] = s;
    lse2[i] = lse[i] * kLog2e;
  }
}

// dk[t, g, :] = Σ_{j<rep} pk[t, g·rep + j, :] in head order (likewise dv); fp32 sums, one element
// per thread (grid-stride).
template <class T>
__global__ void __launch_bounds__(256)
    attn_sum_heads_kernel(const float* pk, const float* pv, T* dk, T* dv, int64_t ntok, int Hq,
                          int Hkv, int D) {
  const int64_t n = ntok * Hkv * D;
  const int rep = Hq / Hkv;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / (static_cast<int64_t>(Hkv) * D);
    const int r = static_cast<int>(i - t * Hkv * D), g = r / D, d = r - g * D;
    const int64_t base = (t * Hq + static_cast<int64_t>(g) * rep) * D + d;
    float sk = 0.0f, sv = 0.0f;
    for (int j = 0; j < rep; ++j) {
      sk += pk[base + static_cast<int64_t>(j) * D];
      sv += pv[base + static_cast<int64_t>(j) * D];
    }
    st(dk, i, sk);
    st(dv, i, sv);
  }
}

// ---------------------------------------------------------------------------------------------
// Generic kernels (fp32 arithmetic, any D ≤ 256, f32 or bf16 storage)

constexpr int kGenThreads = 128;           // 4 warps
constexpr int kGenRows = 16;               // query rows (fwd, dQ) or keys (dK/dV) per block
constexpr int kGenPerWarp = kGenRows / 4;  // of which each warp owns 4
constexpr int kGenTile = 32;               // rows of the other side per shared-memory tile
constexpr int kGenSlots = 8;               // accumulator dims per lane: d = lane + 32·slot
constexpr int kGenMaxD = kGenSlots * 32;   // 256

// Shared memory (bytes) of each generic kernel; rows read lane-wise are padded to D+1 floats
// (conflict-free).
size_t gen_fwd_smem(int D) { return 4u * (kGenRows * D + kGenTile * (D + 1) + kGenTile * D); }
size_t gen_dq_smem(int D) { return 4u * (2 * kGenRows * D + 2 * kGenTile * (D + 1)); }
size_t gen_dkdv_smem(int D) {
  return 4u * (2 * kGenTile * (D + 1) + 2 * kGenRows * D + 2 * kGenTile);
}

// Copies rows [0, 32) of a [*, ld] tensor (row 0 at src) into fp32 shared memory with row stride
// `pitch`; rows ≥ nvalid become zeros.
template <class T>
__device__ __forceinline__ void gen_load_rows(float* dst, int pitch, const T* src, int64_t src_ld,
                                              int nrows, int nvalid, int D) {
  for (int i = threadIdx.x; i < nrows * D; i += kGenThreads) {
    const int r = i / D, d = i - r * D;
    dst[r * pitch + d] = r < nvalid ? ld(src, r * src_ld + d) : 0.0f;
  }
}

// acc[slot] += Σ_{j ∈ [jlo, jhi)} w_j · M[j·pitch + lane + 32·slot], j in order, where w_j is lane
// j's `w`: a warp's weighted sum of shared-memory rows (lane owns dims lane + 32·slot).
__device__ __forceinline__ void gen_add_rows(float (&acc)[kGenSlots], float w, int jlo, int jhi,
                                             const float* M, int pitch, int D, int lane) {
  for (int j = jlo; j < jhi; ++j) {
    const float wj = __shfl_sync(0xffffffffu, w, j);
#pragma unroll
    for (int sl = 0; sl < kGenSlots; ++sl) {
      const int d = lane + 32 * sl;
      if (d < D) acc[sl] += wj * M[j * pitch + d];
    }
  }
}

// The backward's terms for one (query row, key): P = valid ? exp(scale·q·k − lse) : 0 and
// dS = P·(dO·v − Di), returned as {P, dS}; both dot products over D in index order.
__device__ __forceinline__ float2 gen_p_ds(const float* qr, const float* kr, const float* gr,
                                           const float* vr, int D, float scale, float lse, float di,
                                           bool valid) {
  float s = 0.0f, dp = 0.0f;
  for (int d = 0; d < D; ++d) {
    s += qr[d] * kr[d];
    dp += gr[d] * vr[d];
  }
  const float p = valid ? expf(s * scale - lse) : 0.0f;
  return make_float2(p, p * (dp - di));
}

// row[d] = mul·acc[slot] for the lane's dims d = lane + 32·slot < D.
template <class T>
__device__ __forceinline__ void gen_store_row(T* row, const float (&acc)[kGenSlots], float mul,
                                              int D, int lane) {
#pragma unroll
  for (int sl = 0; sl < kGenSlots; ++sl) {
    const int d = lane + 32 * sl;
    if (d < D) st(row, d, mul * acc[sl]);
  }
}

// Forward. Block: 16 query rows of one head (4 per warp). Per key tile of 32 (in shared memory),
// lane j scores key j against each of its warp's rows; the warp updates the row's running max m,
// sum l and output (lane owns dims lane + 32·slot) — online softmax. Per block: reads its rows
// once and K/V rows up to its diagonal once; writes out rows and lse.
template <class T>
__global__ void __launch_bounds__(kGenThreads)
    attn_fwd_generic(KArgs a, const T* q, const T* k, const T* v, T* out, float* lse) {
  extern __shared__ float gsm[];
  const int D = a.D, kp = D + 1;
  float* Qs = gsm;                 // [16][D]
  float* Ks = Qs + kGenRows * D;   // [32][D+1]
  float* Vs = Ks + kGenTile * kp;  // [32][D]
  const Work w = block_work(a, kGenRows, true);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t ldq = static_cast<int64_t>(a.Hq) * D, ldk = static_cast<int64_t>(a.Hkv) * D;
  const int r0 = w.tile * kGenRows;
  gen_load_rows(Qs, D, q + (w.s0 + r0) * ldq + w.h * D, ldq, kGenRows, w.L - r0, D);
  float m[kGenPerWarp], l[kGenPerWarp], o[kGenPerWarp][kGenSlots];
#pragma unroll
  for (int rr = 0; rr < kGenPerWarp; ++rr) {
    m[rr] = -INFINITY;
    l[rr] = 0.0f;
#pragma unroll
    for (int sl = 0; sl < kGenSlots; ++sl) o[rr][sl] = 0.0f;
  }
  const int kend = min(w.L, r0 + kGenRows);
  for (int c0 = 0; c0 < kend; c0 += kGenTile) {
    __syncthreads();  // the previous tile is consumed
    const int64_t koff = (w.s0 + c0) * ldk + w.kvh * D;
    gen_load_rows(Ks, kp, k + koff, ldk, kGenTile, w.L - c0, D);
    gen_load_rows(Vs, D, v + koff, ldk, kGenTile, w.L - c0, D);
    __syncthreads();
#pragma unroll
    for (int rr = 0; rr < kGenPerWarp; ++rr) {
      const int r = r0 + warp * kGenPerWarp + rr;  // sequence-relative row (warp-uniform)
      if (r >= w.L || r < c0) continue;
      const float* qr = Qs + (warp * kGenPerWarp + rr) * D;
      const float* kr = Ks + lane * kp;
      float s = 0.0f;
      for (int d = 0; d < D; ++d) s += qr[d] * kr[d];
      s = c0 + lane <= r ? s * a.scale : -INFINITY;
      // Key 0 is in the first tile and visible to every row, so m is finite from then on.
      const float mnew = fmaxf(m[rr], warp_max(s));
      const float alpha = expf(m[rr] - mnew);
      const float p = expf(s - mnew);
      l[rr] = l[rr] * alpha + warp_sum(p);
      m[rr] = mnew;
      const int jn = min(kGenTile, r - c0 + 1);
#pragma unroll
      for (int sl = 0; sl < kGenSlots; ++sl) o[rr][sl] *= alpha;
      gen_add_rows(o[rr], p, 0, jn, Vs, D, D, lane);
    }
  }
#pragma unroll
  for (int rr = 0; rr < kGenPerWarp; ++rr) {
    const int r = r0 + warp * kGenPerWarp + rr;
    if (r >= w.L) continue;
    const float inv = 1.0f / l[rr];
    gen_store_row(out + (w.s0 + r) * ldq + w.h * D, o[rr], inv, D, lane);
    if (lane == 0) lse[static_cast<int64_t>(w.h) * a.T + w.s0 + r] = m[rr] + logf(l[rr]);
  }
}

// dQ. Block: 16 query rows of one head (4 per warp), key tiles of 32 up to the diagonal in order.
// Lane j computes P and dS = P·(dP − Di) for key j; the warp adds Σ_j dS_j·K_j to the row's dQ
// (lane owns dims lane + 32·slot), keys in order; dQ = scale·Σ at the end.
template <class T>
__global__ void __launch_bounds__(kGenThreads)
    attn_dq_generic(KArgs a, const T* q, const T* k, const T* v, const T* dout, const float* lse,
                    const float* Di, T* dq) {
  extern __shared__ float gsm[];
  const int D = a.D, kp = D + 1;
  float* Qs = gsm;                 // [16][D]
  float* dOs = Qs + kGenRows * D;  // [16][D]
  float* Ks = dOs + kGenRows * D;  // [32][D+1]
  float* Vs = Ks + kGenTile * kp;  // [32][D+1]
  const Work w = block_work(a, kGenRows, true);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t ldq = static_cast<int64_t>(a.Hq) * D, ldk = static_cast<int64_t>(a.Hkv) * D;
  const int r0 = w.tile * kGenRows;
  const int64_t qoff = (w.s0 + r0) * ldq + w.h * D;
  gen_load_rows(Qs, D, q + qoff, ldq, kGenRows, w.L - r0, D);
  gen_load_rows(dOs, D, dout + qoff, ldq, kGenRows, w.L - r0, D);
  float lr[kGenPerWarp], dr[kGenPerWarp], acc[kGenPerWarp][kGenSlots];
#pragma unroll
  for (int rr = 0; rr < kGenPerWarp; ++rr) {
    const int r = r0 + warp * kGenPerWarp + rr;
    const int64_t i = static_cast<int64_t>(w.h) * a.T + w.s0 + r;
    lr[rr] = r < w.L ? lse[i] : 0.0f;
    dr[rr] = r < w.L ? Di[i] : 0.0f;
#pragma unroll
    for (int sl = 0; sl < kGenSlots; ++sl) acc[rr][sl] = 0.0f;
  }
  const int kend = min(w.L, r0 + kGenRows);
  for (int c0 = 0; c0 < kend; c0 += kGenTile) {
    __syncthreads();
    const int64_t koff = (w.s0 + c0) * ldk + w.kvh * D;
    gen_load_rows(Ks, kp, k + koff, ldk, kGenTile, w.L - c0, D);
    gen_load_rows(Vs, kp, v + koff, ldk, kGenTile, w.L - c0, D);
    __syncthreads();
#pragma unroll
    for (int rr = 0; rr < kGenPerWarp; ++rr) {
      const int r = r0 + warp * kGenPerWarp + rr;
      if (r >= w.L || r < c0) continue;
      const int ro = (warp * kGenPerWarp + rr) * D;
      const float ds = gen_p_ds(Qs + ro, Ks + lane * kp, dOs + ro, Vs + lane * kp, D, a.scale,
                                lr[rr], dr[rr], c0 + lane <= r)
                           .y;
      const int jn = min(kGenTile, r - c0 + 1);
      gen_add_rows(acc[rr], ds, 0, jn, Ks, kp, D, lane);
    }
  }
#pragma unroll
  for (int rr = 0; rr < kGenPerWarp; ++rr) {
    const int r = r0 + warp * kGenPerWarp + rr;
    if (r >= w.L) continue;
    gen_store_row(dq + (w.s0 + r) * ldq + w.h * D, acc[rr], a.scale, D, lane);
  }
}

// dK/dV contribution of one query head. Block: 16 keys of KV head kvh (4 per warp) and query head
// h; query tiles of 32 rows from the block's first key to the sequence end, in order. Lane i
// computes P and dS for query row i of the tile; the warp adds Σ_i P_i·dO_i to the key's dV and
// Σ_i dS_i·Q_i to its dK (lane owns dims lane + 32·slot), rows in order. Writes fp32 partials
// pk/pv [T, Hq, D] when non-null, else the final dk/dv [T, Hkv, D].
template <class T>
__global__ void __launch_bounds__(kGenThreads)
    attn_dkdv_generic(KArgs a, const T* q, const T* k, const T* v, const T* dout, const float* lse,
                      const float* Di, float* pk, float* pv, T* dk, T* dv) {
  extern __shared__ float gsm[];
  const int D = a.D, kp = D + 1;
  float* Qs = gsm;                  // [32][D+1]
  float* dOs = Qs + kGenTile * kp;  // [32][D+1]
  float* Ks = dOs + kGenTile * kp;  // [16][D]
  float* Vs = Ks + kGenRows * D;    // [16][D]
  float* ls = Vs + kGenRows * D;    // [32] lse of the tile's rows
  float* ds_ = ls + kGenTile;       // [32] Di of the tile's rows
  const Work w = block_work(a, kGenRows, false);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t ldq = static_cast<int64_t>(a.Hq) * D, ldk = static_cast<int64_t>(a.Hkv) * D;
  const int c0 = w.tile * kGenRows;
  const int64_t koff = (w.s0 + c0) * ldk + w.kvh * D;
  gen_load_rows(Ks, D, k + koff, ldk, kGenRows, w.L - c0, D);
  gen_load_rows(Vs, D, v + koff, ldk, kGenRows, w.L - c0, D);
  float gk[kGenPerWarp][kGenSlots], gv[kGenPerWarp][kGenSlots];
#pragma unroll
  for (int kk = 0; kk < kGenPerWarp; ++kk)
#pragma unroll
    for (int sl = 0; sl < kGenSlots; ++sl) gk[kk][sl] = gv[kk][sl] = 0.0f;
  for (int qt = c0; qt < w.L; qt += kGenTile) {
    __syncthreads();
    const int64_t qoff = (w.s0 + qt) * ldq + w.h * D;
    gen_load_rows(Qs, kp, q + qoff, ldq, kGenTile, w.L - qt, D);
    gen_load_rows(dOs, kp, dout + qoff, ldq, kGenTile, w.L - qt, D);
    if (threadIdx.x < kGenTile) {
      const int r = qt + threadIdx.x;
      const int64_t i = static_cast<int64_t>(w.h) * a.T + w.s0 + r;
      ls[threadIdx.x] = r < w.L ? lse[i] : 0.0f;
      ds_[threadIdx.x] = r < w.L ? Di[i] : 0.0f;
    }
    __syncthreads();
    const int row = qt + lane;
    const int jhi = min(kGenTile, w.L - qt);
#pragma unroll
    for (int kk = 0; kk < kGenPerWarp; ++kk) {
      const int key = c0 + warp * kGenPerWarp + kk;  // warp-uniform
      if (key >= w.L) continue;
      const int ko = (warp * kGenPerWarp + kk) * D;
      const float2 pds = gen_p_ds(Qs + lane * kp, Ks + ko, dOs + lane * kp, Vs + ko, D, a.scale,
                                  ls[lane], ds_[lane], row >= key && row < w.L);
      const int jlo = max(0, key - qt);
      gen_add_rows(gv[kk], pds.x, jlo, jhi, dOs, kp, D, lane);
      gen_add_rows(gk[kk], pds.y, jlo, jhi, Qs, kp, D, lane);
    }
  }
#pragma unroll
  for (int kk = 0; kk < kGenPerWarp; ++kk) {
    const int key = c0 + warp * kGenPerWarp + kk;
    if (key >= w.L) continue;
    if (pk) {
      const int64_t i = ((w.s0 + key) * static_cast<int64_t>(a.Hq) + w.h) * D;
      gen_store_row(pk + i, gk[kk], a.scale, D, lane);
      gen_store_row(pv + i, gv[kk], 1.0f, D, lane);
    } else {
      const int64_t i = (w.s0 + key) * ldk + w.kvh * D;
      gen_store_row(dk + i, gk[kk], a.scale, D, lane);
      gen_store_row(dv + i, gv[kk], 1.0f, D, lane);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Tensor-core kernels (bf16, D ∈ {64, 128}, sm_80+)
//
// mma.sync.m16n8k16 fragments (PTX ISA "Matrix fragments for mma.m16n8k16"), g = lane/4,
// c = 2·(lane%4): A (16×16, row-major) regs a0..a3 = (g, c..c+1), (g+8, c..), (g, c+8..),
// (g+8, c+8..); B (16×8, k×n) regs b0, b1 = (k = c..c+1, n = g), (k = c+8.., n = g); C/D (16×8
// fp32) = (g, c), (g, c+1), (g+8, c), (g+8, c+1). Two adjacent n8 accumulator tiles of a row block
// therefore form one A fragment (k16) after packing to bf16 — P and dS never leave registers.
// ldmatrix.x4 lane l supplies the address of row l%8 of 8×8 matrix l/8.

constexpr int kTc = 64;          // rows of every tile: query tiles and key tiles
constexpr int kTcThreads = 128;  // 4 warps × 16 rows

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// 16-byte async copy global → shared; zero-fills when !full (nothing is read then).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool full) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(full ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, bool full) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src),
               "r"(full ? 4 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// c += a·b (16×8 fp32 += 16×16 bf16 · 16×8 bf16).
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// Two floats → bf16x2 (RNE), `lo` in the low half (the lower column of a fragment).
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
// The A fragment of k-block kb (16 columns) from a row block's fp32 accumulators [n8 tile][4].
__device__ __forceinline__ void acc_to_a(const float (&s)[8][4], int kb, uint32_t (&a)[4]) {
  a[0] = pack_bf16(s[2 * kb][0], s[2 * kb][1]);
  a[1] = pack_bf16(s[2 * kb][2], s[2 * kb][3]);
  a[2] = pack_bf16(s[2 * kb + 1][0], s[2 * kb + 1][1]);
  a[3] = pack_bf16(s[2 * kb + 1][2], s[2 * kb + 1][3]);
}

// Shared-memory tiles are [64, D] bf16 without padding; the 16-byte chunk ch of row r is stored at
// chunk ch ^ (r % 8), so the 8 rows an ldmatrix phase reads fall in 8 different bank groups.
// Byte offset of element (r, col), col a multiple of 8.
template <int D>
__device__ __forceinline__ uint32_t swz(int r, int col) {
  return static_cast<uint32_t>(r * (D * 2) + ((((col >> 3) ^ (r & 7))) << 4));
}
template <int D>
__host__ __device__ constexpr int tile_bytes() {
  return kTc * D * 2;
}

// cp.async of rows [0, 64) of a [*, ld] bf16 tensor (row 0 at src) into a swizzled tile at shared
// address dst; rows ≥ nvalid are zero-filled (and not read).
template <int D>
__device__ __forceinline__ void tile_load(uint32_t dst, const bf16* src, int64_t ld, int nvalid) {
  constexpr int kChunks = D / 8;
#pragma unroll
  for (int it = 0; it < kTc * kChunks / kTcThreads; ++it) {
    const int c = it * kTcThreads + threadIdx.x;
    const int r = c / kChunks, ch = c % kChunks;
    const bool ok = r < nvalid;
    cp_async16(dst + swz<D>(r, ch * 8), src + (ok ? r : 0) * ld + ch * 8, ok);
  }
}

// Per-lane ldmatrix byte offsets within a swizzled tile, for rows 0-15 and k-block 0: `a` for A
// operands and for B operands read transposed from [k][n] rows (lane l → row l%8 + 8·(l/8%2),
// column 8·(l/16)); `b` for B operands read from [n][k] rows (row l%8 + 8·(l/16), column
// 8·(l/8%2)). The lane's row ≡ l (mod 8), so rows r + 16·i and the 16-column block kk of the
// same lane are at (offset + 32·D·i) ^ (32·kk) — one XOR per k-block, row blocks as immediates.
template <int D>
struct Lanes {
  uint32_t a, b;
  __device__ explicit Lanes(int lane)
      : a(swz<D>((lane & 7) + ((lane >> 3) & 1) * 8, (lane >> 4) * 8)),
        b(swz<D>((lane & 7) + (lane >> 4) * 8, ((lane >> 3) & 1) * 8)) {}
};
// Byte offset of row block rb (16 rows) and 16-column block kk from a lane offset.
template <int D>
__device__ __forceinline__ uint32_t at(uint32_t lane_off, int rb, int kk) {
  return (lane_off ^ (kk << 5)) + rb * (32 * D);
}

// acc[16×64] += A[16 rows of row block a_rb of tile a_tile] · B[64 rows of tile b_tile]ᵀ over D:
// the scores of one warp's rows against a 64-row tile.
template <int D>
__device__ __forceinline__ void mma_abt(float (&acc)[8][4], uint32_t a_tile, int a_rb,
                                        uint32_t b_tile, const Lanes<D>& ln) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t af[4];
    ldsm_x4(a_tile + at<D>(ln.a, a_rb, kk), af);
    const uint32_t bk = b_tile + at<D>(ln.b, 0, kk);
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      uint32_t b[4];
      ldsm_x4(bk + p * (32 * D), b);
      mma(acc[2 * p], af, b[0], b[1]);
      mma(acc[2 * p + 1], af, b[2], b[3]);
    }
  }
}

// acc[16×D] += P[16×64] (bf16 A fragments of the 4 k-blocks) · B[64 rows of tile b_tile, D].
template <int D>
__device__ __forceinline__ void mma_pb(float (&acc)[D / 8][4], const float (&p)[8][4],
                                       uint32_t b_tile, const Lanes<D>& ln) {
#pragma unroll
  for (int kb = 0; kb < 4; ++kb) {
    uint32_t a[4];
    acc_to_a(p, kb, a);
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      uint32_t b[4];
      ldsm_x4_t(b_tile + at<D>(ln.a, kb, dp), b);
      mma(acc[2 * dp], a, b[0], b[1]);
      mma(acc[2 * dp + 1], a, b[2], b[3]);
    }
  }
}

template <int N>
__device__ __forceinline__ void zero(float (&acc)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
}

// Key-tile loop step j of nkv (forward, dQ): starts the cp.async of K/V tile j+1 into the other
// buffer, waits for tile j, synchronises the block and returns tile j's buffer offset (bytes).
// Every thread must have finished reading that other buffer (a barrier ends each iteration).
template <int D>
__device__ __forceinline__ uint32_t kv_step(int j, int nkv, uint32_t sK, uint32_t sV,
                                            const bf16* kb, const bf16* vb, int64_t ldk, int L) {
  constexpr uint32_t kTB = tile_bytes<D>();
  if (j + 1 < nkv) {
    const uint32_t nbuf = ((j + 1) & 1) * kTB;
    const int64_t off = static_cast<int64_t>(j + 1) * kTc * ldk;
    const int nv = min(kTc, L - (j + 1) * kTc);
    tile_load<D>(sK + nbuf, kb + off, ldk, nv);
    tile_load<D>(sV + nbuf, vb + off, ldk, nv);
    cp_async_commit();
    cp_async_wait<1>();
  } else {
    cp_async_wait<0>();
  }
  __syncthreads();
  return (j & 1) * kTB;
}

// Forward. Block: 64 query rows of head h (16 per warp), key tiles 0..diagonal in order, K/V
// double-buffered with cp.async; Q fragments stay in registers. Per warp and key tile: S = Q·Kᵀ
// (16×64, fp32), causal mask on the diagonal tile, online softmax in base 2 (row max/sum over the
// 4 lanes of a row by xor-shuffles), O += bf16(P)·V. Shared memory: Q + 2×(K, V) = 5 tiles
// (80 KiB at D = 128). Per block: reads its Q rows once and each K/V tile once.
template <int D>
__global__ void __launch_bounds__(kTcThreads, 2)
    attn_fwd_tc(KArgs a, const bf16* q, const bf16* k, const bf16* v, bf16* out, float* lse) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr uint32_t kTB = tile_bytes<D>();
  extern __shared__ __align__(128) unsigned char tsm[];
  const uint32_t sQ = smem_u32(tsm), sK = sQ + kTB, sV = sK + 2 * kTB;
  const Work w = block_work(a, kTc, true);
  const int m0 = w.tile * kTc;
  const int64_t ldq = static_cast<int64_t>(a.Hq) * D, ldk = static_cast<int64_t>(a.Hkv) * D;
  const bf16* kb = k + w.s0 * ldk + w.kvh * D;
  const bf16* vb = v + w.s0 * ldk + w.kvh * D;
  tile_load<D>(sQ, q + (w.s0 + m0) * ldq + w.h * D, ldq, min(kTc, w.L - m0));
  tile_load<D>(sK, kb, ldk, min(kTc, w.L));
  tile_load<D>(sV, vb, ldk, min(kTc, w.L));
  cp_async_commit();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const Lanes<D> ln(lane);
  const int row0 = m0 + warp * 16 + (lane >> 2);  // rows of accumulator elements 0,1 (+8: 2,3)
  const int c2 = (lane & 3) * 2;                  // column of element 0 within an n8 tile
  uint32_t qf[D / 16][4];
  float o[D / 8][4];
  zero(o);
  float mx[2] = {-INFINITY, -INFINITY}, sum[2] = {0.0f, 0.0f};

  const int nkv = w.tile + 1;
  for (int j = 0; j < nkv; ++j) {
    const uint32_t buf = kv_step<D>(j, nkv, sK, sV, kb, vb, ldk, w.L);
    if (j == 0) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) ldsm_x4(sQ + at<D>(ln.a, warp, kk), qf[kk]);
    }
    float s[8][4];
    zero(s);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t bk = sK + buf + at<D>(ln.b, 0, kk);
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        uint32_t b[4];
        ldsm_x4(bk + p * (32 * D), b);
        mma(s[2 * p], qf[kk], b[0], b[1]);
        mma(s[2 * p + 1], qf[kk], b[2], b[3]);
      }
    }
    // Scaled scores (base 2), mask, row max. Every row sees key 0 in tile 0 and its own key in the
    // diagonal tile, so each tile's row max is finite.
    const bool diag = j == w.tile;
    float tmax[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = s[nt][e] * a.scale_log2;
        if (diag && nt * 8 + c2 + (e & 1) > row0 - m0 + (e >> 1) * 8) x = -INFINITY;
        s[nt][e] = x;
        tmax[e >> 1] = fmaxf(tmax[e >> 1], x);
      }
    float alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tmax[r] = fmaxf(tmax[r], __shfl_xor_sync(0xffffffffu, tmax[r], 1));
      tmax[r] = fmaxf(tmax[r], __shfl_xor_sync(0xffffffffu, tmax[r], 2));
      const float mnew = fmaxf(mx[r], tmax[r]);
      alpha[r] = exp2f(mx[r] - mnew);
      mx[r] = mnew;
    }
    float rs[2] = {0.0f, 0.0f};
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float p = exp2f(s[nt][e] - mx[e >> 1]);
        s[nt][e] = p;
        rs[e >> 1] += p;
      }
#pragma unroll
    for (int r = 0; r < 2; ++r) sum[r] = sum[r] * alpha[r] + rs[r];
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      o[i][0] *= alpha[0];
      o[i][1] *= alpha[0];
      o[i][2] *= alpha[1];
      o[i][3] *= alpha[1];
    }
    mma_pb<D>(o, s, sV + buf, ln);
    __syncthreads();  // this buffer is refilled by the next iteration's prefetch
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 1);
    sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 2);
    const int row = row0 + r * 8;
    if (row >= w.L) continue;
    const float inv = 1.0f / sum[r];
    bf16* orow = out + (w.s0 + row) * ldq + w.h * D + c2;
#pragma unroll
    for (int i = 0; i < D / 8; ++i)
      *reinterpret_cast<uint32_t*>(orow + i * 8) =
          pack_bf16(o[i][2 * r] * inv, o[i][2 * r + 1] * inv);
    if ((lane & 3) == 0)
      lse[static_cast<int64_t>(w.h) * a.T + w.s0 + row] = (mx[r] + log2f(sum[r])) * kLn2;
  }
#endif
}

// dQ. Block: 64 query rows of head h (16 per warp), key tiles 0..diagonal in order (K/V
// double-buffered). Per warp and key tile: S = Q·Kᵀ and dP = dO·Vᵀ (fp32), P = 2^(S·scale·log2e −
// lse2) (masked on the diagonal), dS = P·(dP − Di), dQ += bf16(dS)·K; dQ = scale·dQ at the end.
// Shared memory: Q, dO + 2×(K, V) = 6 tiles (96 KiB at D = 128).
template <int D>
__global__ void __launch_bounds__(kTcThreads, 2)
    attn_dq_tc(KArgs a, const bf16* q, const bf16* k, const bf16* v, const bf16* dout,
               const float* lse2, const float* Di, bf16* dq) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr uint32_t kTB = tile_bytes<D>();
  extern __shared__ __align__(128) unsigned char tsm[];
  const uint32_t sQ = smem_u32(tsm), sdO = sQ + kTB, sK = sdO + kTB, sV = sK + 2 * kTB;
  const Work w = block_work(a, kTc, true);
  const int m0 = w.tile * kTc;
  const int64_t ldq = static_cast<int64_t>(a.Hq) * D, ldk = static_cast<int64_t>(a.Hkv) * D;
  const bf16* kb = k + w.s0 * ldk + w.kvh * D;
  const bf16* vb = v + w.s0 * ldk + w.kvh * D;
  const int64_t qoff = (w.s0 + m0) * ldq + w.h * D;
  tile_load<D>(sQ, q + qoff, ldq, min(kTc, w.L - m0));
  tile_load<D>(sdO, dout + qoff, ldq, min(kTc, w.L - m0));
  tile_load<D>(sK, kb, ldk, min(kTc, w.L));
  tile_load<D>(sV, vb, ldk, min(kTc, w.L));
  cp_async_commit();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const Lanes<D> ln(lane);
  const int rl = warp * 16 + (lane >> 2);  // tile-relative row of elements 0,1 (+8: 2,3)
  const int c2 = (lane & 3) * 2;
  float lrow[2], drow[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = m0 + rl + r * 8;
    const int64_t i = static_cast<int64_t>(w.h) * a.T + w.s0 + row;
    lrow[r] = row < w.L ? lse2[i] : 0.0f;
    drow[r] = row < w.L ? Di[i] : 0.0f;
  }
  float acc[D / 8][4];
  zero(acc);

  const int nkv = w.tile + 1;
  for (int j = 0; j < nkv; ++j) {
    const uint32_t buf = kv_step<D>(j, nkv, sK, sV, kb, vb, ldk, w.L);
    float s[8][4], dp[8][4];
    zero(s);
    zero(dp);
    mma_abt<D>(s, sQ, warp, sK + buf, ln);
    mma_abt<D>(dp, sdO, warp, sV + buf, ln);
    const bool diag = j == w.tile;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e >> 1;
        float p = exp2f(s[nt][e] * a.scale_log2 - lrow[r]);
        if (diag && nt * 8 + c2 + (e & 1) > rl + r * 8) p = 0.0f;
        s[nt][e] = p * (dp[nt][e] - drow[r]);
      }
    mma_pb<D>(acc, s, sK + buf, ln);
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = m0 + rl + r * 8;
    if (row >= w.L) continue;
    bf16* grow = dq + (w.s0 + row) * ldq + w.h * D + c2;
#pragma unroll
    for (int i = 0; i < D / 8; ++i)
      *reinterpret_cast<uint32_t*>(grow + i * 8) =
          pack_bf16(a.scale * acc[i][2 * r], a.scale * acc[i][2 * r + 1]);
  }
#endif
}

// dK/dV contribution of query head h. Block: 64 keys of KV head kvh (16 per warp); query tiles
// from the diagonal to the sequence end in order (Q, dO, lse2, Di double-buffered). Keys are the
// mma rows: per warp and query tile Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ (16×64 fp32), Pᵀ = 2^(Sᵀ·scale·log2e −
// lse2[q]) (masked where q < key or q ≥ L on edge tiles), dSᵀ = Pᵀ·(dPᵀ − Di[q]), then
// dV += bf16(Pᵀ)·dO and dK += bf16(dSᵀ)·Q. Writes scale·dK and dV: fp32 partials pk/pv [T, Hq, D]
// when non-null, else dk/dv [T, Hkv, D]. Shared memory: K, V + 2×(Q, dO) = 6 tiles + 1 KiB.
template <int D>
__global__ void __launch_bounds__(kTcThreads, 2)
    attn_dkdv_tc(KArgs a, const bf16* q, const bf16* k, const bf16* v, const bf16* dout,
                 const float* lse2, const float* Di, float* pk, float* pv, bf16* dk, bf16* dv) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr uint32_t kTB = tile_bytes<D>();
  extern __shared__ __align__(128) unsigned char tsm[];
  const uint32_t sK = smem_u32(tsm), sV = sK + kTB, sQ = sV + kTB, sdO = sQ + 2 * kTB;
  float* stat = reinterpret_cast<float*>(tsm + 6 * kTB);  // [2 buffers][lse2 64 | Di 64]
  const Work w = block_work(a, kTc, false);
  const int n0 = w.tile * kTc;
  const int ntiles = (w.L + kTc - 1) / kTc;
  const int64_t ldq = static_cast<int64_t>(a.Hq) * D, ldk = static_cast<int64_t>(a.Hkv) * D;
  const int64_t koff = (w.s0 + n0) * ldk + w.kvh * D;
  const bf16* qb = q + w.s0 * ldq + w.h * D;
  const bf16* gb = dout + w.s0 * ldq + w.h * D;
  const int64_t sbase = static_cast<int64_t>(w.h) * a.T + w.s0;
  // Prefetch of query tile i into buffer b: Q, dO rows and their lse2 (threads 0-63) and Di
  // (threads 64-127).
  auto prefetch = [&](int i, int b) {
    const int nv = min(kTc, w.L - i * kTc);
    tile_load<D>(sQ + b * kTB, qb + static_cast<int64_t>(i) * kTc * ldq, ldq, nv);
    tile_load<D>(sdO + b * kTB, gb + static_cast<int64_t>(i) * kTc * ldq, ldq, nv);
    const int r = threadIdx.x & (kTc - 1);
    const bool ok = r < nv;
    const float* src = (threadIdx.x < kTc ? lse2 : Di) + sbase + i * kTc + (ok ? r : 0);
    cp_async4(smem_u32(stat + b * 2 * kTc + threadIdx.x), src, ok);
  };
  tile_load<D>(sK, k + koff, ldk, min(kTc, w.L - n0));
  tile_load<D>(sV, v + koff, ldk, min(kTc, w.L - n0));
  prefetch(w.tile, 0);
  cp_async_commit();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const Lanes<D> ln(lane);
  const int key0 = n0 + warp * 16 + (lane >> 2);  // keys of elements 0,1 (+8: 2,3)
  const int c2 = (lane & 3) * 2;
  float gk[D / 8][4], gv[D / 8][4];
  zero(gk);
  zero(gv);

  for (int i = w.tile; i < ntiles; ++i) {
    const int b = (i - w.tile) & 1;
    if (i + 1 < ntiles) {
      prefetch(i + 1, b ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const uint32_t tQ = sQ + b * kTB, tdO = sdO + b * kTB;
    const float* ls = stat + b * 2 * kTc;
    const float* dd = ls + kTc;
    float s[8][4], dp[8][4];
    zero(s);
    zero(dp);
    mma_abt<D>(s, sK, warp, tQ, ln);
    mma_abt<D>(dp, sV, warp, tdO, ln);
    const bool edge = i == w.tile || (i + 1) * kTc > w.L;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = nt * 8 + c2 + (e & 1);
        const int qrow = i * kTc + col, key = key0 + (e >> 1) * 8;
        float p = exp2f(s[nt][e] * a.scale_log2 - ls[col]);
        if (edge && (qrow < key || qrow >= w.L)) p = 0.0f;
        s[nt][e] = p;
        dp[nt][e] = p * (dp[nt][e] - dd[col]);
      }
    mma_pb<D>(gv, s, tdO, ln);
    mma_pb<D>(gk, dp, tQ, ln);
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = key0 + r * 8;
    if (key >= w.L) continue;
    if (pk) {
      const int64_t base = ((w.s0 + key) * static_cast<int64_t>(a.Hq) + w.h) * D + c2;
#pragma unroll
      for (int i = 0; i < D / 8; ++i) {
        *reinterpret_cast<float2*>(pk + base + i * 8) =
            make_float2(a.scale * gk[i][2 * r], a.scale * gk[i][2 * r + 1]);
        *reinterpret_cast<float2*>(pv + base + i * 8) = make_float2(gv[i][2 * r], gv[i][2 * r + 1]);
      }
    } else {
      const int64_t base = (w.s0 + key) * ldk + w.kvh * D + c2;
#pragma unroll
      for (int i = 0; i < D / 8; ++i) {
        *reinterpret_cast<uint32_t*>(dk + base + i * 8) =
            pack_bf16(a.scale * gk[i][2 * r], a.scale * gk[i][2 * r + 1]);
        *reinterpret_cast<uint32_t*>(dv + base + i * 8) = pack_bf16(gv[i][2 * r], gv[i][2 * r + 1]);
      }
    }
  }
#endif
}

// ---------------------------------------------------------------------------------------------
// Host side

size_t align256(size_t n) { return (n + 255) & ~size_t{255}; }

// The tile table holds max(num_seqs, T) + 1 entries: sequences are non-empty (model/micro_batch),
// so workspaces sized from shapes alone (num_seqs unknown, 0) fit every micro-batch of T tokens.
size_t table_bytes(const AttnProblem& p) {
  return align256(4 * static_cast<size_t>(std::max<int64_t>(p.num_seqs, p.T) + 1));
}

// Workspace regions (see attention_workspace_bytes).
struct Ws {
  int32_t* tile_start;
  float* Di;
  float* lse2;
  float* pk;
  float* pv;
};
Ws carve(const AttnProblem& p, void* base) {
  char* c = static_cast<char*>(base);
  Ws w{};
  const size_t st = static_cast<size_t>(p.T) * p.Hq * 4;
  w.tile_start = reinterpret_cast<int32_t*>(c);
  c += table_bytes(p);
  w.Di = reinterpret_cast<float*>(c);
  c += align256(st);
  w.lse2 = reinterpret_cast<float*>(c);
  c += align256(st);
  if (p.Hq > p.Hkv) {
    w.pk = reinterpret_cast<float*>(c);
    c += align256(st * p.D);
    w.pv = reinterpret_cast<float*>(c);
  }
  return w;
}

void validate(const AttnProblem& p) {
  if (p.T < 0 || p.Hq < 1 || p.Hkv < 1 || p.Hq % p.Hkv != 0 || p.D < 1 || p.D > kGenMaxD ||
      p.num_seqs < 1 || !p.cu_host)
    throw std::invalid_argument("cuda attention: unsupported shape (T " + std::to_string(p.T) +
                                ", Hq " + std::to_string(p.Hq) + ", Hkv " + std::to_string(p.Hkv) +
                                ", D " + std::to_string(p.D) + ", sequences " +
                                std::to_string(p.num_seqs) + ")");
}

// Σ ceil(len_i / rows) over the sequences (host copy of cu_seqlens).
int64_t total_tiles(const AttnProblem& p, int rows) {
  int64_t n = 0;
  for (int i = 0; i < p.num_seqs; ++i) n += (p.cu_host[i + 1] - p.cu_host[i] + rows - 1) / rows;
  return n;
}

// Writes the tile table for `rows` and returns the 1-D grid size (tiles × Hq).
unsigned plan(const AttnProblem& p, int rows, const Ws& ws, cudaStream_t st, const char* op) {
  const int64_t blocks = total_tiles(p, rows) * p.Hq;
  if (blocks > 0x7fffffff) throw std::invalid_argument("cuda attention: too many tiles");
  tile_plan_kernel<<<1, kPlanThreads, 0, st>>>(p.cu_dev, p.num_seqs, rows, ws.tile_start);
  check_launch(op);
  return static_cast<unsigned>(blocks);
}

KArgs kargs(const AttnProblem& p, const Ws& ws) {
  return KArgs{p.cu_dev, ws.tile_start, p.num_seqs,      p.T, p.Hq, p.Hkv,
               p.D,      p.scale,       p.scale * kLog2e};
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

template <int D>
constexpr size_t tc_smem(int tiles) {
  return static_cast<size_t>(tiles) * tile_bytes<D>();
}

template <class T>
void fwd_generic(const AttnProblem& p, const KArgs& ka, unsigned grid, void* out, float* lse,
                 const void* q, const void* k, const void* v, cudaStream_t st) {
  launch(attn_fwd_generic<T>, grid, kGenThreads, gen_fwd_smem(p.D), st, "attention_fwd", ka,
         static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
         static_cast<T*>(out), lse);
}

template <int D>
void fwd_tc(const KArgs& ka, unsigned grid, void* out, float* lse, const void* q, const void* k,
            const void* v, cudaStream_t st) {
  launch(attn_fwd_tc<D>, grid, kTcThreads, tc_smem<D>(5), st, "attention_fwd", ka,
         static_cast<const bf16*>(q), static_cast<const bf16*>(k), static_cast<const bf16*>(v),
         static_cast<bf16*>(out), lse);
}

template <class T>
void bwd_generic(const AttnProblem& p, const KArgs& ka, const Ws& ws, unsigned grid, void* dq,
                 void* dk, void* dv, const void* dout, const void* q, const void* k, const void* v,
                 const float* lse, cudaStream_t st) {
  const T *tq = static_cast<const T*>(q), *tk = static_cast<const T*>(k),
          *tv = static_cast<const T*>(v), *tg = static_cast<const T*>(dout);
  const bool partial = p.Hq > p.Hkv;
  launch(attn_dkdv_generic<T>, grid, kGenThreads, gen_dkdv_smem(p.D), st, "attention_bwd", ka, tq,
         tk, tv, tg, lse, static_cast<const float*>(ws.Di), partial ? ws.pk : nullptr,
         partial ? ws.pv : nullptr, static_cast<T*>(dk), static_cast<T*>(dv));
  launch(attn_dq_generic<T>, grid, kGenThreads, gen_dq_smem(p.D), st, "attention_bwd", ka, tq, tk,
         tv, tg, lse, static_cast<const float*>(ws.Di), static_cast<T*>(dq));
}

template <int D>
void bwd_tc(const AttnProblem& p, const KArgs& ka, const Ws& ws, unsigned grid, void* dq, void* dk,
            void* dv, const void* dout, const void* q, const void* k, const void* v,
            cudaStream_t st) {
  const bf16 *tq = static_cast<const bf16*>(q), *tk = static_cast<const bf16*>(k),
             *tv = static_cast<const bf16*>(v), *tg = static_cast<const bf16*>(dout);
  const bool partial = p.Hq > p.Hkv;
  launch(attn_dkdv_tc<D>, grid, kTcThreads, tc_smem<D>(6) + 4 * 2 * 2 * kTc, st, "attention_bwd",
         ka, tq, tk, tv, tg, static_cast<const float*>(ws.lse2), static_cast<const float*>(ws.Di),
         partial ? ws.pk : nullptr, partial ? ws.pv : nullptr, static_cast<bf16*>(dk),
         static_cast<bf16*>(dv));
  launch(attn_dq_tc<D>, grid, kTcThreads, tc_smem<D>(6), st, "attention_bwd", ka, tq, tk, tv, tg,
         static_cast<const float*>(ws.lse2), static_cast<const float*>(ws.Di),
         static_cast<bf16*>(dq));
}

}  // namespace

bool attention_uses_tensor_cores(const AttnProblem& p, std::initializer_list<const void*> ptrs) {
  if (!p.bf16 || (p.D != 64 && p.D != 128)) return false;
  for (const void* ptr : ptrs)
    if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) return false;
  return true;
}

size_t attention_workspace_bytes(const AttnProblem& p) {
  const size_t st = static_cast<size_t>(p.T) * p.Hq * 4;
  size_t n = table_bytes(p) + 2 * align256(st);
  if (p.Hq > p.Hkv) n += 2 * align256(st * p.D);
  return n;
}

void attention_fwd(const AttnProblem& p, void* out, float* lse, const void* q, const void* k,
                   const void* v, void* workspace, void* stream, AttnKernels which) {
  validate(p);
  if (p.T == 0) return;
  const auto st = static_cast<cudaStream_t>(stream);
  const bool tc = which == AttnKernels::kAuto && attention_uses_tensor_cores(p, {out, q, k, v});
  const Ws ws = carve(p, workspace);
  const unsigned grid = plan(p, tc ? kTc : kGenRows, ws, st, "attention_fwd");
  if (grid == 0) return;
  const KArgs ka = kargs(p, ws);
  if (tc) {
    if (p.D == 64) {
      fwd_tc<64>(ka, grid, out, lse, q, k, v, st);
    } else {
      fwd_tc<128>(ka, grid, out, lse, q, k, v, st);
    }
  } else if (p.bf16) {
    fwd_generic<bf16>(p, ka, grid, out, lse, q, k, v, st);
  } else {
    fwd_generic<float>(p, ka, grid, out, lse, q, k, v, st);
  }
}

void attention_bwd(const AttnProblem& p, void* dq, void* dk, void* dv, const void* dout,
                   const void* q, const void* k, const void* v, const void* out, const float* lse,
                   void* workspace, void* stream, AttnKernels which) {
  validate(p);
  if (p.T == 0) return;
  const auto st = static_cast<cudaStream_t>(stream);
  const bool tc = which == AttnKernels::kAuto &&
                  attention_uses_tensor_cores(p, {dq, dk, dv, dout, q, k, v, out});
  const Ws ws = carve(p, workspace);
  const unsigned grid = plan(p, tc ? kTc : kGenRows, ws, st, "attention_bwd");
  if (grid == 0) return;
  const KArgs ka = kargs(p, ws);
  const int64_t rows = p.T * p.Hq;
  const unsigned prep_grid = static_cast<unsigned>((rows + 3) / 4);
  if (p.bf16) {
    attn_bwd_prep_kernel<bf16><<<prep_grid, 128, 0, st>>>(static_cast<const bf16*>(dout),
                                                          static_cast<const bf16*>(out), lse, ws.Di,
                                                          ws.lse2, p.T, p.Hq, p.D);
  } else {
    attn_bwd_prep_kernel<float><<<prep_grid, 128, 0, st>>>(static_cast<const float*>(dout),
                                                           static_cast<const float*>(out), lse,
                                                           ws.Di, ws.lse2, p.T, p.Hq, p.D);
  }
  check_launch("attention_bwd");
  if (tc) {
    if (p.D == 64) {
      bwd_tc<64>(p, ka, ws, grid, dq, dk, dv, dout, q, k, v, st);
    } else {
      bwd_tc<128>(p, ka, ws, grid, dq, dk, dv, dout, q, k, v, st);
    }
  } else if (p.bf16) {
    bwd_generic<bf16>(p, ka, ws, grid, dq, dk, dv, dout, q, k, v, lse, st);
  } else {
    bwd_generic<float>(p, ka, ws, grid, dq, dk, dv, dout, q, k, v, lse, st);
  }
  if (p.Hq > p.Hkv) {
    const int64_t n = p.T * p.Hkv * p.D;
    const unsigned g = static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 65536));
    if (p.bf16) {
      attn_sum_heads_kernel<bf16><<<g, 256, 0, st>>>(ws.pk, ws.pv, static_cast<bf16*>(dk),
                                                     static_cast<bf16*>(dv), p.T, p.Hq, p.Hkv, p.D);
    } else {
      attn_sum_heads_kernel<float><<<g, 256, 0, st>>>(
          ws.pk, ws.pv, static_cast<float*>(dk), static_cast<float*>(dv), p.T, p.Hq, p.Hkv, p.D);
    }
    check_launch("attention_bwd");
  }
}

}  // namespace zt::cuda
