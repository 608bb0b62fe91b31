// Tensor-core CUDA attention kernels: bf16 storage, head dim D ∈ {64, 128, 256} (Qwen2.5: 0.5B
// D = 64, 1.5B D = 128; Gemma 3: D = 256), sm_80+ mma.sync m16n8k16 bf16 with fp32 accumulators,
// FlashAttention-2 style: 64×64 tiles, 4 warps of 16 rows each, ldmatrix from XOR-swizzled shared
// memory, cp.async double buffering, online softmax in base 2, causal tile skipping (a query tile
// reads only the key tiles up to its diagonal and only the diagonal tile is masked). The
// probabilities are rounded to bf16 before the P·V product (and dS before dS·K, dSᵀ·Q), as
// FlashAttention does. Each output element is accumulated by one thread over tiles in index order
// with a fixed mma k order: bitwise repeatable.
//
// Sliding window W (KArgs::window > 0; query r sees keys r - W < c ≤ r): the forward and dQ start
// at the first key tile the tile's first row sees, the dK/dV pass stops after the last query tile
// that sees one of its keys, so a tile costs O(W/64 + 1) tiles instead of O(r/64); the tiles that
// straddle a window edge are masked like the diagonal. A row can then see no key of the first tile
// it visits: the forward's online softmax takes 0 as the reference max while the row max is still
// -inf (alpha, p = 0 instead of NaN). Whether a window is set is a template argument (Win): the
// Win = false instances are the causal kernels of before, instruction for instruction (a run-time
// window test cost the forward 7-15 % at D = 64/128 on an H200, bench_cuda_attention).
//
// D = 256: the fp32 accumulators of one warp's 16 rows are 128 registers per thread, so the forward
// re-reads Q fragments from shared memory per key tile (instead of holding 64 more registers) and
// the dK/dV pass runs twice — once for dV (needs P only), once for dK (P and dP) — instead of
// holding both 128-register accumulators; it recomputes S = K·Qᵀ once more (3 instead of 2 S-sized
// products plus the 2 accumulating ones). Tiles are 32 KiB: forward 160 KiB, dQ 192 KiB, dK/dV 193
// KiB of shared memory, one block per SM (sm_90's 227 KiB per block; a GPU with less fails at
// launch with the CUDA error, never silently).
//
// mma.sync.m16n8k16 fragments (PTX ISA "Matrix fragments for mma.m16n8k16"), g = lane/4,
// c = 2·(lane%4): A (16×16, row-major) regs a0..a3 = (g, c..c+1), (g+8, c..), (g, c+8..),
// (g+8, c+8..); B (16×8, k×n) regs b0, b1 = (k = c..c+1, n = g), (k = c+8.., n = g); C/D (16×8
// fp32) = (g, c), (g, c+1), (g+8, c), (g+8, c+1). Two adjacent n8 accumulator tiles of a row block
// therefore form one A fragment (k16) after packing to bf16 — P and dS never leave registers.
// ldmatrix.x4 lane l supplies the address of row l%8 of 8×8 matrix l/8.

#include <type_traits>

#include "backend/cuda/cuda_attention_kernels.cuh"
#include "backend/cuda/cuda_ptx.cuh"

namespace zt::cuda::attn {
namespace {

constexpr int kTc = kTcRows;     // rows of every tile: query tiles and key tiles
constexpr int kTcThreads = 128;  // 4 warps × 16 rows

__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, bool full) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src),
               "r"(full ? 4 : 0)
               : "memory");
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
// The A fragment of k-block kb (16 columns) from a row block's fp32 accumulators [n8 tile][4].
template <int N>
__device__ __forceinline__ void acc_to_a(const float (&s)[N][4], int kb, uint32_t (&a)[4]) {
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

// acc[16×16·NB] += A[16 rows of row block a_rb of tile a_tile] · B[16·NB rows from b_tile]ᵀ over
// D: the scores of one warp's rows against a 64-row tile (NB = 4) or a sub-tile of it (b_tile at
// a row block of the tile).
template <int D, int NB = 4>
__device__ __forceinline__ void mma_abt(float (&acc)[2 * NB][4], uint32_t a_tile, int a_rb,
                                        uint32_t b_tile, const Lanes<D>& ln) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t af[4];
    ldsm_x4(a_tile + at<D>(ln.a, a_rb, kk), af);
    const uint32_t bk = b_tile + at<D>(ln.b, 0, kk);
#pragma unroll
    for (int p = 0; p < NB; ++p) {
      uint32_t b[4];
      ldsm_x4(bk + p * (32 * D), b);
      mma(acc[2 * p], af, b[0], b[1]);
      mma(acc[2 * p + 1], af, b[2], b[3]);
    }
  }
}

