// Pre-tokenised rows (TRL 0.25.1's processed datasets): format from row 0, per-row checks, targets
// by the rule of DataCollatorForLanguageModeling.torch_call.
#include "data/pretokenised.h"

#include <fmt/ranges.h>

#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "data/sft_rows.h"

namespace zt::data {
namespace {

// The columns the format may read, besides input_ids.
constexpr const char* kLabels = "labels";
constexpr const char* kCompletionMask = "completion_mask";
constexpr const char* kAssistantMasks = "assistant_masks";

// "1.5 (a float)", "true (a boolean)", "null", "\"7\" (a string)", "[…] (a list)" for messages.
std::string describe(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_number_float()) return fmt::format("{} (a float)", v.dump());
  if (v.is_boolean()) return fmt::format("{} (a boolean)", v.dump());
  if (v.is_string()) return fmt::format("{} (a string)", v.dump());
  if (v.is_array()) return "a list";
  if (v.is_object()) return "an object";
  return v.dump();
}

// TRL's `is_conversational` on row 0: a prompt, completion or messages column holding a list
// whose first element is an object with role and content (TRL looks at one of those keys, picked
// by set order; any of them here).
bool has_conversational_column(const Json& row) {
  for (const char* key : {"prompt", "completion", "messages", "chosen", "rejected"}) {
    const auto it = row.find(key);
    if (it == row.end() || !it->is_array() || it->empty()) continue;
    const Json& m = (*it)[0];
    if (m.is_object() && m.contains("role") && m.contains("content")) return true;
  }
  return false;
}

// The list in column `column` of row r, which must be present, not null and a list (an absent key
// reads as null: a JSON row lacking a column other rows have, see read_rows).
const Json& list_column(const Json& row, const char* column, int64_t r, std::string_view file,
                        const char* what) {
  const auto it = row.find(column);
  if (it == row.end() || it->is_null()) fail_missing_value(file, r, column, what);
  if (!it->is_array())
    fail("{}: row {}: column '{}' is {}, expected {}", file, r, column, describe(*it), what);
  return *it;
}

// Mask column `column` of row r as 0/1 flags, one per token.
std::vector<uint8_t> mask_column(const Json& row, const char* column, size_t n, int64_t r,
                                 std::string_view file) {
  const Json& v = list_column(row, column, r, file, "a list of 0/1 flags, one per token");
  if (v.size() != n) {
    fail("{}: row {}: column '{}' has {} values but 'input_ids' has {}; expected one per token",
         file, r, column, v.size(), n);
  }
  std::vector<uint8_t> out(n);
  for (size_t k = 0; k < n; ++k) {
    const Json& e = v[k];
    if (e.is_boolean()) {
      out[k] = e.get<bool>() ? 1 : 0;
    } else if (e.is_number_integer() && (e == 0 || e == 1)) {
      out[k] = e == 1 ? 1 : 0;
    } else if (e.is_number_float() && (e.get<double>() == 0.0 || e.get<double>() == 1.0)) {
      out[k] = e.get<double>() == 1.0 ? 1 : 0;
    } else {
      fail("{}: row {}: column '{}', element {} is {}, expected 0 or 1", file, r, column, k,
           e.is_number_integer() ? e.dump() : describe(e));
    }
  }
  return out;
}

// Warns about an option or a column that changes nothing on these rows.
void warn_unused(const std::string& dataset, const std::string& what) {
  log::warn("{} (pre-tokenised): {}", dataset, what);
}

}  // namespace

