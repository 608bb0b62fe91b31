// Hopper (sm_90a) attention, forward and deterministic backward: warpgroup MMA (wgmma.mma_async)
// from shared memory, for the causal bf16 attention of cuda_attention.cu at head dims 64 and 128
// without a sliding window (the other cases, and every GPU before sm_90, run the mma.sync kernels
// of cuda_attention_tc.cu, which stay the second check the GPU tests compare against). Compiled
// for sm_90a only (src/CMakeLists.txt) and chosen at run time on a compute-capability-9.0 device.
// The backward is one kernel per (key tile, query head) looping over its query tiles from the
// sequence's last one down to its diagonal (attn_bwd_sm90): it writes dK and dV as the mma.sync
// family's dK/dV kernel does and also forms each query tile's dQ partial, which writer warps add
// into an fp32 accumulator in a fixed key-tile order (flags between blocks, FlashAttention-3's
// deterministic scheme) — P and dP are computed once instead of again in a separate dQ pass (5
// GEMMs per tile pair instead of 7). Its query tiles have 128 rows at D = 64 (64 at D = 128),
// loaded by a producer warp with TMA.
//
// Forward. Persistent blocks (one per SM) take work items in turn (attn_fwd_sm90); an item: 128
// query rows of one head at D 128, 192 at D 64, key tiles of 128 up to its last row's diagonal in
// order.
// Warp-specialized: a producer warpgroup (one thread) loads Q once and K/V tiles by TMA into two
// buffers each, handed over by mbarriers ("full": the TMA's transaction bytes landed; "empty": all
// MMA threads have read it), and two MMA warpgroups at D 128, three at D 64 (64 rows each), consume
// them without a block-wide barrier (at D 64 they take turns to issue their GEMMs,
// FlashAttention-3's ping-pong: there a tile's exponentials on the special-function unit take as
// long as its GEMMs, so one warpgroup's softmax runs while another's GEMMs hold the tensor cores).
// Per warpgroup and key tile:
//   S[64×128] = Q·Kᵀ — wgmma m64n128k16, both operands K-major from shared memory, D/16 steps;
//   the causal mask on the tiles past the warp's first row, online softmax in base 2 as the
//   mma.sync kernel (the same row max / rescale / sum order per thread, a row's 4 lanes combined by
//   xor-shuffles); O[64×D] += bf16(P)·V — wgmma m64nDk16 with P from registers (the wgmma A
//   fragment of a warp's 16 rows is the mma.m16n8k16 A fragment, which the fp32 accumulator layout
//   packs into without shuffles) and V MN-major from shared memory (transposed read), one
//   instruction per 16 keys; the exponentials are ex2.approx.ftz of one FFMA (the max taken on the
//   raw scores).
// Every output element is accumulated by one thread over key tiles in index order with a fixed
// instruction order: bitwise repeatable, no atomics. The probabilities are rounded to bf16 before
// P·V, as the mma.sync kernels and FlashAttention do, so the two families agree to the rounding of
// the accumulation order, of the FFMA against a multiply and a subtract, and of ex2.approx.ftz
// against exp2f (the GPU tests bound the difference).
//
// Shared-memory layout (what wgmma's 128-byte swizzle mode reads): a [R × D] tile is D/64 column
// blocks of [R × 64] bf16; row r of a block is 128 bytes at r·128, its 16-byte chunk c stored at
// chunk c ^ (r % 8) — 8 rows form one 1024-byte swizzle atom. A K-major operand's descriptor
// starts at the 64-row (or 128-row) block, advances 32 bytes per 16-element k step inside the
// 128-byte row, and strides 1024 bytes per 8 rows (SBO). V, MN-major, is read 16 keys (two atoms,
// 2048 bytes) per k step, 1024 bytes per 8 keys (SBO); at D = 128 one instruction spans both
// 64-column blocks, whose distance R·128 bytes is the leading byte offset (at D = 64 it is unused).
// The TMA's 128-byte swizzle writes exactly this layout into 1024-byte-aligned boxes of 64 columns.
// Descriptor bits (PTX ISA, "Matrix Descriptor Format"): start address >> 4 in [0, 14), leading
// byte offset >> 4 in [16, 30), stride byte offset >> 4 in [32, 46), swizzle mode 1 (128 B) in
// [62, 64).
//
// Resources (ptxas, sm_90a): one block per SM. Forward, no spills: D 128, 384 threads launched at
// 168 registers, the MMA warpgroups raised to 240 and the producer lowered to 24; D 64, 512 threads
// launched at 128, the MMA warpgroups raised to 160 (FlashAttention-3's split for three), the
// producer lowered to 24; shared memory Q + 2×(K, V) = 160 / 88 KiB (D 128 / 64) + barriers and
// the item slots. Fused backward: 384 threads launched at 168 registers, the MMA warpgroups raised
// to 240 and the writers lowered to 24 (setmaxnreg); shared memory K, V + 2×(Q, dO, lse2/Di) +
// 2×dSᵀ + 2 staged fp32 dQ tiles = 225 KiB at D 128 (no spills), K, V + 2×(Q, dO, lse2/Di) + 1×dSᵀ
// + 2 staged dQ tiles = 194 KiB at D 64 (128-row query tiles; 8 bytes spilled). Each plus 1 KiB
// to align the tiles to the swizzle atom (the forward 1 KiB more for its barriers).

#include <cuda.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "backend/cuda/cuda_attention_kernels.cuh"
#include "backend/cuda/cuda_ptx.cuh"

namespace zt::cuda::attn {
namespace {

constexpr int kBN = 128;  // keys per tile
constexpr int kThreads = 256;

// Byte offset of element (r, c) (c a multiple of 8) in a tile of R rows (layout above).
template <int R>
__device__ __forceinline__ uint32_t sw128(int r, int c) {
  return static_cast<uint32_t>((c >> 6) * (R * 128) + r * 128 + ((((c >> 3) & 7) ^ (r & 7)) << 4));
}

// cp.async of rows [0, R) of a [*, ld] bf16 tensor (row 0 at src) into a tile at dst; rows ≥
// nvalid are zero-filled (and never read from global memory).
template <int D, int R>
__device__ __forceinline__ void load_tile(uint32_t dst, const bf16* src, int64_t ld, int nvalid) {
  constexpr int kChunks = D / 8;
#pragma unroll
  for (int it = 0; it < R * kChunks / kThreads; ++it) {
    const int c = it * kThreads + static_cast<int>(threadIdx.x);
    const int r = c / kChunks, ch = c % kChunks;
    const bool ok = r < nvalid;
    cp_async16(dst + sw128<R>(r, ch * 8), src + (ok ? r : 0) * ld + ch * 8, ok);
  }
}

// A shared-memory matrix descriptor in the 128-byte swizzle mode.
__device__ __forceinline__ uint64_t desc_sw128(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32) | (uint64_t{1} << 62);
}

__device__ __forceinline__ void wg_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wg_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most N of this warpgroup's most recent wgmma groups are pending (older ones done).
template <int N>
__device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void wg_wait0() { wg_wait<0>(); }
// Named barrier `id` (1-15; 0 is __syncthreads) of n threads: wait, or arrive only.
__device__ __forceinline__ void bar_sync(int id, int n) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id, int n) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
// Generic-proxy writes to shared memory (cp.async) visible to the async proxy (wgmma reads).
__device__ __forceinline__ void fence_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Keeps the compiler from moving register reads/writes across an asynchronous wgmma's window.
template <int N>
__device__ __forceinline__ void keep(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void keep(uint32_t (&r)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(r[i][e])::"memory");
}

// D[64×128] (+)= A·Bᵀ, A [64×16] and B [128×16] K-major in shared memory (descriptors);
// scale_d = 0 overwrites D.
__device__ __forceinline__ void wgmma_ss_n128(float (&d)[64], uint64_t da, uint64_t db,
                                              int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
      "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
      "%27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, "
      "%45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, "
      "%63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63])
      : "l"(da), "l"(db), "r"(scale_d));
}

// D[64×64] (+)= A·Bᵀ, A [64×16] and B [64×16] from shared memory (descriptors), K-major, or
// MN-major where TA / TB = 1 (the transpose bits, bf16 only); scale_d = 0 overwrites D.
template <int TA = 0, int TB = 0>
__device__ __forceinline__ void wgmma_ss_n64(float (&d)[32], uint64_t da, uint64_t db,
                                             int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
      "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
      "%27, %28, %29, %30, %31}, %32, %33, p, 1, 1, %35, %36;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));
}

// D[64×64] (+)= A·B, A [64×16] bf16 in registers (per warp the mma.m16n8k16 A fragment of its 16
// rows), B [16×64] in shared memory, MN-major (TB = 1, as P·V and dV/dK read it) or K-major (TB =
// 0: B [64×16] read as Bᵀ); scale_d = 0 overwrites D.
template <int TB = 1>
__device__ __forceinline__ void wgmma_rs_n64(float (&d)[32], const uint32_t (&a)[4], uint64_t db,
                                             int scale_d = 1) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
      "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
      "%27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d), "n"(TB));
}