// acc[16×D] += P[16×16·NB] (bf16 A fragments of NB k-blocks) · B[16·NB rows from b_tile, D].
template <int D, int NB = 4>
__device__ __forceinline__ void mma_pb(float (&acc)[D / 8][4], const float (&p)[2 * NB][4],
                                       uint32_t b_tile, const Lanes<D>& ln) {
#pragma unroll
  for (int kb = 0; kb < NB; ++kb) {
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

// Which gradients a dK/dV kernel instance accumulates (bit mask).
constexpr int kPartK = 1, kPartV = 2, kPartKV = 3;

// The other side of a 64×64 tile pair is processed in kSub<D> sub-tiles of 16·kNB<D> rows: the
// whole tile for D ≤ 128; two halves of 32 for D = 256, which halves the S/dP registers next to
// the 128-register accumulators (no spills). Byte offset of sub-tile hh: hh·kNB·32·D.
template <int D>
constexpr int kSub = D <= 128 ? 1 : 2;
template <int D>
constexpr int kNB = 4 / kSub<D>;

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

// Forward. Block: 64 query rows of head h (16 per warp), key tiles j0..diagonal in order (j0 = 0
// without a window), K/V double-buffered with cp.async; Q fragments stay in registers (D ≤ 128).
// Per warp and key tile: S = Q·Kᵀ (16×64, fp32), causal mask on the diagonal tile and window mask
// on the tiles that straddle a row's window start, online softmax in base 2 (row max/sum over the
// 4 lanes of a row by xor-shuffles), O += bf16(P)·V. Shared memory: Q + 2×(K, V) = 5 tiles
// (80 KiB at D = 128). Per block: reads its Q rows once and each K/V tile it needs once.
template <int D, bool Win>
__global__ void __launch_bounds__(kTcThreads, D <= 128 ? 2 : 1)
    attn_fwd_tc(KArgs a, const bf16* q, const bf16* k, const bf16* v, bf16* out, float* lse) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr uint32_t kTB = tile_bytes<D>();
  constexpr bool kQInRegs = D <= 128;
  extern __shared__ __align__(128) unsigned char tsm[];
  const uint32_t sQ = smem_u32(tsm), sK = sQ + kTB, sV = sK + 2 * kTB;
  const Work w = block_work(a, kTc, true);
  const int m0 = w.tile * kTc;
  const int j0 = Win ? first_key(a, m0) / kTc : 0;  // the first key tile a row of ours sees
  const int64_t ldq = static_cast<int64_t>(a.Hq) * D, ldk = static_cast<int64_t>(a.Hkv) * D;
  const bf16* kb = k + w.s0 * ldk + w.kvh * D;
  const bf16* vb = v + w.s0 * ldk + w.kvh * D;
  tile_load<D>(sQ, q + (w.s0 + m0) * ldq + w.h * D, ldq, min(kTc, w.L - m0));
  {  // key tile j0 into its buffer (j0 & 1), as kv_step expects
    const int64_t off = static_cast<int64_t>(j0) * kTc * ldk;
    const uint32_t buf = (j0 & 1) * kTB;
    tile_load<D>(sK + buf, kb + off, ldk, min(kTc, w.L - j0 * kTc));
    tile_load<D>(sV + buf, vb + off, ldk, min(kTc, w.L - j0 * kTc));
  }
  cp_async_commit();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const Lanes<D> ln(lane);
  const int row0 = m0 + warp * 16 + (lane >> 2);  // rows of accumulator elements 0,1 (+8: 2,3)
  const int c2 = (lane & 3) * 2;                  // column of element 0 within an n8 tile
  uint32_t qf[kQInRegs ? D / 16 : 1][4];
  float o[D / 8][4];
  zero(o);
  float mx[2] = {-INFINITY, -INFINITY}, sum[2] = {0.0f, 0.0f};

  const int nkv = w.tile + 1;
  for (int j = j0; j < nkv; ++j) {
    const uint32_t buf = kv_step<D>(j, nkv, sK, sV, kb, vb, ldk, w.L);
    if constexpr (kQInRegs) {
      if (j == j0) {
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) ldsm_x4(sQ + at<D>(ln.a, warp, kk), qf[kk]);
      }
    }
    // Without a window every row sees key 0 in tile 0 and its own key in the diagonal tile, so
    // each (sub-)tile's row max is finite; with one, a row may see no key of the first (sub-)tiles
    // it visits (its max stays -inf until its window starts, see mref below).
    const bool diag = j == w.tile;
    // Some row's window starts after this tile's first key: key j·64 ≤ row - W for row m0 + 63.
    const bool wedge = Win && j * kTc + a.window <= m0 + kTc - 1;
#pragma unroll(Win ? 1 : kSub <D>)  // windowed: one copy of the sub-tile code (registers)
    for (int hh = 0; hh < kSub<D>; ++hh) {
      constexpr int NB = kNB<D>;
      const uint32_t sub = buf + hh * (NB * 32 * D);
      const int kc = hh * NB * 16;  // the sub-tile's first key within the tile
      float s[2 * NB][4];
      zero(s);
      if constexpr (kQInRegs) {
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          const uint32_t bk = sK + sub + at<D>(ln.b, 0, kk);
#pragma unroll
          for (int p = 0; p < NB; ++p) {
            uint32_t b[4];
            ldsm_x4(bk + p * (32 * D), b);
            mma(s[2 * p], qf[kk], b[0], b[1]);
            mma(s[2 * p + 1], qf[kk], b[2], b[3]);
          }
        }
      } else {
        mma_abt<D, NB>(s, sQ, warp, sK + sub, ln);
      }
      // Scaled scores (base 2), masks, row max.
      float tmax[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int nt = 0; nt < 2 * NB; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = kc + nt * 8 + c2 + (e & 1);
          float x = s[nt][e] * a.scale_log2;
          if (diag && col > row0 - m0 + (e >> 1) * 8) x = -INFINITY;
          if (wedge && j * kTc + col <= row0 + (e >> 1) * 8 - a.window) x = -INFINITY;
          s[nt][e] = x;
          tmax[e >> 1] = fmaxf(tmax[e >> 1], x);
        }
      float alpha[2], mref[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        tmax[r] = fmaxf(tmax[r], __shfl_xor_sync(0xffffffffu, tmax[r], 1));
        tmax[r] = fmaxf(tmax[r], __shfl_xor_sync(0xffffffffu, tmax[r], 2));
        const float mnew = fmaxf(mx[r], tmax[r]);
        // A row with no visible key so far (only with a window): reference 0, so that alpha and
        // p are exp2(-inf) = 0 rather than exp2(-inf + inf) = NaN. Otherwise mref = mnew.
        mref[r] = Win && mnew == -INFINITY ? 0.0f : mnew;
        alpha[r] = exp2f(mx[r] - mref[r]);
        mx[r] = mnew;
      }
      float rs[2] = {0.0f, 0.0f};
#pragma unroll
      for (int nt = 0; nt < 2 * NB; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float p = exp2f(s[nt][e] - mref[e >> 1]);
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
      mma_pb<D, NB>(o, s, sV + sub, ln);
    }
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

// dQ. Block: 64 query rows of head h (16 per warp), key tiles j0..diagonal in order (K/V
// double-buffered; j0 as in the forward). Per warp and key tile: S = Q·Kᵀ and dP = dO·Vᵀ (fp32),
// P = 2^(S·scale·log2e − lse2) (masked on the diagonal and on window-edge tiles), dS = P·(dP − Di),
// dQ += bf16(dS)·K; dQ = scale·dQ at the end. Shared memory: Q, dO + 2×(K, V) = 6 tiles (96 KiB at
// D = 128).
template <int D, bool Win>
__global__ void __launch_bounds__(kTcThreads, D <= 128 ? 2 : 1)
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
  const int j0 = Win ? first_key(a, m0) / kTc : 0;
  tile_load<D>(sQ, q + qoff, ldq, min(kTc, w.L - m0));
  tile_load<D>(sdO, dout + qoff, ldq, min(kTc, w.L - m0));
  {
    const int64_t off = static_cast<int64_t>(j0) * kTc * ldk;
    const uint32_t buf = (j0 & 1) * kTB;
    tile_load<D>(sK + buf, kb + off, ldk, min(kTc, w.L - j0 * kTc));
    tile_load<D>(sV + buf, vb + off, ldk, min(kTc, w.L - j0 * kTc));
  }
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
  for (int j = j0; j < nkv; ++j) {
    const uint32_t buf = kv_step<D>(j, nkv, sK, sV, kb, vb, ldk, w.L);
    const bool diag = j == w.tile;
    const bool wedge = Win && j * kTc + a.window <= m0 + kTc - 1;
#pragma unroll 1
    for (int hh = 0; hh < kSub<D>; ++hh) {
      constexpr int NB = kNB<D>;
      const uint32_t sub = buf + hh * (NB * 32 * D);
      float s[2 * NB][4], dp[2 * NB][4];
      zero(s);
      zero(dp);
      mma_abt<D, NB>(s, sQ, warp, sK + sub, ln);
      mma_abt<D, NB>(dp, sdO, warp, sV + sub, ln);
#pragma unroll
      for (int nt = 0; nt < 2 * NB; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = e >> 1, col = hh * NB * 16 + nt * 8 + c2 + (e & 1);
          float p = exp2f(s[nt][e] * a.scale_log2 - lrow[r]);
          if (diag && col > rl + r * 8) p = 0.0f;
          if (wedge && j * kTc + col <= m0 + rl + r * 8 - a.window) p = 0.0f;
          s[nt][e] = p * (dp[nt][e] - drow[r]);
        }
      mma_pb<D, NB>(acc, s, sK + sub, ln);
    }
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
// from the diagonal to the sequence end — with a window, to the last tile that sees one of the
// block's keys — in order (Q, dO, lse2, Di double-buffered). Keys are the mma rows: per warp and
// query tile Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ (16×64 fp32), Pᵀ = 2^(Sᵀ·scale·log2e − lse2[q]) (masked where
// q < key, q ≥ L or q ≥ key + W on edge tiles), dSᵀ = Pᵀ·(dPᵀ − Di[q]), then dV += bf16(Pᵀ)·dO and
// dK += bf16(dSᵀ)·Q. Parts (kPartK | kPartV) selects the gradients accumulated: both for D ≤ 128,
// one per launch for D = 256 (the dV instance skips dP, V and Di). Writes scale·dK and dV: fp32
// partials pk/pv [T, Hq, D] when non-null, else dk/dv [T, Hkv, D]. Shared memory: K, V + 2×(Q, dO)
// = 6 tiles + 1 KiB.
template <int D, int Parts, bool Win>
__global__ void __launch_bounds__(kTcThreads, D <= 128 ? 2 : 1)
    attn_dkdv_tc(KArgs a, const bf16* q, const bf16* k, const bf16* v, const bf16* dout,
                 const float* lse2, const float* Di, float* pk, float* pv, bf16* dk, bf16* dv) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr bool kDoK = (Parts & kPartK) != 0, kDoV = (Parts & kPartV) != 0;
  constexpr uint32_t kTB = tile_bytes<D>();
  extern __shared__ __align__(128) unsigned char tsm[];
  const uint32_t sK = smem_u32(tsm), sV = sK + kTB, sQ = sV + kTB, sdO = sQ + 2 * kTB;
  float* stat = reinterpret_cast<float*>(tsm + 6 * kTB);  // [2 buffers][lse2 64 | Di 64]
  const Work w = block_work(a, kTc, false);
  const int n0 = w.tile * kTc;
  // One past the last query tile that sees one of our keys (the sequence's last without a window).
  const int ntiles = ((Win ? query_end(a, n0 + kTc - 1, w.L) : w.L) + kTc - 1) / kTc;
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
  if constexpr (kDoK) tile_load<D>(sV, v + koff, ldk, min(kTc, w.L - n0));
  prefetch(w.tile, 0);
  cp_async_commit();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const Lanes<D> ln(lane);
  const int key0 = n0 + warp * 16 + (lane >> 2);  // keys of elements 0,1 (+8: 2,3)
  const int c2 = (lane & 3) * 2;
  // Query rows [key, qhi) see the keys of elements 0,1 (r = 0) and 2,3 (r = 1); tiles that end
  // past edge_end (the sequence end, or the first key's window end) need the mask.
  const int qhi[2] = {Win ? query_end(a, key0, w.L) : w.L, Win ? query_end(a, key0 + 8, w.L) : w.L};
  const int edge_end = Win ? query_end(a, n0, w.L) : w.L;
  float gk[kDoK ? D / 8 : 1][4], gv[kDoV ? D / 8 : 1][4];
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
    const bool edge = i == w.tile || (i + 1) * kTc > edge_end;
#pragma unroll
    for (int hh = 0; hh < kSub<D>; ++hh) {  // sub-tiles of query rows
      constexpr int NB = kNB<D>;
      const uint32_t sub = hh * (NB * 32 * D);
      float s[2 * NB][4], dp[2 * NB][4];
      zero(s);
      mma_abt<D, NB>(s, sK, warp, tQ + sub, ln);
      if constexpr (kDoK) {
        zero(dp);
        mma_abt<D, NB>(dp, sV, warp, tdO + sub, ln);
      }
#pragma unroll
      for (int nt = 0; nt < 2 * NB; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = hh * NB * 16 + nt * 8 + c2 + (e & 1);
          const int qrow = i * kTc + col, key = key0 + (e >> 1) * 8;
          float p = exp2f(s[nt][e] * a.scale_log2 - ls[col]);
          if (edge && (qrow < key || qrow >= qhi[e >> 1])) p = 0.0f;
          s[nt][e] = p;
          if constexpr (kDoK) dp[nt][e] = p * (dp[nt][e] - dd[col]);
        }
      if constexpr (kDoV) mma_pb<D, NB>(gv, s, tdO + sub, ln);
      if constexpr (kDoK) mma_pb<D, NB>(gk, dp, tQ + sub, ln);
    }
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
        if constexpr (kDoK)
          *reinterpret_cast<float2*>(pk + base + i * 8) =
              make_float2(a.scale * gk[i][2 * r], a.scale * gk[i][2 * r + 1]);
        if constexpr (kDoV)
          *reinterpret_cast<float2*>(pv + base + i * 8) =
              make_float2(gv[i][2 * r], gv[i][2 * r + 1]);
      }
    } else {
      const int64_t base = (w.s0 + key) * ldk + w.kvh * D + c2;
#pragma unroll
      for (int i = 0; i < D / 8; ++i) {
        if constexpr (kDoK)
          *reinterpret_cast<uint32_t*>(dk + base + i * 8) =
              pack_bf16(a.scale * gk[i][2 * r], a.scale * gk[i][2 * r + 1]);
        if constexpr (kDoV)
          *reinterpret_cast<uint32_t*>(dv + base + i * 8) =
              pack_bf16(gv[i][2 * r], gv[i][2 * r + 1]);
      }
    }
  }
