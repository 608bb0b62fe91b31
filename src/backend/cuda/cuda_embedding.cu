// Embedding forward (row gather, optionally scaled: Gemma's √hidden) and backward (scatter-add
// without atomics) on CUDA.
// CPU reference: CpuOps::embedding_fwd / embedding_bwd (backend/cpu/cpu_embedding.cpp).
//
// Backward, deterministic and bitwise equal to the CPU in fp32: the CPU adds dout rows into
// dtable[id] in token order. Here the (id, position) pairs are sorted by id with cub's LSD radix
// sort, which is stable, so within one id the positions stay in increasing (token) order; then one
// block per (run of equal ids, column slice) adds that run's rows in that order into registers
// initialised from dtable, and stores once. Every element therefore sees exactly the CPU's sequence
// of fp32 additions; no two blocks write the same element; no atomics.
#include <cub/device/device_radix_sort.cuh>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_kernels.h"

namespace zt::cuda {
namespace {

constexpr int kRowThreads = 128;  // threads per block of the row kernels
constexpr int kAccUnroll = 8;     // rows of one run loaded before they are added (latency hiding)

// out[t, :] = table[ids[t], :], rows moved as `units` elements of U (16, 4 or 2 bytes).
// Grid: one block per token t (gridDim.x = T), kRowThreads threads striding over the row's units:
// coalesced reads of one table row and writes of one out row. An id outside [0, V) writes zeros
// (the op never reads outside the table) and is recorded for synchronize().
template <class U>
__global__ void __launch_bounds__(kRowThreads)
    embedding_fwd_kernel(U* out, const U* table, const int32_t* ids, int64_t V, int64_t units,
                         int32_t* status) {
  const int64_t t = blockIdx.x;
  const int32_t id = ids[t];
  U* dst = out + t * units;
  if (id < 0 || id >= V) {
    if (threadIdx.x == 0) record_bad_id(status, StatusOp::kEmbeddingFwd, t, id, V);
    for (int64_t j = threadIdx.x; j < units; j += kRowThreads) dst[j] = U{};
    return;
  }
  const U* src = table + static_cast<int64_t>(id) * units;
  for (int64_t j = threadIdx.x; j < units; j += kRowThreads) dst[j] = src[j];
}

// out[t, :] = to_dtype(table[ids[t], :] · scale) — the embedding scale of the Gemma families.
// Grid: one block per token t, kRowThreads threads striding over the row by 8-element 16-byte
// vectors (`vec`: H % 8 == 0, aligned) or single elements; one read of the table row, one write.
// Elementwise, so deterministic. An id outside [0, V) writes zeros and is recorded.
template <class T>
__global__ void __launch_bounds__(kRowThreads)
    embedding_fwd_scaled_kernel(T* out, const T* table, const int32_t* ids, int64_t V, int64_t H,
                                float scale, bool vec, int32_t* status) {
  const int64_t t = blockIdx.x;
  const int32_t id = ids[t];
  T* dst = out + t * H;
  if (id < 0 || id >= V) {
    if (threadIdx.x == 0) record_bad_id(status, StatusOp::kEmbeddingFwd, t, id, V);
    for (int64_t j = threadIdx.x; j < H; j += kRowThreads) st(dst, j, 0.0f);
    return;
  }
  const T* src = table + static_cast<int64_t>(id) * H;
  if (vec) {
    for (int64_t j = threadIdx.x * int64_t{kVec}; j < H; j += kRowThreads * kVec) {
      float v[kVec];
      ld8(src, j, v);
#pragma unroll
      for (int e = 0; e < kVec; ++e) v[e] *= scale;
      st8(dst, j, v);
    }
  } else {
    for (int64_t j = threadIdx.x; j < H; j += kRowThreads) st(dst, j, ld(src, j) * scale);
  }
}

// keys[t] = ids[t] (or V for an id outside [0, V), recorded), vals[t] = t. One thread per token.
__global__ void __launch_bounds__(256)
    embedding_keys_kernel(uint32_t* keys, int32_t* vals, const int32_t* ids, int64_t T, int64_t V,
                          int32_t* status) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * 256 + threadIdx.x;
  if (t >= T) return;
  const int32_t id = ids[t];
  const bool ok = id >= 0 && id < V;
  if (!ok) record_bad_id(status, StatusOp::kEmbeddingBwd, t, id, V);
  keys[t] = ok ? static_cast<uint32_t>(id) : static_cast<uint32_t>(V);
  vals[t] = static_cast<int32_t>(t);
}

// VEC consecutive elements (VEC = 4: one 16-byte fp32 / 8-byte bf16 access; VEC = 1: scalar).
template <int VEC>
__device__ __forceinline__ void ldv(const float* p, int64_t i, float (&v)[VEC]) {
  if constexpr (VEC == 4) {
    const float4 a = *reinterpret_cast<const float4*>(p + i);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
  } else {
    v[0] = p[i];
  }
}
template <int VEC>
__device__ __forceinline__ void ldv(const bf16s* p, int64_t i, float (&v)[VEC]) {
  if constexpr (VEC == 4) {
    const uint2 a = *reinterpret_cast<const uint2*>(p + i);
    v[0] = __uint_as_float(a.x << 16), v[1] = __uint_as_float(a.x & 0xffff0000u);
    v[2] = __uint_as_float(a.y << 16), v[3] = __uint_as_float(a.y & 0xffff0000u);
  } else {
    v[0] = ld(p, i);
  }
}

// dtable[v, j..j+VEC) += scale · dout rows (fp32 products) of the run of equal sorted keys starting
// at sorted index i. Grid: x = sorted index i (T blocks; only the first index of each run of equal
// keys works, the others return at once), y = column slice of kRowThreads*VEC columns; one thread
// per VEC columns. A working block reads its dtable slice once, reads each of its run's dout rows
// once (coalesced across the block; kAccUnroll rows in flight), and writes the slice once. The
// additions into each thread's registers follow the sorted order, which the stable sort made the
// token order.
template <class T, int VEC>
__global__ void __launch_bounds__(kRowThreads)
    embedding_accumulate_kernel(float* dtable, const T* dout, const uint32_t* keys,
                                const int32_t* pos, int64_t nrows, int64_t V, int64_t H,
                                float scale) {
  const int64_t i = blockIdx.x;
  const uint32_t v = keys[i];
  if (v >= V || (i > 0 && keys[i - 1] == v)) return;  // not the head of a run, or a bad id
  const int64_t j = (static_cast<int64_t>(blockIdx.y) * kRowThreads + threadIdx.x) * VEC;
  if (j >= H) return;
  float* out = dtable + static_cast<int64_t>(v) * H + j;
  float acc[VEC];
  ldv<VEC>(out, 0, acc);
  for (int64_t k = i; k < nrows && keys[k] == v; k += kAccUnroll) {
    // Sorted keys: the run is contiguous, so `valid` is a prefix of the kAccUnroll slots.
    int32_t p[kAccUnroll];
#pragma unroll
    for (int u = 0; u < kAccUnroll; ++u)
      p[u] = (k + u < nrows && keys[k + u] == v) ? pos[k + u] : -1;
    float row[kAccUnroll][VEC];
#pragma unroll
    for (int u = 0; u < kAccUnroll; ++u)
      if (p[u] >= 0) ldv<VEC>(dout, static_cast<int64_t>(p[u]) * H + j, row[u]);
#pragma unroll
    for (int u = 0; u < kAccUnroll; ++u)
      if (p[u] >= 0)
#pragma unroll
        for (int e = 0; e < VEC; ++e) acc[e] += scale * row[u][e];
  }
  if constexpr (VEC == 4) {
    *reinterpret_cast<float4*>(out) = make_float4(acc[0], acc[1], acc[2], acc[3]);
  } else {
    out[0] = acc[0];
  }
}

// Workspace regions: keys in, values in, keys out, values out ([T] 4-byte each), then cub's temp
// storage; every region starts at a multiple of 64 bytes.
size_t region(int64_t T) { return (static_cast<size_t>(T) * 4 + 63) & ~size_t{63}; }

size_t sort_temp_bytes(int64_t T, int end_bit) {
  size_t temp = 0;
  check(cub::DeviceRadixSort::SortPairs(
            nullptr, temp, static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr),
            static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
            static_cast<int>(T), 0, end_bit),
        "embedding_workspace_bytes");
  return temp;
}

}  // namespace

