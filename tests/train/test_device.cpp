// compute.backend resolution (train/device.h): auto falls back to the CPU without a GPU, cuda
// without a GPU (or without the CUDA backend in the build) is a clear error, anything else is
// refused naming the allowed values. On a GPU machine the cuda branch is exercised by
// scripts/gpu_check.sh instead.
#include <gtest/gtest.h>

#include "core/zt_test_util.h"
#include "train/device.h"
#if defined(ZT_HAVE_CUDA)
#include "backend/cuda/cuda_ops.h"
#endif

namespace zt::train {
namespace {

bool gpu_visible() {
#if defined(ZT_HAVE_CUDA)
  return cuda_device_count() > 0;
#else
  return false;
#endif
}

TEST(Device, BackendResolution) {
  EXPECT_EQ(resolve_backend(BackendChoice::kCpu), Backend::kCpu);
  EXPECT_EQ(resolve_backend(BackendChoice::kAuto), gpu_visible() ? Backend::kCuda : Backend::kCpu);
  // Any other value never gets here: the config schema refuses it with these names
  // (tests/cli/test_config_schema.cpp: "compute.backend: 'tpu' is not valid (expected one of: auto,
  // cpu, cuda)").
  EXPECT_EQ(enum_name_list<BackendChoice>(),
            (std::vector<std::string_view>{"auto", "cpu", "cuda"}));
  EXPECT_EQ(name_of(Backend::kCuda), "cuda");
}

TEST(Device, CudaWithoutAGpuIsAClearError) {
  if (gpu_visible()) GTEST_SKIP() << "a GPU is visible";
#if defined(ZT_HAVE_CUDA)
  testing::expect_error(
      [] { resolve_backend(BackendChoice::kCuda); },
      {"compute.backend: cuda", "no CUDA GPU is visible", "compute.backend: cpu"});
#else
  testing::expect_error([] { resolve_backend(BackendChoice::kCuda); },
                        {"compute.backend: cuda", "built without the CUDA backend"});
#endif
}

TEST(Device, CpuContextUsesHostMemory) {
  const DeviceContext d = make_device(Backend::kCpu, 0, 1);
  EXPECT_EQ(d.ops->device(), Device::kCPU);
  EXPECT_EQ(d.device_memory->device(), Device::kCPU);
  EXPECT_EQ(d.device_index, -1);
  EXPECT_EQ(d.device_bytes_in_use(), 0u);
}

}  // namespace
}  // namespace zt::train