// D[64×128] += A·B, A [64×16] bf16 in registers (as wgmma_rs_n64), B [16×128] MN-major in shared
// memory spanning two 64-column blocks (the descriptor's leading byte offset is their distance);
// the accumulator is d0 (columns 0-63) then d1 (64-127): the m64n128 D layout is two m64n64 ones.
__device__ __forceinline__ void wgmma_rs_n128(float (&d0)[32], float (&d1)[32],
                                              const uint32_t (&a)[4], uint64_t db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
      "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
      "%27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, "
      "%45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, "
      "%63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : "+f"(d0[0]), "+f"(d0[1]), "+f"(d0[2]), "+f"(d0[3]), "+f"(d0[4]), "+f"(d0[5]), "+f"(d0[6]),
        "+f"(d0[7]), "+f"(d0[8]), "+f"(d0[9]), "+f"(d0[10]), "+f"(d0[11]), "+f"(d0[12]),
        "+f"(d0[13]), "+f"(d0[14]), "+f"(d0[15]), "+f"(d0[16]), "+f"(d0[17]), "+f"(d0[18]),
        "+f"(d0[19]), "+f"(d0[20]), "+f"(d0[21]), "+f"(d0[22]), "+f"(d0[23]), "+f"(d0[24]),
        "+f"(d0[25]), "+f"(d0[26]), "+f"(d0[27]), "+f"(d0[28]), "+f"(d0[29]), "+f"(d0[30]),
        "+f"(d0[31]), "+f"(d1[0]), "+f"(d1[1]), "+f"(d1[2]), "+f"(d1[3]), "+f"(d1[4]), "+f"(d1[5]),
        "+f"(d1[6]), "+f"(d1[7]), "+f"(d1[8]), "+f"(d1[9]), "+f"(d1[10]), "+f"(d1[11]),
        "+f"(d1[12]), "+f"(d1[13]), "+f"(d1[14]), "+f"(d1[15]), "+f"(d1[16]), "+f"(d1[17]),
        "+f"(d1[18]), "+f"(d1[19]), "+f"(d1[20]), "+f"(d1[21]), "+f"(d1[22]), "+f"(d1[23]),
        "+f"(d1[24]), "+f"(d1[25]), "+f"(d1[26]), "+f"(d1[27]), "+f"(d1[28]), "+f"(d1[29]),
        "+f"(d1[30]), "+f"(d1[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

// 2^x on the special-function unit without the subnormal fix-up exp2f adds (ex2.approx.ftz.f32:
// relative error ≤ 2^-22 per the PTX ISA; results below 2^-126 flush to 0, -inf gives 0). The
// softmax exponentials of both Hopper kernels use it.
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// acc[64×64] (=) A·Bᵀ over D: A the 64 rows at `a` of an RA-row tile, B the 64 rows at `b` of an
// RB-row tile, both K-major (D/16 wgmma steps; the first overwrites acc, or adds to it: kAcc).
template <int D, int RA, int RB, bool kAcc = false>
__device__ __forceinline__ void mma_abt64(float (&acc)[32], uint32_t a, uint32_t b) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    wgmma_ss_n64(acc, desc_sw128(a + (kk >> 2) * (RA * 128) + (kk & 3) * 32, 16, 1024),
                 desc_sw128(b + (kk >> 2) * (RB * 128) + (kk & 3) * 32, 16, 1024),
                 kk > 0 || kAcc ? 1 : 0);
}
// acc[64×128] (=) A·Bᵀ over D: A the 64 rows at `a` of an RA-row tile, B the 128 rows at `b` of
// a 128-row tile, both K-major (D/16 wgmma m64n128k16 steps; the first overwrites acc): the
// backward's Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ at D 64, where a query tile has 128 rows (bwd_rows).
template <int D, int RA>
__device__ __forceinline__ void mma_abt128(float (&acc)[64], uint32_t a, uint32_t b) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    wgmma_ss_n128(acc, desc_sw128(a + (kk >> 2) * (RA * 128) + (kk & 3) * 32, 16, 1024),
                  desc_sw128(b + (kk >> 2) * (128 * 128) + (kk & 3) * 32, 16, 1024),
                  kk > 0 ? 1 : 0);
}
// acc[64×D] += P·B: P [64 × 16·K] as K bf16 A fragments (pack_a), B the 16·K rows at `b` of an
// R-row tile, MN-major (K·D/64 wgmma steps of 16 rows and 64 columns).
template <int D, int R, int K>
__device__ __forceinline__ void mma_pb(float (&acc)[D / 64][32], const uint32_t (&pa)[K][4],
                                       uint32_t b) {
#pragma unroll
  for (int kq = 0; kq < K; ++kq) {
    if constexpr (D == 128) {  // one instruction over both column blocks, R·128 bytes apart
      wgmma_rs_n128(acc[0], acc[1], pa[kq], desc_sw128(b + kq * 2048, R * 128, 1024));
    } else {
#pragma unroll
      for (int nb = 0; nb < D / 64; ++nb)
        wgmma_rs_n64(acc[nb], pa[kq], desc_sw128(b + nb * (R * 128) + kq * 2048, 1024, 1024));
    }
  }
}
// The A fragments of K 16-column steps from fp32 accumulators [8·K] (wgmma D layout → A layout:
// elements 2x, 2x + 1 of each 8 form register x).
template <int K>
__device__ __forceinline__ void pack_a(const float (&x)[8 * K], uint32_t (&pa)[K][4]) {
#pragma unroll
  for (int kq = 0; kq < K; ++kq)
#pragma unroll
    for (int r = 0; r < 4; ++r) pa[kq][r] = pack_bf16(x[8 * kq + 2 * r], x[8 * kq + 2 * r + 1]);
}
// mbarrier and TMA (cp.async.bulk.tensor) wrappers for the forward's producer/consumer pipeline
// (PTX ISA: "mbarrier", "cp.async.bulk.tensor"). Barrier addresses are shared-memory offsets.
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// One arrival that also expects `bytes` of asynchronous (TMA) transactions this phase.
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
// `bytes` more asynchronous transactions expected this phase, without an arrival (PTX ISA 8.0).
__device__ __forceinline__ void mbar_expect_tx_only(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Spins until the phase with the given parity (0 for the barrier's first phase) has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\nZT_MBAR_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra ZT_MBAR_WAIT;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
// TMA: the box at element coordinates (x, y) of a 2-D tensor map into shared memory at dst, in
// the map's 128-byte swizzle (the layout above), completing `bar`'s transaction count. Rows past
// the tensor's end are zero-filled.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, int x, int y,
                                            uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(bar)
      : "memory");
}

// Whether the forward's MMA warpgroups take turns at the tensor cores (below): at D 64, where a
// tile's exponentials take as long as its GEMMs (on an H200 +4-6 % forward TFLOP/s at D 64 with two
// warpgroups; with three, on an H100, +5-12 % over no turns, bench/results/
// attention_wg3_ab_h100_d2cb38e.txt and attention_h100_d2cb38e.txt; at D 128, GEMM-bound, it cost
// 8-11 %).
__host__ __device__ constexpr bool fwd_pingpong(int D) { return D == 64; }

// The forward's MMA warpgroups per block, 64 query rows each (sm90_fwd_rows(D) rows a tile): three
// at D 64 (FlashAttention-3's 192 × 128 tiles there: each K/V tile loaded and read from shared
// memory serves 1.5 times the rows, and a third warpgroup's exponentials fill the tensor cores'
// gaps), two at D 128 (the registers: its O accumulator is twice as large).
__host__ __device__ constexpr int fwd_wgs(int D) { return sm90_fwd_rows(D) / 64; }
// A producer warpgroup (one thread issues the TMA) + the MMA ones.
__host__ __device__ constexpr int fwd_threads(int D) { return 128 * (fwd_wgs(D) + 1); }
constexpr int kFwdStages = 2;  // K and V buffers in flight

// Key tiles of 128 the forward item of query tile `tile` (rows of `rows`) of a sequence of L tokens
// reads: up to the one holding its last row's diagonal, and none past the sequence's last key.
__device__ __forceinline__ int fwd_key_tiles(int tile, int rows, int L) {
  return min(tile * rows + rows - 1, L - 1) / kBN + 1;
}

// Forward (see the file comment). Persistent: grid min(items, SMs) blocks (one per SM: the
// registers allow no second), each taking work items — (query tile of kBM = sm90_fwd_rows(D) rows,
// query head) of the list of Σ ceil(len / kBM) tiles × Hq, heaviest tile of each sequence
// first — in index order from the counter a.next_item (an atomicAdd by the producer thread) until
// the list is done. The producer fetches the next item (and finds its sequence and tile) once it
// has issued the current item's loads, publishes it and loads its Q as soon as all MMA warpgroups
// have issued the current item's last S GEMM, so the next item's loads land while the current
// one's last P·V and O stores run (as FlashAttention-3's persistent tile scheduler), where
// a block per item paid its start (barrier set-up, Q and K(0) latency) and its end on the tensor
// cores' time: at 4 × 2k an item averages 8.5 key tiles. Which block takes an item depends on
// timing; what an item computes does not: each is computed by one block, with the same
// instructions in the same order, so the outputs are bitwise those of a block per item.
// Warp-specialized (FlashAttention-3's split): warpgroup 0 is the producer — one thread loads Q and
// the K/V tiles with TMA into kFwdStages buffers, each with a "full" mbarrier (transaction bytes)
// and an "empty" one that all MMA threads arrive on once they have finished reading it (Q too,
// per item; the K/V buffers cycle over the block's items: tile g of the block in buffer g %
// kFwdStages) — and gives its registers up (setmaxnreg 24); warpgroups 1 .. kWG take 64 query rows
// each (setmaxnreg 240 / 160) and never meet at a block-wide barrier, so one warpgroup's softmax
// overlaps another's GEMMs (at D 64 by turns: kPingPong, below). The item — index, tile, sequence
// start and length, head — travels through shared memory: two slots, item it in slot it % 2,
// published by an mbarrier arrival; the producer writes item it + 2's slot only after every MMA
// warpgroup released item it + 1's Q, so after they stored item it (they read its slot again for
// the stores). A sequence's last tiles read rows past its end (the next sequence's, or zeros past
// T): those keys are after every valid query row (masked, probability 0), and those query rows are
// never stored. So the sequences of a micro-batch stay isolated only while its values are finite: 0
// × a NaN or Inf in the next sequence's V is NaN (the cp.async version zero-filled those rows);
// with non-finite activations the micro-batch's loss is non-finite anyway.
template <int D>
__global__ void __launch_bounds__(fwd_threads(D), 1)
    attn_fwd_sm90(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
                  const __grid_constant__ CUtensorMap tv, KArgs a, int items, bf16* out,
                  float* lse) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  wait_prior_grid();  // launched programmatically after the tile plan (launch_pdl)
  constexpr int kWG = fwd_wgs(D), kBM = 64 * kWG;  // MMA warpgroups, query rows per item
  constexpr int kMmaThreads = 128 * kWG;
  constexpr uint32_t kQB = kBM * D * 2, kKB = kBN * D * 2;
  constexpr int kNB = D / 64;  // 64-column blocks of the output
  extern __shared__ unsigned char smem[];
  const uint32_t sQ = (smem_u32(smem) + 1023u) & ~1023u, sK = sQ + kQB, sV = sK + kFwdStages * kKB;
  // Barriers (8 bytes each): Q full, Q empty, item full, then per stage K full, V full, K empty,
  // V empty; then the two item slots (kSlotInts ints each: item, tile, s0, L, h, kvh).
  const uint32_t bars = sV + kFwdStages * kKB, q_full = bars, q_empty = bars + 8,
                 item_full = bars + 16;
  const auto k_full = [&](int st) { return bars + 24 + 32 * st; };
  const auto v_full = [&](int st) { return bars + 32 + 32 * st; };
  const auto k_empty = [&](int st) { return bars + 40 + 32 * st; };
  const auto v_empty = [&](int st) { return bars + 48 + 32 * st; };
  constexpr int kSlotInts = 8;
  const uint32_t slot_addr = bars + 24 + 32 * kFwdStages;
  volatile int* const slots = reinterpret_cast<volatile int*>(smem + (slot_addr - smem_u32(smem)));
  const int tid = static_cast<int>(threadIdx.x);
  if (tid == 0) {
    mbar_init(q_full, 1);
    mbar_init(q_empty, kMmaThreads);
    mbar_init(item_full, 1);
    for (int st = 0; st < kFwdStages; ++st) {
      mbar_init(k_full(st), 1);
      mbar_init(v_full(st), 1);
      mbar_init(k_empty(st), kMmaThreads);
      mbar_init(v_empty(st), kMmaThreads);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (tid < 128) {  // producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
    if (tid == 0) {
      // The D/64 boxes of a tile of R rows at row y of `map` into buf, completing `full`.
      const auto load = [&](const CUtensorMap* map, int R, uint32_t buf, int x0, int y,
                            uint32_t full) {
        mbar_expect_tx(full, static_cast<uint32_t>(R) * D * 2);
#pragma unroll
        for (int cb = 0; cb < kNB; ++cb)
          tma_load_2d(buf + cb * (R * 128), map, x0 + cb * 64, y, full);
      };
      int g = 0;  // K/V tiles this block has loaded (over its items)
      int item = atomicAdd(a.next_item, 1);
      for (int it = 0;; ++it) {
        const Work w = item < items ? block_work(a, kBM, true, item) : Work{};
        if (it > 0) mbar_wait(q_empty, (it - 1) & 1);  // the previous item's Q released
        volatile int* const slot = slots + (it & 1) * kSlotInts;
        slot[0] = item;
        slot[1] = w.tile;
        slot[2] = w.s0;
        slot[3] = w.L;
        slot[4] = w.h;
        mbar_arrive(item_full);  // release: the slot's stores are seen by the waiting warpgroups
        if (item >= items) break;
        load(&tq, kBM, sQ, w.h * D, w.s0 + w.tile * kBM, q_full);
        const int nkv = fwd_key_tiles(w.tile, kBM, w.L);
        // (not unrolled: the loop's state fits the producer's 24 registers without spills)
#pragma unroll 1
        for (int j = 0; j < nkv; ++j, ++g) {
          const int st = g % kFwdStages;
          if (g >= kFwdStages) {  // wait for the buffer's previous use to be released
            const uint32_t par = ((g / kFwdStages) + 1) & 1;
            mbar_wait(k_empty(st), par);
            load(&tk, kBN, sK + st * kKB, w.kvh * D, w.s0 + j * kBN, k_full(st));
            mbar_wait(v_empty(st), par);
          } else {
            load(&tk, kBN, sK + st * kKB, w.kvh * D, w.s0 + j * kBN, k_full(st));
          }
          load(&tv, kBN, sV + st * kKB, w.kvh * D, w.s0 + j * kBN, v_full(st));
        }
        item = atomicAdd(a.next_item, 1);  // the next, found while this item's last tiles run
      }
    }
    return;
  }
  if constexpr (kWG == 2) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
  } else {
    static_assert(kWG == 3, "the register split here is for two or three MMA warpgroups");
    asm volatile("setmaxnreg.inc.sync.aligned.u32 160;\n" ::: "memory");
  }

  const int wg = (tid >> 7) - 1, warp = (tid >> 5) & 3;
  const int lane = tid & 31;
  const int rr0 =
      wg * 64 + warp * 16 + (lane >> 2);  // tile row of accumulator elements 0, 1 (+8: 2, 3)
  const int c2 = (lane & 3) * 2;          // column of element 0 within an 8-column group
  const int64_t ldq = static_cast<int64_t>(a.Hq) * D;
  const uint32_t sQwg = sQ + wg * 64 * 128;  // this warpgroup's 64 rows (a multiple of the atom)
  float o[kNB][32];
  float mx[2], sum[2], alpha[2];
  float s[64];
  int m0 = 0;  // the item's first query row (in its sequence)
  // S = Q·K(g)ᵀ into s (g: the block's K/V tile count), issued and committed (not waited for).
  const auto issue_s = [&](int g) {
    const uint32_t kbuf = sK + (g % kFwdStages) * kKB;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {  // 64-column block kk / 4, 32 bytes a k step inside it
      const uint32_t qoff = (kk >> 2) * (kBM * 128) + (kk & 3) * 32,
                     koff = (kk >> 2) * (kBN * 128) + (kk & 3) * 32;
      wgmma_ss_n128(s, desc_sw128(sQwg + qoff, 16, 1024), desc_sw128(kbuf + koff, 16, 1024),
                    kk > 0 ? 1 : 0);
    }
    wg_commit();
  };
  // Online softmax of key tile j's scores in s (base 2, the causal mask on the tiles that reach
  // past this warp's first row): s ← P, the running max and sum updated, alpha = the factor O must
  // be rescaled by. Key col of the tile is off + col in the item's rows' numbering; at two
  // warpgroups only the diagonal tile (off 0) is masked. A row every key of a tile is masked for
  // (at three warpgroups the first rows of an item meet key tiles past their diagonal) gets that
  // tile's max −inf, so alpha 1, p 0: its max, sum and O keep every bit.
  const auto softmax = [&](int j) {
    const int off = j * kBN - m0;
    const bool masked = off + kBN - 1 > rr0 - (lane >> 2);  // past the warp's first row
    float tmax[2] = {-INFINITY, -INFINITY};  // of the raw scores: the scale is positive
    if (masked) {  // the mask in its own loop: elsewhere the max loop is one FMNMX a score
#pragma unroll
      for (int i = 0; i < 64; ++i)
        if (off + (i >> 2) * 8 + c2 + (i & 1) > rr0 + ((i >> 1) & 1) * 8) s[i] = -INFINITY;
    }
#pragma unroll
    for (int i = 0; i < 64; ++i) tmax[(i >> 1) & 1] = fmaxf(tmax[(i >> 1) & 1], s[i]);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tmax[r] = fmaxf(tmax[r], __shfl_xor_sync(0xffffffffu, tmax[r], 1));
      tmax[r] = fmaxf(tmax[r], __shfl_xor_sync(0xffffffffu, tmax[r], 2));
      // finite: every row sees key 0 in tile 0 (a fully masked tile's max is −inf: mx stays);
      // max(s)·c = max(s·c) for c > 0 (rounding is
      // monotone), so mx is the running max of the base-2 scores
      const float mnew = fmaxf(mx[r], tmax[r] * a.scale_log2);
      alpha[r] = exp2_ftz(mx[r] - mnew);
      mx[r] = mnew;
    }
    float rs[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < 64; ++i) {
      const int hi = (i >> 1) & 1;
      const float p = exp2_ftz(fmaf(s[i], a.scale_log2, -mx[hi]));  // one FFMA + MUFU.EX2
      s[i] = p;
      rs[hi] += p;
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) sum[r] = sum[r] * alpha[r] + rs[r];
  };
  const auto parity = [](int g) { return static_cast<uint32_t>((g / kFwdStages) & 1); };

  // Ping-pong (D 64): the warpgroups take turns, in a ring, to issue their GEMMs — named barrier
  // 1 + wg is "warpgroup wg may issue", each turn ends with an arrival on the next one's — so that
  // one warpgroup's exponentials run while another's GEMMs hold the tensor cores. Every warpgroup
  // takes the same turns over the same items (the item's key tiles, masked or not), so the turns
  // carry over from item to item.
  constexpr bool kPingPong = fwd_pingpong(D);
  if (kPingPong && wg == kWG - 1) bar_arrive(1, 256);  // warpgroup 0 takes the first turn
  uint32_t pa[8][4];                             // P(j) as the A operand: 16 keys per k step
  int g = 0;                                     // the block's K/V tiles consumed before this item
  for (int it = 0;; ++it) {
    mbar_wait(item_full, it & 1);
    volatile const int* const slot = slots + (it & 1) * kSlotInts;
    if (slot[0] >= items) break;
    // Only the first row and the tile count live through the key loop (the rest of the item is
    // read again for the stores: fewer live registers).
    m0 = slot[1] * kBM;
    const int nkv = fwd_key_tiles(slot[1], kBM, slot[3]);
#pragma unroll
    for (int nb = 0; nb < kNB; ++nb)
#pragma unroll
      for (int i = 0; i < 32; ++i) o[nb][i] = 0.0f;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = -INFINITY;
      sum[r] = 0.0f;
    }
    mbar_wait(q_full, it & 1);
    mbar_wait(k_full(g % kFwdStages), parity(g));
    wg_fence();
    issue_s(g);
    wg_wait0();
    keep(s);
    mbar_arrive(k_empty(g % kFwdStages));  // this warpgroup is done reading K(0)
    if (nkv == 1) mbar_arrive(q_empty);     // ... and Q: the producer may fetch the next item
    softmax(0);                             // O is 0: no rescale
    for (int j = 0; j + 1 < nkv; ++j) {
      const int gk = g + j + 1, gv = g + j;
      const int sk = gk % kFwdStages, sv = gv % kFwdStages;
      pack_a(s, pa);
      mbar_wait(k_full(sk), parity(gk));
      if constexpr (kPingPong) bar_sync(1 + wg, 256);
      wg_fence();
      issue_s(gk);  // S(j+1) on the tensor cores, then P(j)·V(j) ...
      mbar_wait(v_full(sv), parity(gv));
      mma_pb<D, kBN>(o, pa, sV + sv * kKB);
      wg_commit();
      if constexpr (kPingPong) bar_arrive(1 + (wg + 1) % kWG, 256);
      wg_wait<1>();  // S(j+1) done
      keep(s);
      mbar_arrive(k_empty(sk));
      if (j + 2 == nkv) mbar_arrive(q_empty);  // the item's last S: Q is free
      softmax(j + 1);                          // ... while this tile's exponentials run
      wg_wait0();
#pragma unroll
      for (int nb = 0; nb < kNB; ++nb) keep(o[nb]);
      keep(pa);
      mbar_arrive(v_empty(sv));
      // O rescaled by alpha unless alpha is exactly 1 on every row of the warp (no row's maximum
      // rose): multiplying by 1 changes no bit, so skipping it is bitwise the same result, and
      // after the first tiles most maxima stay put. At D 64, where the softmax's instruction issue
      // is the limit, the 32 FMULs a thread saved per tile gave +3 % (4 × 2k) to +6 % (32k)
      // forward TFLOP/s on random inputs on an H200
      // (bench/results/attention_skip_rescale_ab_h200_80d2d6a.txt); at D 128 (GEMM-bound) ±0.5 %.
      // End to end (same results file, _train_ab_): Llama-3.2-1B 1 × 32k GC +0.9 %, 8k GC +0.4 %,
      // 4 × 2k ±0, losses bitwise equal.
      if (!__all_sync(0xffffffffu, alpha[0] == 1.0f && alpha[1] == 1.0f)) {
#pragma unroll
        for (int nb = 0; nb < kNB; ++nb)
#pragma unroll
          for (int i = 0; i < 32; ++i) o[nb][i] *= alpha[(i >> 1) & 1];
      }
    }
    const int gv = g + nkv - 1, sv = gv % kFwdStages;
    pack_a(s, pa);
    mbar_wait(v_full(sv), parity(gv));
    wg_fence();
    mma_pb<D, kBN>(o, pa, sV + sv * kKB);
    wg_commit();
    wg_wait0();
#pragma unroll
    for (int nb = 0; nb < kNB; ++nb) keep(o[nb]);
    keep(pa);
    mbar_arrive(v_empty(sv));
    g += nkv;
    const int s0 = slot[2], L = slot[3], h = slot[4];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 1);
      sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 2);
      const int row = m0 + rr0 + r * 8;
      if (row >= L) continue;
      const float inv = 1.0f / sum[r];
      bf16* orow = out + (s0 + row) * ldq + h * D + c2;
