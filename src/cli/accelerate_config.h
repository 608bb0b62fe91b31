// Reads an `accelerate` config YAML (what `accelerate config` writes; DESIGN §8), or a DeepSpeed
// JSON on its own (TrainingArguments' `deepspeed`), into the few settings zerotune acts on: the
// process count, the ZeRO stage, optimizer offload and mixed precision. DeepSpeed
// (`deepspeed_config`, including a `deepspeed_config_file` JSON) and FSDP (`fsdp_config`) forms
// both map onto the ZeRO stage:
//   DEEPSPEED: deepspeed_config.zero_stage (or zero_optimization.stage of the JSON file);
//   FSDP:      FULL_SHARD / 1 -> 3, SHARD_GRAD_OP / 2 -> 2, NO_SHARD / 3 -> 0,
//              HYBRID_SHARD / 4 -> 3 and _HYBRID_SHARD_ZERO2 / 5 -> 2 (with a warning: zerotune has
//              no hybrid sharding); FSDP2 (fsdp_version: 2): fsdp_reshard_after_forward true -> 3,
//              false -> 2; fsdp_offload_params: true -> optimizer offload to the CPU (warning);
//   DEEPSPEED without deepspeed_config_file or zero_stage: 2 (DeepSpeedPlugin.__post_init__'s
//   default, int(ACCELERATE_DEEPSPEED_ZERO_STAGE or 2), which accelerate launch leaves unset);
//   NO / MULTI_CPU / MULTI_GPU, or a DeepSpeed JSON that names no stage: unset
//   (compute.zero_stage's default applies, cli/config_schema.h kDefaultZeroStage: plain data
//   parallel, DeepSpeed's own default). Which settings are in force beside trainer.deepspeed:
//   cli/deepspeed_source.h.
// Every key is checked against cli/launch_keys.h: an unknown key, a key given twice, or a key set
// to something zerotune lacks is an error naming file, line and key (before any process starts);
// a known key that changes nothing in zerotune gets a one-line note when it is not at its neutral
// value.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/json.h"

