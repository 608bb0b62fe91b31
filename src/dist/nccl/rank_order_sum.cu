// Rank-order sum of the all-to-all's blocks (see rank_order_sum.h).
//
// Mapping: a grid-stride loop; one thread owns V consecutive elements (V = 4 through float4 loads
// when every block start is 16-byte aligned and shard % 4 == 0, else V = 1) and, for each, reads
// the W parts in rank order and writes one result. Traffic: W (+1 with accumulate) reads and one
// write per element — memory bound.
// Determinism: each output element is computed by exactly one thread with a fixed sequence of
// __fadd_rn (no FMA, no atomics, no reduction across threads), so the bits do not depend on the
// launch configuration, on scheduling or on the device — and equal the host fold's.
#include <cstdint>

#include "dist/nccl/nccl_check.h"
#include "dist/nccl/rank_order_sum.h"

namespace zt::dist::nccl {

namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxBlocks = 8192;  // a grid-stride loop covers the rest

struct Parts {
  const float* recv;  // [W][shard] (in units of V-vectors below)
  const float* own;
  int own_rank;
  int world;
  size_t shard;  // elements per block
};

__device__ __forceinline__ float4 add4(float4 a, float4 b) {
  return make_float4(__fadd_rn(a.x, b.x), __fadd_rn(a.y, b.y), __fadd_rn(a.z, b.z),
                     __fadd_rn(a.w, b.w));
}
__device__ __forceinline__ float add4(float a, float b) { return __fadd_rn(a, b); }

// T = float (V = 1) or float4 (V = 4); count = shard / V vectors per block.
template <typename T>
__global__ void rank_order_sum_kernel(T* out, Parts p, size_t count, bool accumulate) {
  const T* own = reinterpret_cast<const T*>(p.own);
  const T* recv = reinterpret_cast<const T*>(p.recv);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    T s = p.own_rank == 0 ? own[i] : recv[i];
    for (int q = 1; q < p.world; ++q) {
      const T v = q == p.own_rank ? own[i] : recv[static_cast<size_t>(q) * count + i];
      s = add4(s, v);
    }
    out[i] = accumulate ? add4(out[i], s) : s;
  }
}

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

template <typename T>
void launch(float* out, const Parts& p, size_t count, bool accumulate, cudaStream_t stream) {
  const size_t want = (count + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(want < kMaxBlocks ? want : kMaxBlocks);
  rank_order_sum_kernel<T>
      <<<blocks, kThreads, 0, stream>>>(reinterpret_cast<T*>(out), p, count, accumulate);
}

}  // namespace

void rank_order_sum(float* out, const float* recv, const float* own, int own_rank, int world,
                    size_t shard, bool accumulate, cudaStream_t stream) {
  if (shard == 0) return;
  const Parts p{recv, own, own_rank, world, shard};
  const bool vec =
      shard % 4 == 0 && aligned16(out) && aligned16(own) && (world == 1 || aligned16(recv));
  if (vec)
    launch<float4>(out, p, shard / 4, accumulate, stream);
  else
    launch<float>(out, p, shard, accumulate, stream);
  check_launch("rank_order_sum");
}

}  // namespace zt::dist::nccl