void launch_embedding_fwd(void* out, const void* table, DType t, const int32_t* ids, int64_t T,
                          int64_t V, int64_t H, float scale, int32_t* status, cudaStream_t stream) {
  if (T == 0 || H == 0) return;
  if (scale != 1.0f) {
    const bool vec = H % kVec == 0 && aligned16(out) && aligned16(table);
    by_dtype(t, [&](auto tag) {
      using T_ = decltype(tag);
      embedding_fwd_scaled_kernel<T_><<<static_cast<unsigned>(T), kRowThreads, 0, stream>>>(
          static_cast<T_*>(out), static_cast<const T_*>(table), ids, V, H, scale, vec, status);
    });
    check_launch("embedding_fwd");
    return;
  }
  const int64_t row_bytes = H * static_cast<int64_t>(dtype_size(t));
  const auto run = [&](auto unit) {
    using U = decltype(unit);
    embedding_fwd_kernel<U><<<static_cast<unsigned>(T), kRowThreads, 0, stream>>>(
        static_cast<U*>(out), static_cast<const U*>(table), ids, V,
        row_bytes / static_cast<int64_t>(sizeof(U)), status);
  };
  if (row_bytes % 16 == 0 && aligned16(out) && aligned16(table))
    run(uint4{});
  else if (row_bytes % 4 == 0 && (reinterpret_cast<uintptr_t>(out) & 3) == 0 &&
           (reinterpret_cast<uintptr_t>(table) & 3) == 0)
    run(uint32_t{});
  else
    run(uint16_t{});
  check_launch("embedding_fwd");
}

