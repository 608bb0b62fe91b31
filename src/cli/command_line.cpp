#include "cli/command_line.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
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

CLI::Validator integer_in(int64_t lo, int64_t hi) {
  const std::string what = lo == 1   ? "a positive integer"
                           : lo == 0 ? "a non-negative integer"
                                     : fmt::format("an integer >= {}", lo);
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        int64_t v = 0;
        const char* end = s.data() + s.size();
        const auto [p, ec] = std::from_chars(s.data(), end, v);
        if (ec != std::errc() || p != end || v < lo)
          return fmt::format("expected {}, got \"{}\"", what, s);
        if (v > hi) return fmt::format("expected {} <= {}, got {}", what, hi, s);
        s = std::to_string(v);  // what CLI11 converts: decimal, whatever the leading zeros
        return "";
      },
      fmt::format("INT in [{}, {}]", lo, hi));
}

CLI::Validator number_in(double lo, double hi) {
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        double v = 0;
        const char* end = s.data() + s.size();
        const auto [p, ec] = std::from_chars(s.data(), end, v);
        if (ec != std::errc() || p != end || !std::isfinite(v) || !(v >= lo && v <= hi))
          return fmt::format("expected a number in [{}, {}], got \"{}\"", lo, hi, s);
        return "";
      },
      fmt::format("NUMBER in [{}, {}]", lo, hi));
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