#pragma unroll
      for (int nb = 0; nb < kNB; ++nb)
#pragma unroll
        for (int i = 0; i < 8; ++i)
          *reinterpret_cast<uint32_t*>(orow + nb * 64 + i * 8) =
              pack_bf16(o[nb][4 * i + 2 * r] * inv, o[nb][4 * i + 2 * r + 1] * inv);
      if ((lane & 3) == 0)
        lse[static_cast<int64_t>(h) * a.T + s0 + row] = (mx[r] + log2f(sum[r])) * kLn2;
    }
  }
#endif
}

// Backward helpers (the fused kernel's steps: 128 keys per block, 64 per warpgroup, query tiles of
// bwd_rows(D) rows).

// Query rows per step of the fused backward at head dim D: 128 at D 64 — each warpgroup's 64 keys
// against 128 query rows (Sᵀ and dPᵀ are m64n128 products, 64 accumulator registers each), so the
// per-step fixed costs (the dSᵀ barrier, staging and handing over a dQ tile, the flag wait between
// blocks) come once per 128 rows, as in FlashAttention-3's hdim-64 tiling (128 × 128); 64 at
// D 128, where the 128 dK/dV accumulator registers leave room for no more.
__host__ __device__ constexpr int bwd_rows(int D) { return sm90_bwd_rows(D); }