PretokenisedFormat pretokenised_format(const Json& first, const DataOptions& opts,
                                       const text::Tokenizer& tokenizer,
                                       const text::TokenizerConfig& config) {
  const ConfigNames& names = opts.names;
  const std::string dataset = names.dataset(opts.dataset);
  if (opts.eos_token && !tokenizer.token_to_id(*opts.eos_token)) {
    fail("{}: '{}' is not a token of the tokenizer in {}{}", names.key("eos_token"),
         *opts.eos_token, config.dir.string(), names.where("eos_token"));
  }
  PretokenisedFormat f;
  f.vocab_size = tokenizer.vocab_size();
  f.tokenizer = config.dir.string();
  // SFTTrainer.__init__: completion_only_loss unset is "prompt" and "completion" in the first row
  // of the train set (for an eval set: the train set's decision).
  const bool completion_only_loss =
      opts.completion_only_loss.value_or(opts.completion_only_loss_from_train.value_or(
          first.contains("prompt") && first.contains("completion")));
  f.completion_mask = completion_only_loss && first.contains(kCompletionMask);
  f.assistant_masks = first.contains(kAssistantMasks);
  f.labels = !opts.packing && first.contains(kLabels);

  // The train set's row 0 alone is checked (SFTTrainer.__init__); the assistant_masks column
  // applies whatever the option says.
  if (opts.assistant_only_loss && opts.train_set && !has_conversational_column(first)) {
    fail(
        "{}: true needs conversational data (messages), but {} is pre-tokenised data ('input_ids') "
        "without a column of messages, which TRL 0.25.1 refuses too; pre-tokenised rows carry "
        "their assistant mask in an 'assistant_masks' column, applied whatever {} says{}",
        names.key("assistant_only_loss"), dataset, names.bare_key("assistant_only_loss"),
        names.where("assistant_only_loss"));
  }
  if (opts.assistant_only_loss && !f.assistant_masks) {
    warn_unused(
        dataset,
        fmt::format("{}: true has no effect without an 'assistant_masks' column: every "
                    "token is trained, as in TRL 0.25.1, which does not tokenise these "
                    "rows{}",
                    names.bare_key("assistant_only_loss"), names.where("assistant_only_loss")));
  }
  if (first.contains(kCompletionMask) && !f.completion_mask) {
    warn_unused(
        dataset,
        fmt::format("the 'completion_mask' column is not applied: {} is {}, so every token (of "
                    "the labels) is trained, as TRL 0.25.1's collator trains it; set {}: true "
                    "to apply it",
                    names.bare_key("completion_only_loss"),
                    opts.completion_only_loss ? "false"
                    : opts.completion_only_loss_from_train
                        ? "unset and the train set's row 0 has no 'prompt' and 'completion' "
                          "columns (TRL decides it on the train set for both)"
                        : "unset and the rows have no 'prompt' and 'completion' columns",
                    names.bare_key("completion_only_loss")));
  }
  if (opts.completion_only_loss.value_or(false) && !first.contains(kCompletionMask)) {
    warn_unused(
        dataset,
        fmt::format("{}: true has no effect without a 'completion_mask' column: every "
                    "token is trained, as in TRL 0.25.1{}",
                    names.bare_key("completion_only_loss"), names.where("completion_only_loss")));
  }
  if (opts.packing && first.contains(kLabels)) {
    warn_unused(dataset,
                fmt::format("the 'labels' column is not read under {}: TRL 0.25.1 packs only "
                            "input_ids, completion_mask and assistant_masks, so the labels are "
                            "the input ids (with those masks), and so are zerotune's",
                            names.bare_key("packing")));
  }
  if (!opts.packing && first.contains("seq_lengths")) {
    warn_unused(dataset,
                "the 'seq_lengths' column is not read: each row is one sequence (positions from 0, "
                "attention across the whole row), as TRL 0.25.1 trains it without padding_free; "
                "with padding_free: true TRL would restart the positions at each length, which "
                "zerotune does not");
  }
  if (opts.prompt_format == PromptFormat::kChat) {
    warn_unused(dataset,
                fmt::format("{}: chat has no effect: the rows are trained as they are, as TRL "
                            "0.25.1 skips all formatting of rows with 'input_ids'{}",
                            names.bare_key("prompt_format"), names.where("prompt_format")));
  }
  std::vector<std::string> read = {"input_ids"}, not_read;
  for (const auto& [key, value] : first.items()) {
    if (key == "input_ids") continue;
    const bool used = (key == kLabels && f.labels) ||
                      (key == kCompletionMask && f.completion_mask) ||
                      (key == kAssistantMasks && f.assistant_masks);
    (used ? read : not_read).push_back(key);
  }
  log::info(
      "{}: pre-tokenised rows: targets from {}; columns not read (as TRL 0.25.1's collator): "
      "{}",
      dataset, fmt::join(read, ", "),
      not_read.empty() ? std::string("none") : fmt::format("{}", fmt::join(not_read, ", ")));
  return f;
}

