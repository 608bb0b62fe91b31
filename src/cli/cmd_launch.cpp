// `zerotune launch [--num_processes N | --nproc_per_node N] [--nnodes M --node_rank R
//  --master_addr A --master_port P] [--config_file accelerate.yaml] [--] <command> [args…]`: runs
// `zerotune <command> [args…]` as N local ranks (DESIGN §7), like `accelerate launch` / torchrun.
// With M nodes, one launcher per node (torchrun's convention): node R's ranks are R*N … R*N+N-1
// of M*N, meeting at A:P (rank 0's node). --num_processes is accelerate's total over all machines
// (N = total / M), --nproc_per_node torchrun's count per node. The accelerate config's
// num_processes / num_machines / machine_rank / main_process_ip / main_process_port are the
// defaults of these. The ranks find each other through the TCP Comm (dist/bootstrap.h); the
// accelerate config's path reaches them as ZT_ACCELERATE_CONFIG (read by launch as `train` reads
// it: after trainer.deepspeed, cli/commands.h train_gives_deepspeed). More ranks than
// dist::max_local_ranks() (4 per CPU of the launcher's affinity) are refused unless
// --oversubscribe is given.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <limits>
#include <optional>

#include "cli/accelerate_config.h"
#include "cli/command_line.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/log.h"
#include "core/stop_signals.h"
#include "dist/local_launch.h"

