// Device memory for the Comm self-test (see device_selftest.h).
#include "dist/nccl/device_selftest.h"

#include <cuda_runtime.h>

#include <exception>
#include <vector>

#include "dist/nccl/nccl_check.h"

namespace zt::dist {

namespace {

using nccl::check;

class DeviceMemory final : public SelftestMemory {
 public:
  explicit DeviceMemory(Comm& comm) : comm_(comm) {
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
          "cudaStreamCreate (selftest)");
  }
  ~DeviceMemory() override {
    // After a Comm failure the stream may wait on an aborted collective: leave the buffers to the
    // driver rather than wait (cudaFree synchronises the device).
    if (std::uncaught_exceptions() > 0) return;
    (void)cudaStreamSynchronize(stream_);
    for (void* p : buffers_) (void)cudaFree(p);
    (void)cudaStreamDestroy(stream_);
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  void* upload(const void* host, size_t bytes) override {
    void* p = nullptr;
    check(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc (selftest buffer)");
    buffers_.push_back(p);
    if (bytes)
      check(cudaMemcpyAsync(p, host, bytes, cudaMemcpyHostToDevice, stream_),
            "cudaMemcpyAsync (selftest upload)");
    return p;
  }

  void download(void* host, const void* buffer, size_t bytes) override {
    comm_.synchronize({stream_});
    if (bytes)
      check(cudaMemcpyAsync(host, buffer, bytes, cudaMemcpyDeviceToHost, stream_),
            "cudaMemcpyAsync (selftest download)");
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (selftest download)");
  }

  Stream stream() const override { return {stream_}; }

 private:
  Comm& comm_;
  cudaStream_t stream_ = nullptr;
  std::vector<void*> buffers_;
};

}  // namespace

std::unique_ptr<SelftestMemory> make_device_selftest_memory(Comm& comm) {
  return std::make_unique<DeviceMemory>(comm);
}

}  // namespace zt::dist
