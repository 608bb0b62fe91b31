// Formatting and tokenisation of checked SFT rows into input ids and per-token target flags
// (SFT_SEMANTICS §2; TRL `SFTTrainer._prepare_dataset`'s add_eos / tokenize_fn / build_labels).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/data_options.h"
#include "data/sft_rows.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace zt::data {

// One tokenised example before truncation.
struct TokenizedExample {
  std::vector<int32_t> ids;      // [T] input ids
  std::vector<uint8_t> targets;  // [T] 1 where HF's label is ids[t], 0 where it is -100
  bool prefix_mismatch = false;  // prompt/completion: tok(prompt) is not a prefix of ids
                                 // (for either completion mask)
};

// The assistant mask of one rendered chat (assistant_only_loss): [T] 1 for the tokens of `enc`
// (the tokens of r.text, with byte offsets) that `rule` finds in r's `{% generation %}` byte
// spans, else 0 — AssistantMask::kOverlap as transformers >= 5.24 `apply_chat_template(
// return_assistant_tokens_mask=True)`, kCharToToken as transformers 4.57.1's, its quirks included
// (data_options.h; and the blocks rendered before any output are no assistant spans there:
// RenderResult::spans_before_output).
std::vector<uint8_t> assistant_mask(const text::Encoding& enc, const text::RenderResult& r,
                                    AssistantMask rule);

// Turns SftRows of one dataset into TokenizedExamples (any kind but kPreTokenised, whose rows
// data/pretokenised.h reads). Thread-safe (const); construct once.
class SftFormatter {
 public:
  // Resolves the EOS string (opts.eos_token, which must be a token of the vocabulary, as TRL
  // checks; else the config's), the chat template (opts.chat_template, else the config's; needed by
  // conversational data and prompt_format: chat) and completion_only_loss (auto: true for
  // prompt/completion data). Throws zt::Error for: no EOS for plain data that gets one appended
  // (language modelling from a dataset_text_field other than "text" gets none, so needs none; its
  // eos_token() is then empty), an EOS string that is
  // not a token, no chat template where one is needed, assistant_only_loss on non-conversational
  // data or with a template without {% generation %} blocks (naming the template), prompt_format:
  // chat on data that is not plain prompt/completion. completion_only_loss: true on data without a
  // prompt gets a warning (it has no effect there, in TRL 0.25.1 either). Each names the dataset
  // file (with its split and key, opts.names) and the option as the config writes it, with where
  // its value came from, e.g.
  //   "sft.yaml: dataset.prompt_format: chat needs plain-string 'prompt' and 'completion'
  //   columns, but eval.jsonl (the eval set, dataset.eval.path) is conversational language
  //   modeling data (given on the command line)".
  SftFormatter(const DataOptions& opts, const DatasetFormat& format,
               const text::Tokenizer& tokenizer, const text::TokenizerConfig& config);
  SftFormatter(SftFormatter&&) noexcept;
  ~SftFormatter();

  // Formats and tokenises one row:
  // EOS as TRL's add_eos (0.25.1 and 1.x), which appends it to a column named "text", else to
  // "completion":
  // - plain prompt/completion: completion += eos unless it already ends with it or the row has a
  //   string `text` column that does not end with it (eos_on_text_column: TRL puts the EOS there
  //   instead); ids =
  //   tok(prompt + completion), prompt_ids = tok(prompt), both with add_special_tokens=true as
  //   TRL's `processing_class(text=…)` (so a post-processor BOS is added, once per call);
  // - prompt_format chat: prompt = render([{user, prompt}], add_generation_prompt=true).text,
  //   completion + eos (always), then as plain prompt/completion;
  // - conversational prompt/completion: prompt_ids = tok(render(prompt, add_generation_prompt=
  //   true)), ids = tok(render(prompt + completion)), special tokens recognised, none added;
  //   template variables as transformers (text::chat_template_context, with the row's `tools`);
  // - language modelling: text += eos unless present or dataset_text_field is not "text" (TRL's
  //   add_eos never touches another column), ids = tok(text, add_special_tokens=true);
  // - conversational language modelling: ids = tok(render(messages)).
  // Completion mask (opts.completion_mask): kPrefix (TRL 1.16) [0]*c + [1]*(len(ids) - c) with c
  // the length of the common prefix of prompt_ids and ids; kPositional (TRL <= 1.9)
  // [0]*len(prompt_ids) + [1]*(len(ids) - len(prompt_ids)). Every render gets the template
  // variables opts.chat_template_kwargs with the row's chat_template_kwargs merged over them.
  // Assistant mask (assistant_only_loss): assistant_mask() of the render with opts.assistant_mask
  // (default: every token whose byte range overlaps a {% generation %} span, transformers >= 5.24;
  // char_to_token: transformers 4.57.1's rule). targets = AND of the
  // applicable masks (completion mask only with completion_only_loss), else all 1.
  TokenizedExample format(const SftRow& row) const;

  // Plain prompt/completion: whether TRL's add_eos gives this row's EOS to its `text` column
  // instead of the completion (`"text" in example and not text.endswith(eos)` is tested first).
  bool eos_on_text_column(const SftRow& row) const {
    return row.text_column && !row.text_column->ends_with(eos_);
  }

  const std::string& eos_token() const { return eos_; }
  bool completion_only_loss() const { return completion_only_loss_; }
  // Where the chat template came from ("the chat_template option" or the config's origin).
  const std::string& chat_template_name() const { return template_name_; }

 private:
  // Renders `messages` with the template transformers would pick (the "tool_use" named template
  // for rows with the row's tools, when the tokenizer has one), its template variables and the
  // chat_template_kwargs (the config's, the row's over them).
  text::RenderResult render(const Json& messages, bool add_generation_prompt,
                            const SftRow& row) const;

  const text::Tokenizer* tok_;
  DatasetFormat format_;
  DataOptions opts_;
  text::TokenizerConfig cfg_;  // eos_token replaced by the effective EOS
  std::string eos_;
  bool completion_only_loss_ = false;
  std::optional<text::ChatTemplate> template_;           // the default one
  std::optional<text::ChatTemplate> tool_use_template_;  // for rows with tools, if any
  std::string template_name_;
};

}  // namespace zt::data
