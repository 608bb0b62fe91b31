#include <fmt/format.h>

#include "cli/commands.h"

namespace zt::cli {

int cmd_version(const Args&) {
  fmt::print("zerotune 0.1.0\n");
  return 0;
}

}  // namespace zt::cli
