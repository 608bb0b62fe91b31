// The keys of an accelerate config YAML and of a DeepSpeed JSON that zerotune knows, each either
// acted on (cli/accelerate_config.cpp reads it) or known to change nothing in zerotune (a one-line
// note when its value is not the neutral one), or refused when set (it would change the numbers
// and zerotune lacks it). Any other key is an error naming file, line and key, as accelerate and
// DeepSpeed's own (pydantic) config classes refuse unknown fields.
// Sources: accelerate 1.11 / 1.15 `commands/config/config_args.py` (BaseConfig, ClusterConfig) and
// `commands/config/cluster.py` (the deepspeed_config / fsdp_config keys `accelerate config` writes;
// tests/data/cli/accelerate_fields.json, made by tools/make_config_field_goldens.py); DeepSpeed
// `runtime/constants.py` and the sections' config classes (`runtime/zero/config.py`,
// `runtime/zero/offload_config.py`, `runtime/precision_config.py`).
#pragma once

#include <span>
#include <string_view>

namespace zt::cli {

struct LaunchKey {
  std::string_view name;
  // Acted on: empty. Otherwise the values that need no note, '|'-separated as written in YAML
  // ("false", "no|false"); "~" = null or absent, "[]" / "{}" = empty or null, "*" = any value,
  // "type:X" = a DeepSpeed block {type: X, params: {…}} of type X (any case) whose params are
  // all "auto" (or absent).
  std::string_view neutral;
  std::string_view note;  // why it changes nothing in zerotune (or, with refuse, what zerotune lacks)
  bool refuse = false;    // a non-neutral value is an error
};

std::span<const LaunchKey> accelerate_top_keys();
std::span<const LaunchKey> accelerate_deepspeed_keys();  // under deepspeed_config:
std::span<const LaunchKey> accelerate_fsdp_keys();       // under fsdp_config:
std::span<const LaunchKey> deepspeed_json_keys();        // top level of a DeepSpeed JSON
std::span<const LaunchKey> deepspeed_zero_keys();        // zero_optimization
std::span<const LaunchKey> deepspeed_offload_optimizer_keys();
std::span<const LaunchKey> deepspeed_offload_param_keys();
std::span<const LaunchKey> deepspeed_precision_keys();  // bf16 / bfloat16 / fp16

// The entry of `name` in `keys`, or nullptr.
const LaunchKey* find_launch_key(std::span<const LaunchKey> keys, std::string_view name);

}  // namespace zt::cli
