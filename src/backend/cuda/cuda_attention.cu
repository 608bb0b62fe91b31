// CUDA attention: causal, GQA, padding-free varlen (cu_seqlens) attention, forward and a
// deterministic backward, with the maths of backend/cpu/cpu_attention.cpp (the reference the GPU
// tests compare against): scores = scale·q·kᵀ, causal mask within each sequence (and, with a
// sliding window W, keys more than W - 1 positions back masked too), fp32 softmax statistics, ·v;
// lse saved for the backward, which recomputes the probabilities.
//
// Why our own FlashAttention-2-style kernels and not cuDNN's SDPA: the cudnn-frontend headers are
// not installed and the raw cuDNN backend graph API needs hundreds of lines of descriptor code per
// graph (forward, backward, ragged offsets), whose deterministic-backward support depends on the
// cuDNN version; two small kernel families are less code, run on any sm_80+ GPU and are tested
// against the CPU op like every other kernel.
//
// Three kernel families behind one dispatch (attention_fwd / attention_bwd at the end):
//  * generic (cuda_attention_generic.cu): any D ≤ 256, f32 or bf16 storage, fp32 CUDA-core
//    arithmetic. Used for fp32 models and unusual head dims (the test models have D = 12 and 16).
//  * tensor cores (cuda_attention_tc.cu): bf16, D ∈ {64, 128, 256}, mma.sync m16n8k16 with fp32
//    accumulators, FlashAttention-2 style 64×64 tiles with causal tile skipping.
//  * Hopper (sm90/attention_sm90.cu, sm_90a only): bf16, D ∈ {64, 128}, no window — warpgroup MMA
//    (wgmma) from 128-byte-swizzled shared memory, a persistent warp-specialized forward (a TMA
//    producer and two MMA warpgroups, three at D 64: query tiles of 128 / 192 rows), and a fused
//    backward: the dK/dV pass also forms dQ, added across key tiles in a fixed order (below). On a
//    compute-capability-9.0 device kAuto takes it for the forward and the backward of such calls;
//    the mma.sync kernels stay the path for sm_89, windows and D = 256, and the second check the
//    GPU tests compare it against.
// A sliding window W (Gemma 3, Mistral, SmolLM3 layers) is a KArgs field: both families skip the
// key (query) tiles wholly outside every window of their query (key) tile, so the work per tile is
// O(W) instead of O(position); W ≥ T is the plain causal mask and is passed as 0.
// This file holds what both share: the varlen work list, the backward's prep and head-sum kernels,
// the workspace layout and the dispatch.
//
// Varlen work lists: a tiny kernel turns cu_seqlens into tile_start[i] = Σ_{j<i} ceil(len_j / rows)
// (device, in the workspace); a block b of the 1-D grid (Σ tiles × Hq blocks) takes query head
// b % Hq and global tile b / Hq, and finds its sequence by binary search. Query tiles run heaviest
// (last) first, key tiles of the dK/dV passes heaviest (first) first, which evens the tail. The
// Hopper fused backward reads its blocks' (sequence, key tile) from an order table the same kernel
// writes: sequence by sequence at G = 1 query head per block (the blocks side by side share Q, dO
// and dQ rows in L2), tile-major across the sequences (every sequence's key tile 0 first) for
// G > 1 (attention_bwd_tile_major; bench/README, session 28, has both orders at every G).
//
// Backward (both families): (1) a prep kernel writes Di = rowsum(dO∘O) and lse·log2(e) f32 [Hq, T];
// (2) a dK/dV kernel, one block per (key tile, query head): it loops over the query tiles at and
// after its keys in order and writes that query head's dK, dV contribution (f32 partials
// [T, Hq, D] in the workspace when Hq > Hkv, else the result); (3) a dQ kernel, one block per
// (query tile, query head), loops over the key tiles up to the diagonal in order (recomputing P);
// (4) when Hq > Hkv, a kernel sums each KV head's partials in head order into dk, dv (the Hopper
// backward does this in its kernel: the last of a key tile's query-head blocks to finish sums the
// group's partials, in head order, from L2). Splitting the
// dK/dV pass by query head (instead of one block looping over the group's heads) gives 6× the
// blocks for Qwen2.5-1.5B (12 query / 2 KV heads), where one block per (KV head, key tile) would
// leave the longest block ~2× the average on 132 SMs. The Hopper backward takes the middle road
// where it pays: G query heads per block (a divisor of the group, chosen per problem by a
// simulated schedule, attention_bwd_heads_per_block), their dK/dV summed in the same registers,
// so only one fp32 partial per head group is stored and summed (none when G is the group).
//
// The Hopper backward (D 64 and 128) fuses (2) and (3): its dK/dV block also computes each query
// tile's dQ partial dS·K and a writer warp adds it into an fp32 accumulator [Hq, T, D] (workspace)
// with a bulk copy (key tile 0) or bulk reduce-add (the others), one block at a time per query tile
// in ascending key-tile order, enforced by a per-(query tile, head) flag that each block waits on
// (acquire) and advances (release) after its addition has completed; a small kernel then writes
// dq = scale·accumulator in bf16. Within a sequence, blocks are issued key tile 0 (the heaviest)
// first in either order, so a block only ever waits on blocks issued before it, and each takes its
// query tiles last first, so the blocks of one head meet on the same query tile and trail each
// other by about one tile.
//
// Determinism: every output element is written by exactly one thread, or (the Hopper dQ
// accumulator) added to by one block at a time in an order fixed by the shapes; each thread adds
// its terms in an order fixed by the shapes too (tile loops in index order, fixed warp-shuffle
// trees, fixed mma k order). Nothing depends on scheduling, the SM count or addresses: which
// block of a GQA group sums the Hopper backward's dK/dV partials depends on timing, but the sum it
// forms does not (head order, from 0); its heads per block G, which sets how dK/dV's terms are
// grouped, is a function of the shapes and sequence lengths only (the schedule it simulates has a
// fixed 132 SMs, whatever the card).
//
// Resources (ptxas, sm_90; sm_89 within a few registers): tensor-core kernels 128 threads,
// __launch_bounds__(128, 2), no spills — forward D=128 229 regs / 80 KiB smem, D=64 153 / 40 KiB;
// dQ D=128 246 / 96 KiB, D=64 206 / 48 KiB; dK/dV D=128 255 / 97 KiB, D=64 245 / 49 KiB (every
// tile fits the 99 KiB per-block limit of sm_89 too). Windowed instances (D = 64/128): 162-255
// regs, the D = 128 dQ spills 36 bytes. D = 256 (both): __launch_bounds__(128, 1), 255 regs,
// spills 0-56 bytes (forward ≤ 28, dQ, dK ≤ 56, dV 0), 160-193 KiB smem (sm_90 only). Generic:
// 94-128 regs (the dQ kernel spills 8-28 bytes on sm_90), ≤ 97 KiB of shared memory at D = 256.
//
// Expected speed on an H200 (Qwen2.5-1.5B layer, T = 8192 = 4×2048, Hq 12, Hkv 2, D 128; causal
// FLOPs fwd 4·Σs²/2·Hq·D = 51.5 GFLOP, bwd counted 2.5× = 129 GFLOP): the forward reads 32 FLOP per
// byte of shared memory (the mma.sync rate, ~60 % of the 989 TFLOP/s dense peak, is the limit):
// ~250-300 TFLOP/s, ~0.2 ms. The backward executes 7/5 of its counted FLOPs (P is recomputed in
// both passes) at ~14.5 FLOP per shared-memory byte (smem-bound near 45 % of peak): ~130-180
// counted TFLOP/s, ~0.7-1.0 ms. Together ~1 ms per layer against ~3.5 ms for the layer's linear
// layers (6·T·(H·(Hq+2Hkv)·D + Hq·D·H + 3·H·I) = 2.3 TFLOP at ~650 TFLOP/s). Measure with
// bench/bench_cuda_attention.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cuda/cuda_attention.h"
#include "backend/cuda/cuda_attention_kernels.cuh"
#include "backend/cuda/cuda_ptx.cuh"

