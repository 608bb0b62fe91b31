// prepare_dataset: rows → SftFormatter (OpenMP over rows) → drop/truncate → pack → token cache.
#include "data/prepare.h"

#include <fmt/ranges.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "data/chat_template_path.h"
#include "data/packing.h"
#include "data/pretokenised.h"
#include "data/rows.h"
#include "data/sft_rows.h"
#include "data/sft_tokenize.h"

namespace zt::data {
namespace {

constexpr size_t kMaxListedRows = 100;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::optional<int64_t> effective_max_length(const DataOptions& o) {
  if (o.max_length && *o.max_length > 0) return o.max_length;
  return std::nullopt;
}

// The longest dataset file stem a cache file name keeps whole: the name `<stem>-<32 hex>.ztc` and
// its temporary sibling `<name>.tmp.<pid>.<16 hex>` (write_file_atomic) then stay within NAME_MAX
// (255 bytes) for a pid of 7 digits: 160 + 37 + 29 = 226.
constexpr size_t kMaxCacheStemBytes = 160;

// `dataset_stem` when at most kMaxCacheStemBytes long; else its first bytes (cut at a UTF-8
// character boundary) + "~" + 16 hex digits of an XXH3-128 hash of the whole stem, at most
// kMaxCacheStemBytes in all. (The cache key already hashes the dataset's bytes; the tag keeps
// datasets whose long names share a prefix apart in a listing of the cache directory.)
std::string cache_file_stem(const std::string& dataset_stem) {
  if (dataset_stem.size() <= kMaxCacheStemBytes) return dataset_stem;
  KeyHasher h;
  h.add("dataset stem", dataset_stem);
  const std::string tag = "~" + h.finish().hex().substr(0, 16);
  size_t cut = kMaxCacheStemBytes - tag.size();
  while (cut > 0 && (static_cast<unsigned char>(dataset_stem[cut]) & 0xC0) == 0x80) --cut;
  return dataset_stem.substr(0, cut) + tag;
}

// TRL truncates by truncation_mode only without packing; packing (bfd) keeps the start of every
// sequence whatever the mode.
TruncationMode effective_truncation_mode(const DataOptions& o) {
  return o.packing ? TruncationMode::kKeepStart : o.truncation_mode;
}

// Nearest-rank percentile of sorted values.
int64_t percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

bool has_target_from_1(const std::vector<uint8_t>& targets, size_t end) {
  for (size_t t = 1; t < end && t < targets.size(); ++t) {
    if (targets[t]) return true;
  }
  return false;
}

// Keeps the first (keep_start) or the last (keep_end) `max_len` tokens of ids and targets (TRL
// `truncate_dataset`: `input_ids[:max_length]` / `input_ids[-max_length:]`, the masks alike).
void truncate(TokenizedExample* ex, size_t max_len, TruncationMode mode) {
  if (mode == TruncationMode::kKeepEnd) {
    const auto cut = static_cast<std::ptrdiff_t>(ex->ids.size() - max_len);
    ex->ids.erase(ex->ids.begin(), ex->ids.begin() + cut);
    ex->targets.erase(ex->targets.begin(), ex->targets.begin() + cut);
  } else {
    ex->ids.resize(max_len);
    ex->targets.resize(max_len);
  }
}

// "3, 7, 9" — the rows listed — with ", …" when `count` rows were found and fewer listed.
std::string listed_rows(const std::vector<int64_t>& rows, int64_t count) {
  return fmt::format("{}{}", fmt::join(rows, ", "),
                     count > static_cast<int64_t>(rows.size()) ? ", …" : "");
}

// Rows a check found: how many, and the first kMaxListedRows of them.
struct FoundRows {
  int64_t count = 0;
  std::vector<int64_t> rows;
  void add(int64_t r) {
    ++count;
    if (rows.size() < kMaxListedRows) rows.push_back(r);
  }
  std::string listed() const { return listed_rows(rows, count); }
};

struct RowResult {
  TokenizedExample ex;
  int drop = -1;  // a DropReason, or -1
  // Packing: the tokens of a row skipped before tokenising (empty completion / text) as TRL
  // 0.25.1 tokenises it (trl_tokenises_skipped_row); nullopt when not tokenised.
  std::optional<size_t> skipped_tokens;
  bool trl_fails = false;             // a skipped row TRL 0.25.1 cannot tokenise
  bool eos_on_text = false;           // SftFormatter::eos_on_text_column
  bool attention_mask_zeros = false;  // pre-tokenised: an unread attention_mask holds a 0
};

// Whether TRL 0.25.1 tokenises (and so packs) row `x`, which zerotune skips before tokenising. Its
// tokenize_fn calls trl.data_utils.is_conversational(example), which reads `example[key][0]` of a
// list-valued key: an empty `messages` list (ShareGPT `conversations` are renamed `messages` first)
// raises IndexError, so TRL fails on such a row and it has no place in TRL's bins. A
// conversational prompt/completion row with `completion: []` is read at the key that Python's set
// `{"prompt", "completion"}.pop()` gives (the string hash, random per process): on "completion"
// TRL fails the same way, on "prompt" it tokenises the prompt rendered alone and packs it (the run
// zerotune's bins follow) unless the prompt is empty too. A plain empty completion (EOS appended
// by add_eos) and an empty text (EOS appended to a `text` column) are tokenised as any row.
bool trl_tokenises_skipped_row(const DatasetFormat& format, const ExtractedRow& x) {
  if (x.skipped == DropReason::kEmptyMessages) return false;
  return !(format.kind == DatasetKind::kConversationalPromptCompletion &&
           x.row.prompt_messages.empty());
}

// SFTTrainer.__init__ (TRL 0.25.1): `"image" in dataset_sample or "images" in dataset_sample`,
// the train set's first row as loaded (every column, null ones too) — a ValueError for a model
// that is not a vision-language model, which zerotune's models never are. A parquet column
// read_rows leaves out (an HF Image struct holds binary) still counts: `datasets` has it.
void refuse_vision_columns(const Json& row0, const std::vector<std::string>& left_out,
                           const std::string& file) {
  for (const char* col : {"image", "images"}) {
    const std::string prefix = std::string(col) + " (";
    const bool in_left_out =
        std::any_of(left_out.begin(), left_out.end(),
                    [&](const std::string& c) { return c.starts_with(prefix); });
    if (row0.contains(col) || in_left_out)
      fail(
          "{}: column '{}': a vision dataset; zerotune trains text-only models (TRL 0.25.1 refuses "
          "it too "
          "for a model that is not a vision-language model: \"The dataset appears to be "
          "vision-related "
          "(contains 'image' or 'images' keys)\"). Remove the column from the file to train on the "
          "text",
          file, col);
  }
}

}  // namespace

Json PrepareReport::to_json() const {
  Json j = Json::object();
  j["dataset_kind"] = dataset_kind;
  j["rows_read"] = rows_read;
  j["examples_kept"] = examples_kept;
  j["dropped"] = Json::object();
  for (const auto& [k, v] : dropped) j["dropped"][k] = v;
  j["truncated"] = truncated;
  j["total_tokens"] = total_tokens;
  j["target_tokens"] = target_tokens;
  j["length_p50"] = length_p50;
  j["length_p90"] = length_p90;
  j["length_p99"] = length_p99;
  j["length_max"] = length_max;
  j["num_samples"] = num_samples;
  j["trl_num_samples"] = trl_num_samples;
  j["prefix_mismatches"] = prefix_mismatches;
  j["prefix_mismatch_rows"] = prefix_mismatch_rows;
  j["completion_mask"] = completion_mask;
  j["build_seconds"] = build_seconds;
  j["seconds"] = seconds;
  if (prompt_and_completion_in_row_0)
    j["prompt_and_completion_in_row_0"] = *prompt_and_completion_in_row_0;
  j["from_cache"] = from_cache;
  j["cache_file"] = cache_file.string();
  return j;
}

PrepareReport PrepareReport::from_json(const Json& j) {
  PrepareReport r;
  r.dataset_kind = j.value("dataset_kind", "");
  r.rows_read = j.value("rows_read", int64_t{0});
  r.examples_kept = j.value("examples_kept", int64_t{0});
  if (j.contains("dropped")) {
    for (const auto& [k, v] : j["dropped"].items()) r.dropped[k] = v.get<int64_t>();
  }
  r.truncated = j.value("truncated", int64_t{0});
  r.total_tokens = j.value("total_tokens", int64_t{0});
  r.target_tokens = j.value("target_tokens", int64_t{0});
  r.length_p50 = j.value("length_p50", int64_t{0});
  r.length_p90 = j.value("length_p90", int64_t{0});
  r.length_p99 = j.value("length_p99", int64_t{0});
  r.length_max = j.value("length_max", int64_t{0});
  r.num_samples = j.value("num_samples", int64_t{0});
  // Every report read has it: a cache without it has another key (kCacheReportVersion).
  r.trl_num_samples = j.value("trl_num_samples", r.num_samples);
  r.prefix_mismatches = j.value("prefix_mismatches", int64_t{0});
  if (j.contains("prefix_mismatch_rows")) {
    r.prefix_mismatch_rows = j["prefix_mismatch_rows"].get<std::vector<int64_t>>();
  }
  r.completion_mask = j.value("completion_mask", "");
  r.build_seconds = j.value("build_seconds", 0.0);
  r.seconds = j.value("seconds", 0.0);
  if (j.contains("prompt_and_completion_in_row_0"))
    r.prompt_and_completion_in_row_0 = j["prompt_and_completion_in_row_0"].get<bool>();
  r.from_cache = j.value("from_cache", false);
  r.cache_file = j.value("cache_file", "");
  return r;
}

std::string PrepareReport::summary() const {
  std::vector<std::string> drops;
  for (const auto& [k, v] : dropped) {
    if (v > 0) drops.push_back(fmt::format("{} {}", v, k));
  }
  return fmt::format(
      "dataset: {} rows ({}), {} examples kept, dropped: {}; {} kept examples truncated to "
      "max_length\n"
      "tokens: {} total, {} targets; example length p50 {} p90 {} p99 {} max {}\n"
      "samples: {} (TRL 0.25.1's dataset length: {}){}\n"
      "cache: {} ({}, {:.2f} s)",
      rows_read, dataset_kind, examples_kept,
      drops.empty() ? "none" : fmt::format("{}", fmt::join(drops, ", ")), truncated, total_tokens,
      target_tokens, length_p50, length_p90, length_p99, length_max, num_samples, trl_num_samples,
      // Pre-tokenised rows have no prompt to tokenise apart: no prefix check, no text mask.
      dataset_kind == "pre-tokenised" ? std::string()
                                      : fmt::format("; prefix mismatches: {} (completion mask: {})",
                                                    prefix_mismatches, completion_mask),
      cache_file.string(), cache_status(), reused() ? seconds : build_seconds);
}

bool PrepareReport::reused() const { return built_by.empty() && from_cache && cache_existed; }

std::string PrepareReport::cache_status() const {
  if (!built_by.empty()) return "built by " + built_by;
  if (!from_cache) return "built";
  return cache_existed ? "reused" : "built by another process";
}

CacheKey dataset_cache_key(const DataOptions& given, const text::TokenizerConfig& config) {
  const DataOptions opts = with_chat_template_path(given, nullptr);  // the template's text counts
  KeyHasher h;
  h.add("pipeline", kPipelineVersion);
  h.add("report", kCacheReportVersion);
  h.add_file("tokenizer.json", config.dir / "tokenizer.json");
  // tokenizer_config.json is optional (a tokenizer.json alone: text::TokenizerConfig).
  for (const char* extra : {"tokenizer_config.json", "chat_template.jinja", "chat_template.json"}) {
    std::error_code ec;
    if (std::filesystem::exists(config.dir / extra, ec)) h.add_file(extra, config.dir / extra);
  }
  const auto opt_str = [](const std::optional<std::string>& s) { return s ? Json(*s) : Json(); };
  Json resolved = Json::object();
  resolved["chat_template"] =
      opts.chat_template ? Json(*opts.chat_template) : opt_str(config.chat_template);
  resolved["eos_token"] = opts.eos_token ? Json(*opts.eos_token) : opt_str(config.eos_token);
  // Every template variable transformers passes, and every template it may pick.
  resolved["bos_token"] = opt_str(config.bos_token);
  // The class transformers loads decides the BOS / EOS of plain rows (it may come from
  // config.json).
  resolved["tokenizer_class"] = opt_str(config.tokenizer_class);
  resolved["pad_token"] = opt_str(config.pad_token);
  resolved["unk_token"] = opt_str(config.unk_token);
  resolved["sep_token"] = opt_str(config.sep_token);
  resolved["cls_token"] = opt_str(config.cls_token);
  resolved["mask_token"] = opt_str(config.mask_token);
  resolved["named_templates"] = Json::array();
  for (const auto& [name, source] : config.named_templates) {
    resolved["named_templates"].push_back(Json::array({name, source}));
  }
  resolved["dataset_text_field"] = opts.dataset_text_field;
  const auto max_len = effective_max_length(opts);
  resolved["max_length"] = max_len ? Json(*max_len) : Json();
  resolved["packing"] = opts.packing;
  resolved["packing_strategy"] = opts.packing ? Json(opts.packing_strategy) : Json();
  resolved["packing_group_size"] = opts.packing ? Json(opts.packing_group_size) : Json();
  resolved["dataset_num_proc"] = opts.packing ? Json(opts.dataset_num_proc) : Json();
  resolved["completion_only_loss"] =
      opts.completion_only_loss ? Json(*opts.completion_only_loss) : Json();
  // Only an eval set's key has it (a train set's key is as before).
  if (!opts.completion_only_loss && opts.completion_only_loss_from_train)
    resolved["completion_only_loss_from_train"] = *opts.completion_only_loss_from_train;
  resolved["assistant_only_loss"] = opts.assistant_only_loss;
  // An eval set that is not conversational is tokenised without the option, where a train set is
  // refused: their files must never be taken for each other (other keys are as before).
  if (opts.assistant_only_loss && !opts.train_set) resolved["eval_set"] = true;
  resolved["prompt_format"] = std::string(to_string(opts.prompt_format));
  resolved["completion_mask"] = std::string(to_string(opts.completion_mask));
  // The rule acts with assistant_only_loss only; other keys are as before it existed.
  if (opts.assistant_only_loss)
    resolved["assistant_mask"] = std::string(to_string(opts.assistant_mask));
  resolved["chat_template_kwargs"] = opts.chat_template_kwargs;
  resolved["truncation_mode"] = std::string(to_string(effective_truncation_mode(opts)));
  h.add("options", resolved.dump());
  h.add_file("dataset", opts.dataset);
  return h.finish();
}

DataOptions eval_options(const DataOptions& eval, const PrepareReport& train) {
  DataOptions o = eval;
  o.train_set = false;
  if (!o.completion_only_loss)
    o.completion_only_loss_from_train = train.prompt_and_completion_in_row_0;
  return o;
}

std::filesystem::path cache_file_path(const DataOptions& opts, const CacheKey& key) {
  const std::filesystem::path dir = opts.cache_dir.empty() ? default_cache_dir() : opts.cache_dir;
  return dir / fmt::format("{}-{}.ztc", cache_file_stem(opts.dataset.stem().string()), key.hex());
}

TokenData build_token_data(const DataOptions& given, const text::Tokenizer& tokenizer,
                           const text::TokenizerConfig& config, PrepareReport* report) {
  const auto t0 = std::chrono::steady_clock::now();
  const DataOptions opts = with_chat_template_path(given, &tokenizer);
  const std::string file = opts.dataset.string();
  const auto max_len = effective_max_length(opts);
  const ConfigNames& names = opts.names;
  if (opts.packing && opts.packing_strategy != "bfd") {
    fail("{}: '{}' is not supported; zerotune implements 'bfd'{}", names.key("packing_strategy"),
         opts.packing_strategy, names.where("packing_strategy"));
  }
  if (opts.packing && !max_len) {
    fail("{}: true{} needs {} (the bin size), got none", names.key("packing"),
         names.where("packing"), names.ref("max_length"));
  }

  std::vector<std::string> left_out;  // parquet columns of a type not read, for the kind error
  std::vector<int64_t> lines;         // JSON: each row's line
  std::vector<Json> rows = read_rows(opts.dataset, &left_out, &lines);
  if (rows.empty()) fail("{}: the dataset has no rows", file);
  // Where row r is, for its errors: FILE:LINE for JSON, else FILE.
  const auto where = [&](int64_t r) {
    return lines.empty() ? file : fmt::format("{}:{}", file, lines[static_cast<size_t>(r)]);
  };
  if (names.split != "eval") refuse_vision_columns(rows[0], left_out, names.dataset(opts.dataset));
  const int threads = opts.num_threads > 0 ? opts.num_threads : omp_get_max_threads();
#pragma omp parallel for schedule(dynamic, 64) num_threads(threads)
  for (size_t r = 0; r < rows.size(); ++r) remove_none_values(rows[r]);  // as TRL, before all else
  // SFTTrainer.__init__'s completion_only_loss default: "prompt" and "completion" in the first
  // row, which has every column of the file (null where row 0 lacks it: read_rows).
  const bool row0_prompt_and_completion =
      rows[0].contains("prompt") && rows[0].contains("completion");
  const DatasetFormat format = detect_format(rows[0], opts, where(0), left_out);
  // Text rows are formatted and tokenised; pre-tokenised rows only checked (TRL's is_processed).
  std::optional<SftFormatter> formatter;
  std::optional<PretokenisedFormat> pretokenised;
  if (format.kind == DatasetKind::kPreTokenised) {
    pretokenised = pretokenised_format(rows[0], opts, tokenizer, config);
  } else {
    formatter.emplace(opts, format, tokenizer, config);
  }

  // Format and tokenise in parallel; results land at their row index, so the order is fixed.
  const auto n = static_cast<int64_t>(rows.size());
  std::vector<RowResult> results(rows.size());
  int64_t err_row = INT64_MAX;
  std::string err_msg;
#pragma omp parallel for schedule(dynamic, 8) num_threads(threads)
  for (int64_t r = 0; r < n; ++r) {
    try {
      if (pretokenised) {
        PretokenisedRow p = pretokenised_example(rows[r], *pretokenised, r, where(r));
        results[r].ex = std::move(p.ex);
        results[r].attention_mask_zeros = p.attention_mask_zeros;
      } else if (const ExtractedRow x = extract_row(rows[r], format, r, where(r)); !x.skipped) {
        results[r].eos_on_text = formatter->eos_on_text_column(x.row);
        results[r].ex = formatter->format(x.row);
      } else {
        results[r].drop = static_cast<int>(*x.skipped);
        // TRL packs the row: its tokens stand in for it in the bin packing (see below).
        // TRL's tokenize_fn fails on it, packed or not (is_conversational comes first).
        results[r].trl_fails = !trl_tokenises_skipped_row(format, x);
        if (opts.packing && !results[r].trl_fails) {
          try {
            results[r].skipped_tokens = formatter->format(x.row).ids.size();
          } catch (const std::exception& e) {
            throw Error(fmt::format(
                "{} (the row is skipped for its {}, but with packing it is still formatted and "
                "tokenised, as TRL 0.25.1 does, for the place it takes in TRL's bins)",
                e.what(), to_string(*x.skipped)));
          }
        }
      }
    } catch (const std::exception& e) {
#pragma omp critical(zt_prepare_first_error)
      if (r < err_row) err_row = r, err_msg = e.what();
    }
    rows[r] = Json();  // free the row as soon as it is consumed
  }
  if (err_row != INT64_MAX) {
    // Row-level errors already name the file; formatter errors (templates) get the row added.
    if (err_msg.find(file) == std::string::npos)
      err_msg = fmt::format("{}: row {}: {}", where(err_row), err_row, err_msg);
    throw Error(err_msg);
  }
  rows.clear();
  rows.shrink_to_fit();

  PrepareReport rep;
  rep.dataset_kind = std::string(to_string(format.kind));
  rep.prompt_and_completion_in_row_0 = row0_prompt_and_completion;
  rep.rows_read = n;
  int64_t drops[kNumDropReasons] = {};
  std::vector<int64_t> kept;  // row indices, in order
  // Packing: the tokens a dropped row takes in TRL's bins (TRL packs every row it can tokenise;
  // truncated to max_length as its bfd truncates), 0 for a kept row, a row TRL fails on (empty
  // messages) or one of no tokens.
  std::vector<int64_t> standin(opts.packing ? static_cast<size_t>(n) : 0, 0);
  FoundRows no_tokens;  // packing: dropped rows of no tokens, which TRL's bfd fails on
  const auto note_standin = [&](int64_t r, size_t tokens) {
    if (!opts.packing || !max_len) return;
    standin[static_cast<size_t>(r)] = std::min(static_cast<int64_t>(tokens), *max_len);
    if (tokens == 0) no_tokens.add(r);
  };
  FoundRows eos_on_text;       // the EOS went to a text column
  FoundRows padded;            // pre-tokenised rows whose attention_mask (not read) holds a 0
  FoundRows trl_fails;         // skipped rows TRL fails on (empty lists)
  FoundRows empty_conv_compl;  // other conversational rows with `completion: []`
  for (int64_t r = 0; r < n; ++r) {
    RowResult& res = results[r];
    if (res.eos_on_text && opts.prompt_format != PromptFormat::kChat) eos_on_text.add(r);
    if (res.attention_mask_zeros) padded.add(r);
    if (res.drop >= 0) {
      ++drops[res.drop];
      if (res.skipped_tokens) note_standin(r, *res.skipped_tokens);
      if (res.trl_fails)
        trl_fails.add(r);
      else if (format.kind == DatasetKind::kConversationalPromptCompletion &&
               res.drop == static_cast<int>(DropReason::kEmptyCompletion))
        empty_conv_compl.add(r);
      continue;
    }
    TokenizedExample& ex = res.ex;
    if (ex.prefix_mismatch) {
      ++rep.prefix_mismatches;
      if (rep.prefix_mismatch_rows.size() < kMaxListedRows) rep.prefix_mismatch_rows.push_back(r);
    }
    if (!has_target_from_1(ex.targets, ex.targets.size())) {
      ++drops[static_cast<int>(DropReason::kNoTarget)];
      note_standin(r, ex.ids.size());
      ex = {};
      continue;
    }
    if (max_len && static_cast<int64_t>(ex.ids.size()) > *max_len) {
      truncate(&ex, static_cast<size_t>(*max_len), effective_truncation_mode(opts));
      if (!has_target_from_1(ex.targets, ex.targets.size())) {
        ++drops[static_cast<int>(DropReason::kNoTargetAfterTruncation)];
        note_standin(r, ex.ids.size());
        ex = {};
        continue;
      }
      ++rep.truncated;
    }
    kept.push_back(r);
  }
  for (int k = 0; k < kNumDropReasons; ++k) {
    rep.dropped[std::string(to_string(static_cast<DropReason>(k)))] = drops[k];
  }
  rep.completion_mask = std::string(to_string(opts.completion_mask));
  // Under the prefix mask a merge token is simply a target (TRL 1.16 says nothing); the positional
  // mask reports the rows as TRL <= 1.9 warns.
  if (rep.prefix_mismatches > 0 && opts.completion_mask == CompletionMask::kPositional) {
    const auto msg = fmt::format(
        "{}: {} example(s): the tokenized prompt is not a prefix of the tokenized "
        "prompt+completion (rows {}); the completion mask stays positional",
        file, rep.prefix_mismatches, listed_rows(rep.prefix_mismatch_rows, rep.prefix_mismatches));
    if (opts.prefix_mismatch == PrefixMismatch::kError) fail("{} (prefix_mismatch: error)", msg);
    log::warn("{} (prefix_mismatch: warn)", msg);
  }
  if (eos_on_text.count > 0) {
    log::warn(
        "{}: {} row(s) have a 'text' column beside 'prompt' and 'completion' (rows {}): TRL's "
        "add_eos appends the EOS to 'text' instead of the completion, and so does zerotune: "
        "those completions end without it",
        file, eos_on_text.count, eos_on_text.listed());
  }
  if (padded.count > 0) {
    log::warn(
        "{}: {} pre-tokenised row(s) have an 'attention_mask' with zeros (rows {}): TRL 0.25.1's "
        "collator does not read attention_mask, so those tokens (padding?) are trained as any "
        "other, and so does zerotune; remove padding from the rows, or mask it with -100 labels",
        file, padded.count, padded.listed());
  }
  if (trl_fails.count > 0) {
    const char* lists = format.kind == DatasetKind::kConversationalPromptCompletion
                            ? "an empty 'prompt' and an empty 'completion' list"
                        : format.sharegpt ? "an empty 'conversations' list"
                                          : "an empty 'messages' list";
    log::warn(
        "{}: {} row(s) have {} (rows {}): TRL 0.25.1 fails on such a row (IndexError in "
        "trl.data_utils.is_conversational, which its tokenize_fn calls){}",
        file, trl_fails.count, lists, trl_fails.listed(),
        opts.packing ? ", so it has no place in TRL's bins; zerotune skips it and leaves it out "
                       "of the bin packing"
                     : "; zerotune skips it (dropped and counted)");
  }
  if (empty_conv_compl.count > 0) {
    log::warn(
        "{}: {} conversational row(s) have an empty 'completion' list (rows {}): TRL 0.25.1 "
        "fails on such a row when Python's string hash makes is_conversational read "
        "'completion' (IndexError; random per process), else it {}",
        file, empty_conv_compl.count, empty_conv_compl.listed(),
        opts.packing
            ? "packs the prompt rendered alone, with a completion_mask longer than its ids, which "
              "shifts TRL's masks of the examples packed after it; zerotune skips the row and "
              "keeps its place in the bins as that rendering"
            : "keeps the prompt rendered alone as an example with no target token (its "
              "completion_mask, longer than its ids, masks them all; TRL's collator fails on a "
              "micro-batch where that mask is longer than every row's ids); zerotune skips the "
              "row (dropped and counted)");
  }
  if (no_tokens.count > 0) {
    log::warn(
        "{}: {} row(s) tokenise to no tokens (rows {}): TRL 0.25.1's bfd packing fails on an "
        "empty sequence (AssertionError in trl.data_utils._SegmentTree.search); zerotune skips "
        "them and leaves them out of the bin packing",
        file, no_tokens.count, no_tokens.listed());
  }
  if (kept.empty()) {
    std::vector<std::string> parts;
    for (const auto& [k, v] : rep.dropped) {
      if (v > 0) parts.push_back(fmt::format("{} {}", v, k));
    }
    fail("{}: no example left out of {} rows (dropped: {})", file, n, fmt::join(parts, ", "));
  }

  // Sample order: packed bins, or one example per sample in row order. TRL packs each map batch
  // of rows separately (packing_group_starts); the groups are of dataset rows, dropped rows
  // included, as TRL drops none before it packs. A row dropped for having no target still takes
  // its tokens in the bin packing (a stand-in, removed from its bin after; a bin left empty is no
  // sample), so each kept row lands in the bin TRL puts it in: TRL's bins less the dropped rows.
  // A row skipped before tokenising (empty completion / text) stands in with the tokens TRL gives
  // it; one TRL fails on (empty messages, no tokens) is left out of the packing.
  std::vector<std::vector<int64_t>> samples;  // indices into `kept`
  // TRL's dataset length (PrepareReport::trl_num_samples): its bins, those of dropped rows alone
  // included, or its rows.
  int64_t trl_samples = 0;
  if (opts.packing) {
    const std::vector<int64_t> starts =
        packing_group_starts(n, opts.dataset_num_proc, opts.packing_group_size);
    // Every group, those without a kept row too (their bins count in TRL's length).
    for (size_t grp = 0, k = 0; grp < starts.size(); ++grp) {
      // The group's rows [lo, hi): kept ones (their index into `kept`) and stand-ins (-1).
      const int64_t lo = starts[grp];
      const int64_t hi = grp + 1 < starts.size() ? starts[grp + 1] : n;
      std::vector<int64_t> lengths, index;
      for (int64_t r = lo; r < hi; ++r) {
        if (k < kept.size() && kept[k] == r) {
          lengths.push_back(static_cast<int64_t>(results[r].ex.ids.size()));
          index.push_back(static_cast<int64_t>(k++));
        } else if (standin[static_cast<size_t>(r)] > 0) {
          lengths.push_back(standin[static_cast<size_t>(r)]);
          index.push_back(-1);
        }
      }
      for (const auto& bin : pack_bfd(lengths, *max_len)) {
        ++trl_samples;
        std::vector<int64_t> sample;
        for (const int64_t i : bin)
          if (const int64_t e = index[static_cast<size_t>(i)]; e >= 0) sample.push_back(e);
        if (!sample.empty()) samples.push_back(std::move(sample));
      }
    }
  } else {
    samples.reserve(kept.size());
    for (size_t i = 0; i < kept.size(); ++i) samples.push_back({static_cast<int64_t>(i)});
    trl_samples = n - trl_fails.count;  // TRL keeps every row it can tokenise
  }

  TokenData out;
  std::vector<int64_t> lengths;
  lengths.reserve(kept.size());
  for (const auto& sample : samples) {
    for (const int64_t k : sample) {
      TokenizedExample& ex = results[kept[static_cast<size_t>(k)]].ex;
      out.ids.insert(out.ids.end(), ex.ids.begin(), ex.ids.end());
      out.targets.insert(out.targets.end(), ex.targets.begin(), ex.targets.end());
      out.example_offsets.push_back(static_cast<int64_t>(out.ids.size()));
      out.example_rows.push_back(kept[static_cast<size_t>(k)]);
      lengths.push_back(static_cast<int64_t>(ex.ids.size()));
      for (size_t t = 1; t < ex.targets.size(); ++t) rep.target_tokens += ex.targets[t];
      ex = {};
    }
    out.sample_offsets.push_back(static_cast<int64_t>(out.example_rows.size()));
  }
  std::sort(lengths.begin(), lengths.end());
  rep.examples_kept = static_cast<int64_t>(kept.size());
  rep.total_tokens = static_cast<int64_t>(out.ids.size());
  rep.length_p50 = percentile(lengths, 50);
  rep.length_p90 = percentile(lengths, 90);
  rep.length_p99 = percentile(lengths, 99);
  rep.length_max = lengths.back();
  rep.num_samples = static_cast<int64_t>(samples.size());
  rep.trl_num_samples = trl_samples;
  rep.build_seconds = seconds_since(t0);
  out.report = rep.to_json();
  if (report != nullptr) *report = rep;
  return out;
}

PreparedDataset prepare_dataset(const DataOptions& given, const text::Tokenizer& tokenizer,
                                const text::TokenizerConfig& config, PrepareReport* report) {
  const auto t0 = std::chrono::steady_clock::now();
  const DataOptions opts = with_chat_template_path(given, &tokenizer);
  const CacheKey key = dataset_cache_key(opts, config);
  const std::filesystem::path file = cache_file_path(opts, key);
  bool built = false, existed = false;
  PreparedDataset ds = open_or_build_cache(
      file, key,
      [&] {
        TokenData d = build_token_data(opts, tokenizer, config);
        d.report["cache_file"] = file.string();
        return d;
      },
      &built, &existed);
  if (report != nullptr) {
    *report = PrepareReport::from_json(ds.stored_report());
    report->from_cache = !built;
    report->cache_existed = existed;
    report->cache_file = file;
    report->seconds = seconds_since(t0);
  }
  return ds;
}

}  // namespace zt::data
