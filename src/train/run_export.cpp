#include "train/run_export.h"

#include <fmt/ranges.h>

#include "core/log.h"
#include "data/chat_template_path.h"

namespace zt::train {

TokenizerSpecialIds run_tokenizer_ids(const TrainArgs& a, const text::Tokenizer& tok,
                                      const text::TokenizerConfig& tc) {
  TokenizerSpecialIds ids;
  std::optional<std::string> eos = tc.eos_token;
  if (a.train_data.eos_token) {
    eos = a.train_data.eos_token;
    ids.eos_origin = EosOrigin::kEosTokenArg;
  }
  if (!a.train_data.chat_template_path.empty()) {
    const data::ChatTemplateOverride t =
        data::load_chat_template_path(a.train_data.chat_template_path, nullptr);
    if (t.from_tokenizer && t.eos_token) {
      eos = t.eos_token;
      ids.eos_origin = EosOrigin::kClonedTemplate;
    }
  }
  auto id = [&](const std::optional<std::string>& s) -> std::optional<int64_t> {
    if (!s) return std::nullopt;
    if (const auto i = tok.token_to_id(*s)) return *i;
    return std::nullopt;
  };
  ids.eos = id(eos);
  ids.bos = id(tc.bos_token);
  ids.pad = id(tc.pad_token ? tc.pad_token : eos);
  return ids;
}

HfExportOptions run_export_options(const TrainArgs& a, const text::Tokenizer& tok,
                                   const text::TokenizerConfig& tc,
                                   const std::filesystem::path& tok_dir, const ModelConfig& mcfg,
                                   bool log) {
  HfExportOptions eo;
  eo.dtype = a.dtype == DType::kBF16 ? DType::kBF16 : DType::kF32;
  eo.tokenizer_dir = tok_dir;
  eo.generation_config = a.model_dir / "generation_config.json";
  eo.tokenizer_ids = run_tokenizer_ids(a, tok, tc);
  // The tokenizer TRL saves beside the model is the one it changed: the template trained with, the
  // EOS it set (see HfExportOptions).
  if (!a.train_data.chat_template_path.empty()) {
    const data::ChatTemplateOverride t =
        data::load_chat_template_path(a.train_data.chat_template_path, nullptr);
    eo.chat_template = t.source;
    if (t.from_tokenizer && t.eos_token && t.eos_token != tc.eos_token) eo.eos_token = t.eos_token;
  }
  if (a.train_data.eos_token && a.train_data.eos_token != tc.eos_token &&
      eo.tokenizer_ids->eos_origin == EosOrigin::kEosTokenArg)
    eo.eos_token = a.train_data.eos_token;
  if (log && (eo.chat_template || eo.eos_token))
    log::info("export: the tokenizer is saved as this run uses it, as TRL saves it:{}{}",
              eo.chat_template ? " chat_template.jinja from " + a.train_data.chat_template_path
                               : std::string(),
              eo.eos_token ? fmt::format("{}eos_token '{}' in tokenizer_config.json",
                                         eo.chat_template ? "; " : " ", *eo.eos_token)
                           : std::string());
  // Read it now, so a bad input file stops the run before step 1 rather than at the first save.
  ModelConfig out = mcfg;
  const GenerationConfigExport g =
      export_generation_config(out, eo.generation_config, eo.tokenizer_ids);
  if (log) {
    const std::string what = g.from_input ? "from " + eo.generation_config.string()
                                          : "derived from config.json (the model has none)";
    const Json none;
    const Json& eos = g.json.contains("eos_token_id") ? g.json["eos_token_id"] : none;
    log::info(
        "export: generation_config.json {} (eos_token_id {}){}", what, eos.dump(),
        g.updated.empty()
            ? std::string()
            : fmt::format("; config.json and generation_config.json get the tokenizer's {}, as "
                          "TRL's SFTTrainer and transformers' Trainer set them",
                          g.updated.dump()));
  }
  return eo;
}

}  // namespace zt::train