namespace zt::cuda {
namespace {

using namespace attn;

// In place over x[0, m): x[i] ← Σ_{j<i} x[j] (exclusive) or Σ_{j≤i} x[j] (inclusive), by one
// block of kPlanThreads threads: each sums a contiguous chunk, a block-wide inclusive scan of the
// chunk sums in `part` (shared, kPlanThreads), then each thread rewrites its chunk. Returns the
// total to every thread. Called by all of the block's threads.
constexpr int kPlanThreads = 1024;
__device__ int32_t block_scan(int32_t* x, int m, bool inclusive, int32_t* part) {
  const int t = threadIdx.x;
  const int chunk = (m + kPlanThreads - 1) / kPlanThreads;
  const int b = min(m, t * chunk), e = min(m, b + chunk);
  int32_t sum = 0;
  for (int i = b; i < e; ++i) sum += x[i];
  __syncthreads();  // (part's previous use done)
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
    const int32_t xi = x[i];
    x[i] = inclusive ? run + xi : run;
    run += xi;
  }
  const int32_t total = part[kPlanThreads - 1];
  __syncthreads();  // every thread's chunk written and visible to the block
  return total;
}

// tile_start[i] = Σ_{j<i} ceil(len_j / rows) for i = 0..n, and tile_start[n + 1] = 0: the Hopper
// forward's work counter (KArgs::next_item), zeroed here so that it needs no launch of its own;
// likewise zero[0, nzero) (the Hopper backward's dQ flags and head-sum counters; nzero may be 0).
// One block of
// kPlanThreads threads.
// With `order` (the Hopper backward), also its block order: order[r] = (sequence, tile) for r in
// [0, Σ tiles). Without tile_major, sequence by sequence (r = tile_start[s] + tile: the blocks
// running together are a few key tiles of one sequence's heads, which read the same Q, dO and dQ
// rows from L2). With it, tile-major — every sequence's tile 0, then every tile 1, … — and within a
// tile the sequences with the most tiles first (a counting sort on the tile count; the order among
// equal counts follows atomics and may vary, which changes which block runs when, never a value).
// A tile's work falls with its index (causal: key tile 0 has the most query tiles), so the
// heaviest blocks of every sequence start first, and a sequence's tile n − 1 always precedes its
// tile n (the dQ chain waits only on blocks launched earlier). `scratch`: 3·(bmax + 1) ints, bmax ≥
// every sequence's tile count.
__global__ void __launch_bounds__(kPlanThreads)
    tile_plan_kernel(const int32_t* cu, int n, int rows, int32_t* tile_start, int32_t* zero,
                     int64_t nzero, int2* order, bool tile_major, int32_t* scratch, int bmax) {
  allow_next_grid();  // the Hopper kernels behind it launch now and wait for it (launch_pdl)
  __shared__ int32_t part[kPlanThreads];
  const int t = threadIdx.x;
  const auto tiles = [&](int s) { return (cu[s + 1] - cu[s] + rows - 1) / rows; };
  for (int64_t i = t; i < nzero; i += kPlanThreads) zero[i] = 0;
  for (int i = t; i < n; i += kPlanThreads) tile_start[i] = tiles(i);
  __syncthreads();
  const int32_t total = block_scan(tile_start, n, false, part);
  if (t == 0) {
    tile_start[n] = total;
    tile_start[n + 1] = 0;
  }
  if (order == nullptr) return;
  if (!tile_major) {
    for (int s = t; s < n; s += kPlanThreads)
      for (int x = 0, c = tiles(s); x < c; ++x) order[tile_start[s] + x] = make_int2(s, x);
    return;
  }
  // cnt[c]: sequences with c tiles, then (inclusive scan) with ≤ c, then with more than c;
  // cum[c] = Σ_{x<c} (sequences with more than x tiles): the first rank of tile column c.
  int32_t *cnt = scratch, *cum = scratch + (bmax + 1), *fill = scratch + 2 * (bmax + 1);
  for (int i = t; i <= bmax; i += kPlanThreads) cnt[i] = fill[i] = 0;
  __syncthreads();
  for (int s = t; s < n; s += kPlanThreads) atomicAdd(&cnt[tiles(s)], 1);
  __syncthreads();
  block_scan(cnt, bmax + 1, true, part);
  for (int i = t; i <= bmax; i += kPlanThreads) cum[i] = n - cnt[i];
  __syncthreads();
  for (int i = t; i <= bmax; i += kPlanThreads) cnt[i] = cum[i];
  __syncthreads();
  block_scan(cum, bmax + 1, false, part);
  for (int s = t; s < n; s += kPlanThreads) {
    const int c = tiles(s);
    if (c == 0) continue;
    // Rank among the sequences sorted by tile count, descending: those with more tiles, then the
    // ones with as many before it. In column x < c, ranks [0, cnt[x]) hold the sequences with more
    // than x tiles, this one among them.
    const int rank = cnt[c] + atomicAdd(&fill[c], 1);
    for (int x = 0; x < c; ++x) order[cum[x] + rank] = make_int2(s, x);
  }
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

// The prep of attn_bwd_prep_kernel for 16-byte-aligned bf16 rows of D = 8·kLanes elements (D 64,
// 128, 256: the tensor-core families): one row per kLanes lanes, each lane's 8 products (one
// 16-byte load of dO and of O) summed in order, then a butterfly over the row's lanes — 16-byte
// loads where the generic kernel issues 2-byte ones (the prep reads 2·T·Hq·D bf16 every backward).
// 128 threads, 128 / kLanes rows per block.
template <int D>
__global__ void __launch_bounds__(128)
    attn_bwd_prep_vec_kernel(const bf16* dout, const bf16* out, const float* lse, float* Di,
                             float* lse2, int64_t ntok, int Hq) {
  constexpr int kLanes = D / 8, kRowsPerBlock = 128 / kLanes;
  static_assert(D % 8 == 0 && kLanes <= 32, "one row per at most a warp of 16-byte loads");
  // On the Hopper path it is launched programmatically after the tile plan (launch_pdl), whose
  // output it does not read (dO, O and lse come from kernels that finished before the plan began):
  // it lets the fused backward launch at once, and waits for the plan only at its end, so that
  // the backward's wait for this grid covers the plan too.
  allow_next_grid();
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kLanes;
  const int sub = static_cast<int>(threadIdx.x % kLanes);
  const bool valid = row < ntok * Hq;
  float s = 0.0f;
  if (valid) {
    const uint4 g = *reinterpret_cast<const uint4*>(dout + row * D + sub * 8);
    const uint4 o = *reinterpret_cast<const uint4*>(out + row * D + sub * 8);
    const uint32_t gw[4] = {g.x, g.y, g.z, g.w}, ow[4] = {o.x, o.y, o.z, o.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&gw[j]));
      const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&ow[j]));
      s += a.x * b.x;
      s += a.y * b.y;
    }
  }
  // Every lane takes part in the shuffles (rows past the end contribute nothing and write nothing).
