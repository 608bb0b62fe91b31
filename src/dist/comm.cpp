// Comm: argument checks, the rank-order reduction, the small all_reduce, and SingleComm.
#include "dist/comm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "core/error.h"

namespace zt::dist {

namespace {

bool overlaps(const void* a, size_t an, const void* b, size_t bn) {
  const auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return an > 0 && bn > 0 && pa < pb + bn && pb < pa + an;
}

// Element-wise fold of the W gathered [n]-vectors of `all` ([W*n]) into data, rank order.
template <typename T, typename Op>
void fold_gathered(const std::vector<T>& all, int w, size_t n, T* data, Op op) {
  for (size_t i = 0; i < n; ++i) {
    T acc = all[i];
    for (int q = 1; q < w; ++q) acc = op(acc, all[static_cast<size_t>(q) * n + i]);
    data[i] = acc;
  }
}

template <typename T>
T max_nan(T a, T b) {
  if constexpr (std::numeric_limits<T>::has_quiet_NaN) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
  }
  return b > a ? b : a;
}

}  // namespace

void fold_rank_order(const float* const* parts, int count, size_t n, float* out, bool accumulate) {
  if (count <= 0) return;
  if (count == 1) {
    const float* p0 = parts[0];
    if (accumulate) {
      for (size_t i = 0; i < n; ++i) out[i] = out[i] + p0[i];
    } else if (out != p0) {
      std::memcpy(out, p0, n * sizeof(float));
    }
    return;
  }
  // Blocks keep the running sum in cache; within a block the rank order is strict.
  constexpr size_t kBlock = 2048;
  float acc[kBlock];
  for (size_t lo = 0; lo < n; lo += kBlock) {
    const size_t len = std::min(kBlock, n - lo);
    const float* p0 = parts[0] + lo;
    const float* p1 = parts[1] + lo;
    for (size_t i = 0; i < len; ++i) acc[i] = p0[i] + p1[i];
    for (int q = 2; q < count; ++q) {
      const float* pq = parts[q] + lo;
      for (size_t i = 0; i < len; ++i) acc[i] = acc[i] + pq[i];
    }
    float* o = out + lo;
    if (accumulate) {
      for (size_t i = 0; i < len; ++i) o[i] = o[i] + acc[i];
    } else {
      std::memcpy(o, acc, len * sizeof(float));
    }
  }
}

void Comm::set_identity(int rank, int world_size, int local_rank, int local_world_size) {
  if (world_size < 1 || rank < 0 || rank >= world_size)
    fail("communicator: rank {} of world size {} (expected 0 <= rank < world size)", rank,
         world_size);
  if (local_world_size < 1 || local_rank < 0 || local_rank >= local_world_size)
    fail(
        "communicator: local rank {} of local world size {} (expected 0 <= local rank < local "
        "world size)",
        local_rank, local_world_size);
  rank_ = rank;
  world_size_ = world_size;
  local_rank_ = local_rank;
  local_world_size_ = local_world_size;
}

void Comm::reduce_scatter_sum(const float* send, float* out, size_t n, bool accumulate,
                              Stream stream) {
  const auto w = static_cast<size_t>(world_size_);
  if (n % w != 0)
    fail("reduce_scatter: {} elements is not a multiple of the world size {}", n, world_size_);
  if (overlaps(send, n * sizeof(float), out, n / w * sizeof(float)))
    fail("reduce_scatter: the output shard overlaps the send buffer (not supported)");
  if (n == 0) return;
  do_reduce_scatter_sum(send, out, n, accumulate, stream);
}

void Comm::all_gather_bytes(const void* send, void* out, size_t bytes, Stream stream) {
  const auto w = static_cast<size_t>(world_size_);
  const void* mine = static_cast<const char*>(out) + static_cast<size_t>(rank_) * bytes;
  if (send != mine && overlaps(send, bytes, out, w * bytes))
    fail("all_gather: the send buffer overlaps the output but is not this rank's block of it");
  if (bytes == 0) return;
  do_all_gather_bytes(send, out, bytes, stream);
}

void Comm::all_gather(const float* send, float* out, size_t count, Stream stream) {
  all_gather_bytes(send, out, count * sizeof(float), stream);
}

void Comm::all_gather_bf16(const uint16_t* send, uint16_t* out, size_t count, Stream stream) {
  all_gather_bytes(send, out, count * sizeof(uint16_t), stream);
}

void Comm::broadcast(void* data, size_t bytes, int root, Stream stream) {
  if (root < 0 || root >= world_size_)
    fail("broadcast: root rank {} (expected 0 <= root < world size {})", root, world_size_);
  if (bytes == 0 || world_size_ == 1) return;
  do_broadcast(data, bytes, root, stream);
}

void Comm::barrier() {
  if (world_size_ > 1) do_barrier();
}

namespace {

template <typename T>
void small_all_reduce(Comm& comm, T* data, size_t n, ReduceOp op) {
  if (n == 0 || comm.world_size() == 1) return;
  const auto w = static_cast<size_t>(comm.world_size());
  std::vector<T> all(w * n);
  comm.all_gather_bytes(data, all.data(), n * sizeof(T));
  if (op == ReduceOp::kSum) {
    fold_gathered(all, comm.world_size(), n, data, [](T a, T b) { return a + b; });
  } else {
    fold_gathered(all, comm.world_size(), n, data, [](T a, T b) { return max_nan(a, b); });
  }
}

}  // namespace

void Comm::all_reduce(double* data, size_t n, ReduceOp op) { small_all_reduce(*this, data, n, op); }
void Comm::all_reduce(float* data, size_t n, ReduceOp op) { small_all_reduce(*this, data, n, op); }
void Comm::all_reduce(int64_t* data, size_t n, ReduceOp op) {
  small_all_reduce(*this, data, n, op);
}

std::vector<double> Comm::all_gather_f64(double x) {
  std::vector<double> all(static_cast<size_t>(world_size_));
  all_gather_bytes(&x, all.data(), sizeof(double));
  return all;
}

double Comm::sum_in_rank_order(double x) {
  const std::vector<double> all = all_gather_f64(x);
  double s = all[0];
  for (size_t q = 1; q < all.size(); ++q) s += all[q];
  return s;
}

void SingleComm::do_reduce_scatter_sum(const float* send, float* out, size_t n, bool accumulate,
                                       Stream) {
  fold_rank_order(&send, 1, n, out, accumulate);
}

void SingleComm::do_all_gather_bytes(const void* send, void* out, size_t bytes, Stream) {
  if (send != out) std::memcpy(out, send, bytes);
}

}  // namespace zt::dist
