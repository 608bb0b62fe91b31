// HF chat templates: a Jinja2 subset engine rendering `tokenizer_config.json`'s `chat_template`
// byte-identically to `transformers` `apply_chat_template` (jinja2 with trim_blocks=True,
// lstrip_blocks=True, HF's `tojson`, `raise_exception`, `strftime_now`, `{% generation %}`).
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
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
  // How many of the first generation blocks were rendered before the template output anything:
  // transformers 4.57 records no span for them (its AssistantTracker is not active yet), 5.24
  // does (jinja::Interp::spans_before_output).
  size_t spans_before_output = 0;
};

class ChatTemplate {
 public:
  // Parses `source`. `name` (e.g. "…/tokenizer_config.json:chat_template") is used in errors.
  // Throws zt::Error naming an unsupported construct and its line in the template.
  ChatTemplate(std::string source, std::string name);
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;
  ~ChatTemplate();

  // Renders with `context` (a JSON object) as the template's variables; build it with
  // chat_template_context() to get exactly the variables transformers passes.
  // `raise_exception(msg)` in the template throws zt::Error("<name>: <msg>"); any other failure
  // throws zt::Error("<name>:<line>: <what jinja2 would say>"). Safe to call concurrently.
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
// A directory with tokenizer.json and no tokenizer_config.json gives transformers'
// PreTrainedTokenizerFast defaults: every field unset (special_tokens_map.json and template files
// still read), has_config_file false.
struct TokenizerConfig {
  bool has_config_file = false;              // dir holds tokenizer_config.json
  std::optional<std::string> chat_template;  // the default template's source
  std::optional<std::string> eos_token;
  std::optional<std::string> bos_token;
  std::optional<std::string> pad_token;
  std::optional<bool> add_bos_token;  // as the file gives it (nullopt: absent or null)
  std::optional<bool> add_eos_token;  // as the file gives it (nullopt: absent or null)
  // The class transformers' AutoTokenizer loads, as it picks it: tokenizer_config.json's
  // tokenizer_class, else the directory's config.json's tokenizer_class, else its model_type's
  // (4.57.1's TOKENIZER_MAPPING, for the classes of transformers_tokenizer_class);
  // "LlamaTokenizer", "LlamaTokenizerFast", …. `tokenizer_class_origin` says which
  // ("<dir>/config.json model_type 'mistral'").
  std::optional<std::string> tokenizer_class;
  std::string tokenizer_class_origin;
  std::filesystem::path dir;
  // The other named special tokens transformers passes to templates (special_tokens_map).
  std::optional<std::string> unk_token;
  std::optional<std::string> sep_token;
  std::optional<std::string> cls_token;
  std::optional<std::string> mask_token;
  // Every named template ("default", "tool_use", …) when the config holds a list of
  // {name, template} or the directory has additional_chat_templates/*.jinja (which, with
  // chat_template.jinja, replace the config's list whole, as in transformers); else empty.
  std::vector<std::pair<std::string, std::string>> named_templates;
  // Where the named templates were read from: "<dir>/tokenizer_config.json:chat_template" or
  // "<dir>/additional_chat_templates/".
  std::string named_templates_origin;
  // The file each named special token above was read from, by key: "eos_token" →
  // "<dir>/special_tokens_map.json" where tokenizer_config.json leaves it unset and that file sets
  // it; "the LlamaTokenizerFast default" for a class default (TransformersTokenizerClass). A token
  // set by other means (a test, a caller) has no entry (special_token_file).
  std::map<std::string, std::filesystem::path> token_files;
  // Where the default template was read from, for error messages:
  // "<dir>/chat_template.jinja" or "<dir>/tokenizer_config.json:chat_template".
  std::string chat_template_origin;
};

// What transformers 4.57.1's fast tokenizer classes with default special tokens default to, from
// their `__init__` signatures: the special tokens a config that does not name them gets, whether
// the class rebuilds the post-processor from add_bos_token / add_eos_token
// (`update_post_processor`), and those two flags' defaults.
struct TransformersTokenizerClass {
  std::string_view name;                // without "Fast": "LlamaTokenizer"
  std::string_view bos, eos, unk, pad;  // "" = None
  bool add_bos_token, add_eos_token;
  bool rebuilds_post_processor = true;  // false: tokenizer.json's is kept (Qwen2Tokenizer)
};

// The entry for `tokenizer_class` (with or without "Fast"): LlamaTokenizer, GemmaTokenizer,
// CodeLlamaTokenizer, CohereTokenizer, GPTNeoXTokenizer (which rebuild the post-processor) and
// Qwen2Tokenizer (eos / unk / pad "<|endoftext|>", no BOS); nullptr for any other class
// (PreTrainedTokenizerFast, GPT2Tokenizer, …, which keep tokenizer.json's post-processor and have
// no default tokens).
const TransformersTokenizerClass* transformers_tokenizer_class(std::string_view tokenizer_class);

// For messages about the named special token `key` ("eos_token", …): the file it was read from
// (cfg.token_files), else <dir>/tokenizer_config.json, the file that holds such tokens.
std::filesystem::path special_token_file(const TokenizerConfig& cfg, const std::string& key);

// Reads `dir/tokenizer_config.json` (optional when `dir` has tokenizer.json: see TokenizerConfig)
// plus the optional template files and special_tokens_map.json. Throws zt::Error naming the file
// for malformed JSON or wrong field types, and when `dir` has neither tokenizer_config.json nor
// tokenizer.json.
TokenizerConfig load_tokenizer_config(const std::filesystem::path& dir);

// The text of a Jinja template file (chat_template.jinja, additional_chat_templates/*.jinja,
// trainer.chat_template_path). Errors: the file cannot be opened; a byte that is not UTF-8 (named
// with its line and offset: transformers reads templates as UTF-8 and fails there too).
std::string read_template_file(const std::filesystem::path& p);

// The template transformers' `get_chat_template` picks: the "tool_use" named template when
// `has_tools` and it exists, else the default one. Throws zt::Error when there is none: named
// templates without a "default" one give transformers' "multiple chat templates with no default
// specified" with the sorted names, naming where they were read (named_templates_origin); no
// template at all names the directory.
const std::string& select_chat_template(const TokenizerConfig& cfg, bool has_tools);

// The chat templates of `cfg` by name, as transformers holds them after loading and its
// save_pretrained writes them (tokenization_utils_base.py save_chat_templates): the named
// templates when there are several (cfg.named_templates: "default" when there is one, "tool_use",
// …), else the one template as "default"; empty when there is none.
std::vector<std::pair<std::string, std::string>> chat_templates_by_name(const TokenizerConfig& cfg);

// The template variables of transformers' `apply_chat_template(messages, tools=…,
// add_generation_prompt=…, **extra)` (transformers 5.x `render_jinja_template`): the special
// tokens that are set (bos/eos/unk/sep/pad/cls/mask_token), `extra` (overriding them), `messages`
// with None-valued keys dropped and `reasoning_content` / `thinking` filled from one another
// (`_alias_reasoning_fields`), `tools` (null when not given), `documents` (null) and
// `add_generation_prompt`. Throws zt::Error when `messages` is not a non-empty list of objects
// (transformers refuses an empty conversation) or `extra` repeats one of the named arguments.
Json chat_template_context(const TokenizerConfig& cfg, const Json& messages, const Json& tools,
                           bool add_generation_prompt, const Json& extra = Json::object());

}  // namespace zt::text