#pragma unroll
  for (int off = kLanes / 2; off >= 1; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
  if (valid && sub == 0) {
    const int64_t t = row / Hq, i = (row - t * Hq) * ntok + t;
    Di[i] = s;
    lse2[i] = lse[i] * kLog2e;
  }
  wait_prior_grid();
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

// attn_sum_heads_kernel for bf16 outputs and D % 4 == 0 (the tensor-core families): four
// consecutive elements per thread, 16-byte loads of the partials and 8-byte stores, each element's
// sum in head order as there (bitwise the same result).
__global__ void __launch_bounds__(256)
    attn_sum_heads_vec_kernel(const float* pk, const float* pv, bf16* dk, bf16* dv, int64_t ntok,
                              int Hq, int Hkv, int D) {
  const int64_t n4 = ntok * Hkv * D / 4;
  const int rep = Hq / Hkv;
  for (int64_t i4 = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i4 < n4;
       i4 += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = i4 * 4, t = i / (static_cast<int64_t>(Hkv) * D);
    const int r = static_cast<int>(i - t * Hkv * D), g = r / D, d = r - g * D;
    const int64_t base = (t * Hq + static_cast<int64_t>(g) * rep) * D + d;
    float4 sk = make_float4(0.0f, 0.0f, 0.0f, 0.0f), sv = sk;
    for (int j = 0; j < rep; ++j) {
      const float4 a = *reinterpret_cast<const float4*>(pk + base + static_cast<int64_t>(j) * D);
      const float4 b = *reinterpret_cast<const float4*>(pv + base + static_cast<int64_t>(j) * D);
      sk.x += a.x, sk.y += a.y, sk.z += a.z, sk.w += a.w;
      sv.x += b.x, sv.y += b.y, sv.z += b.z, sv.w += b.w;
    }
    uint2 ok, ov;
    ok.x = pack_bf16(sk.x, sk.y), ok.y = pack_bf16(sk.z, sk.w);
    ov.x = pack_bf16(sv.x, sv.y), ov.y = pack_bf16(sv.z, sv.w);
    *reinterpret_cast<uint2*>(dk + i) = ok;
    *reinterpret_cast<uint2*>(dv + i) = ov;
  }
}

// ---------------------------------------------------------------------------------------------
// Host side

size_t align256(size_t n) { return (n + 255) & ~size_t{255}; }

// The tile table holds max(num_seqs, T) + 1 entries, then the Hopper forward's work counter
// (KArgs::next_item): sequences are non-empty (model/micro_batch), so workspaces sized from shapes
// alone (num_seqs unknown, 0) fit every micro-batch of T tokens.
size_t table_bytes(const AttnProblem& p) {
  return align256(4 * static_cast<size_t>(std::max<int64_t>(p.num_seqs, p.T) + 2));
}

// Workspace regions (see attention_workspace_bytes).
struct Ws {
  int32_t* tile_start;
  float* Di;
  float* lse2;
  float* pk;
  float* pv;
  float* dqa;  // Hopper backward: dQ accumulator fp32 [Hq, T, D]
  int* sem;    // Hopper backward: one flag per (64-row query tile, query head), then with GQA one
               // head-sum counter per (128-key tile, KV head)
  int2* order;       // Hopper backward: its block order [≤ T] (tile_plan_kernel)
  int32_t* scratch;  // … and the plan's counting sort, 3·(max_tiles(p) + 1)
};
// Whether the backward runs the Hopper fused kernel (D 64 and 128: every shape the Hopper family
// takes), whose dQ accumulator and flags live in the workspace.
bool sm90_fused_bwd(const AttnProblem& p) { return attention_uses_sm90(p); }

// The most 128-key tiles a sequence of the problem can have (its length ≤ T).
int max_tiles(const AttnProblem& p) { return static_cast<int>((p.T + kSm90Rows - 1) / kSm90Rows); }
// The Hopper backward's dQ flags (2 per 128-row tile and head; a sequence holds ≥ 1 token per
// tile, so ≤ 2·T·Hq of them), then the head-sum counters (one per tile and KV head, ≤ T·Hkv).
size_t sem_bytes(const AttnProblem& p) {
  return align256(static_cast<size_t>(p.T) * (2 * p.Hq + p.Hkv) * 4);
}

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
    c += align256(st * p.D);
  }
  if (sm90_fused_bwd(p)) {
    w.dqa = reinterpret_cast<float*>(c);
    c += align256(st * p.D);
    w.sem = reinterpret_cast<int32_t*>(c);
    c += sem_bytes(p);
    w.order = reinterpret_cast<int2*>(c);
    c += align256(8 * static_cast<size_t>(p.T));
    w.scratch = reinterpret_cast<int32_t*>(c);
  }
  return w;
}