namespace zt::cli {

// The accelerate config variables that accelerate 1.11.0's DeepSpeedPlugin._deepspeed_config_checks
// refuses beside a DeepSpeed config of its own (a deepspeed_config_file, or TrainingArguments'
// `deepspeed`), in its order: its env_variable_names_to_ignore with ACCELERATE_ and DEEPSPEED_
// dropped. All are deepspeed_config keys but the last, the top-level mixed_precision.
inline constexpr std::string_view kIgnoredBesideDeepSpeedConfig[] = {
    "gradient_accumulation_steps", "gradient_clipping",      "zero_stage",
    "offload_optimizer_device",    "offload_param_device",   "offload_param_nvme_path",
    "offload_optimizer_nvme_path", "zero3_save_16bit_model", "mixed_precision"};

struct AccelerateConfig {
  std::string path;                     // the file read (the `origin` of the _text form)
  std::string distributed_type = "NO";  // NO | MULTI_CPU | MULTI_GPU | DEEPSPEED | FSDP
  std::optional<int> num_processes;     // total processes (all machines), when given
  int num_machines = 1;
  int machine_rank = 0;
  std::string main_process_ip;  // empty when not given
  std::optional<int> main_process_port;
  std::string mixed_precision = "no";  // no | bf16 | fp16 | fp8
  bool use_cpu = false;
  std::optional<int> zero_stage;  // 0..3 as in the file comment; unset: the file names none
  std::string offload_optimizer_device = "none";   // none | cpu
  std::string offload_param_device = "none";       // none | cpu (not acted on: warned)
  // A DeepSpeed value that transformers fills from TrainingArguments when it is "auto" and
  // otherwise requires to equal them (HfTrainerDeepSpeedConfig.trainer_config_process): the key
  // path ("optimizer.params.lr"), its numbers (two for betas), its text and "file:line". From a
  // DeepSpeed JSON, or the accelerate YAML's deepspeed_config.gradient_accumulation_steps /
  // gradient_clipping (accelerate puts them into the DeepSpeed config it builds).
  struct DeepSpeedValue {
    std::string key;
    std::vector<double> values;
    std::string text, at;
  };
  std::vector<DeepSpeedValue> deepspeed_values;  // the JSON's numbers only; "auto" is not kept
  // "file:line" of the accelerate config's deepspeed_config.gradient_clipping when it is 0:
  // accelerate leaves it out of the DeepSpeed config, so DeepSpeed does not clip (cmd_train
  // refuses it beside a trainer.max_grad_norm > 0).
  std::string clipping_zero_at;
  // With distributed_type DEEPSPEED: each deepspeed_config key ("deepspeed_config.zero_stage") and
  // a mixed_precision other than null ("mixed_precision"), with its "file:line", in the order of
  // ACCELERATE_CONFIG_DS_FIELDS, which accelerate launch passes on (launch_command:
  // deepspeed_config's keys in the file's order, then mixed_precision when the file gives one).
  struct Field {
    std::string name, at;
  };
  std::vector<Field> deepspeed_fields;
  // Where the DeepSpeed settings come from, empty without DeepSpeed: `deepspeed_origin` heads
  // messages about their values (the accelerate config, a DeepSpeed JSON file, or
  // "sft.yaml:12: trainer.deepspeed"); `deepspeed_source` says it in words for the start-up line
  // ("ds.json (deepspeed_config.deepspeed_config_file of accel.yaml)").
  std::string deepspeed_origin, deepspeed_source;
  // A DeepSpeed JSON (a file, or settings inline) without zero_optimization, which accelerate's
  // DeepSpeedPlugin refuses where it is the config in force (cli/deepspeed_source.h).
  bool zero_optimization_missing = false;
  std::vector<std::string> warnings;  // asks for something zerotune does differently; one line each
  std::vector<std::string> notes;     // known keys that change nothing in zerotune; one line each
};

// Whether trainer.deepspeed (TrainingArguments' `deepspeed`) gives the DeepSpeed settings
// (cli/deepspeed_source.h deepspeed_from_trainer), which decides what of the accelerate config is
// read. kGiven: TrainingArguments hands the Accelerator a DeepSpeedPlugin of its own
// (DeepSpeedPlugin(hf_ds_config=…), which reads ACCELERATE_DEEPSPEED_CONFIG_FILE only when
// hf_ds_config is None), so a deepspeed_config_file is recorded (deepspeed_source) but never
// opened, and DeepSpeed runs whatever distributed_type says, so fsdp_config's settings are not
// used either (its keys are checked to be known and, under distributed_type FSDP, its values to be
// ones accelerate's FSDP plugin takes, as Accelerator() still builds it). kNone: both are read as
// accelerate reads them.
enum class TrainerDeepSpeed { kNone, kGiven };

// Parses the YAML file at `path`; `trainer` says whether trainer.deepspeed gives the DeepSpeed
// settings (TrainerDeepSpeed). Throws zt::Error naming the file, the key, the line, the value
// seen and what was expected (an unknown or repeated key, a non-integer num_processes, zero_stage
// outside 0..3, an unsupported distributed_type, offload to nvme, …), or when the file cannot be
// read. Nothing is logged: callers print `warnings` and `notes`.
AccelerateConfig parse_accelerate_config(const std::string& path,
                                         TrainerDeepSpeed trainer = TrainerDeepSpeed::kNone);

// Same, from YAML text; `origin` names it in messages, and relative deepspeed_config_file paths
// are resolved against `base_dir` (then the working directory).
AccelerateConfig parse_accelerate_config_text(const std::string& yaml, const std::string& origin,
                                              const std::string& base_dir = ".",
                                              TrainerDeepSpeed trainer = TrainerDeepSpeed::kNone);

// accelerate's refusal of accelerate config variables beside a DeepSpeed JSON of its own
// (DeepSpeedPlugin._deepspeed_config_checks), quoted: "When using `deepspeed_config_file`, the
// following accelerate config variables will be ignored: ['gradient_accumulation_steps', …]."
std::string accelerate_ignored_variables_quote();

// The `fields` (AccelerateConfig::deepspeed_fields) that accelerate refuses beside a DeepSpeed
// JSON (kIgnoredBesideDeepSpeedConfig), one "\n  - file:line: deepspeed_config.zero_stage" each, in
// accelerate's order (kIgnoredBesideDeepSpeedConfig's, as its message lists them); "" when none.
std::string fields_ignored_beside_deepspeed_json(
    const std::vector<AccelerateConfig::Field>& fields);

// A DeepSpeed JSON config file (zero_optimization, bf16, …) as distributed_type DEEPSPEED, with
// the same checks.
AccelerateConfig parse_deepspeed_config(const std::string& path);

// Same, from DeepSpeed settings given inline (TrainingArguments' `deepspeed` as a dict, or a JSON
// or base64 string); messages name `origin` ("sft.yaml:12: trainer.deepspeed") and the DeepSpeed
// key path ("zero_optimization.stage"), no line: the settings have none of their own.
AccelerateConfig parse_deepspeed_settings(const Json& settings, const std::string& origin);

}  // namespace zt::cli
