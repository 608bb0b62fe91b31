// The device a rank trains on (issue 8 "Device selection"): the Ops implementation, where the
// model's pools live, and where offloaded optimizer state lives.
//   compute.backend: cpu   → CpuOps, host memory for everything.
//   compute.backend: cuda  → CudaOps on GPU `local_rank` (LOCAL_RANK), device memory for the model and
//                            ZeRO pools, pinned host memory for offloaded optimizer state.
//   compute.backend: auto  → cuda when this build has the CUDA backend and a GPU is visible, else cpu.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "backend/ops.h"
#include "core/arena.h"
#include "core/enum_names.h"
#include "dist/comm.h"
#include "dist/comm_tcp.h"
#include "io/model_config.h"

namespace zt::train {

// The backend a rank trains on.
enum class Backend { kCpu, kCuda };
inline constexpr EnumName<Backend> kBackendNames[] = {{Backend::kCpu, "cpu"},
                                                      {Backend::kCuda, "cuda"}};
constexpr std::span<const EnumName<Backend>> enum_names(Backend) { return kBackendNames; }

// The values of compute.backend: a backend, or kAuto.
enum class BackendChoice { kAuto, kCpu, kCuda };
inline constexpr EnumName<BackendChoice> kBackendChoiceNames[] = {
    {BackendChoice::kAuto, "auto"}, {BackendChoice::kCpu, "cpu"}, {BackendChoice::kCuda, "cuda"}};
constexpr std::span<const EnumName<BackendChoice>> enum_names(BackendChoice) {
  return kBackendChoiceNames;
}

// kCpu or kCuda from compute.backend. Throws zt::Error for kCuda when this build has no CUDA
// backend or no GPU is visible ("compute.backend: cuda but …").
Backend resolve_backend(BackendChoice requested);

// A MemoryResource that forwards to another and counts what it hands out: the bytes allocated
// now and their maximum since construction — the pools' analog of torch.cuda.max_memory_allocated
// (the arenas only: no CUDA context, cuBLAS / NCCL buffers or allocator slack). Not thread-safe.
class CountingMemory final : public MemoryResource {
 public:
  explicit CountingMemory(std::unique_ptr<MemoryResource> inner) : inner_(std::move(inner)) {}
  void* allocate(size_t bytes, size_t alignment) override;
  void deallocate(void* p, size_t bytes) override;
  Device device() const override { return inner_->device(); }
  std::string name() const override { return inner_->name(); }
  MemoryResource& inner() const { return *inner_; }
  size_t allocated_bytes() const { return allocated_; }
  size_t max_allocated_bytes() const { return max_allocated_; }

 private:
  std::unique_ptr<MemoryResource> inner_;
  size_t allocated_ = 0, max_allocated_ = 0;
};

struct DeviceContext {
  std::unique_ptr<Ops> ops;
  std::unique_ptr<CountingMemory> device_memory;  // model + ZeRO device pools
  std::unique_ptr<MemoryResource> host_memory;    // offloaded optimizer state (pinned on CUDA)
  int device_index = -1;                          // CUDA device, -1 on the CPU
  // "cuda:0 NVIDIA H200 (…)" / "cpu (8 threads, OpenBLAS)" for the start-up log.
  std::string describe() const { return ops->name(); }
  // Device bytes in use now on this GPU (all pools are allocated before step 1, so after start-up
  // this is the run's peak; cuBLAS/NCCL internals included); 0 on the CPU.
  size_t device_bytes_in_use() const;
  // Bytes of the device pools (every Arena on device_memory) at their peak so far.
  size_t device_max_allocated() const { return device_memory->max_allocated_bytes(); }
};

// Builds the context for a resolved backend. On CUDA the GPU is
// local_rank % (visible GPUs); more local ranks than GPUs is an error naming both counts.
// ce_budget_bytes: the fused cross-entropy's chunk budget (Cpu/CudaOpsOptions::ce_budget_bytes).
// Throws zt::Error when the device cannot be opened.
DeviceContext make_device(Backend backend, int local_rank, int local_world_size,
                          size_t ce_budget_bytes = kCeBudgetBytes);

// The Comm the ZeRO engine uses on `backend`: `host` itself on the CPU; on CUDA the NCCL device
// Comm over it (dist::make_device_comm; NCCL for several ranks, device copies alone) with its
// reduce-scatter scratch sized for one bucket of `cfg` at this world size: W × C elements, C =
// zero::GradReducer::chunk_elems (the largest decoder layer's group shard; larger groups are
// reduced C columns at a time); options: the job's (its timeout_s bounds every device collective;
// dist::read_launch_env). Throws what make_device_comm throws.
std::unique_ptr<dist::Comm> make_trainer_comm(std::unique_ptr<dist::Comm> host, Backend backend,
                                              const ModelConfig& cfg,
                                              const dist::CommOptions& options = {});

}  // namespace zt::train