// The 2·N per-query-row statistics (lse2 or Di) one thread's accumulator elements use: v[j] =
// (x[8j + c2], x[8j + c2 + 1]), x a tile's 8·N values in shared memory (the producer's statistics).
// bwd_tile_gemms reads lse2 this way before it waits for Sᵀ, so the shared-memory latency overlaps
// the GEMM instead of stalling the exponentials (the top stall site at D 128 in ncu's source
// counters, 1 × 8k on an H100).
template <int N>
__device__ __forceinline__ void stat_cols(float2 (&v)[N], const float* x, int c2) {
#pragma unroll
  for (int j = 0; j < N; ++j) v[j] = *reinterpret_cast<const float2*>(x + j * 8 + c2);
}

// One element of Pᵀ: 2^(s·scale_log2 − l) for query row qrow and key `key`; with `edge`, zero where
// the query row is before the key or ≥ L.
__device__ __forceinline__ float bwd_prob(float s, float l, float scale_log2, int qrow, int key,
                                          int L, bool edge) {
  const float p = exp2_ftz(fmaf(s, scale_log2, -l));
  return edge && (qrow < key || qrow >= L) ? 0.0f : p;
}

// pt = Pᵀ = 2^(Sᵀ·scale_log2 − lse2[q]) for one warpgroup's [64 keys × 2·E query rows] tile (wgmma
// accumulator layout, E = 32 or 64 elements: element e is key key0 + ((e >> 1) & 1)·8, query row
// q0 + (e >> 2)·8 + c2 + (e & 1)); `edge`: zero where the query row is before the key or ≥ L.
template <int E>
__device__ __forceinline__ void bwd_probs(const float (&s)[E], float (&pt)[E],
                                          const float2 (&lse2)[E / 4], float scale_log2, int q0,
                                          int key0, int c2, int L, bool edge) {
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int col = (e >> 2) * 8 + c2 + (e & 1);
    const int qrow = q0 + col, key = key0 + ((e >> 1) & 1) * 8;
    pt[e] =
        bwd_prob(s[e], (e & 1) ? lse2[e >> 2].y : lse2[e >> 2].x, scale_log2, qrow, key, L, edge);
  }
}

// mma_abt64 issued and committed as one wgmma group; acc stays unread until a wait covers it.
template <int D, int RA, int RB>
__device__ __forceinline__ void issue_abt64(float (&acc)[32], uint32_t a, uint32_t b) {
  wg_fence();
  mma_abt64<D, RA, RB>(acc, a, b);
  wg_commit();
}

// The backward's Sᵀ = K·Qᵀ of one warpgroup (its 64 keys, K-major at sK, against the bwd_rows(D)
// query rows at tQ), issued and committed, just before bwd_tile_gemms.
template <int D>
__device__ __forceinline__ void issue_st(float (&acc)[bwd_rows(D) / 2], uint32_t sK, uint32_t tQ) {
  if constexpr (bwd_rows(D) == 128) {
    wg_fence();
    mma_abt128<D, 128>(acc, sK, tQ);
    wg_commit();
  } else {
    issue_abt64<D, 128, 64>(acc, sK, tQ);
  }
}

