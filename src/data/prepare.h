// `prepare_dataset`: dataset file → checked rows → formatted, tokenised, masked, truncated (and
// packed) examples → token cache on disk → a memory-mapped PreparedDataset. The entry point of
// `zerotune prepare` and of training start-up (SFT_SEMANTICS §1–2).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "data/data_options.h"
#include "data/token_cache.h"
#include "io/json.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace zt::data {

// The version of the token pipeline (formatting, tokenisation, masks): part of the token cache key,
// and recorded in a checkpoint's zerotune_state.json ("data_pipeline") so that a resume under
// another version is told (train/resume_checks.h). Bump when a change to this layer changes the
// tokens or masks it produces for the same inputs. 3: config special tokens added; 4: EOS placed
// as TRL's add_eos (only a "text" column; not a completion beside one); 5: null-valued keys inside
// column values removed as TRL's remove_none_values, and tokenizer_config.json's add_bos_token /
// add_eos_token applied to the Llama-family tokenizer classes (text::apply_config_post_processor);
// 6: a row 0 with an `input_ids` column makes the dataset pre-tokenised whatever its other columns
// (TRL's is_processed), so a dataset with `text` / `prompt`+`completion` / `messages` beside
// `input_ids` is trained from the ids, no longer from the text; 7: a JSON row 0 has every column of
// the file, null where it lacks one (HF datasets' json loader), so a column first given after row 0
// counts in row 0's decisions (prompt+completion: the kind and completion_only_loss; a
// pre-tokenised row 0 lacking labels / completion_mask / assistant_masks other rows have: read, and
// an error); 8: packing groups are map batches of dataset rows (dropped rows included) inside TRL's
// dataset_num_proc shards, so a dropped row no longer moves the group boundaries of the rows after
// it; 9: with packing, a row skipped for an empty completion or text takes the tokens TRL 0.25.1
// gives it in the bin packing (a stand-in, as a row without a target), so the kept rows after it
// land in TRL's bins; 10: CSV rows as datasets 4.8.5 + pandas read them (types per 10,000-row chunk
// cast to the first chunk's, header names mangled, NA spellings, short rows, whitespace lines).
inline constexpr std::string_view kPipelineVersion = "zerotune-sft-data-10";

// The fields of the PrepareReport a token cache stores: part of the cache key beside
// kPipelineVersion (which names the tokens, and so stays when only the report gains a field), so
// that a cache whose report lacks a field is built again rather than read. 2: trl_num_samples.
inline constexpr std::string_view kCacheReportVersion = "zerotune-cache-report-2";

// What a preparation did. Counts are of dataset rows / examples; tokens after truncation.
struct PrepareReport {
  std::string dataset_kind;                // to_string(DatasetKind)
  int64_t rows_read = 0;                   // rows in the dataset file
  int64_t examples_kept = 0;               // examples in the cache
  std::map<std::string, int64_t> dropped;  // to_string(DropReason) → rows (every reason listed)
  int64_t truncated = 0;                   // kept examples cut to max_length
  int64_t total_tokens = 0;                // tokens of the kept examples
  int64_t target_tokens = 0;               // positions t >= 1 with a target (loss terms)
  int64_t length_p50 = 0, length_p90 = 0, length_p99 = 0,
          length_max = 0;         // tokens per example,
                                  // nearest-rank percentiles of the kept examples
  int64_t num_samples = 0;        // packed bins, or examples without packing
  // The length of TRL 0.25.1's prepared dataset (SFTTrainer._prepare_dataset), by which
  // transformers rates {train,eval}_samples_per_second (len(train_dataset) / len(eval_dataset)):
  // without packing every row TRL tokenises (the rows zerotune drops included, those TRL fails on
  // not); with packing its bfd bins of them (bins holding only dropped rows included). Where TRL
  // fails on rows, the length TRL gives the file without them.
  int64_t trl_num_samples = 0;
  // Row 0 of the file has "prompt" and "completion" columns — for JSON, some row has each, as
  // HF datasets gives row 0 every column (TRL's completion_only_loss default of a run, decided on
  // its train set); nullopt from a cache written before it was recorded.
  std::optional<bool> prompt_and_completion_in_row_0;
  int64_t prefix_mismatches = 0;  // prompt/completion rows whose prompt ids are no prefix
  std::vector<int64_t> prefix_mismatch_rows;  // their rows (the first 100)
  std::string completion_mask;                // "prefix" or "positional"
  double build_seconds = 0;                   // time the build took (when the cache was written)
  double seconds = 0;                         // time of this prepare_dataset call
  bool from_cache = false;                    // this process did not build it, only mapped it
  // The cache file was there (and valid) at this call's first look, before any wait for another
  // process's build: what summary() calls "reused".
  bool cache_existed = false;
  // Who built the cache in this run, where the caller knows ("rank 1" of a launch: the trainer
  // sets it); empty: this process where it built it, else another process (it was not there at
  // the first look).
  std::string built_by;
  std::filesystem::path cache_file;

