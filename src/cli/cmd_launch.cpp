// `zerotune launch [--num_processes N] [--config_file accelerate.yaml] [--main_process_port P]
//  <command> [args…]`: runs `zerotune <command> [args…]` as N local ranks (DESIGN §7), like
// `accelerate launch` / torchrun on one machine. The ranks find each other through the TCP Comm
// (dist/bootstrap.h); the accelerate config's path reaches them as ZT_ACCELERATE_CONFIG.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <optional>

#include "cli/accelerate_config.h"
#include "cli/command_line.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/log.h"
#include "dist/local_launch.h"

namespace zt::cli {

constexpr CommandUsage kUsage{"launch",
                              "[--num_processes N] [--config_file FILE] <command> [args…]"};

int cmd_launch(const Args& args) {
  CLI::App app{"zerotune launch: run a zerotune command as N local processes (ranks)", "launch"};
  int num_processes = 0;
  std::string config_file;
  int port = 0;
  double grace = 5.0;
  app.add_option("--num_processes", num_processes,
                 "number of ranks (overrides num_processes of --config_file)")
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--config_file", config_file, "accelerate config YAML")->check(CLI::ExistingFile);
  app.add_option("--main_process_port,--master_port", port, "rendezvous port (default: a free one)")
      ->check(CLI::Range(1, 65535));
  app.add_option("--kill_grace_s", grace,
                 "seconds between SIGTERM and SIGKILL when stopping ranks");
  app.prefix_command();
  if (auto rc = parse_command_line(app, kUsage, args)) return *rc;
  std::vector<std::string> command = app.remaining();
  if (command.empty())
    fail(
        "launch: no command given (usage: zerotune launch [--num_processes N] [--config_file "
        "FILE] <command> [args…], e.g. `zerotune launch --num_processes 2 train --config "
        "sft.yaml`)");
  if (command.front() == "launch") fail("launch: the command to run cannot be `launch` itself");

  dist::LocalLaunch spec;
  spec.exe = "/proc/self/exe";
  spec.args = command;
  spec.kill_grace_s = grace;
  std::optional<int> from_config;
  if (!config_file.empty()) {
    const AccelerateConfig cfg = parse_accelerate_config(config_file);
    for (const auto& w : cfg.warnings) log::warn("{}", w);
    for (const auto& n : cfg.notes) log::info("note: {}", n);
    if (cfg.num_machines > 1)
      fail(
          "launch: {} has num_machines: {}; `zerotune launch` starts processes on this machine "
          "only (multi-machine jobs: mpirun, or RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT per rank)",
          config_file, cfg.num_machines);
    from_config = cfg.num_processes;
    if (port == 0 && cfg.main_process_port) port = *cfg.main_process_port;
    spec.extra_env.emplace_back("ZT_ACCELERATE_CONFIG",
                                std::filesystem::absolute(config_file).string());
  }
  if (num_processes > 0 && from_config && *from_config != num_processes)
    log::warn("launch: --num_processes {} overrides num_processes: {} of {}", num_processes,
              *from_config, config_file);
  spec.num_processes = num_processes > 0 ? num_processes : from_config.value_or(1);
  spec.master_port = port;
  return dist::run_local_launch(spec);
}

}  // namespace zt::cli
