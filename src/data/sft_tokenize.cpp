// SFT formatting + tokenisation, following TRL `SFTTrainer._prepare_dataset` (add_eos,
// tokenize_fn, build_labels) and transformers `apply_chat_template(return_assistant_tokens_mask)`.
#include "data/sft_tokenize.h"

#include <algorithm>
#include <span>

#include "core/error.h"
#include "core/log.h"
#include "text/unicode.h"

namespace zt::data {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

using Spans = std::vector<std::pair<size_t, size_t>>;

// AssistantMask::kOverlap, transformers >= 5.24 `apply_chat_template(return_assistant_tokens_mask=
// True)`: a token is an assistant token when its [begin, end) overlaps a generation span; spans
// and offsets are both in increasing order. Byte offsets give what its character offsets give:
// both hold whole characters.
std::vector<uint8_t> overlap_mask(const text::Encoding& enc, const Spans& spans) {
  std::vector<uint8_t> mask(enc.ids.size(), 0);
  size_t s = 0;
  for (size_t t = 0; t < enc.offsets.size(); ++t) {
    const auto [begin, end] = enc.offsets[t];
    while (s < spans.size() && begin >= spans[s].second) ++s;
    if (s == spans.size()) break;
    if (end > spans[s].first) mask[t] = 1;
  }
  return mask;
}

// HF `tokenizers` Encoding.char_to_token for the character starting at byte `b`: the first token
// whose [begin, end) holds it, or none (past the text, or a character no token covers, e.g. one
// trim_offsets cut away). Token offsets hold whole characters, so the character's first byte
// decides as its character index does in HF.
std::optional<size_t> char_to_token(const text::Encoding& enc, size_t b) {
  for (size_t t = 0; t < enc.offsets.size(); ++t) {
    if (enc.offsets[t].first <= b && b < enc.offsets[t].second) return t;
  }
  return std::nullopt;
}

// AssistantMask::kCharToToken, transformers 4.57.1 `apply_chat_template(return_assistant_tokens_
// mask=True)` (tokenization_utils_base.py), on byte offsets of `text`: for each span in order,
// start = char_to_token(its first character), end = char_to_token(its last character); start
// none: stop (no later span is marked); else mark [start, end] — or [start, T) when end is 0 or
// none (Python's `end_token + 1 if end_token else len(input_ids)`). A span's last character is
// found from its end byte (its first byte: char_begin), so a character split into several byte
// tokens ends the span at the first of them. An empty span at byte 0 marks nothing, where
// transformers calls char_to_token(-1) and raises OverflowError (a template that outputs an empty
// string first, then an empty assistant reply; TRL would fail on that row).
std::vector<uint8_t> char_to_token_mask(const text::Encoding& enc, std::string_view text,
                                        std::span<const std::pair<size_t, size_t>> spans) {
  const size_t n = enc.ids.size();
  std::vector<uint8_t> mask(n, 0);
  for (const auto& [first, last] : spans) {
    if (last == 0) continue;
    const std::optional<size_t> start = char_to_token(enc, first);
    const std::optional<size_t> end = char_to_token(enc, text::unicode::char_begin(text, last - 1));
    if (!start) break;
    const size_t stop = end && *end != 0 ? *end + 1 : n;
    for (size_t t = *start; t < stop; ++t) mask[t] = 1;
  }
  return mask;
}

}  // namespace

std::vector<uint8_t> assistant_mask(const text::Encoding& enc, const text::RenderResult& r,
                                    AssistantMask rule) {
  if (rule == AssistantMask::kOverlap) return overlap_mask(enc, r.generation_spans);
  // transformers 4.57's tracker did not record the blocks rendered before any output.
  std::span<const std::pair<size_t, size_t>> spans = r.generation_spans;
  spans = spans.subspan(std::min(r.spans_before_output, spans.size()));
  return char_to_token_mask(enc, r.text, spans);
}

