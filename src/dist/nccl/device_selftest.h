// Device memory for the Comm self-test (dist/selftest.h), so that `zerotune comm-check --device
// cuda` and the GPU tests run every bulk collective of a device Comm on device buffers.
#pragma once

#include <memory>

#include "dist/selftest.h"

namespace zt::dist {

// Buffers from cudaMalloc on the current device (a test: allocation per buffer is fine), filled
// and read back on a non-blocking stream of its own; download() waits through
// comm.synchronize(), so a failed collective surfaces as the Comm's error, not as wrong values.
std::unique_ptr<SelftestMemory> make_device_selftest_memory(Comm& comm);

}  // namespace zt::dist