PretokenisedRow pretokenised_example(const Json& row, const PretokenisedFormat& f, int64_t r,
                                     std::string_view file) {
  if (!row.is_object()) fail("{}: row {} is {}, expected an object", file, r, row.type_name());
  const Json& ids = list_column(row, "input_ids", r, file, "a list of token ids");
  if (ids.empty()) {
    fail(
        "{}: row {}: column 'input_ids' is an empty list; a pre-tokenised row needs at least one "
        "token id",
        file, r);
  }
  const size_t n = ids.size();
  PretokenisedRow out;
  out.ex.ids.resize(n);
  for (size_t k = 0; k < n; ++k) {
    const Json& e = ids[k];
    if (!e.is_number_integer()) {
      fail("{}: row {}: column 'input_ids', element {} is {}, expected an integer token id", file,
           r, k, describe(e));
    }
    const bool in_range = e.is_number_unsigned()
                              ? e.get<uint64_t>() < static_cast<uint64_t>(f.vocab_size)
                              : e.get<int64_t>() >= 0 && e.get<int64_t>() < f.vocab_size;
    if (!in_range) {
      fail(
          "{}: row {}: column 'input_ids', element {} is {}, outside the vocabulary [0, {}) of "
          "the tokenizer in {}",
          file, r, k, e.dump(), f.vocab_size, f.tokenizer);
    }
    out.ex.ids[k] = static_cast<int32_t>(e.get<int64_t>());
  }
  out.ex.targets.assign(n, 1);
  if (f.labels) {
    const Json& labels = list_column(row, kLabels, r, file, "a list of labels, one per token");
    if (labels.size() != n) {
      fail(
          "{}: row {}: column 'labels' has {} values but 'input_ids' has {}; expected one per "
          "token",
          file, r, labels.size(), n);
    }
    for (size_t k = 0; k < n; ++k) {
      const Json& e = labels[k];
      if (e.is_number_integer() && e == -100) {
        out.ex.targets[k] = 0;
      } else if (!(e.is_number_integer() && e == out.ex.ids[k])) {
        fail(
            "{}: row {}: column 'labels', element {} is {}, expected -100 or {}, the input id at "
            "that position: zerotune trains the input ids (the loss shifts them by one), so a "
            "label can mask a token but not replace it",
            file, r, k, e.is_number_integer() ? e.dump() : describe(e), out.ex.ids[k]);
      }
    }
  }
  if (f.completion_mask) {
    const std::vector<uint8_t> m = mask_column(row, kCompletionMask, n, r, file);
    for (size_t k = 0; k < n; ++k) out.ex.targets[k] &= m[k];
  }
  if (f.assistant_masks) {
    const std::vector<uint8_t> m = mask_column(row, kAssistantMasks, n, r, file);
    for (size_t k = 0; k < n; ++k) out.ex.targets[k] &= m[k];
  }
  if (const auto it = row.find("attention_mask"); it != row.end() && it->is_array()) {
    for (const Json& e : *it) {
      if (e.is_number() && e == 0) {
        out.attention_mask_zeros = true;
        break;
      }
    }
  }
  return out;
}

}  // namespace zt::data
