// Options of the SFT data pipeline (TRL `SFTConfig` names and defaults, SFT_SEMANTICS §1–2) and
// the small enums they use.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace zt::data {

// What to do when tok(prompt) is not a prefix of tok(prompt + completion) (SFT_SEMANTICS §2).
// kWarn (default) keeps the positional completion mask and reports the rows; kError fails.
enum class PrefixMismatch { kWarn, kError };

// The users' own prompt formatting. kChat: a plain-string prompt is rendered by the chat template
// as one user turn with add_generation_prompt=true, the EOS string is appended to the completion,
// and the row is then treated as plain prompt/completion.
enum class PromptFormat { kNone, kChat };

// Parse "warn"/"error" and "none"/"chat"; throw zt::Error naming `key`, the value and the choices.
PrefixMismatch parse_prefix_mismatch(std::string_view value,
                                     std::string_view key = "prefix_mismatch");
PromptFormat parse_prompt_format(std::string_view value, std::string_view key = "prompt_format");
std::string_view to_string(PrefixMismatch v);
std::string_view to_string(PromptFormat v);

struct DataOptions {
  std::filesystem::path dataset;             // .jsonl, .json or .parquet
  std::string dataset_text_field = "text";   // TRL `dataset_text_field`
  std::optional<int64_t> max_length = 1024;  // tokens; nullopt or 0 = no truncation
  bool packing = false;                      // TRL `packing`
  std::string packing_strategy = "bfd";      // only "bfd" is implemented
  // TRL packs inside each `datasets.map(batched=True)` batch, 1000 examples by default; bins never
  // mix examples of different groups. 0 = one group for the whole dataset.
  int64_t packing_group_size = 1000;
  std::optional<bool> completion_only_loss;  // nullopt = auto: true for prompt/completion data
  bool assistant_only_loss = false;          // needs a template with {% generation %} blocks
  std::optional<std::string> eos_token;      // overrides tokenizer_config's eos_token
  std::optional<std::string> chat_template;  // template source; overrides tokenizer_config's
  PromptFormat prompt_format = PromptFormat::kNone;
  PrefixMismatch prefix_mismatch = PrefixMismatch::kWarn;
  std::filesystem::path cache_dir;  // empty = default_cache_dir()
  int num_threads = 0;              // tokenisation threads; 0 = OpenMP's default
};

// Where token caches go when DataOptions::cache_dir is empty: $ZEROTUNE_CACHE_DIR, else
// $XDG_CACHE_HOME/zerotune, else $HOME/.cache/zerotune, else ./.zerotune_cache. Caches are keyed
// by the content of every input, so one directory is safely shared by runs and experiments.
std::filesystem::path default_cache_dir();

}  // namespace zt::data