SftFormatter::SftFormatter(const DataOptions& opts, const DatasetFormat& format,
                           const text::Tokenizer& tokenizer, const text::TokenizerConfig& config)
    : tok_(&tokenizer), format_(format), opts_(opts), cfg_(config) {
  const DatasetKind kind = format.kind;
  const bool plain = !is_conversational(kind);
  const ConfigNames& names = opts.names;
  const std::string dataset = names.dataset(opts.dataset);
  // TRL's add_eos appends the EOS to a "text" column only: language-modelling data read from
  // another dataset_text_field gets none, so it needs none (TRL trains it without an eos_token).
  const bool appends_eos =
      plain && !(kind == DatasetKind::kLanguageModeling && format.text_field != "text");
  if (opts.eos_token) {
    if (!tokenizer.token_to_id(*opts.eos_token)) {
      fail("{}: '{}' is not a token of the tokenizer in {}{}", names.key("eos_token"),
           *opts.eos_token, config.dir.string(), names.where("eos_token"));
    }
    eos_ = *opts.eos_token;
    cfg_.eos_token = eos_;  // TRL sets tokenizer.eos_token, which templates then see
  } else if (config.eos_token) {
    eos_ = *config.eos_token;
  } else if (appends_eos && config.has_config_file) {
    fail("{}/tokenizer_config.json has no eos_token, which {} ({} data) needs; set {}",
         config.dir.string(), dataset, to_string(kind), names.bare_key("eos_token"));
  } else if (appends_eos) {
    fail(
        "{} has no tokenizer_config.json (only tokenizer.json), so no eos_token, which {} ({} "
        "data) needs; set {}, or add a tokenizer_config.json with an eos_token",
        config.dir.string(), dataset, to_string(kind), names.bare_key("eos_token"));
  }

  if (kind == DatasetKind::kLanguageModeling && format.text_field != "text") {
    log::warn(
        "{}: no EOS is appended to the '{}' column ({}): TRL's add_eos appends {} only to a "
        "column named 'text', as zerotune does; end the texts with {} to train it",
        dataset, format.text_field, names.bare_key("dataset_text_field"),
        eos_.empty() ? std::string("the EOS") : "'" + eos_ + "'",
        eos_.empty() ? std::string("one (the tokenizer names no eos_token)") : "it");
  }
  if (opts.prompt_format == PromptFormat::kChat && kind != DatasetKind::kPromptCompletion) {
    fail("{}: chat needs plain-string 'prompt' and 'completion' columns, but {} is {} data{}",
         names.key("prompt_format"), dataset, to_string(kind), names.where("prompt_format"));
  }
  if (opts.completion_only_loss) {
    // TRL 0.25.1 builds a completion mask for prompt/completion rows only, and its collator masks
    // only when one exists: on other data the flag changes nothing there — as here, said once.
    if (*opts.completion_only_loss && !is_prompt_completion(kind))
      log::warn(
          "{}: true has no effect on {} ({} data): it masks the prompt of prompt/completion rows "
          "only, and TRL ignores it on this data too, so every token{} is trained{}",
          names.key("completion_only_loss"), dataset, to_string(kind),
          opts.assistant_only_loss ? " of the assistant turns" : "",
          names.where("completion_only_loss"));
    completion_only_loss_ = *opts.completion_only_loss && is_prompt_completion(kind);
  } else {
    completion_only_loss_ =
        opts.completion_only_loss_from_train.value_or(true) && is_prompt_completion(kind);
  }
  if (opts.assistant_only_loss && !is_conversational(kind)) {
    // SFTTrainer.__init__ checks the train set's row 0 only; an eval set of another kind is
    // tokenised without return_assistant_tokens_mask, so its collator masks no assistant turn.
    if (opts.train_set)
      fail("{}: true needs conversational data (messages), but {} is {} data{}",
           names.key("assistant_only_loss"), dataset, to_string(kind),
           names.where("assistant_only_loss"));
    log::info(
        "{}: true does not apply to {} ({} data, not conversational): TRL checks the train set "
        "alone and scores this set without assistant masks",
        names.key("assistant_only_loss"), dataset, to_string(kind));
    opts_.assistant_only_loss = false;
  }

  const bool needs_template = is_conversational(kind) || opts.prompt_format == PromptFormat::kChat;
  if (!needs_template) return;
  if (opts.chat_template) {
    template_name_ =
        opts.chat_template_name.empty() ? "the chat_template option" : opts.chat_template_name;
    template_.emplace(*opts.chat_template, template_name_);
  } else {
    if (!config.chat_template && config.named_templates.empty()) {
      fail(
          "{}: the tokenizer has no chat template, which {} needs ({}); set "
          "trainer.chat_template_path (a .jinja file, or a tokenizer directory whose chat "
          "template to use){}",
          config.dir.string(),
          is_conversational(kind) ? "conversational data"
                                  : names.bare_key("prompt_format") + ": chat",
          dataset, is_conversational(kind) ? "" : names.where("prompt_format"));
    }
    template_name_ = !config.chat_template_origin.empty() ? config.chat_template_origin
                     : config.chat_template ? fmt::format("{}/tokenizer_config.json:chat_template",
                                                          config.dir.string())
                                            : config.named_templates_origin;
    if (config.chat_template) template_.emplace(*config.chat_template, template_name_);
    for (const auto& [name, source] : config.named_templates) {
      if (name == "tool_use") {
        tool_use_template_.emplace(source, template_name_ + " (tool_use)");
      }
    }
    // Named templates without a "default" one: transformers' get_chat_template renders the rows
    // with tools with "tool_use" and raises at any other row (select_chat_template's error, then).
    if (!template_ && !tool_use_template_) text::select_chat_template(config, false);
  }
  if (opts_.assistant_only_loss) {
    for (const auto* t : {&template_, &tool_use_template_}) {
      if (*t && !(*t)->has_generation_blocks()) {
        fail(
            "{}: the chat template ({}) has no {{% generation %}} … {{% endgeneration %}} "
            "blocks, so assistant tokens cannot be found in {}; use a template that marks "
            "them{}",
            names.key("assistant_only_loss"), template_name_, dataset,
            names.where("assistant_only_loss"));
      }
    }
  }
}