// One warpgroup's next GEMMs of query tile q0 (R = bwd_rows(D) rows) against its 64 keys, entered
// with Sᵀ = K·Qᵀ (issue_st, just before) the only pending wgmma group, each element-wise step
// overlapping a GEMM: dPᵀ = V·dOᵀ (V K-major at sV, dO K-major at tdO); Pᵀ (bwd_probs) while
// dPᵀ runs; dV += bf16(Pᵀ)·dO; dSᵀ = Pᵀ·(dPᵀ − Di) (at D 128 while dV runs), packed into da. stat:
// lse2 [R] then Di [R] of the tile. Returns with dV's group in flight (pa — P as A fragments — must
// stay live and unread until it completes); the caller issues dK += bf16(dSᵀ)·Q (bwd_issue_dk) once
// it has read da (a wgmma's register operands may not be read while it runs). after_dp() runs once
// dPᵀ is issued, while the tensor cores work on it (the caller hands the previous step's staged dQ
// tile to its writer there). (A variant that started dPᵀ's accumulator at −Di, so no Di read waits
// after the dPᵀ wait, was 0.4–1.1 % slower at D 64 with 64-row steps, H200, 2026-12-06, and is
// gone.)
template <int D, class AfterDp>
__device__ __forceinline__ void bwd_tile_gemms(float (&s)[bwd_rows(D) / 2], float (&gv)[D / 64][32],
                                               uint32_t (&pa)[bwd_rows(D) / 16][4],
                                               uint32_t (&da)[bwd_rows(D) / 16][4], uint32_t sV,
                                               uint32_t tdO, const float* stat, float scale_log2,
                                               int q0, int key0, int c2, int L, bool edge,
                                               AfterDp&& after_dp) {
  constexpr int kKeys = 128, kRows = bwd_rows(D), kE = kRows / 2;
  float dp[kE];
  wg_fence();
  if constexpr (kRows == 128) {
    mma_abt128<D, kKeys>(dp, sV, tdO);
  } else {
    mma_abt64<D, kKeys, kRows>(dp, sV, tdO);
  }
  wg_commit();
  after_dp();
  float pt[kE];
  if constexpr (kRows == 128) {
    // 128 query rows (D 64): Pᵀ while dPᵀ runs, then P and dSᵀ packed 16 query columns at a time
    // and dV issued after them. Issuing dV first (as at D 128) keeps Pᵀ in fp32 (64 registers)
    // beside its bf16 copy, dPᵀ and dK/dV: past the 240 registers (ptxas spilled 320 bytes and
    // serialized the wgmmas); this way Sᵀ's and dPᵀ's registers are freed as P and dS are packed.
    // lse2 is read 8 columns at a time for the same reason.
    wg_wait<1>();  // Sᵀ
    keep(s);
#pragma unroll
    for (int j = 0; j < kE / 4; ++j) {
      const float2 l2 = *reinterpret_cast<const float2*>(stat + j * 8 + c2);
#pragma unroll
      for (int e = 4 * j; e < 4 * j + 4; ++e) {
        const int qrow = q0 + j * 8 + c2 + (e & 1), key = key0 + ((e >> 1) & 1) * 8;
        pt[e] = bwd_prob(s[e], (e & 1) ? l2.y : l2.x, scale_log2, qrow, key, L, edge);
      }
    }
    wg_wait0();  // dPᵀ
    keep(dp);
#pragma unroll
    for (int kq = 0; kq < kRows / 16; ++kq) {
#pragma unroll
      for (int r = 0; r < 4; ++r) pa[kq][r] = pack_bf16(pt[8 * kq + 2 * r], pt[8 * kq + 2 * r + 1]);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float2 di = *reinterpret_cast<const float2*>(stat + kRows + (2 * kq + h) * 8 + c2);
#pragma unroll
        for (int e = 8 * kq + 4 * h; e < 8 * kq + 4 * h + 4; ++e)
          pt[e] = pt[e] * (dp[e] - ((e & 1) ? di.y : di.x));
      }
#pragma unroll
      for (int r = 0; r < 4; ++r) da[kq][r] = pack_bf16(pt[8 * kq + 2 * r], pt[8 * kq + 2 * r + 1]);
    }
    wg_fence();
    mma_pb<D, kRows>(gv, pa, tdO);
    wg_commit();
  } else {
    float2 lse2[kE / 4];  // this thread's query rows' lse2, read while Sᵀ completes
    stat_cols(lse2, stat, c2);
    wg_wait<1>();  // Sᵀ, issued just before; Pᵀ's exponentials overlap dPᵀ's GEMM
    keep(s);
    // Pᵀ, then dSᵀ, in pt: s is written by wgmma only (ptxas serializes the kernel's wgmmas when
    // other instructions write the accumulator of one issued a loop iteration ahead).
    bwd_probs(s, pt, lse2, scale_log2, q0, key0, c2, L, edge);
    pack_a(pt, pa);
    wg_fence();
    mma_pb<D, kRows>(gv, pa, tdO);
    wg_commit();
    wg_wait<1>();  // dPᵀ
    keep(dp);
    // Di after the wait: read before it, its 16 registers spill (ptxas, sm_90a).
    float2 Di[kE / 4];
    stat_cols(Di, stat + kRows, c2);
#pragma unroll
    for (int e = 0; e < kE; ++e) pt[e] = pt[e] * (dp[e] - ((e & 1) ? Di[e >> 2].y : Di[e >> 2].x));
    pack_a(pt, da);
  }
}

// dK += bf16(dSᵀ)·Q for one warpgroup (Q MN-major at tQ), issued and committed.
template <int D>
__device__ __forceinline__ void bwd_issue_dk(float (&gk)[D / 64][32],
                                             const uint32_t (&da)[bwd_rows(D) / 16][4],
                                             uint32_t tQ) {
  wg_fence();
  mma_pb<D, bwd_rows(D)>(gk, da, tQ);
  wg_commit();
}

// cp.async of a backward block's K and V tiles (keys n0 … n0 + 127 of its sequence, KV head
// w.kvh) into sK / sV, rows ≥ L zero-filled, committed as one group. Threads 0-255 take part.
template <int D>
__device__ __forceinline__ void bwd_load_kv(const KArgs& a, const Work& w, const bf16* k,
                                            const bf16* v, uint32_t sK, uint32_t sV, int n0) {
  const int64_t ldk = static_cast<int64_t>(a.Hkv) * D;
  const int64_t koff = (w.s0 + n0) * ldk + w.kvh * D;
  load_tile<D, 128>(sK, k + koff, ldk, min(128, w.L - n0));
  load_tile<D, 128>(sV, v + koff, ldk, min(128, w.L - n0));
  cp_async_commit();
}

// After the tile's last wgmma_wait: the accumulators and A fragments its GEMMs used stay where
// they are (keep).
template <int D>
__device__ __forceinline__ void keep_tile(float (&gk)[D / 64][32], float (&gv)[D / 64][32],
                                          uint32_t (&pa)[bwd_rows(D) / 16][4],
                                          uint32_t (&da)[bwd_rows(D) / 16][4]) {
#pragma unroll
  for (int nb = 0; nb < D / 64; ++nb) {
    keep(gv[nb]);
    keep(gk[nb]);
  }
  keep(pa);
  keep(da);
}

// Zeroes a warpgroup's dK and dV accumulators, pinned before the next wgmma issue (keep) so the
// zeroing is not moved among in-flight wgmmas.
template <int D>
__device__ __forceinline__ void zero_dkdv(float (&gk)[D / 64][32], float (&gv)[D / 64][32]) {
#pragma unroll
  for (int nb = 0; nb < D / 64; ++nb) {
#pragma unroll
    for (int e = 0; e < 32; ++e) gk[nb][e] = gv[nb][e] = 0.0f;
    keep(gk[nb]);
    keep(gv[nb]);
  }
}

// Writes a warpgroup's scale·dK and dV rows (keys key0 and key0 + 8 of each accumulator quad) as
// the mma.sync kernel does: fp32 partials pk/pv [T, Hq, D] when non-null, else dk/dv [T, Hkv, D];
// keys ≥ L skipped.
template <int D>
__device__ __forceinline__ void bwd_store_dkdv(const float (&gk)[D / 64][32],
                                               const float (&gv)[D / 64][32], const KArgs& a,
                                               const Work& w, int key0, int c2, float* pk,
                                               float* pv, bf16* dk, bf16* dv) {
  const int64_t ldk = static_cast<int64_t>(a.Hkv) * D;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = key0 + r * 8;
    if (key >= w.L) continue;
#pragma unroll
    for (int nb = 0; nb < D / 64; ++nb)
#pragma unroll
      for (int x = 0; x < 8; ++x) {
        const int col = nb * 64 + x * 8 + c2, e = 4 * x + 2 * r;
        if (pk) {
          const int64_t base = ((w.s0 + key) * static_cast<int64_t>(a.Hq) + w.h) * D + col;
          *reinterpret_cast<float2*>(pk + base) =
              make_float2(a.scale * gk[nb][e], a.scale * gk[nb][e + 1]);
          *reinterpret_cast<float2*>(pv + base) = make_float2(gv[nb][e], gv[nb][e + 1]);
        } else {
          const int64_t base = (w.s0 + key) * ldk + w.kvh * D + col;
          *reinterpret_cast<uint32_t*>(dk + base) =
              pack_bf16(a.scale * gk[nb][e], a.scale * gk[nb][e + 1]);
          *reinterpret_cast<uint32_t*>(dv + base) = pack_bf16(gv[nb][e], gv[nb][e + 1]);
        }
      }
  }
}

// The GQA head sum, done by the last of a key tile's rep / hpb head-group blocks to finish (the
// "last block" pattern of CUDA's threadFenceReduction sample; rep = Hq / Hkv): every block has
// stored its group's partial in pk/pv [T, Hq, D] at the group's first head (bwd_store_dkdv), made
// it visible at GPU scope and counted itself in cnt (one int per key tile and KV head, zeroed
// before the launch); the block that counts rep / hpb sums the partials in head order — each
// element fl(…fl(fl(0 + p₀) + p_hpb)… + p_{rep−hpb}); at hpb = 1 exactly
// attn_sum_heads_vec_kernel's order, so dK and dV are bitwise that kernel's — and writes dk/dv [T,
// Hkv, D] bf16 for the tile's keys n0 … (keys ≥ L skipped). The partials are read with .cg loads
// from L2, where they usually still are (written by blocks running beside this one), not from DRAM,
// and no separate pass over [T, Hq, D] runs. Called by the 256 MMA threads after the block's last
// GEMM (named barrier `bar`). Not inlined: inlined, or called with its arguments by value, the D 64
// kernel spilled 8 bytes (ptxas); called like this it spills none (a and w go through an 88-byte
// stack frame, which the PTX writes at kernel entry).
template <int D>
__device__ __noinline__ void bwd_sum_heads_last(const KArgs& a, const Work& w, int n0, int* cnt,
                                                const float* pk, const float* pv, bf16* dk,
                                                bf16* dv, int bar, int* last) {
  const int tid = static_cast<int>(threadIdx.x), rep = a.Hq / a.Hkv;
  __threadfence();  // this thread's partial stores, visible at GPU scope before the count
  bar_sync(bar, 256);
  if (tid == 0) *last = atomicAdd(cnt, 1) == rep / a.hpb - 1;
  bar_sync(bar, 256);
  if (!*last) return;
  __threadfence();  // the other blocks' partials, counted before, are read after the count
  constexpr int kChunks = D / 4;  // float4 chunks per key row
  const int nkeys = min(128, w.L - n0);
  const int64_t ldp = static_cast<int64_t>(a.Hq) * D, ldk = static_cast<int64_t>(a.Hkv) * D;
  const int64_t g0 = static_cast<int64_t>(w.kvh) * rep * D, o0 = static_cast<int64_t>(w.kvh) * D;
  for (int x = tid; x < nkeys * kChunks; x += 256) {
    const int key = x / kChunks, c = (x - key * kChunks) * 4;
    const int64_t t = static_cast<int64_t>(w.s0) + n0 + key;
    const float* bk = pk + t * ldp + g0 + c;
    const float* bv = pv + t * ldp + g0 + c;
    float4 sk = make_float4(0.0f, 0.0f, 0.0f, 0.0f), sv = sk;
    for (int j = 0; j < rep; j += a.hpb) {
      const float4 u = __ldcg(reinterpret_cast<const float4*>(bk + j * D));
      const float4 v = __ldcg(reinterpret_cast<const float4*>(bv + j * D));
      sk.x += u.x, sk.y += u.y, sk.z += u.z, sk.w += u.w;
      sv.x += v.x, sv.y += v.y, sv.z += v.z, sv.w += v.w;
    }
    uint2 ok, ov;
    ok.x = pack_bf16(sk.x, sk.y), ok.y = pack_bf16(sk.z, sk.w);
    ov.x = pack_bf16(sv.x, sv.y), ov.y = pack_bf16(sv.z, sv.w);
    *reinterpret_cast<uint2*>(dk + t * ldk + o0 + c) = ok;
    *reinterpret_cast<uint2*>(dv + t * ldk + o0 + c) = ov;
  }
}

