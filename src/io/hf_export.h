// Export of a trained model as an HF model directory loadable by transformers
// (`AutoModelForCausalLM.from_pretrained(dir)`), as `save_pretrained` + tokenizer `save_pretrained`
// lay it out (DESIGN §9):
//   config.json, generation_config.json, model.safetensors or model-0000i-of-0000N.safetensors +
//   model.safetensors.index.json (above max_shard_size), and the tokenizer files.
// Everything is written into a temporary sibling directory which is renamed into place at the end,
// so the output directory is either absent/old or complete.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/file_util.h"
#include "io/model_config.h"
#include "io/safetensors.h"

namespace zt {

// Tokenizer files copied from HfExportOptions::tokenizer_dir when present there (others skipped).
inline constexpr const char* kTokenizerFiles[] = {"tokenizer.json",
                                                  "tokenizer_config.json",
                                                  "special_tokens_map.json",
                                                  "chat_template.jinja",
                                                  "vocab.json",
                                                  "merges.txt",
                                                  "added_tokens.json"};

struct HfExportOptions {
  // File dtype of the floating-point weights: kBF16 (F32/F16 inputs rounded RNE) or kF32.
  // config.json's dtype field is set to "bfloat16" / "float32" accordingly.
  DType dtype = DType::kBF16;
  // Shard above this many bytes (HF `max_shard_size`, decimal "5GB").
  size_t max_shard_size = kDefaultMaxShardSize;
  // Directory to copy kTokenizerFiles from ("" = none).
  fs::path tokenizer_dir;
  // generation_config.json to export (the input model directory's, as transformers'
  // save_pretrained writes the generation config it loaded); "" or missing file = derive it with
  // generation_config_json(cfg). See export_generation_config().
  fs::path generation_config;
  // The EOS id the training ended completions with (the tokenizer's EOS); added to the exported
  // eos_token_id when it is not among it. Unset: the generation config is exported as it is.
  std::optional<int64_t> trained_eos_token_id;
  // Replace an existing output directory (else zt::Error naming it).
  bool overwrite = true;
};

// The generation_config.json an export writes, and how it came about.
struct GenerationConfigExport {
  std::string text;         // the file's bytes
  Json json;                // the same, parsed
  bool from_input = false;  // read from HfExportOptions::generation_config (else derived)
  bool eos_added = false;   // trained_eos_token_id was added to eos_token_id
};

// generation_config.json for an export of `cfg`: the file `input` when it exists (else
// generation_config_json(cfg)), with `trained_eos` put first in its eos_token_id when it is not
// already there — transformers' `Trainer._align_special_tokens` prepends the tokenizer's EOS to the
// generation config's list the same way (it keeps the others: any of them stops generation), e.g.
// eos 151643 + trained 151645 -> [151645, 151643]; a list that has it stays as it is. Unchanged
// input is copied byte for byte; a changed one is written with sorted keys, indent 2 + "\n"
// (transformers' `to_json_string`). Throws zt::Error naming `input` for bad JSON, a non-object, or
// an eos_token_id that is not null, an id or a list of ids.
GenerationConfigExport export_generation_config(const ModelConfig& cfg, const fs::path& input,
                                                std::optional<int64_t> trained_eos);

// What export_hf_model() wrote.
struct HfExportResult {
  std::vector<std::string> files;  // every file name in the output directory, sorted
  size_t weight_bytes = 0;         // total_size of the weights as stored
};

// Writes the HF model directory `out_dir`. `tensors` are the HF-named weights
// ("model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", …, "lm_head.weight" only
// when untied) in state_dict order (it decides the shard split), host memory, F32 or BF16 (or F16).
// Throws zt::Error for an options.dtype other than kBF16/kF32, a non-float tensor asked to be
// converted, an unreadable tokenizer file, or any write failure (the temp directory is removed and
// `out_dir` untouched).
HfExportResult export_hf_model(const fs::path& out_dir, const ModelConfig& cfg,
                               std::span<const NamedTensor> tensors,
                               const HfExportOptions& options = {});

}  // namespace zt
