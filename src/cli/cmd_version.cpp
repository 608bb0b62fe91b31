// `zerotune version`: what this build can run on.
#include <fmt/format.h>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "dist/bootstrap.h"

namespace zt::cli {

constexpr CommandUsage kUsage{"version", ""};

// "zerotune 0.1.0 (backends: cpu, cuda; comm: mpi, tcp, nccl)".
int cmd_version(const Args& args) {
  CLI::App app{"Print the version and the backends and transports this build has"};
  if (auto rc = parse_command_line(app, kUsage, args)) return *rc;
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