// Ordered accumulation between blocks (the fused backward's dQ): a flag read with acquire and
// written with release semantics at GPU scope (PTX ISA, memory consistency model), named barriers
// between the MMA warpgroups and the dQ writers, and the bulk asynchronous copies (cp.async.bulk,
// shared → global, plain or .add.f32 reduction) the writers issue.
__device__ __forceinline__ int ld_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release(int* p, int v) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void bulk_s2g(float* dst, uint32_t src, uint32_t bytes, bool add) {
  if (add) {
    asm volatile(
        "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst),
        "r"(src), "r"(bytes)
        : "memory");
  } else {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst),
                 "r"(src), "r"(bytes)
                 : "memory");
  }
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

// The fused backward of a.hpb query heads (one KV head's w.h … w.h + hpb − 1, taken in turn, their
// dK/dV summed in the same registers) for one key tile (deterministic: see below), D 64 or 128.
// It replaced, at D 64, the mma.sync family's split into a dK/dV and a dQ kernel (7 GEMMs per tile
// pair instead of 5): once blocks ran heaviest first, the fused kernel was 8-18 % faster there on
// an H200. Block: two MMA warpgroups (threads 0-255) and warpgroup 2: dQ-writer warps 8 and 9 (one
// per staging buffer, bwd_dq_stages, taking alternate query tiles), producer warp 10, and warp 11,
// which exits; registers moved to the MMA warpgroups (setmaxnreg 240 / 24, as FlashAttention-3
// splits them). The producer loads the query tiles — Q and dO by TMA, lse2 and Di by its 32 lanes
// — into two buffers handed over by mbarriers (full: the lanes' stores and the TMA's bytes landed;
// empty: all 256 MMA threads are past the tile's GEMMs), so the MMA threads issue no copies and
// meet at no barrier at a tile's top. (At D 64 this replaced the MMA threads' own cp.async copies
// with a barrier at every step: 11-21 % faster backward at the six D 64 issue-18 shapes, one H100,
// 2026-12-06.) The sequence's last tile reads rows past its end (the next sequence's; zeros past
// T): their probabilities are masked to 0 and their dQ rows not stored, so, as in the forward, the
// sequences stay isolated while the values are finite.
// The MMA warpgroups: 128 keys (64 each), K and V K-major in shared memory, query tiles of R =
// bwd_rows(D) rows (64 at D 128, 128 at D 64) from the sequence's last one down to the one holding
// the block's first key. Per warpgroup and query tile: Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ (wgmma m64nRk16,
// Q and dO K-major), Pᵀ = 2^(Sᵀ·scale·log2e − lse2[q]) masked where q < key or q ≥ L, dSᵀ =
// Pᵀ·(dPᵀ − Di[q]), then dV += bf16(Pᵀ)·dO and dK += bf16(dSᵀ)·Q (P and dS from registers, dO and Q
// MN-major), and the tile's dQ partial bf16(dS)·K (dSᵀ stored to shared memory and read back
// transposed, K MN-major, over all 128 keys; D 128: each warpgroup 64 of the columns, D 64: each
// 64 of the 128 rows), staged in one of bwd_dq_stages fp32 buffers. dSᵀ is double-buffered at
// D 128 (a warpgroup writes buffer k % 2 at step k + 2 only after the dSᵀ barrier of step k + 1,
// which the other warpgroup reaches after its step-k dQ GEMM, the buffer's last reader, completed);
// at D 64 its one 32 KiB buffer (shared memory holds no second) is guarded by a barrier after each
// step's last wgmma wait. The writers add staged tiles into dqa [Hq, T, D] fp32 in a fixed order:
// query tile i's partials come from key tiles n = 0, 1, …, (last key tile at or before the tile's
// last row); block n waits until the tile's flag (sem, zeroed before the launch) reads n, copies
// (n = 0) or reduce-adds its tile with one bulk copy, waits for it to complete and sets the flag to
// n + 1. Each reduction completes before the next starts, so every element's sum has one order:
// bitwise repeatable. Blocks run in a.order (bwd_block_work), each sequence's heaviest key tile
// first (key tile 0 has the most query tiles; a lightest-first order left a tail of the heaviest
// blocks: 86 % of the SMs' time busy at 1 × 8k in a simulation, against 99 %): sequence by
// sequence at hpb = 1, where the blocks side by side share a sequence's Q, dO and dQ rows in L2,
// tile-major across the sequences for hpb > 1, whose hpb-times-longer blocks would otherwise leave
// the last sequence's heaviest tiles to run last (bench/README, session 28, times both orders at
// every hpb). In both a sequence's key tile x − 1 precedes its tile x, so every block
// waits only on blocks launched before it (no deadlock whatever the residency, given that blocks
// are dispatched in index order, as FlashAttention-3's deterministic backward also assumes). Each
// block takes its query tiles last first, each tile for its hpb heads in turn: block n + 1,
// launched after block n, meets it on the sequence's last query tile (the first both add to), so it
// trails block n by about one step instead of waiting for it to reach its diagonal. Staged rows are
// stored with their 16-byte chunks XOR-swizzled by (token & 7) (conflict-free stores; the bulk copy
// moves them as they are); attn_dq_convert_kernel undoes it: dQ = scale·dqa. Writes scale·dK and dV
// as the mma.sync kernel does, summed over the block's heads: fp32 partials pk/pv [T, Hq, D] when
// non-null — and then the key tile's last head-group block sums them into dk/dv
// (bwd_sum_heads_last; its counters follow the dQ flags in sem) — else (hpb = Hq / Hkv) dk/dv [T,
// Hkv, D].
constexpr int kBwdThreads = 384;
// How many dQ tiles the fused backward stages for its writers (one writer warp each): 2 (a tile is
// 32 KiB at both head dims, and neither leaves room for a third). (With 64-row steps at D 64, four
// buffers, measured on their own on an H200, 2026-12-06, were 0.1–1.9 % slower at five of the six
// issue-18 D 64 shapes.)
__host__ __device__ constexpr int bwd_dq_stages(int) { return 2; }
constexpr int kBarMma = 1, kBarFull = 2, kBarEmpty = 6;  // named barriers (0: __syncthreads)
constexpr int kBarWriter = 256 + 32;                     // MMA threads + one writer warp
static_assert(kBarFull + bwd_dq_stages(64) <= kBarEmpty &&
                  kBarFull + bwd_dq_stages(128) <= kBarEmpty &&
                  kBarEmpty + bwd_dq_stages(64) <= 16 && kBarEmpty + bwd_dq_stages(128) <= 16,
              "named barriers: one full and one empty per staging buffer, 16 in all");

// The fused backward's block: entry blockIdx.x / (Hq / hpb) of a.order — (sequence, key tile) —
// and head group blockIdx.x % (Hq / hpb): query heads w.h … w.h + hpb − 1 of KV head w.kvh.
__device__ __forceinline__ Work bwd_block_work(const KArgs& a) {
  const int groups = a.Hq / a.hpb, r = static_cast<int>(blockIdx.x) / groups;
  const int2 e = a.order[r];
  Work w;
  w.seq = e.x;
  w.tile = e.y;
  w.s0 = a.cu[e.x];
  w.L = a.cu[e.x + 1] - w.s0;
  w.h = (static_cast<int>(blockIdx.x) - r * groups) * a.hpb;
  w.kvh = w.h / (a.Hq / a.Hkv);
  return w;
}

// Offset (floats) of element (r, c) of a staged dQ row r of token t: chunk c/4 swizzled by t & 7.
template <int D>
__device__ __forceinline__ int dq_slot(int r, int c, int64_t t) {
  return r * D + ((((c >> 2) ^ static_cast<int>(t & 7))) << 2) + (c & 3);
}

