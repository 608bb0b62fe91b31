// Export of a trained model as an HF model directory loadable by transformers
// (`AutoModelForCausalLM.from_pretrained(dir)`), as `save_pretrained` + tokenizer `save_pretrained`
// lay it out (DESIGN §9):
//   config.json, generation_config.json, model.safetensors or model-0000i-of-0000N.safetensors +
//   model.safetensors.index.json (above max_shard_size), and the tokenizer files.
// Everything is written into a temporary sibling directory which is renamed into place at the end,
// so the output directory is either absent/old or complete. An output directory that holds other
// things than a model export (checkpoints, the user's files) is not replaced: the files are staged
// in a directory inside it and moved into it one rename each (weights first, config.json last), and
// an earlier export's weight files that this one lacks are removed, as save_pretrained does.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/file_util.h"
#include "io/model_config.h"
#include "io/safetensors.h"

namespace zt {

// Tokenizer files copied from HfExportOptions::tokenizer_dir when present there (others skipped;
// chat_template.jinja only where HfExportOptions::chat_templates is unset).
// tokenizer.model: the SentencePiece model of Llama/Gemma/Mistral-style tokenizers, which
// transformers' tokenizer save_pretrained writes too (slow tokenizers and GGUF converters read it).
inline constexpr const char* kTokenizerFiles[] = {"tokenizer.json",
                                                  "tokenizer_config.json",
                                                  "special_tokens_map.json",
                                                  "chat_template.jinja",
                                                  "vocab.json",
                                                  "merges.txt",
                                                  "added_tokens.json",
                                                  "tokenizer.model"};

// The directory of the named chat templates other than "default" in an HF tokenizer directory
// (transformers' CHAT_TEMPLATE_DIR): <name>.jinja each.
inline constexpr const char* kAdditionalChatTemplatesDir = "additional_chat_templates";

// How the trained EOS got into the tokenizer (TRL 1.16 SFTTrainer), which decides how TRL puts it
// into the configs (align_special_token_ids()).
enum class EosOrigin : uint8_t {
  kTokenizer,       // tokenizer_config.json's eos_token
  kEosTokenArg,     // SFTConfig.eos_token (trainer.eos_token)
  kClonedTemplate,  // chat_template_path naming a tokenizer (clone_chat_template)
};

// The special token ids of the tokenizer a model was trained with; unset: the tokenizer has none.
struct TokenizerSpecialIds {
  std::optional<int64_t> eos, bos, pad;  // pad: the tokenizer's pad_token (none: left as it was)
  EosOrigin eos_origin = EosOrigin::kTokenizer;
};

struct HfExportOptions {
  // File dtype of the floating-point weights: kBF16 (F32/F16 inputs rounded RNE) or kF32.
  // config.json's dtype field is set to "bfloat16" / "float32" accordingly.
  DType dtype = DType::kBF16;
  // Shard above this many bytes (HF `max_shard_size`, decimal "5GB").
  size_t max_shard_size = kDefaultMaxShardSize;
  // Directory to copy kTokenizerFiles from ("" = none).
  fs::path tokenizer_dir;
  // The tokenizer's chat templates as the run holds them, (name, source) — "default" and the
  // named ones ("tool_use", …) as transformers loads them (text::TokenizerConfig), or the one the
  // run trained with in their place (SFTConfig.chat_template_path, which TRL sets as
  // tokenizer.chat_template: a single "default"). Written as transformers 4.57.1's tokenizer
  // save_pretrained (save_chat_templates, which TRL's save_model calls) writes them: "default" as
  // chat_template.jinja, every other name as additional_chat_templates/<name>.jinja, and
  // tokenizer_config.json's own "chat_template" removed; no template file is copied from
  // tokenizer_dir then. Unset: chat_template.jinja and additional_chat_templates/*.jinja are
  // copied as they are.
  std::optional<std::vector<std::pair<std::string, std::string>>> chat_templates;
  // An EOS token in place of the tokenizer's (SFTConfig.eos_token, or a cloned template's), set as
  // tokenizer_config.json's and special_tokens_map.json's "eos_token"; unset: as they are.
  std::optional<std::string> eos_token;
  // generation_config.json to export (the input model directory's, as transformers'
  // save_pretrained writes the generation config it loaded); "" or missing file = derive it with
  // generation_config_json(cfg). See export_generation_config().
  fs::path generation_config;
  // The tokenizer's special token ids the exported config.json and generation_config.json are
  // aligned with (see align_special_token_ids()); unset: both are exported as they are.
  std::optional<TokenizerSpecialIds> tokenizer_ids;
  // Further files written with the model, (name, bytes): the run's final trainer_state.json
  // (`trainer.save_state()`), so it lands with the model — renamed into place with it, and an
  // earlier export's copy counts as the export's own (see is_export_file), not as a user's file.
  std::vector<std::pair<std::string, std::string>> extra_files;
  // Replace an existing output directory (else zt::Error naming it).
  bool overwrite = true;
};

// Throws zt::Error naming `origin` when a name of options.chat_templates other than "default"
// cannot be a file name in additional_chat_templates/ (empty, ".", "..", a '/' or a NUL):
// export_hf_model() would fail there; a run checks it before step 1.
void check_chat_template_names(const HfExportOptions& options, const std::string& origin);

// The generation_config.json an export writes, and how it came about.
struct GenerationConfigExport {
  std::string text;               // the file's bytes
  Json json;                      // the same, parsed
  bool from_input = false;        // read from HfExportOptions::generation_config (else derived)
  Json updated = Json::object();  // {"eos_token_id": 151645, …}: what the alignment changed
};

// Aligns the special token ids of `cfg` (config.json) and `generation` (generation_config.json, an
// object) with the tokenizer's, as a TRL 1.16 SFTTrainer run with transformers 5.24 leaves them:
// 1. TRL, by tok.eos_origin: kEosTokenArg (SFTConfig.eos_token) sets cfg's eos to the id and puts
// it
//    first in generation's eos list unless there; kClonedTemplate (clone_chat_template) sets both
//    to the single id; then TRL sets cfg's and generation's pad to tok.pad (when the tokenizer
//    has a pad token: TRL 1.16 falls back to the EOS, TRL 0.25.1 sets none);
// 2. transformers `align_special_tokens` (Trainer.train): for eos, bos and pad that the tokenizer
//    defines, when the id is not among cfg's ids or not among generation's, cfg gets it (eos: put
//    first in a list cfg already has) and generation gets it (eos: first in its list, the others
//    kept, none twice — any of them stops generation).
// E.g. config eos 151643 + generation [151645, 151643] + trained EOS 151645 -> config 151645,
// generation unchanged; generation 151643 -> [151645, 151643]. Returns {name: id} of what changed
// (in either). Throws zt::Error naming `origin` for an id field of generation that is not null, an
// id or a list of ids.
Json align_special_token_ids(ModelConfig& cfg, Json& generation, const TokenizerSpecialIds& tok,
                             const std::string& origin);

// generation_config.json for an export of `cfg`: the file `input` when it exists (else
// generation_config_json(cfg)), aligned with `tok` (align_special_token_ids(), which also updates
// `cfg`, the config.json to export) when given. An input the alignment leaves as it was is copied
// byte for byte; a changed one is written with sorted keys, indent 2 + "\n" (transformers'
// `to_json_string`; the input's transformers_version is kept). Throws zt::Error naming `input` for
// bad JSON, a non-object, or an id field that is not null, an id or a list of ids.
GenerationConfigExport export_generation_config(ModelConfig& cfg, const fs::path& input,
                                                const std::optional<TokenizerSpecialIds>& tok);

// What export_hf_model() wrote.
struct HfExportResult {
  std::vector<std::string> files;  // every file name in the output directory, sorted
  size_t weight_bytes = 0;         // total_size of the weights as stored
};

// Cleans up after an export to `out_dir` whose process was killed before it could
// (core/file_util.h clean_stale_staging_dirs, beside out_dir and inside it): the model is built in
// "<out_dir>.tmp.<pid>.<hex>", or in "<out_dir>/.zerotune-export.tmp.<pid>.<hex>" when out_dir
// holds other files; a replaced out_dir waits in "<out_dir>.old.<pid>.<hex>" between the two
// renames of the commit. Only those of processes that no longer run on this host; each removal or
// restore gets an info line naming it. export_hf_model() calls it first; a run calls it at
// start-up for its output_dir. Throws zt::Error naming a directory it cannot remove or restore.
std::vector<StaleStaging> clean_stale_export_dirs(const fs::path& out_dir);

// Writes the HF model directory `out_dir`. `tensors` are the HF-named weights
// ("model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", …, "lm_head.weight" only
// when untied) in state_dict order (it decides the shard split), host memory, F32 or BF16 (or F16).
// Throws zt::Error for an options.dtype other than kBF16/kF32, a non-float tensor asked to be
// converted, an unreadable tokenizer file, or any write failure (the temp directory is removed and
// `out_dir` untouched). First cleans up after a killed export (clean_stale_export_dirs).
HfExportResult export_hf_model(const fs::path& out_dir, const ModelConfig& cfg,
                               std::span<const NamedTensor> tensors,
                               const HfExportOptions& options = {});

}  // namespace zt
