// Pre-tokenised datasets: rows that carry their token ids in an `input_ids` column, trained as
// they are, as TRL 0.25.1 trains a "processed" dataset (`SFTTrainer._prepare_dataset`:
// `is_processed = "input_ids" in column_names` skips the EOS and tokenisation; truncation and
// packing then apply as to any dataset) with the labels of its collator
// (`DataCollatorForLanguageModeling.torch_call`).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "data/data_options.h"
#include "data/sft_tokenize.h"
#include "io/json.h"
#include "text/tokenizer.h"

namespace zt::data {

// Which columns of a pre-tokenised dataset make its targets, decided once from row 0 and the
// options, as TRL's collator decides from the first example of each batch (every row of an Arrow
// dataset has every column, and so has every row read_rows gives: a column some row has is in
// row 0, null if row 0 lacks it, and then read — a null where it is read is an error):
// - labels: the `labels` column instead of `input_ids` when row 0 has one, except under packing,
//   whose `select_columns(["input_ids", "completion_mask", "assistant_masks"])` drops it;
// - completion mask: applied when completion_only_loss (unset: row 0 has both `prompt` and
//   `completion`, TRL's default — an `input_ids` + `completion_mask` row alone trains every token)
//   and row 0 has `completion_mask`;
// - assistant mask: applied whenever row 0 has `assistant_masks`, whatever assistant_only_loss.
// Every other column (attention_mask, position_ids, seq_lengths, token_type_ids, text columns) is
// not read, as TRL's collator reads none of them.
struct PretokenisedFormat {
  bool labels = false;           // read the `labels` column
  bool completion_mask = false;  // apply the `completion_mask` column
  bool assistant_masks = false;  // apply the `assistant_masks` column
  int32_t vocab_size = 0;  // token ids must lie in [0, vocab_size) (the tokenizer's)
  std::string tokenizer;   // the tokenizer's directory, for errors
};

// Decides the format from row 0 (an object with `input_ids`) and `opts`, checks the options and
// says what it does: an info line naming the columns read and those that are not; a warning for a
// `completion_mask` column that is not applied (completion_only_loss false or unset without
// prompt/completion columns), a `labels` column dropped by packing, a `seq_lengths` column (each
// row is one sequence), completion_only_loss: true without a `completion_mask` column,
// assistant_only_loss: true without an `assistant_masks` column, and prompt_format: chat (the
// rows are not formatted). Throws zt::Error, naming the option as the config writes it
// (opts.names): an eos_token that is not a token of `tokenizer` (TRL checks it for any data);
// assistant_only_loss: true when row 0 has no conversational column (prompt, completion or
// messages holding a list of messages), as TRL 0.25.1 raises.
PretokenisedFormat pretokenised_format(const Json& first_row, const DataOptions& opts,
                                       const text::Tokenizer& tokenizer,
                                       const text::TokenizerConfig& config);

// One pre-tokenised row, checked, as an example: ids = input_ids; targets[t] = 1 where TRL's label
// is the token (labels[t] is not -100, the masks that apply are 1). Throws zt::Error
// "FILE: row R: column 'C'…" (FILE may be FILE:LINE) for: a missing or null column the format
// reads (null: fail_missing_value's error); a value that is not a list; an empty input_ids; an id
// that is not an integer (floats, booleans, null, strings: TRL's embedding takes integer ids only)
// or lies outside [0, vocab_size); a mask or labels list of another length than input_ids (naming
// both); a mask value other than 0 or 1 (integers, booleans, 0.0 / 1.0); a label other than -100 or
// the input id at its position (zerotune trains the input ids; a label can only mask one).
// `attention_mask_zeros` is set when the row's `attention_mask` (not read) holds a 0.
struct PretokenisedRow {
  TokenizedExample ex;
  bool attention_mask_zeros = false;
};
PretokenisedRow pretokenised_example(const Json& row, const PretokenisedFormat& format,
                                     int64_t row_index, std::string_view file);

}  // namespace zt::data
