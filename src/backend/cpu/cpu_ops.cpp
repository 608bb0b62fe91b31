// CpuOps: construction, name and the memory ops (zero, copies). The ops are in one file per op
// family, named as backend/cuda's: cpu_elementwise.cpp, cpu_embedding.cpp, cpu_rmsnorm.cpp,
// cpu_reduce.cpp, cpu_matmul.cpp, cpu_attention.cpp, cpu_cross_entropy.cpp. See cpu_ops.h.
#include "backend/cpu/cpu_ops.h"

#include <cblas.h>
#include <omp.h>

#include <cstring>

#include "backend/cpu/cpu_common.h"
#include "core/tensor.h"

namespace zt {

using namespace cpu;

CpuOps::CpuOps(CpuOpsOptions options) : opt_(options), threads_(omp_get_max_threads()) {
  if (opt_.ce_chunk_rows < 1 || opt_.attn_block_rows < 1)
    fail("CpuOps: ce_chunk_rows ({}) and attn_block_rows ({}) must be >= 1", opt_.ce_chunk_rows,
         opt_.attn_block_rows);
  // One thread pool: OpenBLAS's own pthreads spinning next to the OpenMP team makes both crawl
  // (measured 4x slower on 2 cores), so every sgemm call is single-threaded and CpuOps splits the
  // work over OpenMP threads itself (gemm() in cpu_matmul.cpp).
  openblas_set_num_threads(1);
}

std::string CpuOps::name() const {
  return fmt::format("cpu ({} OpenMP threads, OpenBLAS)", threads_);
}

void CpuOps::zero(const Tensor& x, Stream) {
  if (x.numel() > 0) std::memset(x.data, 0, x.nbytes());
}

void CpuOps::copy_from_host(const Tensor& dst, const void* src, Stream) {
  if (dst.device != Device::kCPU) fail("copy_from_host: dst is not in host memory");
  if (dst.numel() > 0) std::memcpy(dst.data, src, dst.nbytes());
}

void CpuOps::copy_to_host(void* dst, const Tensor& src, Stream) {
  if (src.device != Device::kCPU) fail("copy_to_host: src is not in host memory");
  if (src.numel() > 0) std::memcpy(dst, src.data, src.nbytes());
}

}  // namespace zt
