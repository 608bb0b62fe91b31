// Where a model (and its tokenizer) comes from, as `from_pretrained` resolves `name_or_path`:
// a local directory, or a hub id ("Org/Name") found in the local Hugging Face cache
// ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub). zerotune never downloads.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace zt {

// What the resolved directory holds.
struct ModelSource {
  std::filesystem::path dir;  // directory with config.json (and weights / tokenizer files)
  bool has_weights = false;   // model.safetensors, model.safetensors.index.json, or a file named
                              // by config.json's transformers_weights
  bool has_tokenizer = false; // tokenizer.json present
  // Without has_weights: why the directory is still no config-only model (weight files zerotune
  // does not read, a safetensors shard without its index, an unfinished hub download), a sentence
  // naming the files; empty when it holds no weights of any kind. A model caller fails with it
  // instead of training from scratch.
  std::string weights_problem;
};

// Resolves `name_or_path`. A hub id is looked up as models--Org--Name/snapshots/<refs/main or, with
// no refs/main, the only snapshot> (find_hub_snapshot, whose errors it passes on). Throws
// zt::Error when it is neither an existing directory nor a cached hub id — saying how to download
// it (`huggingface-cli download Org/Name` / `hf download Org/Name`), or when the directory has no
// config.json. Messages call it `what` ("model", "tokenizer"); callers add the config key.
ModelSource resolve_model_source(const std::string& name_or_path, bool require_config = true,
                                 std::string_view what = "model");

// A Hugging Face cache folder as huggingface_hub / datasets find it: $<override_env>, else
// $HF_HOME/<sub>, else $XDG_CACHE_HOME/huggingface/<sub>, else ~/.cache/huggingface/<sub>.
std::filesystem::path hf_cache_dir(const char* override_env, const char* sub);

// The hub cache: hf_cache_dir("HF_HUB_CACHE", "hub").
std::filesystem::path hf_hub_cache_dir();

// True for "Org/Name" (one slash, not a relative path like ./x or ../x).
bool looks_like_hub_id(const std::string& s);

// The snapshot directory of hub repo `id` ("Org/Name") of `repo_type` ("models" or "datasets") in
// the hub cache: <cache>/<repo_type>--Org--Name/snapshots/<refs/main, else the only snapshot>.
// Returns "" when the repo is not cached. Throws zt::Error (naming `what`, the id and the file)
// when refs/main is empty or names a snapshot that is not there (never another snapshot in its
// place), and when there are several snapshots and no refs/main.
std::filesystem::path find_hub_snapshot(const std::string& repo_type, const std::string& id,
                                        const std::string& what);

}  // namespace zt
