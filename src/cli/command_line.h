// How every subcommand reads its command line (CLI11), with one error style:
//   `--help`        the options, on stdout; exit status 0;
//   a usage error   on stderr, as
//                     zerotune: error: <command>: <what is wrong>
//                     usage: zerotune <command> <synopsis> (`zerotune <command> --help` lists the
//                     options)
//                   exit status 2.
// Errors found after parsing (a missing file, bad rows) are zt::Error (exit status 1, main.cpp).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "cli/commands.h"

namespace zt::cli {

// What a command is called and how it is used, for the usage line.
struct CommandUsage {
  std::string_view name;      // "compare"
  std::string_view synopsis;  // "RUN_A RUN_B [RUN …] [--png PATH] [--no-png]"
};

// Parses `args` (argv after the command name) into `app`, named "zerotune <usage.name>" (the
// "Usage:" line of --help). std::nullopt: go on; otherwise the exit status to return at once (0
// after --help, 2 after a usage error, both printed as above).
std::optional<int> parse_command_line(CLI::App& app, const CommandUsage& usage, const Args& args);

// The config file of train and prepare: `--config FILE`, or Hydra's way of naming it, as the users'
// `python sft.py --config-path configs --config-name sft` does: `--config-path DIR` (`-cp`;
// relative to the current directory, default ".") and `--config-name NAME` (`-cn`; ".yaml" added
// when NAME has no .yaml/.yml ending), also in the `--opt=value` form.
struct ConfigFileOption {
  std::string config, config_path, config_name;
};
// Adds the three options to `app`; their --help lines name -cp and -cn too.
void add_config_file_option(CLI::App& app, ConfigFileOption& o);
// Hydra's short flags -cp / -cn (which CLI11 would read as -c -p) as --config-path / --config-name.
Args with_hydra_long_flags(const Args& args);
// The file the options name into *path; otherwise (none given, --config with --config-name, or
// --config-path alone) prints a usage error and returns 2.
std::optional<int> config_file_of(const ConfigFileOption& o, const CommandUsage& usage,
                                  std::string* path);
// Same, printing nothing: "" with the file in *path, or what is wrong with the options.
std::string config_file_problem(const ConfigFileOption& o, std::string* path);

// Hydra's -m / --multirun (one command line run as several jobs, a sweep), which zerotune does not
// do: prints the usage error "<command>: -m: sweeps (Hydra --multirun) are not supported: launch
// one run per value" (naming the flag as given) and returns 2; std::nullopt when `args` holds
// neither flag. Sweep overrides (`lr=1e-5,2e-5`) are refused where overrides are read
// (io/hydra_sweep.h).
std::optional<int> refuse_multirun(const Args& args, const CommandUsage& usage);

// Prints a usage error found by the command itself (as above) and returns 2.
int usage_error(const CommandUsage& usage, std::string_view what);

// Checks for numeric options, in place of CLI::Range (which calls "abc" "not in range"). The
// usage error names the option, what it expects and the value given: "--num_processes: expected
// a positive integer, got \"abc\"". integer_in reads the value as a decimal integer in [lo, hi],
// as accelerate's argparse (type=int) and torchrun do (CLI11 alone would read 010 as octal 8);
// number_in a finite decimal number in [lo, hi]. integer_in rewrites the value in decimal: add it
// with ->transform() (->check() would drop the rewrite).
CLI::Validator integer_in(int64_t lo, int64_t hi);
CLI::Validator number_in(double lo, double hi);

}  // namespace zt::cli
