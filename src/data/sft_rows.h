// SFT dataset kinds (SFT_SEMANTICS §1) and the per-row checks that turn a raw dataset row into the
// strings / message lists the formatter tokenises. Nothing here needs a tokenizer.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/data_options.h"
#include "io/json.h"

namespace zt::data {

enum class DatasetKind {
  kPromptCompletion,                // prompt: str, completion: str
  kConversationalPromptCompletion,  // prompt: [messages], completion: [messages]
  kLanguageModeling,                // text: str (or dataset_text_field)
  kConversationalLanguageModeling,  // messages: [messages], or ShareGPT conversations
  kPreTokenised,                    // input_ids: [ids] (data/pretokenised.h), whatever else
};
// "prompt/completion", "conversational prompt/completion", "language modeling",
// "conversational language modeling", "pre-tokenised".
std::string_view to_string(DatasetKind kind);
inline bool is_prompt_completion(DatasetKind k) {
  return k == DatasetKind::kPromptCompletion || k == DatasetKind::kConversationalPromptCompletion;
}
inline bool is_conversational(DatasetKind k) {
  return k == DatasetKind::kConversationalPromptCompletion ||
         k == DatasetKind::kConversationalLanguageModeling;
}

// How the rows of one dataset are read.
struct DatasetFormat {
  DatasetKind kind = DatasetKind::kLanguageModeling;
  std::string text_field = "text";  // language modelling, plain: the text column
  bool sharegpt = false;            // messages come from `conversations` with from/value
};

// Throws zt::Error "WHERE: row R: column 'C' is missing or null, expected EXPECTED (…)": a row
// has no value where its kind needs one. Under HF datasets a JSON row lacking a key other rows
// have reads as null (read_rows), and TRL fails on it; parquet and csv nulls are the same.
[[noreturn]] void fail_missing_value(std::string_view where, int64_t row, std::string_view column,
                                     std::string_view expected);

// Detects the kind from the columns of the first row — which, as read_rows gives it and as TRL
// sees `next(iter(dataset))`, has every column of the file, null where row 0 lacks it — in this
// order (TRL's rules, except that a `prompt` without `completion` but with `messages` is read as
// messages, where TRL fails):
// `input_ids` (pre-tokenised, whatever other columns the row has: TRL's `is_processed`),
// `prompt`+`completion` (conversational when `prompt` is a list), `messages`, `conversations`
// whose first element has `from` and `value` (ShareGPT), the text field; a null `messages` is
// passed over (TRL's is_conversational is false there). Throws zt::Error naming the expected and
// the found columns when none matches (and the `left_out` columns read_rows did not read,
// "NAME (TYPE)"), the column whose type is wrong, or (fail_missing_value) a null `prompt` beside a
// `completion` column or a null `messages` with no text column. `file` names row 0 in messages:
// the file, or FILE:LINE.
DatasetFormat detect_format(const Json& first_row, const DataOptions& opts, std::string_view file,
                            std::span<const std::string> left_out = {});

// Why a row yields no training example.
enum class DropReason {
  kEmptyCompletion,          // completion "" (plain) or [] (conversational): skipped
  kEmptyText,                // text "": skipped
  kEmptyMessages,            // messages []: skipped
  kNoTarget,                 // no target token at any position t >= 1 (before truncation)
  kNoTargetAfterTruncation,  // targets existed but all were beyond max_length
};
inline constexpr int kNumDropReasons = 5;
std::string_view to_string(DropReason r);  // "empty_completion", …, "no_target_after_truncation"

// One row, checked and ready to format. Plain kinds use the strings (language modelling: `text`
// in `completion`); conversational kinds the message arrays (language modelling: the messages in
// `completion_messages`). Messages are arrays of objects as the chat template receives them
// (TRL passes them as they are): any string `role`, a `content` of any JSON type (a string, a list
// of content parts such as [{"type": "text", "text": …}], …), other keys kept; every message but
// the first may lack either (extract_row).
struct SftRow {
  std::string prompt, completion;
  Json prompt_messages, completion_messages;
  Json tools;  // the row's `tools` (a JSON string is parsed), or null
  // The row's `chat_template_kwargs` (an object of extra template variables, TRL's column of
  // that name; a JSON string is parsed), or null.
  Json chat_template_kwargs;
  // Plain prompt/completion: the row's string `text` column, if it has one. TRL's add_eos tests
  // "text" before "completion": such a column takes the EOS instead of the completion unless it
  // already ends with it (SftFormatter::eos_on_text_column).
  std::optional<std::string> text_column;
};

// TRL's clean-up of each row before formatting (`_prepare_dataset`'s
// `dataset.with_transform(remove_none_values)`, trl/trainer/utils.py): in every object *inside* a
// column value — messages, tool calls and their arguments, `tools` schemas, chat_template_kwargs —
// keys whose value is null are removed, at any depth; null list elements and a column that is
// itself null stay (the transform runs on a batch, whose columns are lists). Parquet writes null
// for a struct field a row lacks (one struct type per column), so without this a tool call renders
// every other row's argument names as `null`. In place; `row` need not be an object.
void remove_none_values(Json& row);

// A checked row, and whether it is skipped before tokenising (an empty completion, text or
// messages). A skipped row still holds its strings / messages: with packing, prepare.cpp formats
// it for the tokens it takes in TRL's bins (a stand-in), since TRL 0.25.1 tokenises and packs it.
struct ExtractedRow {
  SftRow row;
  std::optional<DropReason> skipped;  // kEmptyCompletion, kEmptyText or kEmptyMessages
};

// Checks row `row_index` (0-based) against `format` (not kPreTokenised: pretokenised_example
// reads those rows) and extracts it; ShareGPT messages are
// converted (from→role: human→user, gpt→assistant, any other value kept; value→content). An
// empty completion / text / messages sets `skipped` (the row is still extracted). Throws
// zt::Error "FILE: row R: …" for a missing column, a null one the kind needs
// (fail_missing_value), a value of the wrong type (`chat_template_kwargs` not an object, a
// message that is no object, a role that is no string), or a message list whose first message
// has no role or no content (absent or null; TRL's is_conversational fails such a row). `file`
// names the row in messages: the file, or FILE:LINE.
ExtractedRow extract_row(const Json& row, const DatasetFormat& format, int64_t row_index,
                         std::string_view file);

}  // namespace zt::data
