#include <fmt/format.h>

#include "cli/commands.h"
#include "dist/bootstrap.h"

namespace zt::cli {

// "zerotune 0.1.0 (backends: cpu, cuda; comm: mpi, tcp, nccl)" — what this build can run on.
int cmd_version(const Args&) {
#if defined(ZT_HAVE_CUDA)
  const char* backends = "cpu, cuda";
#else
  const char* backends = "cpu";
#endif
  fmt::print("zerotune 0.1.0 (backends: {}; comm: mpi, tcp{})\n", backends,
             dist::have_device_comm() ? ", nccl" : "");
  return 0;
}

}  // namespace zt::cli
