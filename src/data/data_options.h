// Options of the SFT data pipeline (TRL `SFTConfig` names and defaults, SFT_SEMANTICS §1–2) and
// the small enums they use.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "io/json.h"

namespace zt::data {

// Where the completion of a prompt/completion example starts (SFT_SEMANTICS §2).
// kPrefix (default, current TRL: 1.16 checked): at the length of the common prefix of
//   tok(prompt) and tok(prompt + completion), so a token that merges the prompt's last characters
//   with the completion's first is a target.
// kPositional (TRL ≤ 1.9, the users' 0.25.1 included): at len(tok(prompt)), whatever the tokens;
//   rows where tok(prompt) is not a prefix of tok(prompt + completion) are reported
//   (PrefixMismatch).
enum class CompletionMask { kPrefix, kPositional };

// Which tokens assistant_only_loss trains: those of the `{% generation %}` spans, as transformers'
// `apply_chat_template(return_assistant_tokens_mask=True)` finds them (SFT_SEMANTICS §2).
// kOverlap (default; transformers >= 5.24): every token whose offsets overlap a span.
// kCharToToken (transformers 4.57.1, the users' version under TRL 0.25.1; 5.0–5.23 mark tokens by
//   the same rule): per span, the tokens from char_to_token(first character) to
//   char_to_token(last character), each the FIRST token holding that character — so when the
//   span's last character is split into several byte tokens, only the first of them is an
//   assistant token; with its quirks: a span whose first
//   character is in no token ends the marking (no later span is marked), a last character in
//   token 0 or in none marks to the end of the sequence, and the generation blocks rendered before
//   the template output anything (all of them, where a macro renders the whole conversation) are
//   no spans (4.57.1's tracker is not active yet).
enum class AssistantMask { kOverlap, kCharToToken };

// Under CompletionMask::kPositional, what to do when tok(prompt) is not a prefix of
// tok(prompt + completion): kWarn (default) keeps the positional mask and reports the rows (as
// TRL ≤ 1.9 warns); kError fails naming the rows.
enum class PrefixMismatch { kWarn, kError };

// What truncation to max_length keeps (TRL `truncation_mode`, applied to ids and labels after the
// masks are built): the first max_length tokens (kKeepStart, the default) or the last max_length
// (kKeepEnd; TRL 1.16 deprecates it, TRL 0.25 lacks it). With packing, TRL keeps the start
// whatever the mode, and so does zerotune.
enum class TruncationMode { kKeepStart, kKeepEnd };

// The users' own prompt formatting. kChat: a plain-string prompt is rendered by the chat template
// as one user turn with add_generation_prompt=true, the EOS string is appended to the completion,
// and the row is then treated as plain prompt/completion.
enum class PromptFormat { kNone, kChat };

// Parse "prefix"/"positional", "overlap"/"char_to_token", "warn"/"error", "none"/"chat" and
// "keep_start"/"keep_end"; throw zt::Error naming `key`, the value and the choices.
CompletionMask parse_completion_mask(std::string_view value,
                                     std::string_view key = "completion_mask");
AssistantMask parse_assistant_mask(std::string_view value, std::string_view key = "assistant_mask");
PrefixMismatch parse_prefix_mismatch(std::string_view value,
                                     std::string_view key = "prefix_mismatch");
PromptFormat parse_prompt_format(std::string_view value, std::string_view key = "prompt_format");
TruncationMode parse_truncation_mode(std::string_view value,
                                     std::string_view key = "truncation_mode");
std::string_view to_string(CompletionMask v);
std::string_view to_string(AssistantMask v);
std::string_view to_string(PrefixMismatch v);
std::string_view to_string(PromptFormat v);
std::string_view to_string(TruncationMode v);

// How errors about a dataset and its options name them the way the run config does (cli/
// data_setup fills it). Empty (a test, a library caller): the file alone and TRL's option names.
// Changes no output, so it is not part of the cache key.
struct ConfigNames {
  std::string source;       // the config file ("sft.yaml")
  std::string split;        // "train" or "eval"
  std::string dataset_key;  // the key that names the file ("dataset.eval.path")
  // TRL option name ("prompt_format") -> {the config key as the user writes it
  // ("dataset.prompt_format"), where its value came from (RunConfig::where: " (given on the
  // command line)", or how it was implied and how to change it; "" when set in the file)}.
  std::map<std::string, std::pair<std::string, std::string>, std::less<>> options;
  // TRL option name -> "FILE:LINE" of the config file that holds its key (RunConfig::key_at; a
  // config group's file, or the primary), where one does; absent: `source`.
  std::map<std::string, std::string, std::less<>> at;