template <int D>
__global__ void __launch_bounds__(kBwdThreads, 1)
    attn_bwd_sm90(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tdo,
                  KArgs a, const bf16* q, const bf16* k, const bf16* v, const bf16* dout,
                  const float* lse2, const float* Di, float* pk, float* pv, bf16* dk, bf16* dv,
                  float* dqa, int* sem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Launched programmatically after the prep kernel (launch_pdl): its Di / lse2, and through it the
  // tile plan's table and zeroed flags, are read only after this wait; the dQ conversion behind
  // this kernel may start launching at once (it waits for this grid in turn).
  wait_prior_grid();
  allow_next_grid();
  constexpr int kKeys = 128, kRows = bwd_rows(D);
  constexpr uint32_t kKB = kKeys * D * 2, kQB = kRows * D * 2, kSB = kRows * D * 4;
  constexpr int kNB = D / 64;
  // Q/dO/stat buffers, and dSᵀ buffers: one without the producer (the barrier at the top of every
  // step follows each thread's wait for the previous step's dQ GEMM, the tile's last reader).
  constexpr int kNQ = 2, kNdS = kRows == 128 ? 1 : 2;
  constexpr bool kRowSplit = kRows == 128;  // the dQ GEMM split between warpgroups by rows
  constexpr uint32_t kDSB = kKeys * kRows * 2;
  constexpr int kNS = bwd_dq_stages(D);  // staged dQ tiles
  extern __shared__ unsigned char smem[];
  const uint32_t s0addr = smem_u32(smem);
  const uint32_t sK = (s0addr + 1023u) & ~1023u, sV = sK + kKB, sQ = sV + kKB;
  const uint32_t sdO = sQ + kNQ * kQB;
  const uint32_t sdS = sdO + kNQ * kQB;               // dSᵀ [128 keys × kRows q] bf16, swizzled
  const uint32_t sAcc = sdS + kNdS * kDSB;            // kNS staged dQ tiles [kRows][D] f32
  const uint32_t sStat = sAcc + kNS * kSB;            // [kNQ buffers][lse2 kRows | Di kRows] f32
  const uint32_t sBar = sStat + kNQ * 2 * kRows * 4;  // full, empty per buffer (8 B each)
  const auto q_full = [&](int b) { return sBar + 16 * b; };
  const auto q_empty = [&](int b) { return sBar + 16 * b + 8; };
  const float* stat = reinterpret_cast<const float*>(smem + (sStat - s0addr));
  float* acc_s = reinterpret_cast<float*>(smem + (sAcc - s0addr));
  const Work w = bwd_block_work(a);
  const int n0 = w.tile * kKeys;
  // Query tiles i0 … ntiles − 1, taken last first, each for the block's a.hpb heads in turn: step
  // kstep = k·hpb + j is tile ntiles − 1 − k of head w.h + j. (Heads inside tiles: block n + 1
  // meets block n's (tile, head) steps in the same order, one step behind; with heads outside, it
  // would wait at every head for block n's longer tile run.)
  const int i0 = n0 / kRows, ntiles = (w.L + kRows - 1) / kRows, steps = ntiles - i0;
  const int total = a.hpb * steps;
  const int tid = static_cast<int>(threadIdx.x);
  const int wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;

  if (tid == 0) {
    for (int b = 0; b < kNQ; ++b) {
      mbar_init(q_full(b), 32);    // the producer's lanes, and the TMA's bytes
      mbar_init(q_empty(b), 256);  // the MMA threads
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 2) {  // the dQ writers and the producer (warp kNS)
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
    if (warp == kNS) {  // the producer: query tile i of step kstep into buffer kstep % kNQ
      float* const st = reinterpret_cast<float*>(smem + (sStat - s0addr));
#pragma unroll 1
      for (int kstep = 0, j = 0, ks = 0; kstep < total; ++kstep) {
        const int i = ntiles - 1 - ks, b = kstep % kNQ, h = w.h + j;
        const int64_t sbase = static_cast<int64_t>(h) * a.T + w.s0;
        const float *l2 = lse2 + sbase, *di = Di + sbase;
        if (++j == a.hpb) j = 0, ++ks;
        if (kstep >= kNQ) mbar_wait(q_empty(b), ((kstep / kNQ) + 1) & 1);  // its last use done
        if (lane == 0) {  // the TMA first: the statistics' loads overlap it
          mbar_expect_tx_only(q_full(b), 2 * kQB);
          const int y = w.s0 + i * kRows;
#pragma unroll
          for (int cb = 0; cb < kNB; ++cb) {
            tma_load_2d(sQ + b * kQB + cb * (kRows * 128), &tq, h * D + cb * 64, y, q_full(b));
            tma_load_2d(sdO + b * kQB + cb * (kRows * 128), &tdo, h * D + cb * 64, y, q_full(b));
          }
        }
#pragma unroll
        for (int r = lane; r < kRows; r += 32) {
          const int row = i * kRows + r;
          const bool ok = row < w.L;
          st[b * 2 * kRows + r] = ok ? l2[row] : 0.0f;
          st[b * 2 * kRows + kRows + r] = ok ? di[row] : 0.0f;
        }
        mbar_arrive(q_full(b));  // release: this lane's statistics
      }
      return;
    }
    if (warp >= kNS) return;
    const int sb = warp;  // writer warp sb sends the tiles staged in buffer sb
    const int turn =
        w.tile;  // key tiles 0 … w.tile − 1 add to every query tile of this block first
    for (int kstep = sb; kstep < total; kstep += kNS) {
      const int ks = kstep / a.hpb, i = ntiles - 1 - ks, h = w.h + (kstep - ks * a.hpb);
      float* dqb = dqa + (static_cast<int64_t>(h) * a.T + w.s0) * D;  // the sequence's rows of h
      bar_sync(kBarFull + sb, kBarWriter);
      int* flag = sem + (static_cast<int64_t>(2 * a.tile_start[w.seq]) + i) * a.Hq + h;
      if (lane == 0) {
#ifndef ZT_ATTN_DIAG_NO_ORDER
        if (turn > 0) {
          while (ld_acquire(flag) != turn) {
          }
          // The predecessor's bulk reduction (async proxy) ordered before this one's.
          asm volatile("fence.proxy.async.global;\n" ::: "memory");
        }
#endif
        const uint32_t bytes = static_cast<uint32_t>(min(kRows, w.L - i * kRows)) * D * 4;
        bulk_s2g(dqb + static_cast<int64_t>(i) * kRows * D, sAcc + sb * kSB, bytes, turn > 0);
        asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
      }
      __syncwarp();
      // The buffer may be refilled. (The last kNS tiles' arrivals are never waited for: the block
      // ends, which is harmless in a non-persistent kernel.)
      bar_arrive(kBarEmpty + sb, kBarWriter);
      if (lane == 0) {
        asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
        asm volatile("fence.proxy.async.global;\n" ::: "memory");
        st_release(flag, turn + 1);
      }
      __syncwarp();
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");

  bwd_load_kv<D>(a, w, k, v, sK, sV, n0);
  const int kl = wg * 64 + warp * 16 + (lane >> 2);  // block key of elements 0, 1 (+8: 2, 3)
  const int key0 = n0 + kl;
  const int c2 = (lane & 3) * 2;
  const uint32_t sKwg = sK + wg * 64 * 128, sVwg = sV + wg * 64 * 128;
  float gk[kNB][32], gv[kNB][32];
  zero_dkdv<D>(gk, gv);

  float s[kRows / 2];
  cp_async_wait<0>();  // K and V landed (the query tiles come through the mbarriers)
  fence_async_smem();
  bar_sync(kBarMma, 256);
  for (int kstep = 0, ks = 0, j = 0; kstep < total; ++kstep) {
    const int i = ntiles - 1 - ks, b = kstep % kNQ;
    if (++j == a.hpb) j = 0, ++ks;            // (the next step's tile)
    mbar_wait(q_full(b), (kstep / kNQ) & 1);  // tile i's Q, dO, lse2, Di landed
    const uint32_t tQ = sQ + b * kQB, tdO = sdO + b * kQB;
    const float* ls = stat + b * 2 * kRows;  // lse2, then Di
    const bool edge = i * kRows < n0 + kKeys || (i + 1) * kRows > w.L;
    uint32_t pa[kRows / 16][4], da[kRows / 16][4];
    issue_st<D>(s, sKwg, tQ);
    // The previous step's staged dQ tile goes to its writer here, once this step's dPᵀ is issued:
    // the proxy fence waits for the staging stores to complete (4-5 % of the MMA warps' samples
    // when it followed them directly, ncu on an H100), and now the tensor cores run meanwhile.
    bwd_tile_gemms<D>(s, gv, pa, da, sVwg, tdO, ls, a.scale_log2, i * kRows, key0, c2, w.L, edge,
                      [&] {
                        if (kstep > 0) {
                          fence_async_smem();
                          bar_arrive(kBarFull + (kstep - 1) % kNS, kBarWriter);
                        }
                      });
    const uint32_t tdS = sdS + (kstep % kNdS) * kDSB;
    // dSᵀ to shared memory before the dK GEMM takes da: register [kq][r] holds keys
    // kl + (r & 1)·8, query columns (2·kq + r / 2)·8 + c2 and + 1 (pack_a's A-fragment layout),
    // in kRows / 64 column blocks of [128 keys × 64 q] (sw128<kKeys>'s layout).
#pragma unroll
    for (int kq = 0; kq < kRows / 16; ++kq)
#pragma unroll
      for (int r = 0; r < 4; ++r)
        *reinterpret_cast<uint32_t*>(smem + (tdS - s0addr) +
                                     sw128<kKeys>(kl + (r & 1) * 8, (2 * kq + (r >> 1)) * 8) +
                                     c2 * 2) = da[kq][r];
    bwd_issue_dk<D>(gk, da, tQ);
    fence_async_smem();
    bar_sync(kBarMma, 256);  // both warpgroups' dSᵀ (the dQ GEMM reads all 128 keys)
    // The tile's dQ partial dS·K over all 128 keys, [64 query rows × 64 columns] a warpgroup (32
    // accumulator registers): A = dSᵀ read transposed (16-key steps), B = K MN-major. D 128: rows
    // 0-63, the warpgroup's 64-column block of K (K's second block for warpgroup 1); D 64: the
    // warpgroup's 64 of the 128 rows (dSᵀ's column block wg), all 64 columns.
    const uint32_t adS = tdS + (kRowSplit ? wg * (kKeys * 128) : 0);
    const uint32_t bK = sK + (kRowSplit ? 0 : wg * (kKeys * 128));
    float gq[32];
    wg_fence();
#pragma unroll
    for (int kq = 0; kq < kKeys / 16; ++kq)
      wgmma_ss_n64<1, 1>(gq, desc_sw128(adS + kq * 2048, 1024, 1024),
                         desc_sw128(bK + kq * 2048, 1024, 1024), kq > 0 ? 1 : 0);
    wg_commit();
    // While the dQ GEMM runs (it reads dSᵀ and K only): wait for dV and dK, give buffer b back to
    // the producer, and wait for the writer to have sent what staging buffer sb held kNS tiles
    // ago. (Waiting for all three GEMMs first left these waits exposed. This order: backward
    // +0.3 to +1.0 % at D 128, -0.9 to +0.8 % at D 64, bitwise the same; two interleaved runs
    // of the issue-18 shapes on one H100, 2026-12-06.)
    wg_wait<1>();  // dV and dK of this step
    keep_tile<D>(gk, gv, pa, da);
    mbar_arrive(q_empty(b));  // this thread is done with buffer b
    const int sb = kstep % kNS;
    if (kstep >= kNS) bar_sync(kBarEmpty + sb, kBarWriter);
    wg_wait0();  // dQ
    keep(gq);
    // One dSᵀ tile: both warpgroups' dQ GEMMs (its readers) done before the next step stores it.
    if constexpr (kNdS == 1) bar_sync(kBarMma, 256);
    float* st = acc_s + sb * (kSB / 4);
    const int row = (kRowSplit ? wg * 64 : 0) + warp * 16 + (lane >> 2);
    const int col0 = kRowSplit ? 0 : wg * 64;
    const int64_t t0 = w.s0 + static_cast<int64_t>(i) * kRows;
#pragma unroll
    for (int e = 0; e < 32; e += 2) {
      const int rr = row + ((e >> 1) & 1) * 8, col = col0 + (e >> 2) * 8 + c2;
      *reinterpret_cast<float2*>(st + dq_slot<D>(rr, col, t0 + rr)) = make_float2(gq[e], gq[e + 1]);
    }
    if (kstep + 1 == total) {  // (otherwise the next step hands it over, after its dPᵀ issue)
      fence_async_smem();      // the staged tile visible to the bulk copy (async proxy)
      bar_arrive(kBarFull + sb, kBarWriter);
    }
  }
  wg_wait0();  // (every group is complete here; without it ptxas injects this wait, C7517)
  bwd_store_dkdv<D>(gk, gv, a, w, key0, c2, pk, pv, dk, dv);
  if (pk) {  // GQA: the key tile's last query-head block sums the partials (after the dQ flags)
    __shared__ int last;
    int* const cnt = sem + 2 * static_cast<int64_t>(a.tile_start[a.n]) * a.Hq +
                     static_cast<int64_t>(a.tile_start[w.seq] + w.tile) * a.Hkv + w.kvh;
    bwd_sum_heads_last<D>(a, w, n0, cnt, pk, pv, dk, dv, kBarMma, &last);
  }
#endif
}

// dq[t, h, :] = bf16(scale·dqa[h, t, :]), dqa's 16-byte chunks swizzled by t & 7 (dq_slot); four
// elements per thread, grid-stride.
template <int D>
__global__ void __launch_bounds__(256)
    attn_dq_convert_kernel(const float* dqa, bf16* dq, int64_t T, int Hq, float scale) {
  wait_prior_grid();  // launched programmatically after the fused backward (launch_pdl)
  const int64_t n4 = T * Hq * D / 4;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / (D / 4);  // h·T + t
    const int64_t h = row / T, t = row - h * T;
    const int c = static_cast<int>(i - row * (D / 4)) * 4;
    const float4 x = *reinterpret_cast<const float4*>(dqa + row * D + dq_slot<D>(0, c, t));
    uint2 o;
    o.x = pack_bf16(scale * x.x, scale * x.y);
    o.y = pack_bf16(scale * x.z, scale * x.w);
    *reinterpret_cast<uint2*>(dq + (t * Hq + h) * D + c) = o;
  }
}

// A 2-D TMA map of a [T, cols] bf16 tensor (row stride cols elements) read in boxes of 64 columns
// × `rows` rows, 128-byte swizzled (the kernels' shared-memory layout). cuTensorMapEncodeTiled
// comes from the driver through the runtime's entry-point query (no libcuda link).
CUtensorMap tma_map(const void* base, int64_t T, int64_t cols, int rows) {
  using Encode =
      CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  static Encode encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
#if CUDART_VERSION >= 12050
    check(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                           &q),
          "attention: cuTensorMapEncodeTiled");
#else
    check(cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &fn, cudaEnableDefault, &q),
          "attention: cuTensorMapEncodeTiled");
#endif
    if (q != cudaDriverEntryPointSuccess || fn == nullptr)
      throw std::runtime_error("attention_fwd: the CUDA driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<Encode>(fn);
  }();
  CUtensorMap m;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(T)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * 2};
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(rows)}, elem[2] = {1, 1};
  const CUresult r =
      encode(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides, box,
             elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw std::runtime_error("attention: cuTensorMapEncodeTiled failed (error " +
                             std::to_string(static_cast<int>(r)) + ")");
  return m;
}

