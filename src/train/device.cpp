#include "train/device.h"

#include <algorithm>
#include <cstdlib>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"
#include "dist/bootstrap.h"
#include "param/param_layout.h"
#include "zero/grad_reducer.h"
#include "zero/shard_layout.h"
#if defined(ZT_HAVE_CUDA)
#include "backend/cuda/cuda_ops.h"
#endif

namespace zt::train {

namespace {
int visible_gpus() {
#if defined(ZT_HAVE_CUDA)
  return cuda_device_count();
#else
  return 0;
#endif
}
}  // namespace

Backend resolve_backend(BackendChoice requested) {
  switch (requested) {
    case BackendChoice::kCpu:
      return Backend::kCpu;
    case BackendChoice::kAuto:
      return visible_gpus() > 0 ? Backend::kCuda : Backend::kCpu;
    case BackendChoice::kCuda:
#if !defined(ZT_HAVE_CUDA)
      fail(
          "compute.backend: cuda, but this zerotune was built without the CUDA backend (no nvcc at "
          "build time); rebuild on a machine with the CUDA toolkit or use compute.backend: cpu");
#else
      if (visible_gpus() == 0)
        fail(
            "compute.backend: cuda, but no CUDA GPU is visible (cudaGetDeviceCount found none; "
            "check "
            "the driver and CUDA_VISIBLE_DEVICES) — use compute.backend: cpu or auto");
      return Backend::kCuda;
#endif
  }
  fail("compute.backend: unknown value {}", static_cast<int>(requested));
}

void* CountingMemory::allocate(size_t bytes, size_t alignment) {
  void* p = inner_->allocate(bytes, alignment);
  if (p != nullptr) {
    allocated_ += bytes;
    max_allocated_ = std::max(max_allocated_, allocated_);
  }
  return p;
}

void CountingMemory::deallocate(void* p, size_t bytes) {
  inner_->deallocate(p, bytes);
  if (p != nullptr) allocated_ -= std::min(allocated_, bytes);
}

size_t DeviceContext::device_bytes_in_use() const {
#if defined(ZT_HAVE_CUDA)
  if (auto* m = dynamic_cast<CudaDeviceMemory*>(&device_memory->inner()))
    return m->total_bytes() - m->free_bytes();
#endif
  return 0;
}

DeviceContext make_device(Backend backend, int local_rank, int local_world_size,
                          size_t ce_budget_bytes) {
  DeviceContext d;
  if (backend == Backend::kCpu) {
    CpuOpsOptions o;
    o.ce_budget_bytes = ce_budget_bytes;
    d.ops = std::make_unique<CpuOps>(o);
    d.device_memory = std::make_unique<CountingMemory>(std::make_unique<HostMemory>());
    d.host_memory = std::make_unique<HostMemory>();
    return d;
  }
#if defined(ZT_HAVE_CUDA)
  if (backend == Backend::kCuda) {
    const int n = cuda_device_count();
    if (n == 0) fail("compute.backend: cuda, but no CUDA GPU is visible");
    if (local_world_size > n)
      fail("{} ranks on this host but only {} visible GPU(s): one process per GPU (set "
           "compute.n_gpus / num_processes to at most {}, or use compute.backend: cpu)",
           local_world_size, n, n);
    CudaOpsOptions o;
    o.device = local_rank % n;
    o.ce_budget_bytes = ce_budget_bytes;
    d.device_index = o.device;
    d.ops = std::make_unique<CudaOps>(o);
    d.device_memory =
        std::make_unique<CountingMemory>(std::make_unique<CudaDeviceMemory>(o.device));
    d.host_memory = std::make_unique<CudaPinnedMemory>();
    return d;
  }
#endif
  (void)local_rank;
  (void)local_world_size;
  fail("make_device: backend {} is not in this build", name_of(backend));
}

std::unique_ptr<dist::Comm> make_trainer_comm(std::unique_ptr<dist::Comm> host, Backend backend,
                                              const ModelConfig& cfg, const dist::CommOptions& options) {
  if (backend != Backend::kCuda) return host;
  const int W = host->world_size();
  const zero::ShardLayout layout(ParamLayout(cfg), W);
  const size_t bucket =
      static_cast<size_t>(W) * static_cast<size_t>(zero::GradReducer::chunk_elems(layout));
  const int local = host->local_rank();
  return dist::make_device_comm(std::move(host), local, bucket, options);
}

}  // namespace zt::train
