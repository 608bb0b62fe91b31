// One error path for every CUDA runtime / cuBLAS(Lt) call (CONVENTIONS "CUDA and NCCL code"): a
// failed call throws zt::Error naming the op and the library's own message. Safe to include from
// .cu files (no fmt here; the throwing functions live in cuda_check.cpp).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

namespace zt::cuda {

// Throws zt::Error "CUDA error in <op>: <cudaGetErrorName>: <cudaGetErrorString>".
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* op);
// Throws zt::Error "cuBLAS error in <op>: <status name> (<code>)".
[[noreturn]] void throw_cublas_error(cublasStatus_t st, const char* op);

inline void check(cudaError_t err, const char* op) {
  if (err != cudaSuccess) throw_cuda_error(err, op);
}
inline void check(cublasStatus_t st, const char* op) {
  if (st != CUBLAS_STATUS_SUCCESS) throw_cublas_error(st, op);
}
// After a kernel launch: a launch-configuration error (or an earlier asynchronous fault) throws.
inline void check_launch(const char* op) { check(cudaGetLastError(), op); }

}  // namespace zt::cuda