template <int D>
void fwd(const KArgs& ka, unsigned grid, void* out, float* lse, const void* q, const void* k,
         const void* v, cudaStream_t st) {
  // Q, kFwdStages × (K, V), the barriers, 1 KiB to align the tiles to the swizzle atom.
  constexpr int kBM = sm90_fwd_rows(D);
  constexpr size_t kSmem = static_cast<size_t>(kBM + 2 * kFwdStages * kBN) * D * 2 + 1024 + 1024;
  const CUtensorMap tq = tma_map(q, ka.T, static_cast<int64_t>(ka.Hq) * D, kBM),
                    tk = tma_map(k, ka.T, static_cast<int64_t>(ka.Hkv) * D, kBN),
                    tv = tma_map(v, ka.T, static_cast<int64_t>(ka.Hkv) * D, kBN);
  // Persistent: one block per SM at most (the registers hold one), each looping over the items.
  static const unsigned sms = [] {
    int dev = 0, n = 0;
    check(cudaGetDevice(&dev), "attention_fwd");
    check(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev), "attention_fwd");
    return static_cast<unsigned>(n);
  }();
  launch_pdl(attn_fwd_sm90<D>, std::min(grid, sms), fwd_threads(D), kSmem, st, "attention_fwd", tq,
             tk, tv, ka, static_cast<int>(grid), static_cast<bf16*>(out), lse);
}

// The fused backward.
template <int D>
void bwd_fused(const KArgs& ka, unsigned grid, const float* lse2, const float* Di, float* pk,
               float* pv, float* dqa, int* sem, void* dq, void* dk, void* dv, const void* dout,
               const void* q, const void* k, const void* v, cudaStream_t st) {
  // K, V, kNQ × (Q, dO, lse2/Di), kNdS × dSᵀ, the staged dQ tiles, kNQ × 2 mbarriers, 1 KiB to
  // align (attn_bwd_sm90's layout).
  constexpr size_t kNQ = 2, kNdS = bwd_rows(D) == 128 ? 1 : 2, kR = bwd_rows(D);
  constexpr size_t kSmem = (2 * 128 + 2 * kNQ * kR) * D * 2 + kNdS * 128 * kR * 2 +
                           bwd_dq_stages(D) * kR * D * 4 + kNQ * 2 * kR * 4 + kNQ * 16 + 1024;
  static_assert(kSmem + 16 <= 227 * 1024,  // + the static `last` (bwd_sum_heads_last)
                "the backward's shared memory exceeds sm_90's 227 KiB");
  // Q and dO in boxes of 64 columns × bwd_rows(D) rows (the producer warp's TMA loads).
  const CUtensorMap tq = tma_map(q, ka.T, static_cast<int64_t>(ka.Hq) * D, bwd_rows(D)),
                    tdo = tma_map(dout, ka.T, static_cast<int64_t>(ka.Hq) * D, bwd_rows(D));
  // One flag per (64-row query tile, query head), 2 per (128-row tile, query head) (D 64 uses one
  // per 128-row query tile of them), then with GQA one head-sum counter per (128-key tile, KV
  // head): zeroed by the caller's tile_plan_kernel. grid = tiles × Hq / ka.hpb.
  launch_pdl(attn_bwd_sm90<D>, grid, kBwdThreads, kSmem, st, "attention_bwd", tq, tdo, ka,
             static_cast<const bf16*>(q), static_cast<const bf16*>(k), static_cast<const bf16*>(v),
             static_cast<const bf16*>(dout), lse2, Di, pk, pv, static_cast<bf16*>(dk),
             static_cast<bf16*>(dv), dqa, sem);
  const int64_t n4 = ka.T * ka.Hq * D / 4;
  const unsigned g = static_cast<unsigned>(std::min<int64_t>((n4 + 255) / 256, 65536));
  launch_pdl(attn_dq_convert_kernel<D>, g, 256, 0, st, "attention_bwd", dqa, static_cast<bf16*>(dq),
             ka.T, ka.Hq, ka.scale);
}

}  // namespace

void sm90_bwd(const KArgs& ka, unsigned grid, const float* lse2, const float* Di, float* pk,
              float* pv, float* dqa, int* sem, void* dq, void* dk, void* dv, const void* dout,
              const void* q, const void* k, const void* v, cudaStream_t st) {
  if (ka.D == 64) {
    bwd_fused<64>(ka, grid, lse2, Di, pk, pv, dqa, sem, dq, dk, dv, dout, q, k, v, st);
  } else {
    bwd_fused<128>(ka, grid, lse2, Di, pk, pv, dqa, sem, dq, dk, dv, dout, q, k, v, st);
  }
}

void sm90_fwd(const KArgs& ka, unsigned grid, void* out, float* lse, const void* q, const void* k,
              const void* v, cudaStream_t st) {
  if (ka.D == 64) {
    fwd<64>(ka, grid, out, lse, q, k, v, st);
  } else {
    fwd<128>(ka, grid, out, lse, q, k, v, st);
  }
}

}  // namespace zt::cuda::attn