  Json to_json() const;
  static PrepareReport from_json(const Json& j);
  // A few human-readable lines for the CLI; the last says how the cache came about: "built"
  // (by this process), "built by <built_by>", "built by another process", or "reused" (it
  // existed before: cache_existed, and built_by empty), with the build's seconds, or this call's
  // when reused.
  std::string summary() const;
  std::string cache_status() const;  // summary()'s word for the cache: "built", "reused", …
  bool reused() const;               // cache_status() is "reused"
};

// The cache key: XXH3-128 of the pipeline and report versions, tokenizer.json (and
// tokenizer_config.json, chat_template.jinja / .json when present) from `config.dir`, the resolved
// chat template, named templates and special tokens, the dataset file's bytes and every option that
// changes the output (dataset_text_field, max_length, packing, packing_strategy,
// packing_group_size, completion_only_loss, assistant_only_loss, eos_token, chat_template,
// prompt_format, completion_mask, chat_template_kwargs, truncation_mode; assistant_mask with
// assistant_only_loss). cache_dir, num_threads, chat_template_name, names, prefix_mismatch (and
// assistant_mask without assistant_only_loss) do not change the output and are not hashed.
// Throws zt::Error naming a file that cannot be read.
CacheKey dataset_cache_key(const DataOptions& opts, const text::TokenizerConfig& config);

// `<cache_dir or default_cache_dir()>/<dataset file stem>-<key hex>.ztc`; a stem longer than 160
// bytes is cut (at a UTF-8 character boundary) and tagged with a hash of the whole stem, so the
// name and its temporary sibling stay within NAME_MAX (255 bytes) whatever the dataset is called.
std::filesystem::path cache_file_path(const DataOptions& opts, const CacheKey& key);

// The options of an eval set prepared after its train set (whose report is `train`): an unset
// completion_only_loss takes the train set's decision (completion_only_loss_from_train), as TRL
// decides it once for both; set, or without the train report's record, `eval` unchanged.
DataOptions eval_options(const DataOptions& eval, const PrepareReport& train);

// Runs the whole pipeline in memory (no cache): reads the rows, detects the kind, formats and
// tokenises on opts.num_threads threads — or, for pre-tokenised rows, checks them and builds their
// targets (data/pretokenised.h) — (output order = row order whatever the thread count),
// drops empty rows and examples without a target token, truncates to max_length (truncation_mode),
// packs (bfd) when asked. `report` (optional) receives the counts. Throws zt::Error for bad input
// (see read_rows, detect_format, extract_row, SftFormatter, pretokenised_format /
// pretokenised_example), prefix mismatches under
// completion_mask: positional with prefix_mismatch: error, an
// unsupported packing_strategy, packing without max_length (these two naming their config keys,
// opts.names), and a dataset left with no example.
TokenData build_token_data(const DataOptions& opts, const text::Tokenizer& tokenizer,
                           const text::TokenizerConfig& config, PrepareReport* report = nullptr);

// Returns the prepared dataset, from the cache when its key matches, else built with
// build_token_data and written to the cache (atomically, once across concurrent ranks; see
// open_or_build_cache). `report` (optional) gets the build's counts plus from_cache,
// cache_existed and seconds.
// Errors as build_token_data; nothing is left in the cache directory on error but the
// `<file>.lock` file.
PreparedDataset prepare_dataset(const DataOptions& opts, const text::Tokenizer& tokenizer,
                                const text::TokenizerConfig& config,
                                PrepareReport* report = nullptr);

}  // namespace zt::data
