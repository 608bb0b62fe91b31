// Where a run's DeepSpeed settings come from, decided as transformers 4.57.1 + accelerate 1.11.0
// decide it: trainer.deepspeed (TrainingArguments' `deepspeed`: a DeepSpeed JSON file's path, the
// settings inline as a mapping, or a JSON or base64 string), the accelerate config (DESIGN §8), or
// both. tools/make_deepspeed_source_goldens.py shows each case with the real libraries
// (tests/data/cli/deepspeed_sources.json).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/accelerate_config.h"
#include "cli/run_config.h"
#include "io/json.h"

namespace zt::cli {

// Python's base64.urlsafe_b64decode(text): binascii.a2b_base64 without strict mode, after '-' and
// '_' are read as '+' and '/' (so both alphabets decode). Characters outside the alphabet are
// skipped; a '=' ends the decoding where it completes a quad (the first two characters of a quad
// decoded, and as many '=' as the quad lacks since the last data character), and is skipped
// elsewhere. nullopt where Python raises: a non-ASCII character ("string argument should contain
// only ASCII characters"), or a last quad left incomplete ("Incorrect padding", or one data
// character over a multiple of 4).
std::optional<std::string> python_urlsafe_b64decode(std::string_view text);

// DeepSpeed settings read from a trainer.deepspeed string that names no existing file.
struct DeepSpeedString {
  Json settings;     // a JSON object
  std::string form;  // how they were given: "a JSON string" or "base64-encoded JSON"
};

// What HfDeepSpeedConfig.__init__ (accelerate/utils/deepspeed.py, the base of transformers'
// HfDeepSpeedConfig) reads from a `deepspeed` string that is no existing path: the string as JSON
// (json.loads: whitespace around the value allowed, the last of duplicate keys wins), else
// python_urlsafe_b64decode of it as UTF-8 JSON. Throws zt::Error without a location (the caller
// names file, line and key): for a string that is neither, quoting transformers' ValueError
// ("Expected a string path to an existing deepspeed config, or a dictionary, or a base64 encoded
// string. Received: …"); for JSON that is no object (transformers fails on it with
// AttributeError: "'list' object has no attribute 'get'"). JSON that Python's json takes and
// zerotune does not (NaN, Infinity) is refused alike, saying so.
DeepSpeedString read_deepspeed_string(const std::string& text);

// trainer.deepspeed as TrainingArguments takes it: a DeepSpeed JSON file's path, or the settings
// inline — a mapping, a JSON string starting with '{' (__post_init__ json.loads it and converts
// its string values, hf_dict_field_value), or another string that names no file
// (read_deepspeed_string). A false value (false, 0, "", {}) is no DeepSpeed, as transformers'
// `if self.deepspeed:` reads it: nullopt. Anything else, or a bad string, is an error naming the
// key's file:line. The result's deepspeed_source says where the settings were given.
std::optional<AccelerateConfig> deepspeed_from_trainer(const RunConfig& cfg);

// The DeepSpeed settings a run uses and how it says so.
struct DeepSpeedChoice {
  std::optional<AccelerateConfig> config;  // what `train` acts on (nullopt: no accelerate config
                                           // and no DeepSpeed)
  std::vector<std::string> warnings;       // about combining the two, one line each
  std::string in_force;  // the start-up line, "" without DeepSpeed: the ZeRO stage and
                         // offload in force (compute.zero_stage / compute.offload_optimizer
                         // where they override the DeepSpeed settings, named so) and where the
                         // settings come from
};

// Combines the accelerate config (nullopt: none given; read with TrainerDeepSpeed::kGiven where
// `trainer` is set, so that a deepspeed_config_file it replaces was never opened) and
// trainer.deepspeed's settings (deepspeed_from_trainer; nullopt: none) as transformers and
// accelerate do:
// - trainer.deepspeed beside an accelerate config whose distributed_type is DEEPSPEED and that
//   gives a setting of its own (kIgnoredBesideDeepSpeedConfig among its deepspeed_fields:
//   accelerate launch passes them on in ACCELERATE_CONFIG_DS_FIELDS, and
//   DeepSpeedPlugin(hf_ds_config=…), which TrainingArguments.__post_init__ builds, refuses them in
//   _deepspeed_config_checks): a zt::Error naming both and each such key's file:line
//   (fields_ignored_beside_deepspeed_json), quoting accelerate's message;
// - otherwise trainer.deepspeed's DeepSpeed settings are in force (ZeRO stage, offload, the values
//   compared with the trainer's) with the accelerate config's process settings (num_processes,
//   machines, mixed_precision, use_cpu): TrainingArguments sets ACCELERATE_USE_DEEPSPEED and
//   hands the Accelerator its own DeepSpeedPlugin, so the accelerate config's
//   deepspeed_config_file is not read, and DeepSpeed runs under distributed_type NO, MULTI_GPU or
//   FSDP too (AcceleratorState takes DEEPSPEED before FSDP; a warning says fsdp_config is unused);
// - the DeepSpeed JSON in force without zero_optimization is an error, as DeepSpeedPlugin raises
//   "Please specify the ZeRO optimization config in the DeepSpeed config."
DeepSpeedChoice choose_deepspeed_settings(std::optional<AccelerateConfig> accelerate,
                                          std::optional<AccelerateConfig> trainer,
                                          const RunConfig& cfg);

}  // namespace zt::cli
