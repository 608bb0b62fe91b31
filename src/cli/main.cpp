// zerotune entry point: dispatches `zerotune <command> [args…]` to the functions of cli/commands.h.
#include <fmt/format.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <string_view>
#include <utility>

#include "cli/commands.h"
#include "cli/error_report.h"
#include "core/error.h"

namespace {

struct Command {
  std::string_view name;
  std::string_view help;
  int (*run)(const zt::cli::Args&);
};

constexpr Command kCommands[] = {
    {"version", "print the version", zt::cli::cmd_version},
    {"train", "run the SFT job of an sft.yaml (ZeRO 0-3, offload; mpirun / launch for ranks)", zt::cli::cmd_train},
    {"prepare", "tokenise the configured datasets into the token cache and report", zt::cli::cmd_prepare},
    {"launch", "run a command as N local ranks (like accelerate launch)", zt::cli::cmd_launch},
    {"comm-check", "check the collectives of a multi-process job", zt::cli::cmd_comm_check},
    {"loss", "loss and gradient norms of a JSONL file as one micro-batch", zt::cli::cmd_loss},
    {"make-demo-data", "write the deterministic arithmetic demo dataset (parquet)", zt::cli::cmd_make_demo_data},
    {"tokenize", "print the token ids of every line of a JSONL file", zt::cli::cmd_tokenize},
    {"render", "print the chat template rendering of every row of a JSONL file", zt::cli::cmd_render},
    {"options", "list the config keys zerotune acts on (default, accepted values)", zt::cli::cmd_options},
    {"compare", "compare the logged metrics of runs (first difference, max diff; PNG of the curves)", zt::cli::cmd_compare},
};

// The command list, to `out`: stdout when asked for (--help, -h), stderr when no command was given.
void usage(std::FILE* out) {
  fmt::print(out, "usage: zerotune <command> [options]\n\ncommands:\n");
  for (const auto& c : kCommands) fmt::print(out, "  {:<15} {}\n", c.name, c.help);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string_view name = argv[1];
  zt::cli::Args args(argv + 2, argv + argc);
  for (const auto& c : kCommands) {
    if (c.name != name) continue;
    try {
      return c.run(args);  // a usage error is 2 (cli/command_line.h)
    } catch (const zt::Error& e) {
      if (zt::cli::first_report_of(e.what())) fmt::print(stderr, "zerotune: error: {}\n", e.what());
      return 1;
    } catch (const std::filesystem::filesystem_error& e) {
      // A path of the user's that the system refuses to look at (a name too long, a symbolic
      // link loop, no search permission on a folder above it): the user's to fix, so a plain
      // error naming the path and the system's reason, wherever the call that met it sits.
      std::string what = e.path1().string() + ": " + e.code().message();
      if (!e.path2().empty()) what += " (with " + e.path2().string() + ")";
      if (zt::cli::first_report_of(what)) fmt::print(stderr, "zerotune: error: {}\n", what);
      return 1;
    } catch (const std::exception& e) {
      fmt::print(stderr, "zerotune: internal error: {}\n", e.what());
      return 70;
    }
  }
  fmt::print(stderr, "zerotune: unknown command '{}'\n", name);
  usage(stderr);
  return 2;
}
