// Where a model (and its tokenizer) comes from, as `from_pretrained` resolves `name_or_path`:
// a local directory, or a hub id ("Org/Name") found in the local Hugging Face cache
// ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub). zerotune never downloads.
#pragma once

#include <filesystem>
#include <string>

namespace zt {

// What the resolved directory holds.
struct ModelSource {
  std::filesystem::path dir;  // directory with config.json (and weights / tokenizer files)
  bool has_weights = false;   // model.safetensors or model.safetensors.index.json present
  bool has_tokenizer = false; // tokenizer.json present
};

// Resolves `name_or_path`. A hub id is looked up as models--Org--Name/snapshots/<refs/main or the
// only snapshot>. Throws zt::Error when it is neither an existing directory nor a cached hub id —
// saying how to download it (`huggingface-cli download Org/Name` / `hf download Org/Name`), or
// when the directory has no config.json.
ModelSource resolve_model_source(const std::string& name_or_path, bool require_config = true);

}  // namespace zt
