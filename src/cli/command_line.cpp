#include "cli/command_line.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include "cli/error_report.h"
#include "io/hydra_sweep.h"

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
  app.name(fmt::format("zerotune {}", usage.name));  // --help's "Usage: zerotune <command> …"
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

void add_config_file_option(CLI::App& app, ConfigFileOption& o) {
  app.add_option("--config", o.config, "hydra-style sft.yaml");
  // -cp / -cn are read by with_hydra_long_flags (CLI11 takes one letter after a single dash), so
  // the help names them here.
  app.add_option("--config-path", o.config_path,
                 "also -cp DIR. Hydra's form: the directory of the config (with --config-name; "
                 "default .)")
      ->type_name("DIR");
  app.add_option(
         "--config-name", o.config_name,
         "also -cn NAME. Hydra's form: the config's name in --config-path (sft or sft.yaml)")
      ->type_name("NAME");
}

Args with_hydra_long_flags(const Args& args) {
  Args out;
  out.reserve(args.size());
  for (const auto& a : args) {
    if (a == "-cp" || a.rfind("-cp=", 0) == 0) {
      out.push_back("--config-path" + a.substr(3));
    } else if (a == "-cn" || a.rfind("-cn=", 0) == 0) {
      out.push_back("--config-name" + a.substr(3));
    } else {
      out.push_back(a);
    }
  }
  return out;
}

std::optional<int> refuse_multirun(const Args& args, const CommandUsage& usage) {
  for (const auto& a : args)
    if (a == "-m" || a == "--multirun")
      return usage_error(usage, a + ": " + std::string(kSweepRefused));
  return std::nullopt;
}

std::string config_file_problem(const ConfigFileOption& o, std::string* path) {
  if (!o.config.empty() && !o.config_name.empty())
    return "give --config FILE or --config-name NAME (Hydra's form), not both";
  if (!o.config.empty()) {
    if (!o.config_path.empty()) return "--config-path goes with --config-name, not with --config";
    *path = o.config;
    return "";
  }
  if (o.config_name.empty())
    return o.config_path.empty() ? "--config is required (or Hydra's --config-name)"
                                 : "--config-path needs --config-name (the config's name)";
  const std::string& n = o.config_name;
  const bool has_ext = (n.size() > 5 && n.compare(n.size() - 5, 5, ".yaml") == 0) ||
                       (n.size() > 4 && n.compare(n.size() - 4, 4, ".yml") == 0);
  *path = (o.config_path.empty() ? std::string(".") : o.config_path) + "/" + n +
          (has_ext ? "" : ".yaml");
  return "";
}

std::optional<int> config_file_of(const ConfigFileOption& o, const CommandUsage& usage,
                                  std::string* path) {
  if (const std::string problem = config_file_problem(o, path); !problem.empty())
    return usage_error(usage, problem);
  return std::nullopt;
}

}  // namespace zt::cli