SftFormatter::SftFormatter(SftFormatter&&) noexcept = default;
SftFormatter::~SftFormatter() = default;

text::RenderResult SftFormatter::render(const Json& messages, bool add_generation_prompt,
                                        const SftRow& row) const {
  const bool tool_use = !row.tools.is_null() && tool_use_template_;
  if (!tool_use && !template_) text::select_chat_template(cfg_, false);  // throws: no default
  const text::ChatTemplate& t = tool_use ? *tool_use_template_ : *template_;
  if (row.chat_template_kwargs.is_null()) {
    return t.render(text::chat_template_context(cfg_, messages, row.tools, add_generation_prompt,
                                                opts_.chat_template_kwargs));
  }
  Json kwargs = opts_.chat_template_kwargs;  // the row's keys win (no TRL SFTConfig field)
  for (const auto& [k, v] : row.chat_template_kwargs.items()) kwargs[k] = v;
  return t.render(
      text::chat_template_context(cfg_, messages, row.tools, add_generation_prompt, kwargs));
}

TokenizedExample SftFormatter::format(const SftRow& row) const {
  TokenizedExample ex;
  std::vector<int32_t> prompt_ids;
  std::vector<uint8_t> amask;
  bool has_prompt = false;
  switch (format_.kind) {
    case DatasetKind::kPromptCompletion: {
      std::string prompt = row.prompt;
      std::string completion = row.completion;
      if (opts_.prompt_format == PromptFormat::kChat) {
        Json msgs = Json::array({Json{{"role", "user"}, {"content", prompt}}});
        prompt = render(msgs, true, row).text;
        completion += eos_;
      }
      if (!eos_on_text_column(row) && !ends_with(completion, eos_)) completion += eos_;
      prompt_ids = tok_->encode(prompt, /*add_special_tokens=*/true);
      ex.ids = tok_->encode(prompt + completion, /*add_special_tokens=*/true);
      has_prompt = true;
      break;
    }
    case DatasetKind::kConversationalPromptCompletion: {
      Json all = row.prompt_messages;
      for (const auto& m : row.completion_messages) all.push_back(m);
      const std::string prompt_text = render(row.prompt_messages, true, row).text;
      prompt_ids = tok_->encode(prompt_text, false);
      const text::RenderResult full = render(all, false, row);
      if (opts_.assistant_only_loss) {
        text::Encoding enc = tok_->encode_with_offsets(full.text, false);
        amask = assistant_mask(enc, full, opts_.assistant_mask);
        ex.ids = std::move(enc.ids);
      } else {
        ex.ids = tok_->encode(full.text, false);
      }
      has_prompt = true;
      break;
    }
    case DatasetKind::kLanguageModeling: {
      std::string text = row.completion;
      if (format_.text_field == "text" && !ends_with(text, eos_)) text += eos_;
      ex.ids = tok_->encode(text, /*add_special_tokens=*/true);
      break;
    }
    case DatasetKind::kConversationalLanguageModeling: {
      const text::RenderResult r = render(row.completion_messages, false, row);
      if (opts_.assistant_only_loss) {
        text::Encoding enc = tok_->encode_with_offsets(r.text, false);
        amask = assistant_mask(enc, r, opts_.assistant_mask);
        ex.ids = std::move(enc.ids);
      } else {
        ex.ids = tok_->encode(r.text, false);
      }
      break;
    }
    case DatasetKind::kPreTokenised:  // read by pretokenised_example, never formatted
      fail("pre-tokenised rows are not formatted");
  }
  const size_t n = ex.ids.size();
  ex.targets.assign(n, 1);
  if (has_prompt) {
    // Length of the common prefix of prompt_ids and ids (TRL 1.16's start of the completion).
    const auto common = static_cast<size_t>(
        std::mismatch(prompt_ids.begin(), prompt_ids.begin() + std::min(prompt_ids.size(), n),
                      ex.ids.begin())
            .first -
        prompt_ids.begin());
    ex.prefix_mismatch = common < prompt_ids.size();
    if (completion_only_loss_) {
      const size_t start = opts_.completion_mask == CompletionMask::kPrefix
                               ? common
                               : std::min(prompt_ids.size(), n);
      std::fill_n(ex.targets.begin(), start, uint8_t{0});
    }
  }
  if (opts_.assistant_only_loss) {
    for (size_t t = 0; t < n; ++t) ex.targets[t] &= amask[t];
  }
  return ex;
}

}  // namespace zt::data
