// `zerotune options`: the config keys zerotune acts on, with their defaults and accepted values,
// as the Markdown table README.md holds (cli/config_schema.h acted_keys_markdown; a test checks
// the README's copy against it).
#include <fmt/format.h>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/config_schema.h"

namespace zt::cli {

constexpr CommandUsage kUsage{"options", ""};

int cmd_options(const Args& args) {
  CLI::App app{
      "Print the config keys zerotune acts on (default, accepted values) as a Markdown table"};
  if (auto rc = parse_command_line(app, kUsage, args)) return *rc;
  fmt::print("{}", acted_keys_markdown());
  return 0;
}

}  // namespace zt::cli
