#include "cli/command_line.h"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "cli/error_report.h"

namespace zt::cli {

int usage_error(const CommandUsage& usage, std::string_view what) {
  const std::string msg = fmt::format("{}: {}", usage.name, what);
  if (first_report_of(msg))
    fmt::print(
        stderr,
        "zerotune: error: {}\nusage: zerotune {}{}{} (`zerotune {} --help` lists the options)\n",
        msg, usage.name, usage.synopsis.empty() ? "" : " ", usage.synopsis, usage.name);
  return 2;
}

std::optional<int> parse_command_line(CLI::App& app, const CommandUsage& usage, const Args& args) {
  std::vector<std::string> argv(args.rbegin(), args.rend());  // CLI11 takes them reversed
  try {
    app.parse(argv);
  } catch (const CLI::CallForHelp&) {
    fmt::print("{}", app.help());
    return 0;
  } catch (const CLI::ParseError& e) {
    return usage_error(usage, e.what());
  }
  return std::nullopt;
}

}  // namespace zt::cli
