// Generic CUDA attention kernels (fp32 CUDA-core arithmetic, any head dim D ≤ 256, f32 or bf16
// storage): used for fp32 models and head dims without a tensor-core kernel (the test models have
// D = 12 and 16). A block of 4 warps owns kGenRows = 16 query rows (forward, dQ) or 16 keys
// (dK/dV); the other side is staged through shared memory 32 rows at a time, lane j of a warp
// owning row j of that tile for the dot products, and each lane owning dims d ≡ lane (mod 32) of
// the accumulators. Every sum runs in index order (dot products over d, rows j of a tile, tiles),
// and the warp reductions are fixed butterflies: results are bitwise repeatable.
//
// Sliding window W (KArgs::window > 0): query r sees keys [first_key(r), r]. The tile loops start
// at the first tile any row of the block sees (forward, dQ) or end after the last query row that
// sees one of the block's keys (dK/dV), and a warp skips a tile that holds none of its row's (or
// key's) visible pairs, so a row costs O(W) instead of O(r); the masked pairs inside a tile are
// excluded from the row's sums (j ranges) exactly as the causal ones. Window 0 runs the causal
// code paths unchanged (first_key = 0, query_end = L).
#include "backend/cuda/cuda_attention_kernels.cuh"

namespace zt::cuda::attn {
namespace {

constexpr int kGenThreads = 128;           // 4 warps
constexpr int kGenPerWarp = kGenRows / 4;  // of which each warp owns 4
constexpr int kGenTile = 32;               // rows of the other side per shared-memory tile
constexpr int kGenSlots = 8;               // accumulator dims per lane: d = lane + 32·slot
static_assert(kGenSlots * 32 == kMaxD);

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
  const int kbeg = first_key(a, r0) / kGenTile * kGenTile;  // the first tile a row of ours sees
  for (int c0 = kbeg; c0 < kend; c0 += kGenTile) {
    __syncthreads();  // the previous tile is consumed
    const int64_t koff = (w.s0 + c0) * ldk + w.kvh * D;
    gen_load_rows(Ks, kp, k + koff, ldk, kGenTile, w.L - c0, D);
    gen_load_rows(Vs, D, v + koff, ldk, kGenTile, w.L - c0, D);
    __syncthreads();
#pragma unroll
    for (int rr = 0; rr < kGenPerWarp; ++rr) {
      const int r = r0 + warp * kGenPerWarp + rr;  // sequence-relative row (warp-uniform)
      const int lo = first_key(a, r);              // the row sees keys [lo, r]
      if (r >= w.L || r < c0 || c0 + kGenTile <= lo) continue;
      const float* qr = Qs + (warp * kGenPerWarp + rr) * D;
      const float* kr = Ks + lane * kp;
      float s = 0.0f;
      for (int d = 0; d < D; ++d) s += qr[d] * kr[d];
      s = c0 + lane <= r && c0 + lane >= lo ? s * a.scale : -INFINITY;
      // Every tile a row gets here holds one of its keys (c0 ≤ r, c0 + 32 > lo), so m is finite
      // from its first tile on.
      const float mnew = fmaxf(m[rr], warp_max(s));
      const float alpha = expf(m[rr] - mnew);
      const float p = expf(s - mnew);
      l[rr] = l[rr] * alpha + warp_sum(p);
      m[rr] = mnew;
      const int jlo = max(0, lo - c0), jn = min(kGenTile, r - c0 + 1);
#pragma unroll
      for (int sl = 0; sl < kGenSlots; ++sl) o[rr][sl] *= alpha;
      gen_add_rows(o[rr], p, jlo, jn, Vs, D, D, lane);
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
  const int kbeg = first_key(a, r0) / kGenTile * kGenTile;
  for (int c0 = kbeg; c0 < kend; c0 += kGenTile) {
    __syncthreads();
    const int64_t koff = (w.s0 + c0) * ldk + w.kvh * D;
    gen_load_rows(Ks, kp, k + koff, ldk, kGenTile, w.L - c0, D);
    gen_load_rows(Vs, kp, v + koff, ldk, kGenTile, w.L - c0, D);
    __syncthreads();
#pragma unroll
    for (int rr = 0; rr < kGenPerWarp; ++rr) {
      const int r = r0 + warp * kGenPerWarp + rr;
      const int lo = first_key(a, r);
      if (r >= w.L || r < c0 || c0 + kGenTile <= lo) continue;
      const int ro = (warp * kGenPerWarp + rr) * D;
      const float ds = gen_p_ds(Qs + ro, Ks + lane * kp, dOs + ro, Vs + lane * kp, D, a.scale,
                                lr[rr], dr[rr], c0 + lane <= r && c0 + lane >= lo)
                           .y;
      const int jlo = max(0, lo - c0), jn = min(kGenTile, r - c0 + 1);
      gen_add_rows(acc[rr], ds, jlo, jn, Ks, kp, D, lane);
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
// h; query tiles of 32 rows from the block's first key to the sequence end (with a window: to the
// last row that sees one of the block's keys), in order. Lane i
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
  const int qend = query_end(a, c0 + kGenRows - 1, w.L);
  for (int qt = c0; qt < qend; qt += kGenTile) {
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
#pragma unroll
    for (int kk = 0; kk < kGenPerWarp; ++kk) {
      const int key = c0 + warp * kGenPerWarp + kk;  // warp-uniform
      const int qhi = query_end(a, key, w.L);        // rows [key, qhi) see this key
      if (key >= w.L || qt >= qhi) continue;
      const int ko = (warp * kGenPerWarp + kk) * D;
      const float2 pds = gen_p_ds(Qs + lane * kp, Ks + ko, dOs + lane * kp, Vs + ko, D, a.scale,
                                  ls[lane], ds_[lane], row >= key && row < qhi);
      const int jlo = max(0, key - qt), jhi = min(kGenTile, qhi - qt);
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

template <class T>
void fwd(const KArgs& ka, unsigned grid, void* out, float* lse, const void* q, const void* k,
         const void* v, cudaStream_t st) {
  launch(attn_fwd_generic<T>, grid, kGenThreads, gen_fwd_smem(ka.D), st, "attention_fwd", ka,
         static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
         static_cast<T*>(out), lse);
}

template <class T>
void bwd(const KArgs& ka, unsigned grid, const float* lse, const float* Di, float* pk, float* pv,
         void* dq, void* dk, void* dv, const void* dout, const void* q, const void* k,
         const void* v, cudaStream_t st) {
  const T *tq = static_cast<const T*>(q), *tk = static_cast<const T*>(k),
          *tv = static_cast<const T*>(v), *tg = static_cast<const T*>(dout);
  launch(attn_dkdv_generic<T>, grid, kGenThreads, gen_dkdv_smem(ka.D), st, "attention_bwd", ka, tq,
         tk, tv, tg, lse, Di, pk, pv, static_cast<T*>(dk), static_cast<T*>(dv));
  launch(attn_dq_generic<T>, grid, kGenThreads, gen_dq_smem(ka.D), st, "attention_bwd", ka, tq, tk,
         tv, tg, lse, Di, static_cast<T*>(dq));
}

}  // namespace

void generic_fwd(const KArgs& ka, unsigned grid, bool is_bf16, void* out, float* lse, const void* q,
                 const void* k, const void* v, cudaStream_t st) {
  if (is_bf16) {
    fwd<bf16>(ka, grid, out, lse, q, k, v, st);
  } else {
    fwd<float>(ka, grid, out, lse, q, k, v, st);
  }
}

void generic_bwd(const KArgs& ka, unsigned grid, bool is_bf16, const float* lse, const float* Di,
                 float* pk, float* pv, void* dq, void* dk, void* dv, const void* dout,
                 const void* q, const void* k, const void* v, cudaStream_t st) {
  if (is_bf16) {
    bwd<bf16>(ka, grid, lse, Di, pk, pv, dq, dk, dv, dout, q, k, v, st);
  } else {
    bwd<float>(ka, grid, lse, Di, pk, pv, dq, dk, dv, dout, q, k, v, st);
  }
}

}  // namespace zt::cuda::attn
