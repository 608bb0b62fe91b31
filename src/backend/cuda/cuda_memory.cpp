// Device and pinned-host MemoryResources and the device count (cuda_ops.h).
#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "core/error.h"

namespace zt {

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver / no device: not an error for the caller
    return 0;
  }
  return n;
}

namespace {

// cudaMemGetInfo for `device` (restoring the caller's current device).
void mem_info(int device, size_t* free, size_t* total) {
  int cur = 0;
  cuda::check(cudaGetDevice(&cur), "cudaMemGetInfo");
  cuda::check(cudaSetDevice(device), "cudaMemGetInfo");
  const cudaError_t err = cudaMemGetInfo(free, total);
  (void)cudaSetDevice(cur);
  cuda::check(err, "cudaMemGetInfo");
}

// cudaMalloc / cudaHostAlloc align to at least 256 bytes; the Arena asks for 64.
constexpr size_t kMaxAlignment = 256;

void check_alignment(size_t alignment, const char* what) {
  if (alignment > kMaxAlignment)
    fail("{}: alignment {} bytes requested, at most {} supported", what, alignment, kMaxAlignment);
}

}  // namespace

CudaDeviceMemory::CudaDeviceMemory(int device) : device_(device) {}

void* CudaDeviceMemory::allocate(size_t bytes, size_t alignment) {
  check_alignment(alignment, "CudaDeviceMemory");
  int cur = 0;
  cuda::check(cudaGetDevice(&cur), "cudaMalloc");
  cuda::check(cudaSetDevice(device_), "cudaMalloc");
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  (void)cudaSetDevice(cur);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // out of memory is reported by the Arena, naming the pool
    return nullptr;
  }
  return p;
}

void CudaDeviceMemory::deallocate(void* p, size_t) {
  if (p) (void)cudaFree(p);
}

std::string CudaDeviceMemory::name() const {
  cudaDeviceProp prop{};
  cuda::check(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties");
  return fmt::format("cuda:{} ({}, {} free)", device_, prop.name, format_bytes(free_bytes()));
}

size_t CudaDeviceMemory::free_bytes() const {
  size_t free = 0, total = 0;
  mem_info(device_, &free, &total);
  return free;
}

size_t CudaDeviceMemory::total_bytes() const {
  size_t free = 0, total = 0;
  mem_info(device_, &free, &total);
  return total;
}

void* CudaPinnedMemory::allocate(size_t bytes, size_t alignment) {
  check_alignment(alignment, "CudaPinnedMemory");
  void* p = nullptr;
  if (cudaHostAlloc(&p, bytes, cudaHostAllocDefault) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return p;
}

void CudaPinnedMemory::deallocate(void* p, size_t) {
  if (p) (void)cudaFreeHost(p);
}

}  // namespace zt