namespace zt::cli {

constexpr CommandUsage kUsage{"launch",
                              "[--num_processes N] [--config_file FILE] <command> [args…]"};

int cmd_launch(const Args& args) {
  // A stop signal before the ranks are started ends the launcher there, saying so, with the status
  // it gives a forwarded one (128 + the signal); run_local_launch takes the signals over (blocked,
  // for its sigtimedwait) before it starts a rank.
  const StopSignalsAtOnce before_ranks(
      "zerotune: warning: launch: interrupted before any process was started; nothing was run\n",
      0);
  CLI::App app{"zerotune launch: run a zerotune command as N local processes (ranks)"};
  int num_processes = 0, nproc_per_node = 0, nnodes = 0, node_rank = -1;
  std::string config_file, master_addr;
  int port = 0;
  double grace = dist::LocalLaunch{}.kill_grace_s;
  bool oversubscribe = false;
  // The counts' upper bound is the machine's, checked below (dist::max_local_ranks).
  constexpr int kAnyInt = std::numeric_limits<int>::max();
  app.add_option("--num_processes", num_processes,
                 "number of ranks over all nodes (overrides num_processes of --config_file)")
      ->transform(integer_in(1, kAnyInt));
  app.add_option("--nproc_per_node", nproc_per_node, "number of ranks on this node (torchrun)")
      ->transform(integer_in(1, kAnyInt));
  app.add_option("--nnodes,--num_machines", nnodes, "number of nodes, one launcher on each")
      ->transform(integer_in(1, 1 << 16));
  app.add_option("--node_rank,--machine_rank", node_rank, "this node's index, 0 .. nnodes-1")
      ->transform(integer_in(0, (1 << 16) - 1));
  app.add_option("--master_addr,--main_process_ip", master_addr,
                 "address of rank 0's node (default 127.0.0.1)");
  app.add_option("--config_file", config_file, "accelerate config YAML")->check(CLI::ExistingFile);
  app.add_option("--main_process_port,--master_port", port, "rendezvous port (default: a free one)")
      ->transform(integer_in(1, 65535));
  app.add_option("--kill_grace_s", grace,
                 "seconds the ranks get after a forwarded SIGINT/SIGTERM to write their interrupt "
                 "checkpoint before SIGKILL (default 30, as torchrun)")
      ->check(number_in(0.0, 1e9));
  app.add_flag("--oversubscribe", oversubscribe,
               fmt::format("start more than {} ranks per CPU this launcher may use (e.g. Slurm "
                           "--cpus-per-task=1 with 8 GPUs), as mpirun --oversubscribe",
                           dist::kMaxRanksPerCpu));
  app.prefix_command();
  if (auto rc = parse_command_line(app, kUsage, args)) return *rc;
  std::vector<std::string> command = app.remaining();
  // `--` ends launch's options, as for accelerate launch and torchrun (argparse): the rest is the
  // command, even a word that starts with '-'.
  const bool after_dashes = !command.empty() && command.front() == "--";
  if (after_dashes) command.erase(command.begin());
  if (command.empty())
    fail(
        "launch: no command given (usage: zerotune launch [--num_processes N] [--config_file "
        "FILE] <command> [args…], e.g. `zerotune launch --num_processes 2 train --config "
        "sft.yaml`)");
  if (command.front() == "launch") fail("launch: the command to run cannot be `launch` itself");
  if (command.front().rfind('-', 0) == 0 && after_dashes)
    return usage_error(kUsage, fmt::format("the command after '--' is '{}', not a zerotune command "
                                           "(e.g. `zerotune launch -- train --config sft.yaml`)",
                                           command.front()));
  // An option launch does not know ends its options and would start every rank on it as the
  // command (each then fails alone); accelerate launch's own flags land here.
  if (command.front().rfind('-', 0) == 0)
    return usage_error(
        kUsage,
        fmt::format("'{}' is not a launch option; accelerate launch's other flags "
                    "(--mixed_precision, --use_deepspeed, --zero_stage, --multi_gpu, …) are read "
                    "from the accelerate config file given as --config_file (or set as trainer.* / "
                    "compute.* keys of the sft.yaml)",
                    command.front()));
  // accelerate launch runs a script (`accelerate launch … sft.py ARGS`); zerotune launch runs one
  // of zerotune's commands. Anything else started every rank on it, each failing alone with
  // "unknown command".
  if (find_command(command.front()) == nullptr) {
    std::string names;
    for (const Command& c : commands())
      if (c.name != "launch") names += (names.empty() ? "" : ", ") + std::string(c.name);
    return usage_error(
        kUsage, fmt::format("'{}' is not a zerotune command (one of: {}); zerotune runs the SFT "
                            "job itself: where you ran `accelerate launch … sft.py ARGS`, run "
                            "`zerotune launch … train --config sft.yaml ARGS`",
                            command.front(), names));
  }

  dist::LocalLaunch spec;
  spec.exe = "/proc/self/exe";
  spec.args = command;
  spec.kill_grace_s = grace;
  spec.oversubscribe = oversubscribe;
  std::optional<int> from_config;  // total processes
  int machines = 1, machine = 0;
  if (!config_file.empty()) {
    // The accelerate config read as the ranks read it: for `train`, after trainer.deepspeed,
    // which keeps its deepspeed_config_file and fsdp_config from being read (as TrainingArguments'
    // own DeepSpeedPlugin keeps accelerate from reading them). Where that cannot be told here (the
    // sft.yaml or trainer.deepspeed is refused, or reads the ranks' environment), launch reads
    // only what it needs and leaves the rest, and the report, to the ranks.
    const bool train = command.front() == "train";
    const std::optional<bool> trainer_ds =
        train ? train_gives_deepspeed({command.begin() + 1, command.end()}) : std::nullopt;
    const bool report = !train || trainer_ds.has_value();
    const AccelerateConfig cfg = parse_accelerate_config(
        config_file,
        train && trainer_ds.value_or(true) ? TrainerDeepSpeed::kGiven : TrainerDeepSpeed::kNone);
    if (report) {
      for (const auto& w : cfg.warnings) log::warn("{}", w);
      for (const auto& n : cfg.notes) log::info("{}", n);
    }
    from_config = cfg.num_processes;
    machines = cfg.num_machines;
    machine = cfg.machine_rank;
    if (master_addr.empty()) master_addr = cfg.main_process_ip;
    if (port == 0 && cfg.main_process_port) port = *cfg.main_process_port;
    // The reported mark names the file it is about, so a stale or hand-set one never silences
    // the ranks' report of another file (cmd_train.cpp compares the two).
    const std::string abs_config = std::filesystem::absolute(config_file).string();
    spec.extra_env.emplace_back("ZT_ACCELERATE_CONFIG", abs_config);
    if (report) spec.extra_env.emplace_back(kAccelerateReportedEnv, abs_config);
  }
  if (num_processes > 0 && from_config && *from_config != num_processes)
    log::warn("launch: --num_processes {} overrides num_processes: {} of {}", num_processes,
              *from_config, config_file);
  spec.nnodes = nnodes > 0 ? nnodes : machines;
  spec.node_rank = node_rank >= 0 ? node_rank : (nnodes > 0 ? 0 : machine);
  const int total = num_processes > 0 ? num_processes : from_config.value_or(0);
  if (nproc_per_node > 0) {
    if (num_processes > 0 && num_processes != static_cast<int64_t>(nproc_per_node) * spec.nnodes)
      fail("launch: --num_processes {} (all nodes) disagrees with --nproc_per_node {} × {} node(s)",
           num_processes, nproc_per_node, spec.nnodes);
    spec.num_processes = nproc_per_node;
  } else if (total > 0) {
    if (total % spec.nnodes != 0)
      fail(
          "launch: {} processes over {} nodes: num_processes counts every node's ranks and must "
          "be a multiple of the node count (or give --nproc_per_node)",
          total, spec.nnodes);
    spec.num_processes = total / spec.nnodes;
  } else {
    spec.num_processes = 1;
  }
  // More ranks than this machine runs are refused before any starts, naming what asked for them.
  if (const int most = dist::max_local_ranks(); !oversubscribe && spec.num_processes > most) {
    const std::string why = dist::max_local_ranks_reason();
    if (nproc_per_node > 0)
      return usage_error(kUsage,
                         fmt::format("--nproc_per_node: expected a positive integer <= {} ({}), "
                                     "got {}",
                                     most, why, nproc_per_node));
    const int64_t all = int64_t{most} * spec.nnodes;  // the total's bound, over every node
    const std::string per =
        spec.nnodes == 1 ? why
                         : fmt::format("{} ranks per node × {} nodes: {}", most, spec.nnodes, why);
    if (num_processes > 0)
      return usage_error(
          kUsage, fmt::format("--num_processes: expected a positive integer <= {} ({}), got {}",
                              all, per, num_processes));
    fail("launch: {}: key 'num_processes' has value '{}' (expected an integer in [1, {}]: {})",
         config_file, total, all, per);
  }
  if (!master_addr.empty()) spec.master_addr = master_addr;
  spec.master_port = port;
  return dist::run_local_launch(spec);
}

}  // namespace zt::cli
