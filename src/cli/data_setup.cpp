#include "cli/data_setup.h"

#include "core/error.h"
#include "io/model_source.h"

namespace zt::cli {

TokenizerBundle load_tokenizer(const RunConfig& cfg) {
  auto name = cfg.get_optional<std::string>("model.tokenizer_name_or_path");
  std::string key = name ? "model.tokenizer_name_or_path" : "model.name_or_path";
  if (!name) name = cfg.get<std::string>("model.name_or_path");
  ModelSource src = resolve_model_source(*name, /*require_config=*/false);
  if (!src.has_tokenizer)
    fail("{}: {} = '{}' resolves to {}, which has no tokenizer.json (set model.tokenizer_name_or_path)",
         cfg.source(), key, *name, src.dir.string());
  return TokenizerBundle{src.dir, text::Tokenizer::load(src.dir / "tokenizer.json"),
                         text::load_tokenizer_config(src.dir)};
}

data::DataOptions data_options(const RunConfig& cfg, const std::string& split) {
  data::DataOptions o;
  o.dataset = cfg.get<std::string>("dataset." + split + ".path");
  o.dataset_text_field = cfg.get<std::string>("trainer.dataset_text_field");
  auto max_len = cfg.get_optional<int64_t>("trainer.max_length");
  if (max_len && *max_len < 0) fail("{}: trainer.max_length must be >= 0 or null, got {}", cfg.source(), *max_len);
  o.max_length = (max_len && *max_len > 0) ? max_len : std::nullopt;
  // TRL: eval_packing (default None) follows packing. zerotune evaluates example by example, so
  // packing the eval set changes only its truncation (the same as without packing).
  o.packing = cfg.get<bool>("trainer.packing");
  o.packing_strategy = cfg.get<std::string>("trainer.packing_strategy");
  o.completion_only_loss = cfg.get_optional<bool>("trainer.completion_only_loss");
  o.assistant_only_loss = cfg.get<bool>("trainer.assistant_only_loss");
  o.eos_token = cfg.get_optional<std::string>("trainer.eos_token");
  o.prompt_format = data::parse_prompt_format(cfg.get<std::string>("dataset.prompt_format"), "dataset.prompt_format");
  o.prefix_mismatch = data::parse_prefix_mismatch(cfg.get<std::string>("trainer.prefix_mismatch"), "trainer.prefix_mismatch");
  o.completion_mask = data::parse_completion_mask(cfg.get<std::string>("dataset.completion_mask"), "dataset.completion_mask");
  o.truncation_mode = data::parse_truncation_mode(cfg.get<std::string>("trainer.truncation_mode"), "trainer.truncation_mode");
  const Json& trainer = cfg.tree().at("trainer");
  if (const auto kw = trainer.find("chat_template_kwargs"); kw != trainer.end() && !kw->is_null()) {
    if (!kw->is_object())
      fail("{}: trainer.chat_template_kwargs must be a mapping of template variables (e.g. "
           "{{enable_thinking: false}}), got {}",
           cfg.source(), kw->dump());
    o.chat_template_kwargs = *kw;
  }
  if (auto p = cfg.get_optional<std::string>("trainer.chat_template_path")) o.chat_template_path = *p;
  if (auto dir = cfg.get_optional<std::string>("dataset.cache_dir")) o.cache_dir = *dir;
  o.num_threads = static_cast<int>(cfg.get<int64_t>("compute.threads"));
  return o;
}

}  // namespace zt::cli