  // "FILE:LINE: KEY" (or "SOURCE: KEY") of TRL option `option` ("KEY" without a source; `option`
  // itself when unknown): how a message about the option begins.
  std::string key(std::string_view option) const;
  // The option's key as a message names it after the first key: "KEY (FILE:LINE)" where a file
  // holds it, else KEY with the where-suffix (RunConfig::key_ref).
  std::string ref(std::string_view option) const;
  // The config key alone ("dataset.prompt_format"), or `option` when unknown.
  std::string bare_key(std::string_view option) const;
  // The option's where-suffix (see `options`), or "".
  std::string where(std::string_view option) const;
  // "FILE (the SPLIT set, DATASET_KEY)", or FILE when the split is not known.
  std::string dataset(const std::filesystem::path& file) const;
};

struct DataOptions {
  std::filesystem::path dataset;             // .jsonl, .json, .parquet or .csv
  std::string dataset_text_field = "text";   // TRL `dataset_text_field`
  std::optional<int64_t> max_length = 1024;  // tokens; nullopt or 0 = no truncation
  bool packing = false;                      // TRL `packing`
  std::string packing_strategy = "bfd";      // only "bfd" is implemented
  // TRL packs inside each `datasets.map(batched=True)` batch, 1000 rows by default; bins never
  // mix rows of different groups. 0 = one group per shard.
  int64_t packing_group_size = 1000;
  // TRL `dataset_num_proc` (null/0: 1): the map that packs splits the rows into this many
  // contiguous shards first (packing_group_starts), so it changes the bins.
  int64_t dataset_num_proc = 1;
  std::optional<bool> completion_only_loss;  // nullopt = auto: true for prompt/completion data
  // The auto value as TRL decides it for an eval set: SFTTrainer.__init__ sets an unset
  // completion_only_loss once, from the train dataset's row 0 ("prompt" and "completion" in it;
  // a JSON row 0 has every column some row has, as read_rows gives it),
  // and uses it for the eval set too. nullopt (a train set, or no train report): the dataset's own
  // row 0 decides.
  std::optional<bool> completion_only_loss_from_train;
  bool assistant_only_loss = false;          // needs a template with {% generation %} blocks
  // false for an eval set (eval_options): TRL's SFTTrainer refuses assistant_only_loss on data
  // that is not conversational by the train set's row 0 alone; an eval set of another kind is
  // tokenised without assistant masks (every token its kind's rules leave is scored).
  bool train_set = true;
  std::optional<std::string> eos_token;      // overrides tokenizer_config's eos_token
  std::optional<std::string> chat_template;  // template source; overrides tokenizer_config's
  std::string chat_template_name;            // where chat_template came from, for errors
  // TRL `chat_template_path`: a .jinja/.j2 file, or a tokenizer whose template (and EOS) replace
  // the tokenizer's; resolved by prepare (data/chat_template_path.h). Exclusive with chat_template.
  std::string chat_template_path;
  // Extra template variables for every render (TRL `chat_template_kwargs`, a JSON object); a
  // row's own `chat_template_kwargs` column is merged over them, key by key.
  Json chat_template_kwargs = Json::object();
  PromptFormat prompt_format = PromptFormat::kNone;
  CompletionMask completion_mask = CompletionMask::kPrefix;
  AssistantMask assistant_mask = AssistantMask::kOverlap;  // used with assistant_only_loss only
  PrefixMismatch prefix_mismatch = PrefixMismatch::kWarn;  // used with kPositional only
  TruncationMode truncation_mode = TruncationMode::kKeepStart;
  std::filesystem::path cache_dir;  // empty = default_cache_dir()
  int num_threads = 0;              // tokenisation threads; 0 = OpenMP's default
  ConfigNames names;                // for errors only (not hashed)
};

// Where token caches go when DataOptions::cache_dir is empty: $ZEROTUNE_CACHE_DIR, else
// $XDG_CACHE_HOME/zerotune, else $HOME/.cache/zerotune, else ./.zerotune_cache. Caches are keyed
// by the content of every input, so one directory is safely shared by runs and experiments.
std::filesystem::path default_cache_dir();

}  // namespace zt::data