#endif
}

template <int D>
constexpr size_t tc_smem(int tiles) {
  return static_cast<size_t>(tiles) * tile_bytes<D>();
}

template <int D, bool Win>
void fwd(const KArgs& ka, unsigned grid, void* out, float* lse, const void* q, const void* k,
         const void* v, cudaStream_t st) {
  launch(attn_fwd_tc<D, Win>, grid, kTcThreads, tc_smem<D>(5), st, "attention_fwd", ka,
         static_cast<const bf16*>(q), static_cast<const bf16*>(k), static_cast<const bf16*>(v),
         static_cast<bf16*>(out), lse);
}

template <int D, bool Win>
void bwd(const KArgs& ka, unsigned grid, const float* lse2, const float* Di, float* pk, float* pv,
         void* dq, void* dk, void* dv, const void* dout, const void* q, const void* k,
         const void* v, cudaStream_t st) {
  const bf16 *tq = static_cast<const bf16*>(q), *tk = static_cast<const bf16*>(k),
             *tv = static_cast<const bf16*>(v), *tg = static_cast<const bf16*>(dout);
  constexpr size_t kDkdvSmem = tc_smem<D>(6) + 4 * 2 * 2 * kTc;
  if constexpr (D <= 128) {
    launch(attn_dkdv_tc<D, kPartKV, Win>, grid, kTcThreads, kDkdvSmem, st, "attention_bwd", ka, tq,
           tk, tv, tg, lse2, Di, pk, pv, static_cast<bf16*>(dk), static_cast<bf16*>(dv));
  } else {  // one accumulator per launch (see the top of the file)
    launch(attn_dkdv_tc<D, kPartV, Win>, grid, kTcThreads, kDkdvSmem, st, "attention_bwd", ka, tq,
           tk, tv, tg, lse2, Di, pk, pv, static_cast<bf16*>(dk), static_cast<bf16*>(dv));
    launch(attn_dkdv_tc<D, kPartK, Win>, grid, kTcThreads, kDkdvSmem, st, "attention_bwd", ka, tq,
           tk, tv, tg, lse2, Di, pk, pv, static_cast<bf16*>(dk), static_cast<bf16*>(dv));
  }
  launch(attn_dq_tc<D, Win>, grid, kTcThreads, tc_smem<D>(6), st, "attention_bwd", ka, tq, tk, tv,
         tg, lse2, Di, static_cast<bf16*>(dq));
}