void validate(const AttnProblem& p) {
  if (p.T < 0 || p.Hq < 1 || p.Hkv < 1 || p.Hq % p.Hkv != 0 || p.D < 1 || p.D > kMaxD ||
      p.num_seqs < 1 || !p.cu_host || p.window < 0)
    throw std::invalid_argument(
        "cuda attention: unsupported shape (T " + std::to_string(p.T) + ", Hq " +
        std::to_string(p.Hq) + ", Hkv " + std::to_string(p.Hkv) + ", D " + std::to_string(p.D) +
        ", sequences " + std::to_string(p.num_seqs) + ", window " + std::to_string(p.window) + ")");
  // The Hopper backward's forced schedule, checked whichever kernels run (a bad value is an error
  // in the caller, not something the kernel choice should hide).
  const int rep = p.Hq / p.Hkv;
  if (p.bwd_heads_per_block < 0 || (p.bwd_heads_per_block > 0 && rep % p.bwd_heads_per_block != 0))
    throw std::invalid_argument("cuda attention: bwd_heads_per_block " +
                                std::to_string(p.bwd_heads_per_block) +
                                " does not divide Hq / Hkv = " + std::to_string(rep));
  if (p.bwd_block_order < 0 || p.bwd_block_order > 2)
    throw std::invalid_argument("cuda attention: bwd_block_order " +
                                std::to_string(p.bwd_block_order) + " is not 0, 1 or 2");
}

