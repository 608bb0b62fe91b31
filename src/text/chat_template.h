// HF chat templates: a Jinja2 subset engine rendering `tokenizer_config.json`'s `chat_template`
// byte-identically to `transformers` `apply_chat_template` (jinja2 with trim_blocks=True,
// lstrip_blocks=True, HF's `tojson`, `raise_exception`, `strftime_now`, `{% generation %}`).
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/json.h"

namespace zt::text {

// Output of one render: the text, and the [begin, end) byte ranges produced inside
// `{% generation %}` … `{% endgeneration %}` blocks (used for assistant-only loss masks).
struct RenderResult {
  std::string text;
  std::vector<std::pair<size_t, size_t>> generation_spans;
};

class ChatTemplate {
 public:
  // Parses `source`. `name` (e.g. "…/tokenizer_config.json:chat_template") is used in errors.
  // Throws zt::Error naming an unsupported construct and its line in the template.
  ChatTemplate(std::string source, std::string name);
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;
  ~ChatTemplate();

  // Renders with `context` as the template's variables (transformers passes `messages`, `tools`
  // (when given), `add_generation_prompt`, `bos_token`, `eos_token`, and any extra kwargs).
  // `raise_exception(msg)` in the template throws zt::Error("<name>: <msg>").
  RenderResult render(const Json& context) const;
  // True when the template contains a `{% generation %}` block.
  bool has_generation_blocks() const;
  const std::string& source() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// What zerotune needs from an HF tokenizer directory's `tokenizer_config.json` (and
// `chat_template.jinja` / `chat_template.json` when present, which take precedence, as in
// transformers). Token fields may be strings or AddedToken objects `{"content": …}`; null → unset.
struct TokenizerConfig {
  std::optional<std::string> chat_template;  // the default template's source
  std::optional<std::string> eos_token;
  std::optional<std::string> bos_token;
  std::optional<std::string> pad_token;
  bool add_bos_token = false;
  std::filesystem::path dir;
};

// Reads `dir/tokenizer_config.json` (required) plus the optional template files. Throws zt::Error
// naming the file for malformed JSON or wrong field types.
TokenizerConfig load_tokenizer_config(const std::filesystem::path& dir);

}  // namespace zt::text
