// From a RunConfig to the data pipeline's inputs: the tokenizer (model.tokenizer_name_or_path, else
// model.name_or_path) and the DataOptions of the train / eval split. Shared by `prepare` and
// `train`.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "cli/run_config.h"
#include "data/data_options.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace zt::cli {

struct TokenizerBundle {
  std::filesystem::path dir;
  text::Tokenizer tokenizer;
  text::TokenizerConfig config;
};

// Loads tokenizer.json + tokenizer_config.json (optional: text::TokenizerConfig) of the configured
// tokenizer directory, with the config's special tokens that tokenizer.json lacks added
// (text/special_tokens.h).
// Throws zt::Error naming the config key (model.tokenizer_name_or_path, model_name or
// model.name_or_path) when it is empty, and the key and directory when tokenizer.json is missing.
TokenizerBundle load_tokenizer(const RunConfig& cfg);

// DataOptions for `split` ("train" or "eval") from dataset.* and trainer.* keys (TRL names).
// The data file is dataset.<split>.path (a local file: its HF split is "train", the only split
// `load_dataset(ext, data_files=path)` has) or, with dataset.is_local: false (or no path),
// dataset.<split>.name, a hub dataset id read from the local HF cache (io/dataset_source.h) with
// dataset.<split>.split (default "train" for the train set, "test" for the eval set).
// DataOptions::names gets the config file, the split, the key naming the file and the config keys
// (with RunConfig::where) of the options the data pipeline's errors name.
// Throws zt::Error naming the key when neither is set, when is_local contradicts what is given,
// when a local file's split is not "train", or when the hub dataset cannot be found.
data::DataOptions data_options(const RunConfig& cfg, const std::string& split);

// trainer.dataset_kwargs as TRL 0.25.1 reads it: only `skip_prepare_dataset` (SFTTrainer skips
// formatting and tokenising when it is true). Null: nothing. Throws zt::Error naming the key for a
// value that is no mapping (TRL calls .get on it) and for a true skip_prepare_dataset (zerotune
// always prepares the data); any other key gets one `warn` line naming it (older TRL's
// add_special_tokens, append_concat_token, … change nothing in 0.25.1 either).
void check_dataset_kwargs(const RunConfig& cfg,
                          const std::function<void(const std::string&)>& warn);

// Throws zt::Error naming the config file and key dataset.<split>.path when the split's local
// dataset file is not there or is a directory (the readers' own "cannot open" / "read failed: Is
// a directory" names only the file); a hub dataset
// is found (or refused) by dataset.<split>.name as before.
void check_dataset_present(const RunConfig& cfg, const std::string& split);

// True when the config names an eval set (dataset.eval.path or dataset.eval.name).
bool has_eval_set(const RunConfig& cfg);

}  // namespace zt::cli
