#include "text/special_tokens.h"

#include <fmt/format.h>

#include <array>

#include "core/error.h"
#include "core/log.h"

namespace zt::text {
namespace {

using NamedToken = std::pair<const char*, const std::optional<std::string>*>;

// transformers' SPECIAL_TOKENS_ATTRIBUTES order.
std::array<NamedToken, 7> named_tokens(const TokenizerConfig& cfg) {
  return {{{"bos_token", &cfg.bos_token},
           {"eos_token", &cfg.eos_token},
           {"unk_token", &cfg.unk_token},
           {"sep_token", &cfg.sep_token},
           {"pad_token", &cfg.pad_token},
           {"cls_token", &cfg.cls_token},
           {"mask_token", &cfg.mask_token}}};
}

}  // namespace

std::vector<RegisteredSpecialToken> register_config_special_tokens(Tokenizer& tok,
                                                                   const TokenizerConfig& cfg,
                                                                   bool log) {
  const auto named = named_tokens(cfg);
  std::vector<RegisteredSpecialToken> out;
  for (const auto& [key, value] : named) {
    if (!*value || (*value)->empty()) continue;
    const std::string& content = **value;
    const Tokenizer::AddResult a = tok.add_special_token(content);
    if (!a.added) continue;
    RegisteredSpecialToken r{key, content, a.id, a.new_id};
    if (a.new_id && log)
      log::warn(
          "{}: {} '{}' is not a token of tokenizer.json; added as a special token with id {}, as "
          "transformers does (the model's vocab_size must have room for it)",
          special_token_file(cfg, key).string(), key, content, a.id);
    out.push_back(std::move(r));
  }
  return out;
}

bool apply_config_post_processor(Tokenizer& tok, const TokenizerConfig& cfg) {
  const TransformersTokenizerClass* d =
      cfg.tokenizer_class ? transformers_tokenizer_class(*cfg.tokenizer_class) : nullptr;
  if (d == nullptr || !d->rebuilds_post_processor) return false;
  // load_tokenizer_config filled the class's default tokens; unset here means an explicit null.
  const auto id_of = [&](const char* flag, bool given, const char* key,
                         const std::optional<std::string>& t) {
    if (!t || t->empty())
      fail("{}: {} is true{} but {} is null; transformers raises here too",
           (cfg.dir / "tokenizer_config.json").string(), flag,
           given ? "" : fmt::format(" (the {} default)", *cfg.tokenizer_class), key);
    const std::optional<int32_t> id = tok.token_to_id(*t);
    if (!id)
      fail("{}: {} '{}' is not a token of the tokenizer", special_token_file(cfg, key).string(),
           key, *t);
    return *id;
  };
  std::optional<int32_t> bos, eos;
  if (cfg.add_bos_token.value_or(d->add_bos_token))
    bos = id_of("add_bos_token", cfg.add_bos_token.has_value(), "bos_token", cfg.bos_token);
  if (cfg.add_eos_token.value_or(d->add_eos_token))
    eos = id_of("add_eos_token", cfg.add_eos_token.has_value(), "eos_token", cfg.eos_token);
  tok.set_special_tokens_template(bos, eos);
  return true;
}

std::string describe_token(const Tokenizer& tok, const TokenizerConfig& cfg, int32_t id) {
  if (id < 0 || id >= tok.vocab_size()) return "not a token of the tokenizer";
  std::string text;
  try {
    text = tok.id_to_token(id);
  } catch (const Error&) {
    return "not a token of the tokenizer";
  }
  const auto named = named_tokens(cfg);
  for (const auto& [key, value] : named)
    if (*value && **value == text)
      return fmt::format("'{}', the {} of {}", text, key, special_token_file(cfg, key).string());
  return fmt::format("'{}'", text);
}

}  // namespace zt::text
