// chat_template_path: TRL SFTTrainer.__init__ (a .jinja/.j2 file replaces the template) and
// `clone_chat_template` (a tokenizer's template and EOS), without the embedding resize.
#include "data/chat_template_path.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "core/error.h"
#include "core/file_util.h"
#include "core/log.h"
#include "io/json.h"
#include "io/json_check.h"
#include "io/model_source.h"
#include "text/chat_template.h"

namespace zt::data {
namespace fs = std::filesystem;

namespace {

bool is_template_file(const fs::path& p) {
  std::error_code ec;
  const std::string ext = p.extension().string();
  return fs::is_regular_file(p, ec) && (ext == ".jinja" || ext == ".j2");
}

}  // namespace

ChatTemplateOverride load_chat_template_path(const std::string& path,
                                             const text::Tokenizer* tokenizer,
                                             std::string_view key) {
  ChatTemplateOverride out;
  if (is_template_file(path)) {
    out.source = text::read_template_file(path);
    if (out.source.find_first_not_of(" \t\r\n\f\v") == std::string::npos) {
      fail(
          "{}: the chat template file '{}' is empty or only whitespace; expected a Jinja chat "
          "template",
          key, path);
    }
    out.origin = path;
    return out;
  }
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    fail(
        "{}: '{}' is a file but not a Jinja template (.jinja or .j2); expected a template file or "
        "a tokenizer directory",
        key, path);
  }
  ModelSource src;
  try {
    src = resolve_model_source(path, /*require_config=*/false);
  } catch (const Error& e) {
    fail("{}: '{}' is neither a .jinja/.j2 file nor a tokenizer: {}", key, path, e.what());
  }
  const text::TokenizerConfig cfg = text::load_tokenizer_config(src.dir);
  if (!cfg.chat_template) {
    if (!cfg.named_templates.empty()) {
      try {  // TRL's clone_chat_template calls get_chat_template(): its no-default error
        text::select_chat_template(cfg, false);
      } catch (const Error& e) {
        fail("{}: {}", key, e.what());
      }
    }
    fail("{}: the tokenizer in {} has no chat template", key, src.dir.string());
  }
  out.source = *cfg.chat_template;
  out.origin = cfg.chat_template_origin.empty()
                   ? (src.dir / "tokenizer_config.json").string() + ":chat_template"
                   : cfg.chat_template_origin;
  out.eos_token = cfg.eos_token;
  out.from_tokenizer = true;
  if (tokenizer == nullptr) return out;
  // TRL adds the source's added tokens that the tokenizer lacks (new ids, resized embeddings).
  std::vector<std::string> missing;
  if (src.has_tokenizer) {
    const fs::path tj = src.dir / "tokenizer.json";
    // nlohmann::json, not the ordered Json: 151k vocab keys would be slow in an ordered map.
    const std::string text = read_file(tj);
    check_json_text(text, tj.string());
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) fail("{}: {} is not valid JSON", key, tj.string());
    if (const auto it = j.find("added_tokens"); it != j.end() && it->is_array()) {
      for (const auto& t : *it) {
        if (!t.is_object() || !t.contains("content") || !t["content"].is_string()) continue;
        const std::string& content = t["content"].get_ref<const std::string&>();
        if (!tokenizer->token_to_id(content)) missing.push_back(content);
      }
    }
  }
  if (out.eos_token && !tokenizer->token_to_id(*out.eos_token) &&
      std::find(missing.begin(), missing.end(), *out.eos_token) == missing.end()) {
    missing.push_back(*out.eos_token);
  }
  if (!missing.empty()) {
    fail(
        "{}: the tokenizer in {} has tokens the model's tokenizer lacks ({}); TRL would add them "
        "and resize the model's embeddings, which zerotune does not do. Use a tokenizer whose "
        "tokens the model has, or a .jinja template that uses only existing tokens",
        key, src.dir.string(), fmt::join(missing, ", "));
  }
  return out;
}

DataOptions with_chat_template_path(DataOptions opts, const text::Tokenizer* tokenizer) {
  if (opts.chat_template_path.empty()) return opts;
  if (opts.chat_template) {
    fail("chat_template_path ('{}') and a chat_template source are both set; give one",
         opts.chat_template_path);
  }
  ChatTemplateOverride t = load_chat_template_path(opts.chat_template_path, tokenizer);
  opts.chat_template = std::move(t.source);
  opts.chat_template_name = std::move(t.origin);
  if (t.from_tokenizer) {
    if (t.eos_token) opts.eos_token = t.eos_token;
    if (tokenizer != nullptr) {
      log::warn(
          "chat_template_path: using the chat template and EOS of {}; TRL's clone_chat_template "
          "would also resize the model's embeddings to the tokenizer's size rounded up to a "
          "multiple of 64, which zerotune does not (the softmax keeps the model's vocabulary)",
          opts.chat_template_path);
    }
  }
  opts.chat_template_path.clear();
  return opts;
}

}  // namespace zt::data
