#include "dist/nccl/nccl_check.h"

#include <string>

#include "core/error.h"

namespace zt::dist::nccl {

void throw_cuda_error(cudaError_t err, const char* op) {
  fail("CUDA error in {}: {}: {}", op, cudaGetErrorName(err), cudaGetErrorString(err));
}

void throw_nccl_error(ncclResult_t res, const char* op, ncclComm_t comm) {
  const char* last = ncclGetLastError(comm);
  const std::string detail = last && *last ? std::string(" (") + last + ")" : std::string();
  fail("NCCL error in {}: {}{}", op, ncclGetErrorString(res), detail);
}

}  // namespace zt::dist::nccl
