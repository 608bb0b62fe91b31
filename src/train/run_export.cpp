#include "train/run_export.h"

#include <fmt/ranges.h>

#include "core/log.h"
#include "data/chat_template_path.h"

namespace zt::train {

namespace {

// The tokenizer as the run uses it (TRL 1.16's SFTTrainer): the EOS (trainer.eos_token, then a
// cloned template's, else tokenizer_config.json's) and where it came from, and the chat template
// trainer.chat_template_path gives (unset: the tokenizer's own). Read once for the ids and the
// exported files alike.
struct RunTokenizer {
  std::optional<std::string> eos;
  EosOrigin eos_origin = EosOrigin::kTokenizer;
  std::optional<std::string> chat_template;
};

RunTokenizer run_tokenizer(const TrainArgs& a, const text::TokenizerConfig& tc) {
  RunTokenizer r;
  r.eos = tc.eos_token;
  if (a.train_data.eos_token) {
    r.eos = a.train_data.eos_token;
    r.eos_origin = EosOrigin::kEosTokenArg;
  }
  if (!a.train_data.chat_template_path.empty()) {
    data::ChatTemplateOverride t =
        data::load_chat_template_path(a.train_data.chat_template_path, nullptr);
    if (t.from_tokenizer && t.eos_token) {
      r.eos = t.eos_token;
      r.eos_origin = EosOrigin::kClonedTemplate;
    }
    r.chat_template = std::move(t.source);
  }
  return r;
}

TokenizerSpecialIds special_ids(const RunTokenizer& r, const text::Tokenizer& tok,
                                const text::TokenizerConfig& tc) {
  TokenizerSpecialIds ids;
  ids.eos_origin = r.eos_origin;
  auto id = [&](const std::optional<std::string>& s) -> std::optional<int64_t> {
    if (!s) return std::nullopt;
    if (const auto i = tok.token_to_id(*s)) return *i;
    return std::nullopt;
  };
  ids.eos = id(r.eos);
  ids.bos = id(tc.bos_token);
  // The tokenizer's pad token only, as TRL 0.25.1 + transformers 4.57.1 export (config.json keeps
  // what it had). TRL 1.16 writes the EOS there when the tokenizer has no pad token, which
  // transformers' models (and zerotune) read as the embedding's padding_idx: a further fine-tune
  // of the export would train no input embedding of the EOS.
  ids.pad = id(tc.pad_token);
  return ids;
}

}  // namespace

TokenizerSpecialIds run_tokenizer_ids(const TrainArgs& a, const text::Tokenizer& tok,
                                      const text::TokenizerConfig& tc) {
  return special_ids(run_tokenizer(a, tc), tok, tc);
}

HfExportOptions run_export_options(const TrainArgs& a, const text::Tokenizer& tok,
                                   const text::TokenizerConfig& tc,
                                   const std::filesystem::path& tok_dir, const ModelConfig& mcfg,
                                   bool log) {
  HfExportOptions eo;
  eo.dtype = a.export_dtype;
  if (log)
    log::info(
        "export: final/ and checkpoint-N/ hold the fp32 master weights as {}, as TRL saves its "
        "model's parameters ({})",
        a.export_dtype == DType::kBF16 ? "bfloat16" : "float32",
        a.export_dtype == DType::kBF16
            ? "DeepSpeed with bf16 casts them, or the model is loaded in bfloat16"
            : "no DeepSpeed bf16 cast: transformers' default load dtype");
  eo.tokenizer_dir = tok_dir;
  eo.generation_config = a.model_dir / "generation_config.json";
  RunTokenizer rt = run_tokenizer(a, tc);
  eo.tokenizer_ids = special_ids(rt, tok, tc);
  // The tokenizer TRL saves beside the model is the one it changed: the template trained with, the
  // EOS it set; its templates as save_pretrained writes them (see HfExportOptions).
  if (rt.chat_template)
    eo.chat_templates = {{"default", std::move(*rt.chat_template)}};
  else
    eo.chat_templates = text::chat_templates_by_name(tc);
  check_chat_template_names(eo, tc.named_templates_origin);
  if (rt.eos_origin != EosOrigin::kTokenizer && rt.eos != tc.eos_token) eo.eos_token = rt.eos;
  const bool own_template = !a.train_data.chat_template_path.empty();
  if (log && (own_template || eo.eos_token))
    log::info("export: the tokenizer is saved as this run uses it, as TRL saves it:{}{}",
              own_template ? " chat_template.jinja from " + a.train_data.chat_template_path
                           : std::string(),
              eo.eos_token ? fmt::format("{}eos_token '{}' in tokenizer_config.json",
                                         own_template ? "; " : " ", *eo.eos_token)
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
