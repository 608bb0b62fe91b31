// The zerotune subcommands. Each takes argv after the subcommand name and returns the exit status;
// failures throw zt::Error, which main() prints.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace zt::cli {

using Args = std::vector<std::string>;

int cmd_version(const Args& args);
int cmd_launch(const Args& args);      // cmd_launch.cpp: N local ranks
int cmd_comm_check(const Args& args);  // cmd_comm_check.cpp: collective self-test
int cmd_loss(const Args& args);
int cmd_make_demo_data(const Args& args);
int cmd_prepare(const Args& args);
int cmd_train(const Args& args);
int cmd_tokenize(const Args& args);  // cmd_tokenize.cpp: token ids of a JSONL file
int cmd_render(const Args& args);    // cmd_render.cpp: chat template over a JSONL file
int cmd_compare(const Args& args);
int cmd_options(const Args& args);  // cmd_options.cpp: the acted-on config keys (README's table) //
                                    // cmd_compare.cpp: metrics of runs compared, PNG of the curves

// Whether the `train` command line `args` (argv after "train") gives trainer.deepspeed, read as
// `train` reads its config and trainer.deepspeed (cmd_train.cpp): nullopt where that cannot be
// told before the ranks run (--help, a usage error, a config or a trainer.deepspeed that `train`
// refuses: its ranks report it). `zerotune launch` reads the accelerate config as the ranks will.
std::optional<bool> train_gives_deepspeed(const Args& args);

// Set by `zerotune launch` in its ranks' environment where it has read the accelerate config
// (ZT_ACCELERATE_CONFIG) as `train` reads it and printed its warnings and notes: `train` prints
// them not again.
inline constexpr const char* kAccelerateReportedEnv = "ZT_ACCELERATE_REPORTED";

// One subcommand: its name, its one-line help and its entry point.
struct Command {
  std::string_view name;
  std::string_view help;
  int (*run)(const Args&);
};

// Every subcommand, in the order `zerotune --help` lists them (commands.cpp). main() dispatches on
// it; `zerotune launch` checks its command against it before it starts any rank.
std::span<const Command> commands();

// The subcommand called `name`, or nullptr.
const Command* find_command(std::string_view name);

}  // namespace zt::cli
