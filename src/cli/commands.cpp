// The subcommand table (cli/commands.h).
#include "cli/commands.h"

namespace zt::cli {
namespace {

constexpr Command kCommands[] = {
    {"version", "print the version", cmd_version},
    {"train", "run the SFT job of an sft.yaml (ZeRO 0-3, offload; mpirun / launch for ranks)",
     cmd_train},
    {"prepare", "tokenise the configured datasets into the token cache and report", cmd_prepare},
    {"launch", "run a command as N local ranks (like accelerate launch)", cmd_launch},
    {"comm-check", "check the collectives of a multi-process job", cmd_comm_check},
    {"loss", "loss and gradient norms of a JSONL file as one micro-batch", cmd_loss},
    {"make-demo-data", "write the deterministic arithmetic demo dataset (parquet)",
     cmd_make_demo_data},
    {"tokenize", "print the token ids of every line of a JSONL file", cmd_tokenize},
    {"render", "print the chat template rendering of every row of a JSONL file", cmd_render},
    {"options", "list the config keys zerotune acts on (default, accepted values)", cmd_options},
    {"compare",
     "compare the logged metrics of runs (first difference, max diff; PNG of the curves)",
     cmd_compare},
};

}  // namespace

std::span<const Command> commands() { return kCommands; }

const Command* find_command(std::string_view name) {
  for (const Command& c : kCommands)
    if (c.name == name) return &c;
  return nullptr;
}

}  // namespace zt::cli
