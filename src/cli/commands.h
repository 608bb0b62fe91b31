// The zerotune subcommands. Each takes argv after the subcommand name and returns the exit status;
// failures throw zt::Error, which main() prints.
#pragma once

#include <string>
#include <vector>

namespace zt::cli {

using Args = std::vector<std::string>;

int cmd_version(const Args& args);

}  // namespace zt::cli
