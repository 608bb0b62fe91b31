#include "optim/adamw_device.h"

namespace zt::optim {

namespace {
void adamw_cpu_on_stream(const AdamWStep& s, float* p, float* m, float* v, const float* g, size_t n,
                         uint16_t* p_bf16, void*) {
  adamw_cpu(s, p, m, v, g, n, p_bf16);
}
void adamw_split_cpu_on_stream(const AdamWStep& s, uint16_t* hi, uint16_t* lo, float* m, float* v,
                               const float* g, size_t n, void*) {
  adamw_split_cpu(s, hi, lo, m, v, g, n);
}
}  // namespace

AdamWKernel adamw_kernel(Device device) {
  return device == Device::kCUDA ? &adamw_cuda : &adamw_cpu_on_stream;
}

AdamWSplitKernel adamw_split_kernel(Device device) {
  return device == Device::kCUDA ? &adamw_split_cuda : &adamw_split_cpu_on_stream;
}

}  // namespace zt::optim