// Σ ceil(len_i / rows) over the sequences (host copy of cu_seqlens).
int64_t total_tiles(const AttnProblem& p, int rows) {
  int64_t n = 0;
  for (int i = 0; i < p.num_seqs; ++i) n += (p.cu_host[i + 1] - p.cu_host[i] + rows - 1) / rows;
  return n;
}

// Writes the tile table for `rows` and returns the 1-D grid size (tiles × Hq); with sm90_bwd,
// also zeroes the Hopper backward's flags — the dQ flags (2 per tile and query head), then with
// GQA the head-sum counters (one per tile and KV head; bwd_sum_heads_last) — and writes its block
// order (attention_bwd_tile_major; rows must be kSm90Rows).
unsigned plan(const AttnProblem& p, int rows, const Ws& ws, cudaStream_t st, const char* op,
              bool sm90_bwd = false, bool tile_major = false) {
  const int64_t tiles = total_tiles(p, rows), blocks = tiles * p.Hq;
  if (blocks > 0x7fffffff) throw std::invalid_argument("cuda attention: too many tiles");
  const int64_t nzero = sm90_bwd ? 2 * blocks + (p.Hq > p.Hkv ? tiles * p.Hkv : 0) : 0;
  tile_plan_kernel<<<1, kPlanThreads, 0, st>>>(p.cu_dev, p.num_seqs, rows, ws.tile_start, ws.sem,
                                               nzero, sm90_bwd ? ws.order : nullptr, tile_major,
                                               ws.scratch, max_tiles(p));
  check_launch(op);
  return static_cast<unsigned>(blocks);
}

