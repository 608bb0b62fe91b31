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
#include "core/stop_signals.h"

namespace {

// The command list, to `out`: stdout when asked for (--help, -h), stderr when no command was given.
void usage(std::FILE* out) {
  fmt::print(out, "usage: zerotune <command> [options]\n\ncommands:\n");
  for (const auto& c : zt::cli::commands()) fmt::print(out, "  {:<15} {}\n", c.name, c.help);
  fmt::print(out, "\noptions:\n  {:<15} {}\n  {:<15} {}\n", "-h, --help", "this list", "--version",
             "the same as `zerotune version`");
}

// `zerotune train` and `zerotune launch` take SIGINT / SIGTERM from the process's first instant:
// this runs before any library initialises (ELF .preinit_array: executables only, before every
// DT_INIT), and the command's set-up guard acts on a signal recorded meanwhile
// (core/stop_signals.h). Only async-signal-safe libc calls here: the C++ runtime is not yet set up.
void preinit_stop_signals(int argc, char** argv, char** /*envp*/) {
  if (argc >= 2 && (std::strcmp(argv[1], "train") == 0 || std::strcmp(argv[1], "launch") == 0))
    zt::record_stop_signals_until_guarded();
}
__attribute__((section(".preinit_array"),
               used)) void (*const kPreinitStopSignals)(int, char**, char**) = preinit_stop_signals;

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string_view name = argv[1];
  // `zerotune --version`, as users type it (CLI11's version flag, git's): the version command, its
  // arguments after it as that command's.
  if (name == "--version") name = "version";
  zt::cli::Args args(argv + 2, argv + argc);
  if (const zt::cli::Command* c = zt::cli::find_command(name)) {
    try {
      return c->run(args);  // a usage error is 2 (cli/command_line.h)
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
