#include "backend/cuda/cuda_check.h"

#include "core/error.h"

namespace zt::cuda {

void throw_cuda_error(cudaError_t err, const char* op) {
  fail("CUDA error in {}: {}: {}", op, cudaGetErrorName(err), cudaGetErrorString(err));
}

void throw_cublas_error(cublasStatus_t st, const char* op) {
  fail("cuBLAS error in {}: {} ({})", op, cublasLtGetStatusName(st), static_cast<int>(st));
}

}  // namespace zt::cuda