KArgs kargs(const AttnProblem& p, const Ws& ws, int hpb = 1) {
  // Every sequence is at most T long, so a window ≥ T masks nothing beyond causality.
  const int window = p.window >= p.T ? 0 : static_cast<int>(p.window);
  return KArgs{p.cu_dev,
               ws.tile_start,
               p.num_seqs,
               p.T,
               p.Hq,
               p.Hkv,
               p.D,
               p.scale,
               p.scale * kLog2e,
               window,
               ws.tile_start + p.num_seqs + 1,
               hpb,
               ws.order};
}

// The Hopper backward's schedule, simulated for G query heads per block: its blocks in launch
// order (tile_plan_kernel's: sequence by sequence, or with tile_major every sequence's tile 0,
// then every tile 1, …, the sequences with more tiles first within a tile; the Hq / G head groups
// of a tile adjacent), each started on
// the SM that frees first (one block an SM) and taking G·(its query-tile steps) + a fixed cost,
// plus, when G < Hq / Hkv, the cost of storing its fp32 dK/dV partial and its share of the head
// sum. Returns the last block's end, in steps (one query tile against the block's 128 keys).
// `tiles`: each sequence's (key tiles, query tiles), in sequence order. (L2 reuse is not modelled:
// at G = 1 the sequence order is what keeps it, session 27's figures in bench/README.)
double bwd_makespan(const std::vector<std::pair<int, int>>& tiles, int rows, int Hq, int rep, int G,
                    bool tile_major, int sms) {
  // Estimates, in steps: a block's set-up (K and V loads, barriers) ~1; its fp32 partial (128 keys
  // × D × 8 bytes to L2) and its share of the head sum ~2-3, from the session-26 profile (bench/
  // README: partial stores 6.3 % and the head sum ≤ 12.8 % of a 4 × 2k D 128 backward's samples,
  // ~17 steps a block). bench/run_attn_heads_per_block.sh measures every G beside the choice.
  const double fixed = 1.0, partial = rows == 64 ? 3.0 : 2.0;
  std::priority_queue<double, std::vector<double>, std::greater<>> free_at;
  for (int i = 0; i < sms; ++i) free_at.push(0.0);
  double end = 0;
  const auto run = [&](int nq, int x) {  // the Hq / G blocks of one (sequence, key tile x)
    const double cost = G * (nq - x * kSm90Rows / rows) + fixed + (G < rep ? partial : 0.0);
    for (int g = 0; g < Hq / G; ++g) {
      const double t = free_at.top() + cost;
      free_at.pop();
      free_at.push(t);
      end = std::max(end, t);
    }
  };
  if (!tile_major) {
    for (const auto& [nk, nq] : tiles)
      for (int x = 0; x < nk; ++x) run(nq, x);
    return end;
  }
  std::vector<std::pair<int, int>> sorted = tiles;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  const int ncol = sorted.empty() ? 0 : sorted.front().first;
  for (int x = 0; x < ncol; ++x)
    for (const auto& [nk, nq] : sorted) {
      if (nk <= x) break;
      run(nq, x);
    }
  return end;
}

}  // namespace

bool attention_bwd_tile_major(const AttnProblem& p, int G) {
  return p.bwd_block_order == 0 ? G > 1 : p.bwd_block_order == 2;
}

int attention_bwd_heads_per_block(const AttnProblem& p) {
  validate(p);
  const int rep = p.Hq / p.Hkv;
  if (!attention_uses_sm90(p)) return 1;
  if (p.bwd_heads_per_block > 0) return p.bwd_heads_per_block;
  if (rep == 1) return 1;
  // The layers of a step share their sequences: the last answer is reused for the same problem.
  static thread_local std::vector<int64_t> last_key;
  static thread_local int last_g = 1;
  std::vector<int64_t> key{p.Hq, p.Hkv, p.D, p.bwd_block_order};
  key.insert(key.end(), p.cu_host, p.cu_host + p.num_seqs + 1);
  if (key == last_key) return last_g;
  // H100 and H200 SXM have 132 SMs. Fixed, not queried: G sets how dK/dV's terms are grouped, so
  // a problem's bits must not depend on the card (a PCIe H100 or a MIG slice has fewer SMs).
  constexpr int sms = 132;
  const int rows = sm90_bwd_rows(p.D);
  std::vector<std::pair<int, int>> tiles;
  for (int i = 0; i < p.num_seqs; ++i) {
    const int64_t L = p.cu_host[i + 1] - p.cu_host[i];
    if (L > 0)
      tiles.emplace_back(static_cast<int>((L + kSm90Rows - 1) / kSm90Rows),
                         static_cast<int>((L + rows - 1) / rows));
  }
  int best = 1;
  double best_t = bwd_makespan(tiles, rows, p.Hq, rep, 1, attention_bwd_tile_major(p, 1), sms);
  for (int G = 2; G <= rep; ++G) {
    if (rep % G != 0) continue;
    const double t = bwd_makespan(tiles, rows, p.Hq, rep, G, attention_bwd_tile_major(p, G), sms);
    if (t < best_t) best = G, best_t = t;
  }
  last_key = std::move(key);
  last_g = best;
  return best;
}

