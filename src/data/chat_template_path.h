// TRL's `chat_template_path` (SFTConfig): the chat template that replaces the tokenizer's, read
// from a Jinja file or cloned from another tokenizer (TRL `clone_chat_template`).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "data/data_options.h"
#include "text/tokenizer.h"

namespace zt::data {

// The template `chat_template_path` names, and what else it changes.
struct ChatTemplateOverride {
  std::string source;                    // the Jinja template
  std::string origin;                    // where it came from, for errors and logs
  std::optional<std::string> eos_token;  // a tokenizer's EOS (TRL sets it), else unset
  bool from_tokenizer = false;           // cloned from a tokenizer directory
};

// Resolves `path` as TRL 1.16 does:
// - an existing file ending in .jinja or .j2: its text is the template (nothing else changes);
// - otherwise a tokenizer: a local directory or a hub id in the local HF cache
//   (resolve_model_source). Its default chat template (`chat_template.jinja` or
//   tokenizer_config.json's) is the template and its `eos_token` becomes the EOS, as
//   `clone_chat_template` sets it (so it wins over trainer.eos_token, which TRL applies first).
//   TRL also adds the source's added tokens missing from the model's tokenizer and resizes the
//   embeddings: zerotune does neither, so (when `tokenizer` is given) a source whose added tokens
//   or EOS `tokenizer` lacks is refused.
// Throws zt::Error naming `key`, the path and the reason: not found, a file that is not
// .jinja/.j2, an empty (or whitespace-only) template file, a tokenizer without a chat template,
// the missing tokens.
ChatTemplateOverride load_chat_template_path(const std::string& path,
                                             const text::Tokenizer* tokenizer,
                                             std::string_view key = "chat_template_path");

// `opts` with chat_template_path (when set) resolved by load_chat_template_path into
// chat_template, chat_template_name and (from a tokenizer) eos_token, and cleared. `tokenizer`
// as above. Throws as load_chat_template_path, or when chat_template is also set.
DataOptions with_chat_template_path(DataOptions opts, const text::Tokenizer* tokenizer);

}  // namespace zt::data
