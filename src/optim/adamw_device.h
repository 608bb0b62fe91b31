// The AdamW over one device's memory, chosen once from the device (the ZeRO engine's shard
// optimizer holds the pointer; no `if` on the device at each update).
#pragma once

#include "core/tensor.h"
#include "optim/adamw.h"

namespace zt::optim {

// adamw_cpu's arguments plus the stream (a cudaStream_t; ignored on the CPU). p, m, v, g, p_bf16
// are pointers into `device`'s memory.
using AdamWKernel = void (*)(const AdamWStep& s, float* p, float* m, float* v, const float* g,
                             size_t n, uint16_t* p_bf16, void* stream);

// adamw_split_cpu's arguments plus the stream (ignored on the CPU): the split-master update.
using AdamWSplitKernel = void (*)(const AdamWStep& s, uint16_t* hi, uint16_t* lo, float* m,
                                  float* v, const float* g, size_t n, void* stream);

// adamw_cuda for Device::kCUDA, adamw_cpu (stream ignored) for Device::kCPU: the same per-element
// arithmetic, so the choice changes no bit.
AdamWKernel adamw_kernel(Device device);
// adamw_split_cuda / adamw_split_cpu, likewise.
AdamWSplitKernel adamw_split_kernel(Device device);

}  // namespace zt::optim