bool attention_uses_sm90(const AttnProblem& p) {
#if defined(ZT_HAVE_SM90A)
  if (!p.bf16 || (p.D != 64 && p.D != 128) || (p.window > 0 && p.window < p.T)) return false;
  if (!(p.scale > 0.0f)) return false;  // the forward takes the row max on unscaled scores
  int dev = 0, major = 0, minor = 0;
  check(cudaGetDevice(&dev), "attention_fwd");
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), "attention_fwd");
  check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev), "attention_fwd");
  return major == 9 && minor == 0;  // sm_90a code runs on exactly compute capability 9.0
#else
  (void)p;
  return false;
#endif
}

namespace {

// The kernel family a call runs and its work list's rows per tile. The forward and the backward of
// one problem choose alike (the backward recomputes P from the forward's lse).
enum class Family { kGeneric, kMmaSync, kSm90 };
struct Choice {
  Family family;
  int rows;
};
Choice choose(const AttnProblem& p, AttnKernels which, std::initializer_list<const void*> ptrs) {
  if (which == AttnKernels::kGeneric || !attention_uses_tensor_cores(p, ptrs))
    return {Family::kGeneric, kGenRows};
  if (which == AttnKernels::kAuto && attention_uses_sm90(p)) return {Family::kSm90, kSm90Rows};
  return {Family::kMmaSync, kTcRows};
}

}  // namespace

bool attention_uses_tensor_cores(const AttnProblem& p, std::initializer_list<const void*> ptrs) {
  if (!p.bf16 || (p.D != 64 && p.D != 128 && p.D != 256)) return false;
  for (const void* ptr : ptrs)
    if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) return false;
  return true;
}

size_t attention_workspace_bytes(const AttnProblem& p) {
  const size_t st = static_cast<size_t>(p.T) * p.Hq * 4;
  size_t n = table_bytes(p) + 2 * align256(st);
  if (p.Hq > p.Hkv) n += 2 * align256(st * p.D);
  // Hopper backward: the dQ accumulator, its flags and counters (sem_bytes), its block order
  // (a sequence holds ≥ 1 token per tile, so ≤ T tiles) and the order's scratch.
  if (sm90_fused_bwd(p))
    n += align256(st * p.D) + sem_bytes(p) + align256(8 * static_cast<size_t>(p.T)) +
         align256(12 * (static_cast<size_t>(max_tiles(p)) + 1));
  return n;
}

void attention_fwd(const AttnProblem& p, void* out, float* lse, const void* q, const void* k,
                   const void* v, void* workspace, void* stream, AttnKernels which) {
  validate(p);
  if (p.T == 0) return;
  const auto st = static_cast<cudaStream_t>(stream);
  const Choice c = choose(p, which, {out, q, k, v});
  const Ws ws = carve(p, workspace);
  // The Hopper forward tiles the queries by its own rows (the backward by kSm90Rows keys).
  const int rows = c.family == Family::kSm90 ? sm90_fwd_rows(p.D) : c.rows;
  const unsigned grid = plan(p, rows, ws, st, "attention_fwd");
  if (grid == 0) return;
  const KArgs ka = kargs(p, ws);
  if (c.family == Family::kSm90) {
    sm90_fwd(ka, grid, out, lse, q, k, v, st);
  } else if (c.family == Family::kMmaSync) {
    tc_fwd(ka, grid, out, lse, q, k, v, st);
  } else {
    generic_fwd(ka, grid, p.bf16, out, lse, q, k, v, st);
  }
}