// Calls f(std::integral_constant<int, D>{}, std::bool_constant<window set>{}) for ka.D ∈
// {64, 128, 256}.
template <class F>
void by_shape(const KArgs& ka, F&& f) {
  const auto with_d = [&](auto d) {
    if (ka.window > 0) {
      f(d, std::true_type{});
    } else {
      f(d, std::false_type{});
    }
  };
  if (ka.D == 64) {
    with_d(std::integral_constant<int, 64>{});
  } else if (ka.D == 128) {
    with_d(std::integral_constant<int, 128>{});
  } else {
    with_d(std::integral_constant<int, 256>{});
  }
}

}  // namespace

void tc_fwd(const KArgs& ka, unsigned grid, void* out, float* lse, const void* q, const void* k,
            const void* v, cudaStream_t st) {
  by_shape(ka, [&](auto d, auto win) {
    fwd<decltype(d)::value, decltype(win)::value>(ka, grid, out, lse, q, k, v, st);
  });
}

void tc_bwd(const KArgs& ka, unsigned grid, const float* lse2, const float* Di, float* pk,
            float* pv, void* dq, void* dk, void* dv, const void* dout, const void* q, const void* k,
            const void* v, cudaStream_t st) {
  by_shape(ka, [&](auto d, auto win) {
    bwd<decltype(d)::value, decltype(win)::value>(ka, grid, lse2, Di, pk, pv, dq, dk, dv, dout, q,
                                                  k, v, st);
  });
}

}  // namespace zt::cuda::attn
