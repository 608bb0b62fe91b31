// From a RunConfig to the data pipeline's inputs: the tokenizer (model.tokenizer_name_or_path, else
// model.name_or_path) and the DataOptions of the train / eval split. Shared by `prepare` and
// `train`.
#pragma once

#include <filesystem>
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

// Loads tokenizer.json + tokenizer_config.json of the configured tokenizer directory.
// Throws zt::Error naming the config key and directory when tokenizer.json is missing.
TokenizerBundle load_tokenizer(const RunConfig& cfg);

// DataOptions for `split` ("train" or "eval") from dataset.* and trainer.* keys (TRL names).
// Throws zt::Error naming the key when dataset.<split>.path is unset (for "train") or invalid.
data::DataOptions data_options(const RunConfig& cfg, const std::string& split);

}  // namespace zt::cli