void attention_bwd(const AttnProblem& p, void* dq, void* dk, void* dv, const void* dout,
                   const void* q, const void* k, const void* v, const void* out, const float* lse,
                   void* workspace, void* stream, AttnKernels which) {
  validate(p);
  if (p.T == 0) return;
  const auto st = static_cast<cudaStream_t>(stream);
  const Choice c = choose(p, which, {dq, dk, dv, dout, q, k, v, out});
  const Ws ws = carve(p, workspace);
  const int hpb = c.family == Family::kSm90 ? attention_bwd_heads_per_block(p) : 1;
  const unsigned grid = plan(p, c.rows, ws, st, "attention_bwd", c.family == Family::kSm90,
                             attention_bwd_tile_major(p, hpb));
  if (grid == 0) return;
  const KArgs ka = kargs(p, ws, hpb);
  const int64_t rows = p.T * p.Hq;
  const unsigned prep_grid = static_cast<unsigned>((rows + 3) / 4);
  if (c.family != Family::kGeneric && p.D <= 256) {  // bf16, D 64/128/256, 16-byte aligned
    const int rows_per_block = 128 / (p.D / 8);
    const unsigned g = static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block);
    const auto* go = static_cast<const bf16*>(dout);
    const auto* o = static_cast<const bf16*>(out);
    if (c.family == Family::kSm90) {  // D 64 or 128; programmatic (see the kernel)
      if (p.D == 64) {
        launch_pdl(attn_bwd_prep_vec_kernel<64>, g, 128, 0, st, "attention_bwd", go, o, lse, ws.Di,
                   ws.lse2, p.T, p.Hq);
      } else {
        launch_pdl(attn_bwd_prep_vec_kernel<128>, g, 128, 0, st, "attention_bwd", go, o, lse, ws.Di,
                   ws.lse2, p.T, p.Hq);
      }
    } else if (p.D == 64) {
      attn_bwd_prep_vec_kernel<64><<<g, 128, 0, st>>>(go, o, lse, ws.Di, ws.lse2, p.T, p.Hq);
    } else if (p.D == 128) {
      attn_bwd_prep_vec_kernel<128><<<g, 128, 0, st>>>(go, o, lse, ws.Di, ws.lse2, p.T, p.Hq);
    } else {
      attn_bwd_prep_vec_kernel<256><<<g, 128, 0, st>>>(go, o, lse, ws.Di, ws.lse2, p.T, p.Hq);
    }
  } else if (p.bf16) {
    attn_bwd_prep_kernel<bf16><<<prep_grid, 128, 0, st>>>(static_cast<const bf16*>(dout),
                                                          static_cast<const bf16*>(out), lse, ws.Di,
                                                          ws.lse2, p.T, p.Hq, p.D);
  } else {
    attn_bwd_prep_kernel<float><<<prep_grid, 128, 0, st>>>(static_cast<const float*>(dout),
                                                           static_cast<const float*>(out), lse,
                                                           ws.Di, ws.lse2, p.T, p.Hq, p.D);
  }
  check_launch("attention_bwd");
  // Per-query-head (Hopper: per-head-group) partials, summed below (by the Hopper kernel itself);
  // none when a Hopper block takes all of a KV head's query heads.
  const bool partials = p.Hq > p.Hkv && hpb < p.Hq / p.Hkv;
  float* pk = partials ? ws.pk : nullptr;
  float* pv = partials ? ws.pv : nullptr;
  if (c.family == Family::kSm90) {  // grid / hpb blocks, each hpb query heads
    sm90_bwd(ka, grid / hpb, ws.lse2, ws.Di, pk, pv, ws.dqa, ws.sem, dq, dk, dv, dout, q, k, v, st);
  } else if (c.family == Family::kMmaSync) {
    tc_bwd(ka, grid, ws.lse2, ws.Di, pk, pv, dq, dk, dv, dout, q, k, v, st);
  } else {
    generic_bwd(ka, grid, p.bf16, lse, ws.Di, pk, pv, dq, dk, dv, dout, q, k, v, st);
  }
  if (p.Hq > p.Hkv && c.family != Family::kSm90) {  // (the Hopper kernel sums the heads itself)
    const int64_t n = p.T * p.Hkv * p.D;
    const unsigned g = static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 65536));
    if (c.family != Family::kGeneric) {  // bf16, D a multiple of 64, 16-byte aligned
      const unsigned g4 = static_cast<unsigned>(std::min<int64_t>((n / 4 + 255) / 256, 65536));
      attn_sum_heads_vec_kernel<<<g4, 256, 0, st>>>(ws.pk, ws.pv, static_cast<bf16*>(dk),
                                                    static_cast<bf16*>(dv), p.T, p.Hq, p.Hkv, p.D);
    } else if (p.bf16) {
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