size_t embedding_bwd_workspace_bytes(int64_t T) {
  if (T == 0) return 0;
  // Sized for 32-bit keys: sorting fewer key bits (the vocabulary's) never needs more.
  return 4 * region(T) + sort_temp_bytes(T, 32);
}

void launch_embedding_bwd(float* dtable, const void* dout, DType t, const int32_t* ids, int64_t T,
                          int64_t V, int64_t H, float beta, float scale, void* workspace,
                          size_t workspace_bytes, int32_t* status, cudaStream_t stream) {
  // dtable = beta*dtable first, as the CPU does (beta 0 writes zeros: never 0*NaN).
  if (beta == 0.0f)
    check(cudaMemsetAsync(dtable, 0, static_cast<size_t>(V * H) * sizeof(float), stream),
          "embedding_bwd");
  else if (beta != 1.0f)
    launch_scale(dtable, beta, V * H, stream);
  if (T == 0 || H == 0) return;

  char* ws = static_cast<char*>(workspace);
  auto* keys_in = reinterpret_cast<uint32_t*>(ws);
  auto* vals_in = reinterpret_cast<int32_t*>(ws + region(T));
  auto* keys_out = reinterpret_cast<uint32_t*>(ws + 2 * region(T));
  auto* vals_out = reinterpret_cast<int32_t*>(ws + 3 * region(T));
  void* temp = ws + 4 * region(T);
  size_t temp_bytes = workspace_bytes - 4 * region(T);

  embedding_keys_kernel<<<blocks_for(T, 256), 256, 0, stream>>>(keys_in, vals_in, ids, T, V,
                                                                status);
  check_launch("embedding_bwd");
  int end_bit = 1;  // keys are in [0, V]: sort the bits that can be set
  while (end_bit < 32 && (uint64_t{1} << end_bit) <= static_cast<uint64_t>(V)) ++end_bit;
  check(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, vals_in, vals_out,
                                        static_cast<int>(T), 0, end_bit, stream),
        "embedding_bwd");

  const bool vec = H % 4 == 0 && aligned16(dtable) && aligned16(dout);
  const int vw = vec ? 4 : 1;
  const dim3 grid(static_cast<unsigned>(T),
                  static_cast<unsigned>((H + kRowThreads * vw - 1) / (kRowThreads * vw)));
  by_dtype(t, [&](auto tag) {
    using T_ = decltype(tag);
    if (vec)
      embedding_accumulate_kernel<T_, 4><<<grid, kRowThreads, 0, stream>>>(
          dtable, static_cast<const T_*>(dout), keys_out, vals_out, T, V, H, scale);
    else
      embedding_accumulate_kernel<T_, 1><<<grid, kRowThreads, 0, stream>>>(
          dtable, static_cast<const T_*>(dout), keys_out, vals_out, T, V, H, scale);
  });
  check_launch("embedding_bwd");
}

}  // namespace zt::cuda
