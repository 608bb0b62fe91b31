// CpuOps embedding lookup and its gradient (backend/cuda/cuda_embedding.cu), with the Gemma
// embedding scale. See cpu_ops.h.
#include <algorithm>
#include <cstring>

#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_ops.h"
#include "core/tensor.h"

namespace zt {

using namespace cpu;

namespace {

// Throws zt::Error naming `op` and the first token id of ids[0, T) outside [0, V).
void check_ids_in_vocab(const char* op, const int32_t* id, int64_t T, int64_t V) {
  for (int64_t t = 0; t < T; ++t)
    if (id[t] < 0 || id[t] >= V)
      fail("{}: token id {} at position {} is outside the vocabulary [0, {})", op, id[t], t, V);
}

}  // namespace

void CpuOps::embedding_fwd(const Tensor& out, const Tensor& table, const Tensor& ids, Stream,
                           float scale) {
  const opcheck::EmbeddingDims d = opcheck::check_embedding_fwd(out, table, ids, Device::kCPU);
  const int64_t V = d.V, H = d.H, T = d.T;
  const int32_t* id = ids.as<int32_t>();
  check_ids_in_vocab("embedding_fwd", id, T, V);
  if (scale == 1.0f) {  // a row copy: the bytes of the table
    const size_t row_bytes = static_cast<size_t>(H) * dtype_size(table.dtype);
    const char* src = static_cast<const char*>(table.data);
    char* dst = static_cast<char*>(out.data);
#pragma omp parallel for schedule(static) if (T * H >= kParallelWork)
    for (int64_t t = 0; t < T; ++t)
      std::memcpy(dst + t * row_bytes, src + id[t] * row_bytes, row_bytes);
    return;
  }
  // out = to_dtype(table·scale): the product in fp32, rounded once to the table's dtype.
  dispatch_float(table.dtype, "embedding_fwd", "table", [&](auto tag) {
    using T_ = decltype(tag);
    const T_* src = table.as<T_>();
    T_* dst = out.as<T_>();
#pragma omp parallel for schedule(static) if (T * H >= kParallelWork)
    for (int64_t t = 0; t < T; ++t) {
      const T_* row = src + id[t] * H;
      T_* orow = dst + t * H;
      for (int64_t j = 0; j < H; ++j) st(orow, j, ld(row, j) * scale);
    }
  });
}

void CpuOps::embedding_bwd(const Tensor& dtable, const Tensor& dout, const Tensor& ids, float beta,
                           const Tensor&, Stream, float scale) {
  const opcheck::EmbeddingDims d = opcheck::check_embedding_bwd(dtable, dout, ids, Device::kCPU);
  const int64_t V = d.V, H = d.H, T = d.T;
  const int32_t* id = ids.as<int32_t>();
  check_ids_in_vocab("embedding_bwd", id, T, V);
  float* dt = dtable.as<float>();
  if (beta == 0.0f) {
    zero(dtable, {});
  } else if (beta != 1.0f) {
    const int64_t n = V * H;
#pragma omp parallel for schedule(static) if (n >= kParallelWork)
    for (int64_t i = 0; i < n; ++i) dt[i] *= beta;
  }
  // Each thread owns a block of columns and adds the rows in token order: no two threads touch
  // the same element, and every element sees the same addition order for any thread count. Each
  // added term is the fp32 product scale·dout (exact for scale 1).
  constexpr int64_t kCols = 64;
  const int64_t nblk = (H + kCols - 1) / kCols;
  dispatch_float(dout.dtype, "embedding_bwd", "dout", [&](auto tag) {
    using T_ = decltype(tag);
    const T_* g = dout.as<T_>();
#pragma omp parallel for schedule(static) if (T * H >= kParallelWork)
    for (int64_t b = 0; b < nblk; ++b) {
      const int64_t j0 = b * kCols, j1 = std::min(H, j0 + kCols);
      for (int64_t t = 0; t < T; ++t) {
        float* row = dt + id[t] * H;
        const T_* grow = g + t * H;
        for (int64_t j = j0; j < j1; ++j) row[j] += scale * ld(grow, j);
      }
    }
  });
}

}  // namespace zt
