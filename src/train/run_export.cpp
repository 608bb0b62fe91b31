#include "train/run_export.h"

#include <fmt/ranges.h>

#include "core/log.h"
#include "data/chat_template_path.h"

namespace zt::train {

std::optional<std::string> trained_eos_token(const TrainArgs& a, const text::TokenizerConfig& tc) {
  std::optional<std::string> eos = a.train_data.eos_token;
  if (!a.train_data.chat_template_path.empty()) {
    const data::ChatTemplateOverride t =
        data::load_chat_template_path(a.train_data.chat_template_path, nullptr);
    if (t.from_tokenizer && t.eos_token) eos = t.eos_token;
  }
  if (!eos) eos = tc.eos_token;
  return eos;
}

HfExportOptions run_export_options(const TrainArgs& a, const text::Tokenizer& tok,
                                   const text::TokenizerConfig& tc,
                                   const std::filesystem::path& tok_dir, const ModelConfig& mcfg,
                                   bool log) {
  HfExportOptions eo;
  eo.dtype = a.dtype == DType::kBF16 ? DType::kBF16 : DType::kF32;
  eo.tokenizer_dir = tok_dir;
  eo.generation_config = a.model_dir / "generation_config.json";
  const std::optional<std::string> eos = trained_eos_token(a, tc);
  if (eos)
    if (const auto id = tok.token_to_id(*eos)) eo.trained_eos_token_id = *id;
  // Read it now, so a bad input file stops the run before step 1 rather than at the first save.
  const GenerationConfigExport g =
      export_generation_config(mcfg, eo.generation_config, eo.trained_eos_token_id);
  if (log) {
    const std::string what = g.from_input ? eo.generation_config.string()
                                          : "a generation config derived from config.json";
    const Json& ids = g.json.contains("eos_token_id") ? g.json["eos_token_id"] : Json();
    if (g.eos_added)
      log::info(
          "export: generation_config.json is {} with eos_token_id {} ({} '{}', the EOS the "
          "completions are trained to end with, added as transformers' Trainer does)",
          what, ids.dump(), *eo.trained_eos_token_id, *eos);
    else
      log::info("export: generation_config.json is {} (eos_token_id {})", what, ids.dump());
  }
  return eo;
}

}  // namespace zt::train
