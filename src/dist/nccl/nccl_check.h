// Error path of the device Comm's CUDA runtime and NCCL calls: a failed call throws zt::Error
// naming the op and the library's own message. (The same contract as backend/cuda/cuda_check.h,
// which dist/ may not include: DESIGN §3 lets dist use core only.) Safe to include from .cu files.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

namespace zt::dist::nccl {

// Throws zt::Error "CUDA error in <op>: <cudaGetErrorName>: <cudaGetErrorString>".
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* op);
// Throws zt::Error "NCCL error in <op>: <ncclGetErrorString> (<last error text>)"; `comm` (may be
// null) is asked for its last error message.
[[noreturn]] void throw_nccl_error(ncclResult_t res, const char* op, ncclComm_t comm);

inline void check(cudaError_t err, const char* op) {
  if (err != cudaSuccess) throw_cuda_error(err, op);
}
// ncclInProgress is not an error: a non-blocking communicator is still working on the call (the
// caller waits for it, NcclComm::wait_ready).
inline void check(ncclResult_t res, const char* op, ncclComm_t comm = nullptr) {
  if (res != ncclSuccess && res != ncclInProgress) throw_nccl_error(res, op, comm);
}
// After a kernel launch: a launch-configuration error (or an earlier asynchronous fault) throws.
inline void check_launch(const char* op) { check(cudaGetLastError(), op); }

}  // namespace zt::dist::nccl
